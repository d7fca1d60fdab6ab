/*!
The simulated machine and its kernel: cores with TLBs and a cache hierarchy, physical memory
with a page-frame allocator, processes with page tables and threads fed by traces or
generators, a scheduler, and the fault path that asks the policy for colors (DESIGN.md "How one
memory reference flows").

For each record of a running thread:
1. translate each page it touches: the core's L1 TLB (data or instruction), then the L2 TLB,
   then a page walk whose every entry read is a physical load through the caches (its latency
   charged in full, serially); an unmapped page faults: the policy gives the allowed colors, the
   allocator a frame, the page is mapped (fault cost charged);
2. send the physical reference through the hierarchy and charge the latency of the level that
   served it (timing model);
3. charge `max(icount, 1)` instructions at the base CPI (a record is at least one instruction).

The engine always advances the core with the smallest clock (lowest index on ties), a burst of
records at a time, so a thread that misses more progresses more slowly, as on real hardware.
Threads run round-robin on their core with a time slice. Everything is deterministic.

Not here yet (issue 3): several chips with coherence, huge pages, thread migration and load
balancing, the PMU wired to policies (ticks, samples), eager/lazy recoloring through policies,
per-interval time series.
*/
use crate::cache::hierarchy::SERVED_BY_MEMORY;
use crate::cache::{Hierarchy, HierarchyConfig};
use crate::error::{ConfigError, Error};
use crate::memory::{AllocRequest, ColorSet, MemoryConfig, Owner, PhysicalMemory};
use crate::mmu::{AddressSpace, PageTableConfig, Tlb, TlbConfig, Translation, WalkOutcome};
use crate::policy::{self, Policy, PolicyConfig, ProcessInfo};
use crate::timing::{Served, StallBreakdown, StallCause, Timing, TimingConfig};
use crate::trace::{self, Format, Kind, Record, RecordSource};
use crate::workload::{Workload, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::PathBuf;

/// The TLBs of every core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbsConfig {
    pub l1d: TlbConfig,
    pub l1i: TlbConfig,
    pub l2: TlbConfig,
}

impl Default for TlbsConfig {
    fn default() -> Self {
        TlbsConfig {
            l1d: TlbConfig {
                entries: 64,
                ways: 4,
            },
            l1i: TlbConfig {
                entries: 64,
                ways: 4,
            },
            l2: TlbConfig {
                entries: 1536,
                ways: 12,
            },
        }
    }
}

/// `[machine]`: chips, each with `hierarchy.cores` cores and one LLC, TLBs, page tables, timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Chips (sockets): each has its own copy of `hierarchy` (its cores' private caches and one
    /// shared LLC); caches of different chips are kept coherent by invalidation.
    #[serde(default = "one_chip")]
    pub chips: u32,
    pub hierarchy: HierarchyConfig,
    #[serde(default)]
    pub tlb: TlbsConfig,
    #[serde(default)]
    pub mmu: PageTableConfig,
    pub timing: TimingConfig,
}

/// One thread: a generator or a trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    #[serde(default = "native")]
    pub format: String,
}

fn one_chip() -> u32 {
    1
}

fn native() -> String {
    "native".into()
}

/// One process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessConfig {
    pub name: String,
    pub threads: Vec<ThreadConfig>,
    /// Color ranges `[start, end)` the process may use (policies such as `static` honour them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colors: Option<Vec<[u64; 2]>>,
    /// Cores its threads may run on (thread i on pin[i mod len]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Vec<usize>>,
}

fn default_slice() -> u64 {
    1_000_000
}

/// `[scheduler]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Cycles a thread runs before the next one on its core gets its turn.
    #[serde(default = "default_slice")]
    pub time_slice: u64,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            time_slice: default_slice(),
        }
    }
}

/// A whole system run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemConfig {
    pub machine: MachineConfig,
    #[serde(default)]
    pub memory: MemoryConfig,
    #[serde(default)]
    pub policy: PolicyConfig,
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    pub processes: Vec<ProcessConfig>,
}

