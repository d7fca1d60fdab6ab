//! What a whole-system run reports (the JSON of `cachecolor simulate SYSTEM.toml`), and the
//! tallies the engine keeps to build it; `System::report`, which assembles it and checks every
//! invariant, and the content check run at each process exit.
use super::*;
use crate::cache::hierarchy::SERVED_BY_MEMORY;
use crate::pmu::{Event, EventCounts};
use crate::timing::{Served, StallBreakdown, StallCause};
use serde::Serialize;

/// Hierarchy levels a system tallies per core and thread.
pub(crate) const MAX_LEVELS: usize = 8;

/// Kernel paths whose time is reported separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPath {
    Fault,
    Recolor,
    Shootdown,
    Scan,
    Interrupt,
    Migration,
}

pub(crate) const PATHS: usize = 6;

impl KernelPath {
    pub const ALL: [KernelPath; PATHS] = [
        KernelPath::Fault,
        KernelPath::Recolor,
        KernelPath::Shootdown,
        KernelPath::Scan,
        KernelPath::Interrupt,
        KernelPath::Migration,
    ];
}

/// Everything counted for one core or one thread. The engine adds each record's counts to its
/// core's tally and moves the difference to the running thread's at the end of every burst,
/// as an OS saves a thread's virtualised counters at a context switch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub references: u64,
    pub instructions: u64,
    /// Per hierarchy level: accesses and misses (demand references and page-walk reads).
    pub levels: [[u64; 2]; MAX_LEVELS],
    /// Accesses served by another chip's cache.
    pub remote: u64,
    /// Translations that missed every TLB (page walks).
    pub tlb_misses: u64,
    pub walk_milli: u64,
    pub faults: u64,
    /// Lines read from and written to memory because of its accesses (`Event::MemoryReads`,
    /// `MemoryWrites`).
    pub mem_reads: u64,
    pub mem_writes: u64,
    pub breakdown: StallBreakdown,
    /// Per kernel path: times taken and milli-cycles.
    pub kernel: [[u64; 2]; PATHS],
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.references += o.references;
        self.instructions += o.instructions;
        for i in 0..MAX_LEVELS {
            self.levels[i][0] += o.levels[i][0];
            self.levels[i][1] += o.levels[i][1];
        }
        self.remote += o.remote;
        self.tlb_misses += o.tlb_misses;
        self.walk_milli += o.walk_milli;
        self.faults += o.faults;
        self.mem_reads += o.mem_reads;
        self.mem_writes += o.mem_writes;
        self.breakdown.accumulate(&o.breakdown);
        for i in 0..PATHS {
            self.kernel[i][0] += o.kernel[i][0];
            self.kernel[i][1] += o.kernel[i][1];
        }
    }

    /// `self - earlier` (tallies only grow).
    pub fn since(&self, e: &Tally) -> Tally {
        let mut d = *self;
        d.references -= e.references;
        d.instructions -= e.instructions;
        for i in 0..MAX_LEVELS {
            d.levels[i][0] -= e.levels[i][0];
            d.levels[i][1] -= e.levels[i][1];
        }
        d.remote -= e.remote;
        d.tlb_misses -= e.tlb_misses;
        d.walk_milli -= e.walk_milli;
        d.faults -= e.faults;
        d.mem_reads -= e.mem_reads;
        d.mem_writes -= e.mem_writes;
        d.breakdown.completion -= e.breakdown.completion;
        for i in 0..d.breakdown.stalls.len() {
            d.breakdown.stalls[i] -= e.breakdown.stalls[i];
        }
        for i in 0..PATHS {
            d.kernel[i][0] -= e.kernel[i][0];
            d.kernel[i][1] -= e.kernel[i][1];
        }
        d
    }

    /// Count an access served at `served` (another chip's cache if `remote`) on `path`, and
    /// say where it was served for the timing model.
    #[inline]
    pub fn serve(&mut self, path: &[u8], served: u8, remote: bool) -> Served {
        self.serve_n(path, served, remote, 1)
    }

    /// `serve` for `n` such accesses at once.
    #[inline]
    pub fn serve_n(&mut self, path: &[u8], served: u8, remote: bool, n: u64) -> Served {
        self.served_n(path, served, n);
        if remote {
            self.remote += n;
            Served::Remote
        } else if served == SERVED_BY_MEMORY {
            Served::Dram
        } else {
            Served::Level(served as usize)
        }
    }

    /// `n` references of the kind whose path is `path` (level indices, top first) served at
    /// `served` (a level index or memory): every level above the one that served them missed.
    #[inline]
    pub fn served_n(&mut self, path: &[u8], served: u8, n: u64) {
        for &l in path {
            let c = &mut self.levels[l as usize];
            c[0] += n;
            if l == served {
                return;
            }
            c[1] += n;
        }
        debug_assert!(served == SERVED_BY_MEMORY || path.is_empty());
    }
}

