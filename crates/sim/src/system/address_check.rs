//! The virtual-address width a system run can translate, enforced on every thread's records
//! (issue 25, defect 4).
//!
//! The modelled page table has `mmu.levels` levels of 512 entries over pages of `2^page_shift`
//! bytes, so it translates addresses below `2^(page_shift + 9 x levels)` (2^48 with 4 KiB pages
//! and 4 levels, as x86-64's 4-level paging). A larger address would be cut to its low bits by
//! the table walk and alias another page, which ended in an invariant failure ("page ... lost its
//! contents"). Such a record is rejected as bad input, naming the thread's source and the
//! record's position (0-based index in that thread's stream), before it is simulated.
use crate::error::TraceError;
use crate::trace::{Progress, Record, RecordSource};

/// A thread's record source that rejects addresses at or above `limit`.
pub(crate) struct AddressCheck {
    pub inner: Box<dyn RecordSource + Send>,
    /// What the thread reads, for messages: `processes[0].threads[1] (trace t.cctrace)`.
    pub what: String,
    pub limit_bits: u32,
    pub seen: u64,
}

impl AddressCheck {
    pub fn new(
        inner: Box<dyn RecordSource + Send>,
        what: String,
        page_shift: u32,
        levels: u32,
    ) -> Self {
        AddressCheck {
            inner,
            what,
            limit_bits: page_shift + 9 * levels,
            seen: 0,
        }
    }
}

impl RecordSource for AddressCheck {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        let more = self.inner.next_block(buf)?;
        if self.limit_bits < 64 {
            let limit = 1u64 << self.limit_bits;
            if let Some(i) = buf.iter().position(|r| r.addr >= limit) {
                return Err(TraceError::new(format!(
                    "{}: record {} has virtual address {:#x}, at or above 2^{} (the {}-bit address space this machine's page tables translate: mmu.levels and the page size); give addresses below {:#x}",
                    self.what,
                    self.seen + i as u64,
                    buf[i].addr,
                    self.limit_bits,
                    self.limit_bits,
                    limit
                )));
            }
        }
        self.seen += buf.len() as u64;
        Ok(more)
    }

    fn progress(&self) -> Progress {
        self.inner.progress()
    }
}