/// Per-process results (the JSON's `processes` entries).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcessStats {
    pub name: String,
    pub instructions: u64,
    pub references: u64,
    pub cycles: f64,
    pub ipc: f64,
    pub llc_accesses: u64,
    pub llc_misses: u64,
    pub llc_miss_rate: f64,
    pub llc_mpki: f64,
    pub tlb_misses: u64,
    pub page_walk_cycles: f64,
    pub faults: u64,
    pub frames: u64,
    /// Pages faulted in per LLC color (the bin distribution of thesis Figure 3.3).
    pub pages_per_color: Vec<u64>,
    pub stalls: StallReport,
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
}

impl StallReport {
    fn of(b: &StallBreakdown) -> Self {
        StallReport {
            completion: b.completion as f64 / 1000.0,
            l2: b.stall(StallCause::L2),
            llc: b.stall(StallCause::Llc),
            dram: b.stall(StallCause::Dram),
            remote: b.stall(StallCause::Remote),
            tlb: b.stall(StallCause::Tlb),
            kernel: b.stall(StallCause::Kernel),
        }
    }
}

/// Per-core results.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CoreStats {
    pub cycles: f64,
    pub instructions: u64,
    pub tlb_l1_misses: u64,
    pub tlb_l2_misses: u64,
}

/// What a run reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemReport {
    pub policy: String,
    pub allocator: String,
    pub processes: Vec<ProcessStats>,
    pub cores: Vec<CoreStats>,
    pub levels: Vec<crate::cache::LevelStats>,
    pub invariants: Vec<String>,
}

#[derive(Debug, Default)]
struct Counters {
    instructions: u64,
    references: u64,
    llc_accesses: u64,
    llc_misses: u64,
    tlb_misses: u64,
    walk_milli: u64,
    faults: u64,
    breakdown: StallBreakdown,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.instructions += o.instructions;
        self.references += o.references;
        self.llc_accesses += o.llc_accesses;
        self.llc_misses += o.llc_misses;
        self.tlb_misses += o.tlb_misses;
        self.walk_milli += o.walk_milli;
        self.faults += o.faults;
        self.breakdown.accumulate(&o.breakdown);
    }
}

struct Thread {
    pid: usize,
    source: Box<dyn RecordSource + Send>,
    buf: Vec<Record>,
    pos: usize,
    done: bool,
}

struct Process {
    name: String,
    space: Option<AddressSpace>,
    threads_left: usize,
    frames: u64,
    pages_per_color: Vec<u64>,
    c: Counters,
}

struct Core {
    clock_milli: u64,
    current: Option<usize>,
    slice_end: u64,
    queue: VecDeque<usize>,
    tlbs: [Tlb; 3],
    stats: CoreStats,
}

/// A machine running processes under a policy.
pub struct System {
    hierarchy: Hierarchy,
    memory: PhysicalMemory,
    timing: Timing,
    policy: Box<dyn Policy>,
    cores: Vec<Core>,
    processes: Vec<Process>,
    threads: Vec<Thread>,
    page_shift: u32,
    llc: usize,
    slice_milli: u64,
}

const BURST: usize = 64;
const L1D: usize = 0;
const L1I: usize = 1;
const L2TLB: usize = 2;

