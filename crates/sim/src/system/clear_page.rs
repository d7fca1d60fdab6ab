//! `clear_page`: the kernel zeroes a frame before it maps it into a process, so a new owner
//! never reads an old owner's data (Linux mm/memory.c: the anonymous fault path,
//! `do_anonymous_page` -> `clear_user_highpage`; a huge page, `clear_huge_page` ->
//! `process_huge_page`, one small page at a time with the one the fault is in cleared last, so
//! its lines are the hottest).
//!
//! How the zeroing meets the caches is what Linux's `clear_page` does on the machines the
//! papers ran (x86-64 and POWER): ordinary stores through the caches. On x86-64
//! (arch/x86/lib/clear_page_64.S) it is `rep stosb` / `rep stosq` (`clear_page_erms`,
//! `clear_page_rep`) or plain `movq` stores (`clear_page_orig`); on POWER
//! (arch/powerpc/include/asm/page_64.h) a `dcbz` per cache block. Both establish each line in
//! the faulting core's cache, exclusive and zeroed, without reading it from memory (`dcbz` by
//! definition; fast-string stores of whole lines without a read for ownership). A
//! non-temporal clear that bypasses the caches is not x86-64's or POWER's `clear_page`: only
//! 32-bit x86 with 3DNow! had one (arch/x86/lib/mmx_32.c, `movntq`); non-temporal clearing of
//! huge pages has been proposed for Linux but mainline clears them with `clear_page` too.
//!
//! So the model, per line of the frame: the other chips' copies are invalidated (the old
//! owner's lines stop serving anyone, `Coherence::claim`), then a privileged store goes through
//! the faulting core's hierarchy, which takes the line (evicting what it must: the clearing's
//! pollution) and leaves it dirty for the new owner's first touch. No read of the line reaches
//! the memory controller; the write-backs of the dirty lines it evicts do, and the zeroed
//! lines are written back when evicted in turn (by whoever's access evicts them). The stores
//! are charged as the timing model charges a store served where the line was taken (a line no
//! cache held: the last level's latency, where it is established without a read).
//!
//! What bounds a clear that evicts dirty lines is the memory's write bandwidth: the stores
//! evict faster than the controller writes, its write queue fills and the stores wait. The
//! clearing core waits for its own write-backs here: each takes its slot at the controller
//! when the store that evicted it is issued, and the clear is done no sooner than the last of
//! them has left (the time charged is the larger of the stores' and that), as a page copy
//! waits for its reads (`move_page`). A stream that touches fresh memory so faults, clears
//! and evicts the zeroed lines of its earlier pages at the memory's write speed, where before
//! clearing it read each line from memory: what bounds it moved from reads to writes. The
//! write queue's depth (which would let a short clear finish before its write-backs left) is
//! not modelled: the clearing core waits for all of them. Under `model = "fixed"` (no
//! controller) write-backs cost nothing, as everywhere under it.
//!
//! All of it (`fault_cycles`, the stores, the wait) is the kernel's work for the faulting
//! process: charged to the faulting core as fault time (`KernelPath::Fault`).
//!
//! Page-table frames are zeroed the same way when the fault path allocates them (Linux
//! allocates them with `__GFP_ZERO`); a process's root table, allocated when it starts, at its
//! first fault. Not cleared: a page moved by recoloring (its copy overwrites every line, as
//! Linux's migration copies without clearing).

use super::*;
use crate::timing::Served;

