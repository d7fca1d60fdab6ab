/*!
OS cache-management policies (DESIGN.md "The policy trait"). A policy sees what an OS sees and
decides which page colors each process may use; the kernel (`system`) carries its decisions
out and charges their cost. A policy is a folder named as its config name (`policy/NAME/`,
with its report struct and tests) plus one line in the `policies!` table below, from which
`PolicyKind`, the config sections and `build` come (docs/policies.md, the worked example).

Shipped so far:
- `linux`: no coloring (every color allowed); paired with the `buddy` allocator it is the
  baseline the papers compare against.
- `static`: fixed color sets: the ones a process's config gives (`colors = [[0, 32]]`), or
  COLORIS's static scheme (section 3.2): the colors are split into one section per core, and a
  new process without colors of its own gets the section of the least-loaded core and is pinned
  there.
- `mrc-partition`: colors divided by online miss-rate curves (Azimi et al. case study 1).
- `thread-cluster`: threads sharing data moved to one chip (Azimi et al. case study 3).
- `rocs`: the ROCS pollute buffer (papers/000 sections 3-5); `global-pollute`: one pollute
  buffer shared by every process (Azimi case study 2); both are the engine of `rocs/mod.rs`, one
  unit per process or one of all (`pollute::Scope`).
- `coloris`: COLORIS's dynamic scheme (sections 3.2-3.3, Algorithm 1): the static sections to
  start, then a Cache Utilization Monitor that moves colors between processes by their LLC
  miss rates, and a Recoloring Engine (lazy shrink, Selective Moving or Redistribution).
*/
// A folder per policy, named as its config name; Rust module names stay identifiers (`static` is a
// keyword, `-` is not allowed), hence the paths.
mod coloris;
mod linux;
#[path = "mrc-partition/mod.rs"]
pub mod mrc_partition;
/// The pollute-buffer engine of `rocs` and `global-pollute` (`policy/rocs/`).
#[path = "rocs/mod.rs"]
pub mod pollute;
#[path = "static/mod.rs"]
mod static_sections;
#[path = "thread-cluster/mod.rs"]
pub mod thread_cluster;

#[cfg(test)]
mod azimi_tests;
#[cfg(test)]
mod harm_tests;
#[cfg(test)]
mod pollute_fresh_tests;
#[cfg(test)]
mod robustness_tests;
#[cfg(test)]
#[path = "rocs/scenarios.rs"]
mod rocs_tests;

pub use coloris::{
    Coloris, ColorisConfig, ColorisProcess, ColorisReport, ColorsAt, Expansion, MonitorCall,
    Overlap, Redistribution,
};
pub use linux::Linux;
pub use mrc_partition::{MrcPartition, MrcPartitionConfig, MrcPartitionReport};
pub use pollute::{PolluteConfig, PolluteEngine, RocsReport};
pub use static_sections::{PolluteSet, StaticConfig, StaticSections};
pub use thread_cluster::{ThreadCluster, ThreadClusterConfig, ThreadClusterReport};

use crate::error::ConfigError;
use crate::memory::{ColorSet, Pfn};
use crate::pmu::{Event, EventCounts, Reading, Sample, SamplingConfig};
use serde::{Deserialize, Serialize};

/// What a policy is told about a new process.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub pid: usize,
    pub name: String,
    /// Colors the config gives it, if any.
    pub colors: Option<ColorSet>,
    /// Cores it is pinned to by the config, if any.
    pub pinned: Option<Vec<usize>>,
    /// Its threads (a placement may give each its own core).
    pub threads: usize,
}

/// What a policy may decide when a process starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Pin the process's threads to these cores (None: leave as configured).
    pub pin: Option<Vec<usize>>,
}

/// A process's event counts at a tick, summed over its threads: exact under the ideal PMU;
/// under a realistic one, what its threads' virtual counters estimate (`total`: each reading
/// scaled by time_enabled / time_running; `interval`: the interval's raw count scaled by the
/// interval's enabled / running time; events no counter counts read 0). Estimates of two
/// events come from different slices of time when they are multiplexed, so one may exceed a
/// related one (misses above accesses) in an interval.
#[derive(Debug, Clone)]
pub struct ProcessCounts {
    pub pid: usize,
    /// Still has a thread that has not finished.
    pub alive: bool,
    /// Counts since the process started.
    pub total: EventCounts,
    /// Counts since the previous tick.
    pub interval: EventCounts,
    /// Under a realistic PMU, the process's counters as read (raw, time enabled, time running
    /// per logical counter, summed over its threads); empty under the ideal PMU.
    pub readings: Vec<Reading>,
}

