//! `clear_page`: the kernel zeroes a frame before it maps it into a process, so a new owner
//! never reads an old owner's data (Linux: the anonymous fault path, `clear_user_highpage`;
//! a huge page, `clear_huge_page`, one small page at a time).
//!
//! How the zeroing meets the caches is what Linux's `clear_page` does on the machines the
//! papers ran: ordinary stores through the caches, not a non-temporal clear. On x86-64
//! (arch/x86/lib/clear_page_64.S) it is `rep stosb` / `rep stosq` (`clear_page_erms`,
//! `clear_page_rep`) or plain `movq` stores (`clear_page_orig`); on POWER
//! (arch/powerpc/include/asm/page_64.h) a `dcbz` per cache block. Both establish each line in
//! the faulting core's cache, exclusive and zeroed, without reading it from memory (`dcbz` by
//! definition; fast-string stores of whole lines without a read for ownership). A
//! non-temporal clear (`movnti`, as Xen's `clear_page_sse2`) was never Linux's `clear_page`.
//!
//! So the model, per line of the frame: the other chips' copies are invalidated (the old
//! owner's lines stop serving anyone, `Coherence::claim`), then a privileged store goes through
//! the faulting core's hierarchy, which takes the line (evicting what it must: the clearing's
//! pollution) and leaves it dirty for the new owner's first touch. No read of the line reaches
//! the memory controller; the write-backs of the dirty lines it evicts do, and the zeroed
//! lines are written back when evicted in turn. Its time is charged to the fault as the
//! timing model charges a store served where the line was taken (a line no cache held: the
//! last level's latency, where it is established without a read); `fault_cycles` is the rest.
//!
//! Known gap: the controller takes write-backs in the background and never stalls a core for
//! them, so a first-touch stream now runs at cache speed with no memory reads, where the real
//! clear is bound by the write bandwidth its zeroed lines take. A write-allocate variant (read
//! each missing line first, as `clear_page_orig`'s plain stores do) was tried and broke more.
//!
//! Page-table frames are zeroed the same way when the fault path allocates them (Linux
//! allocates them with `__GFP_ZERO`); a process's root table, allocated when it starts, at its
//! first fault. Not cleared: a page moved by recoloring (its copy overwrites every line, as
//! Linux's migration copies without clearing).

use super::*;
use crate::timing::Served;

impl System {
    /// Zero `frames` frames from `first` on (a small page: 1; a huge page: its block) from
    /// `core`, before they are mapped.
    pub(super) fn clear_frames(&mut self, core: usize, pid: usize, first: u64, frames: u64) {
        // The zeroing goes around the batch (its lines are never read from memory), so what
        // the burst deferred so far goes through first, in order.
        if self.deferring {
            self.flush_batch(core);
        }
        let chip = self.cores[core].chip;
        let local = self.cores[core].local;
        let lines = (1u64 << self.page_shift) / self.line_size;
        let last = self.chips[chip].level_names().len() - 1;
        let mut writes = 0;
        let mut stalls = crate::timing::StallBreakdown::default();
        let mut milli = 0;
        for frame in first..first + frames {
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
                writes += self.chips[chip].memory_traffic().writes - before;
                // A line no cache held is established in the last level, not read from memory.
                let at = if served == SERVED_BY_MEMORY {
                    last
                } else {
                    served as usize
                };
                milli += self.timing.reference(&mut stalls, Served::Level(at));
            }
        }
        let c = &mut self.cores[core];
        c.tally.mem_writes += writes;
        if let Some(ctl) = self.controllers.get_mut(chip) {
            ctl.background(c.clock_milli, 0, writes);
        }
        self.charge_kernel(core, KernelPath::Fault, milli.div_ceil(1000), Some(pid));
    }
}

impl System {
    /// Zero the table frames `pid`'s address space allocated since the last call.
    pub(super) fn clear_new_tables(&mut self, core: usize, pid: usize) {
        let space = self.processes[pid].space.as_mut().expect("tables");
        for table in space.take_new_tables() {
            self.clear_frames(core, pid, table, 1);
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
}
