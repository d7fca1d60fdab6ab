/*!
The simulated machine and its kernel: chips of cores with TLBs and a cache hierarchy each,
kept coherent; physical memory with a page-frame allocator; processes with page tables and
threads fed by traces or generators; a scheduler; the PMU; and the policy that decides page
colors, fed by ticks, samples and scheduler events (DESIGN.md "How one memory reference flows",
"The policy trait").

For each record of a running thread:
1. translate each page it touches: the core's L1 TLB (data or instruction), then the L2 TLB,
   then a page walk whose every entry read is a physical load through the caches (its latency
   charged in full, serially); an unmapped page faults: the policy gives the allowed colors, the
   allocator a frame (a 2 MiB block in a huge-page region), the page is mapped (fault cost
   charged); a page marked for lazy recoloring is moved now if its color is no longer allowed;
2. send the physical reference through its chip's hierarchy; a miss there that another chip's
   caches hold is served remotely, and a write removes other chips' copies (`coherence`);
   charge the latency of whatever served it (timing model);
3. charge `max(icount, 1)` instructions at the base CPI (a record is at least one instruction);
4. count it in the core's tally (the PMU's exact counts); every `period`-th occurrence of the
   sampled event interrupts: the policy gets the sample, the core pays the handler.

The engine always advances the core with the smallest clock (lowest index on ties), a burst of
records at a time, so a thread that misses more progresses more slowly, as on real hardware.
Threads run round-robin on their core with a time slice; an idle core takes a waiting thread
from the busiest one. Every `tick` cycles the policy gets the counters' readings and the report
records a point of its time series. Everything is deterministic.
*/
mod address_check;
mod coherence;
mod config;
pub mod detect;
mod kernel;
pub mod presets;
mod report;

pub use config::{
    MachineConfig, PmuConfig, ProcessConfig, SchedulerConfig, SystemConfig, ThreadConfig,
    TlbsConfig,
};
pub use presets::{system_config_from_json, system_config_from_toml};
pub use report::{
    CoherenceStats, CoreStats, CounterReport, Interval, IntervalProcess, KernelPath, KernelReport,
    LevelUse, PathTime, ProcessStats, StallReport, SystemReport,
};

use crate::cache::hierarchy::{Serves, SERVED_BY_MEMORY};
use crate::cache::{Hierarchy, LevelStats};
use crate::error::{ConfigError, Error};
use crate::memory::{AllocRequest, ColorSet, MemoryError, Owner, PhysicalMemory};
use crate::mmu::{AddressSpace, Tlb, TlbConfig, Translation, WalkOutcome, ENTRIES};
use crate::pmu::{CounterSet, DataSource, Event, EventCounts, Sample, Sampler};
use crate::policy::{self, Policy, ProcessCounts, ProcessInfo, SchedEvent, Tick};
use crate::timing::{StallCause, Timing};
use crate::trace::{self, Format, Kind, Record, RecordSource};
use crate::workload::Workload;
use coherence::Coherence;
use report::{level_uses, per_kilo, ratio, EventLevels, Tally, MAX_LEVELS, PATHS};
use std::collections::VecDeque;

struct Thread {
    pid: usize,
    source: Box<dyn RecordSource + Send>,
    buf: Vec<Record>,
    pos: usize,
    done: bool,
    /// The core whose run queue holds it (or that runs it).
    core: usize,
    /// Pinned threads are never moved by load balancing.
    pinned: bool,
    tally: Tally,
}

struct Process {
    name: String,
    space: Option<AddressSpace>,
    threads: Vec<usize>,
    threads_left: usize,
    frames: u64,
    huge_pages: u64,
    recolors: u64,
    lazy_recolors: u64,
    pages_per_color: Vec<u64>,
    /// Kernel work done for it, per path.
    kernel: [[u64; 2]; PATHS],
    /// Virtual page ranges `[start, end)` backed by huge pages.
    huge: Vec<(u64, u64)>,
    /// Exact counts at the previous tick.
    last_tick: EventCounts,
    /// Cycle at which it is created (`ProcessConfig::start`).
    start: u64,
    /// What it starts with, until it starts (`System::start_process`).
    arrival: Option<Arrival>,
}

/// A process configured to start later: what `System::start_process` needs to create it.
struct Arrival {
    colors: Option<ColorSet>,
    pin: Option<Vec<usize>>,
    sources: Vec<Box<dyn RecordSource + Send>>,
}

struct Core {
    chip: usize,
    /// Index of the core within its chip's hierarchy.
    local: u32,
    clock_milli: u64,
    current: Option<usize>,
    slice_end: u64,
    queue: VecDeque<usize>,
    tlbs: [Tlb; 3],
    tally: Tally,
    /// The tally when the running thread's counts were last saved.
    burst_start: Tally,
    /// Kernel work done with no thread to charge it to, and time spent with nothing to run.
    idle_kernel_milli: u64,
    idle_milli: u64,
    counters: CounterSet,
    observed: EventCounts,
    observed_at: u64,
    next_mux: u64,
    sampler: Option<Sampler>,
    samples: u64,
    context_switches: u64,
    tlb_l1_misses: u64,
    tlb_l2_misses: u64,
    /// Physical address of the sample handler's own data (allocated at its first use).
    handler_data: Option<u64>,
}

impl Core {
    /// The frame of `vpn` of `asid` if the L1 TLB of `kind`'s path or the L2 TLB holds it
    /// (an L2 hit fills the L1 TLB), else `None` with both misses counted: the caller walks.
    #[inline(always)]
    fn tlb_translate(&mut self, asid: u32, vpn: u64, kind: Kind) -> Option<u64> {
        let l1 = if kind.is_instruction() { L1I } else { L1D };
        if let Some(t) = self.tlbs[l1].lookup(asid, vpn) {
            return Some(t.pfn);
        }
        self.tlb_l1_misses += 1;
        let t = self.tlbs[L2TLB].lookup(asid, vpn)?;
        // The L1 lookup just missed both of the entries that could hold `vpn`.
        self.tlbs[l1].insert_absent(asid, vpn, t);
        Some(t.pfn)
    }
}

/// A machine running processes under a policy.
pub struct System {
    chips: Vec<Hierarchy>,
    coherence: Coherence,
    memory: PhysicalMemory,
    timing: Timing,
    /// Taken out while one of its hooks runs (the hook gets the rest of the system as `Kernel`).
    policy: Option<Box<dyn Policy>>,
    policy_name: &'static str,
    cores: Vec<Core>,
    processes: Vec<Process>,
    threads: Vec<Thread>,
    page_shift: u32,
    line_size: u64,
    level_names: Vec<String>,
    /// Level indices on the data and on the instruction path, top first.
    paths: [Vec<u8>; 2],
    event_levels: EventLevels,
    slice_milli: u64,
    tick_milli: u64,
    next_tick: u64,
    mux_milli: u64,
    balance: bool,
    pending: Vec<SchedEvent>,
    intervals: report::Series,
    violations: Vec<String>,
    /// A burst being batched (`run_burst`): its physical accesses in order, what each is, and
    /// where each was served.
    deferring: bool,
    batching: bool,
    /// Samples taken during the current record, for the policy once the record is done.
    samples_due: Vec<Sample>,
    batch: Vec<Record>,
    batch_marks: Vec<Mark>,
    batch_served: Vec<u8>,
    /// Processes not started yet, by start cycle (then pid).
    arrivals: VecDeque<usize>,
    /// Page-table shape of every address space, and the next core an unpinned thread gets.
    mmu: crate::mmu::PageTableConfig,
    next_core: usize,
}

