/*!
Traces: the record every part of cachecolor consumes, the native on-disk format, importers for
other tools' formats, and the `RecordSource` interface that lets a file, an importer or a
synthetic generator feed a simulation block by block.

Sources hand out records in blocks (a `Vec<Record>` the caller reuses) so that decoding is
amortised and the cache model can look ahead within a block (DESIGN.md principle 5). Memory use
is bounded by the block size, never by trace length.
*/

pub mod champsim;
pub mod din;
pub mod lackey;
pub mod native;
mod record;

pub use record::{Kind, Record};

use crate::error::TraceError;

/// Records per block handed out by sources (and written per block in the native format).
pub const BLOCK_RECORDS: usize = 1 << 16;

/// How far a source has got, for progress bars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records produced so far.
    pub records: u64,
    /// Input bytes consumed so far (0 when the source is not a file).
    pub bytes: u64,
    /// Total input bytes, or total records for generators, when known.
    pub total_bytes: Option<u64>,
    pub total_records: Option<u64>,
}

/// Anything that yields records block by block: a native trace, an importer, a generator.
pub trait RecordSource {
    /// Clear `buf` and fill it with the next records (at most `BLOCK_RECORDS` is typical but
    /// not required). Returns `Ok(false)` once the source is exhausted (and `buf` is empty).
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError>;

    /// How far the source has got.
    fn progress(&self) -> Progress {
        Progress::default()
    }
}

impl<S: RecordSource + ?Sized> RecordSource for Box<S> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        (**self).next_block(buf)
    }
    fn progress(&self) -> Progress {
        (**self).progress()
    }
}

/// A source over records already in memory (tests, Python arrays).
pub struct VecSource {
    records: Vec<Record>,
    pos: usize,
}

impl VecSource {
    pub fn new(records: Vec<Record>) -> Self {
        VecSource { records, pos: 0 }
    }
}

impl RecordSource for VecSource {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        let end = (self.pos + BLOCK_RECORDS).min(self.records.len());
        buf.extend_from_slice(&self.records[self.pos..end]);
        self.pos = end;
        Ok(!buf.is_empty())
    }
    fn progress(&self) -> Progress {
        Progress {
            records: self.pos as u64,
            total_records: Some(self.records.len() as u64),
            ..Progress::default()
        }
    }
}

/// Drain a source into a vector (tests and small traces only: memory grows with length).
pub fn collect(src: &mut dyn RecordSource) -> Result<Vec<Record>, TraceError> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while src.next_block(&mut buf)? {
        out.extend_from_slice(&buf);
    }
    Ok(out)
}