impl System {
    pub fn new(config: &SystemConfig) -> Result<System, Error> {
        let hierarchy = Hierarchy::new(&config.machine.hierarchy)
            .map_err(|e| ConfigError::new(format!("machine.hierarchy.{}", e.field), e.message))?;
        if config.machine.chips != 1 {
            return Err(ConfigError::new(
                "machine.chips",
                format!(
                    "{}: only single-chip machines are simulated so far",
                    config.machine.chips
                ),
            )
            .into());
        }
        let hc = hierarchy.config().clone();
        let cores = hc.cores as usize;
        let page_size = hc.page_size.0;
        let llc = hc.levels.len() - 1;
        let llc_geom = hierarchy.cache(llc, 0).geometry().clone();
        let colors = llc_geom.colors();
        let timing = Timing::new(&config.machine.timing, hc.levels.len())?;
        AddressSpace::validate(&config.machine.mmu)?;
        let mut memory = PhysicalMemory::new(&config.memory, page_size, colors, cores)?;
        let mut policy = policy::build(&config.policy, cores, colors)?;
        if config.scheduler.time_slice == 0 {
            return Err(
                ConfigError::new("scheduler.time_slice", "must be at least 1 cycle").into(),
            );
        }
        let tlb = |c: &TlbConfig, name: &str| {
            Tlb::new(c).map_err(|e| ConfigError::new(format!("machine.tlb.{name}"), e.message))
        };
        let mut core_list = Vec::with_capacity(cores);
        for _ in 0..cores {
            core_list.push(Core {
                clock_milli: 0,
                current: None,
                slice_end: 0,
                queue: VecDeque::new(),
                tlbs: [
                    tlb(&config.machine.tlb.l1d, "l1d")?,
                    tlb(&config.machine.tlb.l1i, "l1i")?,
                    tlb(&config.machine.tlb.l2, "l2")?,
                ],
                stats: CoreStats::default(),
            });
        }
        if config.processes.is_empty() {
            return Err(
                ConfigError::new("processes", "a system needs at least one [[processes]]").into(),
            );
        }
        let mut processes = Vec::new();
        let mut threads = Vec::new();
        let mut next_core = 0;
        for (pid, p) in config.processes.iter().enumerate() {
            let field = |k: &str| format!("processes[{pid}].{k}");
            if p.threads.is_empty() {
                return Err(ConfigError::new(
                    field("threads"),
                    "a process needs at least one thread",
                )
                .into());
            }
            let colors_set = match &p.colors {
                Some(ranges) => {
                    let mut set = ColorSet::empty(colors);
                    for &[a, b] in ranges {
                        if a >= b || b > colors {
                            return Err(ConfigError::new(
                                field("colors"),
                                format!(
                                    "range [{a}, {b}) is not within this LLC's colors 0..{colors}"
                                ),
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
            let placement = policy.process_created(&ProcessInfo {
                pid,
                name: p.name.clone(),
                colors: colors_set,
                pinned: p.pin.clone(),
            });
            let pin = placement.pin.or_else(|| p.pin.clone());
            let space = AddressSpace::new(pid as u32, &config.machine.mmu, &mut memory, page_size)
                .map_err(|e| {
                    ConfigError::new("memory.ram", format!("no frame for page tables: {e}"))
                })?;
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
                let core = match &pin {
                    Some(pin) => pin[t % pin.len()],
                    None => {
                        let c = next_core % cores;
                        next_core += 1;
                        c
                    }
                };
                core_list[core].queue.push_back(threads.len());
                threads.push(Thread {
                    pid,
                    source,
                    buf: Vec::new(),
                    pos: 0,
                    done: false,
                });
            }
            processes.push(Process {
                name: p.name.clone(),
                space: Some(space),
                threads_left: p.threads.len(),
                frames: 0,
                pages_per_color: vec![0; colors as usize],
                c: Counters::default(),
            });
        }
        Ok(System {
            hierarchy,
            memory,
            timing,
            policy,
            cores: core_list,
            processes,
            threads,
            page_shift: page_size.trailing_zeros(),
            llc,
            slice_milli: config.scheduler.time_slice * 1000,
        })
    }

    /// Run every thread to its end.
    pub fn run(&mut self) -> Result<(), Error> {
        loop {
            let next = (0..self.cores.len())
                .filter(|&c| self.cores[c].current.is_some() || !self.cores[c].queue.is_empty())
                .min_by_key(|&c| (self.cores[c].clock_milli, c));
            let Some(core) = next else { return Ok(()) };
            self.run_burst(core)?;
        }
    }

    fn run_burst(&mut self, core: usize) -> Result<(), Error> {
        let clock = self.cores[core].clock_milli;
        let c = &mut self.cores[core];
        let tid = match c.current {
            Some(t) if clock < c.slice_end || c.queue.is_empty() => t,
            Some(t) => {
                // Time slice over and another thread waits: round-robin.
                c.queue.push_back(t);
                let n = c.queue.pop_front().expect("non-empty");
                c.current = Some(n);
                c.slice_end = clock + self.slice_milli;
                n
            }
            None => {
                let n = c.queue.pop_front().expect("checked by run");
                c.current = Some(n);
                c.slice_end = clock + self.slice_milli;
                n
            }
        };
        for _ in 0..BURST {
            let th = &mut self.threads[tid];
            if th.pos == th.buf.len() {
                th.pos = 0;
                if !th.source.next_block(&mut th.buf)? {
                    th.done = true;
                    self.cores[core].current = None;
                    self.thread_exited(tid);
                    return Ok(());
                }
            }
            let r = th.buf[th.pos];
            th.pos += 1;
            let pid = th.pid;
            self.step(core, pid, &r)?;
        }
        Ok(())
    }

    fn thread_exited(&mut self, tid: usize) {
        let pid = self.threads[tid].pid;
        let p = &mut self.processes[pid];
        p.threads_left -= 1;
        if p.threads_left == 0 {
            if let Some(space) = p.space.take() {
                space.destroy(&mut self.memory);
            }
            for c in &mut self.cores {
                for t in &mut c.tlbs {
                    t.flush_asid(pid as u32);
                }
            }
            self.policy.process_exited(pid);
        }
    }

    /// One record of process `pid` on `core`.
    fn step(&mut self, core: usize, pid: usize, r: &Record) -> Result<(), Error> {
        let mut b = StallBreakdown::default();
        let mut counters = Counters::default();
        let page_mask = (1u64 << self.page_shift) - 1;
        let size = r.size.max(1) as u64;
        let first_page = r.addr >> self.page_shift;
        let last_page = r.addr.saturating_add(size - 1) >> self.page_shift;
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
            let pfn = self.translate(core, pid, vpn, r.kind, &mut b, &mut counters)?;
            let paddr = (pfn << self.page_shift) | (start & page_mask);
            let part = Record {
                addr: paddr,
                thread: core as u32,
                size: (end - start + 1) as u16,
                ..*r
            };
            let served = self.hierarchy.access(&part);
            self.charge(served, &mut b, &mut counters, true);
        }
        let instructions = (r.icount as u64).max(1);
        self.timing.instructions(&mut b, instructions);
        counters.instructions = instructions;
        counters.references = 1;
        counters.breakdown = b;
        let c = &mut self.cores[core];
        c.clock_milli += b.total_milli();
        c.stats.instructions += instructions;
        self.processes[pid].c.add(&counters);
        Ok(())
    }

    /// Charge a reference served at `served` (a hierarchy level index or memory).
    fn charge(&self, served: u8, b: &mut StallBreakdown, c: &mut Counters, demand: bool) -> Served {
        let s = if served == SERVED_BY_MEMORY {
            Served::Dram
        } else {
            Served::Level(served as usize)
        };
        if served == SERVED_BY_MEMORY || served as usize >= self.llc {
            c.llc_accesses += 1;
            if served == SERVED_BY_MEMORY {
                c.llc_misses += 1;
            }
        }
        if demand {
            self.timing.reference(b, s);
        }
        s
    }

    /// The frame of `vpn`: TLBs, else a page walk (reads through the caches), else a fault.
    fn translate(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        kind: Kind,
        b: &mut StallBreakdown,
        counters: &mut Counters,
    ) -> Result<u64, Error> {
        let asid = pid as u32;
        let l1 = if kind.is_instruction() { L1I } else { L1D };
        let tlbs = &mut self.cores[core].tlbs;
        if let Some(t) = tlbs[l1].lookup(asid, vpn) {
            return Ok(t.pfn);
        }
        self.cores[core].stats.tlb_l1_misses += 1;
        if let Some(t) = self.cores[core].tlbs[L2TLB].lookup(asid, vpn) {
            self.cores[core].tlbs[l1].insert(asid, vpn, t);
            return Ok(t.pfn);
        }
        self.cores[core].stats.tlb_l2_misses += 1;
        counters.tlb_misses += 1;
        let space = self.processes[pid]
            .space
            .as_mut()
            .expect("a running process has tables");
        let walk = space.walk(vpn, kind.is_write());
        for &addr in &walk.reads {
            let read = Record {
                addr,
                thread: core as u32,
                icount: 0,
                size: 8,
                kind: Kind::Load,
                privileged: true,
            };
            let served = self.hierarchy.access(&read);
            let s = self.charge(served, b, counters, false);
            counters.walk_milli += self.timing.walk_read(b, s);
        }
        let pfn = match walk.outcome {
            WalkOutcome::Mapped { pfn } => pfn,
            WalkOutcome::Fault { .. } => {
                counters.faults += 1;
                self.timing.kernel(b, self.timing.config.fault_cycles);
                let allowed = self.policy.allowed_colors(pid, vpn).clone();
                let req = AllocRequest {
                    allowed: &allowed,
                    cpu: core,
                    asid,
                    vpn,
                };
                let pfn = self.memory.alloc(&req, Owner::Space(asid)).map_err(|e| {
                    Error::Config(ConfigError::new(
                        "memory",
                        format!("process `{}`: {e}", self.processes[pid].name),
                    ))
                })?;
                let space = self.processes[pid].space.as_mut().expect("tables");
                space.map(&mut self.memory, vpn, pfn).map_err(|e| {
                    Error::Config(ConfigError::new(
                        "memory",
                        format!("page tables of `{}`: {e}", self.processes[pid].name),
                    ))
                })?;
                let color = self.memory.color_of(pfn) as usize;
                self.processes[pid].frames += 1;
                self.processes[pid].pages_per_color[color] += 1;
                pfn
            }
        };
        let t = Translation { pfn, huge: false };
        self.cores[core].tlbs[L2TLB].insert(asid, vpn, t);
        self.cores[core].tlbs[l1].insert(asid, vpn, t);
        Ok(pfn)
    }

    /// Results so far (and every invariant checked).
    pub fn report(&self) -> SystemReport {
        let mut invariants = self.hierarchy.check_invariants();
        invariants.extend(self.memory.check_invariants());
        let processes = self
            .processes
            .iter()
            .map(|p| {
                let c = &p.c;
                let cycles = c.breakdown.cycles();
                let per_k = |n: u64| {
                    if c.instructions == 0 {
                        0.0
                    } else {
                        n as f64 * 1000.0 / c.instructions as f64
                    }
                };
                ProcessStats {
                    name: p.name.clone(),
                    instructions: c.instructions,
                    references: c.references,
                    cycles,
                    ipc: if cycles > 0.0 {
                        c.instructions as f64 / cycles
                    } else {
                        0.0
                    },
                    llc_accesses: c.llc_accesses,
                    llc_misses: c.llc_misses,
                    llc_miss_rate: if c.llc_accesses == 0 {
                        0.0
                    } else {
                        c.llc_misses as f64 / c.llc_accesses as f64
                    },
                    llc_mpki: per_k(c.llc_misses),
                    tlb_misses: c.tlb_misses,
                    page_walk_cycles: c.walk_milli as f64 / 1000.0,
                    faults: c.faults,
                    frames: p.frames,
                    pages_per_color: p.pages_per_color.clone(),
                    stalls: StallReport::of(&c.breakdown),
                }
            })
            .collect::<Vec<_>>();
        // Cycles are charged twice, independently: to the core that ran a record and to the
        // process it belongs to, each as the sum of its stall breakdown (integer milli-cycles).
        let by_processes: u64 = self
            .processes
            .iter()
            .map(|p| p.c.breakdown.total_milli())
            .sum();
        let by_cores: u64 = self.cores.iter().map(|c| c.clock_milli).sum();
        if by_processes != by_cores {
            invariants.push(format!(
                "cycles: processes' stall breakdowns sum to {} but the cores ran {}",
                by_processes as f64 / 1000.0,
                by_cores as f64 / 1000.0
            ));
        }
        SystemReport {
            policy: self.policy.name().into(),
            allocator: self.memory.allocator_name().into(),
            processes,
            cores: self
                .cores
                .iter()
                .map(|c| CoreStats {
                    cycles: c.clock_milli as f64 / 1000.0,
                    ..c.stats.clone()
                })
                .collect(),
            levels: self.hierarchy.stats().levels,
            invariants,
        }
    }

    /// Frames free right now (all of RAM once every process has exited).
    pub fn free_frames(&self) -> u64 {
        self.memory.free_frames()
    }

    pub fn total_frames(&self) -> u64 {
        self.memory.frames()
    }
}

#[cfg(test)]
mod tests;
