//! The configuration of a whole-system run (`cachecolor simulate SYSTEM.toml`): machine, memory,
//! policy, scheduler, PMU and processes. docs/system.md documents every key.
use crate::cache::HierarchyConfig;
use crate::memory::MemoryConfig;
use crate::mmu::{PageTableConfig, TlbConfig};
use crate::pmu::{Event, SampleMode, SamplingConfig};
use crate::policy::PolicyConfig;
use crate::timing::TimingConfig;
use crate::workload::WorkloadSpec;
use serde::{Deserialize, Serialize};
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

fn one_chip() -> u32 {
    1
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
    /// The memory controller of each chip (`crate::dram`): channels, peak bandwidth, queueing.
    #[serde(default)]
    pub memory: crate::dram::DramConfig,
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
    /// Only the records of these threads of the trace (a full-system trace's guest tasks, issue
    /// 27: the traced program's apart from the guest's other processes); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_threads: Option<Vec<u32>>,
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
    /// Virtual address ranges `[start, end)` backed by 2 MiB huge pages (both ends multiples
    /// of the huge-page size), as `madvise(MADV_HUGEPAGE)` regions are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_pages: Option<Vec<[u64; 2]>>,
    /// Cycle at which the process is created (default 0: at the start). Until then it has no
    /// address space, its threads are in no run queue and the policy has not heard of it
    /// (COLORIS section 4.4 starts its programs ten seconds apart).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub start: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn default_slice() -> u64 {
    1_000_000
}

fn default_tick() -> u64 {
    1_000_000
}

fn yes() -> bool {
    true
}

/// `[scheduler]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Cycles a thread runs before the next one on its core gets its turn.
    #[serde(default = "default_slice")]
    pub time_slice: u64,
    /// Cycles between the policy's ticks (also the report's time-series interval).
    #[serde(default = "default_tick")]
    pub tick: u64,
    /// A core that runs out of threads takes a waiting, unpinned one from the core with the
    /// longest run queue (Linux's idle balancing).
    #[serde(default = "yes")]
    pub balance: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            time_slice: default_slice(),
            tick: default_tick(),
            balance: true,
        }
    }
}

fn default_counters() -> usize {
    4
}

fn default_mux() -> u64 {
    4_000_000
}

fn default_events() -> Vec<Event> {
    vec![
        Event::Cycles,
        Event::Instructions,
        Event::L2Misses,
        Event::LlcAccesses,
        Event::LlcMisses,
        Event::TlbMisses,
    ]
}

/// Whether a config without `pmu.ideal` gets the exact oracle (true) or the realistic PMU.
pub const PMU_IDEAL_DEFAULT: bool = false;

fn default_ideal() -> bool {
    PMU_IDEAL_DEFAULT
}

fn is_true(v: &bool) -> bool {
    *v
}

fn default_skid() -> u32 {
    // An assumption, not from the papers: a few matching references (POWER5's interrupt is
    // taken at the next completion point, with several loads in flight).
    4
}

fn default_in_flight() -> u32 {
    // An assumption, not from the papers: the loads a pipeline flush loses, of the order of
    // the load-miss queue of POWER4/5-class cores (eight entries).
    8
}

fn is_default_skid(v: &u32) -> bool {
    *v == default_skid()
}

fn is_default_in_flight(v: &u32) -> bool {
    *v == default_in_flight()
}

fn is_default_mode(m: &SampleMode) -> bool {
    *m == SampleMode::default()
}

/// `[pmu]`: the counters of every core and the data-address sampler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PmuConfig {
    /// The exact oracle (true): policies read every event's exact per-process count and the
    /// sampler takes exactly every `period`-th occurrence with its own address. False: the
    /// realistic PMU (docs/pmu.md): counts only through each core's counters (fixed ones,
    /// `counters` programmable ones, multiplexed and scaled), aggregated per thread across
    /// context switches; samples by `sample_mode` with skid and missed events.
    #[serde(default = "default_ideal")]
    pub ideal: bool,
    /// Programmable counters per core (more events are multiplexed). A realistic PMU on a
    /// preset machine takes the preset processor's number (`pmu::hardware`).
    #[serde(default = "default_counters")]
    pub counters: usize,
    /// Events on fixed-function counters (always counted, never multiplexed; realistic PMU
    /// only), e.g. Intel's instructions and cycles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixed: Vec<Event>,
    /// Whether more programmable events than `counters` may be multiplexed (realistic PMU);
    /// false makes such a config an error.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub multiplex: bool,
    /// Cycles between rotations of the multiplexed groups (Linux's default is 4 ms).
    #[serde(default = "default_mux")]
    pub mux_interval: u64,
    /// Events software asks for on every core (what a policy's tick reads); a realistic PMU
    /// adds the events the policy asks for (`Policy::counter_events`).
    #[serde(default = "default_events")]
    pub events: Vec<Event>,
    /// Data-address sampling from the start (policies may reprogram it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingConfig>,
    /// How samples are taken on a realistic PMU: `marked` (POWER5's SDAR) or `precise`
    /// (IBS/PEBS-like).
    #[serde(default, skip_serializing_if = "is_default_mode")]
    pub sample_mode: SampleMode,
    /// Marked sampling: the interrupt is taken 0..=skid matching references after the overflow.
    #[serde(default = "default_skid", skip_serializing_if = "is_default_skid")]
    pub skid: u32,
    /// Marked sampling: matching references lost to the handler's pipeline flush.
    #[serde(
        default = "default_in_flight",
        skip_serializing_if = "is_default_in_flight"
    )]
    pub in_flight: u32,
}

impl Default for PmuConfig {
    fn default() -> Self {
        PmuConfig {
            ideal: PMU_IDEAL_DEFAULT,
            counters: default_counters(),
            fixed: Vec::new(),
            multiplex: true,
            mux_interval: default_mux(),
            events: default_events(),
            sampling: None,
            sample_mode: SampleMode::default(),
            skid: default_skid(),
            in_flight: default_in_flight(),
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
    #[serde(default)]
    pub pmu: PmuConfig,
    pub processes: Vec<ProcessConfig>,
}
