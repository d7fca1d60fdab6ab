/*!
The batched burst as an access sink: while a burst is batched (`run_burst`), the physical
accesses its records, page walks and page copies make are collected here in order and run
through the chip as one block when the batch is flushed (`System::flush_batch`), then charged by
what each is (`Mark`). Translation and page moves send their accesses through `walk_read` and
`kernel_line`, which either run and charge an access now or add it to the batch: they never ask
whether the burst is batched.
*/
use super::*;
use crate::cache::hierarchy::MemoryStats;

/// What an access of a batched burst is, for charging it once its level is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// A demand reference on the data (0) or instruction (1) path.
    Demand(u8),
    /// A page-walk read.
    Walk,
    /// The kernel's own (a recolor's copy): state only, charged as kernel time elsewhere.
    Kernel,
}

impl Mark {
    /// The row of `flush_batch`'s counts charged for it (none for the kernel's own).
    #[inline(always)]
    pub(super) fn row(self) -> Option<usize> {
        match self {
            Mark::Kernel => None,
            Mark::Walk => Some(0),
            Mark::Demand(p) => Some(1 + p as usize),
        }
    }
}

/// The accesses of the burst being batched, and the flush's buffers (kept to reuse).
#[derive(Default)]
pub(super) struct Batch {
    /// Whether accesses are collected rather than run (a batched burst is running).
    pub(super) on: bool,
    /// The physical accesses in order, and what each is.
    pub(super) accesses: Vec<Record>,
    pub(super) marks: Vec<Mark>,
    /// Where each was served, and (under the queued model) the memory traffic of each that
    /// made any, by its index.
    pub(super) served: Vec<u8>,
    pub(super) traffic: Vec<(u32, MemoryStats)>,
    /// The running core's clock when the first access was taken (the queued model times each
    /// access from there, `System::queue_batch`).
    pub(super) start_milli: u64,
}

impl Batch {
    /// Drop what was collected (an error ended the burst) and stop collecting.
    pub(super) fn abandon(&mut self) {
        self.on = false;
        self.accesses.clear();
        self.marks.clear();
    }
}

impl System {
    /// A page walk's read of a page-table entry (`read`, a physical load) by `core`: run
    /// through the chip and charged now in full (walks are serial), returning the milli-cycles
    /// charged; or, in a batched burst, added to the batch and charged when it is flushed
    /// (returns 0).
    pub(super) fn walk_read(&mut self, core: usize, read: &Record) -> u64 {
        if self.batch.on {
            // `queue_batch` times demand accesses only: under the queued model a walk runs
            // with the batch off (`step`, `run_burst`).
            assert!(
                self.controllers.is_empty(),
                "a walk's read in a timed batch"
            );
            self.batch.accesses.push(*read);
            self.batch.marks.push(Mark::Walk);
            return 0;
        }
        let (served, remote, delay) = self.access(core, read);
        let c = &mut self.cores[core];
        let s = c.tally.serve(&self.paths[0], served, remote);
        let w = self.timing.walk_read(&mut c.tally.breakdown, s)
            + self.timing.bandwidth(&mut c.tally.breakdown, delay, true);
        c.tally.walk_milli += w;
        w
    }

    /// One line of the kernel's own work (a page copy's read or write, `rec`) by `core`: state
    /// and traffic only, its time charged as kernel work by the caller. Run through the chip
    /// now, returning its read's queueing delay (milli-cycles; 0 unless memory served it under
    /// the queued model); or, in a batched burst, added to the batch (returns 0).
    pub(super) fn kernel_line(&mut self, core: usize, rec: &Record) -> u64 {
        if self.batch.on {
            assert!(self.controllers.is_empty(), "a page copy in a timed batch");
            self.batch.accesses.push(*rec);
            self.batch.marks.push(Mark::Kernel);
            return 0;
        }
        self.access(core, rec).2
    }