/// What a policy sees at each periodic tick (`[scheduler] tick` cycles of simulated time).
#[derive(Debug, Clone)]
pub struct Tick {
    /// Simulated time in cycles.
    pub now: u64,
    /// Cycles since the previous tick.
    pub interval: u64,
    /// Per core: its programmable counters as software reads them (multiplexed and scaled).
    pub cores: Vec<Vec<Reading>>,
    pub processes: Vec<ProcessCounts>,
}

/// A scheduler event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedEvent {
    /// `to` starts running on `core` (after `from`, if another thread ran there).
    Switch {
        core: usize,
        from: Option<usize>,
        to: usize,
    },
    /// A thread moved to another core's run queue.
    Migrated { tid: usize, from: usize, to: usize },
    /// A thread reached the end of its trace or workload.
    Exited { tid: usize },
}

/// One mapped page of a process, as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    pub vpn: u64,
    pub pfn: Pfn,
    pub color: u64,
    pub accessed: bool,
    pub dirty: bool,
    /// Awaiting lazy recoloring (not present until its next fault).
    pub marked: bool,
    pub huge: bool,
}

/// A thread, as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadInfo {
    pub tid: usize,
    pub pid: usize,
    /// The core whose run queue holds it.
    pub core: usize,
    pub done: bool,
}

/// Why a kernel action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error("process {0} does not exist or has exited")]
    NoProcess(usize),
    #[error("page {vpn:#x} of process {pid} is not mapped as a small page")]
    NotMapped { pid: usize, vpn: u64 },
    #[error("thread {0} does not exist or has finished")]
    NoThread(usize),
    #[error("core {core} does not exist (the machine has {cores})")]
    NoCore { core: usize, cores: usize },
    #[error("{0}")]
    Memory(#[from] crate::memory::MemoryError),
}

/// What a policy may ask of the kernel (DESIGN.md "The policy trait"). Every action is carried
/// out at once and its cost charged to the core running the hook (and to the thread running
/// there, as kernel stall cycles), by the timing config's rules.
pub trait Kernel {
    /// Simulated time (cycles) on the core running the hook.
    fn now(&self) -> u64;
    /// The core running the hook.
    fn core(&self) -> usize;
    fn cores(&self) -> usize;
    /// Colors of the LLC.
    fn colors(&self) -> u64;
    fn threads(&self) -> Vec<ThreadInfo>;
    /// The mapped pages of process `pid`, in vpn order (empty if it has exited).
    fn pages(&self, pid: usize) -> Vec<PageInfo>;
    /// Eager recolor (ROCS section 4.2, COLORIS section 3.3): move page `vpn` of `pid` to a new
    /// frame of one of `colors` (allocate, copy, remap, TLB shootdown). Returns the new frame, or
    /// `None` if its color is already allowed (nothing done).
    fn recolor(
        &mut self,
        pid: usize,
        vpn: u64,
        colors: &ColorSet,
    ) -> Result<Option<Pfn>, KernelError>;
    /// Lazy recolor (COLORIS section 3.3): clear the page's present bit and mark it; its next
    /// fault asks `allowed_colors` again and moves it if its color is no longer allowed.
    fn mark_for_recolor(&mut self, pid: usize, vpn: u64) -> Result<(), KernelError>;
    /// Clear the accessed bit of every page of `pid` and return the pages that had it set
    /// (cost per entry visited, plus a TLB flush of the process so the bits are set again).
    fn scan_accessed(&mut self, pid: usize) -> Result<Vec<u64>, KernelError>;
    /// Cycles the kernel has spent so far on `pid` doing a policy's work: page moves and their
    /// TLB shootdowns, sample interrupts, accessed-bit scans, migrations (every kernel path but
    /// the page faults any process pays). The OS's own accounting of its work, as Linux keeps a
    /// task's system time; a policy weighs what its actions cost with it (rocs's search
    /// budget). Default 0 (a kernel that does not account).
    fn policy_cycles(&self, _pid: usize) -> u64 {
        0
    }
    /// Move thread `tid` to `core`'s run queue.
    fn migrate(&mut self, tid: usize, core: usize) -> Result<(), KernelError>;
    /// Program the data-address sampler of `core` (all cores if `None`), or switch it off with
    /// `None` (ROCS section 3.3 throttles it by changing the period). A period of 0 counts as 1;
    /// the handler touches at most one page of lines.
    fn set_sampling(&mut self, core: Option<usize>, sampling: Option<SamplingConfig>);
    /// Switch the hardware prefetchers on or off (ROCS section 3.2 profiles with them off).
    fn set_prefetch(&mut self, on: bool);
}