/// Which hierarchy levels the PMU's level events count: the data path's first, second and
/// last level.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventLevels {
    pub l1d: usize,
    pub l2: Option<usize>,
    pub llc: usize,
}

impl EventLevels {
    /// The exact event counts a tally amounts to.
    pub fn events(&self, t: &Tally) -> EventCounts {
        let mut e = EventCounts::default();
        let b = &t.breakdown;
        e.set(Event::Cycles, b.total_milli() / 1000);
        e.set(Event::Instructions, t.instructions);
        e.set(Event::L1dAccesses, t.levels[self.l1d][0]);
        e.set(Event::L1dMisses, t.levels[self.l1d][1]);
        if let Some(l2) = self.l2 {
            e.set(Event::L2Accesses, t.levels[l2][0]);
            e.set(Event::L2Misses, t.levels[l2][1]);
        }
        e.set(Event::LlcAccesses, t.levels[self.llc][0]);
        e.set(Event::LlcMisses, t.levels[self.llc][1]);
        e.set(Event::TlbMisses, t.tlb_misses);
        e.set(Event::PageWalkCycles, t.walk_milli / 1000);
        e.set(Event::StallL2, b.stalls[StallCause::L2 as usize] / 1000);
        e.set(Event::StallLlc, b.stalls[StallCause::Llc as usize] / 1000);
        e.set(Event::StallDram, b.stalls[StallCause::Dram as usize] / 1000);
        e.set(
            Event::StallRemote,
            b.stalls[StallCause::Remote as usize] / 1000,
        );
        e.set(Event::StallTlb, b.stalls[StallCause::Tlb as usize] / 1000);
        e.set(Event::RemoteCacheAccesses, t.remote);
        e.set(Event::MemoryReferences, t.references);
        e.set(Event::PageFaults, t.faults);
        e.set(Event::MemoryReads, t.mem_reads);
        e.set(Event::MemoryWrites, t.mem_writes);
        e.set(
            Event::StallBandwidth,
            b.stalls[StallCause::Bandwidth as usize] / 1000,
        );
        e
    }
}

/// Cycles by cause (Azimi section 2.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StallReport {
    pub completion: f64,
    pub l2: f64,
    pub llc: f64,
    pub dram: f64,
    pub remote: f64,
    pub tlb: f64,
    pub kernel: f64,
    /// Queueing at the memory controller beyond the unloaded DRAM latency (`crate::dram`).
    pub bandwidth: f64,
}

impl StallReport {
    pub(crate) fn of(b: &StallBreakdown) -> Self {
        StallReport {
            completion: b.completion as f64 / 1000.0,
            l2: b.stall(StallCause::L2),
            llc: b.stall(StallCause::Llc),
            dram: b.stall(StallCause::Dram),
            remote: b.stall(StallCause::Remote),
            tlb: b.stall(StallCause::Tlb),
            kernel: b.stall(StallCause::Kernel),
            bandwidth: b.stall(StallCause::Bandwidth),
        }
    }
}

/// Times a kernel path was taken and the cycles it cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PathTime {
    pub count: u64,
    pub cycles: f64,
}

/// Time in each kernel path.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelReport {
    pub fault: PathTime,
    pub recolor: PathTime,
    pub shootdown: PathTime,
    pub scan: PathTime,
    pub interrupt: PathTime,
    pub migration: PathTime,
}

impl KernelReport {
    pub(crate) fn of(k: &[[u64; 2]; PATHS]) -> Self {
        let p = |path: KernelPath| PathTime {
            count: k[path as usize][0],
            cycles: k[path as usize][1] as f64 / 1000.0,
        };
        KernelReport {
            fault: p(KernelPath::Fault),
            recolor: p(KernelPath::Recolor),
            shootdown: p(KernelPath::Shootdown),
            scan: p(KernelPath::Scan),
            interrupt: p(KernelPath::Interrupt),
            migration: p(KernelPath::Migration),
        }
    }
}

