//! Keeping the caches of several chips coherent, with the simplest protocol that makes reads
//! of another chip's lines visible as remote cache accesses (needed for thread clustering,
//! Azimi et al. section 5) and writes cost the other chips their copies:
//!
//! - a line access that misses every level of its chip snoops the other chips; if one holds
//!   the line, the access is served remotely (cache to cache, `timing.remote_latency`): a read
//!   leaves the line shared, a write invalidates the other copies;
//! - a write that hits locally invalidates the copies of the chips known to share the line.
//!
//! "Known to share" is a directory of lines read by more than one chip: a line can only get a
//! second holder through a snooped miss, which records it, so every line held by several chips
//! is in it (it may also list chips that have since evicted the line silently; invalidating
//! there finds nothing). A write removes the entry: the writer is then the only holder. The
//! directory holds at most the lines ever shared, so it is bounded by the footprint.
//!
//! A record touching two lines is tracked by its first line (the hierarchy serves both).
use super::report::CoherenceStats;
use crate::cache::Hierarchy;
use crate::trace::Record;
use std::collections::HashMap;

pub(crate) struct Coherence {
    line_shift: u32,
    /// Line -> bit mask of the chips that may hold it, for lines read by several chips.
    shared: HashMap<u64, u32>,
    pub stats: CoherenceStats,
}

impl Coherence {
    pub fn new(line_size: u32) -> Self {
        Coherence {
            line_shift: line_size.trailing_zeros(),
            shared: HashMap::new(),
            stats: CoherenceStats::default(),
        }
    }

    /// Chip `chip` has just sent `rec` through its hierarchy (`missed`: its caches did not
    /// have the line). Returns whether another chip's cache served it (never, on one chip).
    pub fn after_access(
        &mut self,
        chips: &mut [Hierarchy],
        chip: usize,
        rec: &Record,
        missed: bool,
    ) -> bool {
        if chips.len() == 1 {
            return false;
        }
        let line = rec.addr >> self.line_shift;
        let me = 1u32 << chip;
        let write = rec.kind.is_write();
        if missed {
            let mut holders = 0u32;
            for (i, h) in chips.iter().enumerate() {
                if i != chip && h.holds(rec.addr) {
                    holders |= 1 << i;
                }
            }
            if holders == 0 {
                return false;
            }
            self.stats.remote_accesses += 1;
            if write {
                self.invalidate(chips, rec.addr, holders);
                self.shared.remove(&line);
            } else {
                *self.shared.entry(line).or_insert(0) |= holders | me;
            }
            return true;
        }
        // A write hit: only a line in the directory has copies elsewhere. Most runs never
        // share a line (each process on its own frames), so the empty directory is checked
        // before the key is hashed (callgrind on a captured trace on `power5`: the hashing of
        // every store hit was about 3% of the system's host instructions).
        if write && !self.shared.is_empty() {
            if let Some(mask) = self.shared.remove(&line) {
                self.invalidate(chips, rec.addr, mask & !me);
            }
        }
        false
    }

    /// Chip `chip` is about to take the line of `addr` without reading it (the kernel zeroing
    /// a frame, `clear_page`): every other chip's copy is invalidated and the line is no
    /// longer shared. No cache serves anything, so no remote access is counted.
    pub fn claim(&mut self, chips: &mut [Hierarchy], chip: usize, addr: u64) {
        if chips.len() == 1 {
            return;
        }
        self.shared.remove(&(addr >> self.line_shift));
        self.invalidate(chips, addr, !(1u32 << chip));
    }

    fn invalidate(&mut self, chips: &mut [Hierarchy], addr: u64, mask: u32) {
        for (i, h) in chips.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                self.stats.invalidations += h.invalidate_line(addr) as u64;
            }
        }
    }
}