impl System {
    /// Zero `frames` frames from `first` on (a small page: 1; a huge page: its block) from
    /// `core`, before they are mapped; `target` (one of them: the frame the faulting address
    /// is in) is cleared last, so its lines are the most recently stored.
    pub(super) fn clear_frames(
        &mut self,
        core: usize,
        pid: usize,
        first: u64,
        frames: u64,
        target: u64,
    ) {
        debug_assert!((first..first + frames).contains(&target));
        // The zeroing goes around the batch (its lines are never read from memory), so what
        // the burst deferred so far goes through first, in order.
        if self.batch.on {
            self.flush_batch(core);
        }
        let chip = self.cores[core].chip;
        let local = self.cores[core].local;
        let start = self.cores[core].clock_milli;
        let lines = (1u64 << self.page_shift) / self.line_size;
        let last = self.chips[chip].level_names().len() - 1;
        let mut writes = 0;
        let mut stalls = crate::timing::StallBreakdown::default();
        // Milli-cycles past `start`: the stores so far, and the moment the last write-back
        // the clearing caused left for memory.
        let (mut milli, mut drained) = (0, 0);
        let order = (first..first + frames)
            .filter(|&f| f != target)
            .chain(std::iter::once(target));
        for frame in order {
            for i in 0..lines {
                let rec = Record {
                    addr: (frame << self.page_shift) + i * self.line_size,
                    thread: local,
                    icount: 0,
                    size: self.line_size as u16,
                    kind: Kind::Store,
                    privileged: true,
                    syscall: 0,
                };
                self.coherence.claim(&mut self.chips, chip, rec.addr);
                let before = self.chips[chip].memory_traffic().writes;
                let served = self.chips[chip].access(&rec);
                let evicted = self.chips[chip].memory_traffic().writes - before;
                if evicted > 0 {
                    writes += evicted;
                    // The dirty lines this store evicted go to the controller now; the clear
                    // is not done before they have left (below).
                    if let Some(ctl) = self.controllers.get_mut(chip) {
                        drained = drained.max(milli + ctl.write_backs(start + milli, evicted));
                    }
                }
                // A line no cache held is established in the last level, not read from memory.
                let at = if served == SERVED_BY_MEMORY {
                    last
                } else {
                    served as usize
                };
                milli += self.timing.reference(&mut stalls, Served::Level(at));
            }
        }
        self.cores[core].tally.mem_writes += writes;
        // The clearing core waits for its own write-backs, as a page copy waits for its reads
        // (`move_page`): stores that evict dirty lines faster than the controller writes them
        // fill the write queue, and the clear goes no faster than the memory takes its lines.
        // A measured `fault_cycles` (calibrate) already holds the real machine's clear: the
        // stores and write-backs above still happen, their time is not charged twice.
        let cycles = if self.timing.config.fault_cycles_include_clear {
            0
        } else {
            milli.max(drained).div_ceil(1000)
        };
        // Part of the fault that asked for the frame: its time, not another fault.
        self.charge_kernel_entries(core, KernelPath::Fault, cycles, Some(pid), 0);
    }
}

