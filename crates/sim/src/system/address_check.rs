//! The virtual-address width a system run can translate, enforced on every thread's records.
//!
//! The modelled page table has `mmu.levels` levels of 512 entries over pages of `2^page_shift`
//! bytes, so it translates addresses below `2^(page_shift + 9 x levels)` (2^48 with 4 KiB pages
//! and 4 levels, as x86-64's 4-level paging). A larger address would be cut to its low bits by
//! the table walk and alias another page, which ended in an invariant failure ("page ... lost its
//! contents"). Such a record is rejected as bad input, naming the thread's source and the
//! record's position (0-based index in that thread's stream), before it is simulated.
//!
//! Except a *canonical upper-half* address (a full-system trace's kernel references,
//! 0xffff800000000000 and up): bits 63 down to the top translated bit all ones, as x86-64
//! requires of every address and its kernel uses. The hardware walks such an address by its
//! low bits (x86-64's PML4 entries 256-511 hold the kernel half), and so does the model: it
//! is folded to `addr mod 2^bits`, the upper half of the translated space (`[2^47, 2^48)` with
//! 4 levels), which no x86-64 user address occupies. A non-canonical address is still an
//! error.
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
            // All ones from the top translated bit up: the canonical upper half.
            let upper = u64::MAX << (self.limit_bits - 1);
            for r in buf.iter_mut() {
                if r.addr >= limit && r.addr & upper == upper {
                    r.addr &= limit - 1;
                }
            }
            if let Some(i) = buf.iter().position(|r| r.addr >= limit) {
                // A kernel address of a guest with 5-level paging (57 bits).
                let hint = if buf[i].addr >> 56 == 0xff && self.limit_bits < 57 {
                    " (a full-system trace of a guest with 5-level paging needs mmu.levels = 5)"
                } else {
                    ""
                };
                return Err(TraceError::new(format!(
                    "{}: record {} has virtual address {:#x}, at or above 2^{} (the {}-bit address space this machine's page tables translate: mmu.levels and the page size); give addresses below {:#x} or canonical upper-half ones{hint}",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Kind, VecSource};

    fn check(addrs: &[u64]) -> Result<Vec<u64>, TraceError> {
        let recs = addrs
            .iter()
            .map(|&a| Record::new(Kind::Load, a, 8))
            .collect();
        let mut c = AddressCheck::new(Box::new(VecSource::new(recs)), "t".into(), 12, 4);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while c.next_block(&mut buf)? {
            out.extend(buf.iter().map(|r| r.addr));
        }
        Ok(out)
    }

    /// A full-system trace's kernel addresses are translated by their low 48 bits, as x86-64 walks
    /// them, into the half of the space no user address uses; a non-canonical address is still
    /// rejected.
    #[test]
    fn canonical_kernel_addresses_fold_into_the_upper_half() {
        let out = check(&[0x40_1000, 0xffff_8880_0123_4567, 0xffff_ffff_8100_0000]).unwrap();
        assert_eq!(out, [0x40_1000, 0x8880_0123_4567, 0xffff_8100_0000]);
        for bad in [1u64 << 48, 0xfffe_8000_0000_0000, 0x8000_0000_0000_0000] {
            let e = check(&[0x1000, bad]).unwrap_err().to_string();
            assert!(e.contains("record 1") && e.contains("2^48"), "{e}");
        }
    }
}