/// One cache level as seen by one process or core.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelUse {
    pub name: String,
    pub accesses: u64,
    pub misses: u64,
    pub miss_rate: f64,
    pub mpki: f64,
}

pub(crate) fn level_uses(t: &Tally, names: &[String]) -> Vec<LevelUse> {
    names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let [a, m] = t.levels[i];
            LevelUse {
                name: name.clone(),
                accesses: a,
                misses: m,
                miss_rate: ratio(m, a),
                mpki: per_kilo(m, t.instructions),
            }
        })
        .collect()
}

pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

pub(crate) fn per_kilo(n: u64, instructions: u64) -> f64 {
    ratio(n * 1000, instructions)
}

/// Per-process results (the JSON's `processes` entries).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessStats {
    pub name: String,
    pub threads: usize,
    pub instructions: u64,
    pub references: u64,
    /// Cycles its threads ran (summed over threads).
    pub cycles: f64,
    pub ipc: f64,
    pub llc_accesses: u64,
    pub llc_misses: u64,
    pub llc_miss_rate: f64,
    pub llc_mpki: f64,
    /// Every level, in hierarchy order.
    pub levels: Vec<LevelUse>,
    pub remote_accesses: u64,
    pub tlb_misses: u64,
    pub page_walk_cycles: f64,
    pub faults: u64,
    /// Frames it was given (small pages; a huge page counts its frames).
    pub frames: u64,
    pub huge_pages: u64,
    /// Pages moved to another color eagerly, and lazily at their next fault.
    pub recolors: u64,
    pub lazy_recolors: u64,
    /// Pages faulted in per LLC color (the bin distribution of thesis Figure 3.3).
    pub pages_per_color: Vec<u64>,
    /// Lines read from and written to memory because of its accesses (demand, walk and
    /// prefetch reads; write-backs its fills caused).
    pub memory_reads: u64,
    pub memory_writes: u64,
    pub stalls: StallReport,
    /// Kernel work done for it (faults, its recolors and their shootdowns, samples of it).
    pub kernel: KernelReport,
}

/// A programmable counter's final reading on a core.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterReport {
    pub event: Event,
    pub raw: u64,
    pub scaled: f64,
    /// The exact count, to judge the multiplexing error.
    pub exact: u64,
    pub time_enabled: u64,
    pub time_running: u64,
}

/// Per-core results.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CoreStats {
    pub chip: usize,
    pub cycles: f64,
    pub instructions: u64,
    pub ipc: f64,
    pub levels: Vec<LevelUse>,
    pub tlb_l1_misses: u64,
    pub tlb_l2_misses: u64,
    pub memory_reads: u64,
    pub memory_writes: u64,
    pub samples: u64,
    pub context_switches: u64,
    /// Kernel work on this core, whoever it was for.
    pub kernel: KernelReport,
    /// Kernel cycles with no thread to charge them to (the core had nothing else to run).
    pub idle_kernel_cycles: f64,
    pub counters: Vec<CounterReport>,
}

/// One process in one interval of the time series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalProcess {
    pub name: String,
    pub instructions: u64,
    pub cycles: f64,
    pub ipc: f64,
    pub llc_misses: u64,
    pub llc_mpki: f64,
    /// Frames it holds at the interval's end.
    pub frames: u64,
}

/// The time series: one entry per tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Simulated time (cycles) at the interval's end.
    pub time: u64,
    pub processes: Vec<IntervalProcess>,
}

/// The time series under the `limits::series_points` bound: `stride` ticks per point.
#[derive(Debug, Clone, Default)]
pub(crate) struct Series {
    pub points: Vec<Interval>,
    stride: u64,
    /// Ticks merged into the last point so far.
    in_last: u64,
}

impl Series {
    /// Record one tick's interval.
    pub(crate) fn push(&mut self, iv: Interval) {
        let bound = crate::limits::series_points(iv.processes.len());
        let stride = self.stride.max(1);
        match self.points.last_mut() {
            Some(last) if self.in_last < stride => {
                last.absorb(iv);
                self.in_last += 1;
            }
            _ => {
                self.points.push(iv);
                self.in_last = 1;
            }
        }
        if self.points.len() > bound {
            let old = std::mem::take(&mut self.points);
            let mut it = old.into_iter();
            while let Some(mut a) = it.next() {
                if let Some(b) = it.next() {
                    a.absorb(b);
                }
                self.points.push(a);
            }
            // The bound is even, bound + 1 odd: the newest point (one tick) stays alone and goes on
            // filling up to the doubled stride.
            self.stride = stride * 2;
        }
    }
}