/// What an access of a batched burst is, for charging it once its level is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
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
    fn row(self) -> Option<usize> {
        match self {
            Mark::Kernel => None,
            Mark::Walk => Some(0),
            Mark::Demand(p) => Some(1 + p as usize),
        }
    }
}

const BURST: usize = 64;
/// How far ahead in a thread's records the host prefetch looks (as the lean engine's `AHEAD`).
const HOST_AHEAD: usize = 12;
const L1D: usize = 0;
const L1I: usize = 1;
const L2TLB: usize = 2;
/// log2 of the pages in a huge page (2 MiB of 4 KiB pages).
const HUGE_ORDER: u32 = ENTRIES.trailing_zeros();

/// The modelled contents a page gets at its first touch (never 0, which marks a free frame).
fn page_checksum(asid: u32, vpn: u64) -> u64 {
    crate::rng::mix64((asid as u64) << 44 ^ vpn) | 1
}

impl System {
    /// The system `config` describes, under the policy its `[policy]` names.
    pub fn new(config: &SystemConfig) -> Result<System, Error> {
        Self::build(config, None)
    }

    /// The system `config` describes, under a policy of the caller's (a policy written outside
    /// this crate, or a test's).
    pub fn with_policy(config: &SystemConfig, policy: Box<dyn Policy>) -> Result<System, Error> {
        Self::build(config, Some(policy))
    }

    fn build(config: &SystemConfig, policy: Option<Box<dyn Policy>>) -> Result<System, Error> {
        let m = &config.machine;
        if !(1..=32).contains(&m.chips) {
            return Err(ConfigError::new(
                "machine.chips",
                format!("{}: allowed 1..=32 chips", m.chips),
            )
            .into());
        }
        let hierarchy = Hierarchy::new(&m.hierarchy)
            .map_err(|e| ConfigError::new(format!("machine.hierarchy.{}", e.field), e.message))?;
        let hc = hierarchy.config().clone();
        if hc.levels.len() > MAX_LEVELS {
            return Err(ConfigError::new(
                "machine.hierarchy.levels",
                format!(
                    "{} levels: a system models at most {MAX_LEVELS}",
                    hc.levels.len()
                ),
            )
            .into());
        }
        let per_chip = hc.cores as usize;
        let cores = per_chip * m.chips as usize;
        let page_size = hc.page_size.0;
        let llc = hc.levels.len() - 1;
        let colors = hierarchy.cache(llc, 0).geometry().colors();
        let timing = Timing::new(&m.timing, hc.levels.len())
            .map_err(|e| ConfigError::new(format!("machine.{}", e.field), e.message))?;
        if m.chips > 1 && m.timing.remote_latency == 0 {
            return Err(ConfigError::new(
                "machine.timing.remote_latency",
                "a machine of several chips needs the latency of a read served by another chip's cache",
            )
            .into());
        }
        AddressSpace::validate(&m.mmu)?;
        let memory = PhysicalMemory::new(&config.memory, page_size, colors, cores)?;
        let policy = match policy {
            Some(p) => p,
            None => {
                let g = hierarchy.cache(llc, 0).geometry();
                let machine = policy::MachineInfo {
                    cores,
                    chips: m.chips as usize,
                    colors,
                    llc_size: g.size(),
                    llc_ways: g.ways(),
                    line_size: hc.line_size as u64,
                    page_size,
                };
                policy::build(&config.policy, &machine)?
            }
        };
        let names: Vec<String> = config.processes.iter().map(|p| p.name.clone()).collect();
        policy.check_processes(&names)?;
        let s = &config.scheduler;
        if s.time_slice == 0 || s.tick == 0 {
            return Err(ConfigError::new(
                "scheduler",
                "time_slice and tick must be at least 1 cycle",
            )
            .into());
        }
        let pmu = &config.pmu;
        if pmu.mux_interval == 0 {
            return Err(ConfigError::new("pmu.mux_interval", "must be at least 1 cycle").into());
        }
        let counters = CounterSet::new(pmu.counters, &pmu.events)?;
        let sampler = match &pmu.sampling {
            Some(sc) => {
                if !sc.event.has_data_address() {
                    return Err(ConfigError::new(
                        "pmu.sampling.event",
                        format!(
                            "`{}` has no data address to sample; sample one of l1d-accesses, l1d-misses, l2-accesses, l2-misses, llc-accesses, llc-misses, tlb-misses, remote-cache-accesses, memory-references",
                            sc.event.name()
                        ),
                    )
                    .into());
                }
                let max = page_size / hc.line_size as u64;
                if sc.pollute_l1_lines as u64 > max {
                    return Err(ConfigError::new(
                        "pmu.sampling.pollute_l1_lines",
                        format!(
                            "{}: the handler's data is one page, at most {max} lines",
                            sc.pollute_l1_lines
                        ),
                    )
                    .into());
                }
                Some(Sampler::new(sc.clone())?)
            }
            None => None,
        };
        let mut paths = [Vec::new(), Vec::new()];
        for (i, l) in hc.levels.iter().enumerate() {
            if l.serves != Serves::Instruction {
                paths[0].push(i as u8);
            }
            if l.serves != Serves::Data {
                paths[1].push(i as u8);
            }
        }
        let data = &paths[0];
        let event_levels = EventLevels {
            l1d: data.first().map_or(0, |&l| l as usize),
            l2: (data.len() > 2).then(|| data[1] as usize),
            llc,
        };
        let tlb = |c: &TlbConfig, name: &str| {
            Tlb::new(c).map_err(|e| ConfigError::new(format!("machine.tlb.{name}"), e.message))
        };
        let mut core_list = Vec::with_capacity(cores);
        for c in 0..cores {
            core_list.push(Core {
                chip: c / per_chip,
                local: (c % per_chip) as u32,
                clock_milli: 0,
                current: None,
                slice_end: 0,
                queue: VecDeque::new(),
                tlbs: [
                    tlb(&m.tlb.l1d, "l1d")?,
                    tlb(&m.tlb.l1i, "l1i")?,
                    tlb(&m.tlb.l2, "l2")?,
                ],
                tally: Tally::default(),
                burst_start: Tally::default(),
                idle_kernel_milli: 0,
                idle_milli: 0,
                counters: counters.clone(),
                observed: EventCounts::default(),
                observed_at: 0,
                next_mux: pmu.mux_interval * 1000,
                sampler: sampler.clone(),
                samples: 0,
                context_switches: 0,
                tlb_l1_misses: 0,
                tlb_l2_misses: 0,
                handler_data: None,
            });
        }
        if config.processes.is_empty() {
            return Err(
                ConfigError::new("processes", "a system needs at least one [[processes]]").into(),
            );
        }
        let mut sys = System {
            chips: (0..m.chips).map(|_| hierarchy.clone()).collect(),
            coherence: Coherence::new(hc.line_size),
            memory,
            timing,
            policy_name: policy.name(),
            policy: Some(policy),
            cores: core_list,
            processes: Vec::new(),
            threads: Vec::new(),
            page_shift: page_size.trailing_zeros(),
            line_size: hc.line_size as u64,
            level_names: hc.levels.iter().map(|l| l.name.clone()).collect(),
            paths,
            event_levels,
            slice_milli: s.time_slice * 1000,
            tick_milli: s.tick * 1000,
            next_tick: s.tick * 1000,
            mux_milli: pmu.mux_interval * 1000,
            balance: s.balance,
            pending: Vec::new(),
            intervals: report::Series::default(),
            violations: Vec::new(),
            deferring: false,
            batching: true,
            samples_due: Vec::new(),
            batch: Vec::new(),
            batch_marks: Vec::new(),
            batch_served: Vec::new(),
            arrivals: VecDeque::new(),
            mmu: m.mmu.clone(),
            next_core: 0,
        };
        for (pid, p) in config.processes.iter().enumerate() {
            sys.add_process(pid, p)?;
        }
        let mut later: Vec<usize> = (0..sys.processes.len())
            .filter(|&pid| sys.processes[pid].arrival.is_some())
            .collect();
        later.sort_by_key(|&pid| (sys.processes[pid].start, pid));
        sys.arrivals = later.into();
        Ok(sys)
    }