    /// Add the part of `r` at `paddr` (`size` bytes, on `path`) to the batched burst.
    #[inline(always)]
    pub(super) fn defer(&mut self, core: usize, r: &Record, paddr: u64, size: u16, path: u8) {
        // Copied whole, then its fields set in place: a record assembled on the stack from
        // narrow stores and read back whole stalls the host's store forwarding (perf: a tenth
        // of `run_burst`'s samples on that one load).
        let c = &self.cores[core];
        if self.batch.accesses.is_empty() {
            self.batch.start_milli = c.clock_milli;
        }
        self.batch.accesses.push(*r);
        let part = self.batch.accesses.last_mut().expect("just pushed");
        part.addr = paddr;
        part.thread = c.local;
        part.size = size;
        // The engine prefetches each record's sets `HOST_AHEAD` records before it simulates
        // it, within the batch: the first few of a batch are prefetched here instead, while
        // the rest of the burst is translated.
        if self.batch.accesses.len() <= HOST_AHEAD {
            self.chips[c.chip].prefetch_host(self.batch.accesses.last().expect("just pushed"));
        }
        self.batch.marks.push(Mark::Demand(path));
    }

    /// Run a batched burst's accesses through the core's chip and charge them: counted by what
    /// they are (walk read, data or instruction reference) and where they were served, then
    /// charged count by count. Every charge adds to a counter nothing reads meanwhile, so this is
    /// exactly charging each in order (callgrind on examples/os/speed-4core.toml: the loop went
    /// from about 120 host instructions per access to a fraction of that).
    pub(super) fn flush_batch(&mut self, core: usize) {
        if self.batch.accesses.is_empty() {
            return;
        }
        let chip = self.cores[core].chip;
        let mut served = std::mem::take(&mut self.batch.served);
        served.clear();
        let mut traffic = std::mem::take(&mut self.batch.traffic);
        traffic.clear();
        let timed = !self.controllers.is_empty();
        let before = self.chips[chip].memory_traffic();
        if timed {
            self.chips[chip].run_block_served_traffic(
                &self.batch.accesses,
                &mut served,
                &mut traffic,
            );
        } else {
            self.chips[chip].run_block_served(&self.batch.accesses, &mut served);
        }
        let after = self.chips[chip].memory_traffic();
        // Per access, whether another chip's cache served it (only with several chips and the
        // queued model, which needs to know which reads reached the controller).
        let mut remote_of = Vec::new();
        let track_remote = self.chips.len() > 1 && timed;
        debug_assert_eq!(served.len(), self.batch.accesses.len());
        // [walk, data, instruction][level served, or MAX_LEVELS for memory][remote]
        let mut counts = [[[0u64; 2]; MAX_LEVELS + 1]; 3];
        // SERVED_BY_MEMORY (u8::MAX) goes to MAX_LEVELS, a level to itself.
        let at = |s: u8| (s as usize).min(MAX_LEVELS);
        if self.chips.len() == 1 {
            // No other chip to serve a line or to invalidate it in.
            for (&s, mark) in served.iter().zip(&self.batch.marks) {
                if let Some(row) = mark.row() {
                    counts[row][at(s)][0] += 1;
                }
            }
        } else {
            for (i, &s) in served.iter().enumerate() {
                let remote = self.coherence.after_access(
                    &mut self.chips,
                    chip,
                    &self.batch.accesses[i],
                    s == SERVED_BY_MEMORY,
                );
                if let Some(row) = self.batch.marks[i].row() {
                    counts[row][at(s)][remote as usize] += 1;
                }
                if track_remote {
                    remote_of.push(remote);
                }
            }
        }
        let c = &mut self.cores[core];
        let mut spent = 0;
        for (row, by_level) in counts.iter().enumerate() {
            let path = &self.paths[row.saturating_sub(1)];
            for (at, by_remote) in by_level.iter().enumerate() {
                let s = if at == MAX_LEVELS {
                    SERVED_BY_MEMORY
                } else {
                    at as u8
                };
                for (remote, &n) in by_remote.iter().enumerate() {
                    if n == 0 {
                        continue;
                    }
                    let served = c.tally.serve_n(path, s, remote == 1, n);
                    if row == 0 {
                        let w = self.timing.walk_reads(&mut c.tally.breakdown, served, n);
                        c.tally.walk_milli += w;
                        spent += w;
                    } else {
                        spent += self.timing.references(&mut c.tally.breakdown, served, n);
                    }
                }
            }
        }
        // Memory traffic: a line another chip's cache served was counted as a memory read by
        // the local hierarchy but never reached the controller.
        let remote_reads: u64 = (0..3).map(|row| counts[row][MAX_LEVELS][1]).sum();
        let reads = after.reads - before.reads - remote_reads;
        let writes = after.writes - before.writes;
        c.tally.mem_reads += reads;
        c.tally.mem_writes += writes;
        c.clock_milli += spent;
        if timed {
            self.queue_batch(core, &served, &traffic, &remote_of);
        }
        self.batch.accesses.clear();
        self.batch.marks.clear();
        self.batch.served = served;
        self.batch.traffic = traffic;
    }