impl Interval {
    /// Merge the following interval into this one: counts add, rates are recomputed, frames
    /// and time are the later one's.
    pub(crate) fn absorb(&mut self, later: Interval) {
        self.time = later.time;
        for (a, b) in self.processes.iter_mut().zip(later.processes) {
            a.instructions += b.instructions;
            a.cycles += b.cycles;
            a.llc_misses += b.llc_misses;
            a.ipc = if a.cycles > 0.0 {
                a.instructions as f64 / a.cycles
            } else {
                0.0
            };
            a.llc_mpki = per_kilo(a.llc_misses, a.instructions);
            a.frames = b.frames;
        }
    }
}

/// Coherence traffic between chips.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CoherenceStats {
    /// Line accesses another chip's cache served.
    pub remote_accesses: u64,
    /// Copies removed from other chips' caches by writes.
    pub invalidations: u64,
}

/// A control run's refusals (`[policy] control`): what the policy asked the kernel to move and the
/// kernel did not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ControlStats {
    /// `recolor` calls for a page not already in the requested colors.
    pub refused_recolors: u64,
    /// `mark_for_recolor` calls (lazy moves).
    pub refused_marks: u64,
    /// `migrate` calls to another core.
    pub refused_migrations: u64,
}

/// One chip's memory controller over the run (`crate::dram`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryReport {
    /// `fixed` or `queued`.
    pub model: crate::dram::DramModel,
    /// Lines read (demand, walk, prefetch) and written by the chip's cores.
    pub reads: u64,
    pub writes: u64,
    /// The configured peak, and what the run moved over its length (the chip's cores' longest
    /// clock), in GB/s at `core_ghz`.
    pub peak_gbps: f64,
    pub achieved_gbps: f64,
    /// Mean queueing delay of a demand read (cycles; 0 under the fixed model) and the loaded
    /// latency it makes with `timing.dram_latency`, in cycles and ns.
    pub mean_queue_cycles: f64,
    pub loaded_latency_cycles: f64,
    pub loaded_latency_ns: f64,
}

/// What a run reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemReport {
    /// The version of the simulator that ran it (`crate::VERSION`).
    pub version: String,
    /// The effective config: what the run was built from, every default filled in and the
    /// machine preset expanded (STYLE.md: the effective config beside the results).
    pub config: SystemConfig,
    pub policy: String,
    pub allocator: String,
    pub chips: usize,
    pub processes: Vec<ProcessStats>,
    pub cores: Vec<CoreStats>,
    /// Per level, summed over chips.
    pub levels: Vec<crate::cache::LevelStats>,
    pub coherence: CoherenceStats,
    /// Per chip, its memory controller (`crate::dram`).
    pub memory: Vec<MemoryReport>,
    pub intervals: Vec<Interval>,
    /// What the policy reports of itself (`Policy::report`; null if nothing).
    pub policy_report: serde_json::Value,
    /// What the run's policy changed or skipped that its numbers alone do not say (`cachecolor
    /// simulate` prints them on stderr): the `warnings` its report carries, then, but in a
    /// control run, why it never acted (`Policy::never_acted`).
    pub policy_warnings: Vec<String>,
    /// Present in a control run only (`[policy] control`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlStats>,
    pub invariants: Vec<String>,
    /// The realistic PMU's estimates against the exact counts (absent under the ideal PMU).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pmu: Option<crate::pmu::PmuReport>,
}

