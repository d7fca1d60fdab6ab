/*!
Importer for Valgrind lackey's memory trace (`valgrind --tool=lackey --trace-mem=yes prog`), so
any unmodified program can be traced. Lackey prints one access per line:

```text
I  0400d7d4,8      instruction fetch: hex address, decimal size
 L 04d8f018,4      load
 S 7ff000398,8     store
 M 0421c7f0,4      modify (read-modify-write of one location)
```
Valgrind's own lines (`==PID== ...`, `--PID-- ...`) and blank lines are skipped; any other line
is an error naming its line number and byte offset and showing the text.

What lackey cannot tell us, and what we record instead: no thread id (every record is thread 0;
lackey serialises threads), no privilege (everything is user mode), no instruction count (each
`I` record counts one instruction, `icount` 1; data records carry `icount` 0, so instructions
are counted exactly once). Sizes above 65535 or of 0 are rejected.

The line reader and the hex parser here are shared with the Dinero importer (`din.rs`).
*/
use std::io::{BufRead, Read};

use super::{Kind, Progress, Record, RecordSource, BLOCK_RECORDS};
use crate::error::TraceError;

/// Reads lackey output line by line into records.
pub struct LackeyReader<R: BufRead>(TextReader<R>);

impl<R: BufRead> LackeyReader<R> {
    pub fn new(r: R) -> Self {
        LackeyReader(TextReader::new(r, parse_line))
    }
}

impl<R: BufRead> RecordSource for LackeyReader<R> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        self.0.next_block(buf)
    }

    fn progress(&self) -> Progress {
        self.0.progress()
    }
}

/// A line-oriented text trace (lackey, din): `parse` turns one line into a record, nothing
/// (a line to skip) or what is wrong with it. The first error is sticky: later calls return it
/// again, and a block that fails hands out no records.
pub(super) struct TextReader<R: BufRead> {
    lines: Lines<R>,
    records: u64,
    failed: Option<TraceError>,
    parse: fn(&[u8]) -> Result<Option<Record>, String>,
}

impl<R: BufRead> TextReader<R> {
    pub(super) fn new(r: R, parse: fn(&[u8]) -> Result<Option<Record>, String>) -> Self {
        TextReader {
            lines: Lines::new(r),
            records: 0,
            failed: None,
            parse,
        }
    }

    fn fail(&mut self, e: TraceError, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        self.failed = Some(e.clone());
        buf.clear();
        Err(e)
    }
}

impl<R: BufRead> RecordSource for TextReader<R> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        while buf.len() < BLOCK_RECORDS {
            let line = match self.lines.next() {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => return self.fail(e, buf),
            };
            match (self.parse)(line.text) {
                Ok(Some(r)) => buf.push(r),
                Ok(None) => {}
                Err(what) => {
                    let e = line.error(&what);
                    return self.fail(e, buf);
                }
            }
        }
        self.records += buf.len() as u64;
        Ok(!buf.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress {
            records: self.records,
            bytes: self.lines.bytes,
            ..Progress::default()
        }
    }
}

/// One lackey line: `Some(record)`, `None` for a line to skip, or what is wrong with it.
fn parse_line(line: &[u8]) -> Result<Option<Record>, String> {
    let body = trim_start(line);
    if body.is_empty() || body.starts_with(b"==") || body.starts_with(b"--") {
        return Ok(None);
    }
    let kind = match body[0] {
        b'I' => Kind::IFetch,
        b'L' => Kind::Load,
        b'S' => Kind::Store,
        b'M' => Kind::Modify,
        _ => return Err("expected a lackey record such as \" L 04d8f018,4\"".to_string()),
    };
    let rest = trim_start(&body[1..]);
    if rest.len() == body.len() - 1 {
        return Err("expected a space after the access kind".to_string());
    }
    let rest = trim_end(rest);
    let Some(comma) = rest.iter().position(|&b| b == b',') else {
        return Err("expected \"address,size\" after the access kind".to_string());
    };
    let addr = parse_hex(&rest[..comma])?;
    let size = parse_size(&rest[comma + 1..])?;
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

// ---------------------------------------------------------------------------------------------
// Helpers shared with din.rs

pub(super) fn trim_start(s: &[u8]) -> &[u8] {
    let skip = s.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &s[skip..]
}

pub(super) fn trim_end(s: &[u8]) -> &[u8] {
    let keep = s.len()
        - s.iter()
            .rev()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
    &s[..keep]
}

/// A hexadecimal address of 1 to 16 digits, with or without a `0x` prefix.
pub(super) fn parse_hex(s: &[u8]) -> Result<u64, String> {
    let digits = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if digits.is_empty() {
        return Err("missing address".to_string());
    }
    if digits.len() > 16 {
        return Err(format!(
            "address {} does not fit in 64 bits",
            String::from_utf8_lossy(s)
        ));
    }
    let mut v = 0u64;
    for &b in digits {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => {
                return Err(format!(
                    "address {} is not hexadecimal",
                    String::from_utf8_lossy(s)
                ))
            }
        };
        v = (v << 4) | d as u64;
    }
    Ok(v)
}

