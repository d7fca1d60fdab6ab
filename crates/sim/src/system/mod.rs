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

Files, one mechanism each (sibling `impl System` blocks): `build.rs` (config
checks and construction), `schedule.rs` (the main loop, balancing, hooks, exits), `engine.rs`
(bursts, batching, stepping records), `translate.rs` (TLBs, walks, the fault path, page moves,
kernel charges), `ticks.rs` (counters, multiplexing, ticks, sampling), `page_llc.rs` (the exact
per-page LLC profile, when asked), `report.rs` (the report and its invariants), `kernel.rs` (the actions a policy may ask for), `coherence.rs`, `config.rs`,
`presets.rs` and `detect.rs` (machine presets and the host's), `tests.rs`.
*/
mod address_check;
mod batch;
mod build;
mod clear_page;
mod coherence;
mod config;
pub mod detect;
mod engine;
mod kernel;
mod page_llc;
#[cfg(test)]
mod page_llc_tests;
pub mod presets;
mod report;
mod schedule;
#[cfg(test)]
pub(crate) mod testing;
mod thread_filter;
mod ticks;
mod translate;

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
use crate::pmu::{
    Candidate, CounterSet, DataSource, Event, EventCounts, RealisticPmu, Sample, Sampler,
    SamplingHardware,
};
use crate::policy::{self, Policy, ProcessCounts, ProcessInfo, SchedEvent, Tick};
use crate::timing::{StallCause, Timing};
use crate::trace::{self, Format, Kind, Record, RecordSource};
use crate::workload::Workload;
use coherence::Coherence;
use report::{per_kilo, ratio, EventLevels, Tally, MAX_LEVELS, PATHS};
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
    /// Instructions a record counts at least: 0 for a trace (its `icount` is exact: a data
    /// record carries 0, its instruction fetch the count), 1 for a generator (a generated reference
    /// stands for one instruction unless its phase's `icount` says more;
    /// `Workload::instruction_floor`).
    icount_floor: u64,
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
    /// Each thread's source and its instruction floor (`Thread::icount_floor`).
    sources: Vec<(Box<dyn RecordSource + Send>, u64)>,
}

struct Core {
    // Where it is.
    chip: usize,
    /// Index of the core within its chip's hierarchy.
    local: u32,

    // Time and scheduling.
    clock_milli: u64,
    current: Option<usize>,
    slice_end: u64,
    queue: VecDeque<usize>,
    context_switches: u64,
    /// Kernel work done with no thread to charge it to, and time spent with nothing to run.
    idle_kernel_milli: u64,
    idle_milli: u64,

    // Translation.
    tlbs: [Tlb; 3],
    tlb_l1_misses: u64,
    tlb_l2_misses: u64,

    // Exact counts.
    tally: Tally,
    /// The tally when the running thread's counts were last saved.
    burst_start: Tally,
    /// The running thread and the clock at that save (`save_counts`; None before the first).
    saved: Option<(Option<usize>, u64)>,

    // The PMU: counters (multiplexed) and the data-address sampler.
    counters: CounterSet,
    observed: EventCounts,
    observed_at: u64,
    next_mux: u64,
    sampler: Option<Sampler>,
    samples: u64,
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
    /// Each chip's memory controller under the queued model (`crate::dram`); empty under the
    /// fixed-latency model.
    controllers: Vec<crate::dram::Controller>,
    memory: PhysicalMemory,
    timing: Timing,
    /// Taken out while one of its hooks runs (the hook gets the rest of the system as `Kernel`).
    policy: Option<Box<dyn Policy>>,
    policy_name: &'static str,
    /// `[policy] control`: the page and thread moves the kernel refused (None: not a control).
    control: Option<report::ControlStats>,
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
    batching: bool,
    /// Samples taken during the current record, for the policy once the record is done.
    samples_due: Vec<Sample>,
    /// The physical accesses of a burst being batched (`run_burst`), run and charged together.
    batch: batch::Batch,
    /// Processes not started yet, by start cycle (then pid).
    arrivals: VecDeque<usize>,
    /// Page-table shape of every address space, and the next core an unpinned thread gets.
    mmu: crate::mmu::PageTableConfig,
    next_core: usize,
    /// The config it was built from, for the report.
    config: SystemConfig,
    /// The realistic PMU's state (`[pmu] ideal = false`); `None` is the exact oracle.
    realistic: Option<crate::pmu::RealisticPmu>,
    /// The exact per-page LLC profile, when kept (`keep_page_llc`).
    page_llc: Option<page_llc::PageLlcTally>,
}

use batch::Mark;

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