impl System {
    /// Results so far (and every invariant checked).
    pub fn report(&self) -> SystemReport {
        let mut invariants = self.violations.clone();
        for (i, h) in self.chips.iter().enumerate() {
            for v in h.check_invariants() {
                invariants.push(if self.chips.len() > 1 {
                    format!("chip {i}: {v}")
                } else {
                    v
                });
            }
        }
        invariants.extend(self.memory.check_invariants());
        let policy_report = self
            .policy
            .as_ref()
            .map_or(serde_json::Value::Null, |p| p.report());
        let never_acted = match (&self.policy, &self.control) {
            (Some(p), None) => p.never_acted(),
            _ => None,
        };
        let llc = self.event_levels.llc;
        let processes = (0..self.processes.len())
            .map(|pid| {
                let p = &self.processes[pid];
                let t = self.process_tally(pid);
                let cycles = t.breakdown.cycles();
                let [llc_accesses, llc_misses] = t.levels[llc];
                ProcessStats {
                    name: p.name.clone(),
                    threads: p.threads.len(),
                    instructions: t.instructions,
                    references: t.references,
                    cycles,
                    ipc: if cycles > 0.0 {
                        t.instructions as f64 / cycles
                    } else {
                        0.0
                    },
                    llc_accesses,
                    llc_misses,
                    llc_miss_rate: ratio(llc_misses, llc_accesses),
                    llc_mpki: per_kilo(llc_misses, t.instructions),
                    levels: level_uses(&t, &self.level_names),
                    remote_accesses: t.remote,
                    tlb_misses: t.tlb_misses,
                    page_walk_cycles: t.walk_milli as f64 / 1000.0,
                    faults: t.faults,
                    frames: p.frames,
                    huge_pages: p.huge_pages,
                    recolors: p.recolors,
                    lazy_recolors: p.lazy_recolors,
                    pages_per_color: p.pages_per_color.clone(),
                    memory_reads: t.mem_reads,
                    memory_writes: t.mem_writes,
                    stalls: StallReport::of(&t.breakdown),
                    kernel: KernelReport::of(&p.kernel),
                }
            })
            .collect::<Vec<_>>();
        // Cycles are accounted twice: each core's clock, and the stall breakdowns of the
        // threads it ran plus its kernel work for nobody and its idle time.
        let by_threads: u64 = self
            .threads
            .iter()
            .map(|t| t.tally.breakdown.total_milli())
            .sum::<u64>()
            + self
                .cores
                .iter()
                .map(|c| {
                    c.idle_kernel_milli
                        + c.idle_milli
                        + c.tally.since(&c.burst_start).breakdown.total_milli()
                })
                .sum::<u64>();
        let by_cores: u64 = self.cores.iter().map(|c| c.clock_milli).sum();
        if by_threads != by_cores {
            invariants.push(format!(
                "cycles: threads' stall breakdowns (with idle and unattributed kernel time) sum to {} but the cores ran {}",
                by_threads as f64 / 1000.0,
                by_cores as f64 / 1000.0
            ));
        }
        let levels = (0..self.level_names.len())
            .map(|l| {
                LevelStats::from_counters(
                    &self.level_names[l],
                    self.chips.iter().flat_map(|h| h.counters(l)),
                )
            })
            .collect();
        let dram = &self.config.machine.memory;
        let memory = (0..self.chips.len())
            .map(|chip| {
                let on_chip = || self.cores.iter().filter(move |c| c.chip == chip);
                let reads: u64 = on_chip().map(|c| c.tally.mem_reads).sum();
                let writes: u64 = on_chip().map(|c| c.tally.mem_writes).sum();
                let span = on_chip().map(|c| c.clock_milli).max().unwrap_or(0) as f64 / 1000.0;
                let mean_queue_cycles = match self.controllers.get(chip) {
                    Some(ctl) => {
                        if (ctl.stats.reads, ctl.stats.writes) != (reads, writes) {
                            invariants.push(format!(
                                "memory: chip {chip}'s controller moved {} reads and {} writes but its cores counted {reads} and {writes}",
                                ctl.stats.reads, ctl.stats.writes
                            ));
                        }
                        ratio(ctl.stats.queue_milli, ctl.stats.demand_reads) / 1000.0
                    }
                    None => 0.0,
                };
                let loaded = self.timing.config.dram_latency as f64 + mean_queue_cycles;
                MemoryReport {
                    model: dram.model,
                    reads,
                    writes,
                    peak_gbps: dram.channels as f64 * dram.channel_gbps,
                    achieved_gbps: if span > 0.0 {
                        (reads + writes) as f64 * self.line_size as f64 / span * dram.core_ghz
                    } else {
                        0.0
                    },
                    mean_queue_cycles,
                    loaded_latency_cycles: loaded,
                    loaded_latency_ns: loaded / dram.core_ghz,
                }
            })
            .collect();
        SystemReport {
            memory,
            version: crate::VERSION.into(),
            config: self.config.clone(),
            policy: self.policy_name.into(),
            allocator: self.memory.allocator_name().into(),
            chips: self.chips.len(),
            processes,
            cores: self
                .cores
                .iter()
                .map(|c| {
                    let exact = self.event_levels.events(&c.tally);
                    let cycles = c.clock_milli as f64 / 1000.0;
                    CoreStats {
                        chip: c.chip,
                        cycles,
                        instructions: c.tally.instructions,
                        ipc: if cycles > 0.0 {
                            c.tally.instructions as f64 / cycles
                        } else {
                            0.0
                        },
                        levels: level_uses(&c.tally, &self.level_names),
                        tlb_l1_misses: c.tlb_l1_misses,
                        tlb_l2_misses: c.tlb_l2_misses,
                        memory_reads: c.tally.mem_reads,
                        memory_writes: c.tally.mem_writes,
                        samples: c.samples,
                        context_switches: c.context_switches,
                        kernel: KernelReport::of(&c.tally.kernel),
                        idle_kernel_cycles: c.idle_kernel_milli as f64 / 1000.0,
                        counters: c
                            .counters
                            .read()
                            .into_iter()
                            .map(|r| CounterReport {
                                event: r.event,
                                raw: r.raw,
                                scaled: r.scaled(),
                                exact: exact.get(r.event),
                                time_enabled: r.time_enabled,
                                time_running: r.time_running,
                            })
                            .collect(),
                    }
                })
                .collect(),
            levels,
            coherence: self.coherence.stats,
            intervals: self.intervals.points.clone(),
            policy_warnings: policy_warnings(&policy_report, never_acted),
            policy_report,
            control: self.control.clone(),
            invariants,
            pmu: self.pmu_report(),
        }
    }