    /// Check process `pid`'s config and open its threads' sources; create it now if it starts
    /// at cycle 0 (in config order, as every process did before `start` existed), else leave
    /// it for `run` to create at its start.
    fn add_process(&mut self, pid: usize, p: &ProcessConfig) -> Result<(), Error> {
        let cores = self.cores.len();
        let colors = self.memory.colors();
        let field = |k: &str| format!("processes[{pid}].{k}");
        if p.threads.is_empty() {
            return Err(
                ConfigError::new(field("threads"), "a process needs at least one thread").into(),
            );
        }
        let colors_set = match &p.colors {
            Some(ranges) => {
                let mut set = ColorSet::empty(colors);
                for &[a, b] in ranges {
                    if a >= b || b > colors {
                        return Err(ConfigError::new(
                            field("colors"),
                            format!("range [{a}, {b}) is not within this LLC's colors 0..{colors}"),
                        )
                        .into());
                    }
                    for c in a..b {
                        set.insert(c);
                    }
                }
                Some(set)
            }
            None => None,
        };
        if let Some(pin) = &p.pin {
            if pin.is_empty() || pin.iter().any(|&c| c >= cores) {
                return Err(ConfigError::new(
                    field("pin"),
                    format!("{pin:?}: pinned cores must be within 0..{cores}"),
                )
                .into());
            }
        }
        let huge_bytes = ENTRIES << self.page_shift;
        let mut huge = Vec::new();
        for &[a, b] in p.huge_pages.iter().flatten() {
            if a >= b || a % huge_bytes != 0 || b % huge_bytes != 0 {
                return Err(ConfigError::new(
                    field("huge_pages"),
                    format!(
                        "[{a:#x}, {b:#x}): a huge-page range must be non-empty and start and end on a multiple of {huge_bytes:#x} bytes"
                    ),
                )
                .into());
            }
            huge.push((a >> self.page_shift, b >> self.page_shift));
        }
        let mut sources = Vec::with_capacity(p.threads.len());
        for (t, tc) in p.threads.iter().enumerate() {
            let source: Box<dyn RecordSource + Send> = match (&tc.workload, &tc.trace) {
                (Some(w), None) => Box::new(Workload::new(w).map_err(|e| {
                    ConfigError::new(
                        format!("processes[{pid}].threads[{t}].workload.{}", e.field),
                        e.message,
                    )
                })?),
                (None, Some(path)) => trace::open(path, Format::parse(&tc.format)?)?,
                _ => {
                    return Err(ConfigError::new(
                        format!("processes[{pid}].threads[{t}]"),
                        "give exactly one of `workload` or `trace`",
                    )
                    .into())
                }
            };
            // Addresses the page tables cannot translate are bad input (address_check.rs).
            let what = match &tc.trace {
                Some(path) => format!("processes[{pid}].threads[{t}] (trace {})", path.display()),
                None => format!("processes[{pid}].threads[{t}] (workload)"),
            };
            let source: Box<dyn RecordSource + Send> = Box::new(address_check::AddressCheck::new(
                source,
                what,
                self.page_shift,
                self.mmu.levels,
            ));
            sources.push(source);
        }
        self.processes.push(Process {
            name: p.name.clone(),
            space: None,
            threads_left: 0,
            threads: Vec::new(),
            frames: 0,
            huge_pages: 0,
            recolors: 0,
            lazy_recolors: 0,
            pages_per_color: vec![0; colors as usize],
            kernel: [[0; 2]; PATHS],
            huge,
            last_tick: EventCounts::default(),
            start: p.start,
            arrival: Some(Arrival {
                colors: colors_set,
                pin: p.pin.clone(),
                sources,
            }),
        });
        if p.start == 0 {
            self.start_process(pid)?;
        }
        Ok(())
    }

    /// Create process `pid` (at its start): the policy places it, it gets its address space,
    /// and its threads join their cores' run queues. An idle core that takes one of its threads
    /// waits (idle) until the start.
    fn start_process(&mut self, pid: usize) -> Result<(), Error> {
        let a = self.processes[pid].arrival.take().expect("started once");
        let placement = self
            .policy
            .as_mut()
            .expect("policy present")
            .process_created(&ProcessInfo {
                pid,
                name: self.processes[pid].name.clone(),
                colors: a.colors,
                pinned: a.pin.clone(),
            });
        let pin = placement.pin.or(a.pin);
        let page_size = 1u64 << self.page_shift;
        let space =
            AddressSpace::new(pid as u32, &self.mmu, &mut self.memory, page_size).map_err(|e| {
                ConfigError::new("memory.ram", format!("no frame for page tables: {e}"))
            })?;
        let start_milli = self.processes[pid].start * 1000;
        let cores = self.cores.len();
        let mut tids = Vec::with_capacity(a.sources.len());
        for (t, source) in a.sources.into_iter().enumerate() {
            let core = match &pin {
                Some(pin) => pin[t % pin.len()],
                None => {
                    let c = self.next_core % cores;
                    self.next_core += 1;
                    c
                }
            };
            let c = &mut self.cores[core];
            if c.current.is_none() && c.queue.is_empty() && c.clock_milli < start_milli {
                c.idle_milli += start_milli - c.clock_milli;
                c.clock_milli = start_milli;
            }
            let tid = self.threads.len();
            c.queue.push_back(tid);
            tids.push(tid);
            self.threads.push(Thread {
                pid,
                source,
                buf: Vec::new(),
                pos: 0,
                done: false,
                core,
                pinned: pin.is_some(),
                tally: Tally::default(),
            });
        }
        let p = &mut self.processes[pid];
        p.space = Some(space);
        p.threads_left = tids.len();
        p.threads = tids;
        Ok(())
    }

    /// Run every thread to its end.
    pub fn run(&mut self) -> Result<(), Error> {
        loop {
            if self.balance {
                self.balance_idle_cores();
            }
            let next = (0..self.cores.len())
                .filter(|&c| self.cores[c].current.is_some() || !self.cores[c].queue.is_empty())
                .min_by_key(|&c| (self.cores[c].clock_milli, c));
            // A process whose start the busy cores have all reached (or that nothing else
            // precedes) starts now.
            if let Some(&pid) = self.arrivals.front() {
                let start = self.processes[pid].start * 1000;
                if next.is_none_or(|c| self.cores[c].clock_milli >= start) {
                    // Ticks before its start do not see it (with every core idle, none fired).
                    while self.next_tick <= start {
                        let at = self.next_tick;
                        self.tick(Some(next.unwrap_or(0)), at);
                        self.next_tick += self.tick_milli;
                    }
                    self.arrivals.pop_front();
                    self.start_process(pid)?;
                    continue;
                }
            }
            let Some(core) = next else {
                // The last interval, cut where the run ended.
                let end = self.cores.iter().map(|c| c.clock_milli).max().unwrap_or(0);
                if end > self.next_tick - self.tick_milli {
                    self.tick(None, end);
                }
                return Ok(());
            };
            while self.cores[core].clock_milli >= self.next_tick {
                let at = self.next_tick;
                self.tick(Some(core), at);
                self.next_tick += self.tick_milli;
            }
            let c = &self.cores[core];
            if c.current.is_none() && c.queue.is_empty() {
                continue; // the tick's policy moved its work elsewhere
            }
            self.run_burst(core)?;
            self.deliver_events();
        }
    }

