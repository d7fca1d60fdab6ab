/*!
Importer for Dinero III/IV `din` text traces: one access per line, `label address [size]`.

```text
2 400d7d4        instruction fetch (label 2), hex address
0 7ff000398 8    data read (label 0) of 8 bytes
1 0x4d8f018      data write (label 1); a 0x prefix is accepted
```
Labels: 0 read, 1 write, 2 instruction fetch, 3 escape (Dinero: "unknown access type"), 4 escape
(Dinero: "flush the cache"). Records labelled 3 and 4 are skipped: a cachecolor record has no
unknown kind, and a cache flush is not a memory reference. The size is decimal and defaults to
4 bytes (Dinero's default) when absent. As in Dinero, text after the address that does not look
like a size (does not start with a digit) is a comment and ignored; a third field that starts
with a digit must be a valid size, so a typo is not silently taken for a comment. Blank lines
are skipped; any other malformed line is an error naming its line number and byte offset.

Din has no threads, privilege or instruction counts: every record is thread 0 in user mode, and,
as for lackey, an instruction fetch counts one instruction (`icount` 1) and a data access none.
A din trace without instruction fetches therefore has no instruction count (MPKI undefined).
*/
use std::io::BufRead;

use super::lackey::{parse_hex, parse_size, TextReader};
use super::{Kind, Progress, Record, RecordSource};
use crate::error::TraceError;

/// Dinero's default access size when a line gives none.
pub const DEFAULT_SIZE: u16 = 4;

/// Reads a din trace line by line into records.
pub struct DinReader<R: BufRead>(TextReader<R>);

impl<R: BufRead> DinReader<R> {
    pub fn new(r: R) -> Self {
        DinReader(TextReader::new(r, parse_line))
    }
}

impl<R: BufRead> RecordSource for DinReader<R> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        self.0.next_block(buf)
    }

    fn progress(&self) -> Progress {
        self.0.progress()
    }
}

/// One din line: `Some(record)`, `None` for a line to skip, or what is wrong with it.
fn parse_line(line: &[u8]) -> Result<Option<Record>, String> {
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let Some(label) = fields.next() else {
        return Ok(None);
    };
    let kind = match label {
        b"0" => Kind::Load,
        b"1" => Kind::Store,
        b"2" => Kind::IFetch,
        b"3" | b"4" => return Ok(None),
        _ => {
            return Err(format!(
                "label {:?} is not 0 (read), 1 (write), 2 (ifetch), 3 or 4 (escapes)",
                String::from_utf8_lossy(label)
            ))
        }
    };
    let Some(addr) = fields.next() else {
        return Err("missing address after the label".to_string());
    };
    let addr = parse_hex(addr)?;
    let size = match fields.next() {
        Some(s) if s[0].is_ascii_digit() => parse_size(s)?,
        _ => DEFAULT_SIZE,
    };
    let icount = (kind == Kind::IFetch) as u32;
    Ok(Some(Record {
        addr,
        thread: 0,
        icount,
        size,
        kind,
        privileged: false,
        syscall: 0,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::collect;

    fn read(text: &str) -> Result<Vec<Record>, TraceError> {
        collect(&mut DinReader::new(text.as_bytes()))
    }

    #[test]
    fn parses_labels_sizes_and_comments() {
        let text = "2 0\n0 1000\n\n0 70f60888 8\n1 0x70f60890 2 trailing comment\n\
                    3 1234\n4 0\n1\t70f6088c  # a comment\n";
        let rs = read(text).unwrap();
        assert_eq!(
            rs,
            vec![
                Record {
                    icount: 1,
                    ..Record::new(Kind::IFetch, 0, 4)
                },
                Record::new(Kind::Load, 0x1000, 4),
                Record::new(Kind::Load, 0x70f60888, 8),
                Record::new(Kind::Store, 0x70f60890, 2),
                Record::new(Kind::Store, 0x70f6088c, 4),
            ]
        );
    }

    #[test]
    fn bad_lines_name_their_number_and_text() {
        let e = read("0 1000\n7 1000\n").unwrap_err();
        assert!(e.message.starts_with("line 2: label \"7\""), "{e}");
        assert!(e.message.ends_with("\"7 1000\""), "{e}");
        assert_eq!(e.offset, Some(7));
        let e = read("0\n").unwrap_err();
        assert!(e.message.contains("line 1: missing address"), "{e}");
        let e = read("0 12g4\n").unwrap_err();
        assert!(e.message.contains("not hexadecimal"), "{e}");
        let e = read("0 1234 8x\n").unwrap_err();
        assert!(e.message.contains("size \"8x\""), "{e}");
    }
}
