/*!
The exact per-page LLC profile of a run, kept when asked (`System::keep_page_llc`): every data
reference of a process that reaches the last-level cache, counted by process and virtual page,
with whether it missed there (served by memory or by another chip's cache). It is free: it
charges no cycle, touches no cache line and takes no interrupt, so the run is the run observed.

It counts exactly what the exact PMU sampling every LLC access (`[pmu] ideal`, event
`llc-accesses`, period 1) would hand a policy, at the same two places (`step_pages`,
`step_walked`): the offline pollute oracle ranks pages by these rates (ROCS section 3.2.1: a
page's miss rate is the inverse of its reuse).
*/
use super::*;
use std::collections::HashMap;

/// Per (pid, virtual page): LLC accesses and LLC misses of its data references.
#[derive(Debug, Default, Clone)]
pub(super) struct PageLlcTally {
    /// Position of the LLC on the data path (the level a reference must reach to count; None:
    /// the data path has no LLC, so nothing counts, as for the sampler).
    llc_depth: Option<usize>,
    pages: HashMap<(u32, u64), [u64; 2]>,
}

impl System {
    /// Keep the exact per-page LLC profile of this run (`page_llc`). Call before `run`. The
    /// bursts are then stepped one record at a time, as with a sampler (the batched and the
    /// stepped-run paths charge the same counts but see no single access's level).
    pub fn keep_page_llc(&mut self) {
        let llc = self.event_levels.llc;
        let llc_depth = ticks::index_on_path(&self.paths[0], llc);
        self.page_llc = Some(PageLlcTally {
            llc_depth,
            pages: HashMap::new(),
        });
    }

    /// The kept profile (`keep_page_llc`), as rows `[pid, vpn, LLC accesses, LLC misses]`
    /// sorted by pid then page; None when it was not kept.
    pub fn page_llc(&self) -> Option<Vec<[u64; 4]>> {
        let t = self.page_llc.as_ref()?;
        let mut rows: Vec<[u64; 4]> = t
            .pages
            .iter()
            .map(|(&(pid, vpn), &[a, m])| [pid as u64, vpn, a, m])
            .collect();
        rows.sort_unstable();
        Some(rows)
    }

    /// Count one data reference of thread `tid` at `vaddr` that `served` served (a level, or
    /// memory), `remote` when another chip's cache did.
    #[inline]
    pub(super) fn tally_page_llc(&mut self, tid: usize, vaddr: u64, served: u8, remote: bool) {
        let Some(t) = self.page_llc.as_mut() else {
            return;
        };
        let depth = ticks::depth_on_path(&self.paths[0], served);
        if t.llc_depth.is_none_or(|d| depth < d) {
            return; // served above the LLC
        }
        let pid = self.threads[tid].pid as u32;
        let e = t
            .pages
            .entry((pid, vaddr >> self.page_shift))
            .or_insert([0, 0]);
        e[0] += 1;
        e[1] += (remote || served == SERVED_BY_MEMORY) as u64;
    }
}