    /// Give each idle core a waiting, unpinned thread from the core with the longest queue;
    /// the idle core's clock moves on to the moment it takes it.
    fn balance_idle_cores(&mut self) {
        for idle in 0..self.cores.len() {
            if self.cores[idle].current.is_some() || !self.cores[idle].queue.is_empty() {
                continue;
            }
            let busiest = (0..self.cores.len())
                .filter(|&c| self.cores[c].queue.iter().any(|&t| !self.threads[t].pinned))
                .max_by_key(|&c| (self.cores[c].queue.len(), std::cmp::Reverse(c)));
            let Some(from) = busiest else { return };
            let pos = self.cores[from]
                .queue
                .iter()
                .rposition(|&t| !self.threads[t].pinned)
                .expect("filtered");
            let tid = self.cores[from].queue.remove(pos).expect("in range");
            let now = self.cores[from].clock_milli;
            let c = &mut self.cores[idle];
            if c.clock_milli < now {
                c.idle_milli += now - c.clock_milli;
                c.clock_milli = now;
            }
            c.queue.push_back(tid);
            self.threads[tid].core = idle;
            self.pending.push(SchedEvent::Migrated {
                tid,
                from,
                to: idle,
            });
        }
    }

    /// Move what `core` counted since the last save to the thread that was running.
    fn save_counts(&mut self, core: usize) {
        let c = &mut self.cores[core];
        if let Some(t) = c.current {
            let d = c.tally.since(&c.burst_start);
            self.threads[t].tally.add(&d);
        }
        c.burst_start = c.tally;
    }

    fn run_burst(&mut self, core: usize) -> Result<(), Error> {
        self.save_counts(core);
        let clock = self.cores[core].clock_milli;
        let c = &mut self.cores[core];
        let tid = match c.current {
            Some(t) if clock < c.slice_end || c.queue.is_empty() => t,
            prev => {
                // Start, or the time slice is over and another thread waits: round-robin.
                if let Some(t) = prev {
                    c.queue.push_back(t);
                }
                let n = c.queue.pop_front().expect("checked by run");
                c.current = Some(n);
                c.slice_end = clock + self.slice_milli;
                c.context_switches += 1;
                self.pending.push(SchedEvent::Switch {
                    core,
                    from: prev,
                    to: n,
                });
                n
            }
        };
        // Without a sampler to interrupt it (and a hierarchy the lean engine runs), a burst is
        // batched: its records are translated in order, their physical accesses (walk reads,
        // data, a recolor's copies) collected and run through the hierarchy as one block with
        // its look-ahead, then charged in order. The same accesses in the same order as one at
        // a time: translation never depends on the caches, and nothing else runs meanwhile.
        let chip = self.cores[core].chip;
        let batched = self.batching
            && self.cores[core].sampler.is_none()
            && self.chips[chip].uses_lean_engine();
        self.deferring = batched;
        // The burst's records, a few host lines of a thread buffer the other cores' bursts
        // have since pushed out of the host's caches: fetched together rather than one miss
        // at a time as the loop reaches them.
        let th = &self.threads[tid];
        let ahead = th.buf.len().min(th.pos + BURST + HOST_AHEAD);
        let line_records = (64 / std::mem::size_of::<Record>()).max(1);
        for i in (th.pos..ahead).step_by(line_records) {
            crate::cache::prefetch_read(&th.buf[i]);
        }
        if batched {
            // The L2 TLB sets of the burst's first records: the loop prefetches them
            // `HOST_AHEAD` records ahead, but what it prefetched for them at the end of the
            // thread's previous burst is gone after the other cores' bursts (perf: a hit's
            // loads of keys, frame and last use stalled on most of `translate`'s samples).
            let tlb = &self.cores[core].tlbs[L2TLB];
            for r in &th.buf[th.pos..th.buf.len().min(th.pos + HOST_AHEAD)] {
                tlb.prefetch(r.addr >> self.page_shift);
            }
        }
        let mut exited = false;
        let mut left = BURST;
        while left > 0 {
            let mut walked = None;
            if batched {
                let (taken, walk) = self.burst_hits(core, tid, left);
                left -= taken;
                if walk.is_none() && left == 0 {
                    break;
                }
                // Else a record whose TLB lookups missed, or the next record crosses a page or
                // the buffer needs refilling: as unbatched.
                walked = walk;
            }
            let stepped = match walked {
                Some(r) => self.step_walked(core, tid, &r),
                None => {
                    left -= 1;
                    let th = &mut self.threads[tid];
                    if th.pos == th.buf.len() {
                        th.pos = 0;
                        match th.source.next_block(&mut th.buf) {
                            Ok(true) => {}
                            Ok(false) => {
                                exited = true;
                                break;
                            }
                            Err(e) => {
                                self.abandon_batch();
                                return Err(e.into());
                            }
                        }
                    }
                    let th = &mut self.threads[tid];
                    let r = th.buf[th.pos];
                    th.pos += 1;
                    if let Some(&ahead) = th.buf.get(th.pos + HOST_AHEAD) {
                        if batched {
                            // The L2 TLB set that record's translation will look up (the
                            // engine and `step` prefetch the cache sets once translated).
                            self.cores[core].tlbs[L2TLB].prefetch(ahead.addr >> self.page_shift);
                        } else {
                            let pid = th.pid;
                            self.host_prefetch(core, pid, &ahead);
                        }
                    }
                    self.step(core, tid, &r)
                }
            };
            if let Err(e) = stepped {
                self.abandon_batch();
                return Err(e);
            }
            self.deliver_samples(core);
            if self.cores[core].current != Some(tid) {
                break; // a policy moved it elsewhere
            }
        }
        if batched {
            self.deferring = false;
            self.flush_batch(core);
        }
        if exited {
            self.threads[tid].done = true;
            self.save_counts(core);
            self.cores[core].current = None;
            self.thread_exited(tid);
        }
        self.save_counts(core);
        self.rotate_counters(core);
        Ok(())
    }

    /// An error ended a burst: its batched accesses are dropped with it.
    fn abandon_batch(&mut self) {
        self.deferring = false;
        self.batch.clear();
        self.batch_marks.clear();
    }

    /// Hand the samples a record's access took to the policy.
    #[inline(always)]
    fn deliver_samples(&mut self, core: usize) {
        if !self.samples_due.is_empty() {
            for sample in std::mem::take(&mut self.samples_due) {
                self.run_hook(core, |p, k| p.sample(k, &sample));
            }
        }
    }

