//! A thread's trace restricted to some of the trace's threads (`trace_threads` in a thread's
//! config). A full-system trace's `thread` is the guest kernel task that made each record
//! (docs/trace-format.md "Full-system traces"), so this runs the traced program's tasks apart from
//! the guest's other processes and kernel threads. Records keep their order; the PCs of a trace
//! that has them are kept with their records.
use crate::error::TraceError;
use crate::trace::{Progress, Record, RecordSource};

pub(crate) struct ThreadFilter {
    inner: Box<dyn RecordSource + Send>,
    /// The trace threads kept, sorted.
    keep: Vec<u32>,
    all: Vec<Record>,
    pcs: Vec<u64>,
}

impl ThreadFilter {
    pub fn new(inner: Box<dyn RecordSource + Send>, keep: &[u32]) -> Self {
        let mut keep = keep.to_vec();
        keep.sort_unstable();
        keep.dedup();
        ThreadFilter {
            inner,
            keep,
            all: Vec::new(),
            pcs: Vec::new(),
        }
    }
}

impl RecordSource for ThreadFilter {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        self.pcs.clear();
        // Blocks without a kept record are skipped: an empty block means the end.
        while buf.is_empty() {
            if !self.inner.next_block(&mut self.all)? {
                return Ok(false);
            }
            let pcs = self.inner.block_pcs();
            let with_pcs = pcs.len() == self.all.len();
            for (i, r) in self.all.iter().enumerate() {
                if self.keep.binary_search(&r.thread).is_ok() {
                    buf.push(*r);
                    if with_pcs {
                        self.pcs.push(pcs[i]);
                    }
                }
            }
        }
        Ok(true)
    }

    fn progress(&self) -> Progress {
        self.inner.progress()
    }

    fn block_pcs(&self) -> &[u64] {
        &self.pcs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, VecSource, BLOCK_RECORDS};

    /// Only the kept threads' records, in order, across blocks (one block holds none of them).
    #[test]
    fn keeps_the_named_threads_records_in_order() {
        let mut recs: Vec<Record> = (0..3 * BLOCK_RECORDS as u64)
            .map(|i| {
                let mut r = Record::new(Kind::Load, i * 64, 8);
                // The second block is all thread 2's.
                r.thread = if (BLOCK_RECORDS as u64..2 * BLOCK_RECORDS as u64).contains(&i) {
                    2
                } else {
                    (i % 3) as u32
                };
                r
            })
            .collect();
        recs[5].thread = 7;
        let expect: Vec<u64> = recs
            .iter()
            .filter(|r| r.thread == 0 || r.thread == 7)
            .map(|r| r.addr)
            .collect();
        let mut f = ThreadFilter::new(Box::new(VecSource::new(recs)), &[7, 0, 0]);
        let (mut buf, mut got) = (Vec::new(), Vec::new());
        while f.next_block(&mut buf).unwrap() {
            assert!(!buf.is_empty());
            got.extend(buf.iter().map(|r| r.addr));
        }
        assert_eq!(got, expect);
    }
}