    /// The queued memory model for a batched burst whose accesses were just charged at their
    /// unloaded latencies (`crate::dram`): each access goes to the chip's controller at the
    /// clock its record would have started at one record at a time (`Batch::start_milli`, plus
    /// every earlier record's instructions, latency and queueing delay), with its own traffic
    /// (`served_traffic`): a demand read memory served waits for its slot, overlapped by `mlp`,
    /// and the rest of its reads (prefetches) and its write-backs take slots without stalling
    /// anyone. That is `chip_access`'s order and arithmetic, so the same delays to the last
    /// milli-cycle as records one at a time: the batch holds one TLB-hit access per record
    /// (`step` sends walks, faults and records crossing pages one at a time under this model),
    /// and nothing else moves the core's clock or reaches the controller meanwhile.
    fn queue_batch(
        &mut self,
        core: usize,
        served: &[u8],
        served_traffic: &[(u32, crate::cache::hierarchy::MemoryStats)],
        remote_of: &[bool],
    ) {
        let chip = self.cores[core].chip;
        let floor =
            self.threads[self.cores[core].current.expect("a burst runs a thread")].icount_floor;
        let c = &mut self.cores[core];
        let ctl = &mut self.controllers[chip];
        let timing = &self.timing;
        // What `reference` charges for an access served at each level, or by memory (the
        // last entry), or by another chip.
        let latency_at: [u64; MAX_LEVELS + 1] = std::array::from_fn(|l| {
            timing.reference_milli(if l == MAX_LEVELS {
                crate::timing::Served::Dram
            } else {
                crate::timing::Served::Level(l.min(self.level_names.len() - 1))
            })
        });
        let remote_latency = timing.reference_milli(crate::timing::Served::Remote);
        let remote = |i: usize| !remote_of.is_empty() && remote_of[i];
        let latency_of = |i: usize| {
            let s = served[i];
            if remote(i) {
                remote_latency
            } else {
                latency_at[(s as usize).min(MAX_LEVELS)]
            }
        };
        let accesses = &self.batch.accesses;
        debug_assert!(self
            .batch
            .marks
            .iter()
            .all(|m| matches!(m, Mark::Demand(_))));
        // Only the accesses that made traffic reach the controller; the clock at each is the
        // batch's start plus what every record before it was charged (a sum per stretch
        // between two of them: `instructions` charges linearly).
        let mut at = self.batch.start_milli;
        let mut queued = 0;
        let mut next = 0;
        for &(j, t) in served_traffic {
            let j = j as usize;
            let mut instructions = 0;
            for (i, a) in (next..j).zip(&accesses[next..j]) {
                instructions += (a.icount as u64).max(floor);
                at += latency_of(i);
            }
            at += timing.instructions_milli(instructions);
            let by_memory = served[j] == SERVED_BY_MEMORY;
            let remote = remote(j);
            // As `chip_access`: a line another chip's cache served never reached the
            // controller, though the local hierarchy counted it as a read from memory.
            let reads = t.reads - (by_memory && remote) as u64;
            let mut background = reads;
            let mut delay = 0;
            if by_memory && !remote && reads > 0 {
                delay = ctl.read(at);
                background -= 1;
            }
            ctl.background(at, background, t.writes);
            let waited = timing.bandwidth(&mut c.tally.breakdown, delay, false);
            queued += waited;
            at += timing.instructions_milli((accesses[j].icount as u64).max(floor))
                + latency_of(j)
                + waited;
            next = j + 1;
        }
        c.clock_milli += queued;
    }
}