    /// Run a batched burst's accesses through the core's chip and charge them: counted by what
    /// they are (walk read, data or instruction reference) and where they were served, then
    /// charged count by count. Every charge adds to a counter nothing reads meanwhile, so this is
    /// exactly charging each in order (callgrind on examples/os/speed-4core.toml: the loop went
    /// from about 120 host instructions per access to a fraction of that).
    fn flush_batch(&mut self, core: usize) {
        if self.batch.is_empty() {
            return;
        }
        let chip = self.cores[core].chip;
        let mut served = std::mem::take(&mut self.batch_served);
        served.clear();
        self.chips[chip].run_block_served(&self.batch, &mut served);
        debug_assert_eq!(served.len(), self.batch.len());
        // [walk, data, instruction][level served, or MAX_LEVELS for memory][remote]
        let mut counts = [[[0u64; 2]; MAX_LEVELS + 1]; 3];
        // SERVED_BY_MEMORY (u8::MAX) goes to MAX_LEVELS, a level to itself.
        let at = |s: u8| (s as usize).min(MAX_LEVELS);
        if self.chips.len() == 1 {
            // No other chip to serve a line or to invalidate it in.
            for (&s, mark) in served.iter().zip(&self.batch_marks) {
                if let Some(row) = mark.row() {
                    counts[row][at(s)][0] += 1;
                }
            }
        } else {
            for (i, &s) in served.iter().enumerate() {
                let remote = self.coherence.after_access(
                    &mut self.chips,
                    chip,
                    &self.batch[i],
                    s == SERVED_BY_MEMORY,
                );
                if let Some(row) = self.batch_marks[i].row() {
                    counts[row][at(s)][remote as usize] += 1;
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
        c.clock_milli += spent;
        self.batch.clear();
        self.batch_marks.clear();
        self.batch_served = served;
    }

    /// The multiplexing timer: the counters see what the core counted, and rotate when due.
    fn rotate_counters(&mut self, core: usize) {
        let c = &mut self.cores[core];
        if c.clock_milli < c.next_mux {
            return;
        }
        self.observe(core);
        let c = &mut self.cores[core];
        while c.clock_milli >= c.next_mux {
            c.counters.rotate();
            c.next_mux += self.mux_milli;
        }
    }

    /// Feed the core's counters everything counted since they last looked.
    fn observe(&mut self, core: usize) {
        let events = self.event_levels.events(&self.cores[core].tally);
        let c = &mut self.cores[core];
        let delta = events.since(&c.observed);
        let cycles = (c.clock_milli - c.observed_at) / 1000;
        c.counters.observe(&delta, cycles);
        c.observed = events;
        c.observed_at += cycles * 1000;
    }

    fn deliver_events(&mut self) {
        let mut rounds = 0;
        while !self.pending.is_empty() && rounds < 16 {
            rounds += 1;
            for e in std::mem::take(&mut self.pending) {
                let core = match e {
                    SchedEvent::Switch { core, .. } => core,
                    SchedEvent::Migrated { to, .. } => to,
                    SchedEvent::Exited { tid } => self.threads[tid].core,
                };
                self.run_hook(core, |p, k| p.scheduled(k, &e));
            }
        }
    }

    /// Run a policy hook on `core` with the rest of the system as its kernel.
    fn run_hook(&mut self, core: usize, f: impl FnOnce(&mut dyn Policy, &mut dyn policy::Kernel)) {
        let mut p = self.policy.take().expect("policy hooks do not nest");
        f(p.as_mut(), &mut kernel::Ctx { sys: self, core });
        self.policy = Some(p);
    }

    /// The periodic tick at `at` milli-cycles: counters read, time series recorded, policy run
    /// on `core` (none at the end of the run).
    fn tick(&mut self, core: Option<usize>, at: u64) {
        for c in 0..self.cores.len() {
            self.save_counts(c);
            self.observe(c);
        }
        let prev = self.intervals.points.last().map_or(0, |i| i.time * 1000);
        let mut processes = Vec::with_capacity(self.processes.len());
        let mut series = Vec::with_capacity(self.processes.len());
        for pid in 0..self.processes.len() {
            let t = self.process_tally(pid);
            let total = self.event_levels.events(&t);
            let p = &mut self.processes[pid];
            let interval = total.since(&p.last_tick);
            p.last_tick = total;
            let ins = interval.get(Event::Instructions);
            let cycles = interval.get(Event::Cycles);
            series.push(IntervalProcess {
                name: p.name.clone(),
                instructions: ins,
                cycles: cycles as f64,
                ipc: ratio(ins, cycles),
                llc_misses: interval.get(Event::LlcMisses),
                llc_mpki: per_kilo(interval.get(Event::LlcMisses), ins),
                frames: p.space.as_ref().map_or(0, |s| s.mapped_pages()),
            });
            if p.arrival.is_some() {
                continue; // not started: the policy has not heard of it yet
            }
            processes.push(ProcessCounts {
                pid,
                alive: p.threads_left > 0,
                total,
                interval,
            });
        }
        self.intervals.push(Interval {
            time: at / 1000,
            processes: series,
        });
        if let Some(core) = core {
            let tick = Tick {
                now: at / 1000,
                interval: (at - prev) / 1000,
                cores: self.cores.iter().map(|c| c.counters.read()).collect(),
                processes,
            };
            self.run_hook(core, |p, k| p.tick(k, &tick));
        }
    }

    fn process_tally(&self, pid: usize) -> Tally {
        let mut t = Tally::default();
        for &tid in &self.processes[pid].threads {
            t.add(&self.threads[tid].tally);
        }
        t
    }

    fn thread_exited(&mut self, tid: usize) {
        self.pending.push(SchedEvent::Exited { tid });
        let pid = self.threads[tid].pid;
        let p = &mut self.processes[pid];
        p.threads_left -= 1;
        if p.threads_left == 0 {
            self.check_contents(pid);
            if let Some(space) = self.processes[pid].space.take() {
                space.destroy(&mut self.memory);
            }
            for c in &mut self.cores {
                for t in &mut c.tlbs {
                    t.flush_asid(pid as u32);
                }
            }
            self.policy
                .as_mut()
                .expect("policy present")
                .process_exited(pid);
        }
    }

    /// Content preservation: every page of `pid` still holds what was written at its first
    /// touch (recolors copy it), in a frame the process owns.
    fn check_contents(&mut self, pid: usize) {
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

    /// Charge `cycles` of kernel work on `path` to `core` (and its running thread, if any) and
    /// to process `pid`'s account.
    fn charge_kernel(&mut self, core: usize, path: KernelPath, cycles: u64, pid: Option<usize>) {
        let milli = cycles * 1000;
        let c = &mut self.cores[core];
        c.clock_milli += milli;
        let k = &mut c.tally.kernel[path as usize];
        k[0] += 1;
        k[1] += milli;
        if c.current.is_some() {
            c.tally.breakdown.stalls[StallCause::Kernel as usize] += milli;
        } else {
            // Nobody to charge: keep it out of the next thread's counts.
            c.idle_kernel_milli += milli;
            let k = &mut c.burst_start.kernel[path as usize];
            k[0] += 1;
            k[1] += milli;
        }
        if let Some(pid) = pid {
            let k = &mut self.processes[pid].kernel[path as usize];
            k[0] += 1;
            k[1] += milli;
        }
    }

    /// One record of thread `tid` on `core`. A batched burst's common case, a record within
    /// one page, is inlined into the burst loop; other records take `step_pages` (callgrind on
    /// examples/os/speed-4core.toml: the call cost about 30 host instructions per reference).
    #[inline(always)]
    fn step(&mut self, core: usize, tid: usize, r: &Record) -> Result<(), Error> {
        let pid = self.threads[tid].pid;
        // Milli-cycles charged to the core's breakdown by this record (kernel work included
        // is charged by `charge_kernel`, which moves the clock itself).
        let mut spent = 0;
        let size = r.size.max(1) as u64;
        let first_page = r.addr >> self.page_shift;
        let last_page = r.addr.saturating_add(size - 1) >> self.page_shift;
        if self.deferring && first_page == last_page {
            let (pfn, _) = self.translate(core, pid, first_page, r.kind, &mut spent)?;
            self.defer_page(core, r, pfn, spent);
        } else {
            self.step_pages(core, tid, r, &mut spent)?;
            self.charge_records(core, 1, (r.icount as u64).max(1), spent);
        }
        Ok(())
    }

    /// Defer one-page record `r`, translated to frame `pfn`, and charge it beside the `spent`
    /// milli-cycles its translation cost.
    #[inline(always)]
    fn defer_page(&mut self, core: usize, r: &Record, pfn: u64, spent: u64) {
        let page_mask = (1u64 << self.page_shift) - 1;
        let paddr = (pfn << self.page_shift) | (r.addr & page_mask);
        self.defer(core, r, paddr, r.size.max(1), r.kind.is_instruction() as u8);
        self.charge_records(core, 1, (r.icount as u64).max(1), spent);
    }

    /// Charge `references` records of `instructions` instructions in all to `core`, beside
    /// `spent` milli-cycles of their accesses.
    #[inline(always)]
    fn charge_records(&mut self, core: usize, references: u64, instructions: u64, spent: u64) {
        let c = &mut self.cores[core];
        let spent = spent
            + self
                .timing
                .instructions(&mut c.tally.breakdown, instructions);
        c.tally.instructions += instructions;
        c.tally.references += references;
        c.clock_milli += spent;
    }

    /// `step` for a batched burst's one-page record whose TLB lookups (`Core::tlb_translate`)
    /// both missed: the walk, then as `step`.
    #[inline(never)]
    fn step_walked(&mut self, core: usize, tid: usize, r: &Record) -> Result<(), Error> {
        let pid = self.threads[tid].pid;
        let mut spent = 0;
        let vpn = r.addr >> self.page_shift;
        let (pfn, _) = self.translate_walk(core, pid, vpn, r.kind, &mut spent)?;
        self.defer_page(core, r, pfn, spent);
        Ok(())
    }

    /// A batched burst's run of records that need nothing but the TLBs: each within one page
    /// and in the thread's buffer, at most `max`. They are translated and deferred exactly as
    /// `step` would, with the thread, the core and the batch borrowed once for the run and
    /// their instructions charged once at its end: nothing reads the core's clock or tally
    /// meanwhile (callgrind on examples/os/speed-4core.toml: `step`'s per-record reloads and
    /// bounds checks were about a tenth of the system's host instructions). Returns how many
    /// records it took, and the last of them if its TLB lookups both missed (done, counted;
    /// the caller finishes it with `step_walked`). Stops before a record crossing a page or at
    /// the buffer's end, for `step`.
    fn burst_hits(&mut self, core: usize, tid: usize, max: usize) -> (usize, Option<Record>) {
        let page_shift = self.page_shift;
        let page_mask = (1u64 << page_shift) - 1;
        let th = &mut self.threads[tid];
        let asid = th.pid as u32;
        let c = &mut self.cores[core];
        let chip = &mut self.chips[c.chip];
        // Each record taken adds one access and one mark: room for all of them is made here,
        // they are written in place, and the lengths set once at the end (callgrind on
        // examples/os/speed-4core.toml: pushing them one by one, with its capacity checks and
        // length updates, cost about 20 host instructions per reference).
        let start = self.batch.len();
        debug_assert_eq!(start, self.batch_marks.len());
        self.batch.reserve(max);
        self.batch_marks.reserve(max);
        let parts = &mut self.batch.spare_capacity_mut()[..max];
        let marks = &mut self.batch_marks.spare_capacity_mut()[..max];
        let (mut taken, mut deferred, mut instructions, mut walk) = (0, 0, 0, None);
        while taken < max && th.pos < th.buf.len() {
            let r = &th.buf[th.pos];
            // Within one page: the offset plus the size (0 counts as 1, which always fits)
            // does not pass the page's end.
            if (r.addr & page_mask) + r.size as u64 > page_mask + 1 {
                break;
            }
            th.pos += 1;
            taken += 1;
            if let Some(ahead) = th.buf.get(th.pos + HOST_AHEAD) {
                c.tlbs[L2TLB].prefetch(ahead.addr >> page_shift);
            }
            let Some(pfn) = c.tlb_translate(asid, r.addr >> page_shift, r.kind) else {
                walk = Some(*r);
                break;
            };
            instructions += (r.icount as u64).max(1);
            // As `defer`: copied whole from the thread's buffer, then the fields that
            // change set in place.
            let part = parts[deferred].write(*r);
            part.addr = (pfn << page_shift) | (r.addr & page_mask);
            part.thread = c.local;
            part.size = r.size.max(1);
            if start + deferred < HOST_AHEAD {
                chip.prefetch_host(part);
            }
            marks[deferred].write(Mark::Demand(r.kind.is_instruction() as u8));
            deferred += 1;
        }
        // SAFETY: the first `deferred` spare slots of both were written above, and `reserve`
        // made room for `max >= deferred` more.
        unsafe {
            self.batch.set_len(start + deferred);
            self.batch_marks.set_len(start + deferred);
        }
        self.charge_records(core, deferred as u64, instructions, 0);
        (taken, walk)
    }

    /// `step`'s translation and access of `r`, page by page (a record may cross pages), one
    /// access at a time unless the burst is batched; adds the cycles charged to `spent`.
    #[inline(never)]
    fn step_pages(
        &mut self,
        core: usize,
        tid: usize,
        r: &Record,
        spent: &mut u64,
    ) -> Result<(), Error> {
        let pid = self.threads[tid].pid;
        let page_mask = (1u64 << self.page_shift) - 1;
        let size = r.size.max(1) as u64;
        let first_page = r.addr >> self.page_shift;
        let last_page = r.addr.saturating_add(size - 1) >> self.page_shift;
        let path = r.kind.is_instruction() as usize;
        for vpn in first_page..=last_page {
            let start = if vpn == first_page {
                r.addr
            } else {
                vpn << self.page_shift
            };
            let end = if vpn == last_page {
                r.addr.saturating_add(size - 1)
            } else {
                (vpn << self.page_shift) | page_mask
            };
            let (pfn, tlb_missed) = self.translate(core, pid, vpn, r.kind, spent)?;
            let paddr = (pfn << self.page_shift) | (start & page_mask);
            let size = (end - start + 1) as u16;
            if self.deferring {
                self.defer(core, r, paddr, size, path as u8);
                continue;
            }
            let part = Record {
                addr: paddr,
                thread: self.cores[core].local,
                size,
                ..*r
            };
            let (served, remote) = self.access(core, &part);
            let c = &mut self.cores[core];
            let s = c.tally.serve(&self.paths[path], served, remote);
            *spent += self.timing.reference(&mut c.tally.breakdown, s);
            if path == 0 && c.sampler.is_some() {
                self.maybe_sample(core, tid, start, paddr, r.kind, served, remote, tlb_missed);
            }
        }
        Ok(())
    }

    /// Add the part of `r` at `paddr` (`size` bytes, on `path`) to the batched burst.
    #[inline(always)]
    fn defer(&mut self, core: usize, r: &Record, paddr: u64, size: u16, path: u8) {
        // Copied whole, then its fields set in place: a record assembled on the stack from
        // narrow stores and read back whole stalls the host's store forwarding (perf: a tenth
        // of `run_burst`'s samples on that one load).
        let c = &self.cores[core];
        self.batch.push(*r);
        let part = self.batch.last_mut().expect("just pushed");
        part.addr = paddr;
        part.thread = c.local;
        part.size = size;
        // The engine prefetches each record's sets `HOST_AHEAD` records before it simulates
        // it, within the batch: the first few of a batch are prefetched here instead, while
        // the rest of the burst is translated.
        if self.batch.len() <= HOST_AHEAD {
            self.chips[c.chip].prefetch_host(self.batch.last().expect("just pushed"));
        }
        self.batch_marks.push(Mark::Demand(path));
    }

    /// Send a physical reference through `core`'s chip, keeping the chips coherent. Returns the
    /// level that served it locally (or memory) and whether another chip's cache served it.
    #[inline]
    fn access(&mut self, core: usize, rec: &Record) -> (u8, bool) {
        let chip = self.cores[core].chip;
        let served = self.chips[chip].access(rec);
        let remote =
            self.coherence
                .after_access(&mut self.chips, chip, rec, served == SERVED_BY_MEMORY);
        (served, remote)
    }

    /// A record of `pid` comes `HOST_AHEAD` places later on `core`: if the L2 TLB already
    /// translates it, have the host prefetch the simulated sets it will visit (the system's
    /// version of `run_block`'s look-ahead; changes nothing simulated).
    #[inline]
    fn host_prefetch(&mut self, core: usize, pid: usize, r: &Record) {
        let c = &self.cores[core];
        if let Some(pfn) = c.tlbs[L2TLB].peek(pid as u32, r.addr >> self.page_shift) {
            let page_mask = (1u64 << self.page_shift) - 1;
            let rec = Record {
                addr: (pfn << self.page_shift) | (r.addr & page_mask),
                thread: c.local,
                ..*r
            };
            self.chips[c.chip].prefetch_host(&rec);
        }
    }

    /// Count an occurrence of the sampled event, and take the sample when it is due.
    #[allow(clippy::too_many_arguments)]
    fn maybe_sample(
        &mut self,
        core: usize,
        tid: usize,
        vaddr: u64,
        paddr: u64,
        kind: Kind,
        served: u8,
        remote: bool,
        tlb_missed: bool,
    ) {
        let path = &self.paths[0];
        let depth = path.iter().position(|&l| l == served).unwrap_or(path.len());
        let reached = |level: Option<usize>| {
            level.is_some_and(|l| {
                path.iter()
                    .position(|&p| p as usize == l)
                    .is_some_and(|d| depth >= d)
            })
        };
        let missed = |level: Option<usize>| {
            level.is_some_and(|l| {
                path.iter()
                    .position(|&p| p as usize == l)
                    .is_some_and(|d| depth > d)
            })
        };
        let el = self.event_levels;
        let sampler = self.cores[core].sampler.as_mut().expect("checked");
        let occurred = match sampler.config.event {
            Event::L1dAccesses | Event::MemoryReferences => true,
            Event::L1dMisses => missed(Some(el.l1d)),
            Event::L2Accesses => reached(el.l2),
            Event::L2Misses => missed(el.l2),
            Event::LlcAccesses => reached(Some(el.llc)),
            Event::LlcMisses => missed(Some(el.llc)),
            Event::TlbMisses => tlb_missed,
            Event::RemoteCacheAccesses => remote,
            _ => false,
        };
        if !occurred || !sampler.occurrence() {
            return;
        }
        let cost = sampler.config.cost_cycles;
        let pollute = sampler.config.pollute_l1_lines;
        let pid = self.threads[tid].pid;
        self.cores[core].samples += 1;
        self.charge_kernel(core, KernelPath::Interrupt, cost, Some(pid));
        if pollute > 0 {
            self.run_handler(core, pollute);
        }
        let sample = Sample {
            core: core as u32,
            thread: tid as u32,
            pid: pid as u32,
            write: kind.is_write(),
            vaddr,
            paddr,
            source: if remote {
                DataSource::Remote
            } else if served == SERVED_BY_MEMORY {
                DataSource::Memory
            } else {
                DataSource::Level(served)
            },
            cycle: self.cores[core].clock_milli / 1000,
        };
        // The policy sees it once the record is fully counted (`run_burst`): a hook that
        // migrates the running thread must not cut a record in two.
        self.samples_due.push(sample);
    }

    /// The sample handler touches `lines` lines of its own data, evicting the program's lines
    /// from L1 as a real handler does (ROCS section 3.1).
    fn run_handler(&mut self, core: usize, lines: u32) {
        let base = match self.cores[core].handler_data {
            Some(b) => b,
            None => {
                // One page of kernel data per core, taken at the handler's first run.
                let all = ColorSet::all(self.memory.colors());
                let req = AllocRequest {
                    allowed: &all,
                    cpu: core,
                    asid: u32::MAX,
                    vpn: 0,
                };
                match self.memory.alloc(&req, Owner::Kernel) {
                    Ok(pfn) => {
                        let b = pfn << self.page_shift;
                        self.cores[core].handler_data = Some(b);
                        b
                    }
                    Err(_) => return, // no memory left: the handler's data stays cached elsewhere
                }
            }
        };
        for i in 0..lines as u64 {
            let rec = Record {
                addr: base + i * self.line_size,
                thread: self.cores[core].local,
                icount: 0,
                size: 8,
                kind: Kind::Load,
                privileged: true,
                syscall: 0,
            };
            self.access(core, &rec);
        }
    }

    /// The frame of `vpn` (and whether the TLBs missed): TLBs, else a page walk (reads
    /// through the caches), else a fault. The TLB hits, nearly every reference, are inlined
    /// into the burst loop; the walk is not (callgrind on examples/os/speed-4core.toml: the
    /// call cost about 30 host instructions per reference).
    #[inline(always)]
    fn translate(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        kind: Kind,
        spent: &mut u64,
    ) -> Result<(u64, bool), Error> {
        match self.cores[core].tlb_translate(pid as u32, vpn, kind) {
            Some(pfn) => Ok((pfn, false)),
            None => self.translate_walk(core, pid, vpn, kind, spent),
        }
    }

    /// `translate` after both TLBs missed: the page walk, and the fault if the page is not
    /// present; fills both TLBs.
    #[inline(never)]
    fn translate_walk(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        kind: Kind,
        spent: &mut u64,
    ) -> Result<(u64, bool), Error> {
        let asid = pid as u32;
        let l1 = if kind.is_instruction() { L1I } else { L1D };
        let c = &mut self.cores[core];
        c.tlb_l2_misses += 1;
        c.tally.tlb_misses += 1;
        let local = c.local;
        let space = self.processes[pid]
            .space
            .as_mut()
            .expect("a running process has tables");
        let walk = space.walk(vpn, kind.is_write());
        for &addr in &walk.reads {
            let read = Record {
                addr,
                thread: local,
                icount: 0,
                size: 8,
                kind: Kind::Load,
                privileged: true,
                syscall: 0,
            };
            if self.deferring {
                self.batch.push(read);
                self.batch_marks.push(Mark::Walk);
                continue;
            }
            let (served, remote) = self.access(core, &read);
            let c = &mut self.cores[core];
            let s = c.tally.serve(&self.paths[0], served, remote);
            let w = self.timing.walk_read(&mut c.tally.breakdown, s);
            c.tally.walk_milli += w;
            *spent += w;
        }
        let t = match walk.outcome {
            WalkOutcome::Mapped { pfn, huge } => Translation { pfn, huge },
            WalkOutcome::Fault { recolor } => {
                let t = self.fault(core, pid, vpn, recolor)?;
                if !t.huge {
                    let space = self.processes[pid].space.as_mut().expect("tables");
                    space.touch(vpn, kind.is_write());
                }
                t
            }
        };
        let c = &mut self.cores[core];
        c.tlbs[L2TLB].insert(asid, vpn, t);
        c.tlbs[l1].insert(asid, vpn, t);
        Ok((t.pfn, true))
    }

    /// The page-fault handler: a first touch gets a frame of a color the policy allows (a
    /// whole huge page in a huge-page region); a page marked for lazy recoloring is moved if
    /// its color is no longer allowed (COLORIS section 3.3), else just made present again.
    fn fault(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        recolor: bool,
    ) -> Result<Translation, Error> {
        let asid = pid as u32;
        self.cores[core].tally.faults += 1;
        let fault_cycles = self.timing.config.fault_cycles;
        self.charge_kernel(core, KernelPath::Fault, fault_cycles, Some(pid));
        let name = self.processes[pid].name.clone();
        let oom = |e: &dyn std::fmt::Display| {
            Error::Config(ConfigError::new("memory", format!("process `{name}`: {e}")))
        };
        let huge = self.processes[pid]
            .huge
            .iter()
            .any(|&(a, b)| (a..b).contains(&vpn));
        if huge {
            let base = vpn & !(ENTRIES - 1);
            let block = self
                .memory
                .alloc_block(HUGE_ORDER, Owner::Space(asid))
                .map_err(|e| oom(&e))?;
            let p = &mut self.processes[pid];
            p.space
                .as_mut()
                .expect("tables")
                .map_huge(&mut self.memory, base, block)
                .map_err(|e| oom(&e))?;
            for i in 0..ENTRIES {
                self.memory.stamp(block + i, page_checksum(asid, base + i));
                let color = self.memory.color_of(block + i) as usize;
                p.pages_per_color[color] += 1;
            }
            p.frames += ENTRIES;
            p.huge_pages += 1;
            return Ok(Translation {
                pfn: block + (vpn - base),
                huge: true,
            });
        }
        let allowed = self
            .policy
            .as_mut()
            .expect("policy present")
            .allowed_colors(pid, vpn)
            .clone();
        if recolor {
            let mut allowed = allowed;
            let mut retried = false;
            loop {
                let space = self.processes[pid].space.as_mut().expect("tables");
                let old = space.pte(vpn).expect("a marked page has tables").pfn();
                if allowed.contains(self.memory.color_of(old)) {
                    space.remap(vpn, old);
                    return Ok(Translation {
                        pfn: old,
                        huge: false,
                    });
                }
                match self.move_page(core, pid, vpn, &allowed) {
                    Ok(new) => {
                        self.processes[pid].lazy_recolors += 1;
                        return Ok(Translation {
                            pfn: new,
                            huge: false,
                        });
                    }
                    // A lazy move is a fault too: out of memory in the new colors, the policy
                    // may widen them (COLORIS 3.2, ALLOC_COLORS on running out of memory).
                    Err(e @ MemoryError::OutOfFrames { .. }) if !retried => {
                        retried = true;
                        allowed = self
                            .widened_colors(pid, vpn, &allowed)
                            .ok_or_else(|| oom(&e))?;
                    }
                    Err(e) => return Err(oom(&e)),
                }
            }
        }
        let mut allowed = allowed;
        let mut retried = false;
        let pfn = loop {
            let req = AllocRequest {
                allowed: &allowed,
                cpu: core,
                asid,
                vpn,
            };
            match self.memory.alloc(&req, Owner::Space(asid)) {
                Ok(pfn) => break pfn,
                // Out of memory in the process's colors: the policy may widen them (COLORIS
                // section 3.2, ALLOC_COLORS on running out of memory); then retry once.
                Err(e @ MemoryError::OutOfFrames { .. }) if !retried => {
                    retried = true;
                    allowed = self
                        .widened_colors(pid, vpn, &allowed)
                        .ok_or_else(|| oom(&e))?;
                }
                Err(e) => return Err(oom(&e)),
            }
        };
        self.memory.stamp(pfn, page_checksum(asid, vpn));
        let p = &mut self.processes[pid];
        p.space
            .as_mut()
            .expect("tables")
            .map(&mut self.memory, vpn, pfn)
            .map_err(|e| oom(&e))?;
        let color = self.memory.color_of(pfn) as usize;
        p.frames += 1;
        p.pages_per_color[color] += 1;
        Ok(Translation { pfn, huge: false })
    }

    /// The fault path ran out of frames in `allowed`, `pid`'s colors for `vpn`: the colors to
    /// retry with if the policy widened them (`Policy::out_of_colors`), else `None`.
    fn widened_colors(&mut self, pid: usize, vpn: u64, allowed: &ColorSet) -> Option<ColorSet> {
        let policy = self.policy.as_mut().expect("policy present");
        if allowed.is_full() || !policy.out_of_colors(pid) {
            return None;
        }
        Some(policy.allowed_colors(pid, vpn).clone())
    }

    /// Move small page `vpn` of `pid` to a new frame of one of `allowed` colors: allocate,
    /// copy (through `core`'s caches, cost charged), remap, free the old frame. TLB entries are
    /// the caller's business.
    fn move_page(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        allowed: &ColorSet,
    ) -> Result<u64, crate::memory::MemoryError> {
        let asid = pid as u32;
        let req = AllocRequest {
            allowed,
            cpu: core,
            asid,
            vpn,
        };
        let new = self.memory.alloc(&req, Owner::Space(asid))?;
        let space = self.processes[pid].space.as_mut().expect("tables");
        let old = space.remap(vpn, new).expect("caller checked the mapping");
        self.memory.copy_page(old, new);
        // The copy reads every line of the old frame and writes every line of the new one.
        let local = self.cores[core].local;
        let lines = (1u64 << self.page_shift) / self.line_size;
        for i in 0..lines {
            for (frame, kind) in [(old, Kind::Load), (new, Kind::Store)] {
                let rec = Record {
                    addr: (frame << self.page_shift) + i * self.line_size,
                    thread: local,
                    icount: 0,
                    size: self.line_size as u16,
                    kind,
                    privileged: true,
                    syscall: 0,
                };
                if self.deferring {
                    self.batch.push(rec);
                    self.batch_marks.push(Mark::Kernel);
                } else {
                    self.access(core, &rec);
                }
            }
        }
        self.memory.free(old, core);
        let copy = self.timing.config.copy_cycles_per_page;
        self.charge_kernel(core, KernelPath::Recolor, copy, Some(pid));
        self.processes[pid].frames += 1;
        Ok(new)
    }

    /// Remove `vpn` of `pid` from every core's TLBs and charge the shootdown to `core`.
    fn shootdown(&mut self, core: usize, pid: usize, vpn: Option<u64>) {
        for c in &mut self.cores {
            for t in &mut c.tlbs {
                match vpn {
                    Some(v) => {
                        t.invalidate(pid as u32, v);
                    }
                    None => {
                        t.flush_asid(pid as u32);
                    }
                }
            }
        }
        let cycles = self.timing.config.shootdown_cycles;
        self.charge_kernel(core, KernelPath::Shootdown, cycles, Some(pid));
    }

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
        SystemReport {
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
            policy_report: self
                .policy
                .as_ref()
                .map_or(serde_json::Value::Null, |p| p.report()),
            invariants,
        }
    }

    /// Batch bursts (on by default; off runs every record on its own, to test the batched
    /// path against it).
    pub fn set_batching(&mut self, on: bool) {
        self.batching = on;
    }

    /// Frames free right now (all of RAM but kernel data once every process has exited).
    pub fn free_frames(&self) -> u64 {
        self.memory.free_frames()
    }

    pub fn total_frames(&self) -> u64 {
        self.memory.frames()
    }
}

#[cfg(test)]
mod tests;