/// An OS cache-management policy. Hooks other than `process_created` and `allowed_colors`
/// default to doing nothing.
pub trait Policy: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// A process was created; the policy may pin it.
    fn process_created(&mut self, p: &ProcessInfo) -> Placement;
    /// A process exited (all its frames are already free).
    fn process_exited(&mut self, _pid: usize) {}
    /// The colors page `vpn` of process `pid` may be placed in (page-fault path).
    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet;
    /// The events this policy reads from `ProcessCounts` at its ticks. A realistic PMU
    /// (`[pmu] ideal = false`) programs them on every core's counters, multiplexed with
    /// `pmu.events` when there are more than counters; an event nobody asked for reads 0.
    fn counter_events(&self) -> Vec<Event> {
        Vec::new()
    }
    /// The periodic tick, with the counters' readings.
    fn tick(&mut self, _k: &mut dyn Kernel, _t: &Tick) {}
    /// A PMU sample (`[pmu.sampling]`, or sampling a policy programmed).
    fn sample(&mut self, _k: &mut dyn Kernel, _s: &Sample) {}
    /// A scheduler event.
    fn scheduled(&mut self, _k: &mut dyn Kernel, _e: &SchedEvent) {}
    /// What the policy decided and measured, for the run's report (`policy_report` in the
    /// JSON): e.g. the pages it picked, the color assignments over time. `Null` by default.
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// At the end of a run: why the policy never acted, if it did not (nothing partitioned, no
    /// page moved, no thread migrated). The run is then `linux`'s placement or scheduling plus
    /// the policy's costs, which its numbers alone do not say; the run's `policy_warnings`
    /// carry the line beside the report's own `warnings`, except in a control run (whose moves
    /// the kernel refuses by design). `None` by default.
    fn never_acted(&self) -> Option<String> {
        None
    }
    /// The fault path (a first touch, or the lazy move of a page marked for recoloring) found
    /// no free frame in any color `allowed_colors` gave for `pid` (COLORIS section 3.2:
    /// "ALLOC_COLORS(UNIT) is invoked to add UNIT colors to a process, whenever it runs out of
    /// memory with its pre-existing colors"). Return true if the policy widened the process's
    /// colors: the fault then asks `allowed_colors` again and retries once. Not called from
    /// inside a hook (an eager `recolor` gets the error).
    fn out_of_colors(&mut self, _pid: usize) -> bool {
        false
    }
    /// Before any process starts: the names of the config's processes, in pid order, so a
    /// policy can reject parameters naming a process that does not exist.
    fn check_processes(&self, _names: &[String]) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// The machine a policy is built for (what an OS reads from CPUID and its boot-time probing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineInfo {
    pub cores: usize,
    pub chips: usize,
    /// Colors of the LLC (`size / (ways * page)`).
    pub colors: u64,
    pub llc_size: u64,
    pub llc_ways: u32,
    pub line_size: u64,
    pub page_size: u64,
    /// Colors of the shared caches inside the LLC that a policy's color set must confine as
    /// well: the fewest colors of any shared level above the LLC with more than one color (POWER5:
    /// its L2's 16 beside the L3's 256), 1 when there is none. Colors compose through the frame
    /// number's low bits: a frame of LLC color `c` has color `c mod inner_colors` in that cache
    /// when `inner_colors` divides `colors`.
    pub inner_colors: u64,
    /// Cycles one LLC miss stalls a core beyond an LLC hit: `(dram_latency - LLC latency) /
    /// mlp`, the timing model's own charge (what a miss avoided saves).
    pub llc_miss_penalty: u64,
    /// Cycles one page move costs its process at least: `max(copy_cycles_per_page, the copy's
    /// traffic at the memory's peak bandwidth)` plus a shootdown (what a partition's page moves
    /// cost; `System::move_page` charges the same).
    pub page_move_cycles: u64,
    /// Programmable counters a policy's events share with `pmu.events` (`None`: the ideal PMU,
    /// every event exact), and the events already on them (a set of `Event::bit`s): what a
    /// policy can ask for without multiplexing its events more (`Policy::counter_events`).
    pub pmu_counters: Option<usize>,
    pub pmu_events: u32,
}