/// A decimal access size from 1 to 65535.
pub(super) fn parse_size(s: &[u8]) -> Result<u16, String> {
    let bad = || {
        format!(
            "size {:?} is not a number from 1 to 65535",
            String::from_utf8_lossy(s)
        )
    };
    if s.is_empty() || s.len() > 5 || !s.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let v = s.iter().fold(0u32, |v, &b| v * 10 + (b - b'0') as u32);
    match u16::try_from(v) {
        Ok(v) if v > 0 => Ok(v),
        _ => Err(bad()),
    }
}

/// Reads lines, counting them and their byte offsets, for error messages that point at them.
pub(super) struct Lines<R: BufRead> {
    r: R,
    buf: Vec<u8>,
    line_no: u64,
    /// Bytes consumed so far.
    pub(super) bytes: u64,
}

/// One line (without its line terminator) and where it is.
pub(super) struct Line<'a> {
    pub(super) text: &'a [u8],
    pub(super) number: u64,
    pub(super) offset: u64,
}

impl Line<'_> {
    /// An error about this line, showing (the start of) its text.
    pub(super) fn error(&self, what: &str) -> TraceError {
        const SHOW: usize = 80;
        let text = String::from_utf8_lossy(&self.text[..self.text.len().min(SHOW)]);
        let more = if self.text.len() > SHOW { "..." } else { "" };
        TraceError::at(
            self.offset,
            format!("line {}: {what}: \"{text}{more}\"", self.number),
        )
    }
}

impl<R: BufRead> Lines<R> {
    pub(super) fn new(r: R) -> Self {
        Lines {
            r,
            buf: Vec::with_capacity(256),
            line_no: 0,
            bytes: 0,
        }
    }

    /// The next line, or `None` at the end of the input.
    pub(super) fn next(&mut self) -> Result<Option<Line<'_>>, TraceError> {
        /// Longest line accepted, so a binary file does not make us buffer it whole.
        const MAX_LINE: u64 = 1 << 16;
        self.buf.clear();
        let offset = self.bytes;
        let got = Read::take(&mut self.r, MAX_LINE)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| {
                TraceError::at(
                    offset,
                    format!("line {}: read error: {e}", self.line_no + 1),
                )
            })?;
        if got == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        self.bytes += got as u64;
        let mut text = &self.buf[..];
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        } else if got as u64 == MAX_LINE {
            return Err(TraceError::at(
                offset,
                format!(
                    "line {}: longer than {MAX_LINE} bytes; is this a text trace?",
                    self.line_no
                ),
            ));
        }
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        Ok(Some(Line {
            text,
            number: self.line_no,
            offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::collect;

    fn read(text: &str) -> Result<Vec<Record>, TraceError> {
        collect(&mut LackeyReader::new(text.as_bytes()))
    }

    #[test]
    fn parses_all_kinds_and_skips_banners() {
        let text = "==1234== Lackey, an example Valgrind tool\n\
                    ==1234== Copyright (C) 2002-2017\n\
                    \n\
                    I  0400d7d4,8\n \
                    S 7ff000398,8\n \
                    L 04d8f018,4\r\n \
                    M 0421c7f0,16\n\
                    ==1234== \n";
        let rs = read(text).unwrap();
        assert_eq!(
            rs,
            vec![
                Record {
                    icount: 1,
                    ..Record::new(Kind::IFetch, 0x0400d7d4, 8)
                },
                Record::new(Kind::Store, 0x7ff000398, 8),
                Record::new(Kind::Load, 0x04d8f018, 4),
                Record::new(Kind::Modify, 0x0421c7f0, 16),
            ]
        );
    }

    #[test]
    fn bad_line_names_its_number_and_text() {
        let e = read("I  0400d7d4,8\n L zz,4\n").unwrap_err();
        assert_eq!(e.offset, Some(14));
        assert!(
            e.message
                .starts_with("line 2: address zz is not hexadecimal"),
            "{e}"
        );
        assert!(e.message.contains("\" L zz,4\""), "{e}");
        let e = read("hello world\n").unwrap_err();
        assert!(
            e.message.contains("line 1: expected a lackey record"),
            "{e}"
        );
        let e = read(" L 1000,0\n").unwrap_err();
        assert!(e.message.contains("size \"0\""), "{e}");
        let e = read(" L 1000\n").unwrap_err();
        assert!(e.message.contains("address,size"), "{e}");
        let e = read(" L 11112222333344445,4\n").unwrap_err();
        assert!(e.message.contains("64 bits"), "{e}");
    }

    #[test]
    fn last_line_without_newline_is_read() {
        assert_eq!(
            read(" L ff,2").unwrap(),
            vec![Record::new(Kind::Load, 0xff, 2)]
        );
    }
}
