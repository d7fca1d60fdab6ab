/*!
Importer for ChampSim binary traces: a sequence of 64-byte `input_instr` records (little-endian),
usually xz- or gzip-compressed (`*.champsimtrace.xz`):

```text
offset  0  ip                       u64
offset  8  is_branch                u8
offset  9  branch_taken             u8
offset 10  destination_registers    [u8; 2]
offset 12  source_registers         [u8; 4]
offset 16  destination_memory       [u64; 2]   (0 = unused slot)
offset 32  source_memory            [u64; 4]   (0 = unused slot)
```
Each instruction becomes an instruction fetch of `ip` (size 4, `icount` 1), then one load per
nonzero source address, then one store per nonzero destination address (each size 8, `icount`
0), in slot order. What ChampSim traces cannot tell us: access sizes (ChampSim has none; fetches
are taken as 4 bytes and data accesses as 8), threads (all thread 0), privilege (all user mode),
and read-modify-writes (an instruction that reads and writes one address gives a load and a
store). Branch and register fields are ignored. A trailing partial record is reported as a
truncated trace with its byte offset.
*/
use std::io::{self, Read};
use std::path::Path;

use super::{Kind, Progress, Record, RecordSource, BLOCK_RECORDS};
use crate::error::{Error, TraceError};

/// Bytes of one ChampSim `input_instr`.
pub const INSTR_BYTES: usize = 64;
/// Size given to instruction fetches and data accesses (ChampSim records none).
pub const IFETCH_SIZE: u16 = 4;
pub const DATA_SIZE: u16 = 8;
/// Most records one instruction yields (fetch + 4 loads + 2 stores).
const MAX_RECORDS_PER_INSTR: usize = 7;
const CHUNK_BYTES: usize = 1 << 16;

/// Reads a (decompressed) ChampSim trace into records.
pub struct ChampSimReader<R: Read> {
    r: R,
    chunk: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of the (decompressed) input consumed: the offset of `chunk[start]`.
    offset: u64,
    eof: bool,
    records: u64,
    failed: Option<TraceError>,
}

impl ChampSimReader<Box<dyn Read + Send>> {
    /// Open a ChampSim trace, decompressing by extension: `.xz`, `.gz` (and `.zst`), else raw.
    pub fn open(path: &Path) -> Result<Self, Error> {
        Ok(ChampSimReader::new(super::open_input(path)?.reader))
    }
}

impl<R: Read> ChampSimReader<R> {
    pub fn new(r: R) -> Self {
        ChampSimReader {
            r,
            chunk: vec![0; CHUNK_BYTES],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
            records: 0,
            failed: None,
        }
    }

    /// Make at least one whole instruction available unless the input ends first.
    fn refill(&mut self) -> io::Result<()> {
        self.chunk.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while !self.eof && self.end < INSTR_BYTES {
            match self.r.read(&mut self.chunk[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn fill_block(&mut self, buf: &mut Vec<Record>) -> Result<(), TraceError> {
        while buf.len() + MAX_RECORDS_PER_INSTR <= BLOCK_RECORDS {
            if self.end - self.start < INSTR_BYTES {
                self.refill().map_err(|e| {
                    TraceError::at(self.offset, format!("read error in ChampSim trace: {e}"))
                })?;
                let left = self.end - self.start;
                if left == 0 {
                    break;
                }
                if left < INSTR_BYTES {
                    return Err(TraceError::at(
                        self.offset,
                        format!(
                            "truncated ChampSim trace: the instruction at byte {} has only {left} \
                             of {INSTR_BYTES} bytes",
                            self.offset
                        ),
                    ));
                }
            }
            let instr = &self.chunk[self.start..self.start + INSTR_BYTES];
            let word = |at: usize| u64::from_le_bytes(instr[at..at + 8].try_into().unwrap());
            let ip = word(0);
            buf.push(Record {
                icount: 1,
                ..Record::new(Kind::IFetch, ip, IFETCH_SIZE)
            });
            for slot in 0..4 {
                let a = word(32 + 8 * slot);
                if a != 0 {
                    buf.push(Record::new(Kind::Load, a, DATA_SIZE));
                }
            }
            for slot in 0..2 {
                let a = word(16 + 8 * slot);
                if a != 0 {
                    buf.push(Record::new(Kind::Store, a, DATA_SIZE));
                }
            }
            self.start += INSTR_BYTES;
            self.offset += INSTR_BYTES as u64;
        }
        Ok(())
    }
}

impl<R: Read> RecordSource for ChampSimReader<R> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if let Err(e) = self.fill_block(buf) {
            buf.clear();
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.records += buf.len() as u64;
        Ok(!buf.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress {
            records: self.records,
            bytes: self.offset,
            ..Progress::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::collect;

    /// One `input_instr` as ChampSim's tracer writes it.
    fn instr(ip: u64, dst: [u64; 2], src: [u64; 4]) -> [u8; INSTR_BYTES] {
        let mut b = [0u8; INSTR_BYTES];
        b[..8].copy_from_slice(&ip.to_le_bytes());
        b[8] = 1; // is_branch, ignored
        b[10] = 3; // a destination register, ignored
        for (i, a) in dst.iter().enumerate() {
            b[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        for (i, a) in src.iter().enumerate() {
            b[32 + 8 * i..40 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        b
    }

    #[test]
    fn instructions_become_fetch_loads_stores() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&instr(0x401000, [0, 0], [0, 0, 0, 0]));
        bytes.extend_from_slice(&instr(0x401004, [0x7000, 0], [0x5000, 0, 0x6000, 0]));
        let rs = collect(&mut ChampSimReader::new(&bytes[..])).unwrap();
        assert_eq!(
            rs,
            vec![
                Record {
                    icount: 1,
                    ..Record::new(Kind::IFetch, 0x401000, 4)
                },
                Record {
                    icount: 1,
                    ..Record::new(Kind::IFetch, 0x401004, 4)
                },
                Record::new(Kind::Load, 0x5000, 8),
                Record::new(Kind::Load, 0x6000, 8),
                Record::new(Kind::Store, 0x7000, 8),
            ]
        );
    }

    #[test]
    fn blocks_never_exceed_block_records() {
        let full = instr(1, [2, 3], [4, 5, 6, 7]);
        let bytes: Vec<u8> = (0..BLOCK_RECORDS / 7 + 10).flat_map(|_| full).collect();
        let mut r = ChampSimReader::new(&bytes[..]);
        let mut buf = Vec::new();
        let mut total = 0;
        while r.next_block(&mut buf).unwrap() {
            assert!(buf.len() <= BLOCK_RECORDS);
            total += buf.len();
        }
        assert_eq!(total, 7 * (BLOCK_RECORDS / 7 + 10));
    }

    #[test]
    fn partial_record_is_truncation_with_offset() {
        let mut bytes = instr(1, [0, 0], [0, 0, 0, 0]).to_vec();
        bytes.extend_from_slice(&[0; 10]);
        let e = collect(&mut ChampSimReader::new(&bytes[..])).unwrap_err();
        assert_eq!(e.offset, Some(64));
        assert!(e.message.contains("truncated ChampSim trace"), "{e}");
        assert!(e.message.contains("only 10 of 64 bytes"), "{e}");
    }
}