#[cfg(test)]
impl MachineInfo {
    /// The policies' unit tests' machine: `cores` on `chips`, a 1 MiB 16-way LLC of 16 colors,
    /// 64-byte lines, 4 KiB pages, no inner colors, no miss penalty or move cost (a test sets
    /// what it needs otherwise with `..MachineInfo::for_tests(..)`).
    pub(crate) fn for_tests(cores: usize, chips: usize) -> MachineInfo {
        MachineInfo {
            cores,
            chips,
            colors: 16,
            llc_size: 1 << 20,
            llc_ways: 16,
            line_size: 64,
            page_size: 4096,
            inner_colors: 1,
            llc_miss_penalty: 0,
            page_move_cycles: 0,
            pmu_counters: None,
            pmu_events: 0,
        }
    }
}

impl MachineInfo {
    /// `inner_colors` of a hierarchy (see the field).
    pub fn inner_colors_of(h: &crate::cache::Hierarchy) -> u64 {
        let levels = &h.config().levels;
        let llc = levels.len() - 1;
        (0..llc)
            .filter(|&i| levels[i].shared == Some(true))
            .map(|i| h.cache(i, 0).geometry().colors())
            .filter(|&c| c > 1)
            .min()
            .unwrap_or(1)
    }

    /// `pmu_counters` and `pmu_events` of a `[pmu]` table (see the fields).
    pub fn pmu_of(pmu: &crate::system::PmuConfig) -> (Option<usize>, u32) {
        let events = pmu
            .events
            .iter()
            .filter(|e| !pmu.fixed.contains(e))
            .fold(0, |set, e| set | e.bit());
        ((!pmu.ideal).then_some(pmu.counters), events)
    }

    /// `llc_miss_penalty` of a timing model (see the field): the stall `Timing` charges a
    /// read served by DRAM minus the one it charges an LLC hit.
    pub fn llc_miss_penalty_of(t: &crate::timing::TimingConfig) -> u64 {
        let llc = t.level_latency.last().copied().unwrap_or(0);
        (f64::from(t.dram_latency.saturating_sub(llc)) / t.mlp.max(1.0)).round() as u64
    }

    /// `page_move_cycles` (see the field): a copy reads and writes a page; under the queued
    /// memory it is done no sooner than the channels move those bytes (`System::move_page`).
    pub fn page_move_cycles_of(
        t: &crate::timing::TimingConfig,
        memory: &crate::dram::DramConfig,
        page_size: u64,
    ) -> u64 {
        let traffic = match memory.model {
            crate::dram::DramModel::Queued => {
                (2.0 * page_size as f64 / memory.peak_bytes_per_cycle().max(1e-9)).ceil() as u64
            }
            crate::dram::DramModel::Fixed => 0,
        };
        t.copy_cycles_per_page.max(traffic) + t.shootdown_cycles
    }

    /// Cores per chip.
    pub fn cores_per_chip(&self) -> usize {
        self.cores / self.chips.max(1)
    }

    /// The chip of `core`.
    pub fn chip_of(&self, core: usize) -> usize {
        core / self.cores_per_chip().max(1)
    }
}