    /// Every process's estimated counts against its exact ones, for each counted event.
    fn pmu_report(&self) -> Option<crate::pmu::PmuReport> {
        let r = self.realistic.as_ref()?;
        let pmu = &self.config.pmu;
        let mut estimates = Vec::new();
        for (pid, p) in self.processes.iter().enumerate() {
            let exact = self.event_levels.events(&self.process_tally(pid));
            let est = r.estimate(&p.threads);
            for (i, &event) in r.events.iter().enumerate() {
                let (mut enabled, mut running) = (0u64, 0u64);
                for &t in &p.threads {
                    if let Some(v) = r.threads.get(t) {
                        let reading = v.read(&r.events)[i];
                        enabled += reading.time_enabled;
                        running += reading.time_running;
                    }
                }
                let (x, e) = (exact.get(event), est.get(event));
                estimates.push(crate::pmu::EstimateReport {
                    process: p.name.clone(),
                    event,
                    exact: x,
                    estimated: e,
                    running: if enabled == 0 {
                        0.0
                    } else {
                        running as f64 / enabled as f64
                    },
                    error: if x == 0 {
                        if e == 0 {
                            0.0
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        (e as f64 - x as f64) / x as f64
                    },
                });
            }
        }
        let fixed = r.events.len() - r.events.iter().filter(|e| !pmu.fixed.contains(e)).count();
        Some(crate::pmu::PmuReport {
            sample_mode: pmu.sample_mode,
            events: r.events.clone(),
            fixed,
            counters: pmu.counters,
            multiplexed: self.cores.first().is_some_and(|c| c.counters.multiplexed()),
            estimates,
            sample_occurrences: r.hardware.iter().map(|h| h.occurrences).sum(),
            samples_missed: r.hardware.iter().map(|h| h.missed).sum(),
        })
    }

    /// Content preservation: every page of `pid` still holds what was written at its first
    /// touch (recolors copy it), in a frame the process owns.
    pub(super) fn check_contents(&mut self, pid: usize) {
        let Some(space) = &self.processes[pid].space else {
            return;
        };
        let asid = pid as u32;
        for (vpn, pte, huge) in space.mappings() {
            let n = if huge { ENTRIES } else { 1 };
            for i in 0..n {
                let pfn = pte.pfn() + i;
                if self.memory.owner(pfn) != Owner::Space(asid) {
                    self.violations.push(format!(
                        "process `{}` maps page {:#x} to frame {pfn:#x}, which it does not own",
                        self.processes[pid].name,
                        vpn + i
                    ));
                } else if self.memory.content(pfn) != page_checksum(asid, vpn + i) {
                    self.violations.push(format!(
                        "process `{}`: page {:#x} lost its contents (frame {pfn:#x})",
                        self.processes[pid].name,
                        vpn + i
                    ));
                }
            }
        }
    }
}

/// `SystemReport::policy_warnings`: the strings of the report's `warnings` (a Rust policy's
/// typed report or a Python policy's dict), then the never-acted line.
fn policy_warnings(report: &serde_json::Value, never_acted: Option<String>) -> Vec<String> {
    let own = report.get("warnings").and_then(|w| w.as_array());
    own.into_iter()
        .flatten()
        .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_owned))
        .chain(never_acted)
        .collect()
}