impl System {
    /// Zero the table frames `pid`'s address space allocated since the last call.
    pub(super) fn clear_new_tables(&mut self, core: usize, pid: usize) {
        let space = self.processes[pid].space.as_mut().expect("tables");
        for table in space.take_new_tables() {
            self.clear_frames(core, pid, table, 1, table);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::system::testing;

    /// A reused program on chip 0 (core 0) exits; a stream on chip 1 (core 2), which first
    /// works in a small table until the reuser is gone, then takes frames, among them the
    /// ones the reuser freed. Memory is small, so it must take them.
    const EXIT_THEN_STREAM: &str = r#"
[machine]
preset = "power5"
[memory]
ram = "12MiB"
allocator = "color-pool"
[[processes]]
name = "shortreuse"
pin = [0]
[[processes.threads]]
workload = { seed = 131, phases = [{ pattern = "uniform", references = 150_000, size = 8, icount = 2, footprint = "1MiB", base = 0x100000000 }] }
[[processes]]
name = "longstream"
pin = [2]
[[processes.threads]]
workload = { seed = 132, phases = [
  { pattern = "uniform", references = 400_000, size = 8, icount = 2, footprint = "64KiB", base = 0x100000000 },
  { pattern = "sequential", references = 80_000, size = 128, icount = 2, footprint = "10MiB", base = 0x200000000 },
] }
"#;

    /// An exited process's cached lines served the next owner of its frames: freed frames
    /// were not invalidated and new pages not cleared, so a stream that took frames an exited
    /// reuser had freed on the other chip was served "remotely" by that process's old lines
    /// (none when the reuser outlives the stream). With `clear_page` a new owner never reads
    /// an old owner's data: the stream gets no remote hit, and clearing did invalidate the
    /// other chip's copies.
    #[test]
    fn exited_owners_lines_never_serve_the_next_owner_of_its_frames() {
        let r = testing::run(EXIT_THEN_STREAM, "linux", None);
        let stream = r.processes.iter().find(|p| p.name == "longstream").unwrap();
        let reuse = r.processes.iter().find(|p| p.name == "shortreuse").unwrap();
        assert!(reuse.cycles < stream.cycles, "the reuser exits first");
        assert_eq!(stream.remote_accesses, 0);
        assert!(
            r.coherence.invalidations > 0,
            "the stream's clearing met the reuser's lines: {:?}",
            r.coherence
        );
    }

    /// One pass over 2 MiB of fresh memory (32,768 lines) on `xeon-e5506`, alone.
    fn one_pass(extra_timing: &str) -> crate::system::SystemReport {
        let text = format!(
            r#"
[machine]
preset = "xeon-e5506"
[machine.timing]
fault_cycles = 1000
{extra_timing}
[memory]
ram = "64MiB"
[[processes]]
name = "once"
pin = [0]
[[processes.threads]]
workload = {{ seed = 7, phases = [{{ pattern = "sequential", references = 32768, size = 64, icount = 2, footprint = "2MiB", base = 0x100000000 }}] }}
"#
        );
        testing::run(&text, "linux", None)
    }

    /// The clear runs in the faulting process's context in kernel mode; the process's counters
    /// and sampler count user mode (the papers' profiles are of the application's own pages,
    /// ROCS 3.1, Azimi et al. 4.2; COLORIS 5 counts user-level instructions to exclude kernel
    /// overhead: docs/system.md, "Whose counters see the clear"). So a single pass over fresh
    /// memory is served by the lines its clears stored and has almost no LLC misses of its
    /// own, while the clear's time is the process's fault time.
    #[test]
    fn a_clears_misses_are_not_counted_as_the_faulting_processs() {
        let r = one_pass("");
        let p = &r.processes[0];
        assert_eq!(p.faults, 512, "{p:?}");
        assert!(p.llc_misses * 20 < 32768, "{} LLC misses", p.llc_misses);
        assert!(
            p.kernel.fault.cycles > (p.faults * 1000) as f64,
            "the clear is charged: {:?}",
            p.kernel.fault
        );
    }

    /// Regression: the clear's time was charged as an entry into the fault path of its own, so
    /// the kernel counted each fault twice (and a fault that built a table three times) against
    /// the process's faults. A fault is one entry, its clears part of its time.
    #[test]
    fn a_fault_is_one_kernel_entry_whatever_it_clears() {
        for extra in ["", "fault_cycles_include_clear = true"] {
            let r = one_pass(extra);
            let p = &r.processes[0];
            assert_eq!(p.kernel.fault.count, p.faults, "{extra}: {:?}", p.kernel);
        }
    }

    /// Calibrated `fault_cycles` already held the real machine's clear (a first touch timed
    /// against a second), and the model charged its own clear on top: every fault paid for
    /// clearing twice. With `fault_cycles_include_clear` a fault costs `fault_cycles` alone,
    /// and the clear still stores through the caches (the pass is still served by them).
    #[test]
    fn calibrated_fault_cycles_do_not_pay_for_the_clear_twice() {
        let r = one_pass("fault_cycles_include_clear = true");
        let p = &r.processes[0];
        assert_eq!(
            p.kernel.fault.cycles,
            (p.faults * 1000) as f64,
            "{:?}",
            p.kernel
        );
        assert!(p.llc_misses * 20 < 32768, "{} LLC misses", p.llc_misses);
    }
}