/// The OS-policy registry: one line per policy gives its enum variant, its config name, its
/// `[policy.NAME]` parameter table (if it has one: a field of `PolicyConfig`), the struct its
/// `report()` serializes (if it reports anything) and how to build it. From it come `PolicyKind`
/// (`ALL`, `name()`, `NAMES`, `parse`; `crate::registry`; `report_schema`), `PolicyConfig` with
/// one defaulted section per policy (all may coexist in one config; only the named policy's is
/// used) and `build`, whose `match` has one arm per line and no wildcard.
macro_rules! policies {
    (
        $(
            $(#[$vmeta:meta])*
            $Variant:ident = $name:literal
            $(, [$(#[$fmeta:meta])* $field:ident: $Config:ty])?
            $(, report: $Report:ty)?
            => $build:expr
        ),+ $(,)?
    ) => {
        crate::registry! {
            /// The OS policies a config can name (`[policy] name`).
            pub enum PolicyKind (field = "policy.name", what = "policy", plural = "policies") {
                $( $(#[$vmeta])* $Variant = $name, )+
            }
        }

        impl PolicyKind {
            /// The JSON schema (draft 2020-12, as serialized) of what the policy's `report()`
            /// returns: its report struct's, from its registry line; `None` for a policy that
            /// reports null. `_core.policy_report_schemas()` exports them and
            /// `tools/report_stubs.py` writes `_core.pyi`'s report TypedDicts from them.
            pub fn report_schema(self) -> Option<schemars::Schema> {
                match self {
                    $( PolicyKind::$Variant => report_schema!($($Report)?), )+
                }
            }
        }

        /// `[policy]` in a config: `name` and one `[policy.NAME]` table per policy with
        /// parameters (defaults filled in).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct PolicyConfig {
            #[serde(default = "default_name")]
            pub name: String,
            /// The policy's control run: the policy runs, decides and reserves colors as usual
            /// (`allowed_colors` on every fault), but the kernel moves no page and no thread
            /// (recolor, lazy marks and migrations are refused and counted), so what remains of its
            /// effect is placement and measurement cost.
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            pub control: bool,
            $($(
                #[doc = concat!("`[policy.", $name, "]`.")]
                #[serde(default, rename = $name)]
                $(#[$fmeta])*
                pub $field: $Config,
            )?)+
        }

        impl Default for PolicyConfig {
            fn default() -> Self {
                PolicyConfig {
                    name: default_name(),
                    control: false,
                    $($( $field: <$Config>::default(), )?)+
                }
            }
        }

        /// Build the named policy for `machine`.
        pub fn build(
            config: &PolicyConfig,
            machine: &MachineInfo,
        ) -> Result<Box<dyn Policy>, ConfigError> {
            match PolicyKind::parse(&config.name)? {
                $(
                    PolicyKind::$Variant => {
                        let build: fn(
                            &PolicyConfig,
                            &MachineInfo,
                        ) -> Result<Box<dyn Policy>, ConfigError> = $build;
                        build(config, machine)
                    }
                )+
            }
        }
    };
}

/// A registry line's report schema: `None` when the line names no report struct.
macro_rules! report_schema {
    () => {
        None
    };
    ($Report:ty) => {
        Some(
            schemars::generate::SchemaSettings::draft2020_12()
                .for_serialize()
                .into_generator()
                .into_root_schema_for::<$Report>(),
        )
    };
}

policies! {
    Linux = "linux" => |_, m| Ok(Box::new(Linux::new(m.colors))),
    Static = "static", [#[serde(skip_serializing_if = "StaticConfig::is_default")] static_sections: StaticConfig] => |c, m| {
        Ok(Box::new(StaticSections::configured(&c.static_sections, m)?))
    },
    Rocs = "rocs", [rocs: PolluteConfig], report: RocsReport => |c, m| {
        Ok(Box::new(PolluteEngine::policy(&c.rocs, pollute::Scope::PerProcess, m)?))
    },
    GlobalPollute = "global-pollute", [#[serde(alias = "global_pollute")] global_pollute: PolluteConfig], report: RocsReport => |c, m| {
        Ok(Box::new(PolluteEngine::policy(&c.global_pollute, pollute::Scope::Global, m)?))
    },
    MrcPartition = "mrc-partition", [mrc_partition: MrcPartitionConfig], report: MrcPartitionReport => |c, m| {
        Ok(Box::new(MrcPartition::new(&c.mrc_partition, m)?))
    },
    ThreadCluster = "thread-cluster", [thread_cluster: ThreadClusterConfig], report: ThreadClusterReport => |c, m| {
        Ok(Box::new(ThreadCluster::new(&c.thread_cluster, m)?))
    },
    Coloris = "coloris", [coloris: ColorisConfig], report: ColorisReport => |c, m| Ok(Box::new(Coloris::new(&c.coloris, m)?)),
}

fn default_name() -> String {
    PolicyKind::Linux.name().into()
}

/// The policy names a config may give.
pub const NAMES: &str = PolicyKind::NAMES;
