/*!
`mrc-partition`: cache partitions sized from online miss-rate curves (Azimi et al., case study 1,
section 3; the curve is Tam et al.'s RapidMRC, section 3.2.2).

What it does, as an OS would:
1. **Profile** (3.2.2): for each application it programs the data-address sampler of the cores
   its threads run on to take *every* L1D miss (`period = 1`, the paper's "trace of nearly all
   L2 cache accesses over a short period of time"), and feeds the sampled line addresses of that
   process into an exact LRU stack (`analysis::rapidmrc::MissWindow`, Mattson's algorithm): the
   first `warmup` misses only fill the stack, the next `window - warmup` are counted. Sampling
   stops when every profiled process has its window (each interrupt costs `sample_cost_cycles`).
2. **Curve**: the window's stack distances give the miss rate of the shared cache at every
   partition size of `c` colors (`c * llc_size / colors` bytes, fully associative LRU as the
   paper's stack), `c = 0..=colors`. With the process's L1-miss rate (L1D misses per cycle, its
   virtualised counters at the last tick) that is a curve of misses per cycle.
3. **Allocate** (3.2, "it may be more profitable to allocate larger partition sizes to other
   applications that would experience larger marginal gains"): the colors are divided among the
   live processes to minimise their total misses with the utility-based *lookahead* allocation
   of Qureshi and Patt (MICRO 2006, the paper's reference [27]): every process starts with
   `min_colors`; while colors remain, each process's best marginal utility (misses saved per
   color, over every possible extra amount) is computed and the process with the highest gets
   that many; ties go to the lower pid. Each process gets a contiguous range of colors, in pid
   order.
4. **Apply** with the color-aware allocator (3.2.1): `allowed_colors` returns the process's
   range on the fault path; pages already in a color the process lost are moved, lazily
   (`mark_for_recolor`, moved at their next touch) or eagerly (`recolor`: copy and shootdown),
   per `recolor`; and a process that gained colors has its pages in use spread evenly over
   them (its accessed bits are cleared at the allocation; at the next tick the pages touched
   since, in over-full colors, are copied eagerly to its emptiest colors), since pages placed
   under the old partition would otherwise stay crowded in its old colors.
5. **Re-evaluate on phase change**: at every tick each process's L1D misses per kilo-instruction
   (independent of its LLC partition) is compared with its value when its curve was taken; a
   relative change beyond `phase_threshold` for `phase_ticks` ticks in a row starts a new window
   for that process, and its new curve re-runs the allocation. A process that exits gives its
   colors back at the next tick (the allocation re-runs over the live ones).

Before the first curves every process may use every color (uncontrolled sharing, as under
`linux`); `even_split` is the alternative start (kept for tests). A process alone (one live
process) is not profiled and keeps every color: there is nothing to divide.

**Checking the curve** (`exact_check = true`, a validation run): the sampler stays on all run
long, free outside the windows; each process's whole L1-miss stream goes into a second exact
stack, and the report gives each window's error against it (`analysis::rapidmrc`'s definition).

Report (`policy_report`, docs/azimi.md): windows, allocations, decisions, phase changes, moves.
*/
use super::{Kernel, Placement, Policy, ProcessInfo, SchedEvent, Tick};
use crate::analysis::rapidmrc::MissWindow;
use crate::analysis::stack::{DistanceHistogram, LruStack};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::{Event, Sample, SamplingConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

use super::MachineInfo;

mod model;
mod report;
use model::Footprint;
pub use model::{window_afforded, Decision, DecisionInput, ProcessPrediction};
pub use report::{
    Allocation, DecisionRecord, MrcPartitionReport, OutOfMemory, PhaseChange, Window,
    WindowIncomplete, WindowWanted,
};

/// How pages in a color their process lost are moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RecolorMode {
    /// Marked; moved at their next touch (COLORIS 3.3's lazy recoloring).
    #[default]
    Lazy,
    /// Copied to an allowed color at once.
    Eager,
}

/// `[policy.mrc-partition]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MrcPartitionConfig {
    /// The sampled event whose addresses form the window: `l1d-misses` (the paper: L1 misses
    /// are the shared L2's accesses), or `l2-misses` when a private L2 sits in between.
    pub event: Event,
    /// Misses per window (warm-up included).
    pub window: u64,
    /// The window's first misses, which only fill the stack.
    pub warmup: u64,
    /// Cycles each sampling interrupt costs during a window.
    pub sample_cost_cycles: u64,
    /// Colors every live process keeps at least.
    pub min_colors: u64,
    /// Relative change of a process's L1D MPKI that counts as a phase change.
    pub phase_threshold: f64,
    /// Ticks in a row beyond the threshold before a new window is taken.
    pub phase_ticks: u32,
    pub recolor: RecolorMode,
    /// Validation: sample every L1D miss all run long (free outside windows) and report each
    /// window's error against the whole-run curve.
    pub exact_check: bool,
    /// Partition whenever the curves are in, whatever the decision (`decide`) says: the paper's
    /// behaviour, kept for its runs. `false`: partition only where the predicted cycles saved
    /// exceed what the partition's page moves and its window cost; the decision is reported either
    /// way (`decisions`).
    pub always_partition: bool,
    /// The window budget, a rate over the run so far: the windows a process has begun may cost
    /// at most this fraction of the cycles it has run (`window_afforded`), each window as long as
    /// what is left affords, up to `window`. The window is paid before the curves can say whether
    /// partitioning gains anything, so its cost is held to the do-no-harm bar (a policy with
    /// nothing to gain within 1% of linux): default 0.01, not fitted to any config.
    pub max_window_overhead: f64,
    /// Fewest sampled misses a window may have (warm-up included); a shorter one waits until the
    /// run affords this many. The paper gives no size: 1,000, of which the warm-up's quarter,
    /// leaves 750 counted, so a point of the curve has a standard error of at most 0.018.
    pub min_window: u64,
}

impl Default for MrcPartitionConfig {
    fn default() -> Self {
        MrcPartitionConfig {
            event: Event::L1dMisses,
            window: 50_000,
            warmup: 12_500,
            sample_cost_cycles: 2000,
            min_colors: 1,
            phase_threshold: 0.3,
            phase_ticks: 2,
            recolor: RecolorMode::Lazy,
            exact_check: false,
            always_partition: false,
            max_window_overhead: 0.01,
            min_window: 1000,
        }
    }
}

// Validated in `MrcPartition::new` (no NaN), so equality is reflexive.
impl Eq for MrcPartitionConfig {}

#[derive(Debug)]
struct Proc {
    pid: usize,
    name: String,
    alive: bool,
    /// The window being collected, if any.
    window: Option<MissWindow>,
    reason: &'static str,
    /// A window is wanted (for `reason`) but not yet begun (warm-up, `max_window_overhead`).
    wants_window: bool,
    /// Cycles the process has run since its start: the decision's horizon (ski rental) and the
    /// window budget's denominator.
    cycles_run: u64,
    /// Sampled-event misses (the shared cache's accesses) since its start: the warm-up.
    accesses_run: u64,
    /// Lines of the pages it had when its window began (`window_footprint`).
    lines_at_window_start: u64,
    /// It ran while another process was live (a window was wanted for a reason).
    shared_cache: bool,
    /// The window it was collecting when it exited, incomplete (reported).
    ended_window: Option<MissWindow>,
    /// Interrupt cycles of every window it has begun (its misses x `sample_cost_cycles` each):
    /// the window budget's numerator.
    window_paid: u64,
    /// Accesses its last window counted: the curve's sample size (`decide`'s noise).
    counted: u64,
    running: [u64; 2], // cycles its event and the LLC misses were counted (`counted_since`)
    /// LLC misses and sampled-event (L1D) misses counted while the process had every color,
    /// since its last window started: the measured shared-cache baseline.
    shared_llc_misses: u64,
    shared_event_misses: u64,
    /// Window interrupts paid since the last decision (`window x sample_cost_cycles`).
    window_cost_unpaid: u64,
    /// Miss rate at `c` colors, `c = 0..=colors`, from the last complete window.
    curve: Option<Vec<f64>>,
    /// L1D misses per cycle at the last tick it ran.
    l1_rate: f64,
    /// L1D MPKI when the curve was taken (phase detection reference).
    reference_mpki: Option<f64>,
    drift: u32,
    colors: ColorSet,
    /// Every sampled L1D miss of the run (exact_check only).
    whole: Option<LruStack>,
    /// exact_check: the whole-run stack's distances of the window's counted lines (the exact
    /// curve of the same window, its stack warm since the process started).
    window_exact: DistanceHistogram,
    /// Times its partition had no free frame left (`out_of_colors`); after the first it keeps
    /// every color (the fallback: a partition never aborts the workload).
    out_of_memory: u32,
}

#[derive(Debug, Clone)]
struct WindowRecord {
    pid: usize,
    time: u64,
    reason: &'static str,
    samples: u64,
    miss_rate: Vec<f64>,
    /// exact_check: the exact curve of the window's counted lines.
    exact_window_miss_rate: Option<Vec<f64>>,
}

#[derive(Debug)]
pub struct MrcPartition {
    config: MrcPartitionConfig,
    colors: u64,
    /// Partition units: the colors of the innermost partitioned cache when a shared cache inside
    /// the LLC has fewer colors (POWER5: the L2's 16 inside the L3's 256), else the LLC's colors.
    /// Unit `u` is every LLC color `x` with `x mod units == u`, so a set of units is the same share
    /// of every partitioned cache.
    units: u64,
    /// Cache lines per unit (of the LLC, which the curve is of).
    lines_per_unit: u64,
    /// The curve's sizes: `0..=units` units, in LLC lines.
    sizes: Vec<u64>,
    /// Lines of the LLC: the warm-up's accesses.
    llc_lines: u64,
    page_size: u64,
    /// Cycles an LLC miss avoided saves, and one page move costs (`MachineInfo`).
    miss_penalty: u64,
    page_move_cycles: u64,
    line_shift: u32,
    procs: BTreeMap<usize, Proc>,
    /// The sampler must be reprogrammed at the next hook with a kernel.
    resample: bool,
    /// A curve arrived or a process exited: allocate at the next tick.
    reallocate: bool,
    /// The last decision kept the cache shared but predicted some gain: it is taken again at
    /// every tick, over the longer horizon (ski rental: rent until the rent paid would have
    /// bought), until the partition pays or a curve or process changes.
    reconsider: bool,
    /// Decisions retaken so (only the first and a flip to partitioning are recorded).
    reconsidered: u64,
    /// Processes whose pages in use are spread over their colors at the next tick.
    rebalance: Vec<usize>,
    windows: Vec<WindowRecord>,
    allocations: Vec<Allocation>,
    /// Each allocation's decision: partition or keep sharing, with the predictions.
    decisions: Vec<DecisionRecord>,
    phase_changes: Vec<PhaseChange>,
    moved: u64,
    marked: u64,
}

impl MrcPartition {
    pub fn new(config: &MrcPartitionConfig, machine: &MachineInfo) -> Result<Self, ConfigError> {
        let f = |k: &str| format!("policy.mrc-partition.{k}");
        let c = config;
        if !matches!(c.event, Event::L1dMisses | Event::L2Misses) {
            return Err(ConfigError::new(
                f("event"),
                format!(
                    "`{}`: the window samples the shared cache's accesses, l1d-misses or l2-misses",
                    c.event.name()
                ),
            ));
        }
        if c.window == 0 {
            return Err(ConfigError::new(
                f("window"),
                "0 is not allowed: a window holds at least one sampled miss",
            ));
        }
        if c.min_window < 2 || c.min_window > c.window {
            return Err(ConfigError::new(
                f("min_window"),
                format!("{}: allowed 2..={} (the window)", c.min_window, c.window),
            ));
        }
        if c.warmup >= c.window {
            return Err(ConfigError::new(
                f("warmup"),
                format!(
                    "{} is not allowed: the warm-up must be shorter than the window ({})",
                    c.warmup, c.window
                ),
            ));
        }
        if c.min_colors == 0 || c.min_colors > machine.colors {
            return Err(ConfigError::new(
                f("min_colors"),
                format!(
                    "{}: allowed 1..={} (the LLC's colors)",
                    c.min_colors, machine.colors
                ),
            ));
        }
        if !(c.phase_threshold.is_finite() && c.phase_threshold > 0.0) {
            return Err(ConfigError::new(
                f("phase_threshold"),
                format!(
                    "{}: a relative change above 0 (e.g. 0.3 for 30%)",
                    c.phase_threshold
                ),
            ));
        }
        if !(c.max_window_overhead.is_finite()
            && c.max_window_overhead > 0.0
            && c.max_window_overhead <= 1.0)
        {
            return Err(ConfigError::new(
                f("max_window_overhead"),
                format!(
                    "{}: a fraction of the process's cycles in (0, 1] (e.g. 0.01 for 1%)",
                    c.max_window_overhead
                ),
            ));
        }
        if c.phase_ticks == 0 {
            return Err(ConfigError::new(
                f("phase_ticks"),
                "0 is not allowed: at least 1 tick",
            ));
        }
        let units = Self::units_of(machine);
        let lines_per_unit = (machine.llc_size / units.max(1) / machine.line_size).max(1);
        Ok(MrcPartition {
            config: config.clone(),
            colors: machine.colors,
            units,
            lines_per_unit,
            sizes: (0..=units).map(|c| c * lines_per_unit).collect(),
            llc_lines: machine.llc_size / machine.line_size.max(1),
            page_size: machine.page_size,
            miss_penalty: machine.llc_miss_penalty,
            page_move_cycles: machine.page_move_cycles,
            line_shift: machine.line_size.trailing_zeros(),
            procs: BTreeMap::new(),
            resample: true,
            reallocate: false,
            reconsider: false,
            reconsidered: 0,
            rebalance: Vec::new(),
            windows: Vec::new(),
            allocations: Vec::new(),
            decisions: Vec::new(),
            phase_changes: Vec::new(),
            moved: 0,
            marked: 0,
        })
    }

    /// Partition units of a machine (the field `units`): the inner shared cache's colors when
    /// they divide the LLC's (a frame's inner color is its LLC color mod `inner_colors`, the
    /// frame number's low bits index both), else the LLC's colors. An inner cache with as many
    /// colors as the LLC or more is confined by any LLC color set already.
    pub fn units_of(m: &MachineInfo) -> u64 {
        let (c, i) = (m.colors, m.inner_colors);
        if i > 1 && i < c && c.is_multiple_of(i) {
            i
        } else {
            c
        }
    }

    /// The LLC colors of units `[start, end)`: every color whose unit (`color mod units`) is
    /// in the range; with `units == colors` the contiguous range itself.
    fn unit_colors(&self, start: u64, end: u64) -> ColorSet {
        ColorSet::of(
            self.colors,
            (0..self.colors).filter(|x| (start..end).contains(&(x % self.units))),
        )
        .expect("in range")
    }

    fn live(&self) -> usize {
        self.procs.values().filter(|p| p.alive).count()
    }

    /// Whether a window is being collected: only while at least two processes share the cache
    /// (one alone has nothing to divide, and keeps every color).
    fn profiling(&self) -> bool {
        self.live() >= 2 && self.procs.values().any(|p| p.alive && p.window.is_some())
    }

    /// Program the samplers: period 1 on the cores of profiled processes' threads (with the
    /// interrupt cost), off elsewhere (free when checking against the exact curve).
    fn program_sampling(&mut self, k: &mut dyn Kernel) {
        self.resample = false;
        let mut hot = vec![false; k.cores()];
        let sharing = self.live() >= 2;
        for t in k.threads() {
            if t.done {
                continue;
            }
            if let Some(p) = self.procs.get(&t.pid) {
                if sharing && p.window.is_some() && t.core < hot.len() {
                    hot[t.core] = true;
                }
            }
        }
        for (core, &on) in hot.iter().enumerate() {
            let cfg = if on {
                Some(SamplingConfig {
                    event: self.config.event,
                    period: 1,
                    cost_cycles: self.config.sample_cost_cycles,
                    pollute_l1_lines: 0,
                })
            } else if self.config.exact_check {
                Some(SamplingConfig {
                    event: self.config.event,
                    period: 1,
                    cost_cycles: 0,
                    pollute_l1_lines: 0,
                })
            } else {
                None
            };
            k.set_sampling(Some(core), cfg);
        }
    }

    fn allocate(&mut self, k: &mut dyn Kernel, now: u64) {
        let again = self.reconsider && !self.reallocate;
        self.reallocate = false;
        self.reconsider = false;
        let live: Vec<usize> = self
            .procs
            .values()
            .filter(|p| p.alive && p.curve.is_some())
            .map(|p| p.pid)
            .collect();
        if live.is_empty() || self.procs.values().any(|p| p.alive && p.curve.is_none()) {
            return;
        }
        let per_unit = self.colors / self.units;
        let min = self
            .config
            .min_colors
            .div_ceil(per_unit)
            .min(self.units / live.len() as u64)
            .max(1);
        let misses: Vec<Vec<f64>> = live
            .iter()
            .map(|pid| {
                let p = &self.procs[pid];
                let rate = p.l1_rate.max(1e-12);
                p.curve
                    .as_ref()
                    .expect("filtered")
                    .iter()
                    .map(|m| m * rate)
                    .collect()
            })
            .collect();
        let alloc = Self::lookahead(&misses, self.units, min);
        // The sets each process would get, and the pages they would move: every page outside
        // its set with eager recoloring; with lazy recoloring the ones in use (accessed since
        // its window started, when its accessed bits were cleared), the only ones that move.
        let mut sets = Vec::new();
        let mut start = 0;
        let mut pages_to_move = 0u64;
        for (i, pid) in live.iter().enumerate() {
            let end = (start + alloc[i]).min(self.units);
            let set = if self.procs[pid].out_of_memory > 0 {
                ColorSet::all(self.colors)
            } else {
                self.unit_colors(start, end)
            };
            let lazy = self.config.recolor == RecolorMode::Lazy;
            pages_to_move += k
                .pages(*pid)
                .iter()
                .filter(|pg| !pg.huge && !set.contains(pg.color) && (!lazy || pg.accessed))
                .count() as u64;
            sets.push((start, end, set));
            start = end;
        }
        let inputs: Vec<DecisionInput> = live
            .iter()
            .zip(&alloc)
            .map(|(pid, &a)| {
                let p = &self.procs[pid];
                DecisionInput {
                    curve: p.curve.clone().expect("filtered"),
                    access_rate: p.l1_rate.max(1e-12),
                    measured_shared: (p.shared_event_misses > 0).then(|| {
                        (p.shared_llc_misses as f64 / p.shared_event_misses as f64).min(1.0)
                    }),
                    alloc: a,
                    horizon: p.cycles_run as f64,
                    counted: p.counted as f64,
                }
            })
            .collect();
        let window_cost: u64 = self.procs.values().map(|p| p.window_cost_unpaid).sum();
        let move_cost = pages_to_move * self.page_move_cycles;
        // The cost is what partitioning adds from now on: the page moves. The windows are paid
        // whatever is decided (their budget is `max_window_overhead`); counting them again here
        // refused partitions that gain more than they cost, on top of the windows already lost.
        let (decision, each) = Self::decide(
            &inputs,
            self.lines_per_unit as f64,
            self.miss_penalty as f64,
            move_cost as f64,
        );
        let partition = decision.partition || self.config.always_partition;
        if again && !partition {
            // Still shared: nothing to record, ask again at the next tick.
            self.reconsidered += 1;
            self.reconsider = true;
            return;
        }
        if partition {
            // The windows are paid for by this partition.
            for p in self.procs.values_mut() {
                p.window_cost_unpaid = 0;
            }
        } else {
            self.reconsider = decision.cycles_saved > 0.0;
        }
        let processes = live
            .iter()
            .zip(each)
            .map(|(pid, e)| (self.procs[pid].name.clone(), e))
            .collect();
        self.decisions.push(DecisionRecord {
            decision,
            time: now,
            processes,
            pages_to_move,
            move_cost_cycles: move_cost,
            window_cost_cycles: window_cost,
            miss_penalty_cycles: self.miss_penalty,
            applied: if partition { "partition" } else { "shared" },
            reconsidered_before: std::mem::take(&mut self.reconsidered),
        });
        if !partition {
            // Keep the cache shared: every process every color (pages stay where they are).
            let all = ColorSet::all(self.colors);
            let mut colors = BTreeMap::new();
            for pid in &live {
                let p = self.procs.get_mut(pid).expect("live");
                p.colors = all.clone();
                colors.insert(p.name.clone(), (0, self.units));
            }
            self.allocations.push(Allocation {
                time: now,
                colors,
                shared: true,
            });
            return;
        }
        let mut colors = BTreeMap::new();
        for (pid, (start, end, set)) in live.iter().zip(sets) {
            let p = self.procs.get_mut(pid).expect("live");
            colors.insert(p.name.clone(), (start, end));
            let changed = p.colors != set;
            p.colors = set;
            if changed {
                // Disallowed pages move now; crowded ones once we know which are in use.
                self.move_pages(k, *pid, false);
                if k.scan_accessed(*pid).is_ok() {
                    self.rebalance.push(*pid);
                }
            }
        }
        self.allocations.push(Allocation {
            time: now,
            colors,
            shared: false,
        });
    }

    /// Move the pages of `pid` that sit in colors it no longer has (lazily or eagerly, per
    /// `recolor`), and with `spread`, spread its pages in use evenly over its colors: a process
    /// that gained colors keeps its pages where they were placed, crowded into its old colors,
    /// so pages in use (accessed bit set since the allocation cleared the bits, one tick ago)
    /// of colors holding more than their share are copied to its least-filled colors (always
    /// eagerly: a lazy move only leaves colors that are no longer allowed).
    fn move_pages(&mut self, k: &mut dyn Kernel, pid: usize, spread: bool) {
        let allowed = self.procs[&pid].colors.clone();
        let pages: Vec<_> = k.pages(pid).into_iter().filter(|p| !p.huge).collect();
        let mut count = vec![0u64; self.colors as usize];
        for p in &pages {
            if allowed.contains(p.color) {
                count[p.color as usize] += 1;
            }
        }
        let share = (pages.len() as u64).div_ceil(allowed.len().max(1));
        for page in pages {
            let inside = allowed.contains(page.color);
            // Spreading moves only pages in use (accessed since the allocation's scan).
            if inside && (!spread || !page.accessed || count[page.color as usize] <= share) {
                continue;
            }
            if !inside && (page.marked || self.config.recolor == RecolorMode::Lazy) {
                if !page.marked && k.mark_for_recolor(pid, page.vpn).is_ok() {
                    self.marked += 1;
                }
                continue;
            }
            let dest = allowed
                .iter()
                .min_by_key(|&c| (count[c as usize], c))
                .expect("a process has at least one color");
            if inside && count[dest as usize] + 1 >= count[page.color as usize] {
                continue;
            }
            let one = ColorSet::of(self.colors, [dest]).expect("in range");
            if let Ok(Some(_)) = k.recolor(pid, page.vpn, &one) {
                self.moved += 1;
                count[dest as usize] += 1;
                if inside {
                    count[page.color as usize] -= 1;
                }
            }
        }
    }

    #[cfg(test)]
    fn even_split(&mut self) {
        let live: Vec<usize> = self
            .procs
            .values()
            .filter(|p| p.alive)
            .map(|p| p.pid)
            .collect();
        let n = live.len() as u64;
        if n == 0 {
            return;
        }
        let mut start = 0;
        for (i, pid) in live.iter().enumerate() {
            let share = self.units / n + u64::from((i as u64) < self.units % n);
            let end = (start + share.max(1)).min(self.units);
            let begin = start.min(self.units - 1);
            let set = self.unit_colors(begin, end.max(begin + 1));
            self.procs.get_mut(pid).expect("live").colors = set;
            start = end;
        }
    }
}

impl Policy for MrcPartition {
    fn name(&self) -> &'static str {
        "mrc-partition"
    }
    fn counter_events(&self) -> Vec<Event> {
        // LLC misses: the shared cache's measured baseline for the decision.
        vec![
            Event::Instructions,
            Event::Cycles,
            self.config.event,
            Event::LlcMisses,
        ]
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        self.procs.insert(
            p.pid,
            Proc {
                pid: p.pid,
                name: p.name.clone(),
                alive: true,
                window: None,
                reason: "start",
                wants_window: true,
                cycles_run: 0,
                accesses_run: 0,
                shared_cache: false,
                ended_window: None,
                lines_at_window_start: 0,
                window_paid: 0,
                counted: 0,
                running: [0; 2],
                shared_llc_misses: 0,
                shared_event_misses: 0,
                window_cost_unpaid: 0,
                curve: None,
                l1_rate: 0.0,
                reference_mpki: None,
                drift: 0,
                colors: ColorSet::all(self.colors),
                whole: self.config.exact_check.then(LruStack::new),
                window_exact: DistanceHistogram::default(),
                out_of_memory: 0,
            },
        );
        self.resample = true;
        Placement::default()
    }

    fn process_exited(&mut self, pid: usize) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.alive = false;
            p.ended_window = p.window.take();
            self.reallocate = true;
            self.resample = true;
        }
    }

    fn allowed_colors(&mut self, pid: usize, _vpn: u64) -> &ColorSet {
        &self.procs.get(&pid).expect("process_created first").colors
    }

    /// The partition has no free frame left for `pid` (its colors hold less memory than it
    /// uses): fall back, as `coloris` does when out of colors (COLORIS 3.2's ALLOC_COLORS on
    /// running out of memory), to every color for this process from now on, rather than end
    /// the run. Reported as `out_of_memory` per process.
    fn out_of_colors(&mut self, pid: usize) -> bool {
        let all = ColorSet::all(self.colors);
        let Some(p) = self.procs.get_mut(&pid) else {
            return false;
        };
        p.out_of_memory += 1;
        if p.colors == all {
            return false;
        }
        p.colors = all;
        true
    }

    fn scheduled(&mut self, k: &mut dyn Kernel, e: &SchedEvent) {
        if matches!(e, SchedEvent::Migrated { .. }) {
            self.resample = true;
        }
        if self.resample {
            self.program_sampling(k);
        }
    }

    fn sample(&mut self, k: &mut dyn Kernel, s: &Sample) {
        let line = s.vaddr >> self.line_shift;
        let Some(p) = self.procs.get_mut(&(s.pid as usize)) else {
            return;
        };
        if let Some(whole) = &mut p.whole {
            let exact = whole.run_one(line);
            if p.window.as_ref().is_some_and(|w| w.counting()) {
                p.window_exact.add(exact);
            }
        }
        let Some(w) = &mut p.window else { return };
        if !w.feed(line) {
            return;
        }
        let w = p.window.take().expect("present");
        let exact = std::mem::take(&mut p.window_exact);
        let exact_window_miss_rate = p.whole.is_some().then(|| exact.miss_rates(&self.sizes));
        let (pid, reason, before) = (p.pid, p.reason, p.lines_at_window_start);
        let lines = self.resident_lines(k, pid);
        let counted = w.histogram().references().max(1);
        let footprint = Footprint {
            lines,
            new_line_rate: (lines.saturating_sub(before) as f64 / counted as f64).min(1.0),
        };
        let curve = self.curve_of(&w, Some(footprint));
        self.windows.push(WindowRecord {
            pid,
            time: k.now(),
            reason,
            samples: w.seen(),
            miss_rate: curve.clone(),
            exact_window_miss_rate,
        });
        let p = self.procs.get_mut(&pid).expect("present");
        p.curve = Some(curve);
        p.counted = counted;
        p.window_cost_unpaid += w.seen() * self.config.sample_cost_cycles;
        p.reference_mpki = None;
        p.drift = 0;
        self.reallocate = true;
        if !self.profiling() {
            self.program_sampling(k);
        } else {
            self.resample = true;
        }
    }

    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        for pid in std::mem::take(&mut self.rebalance) {
            if self.procs.get(&pid).is_some_and(|p| p.alive) {
                self.move_pages(k, pid, true);
            }
        }
        let live = self.live();
        for pc in &t.processes {
            let Some(p) = self.procs.get_mut(&pc.pid) else {
                continue;
            };
            let ins = pc.interval.get(Event::Instructions);
            let cycles = pc.interval.get(Event::Cycles);
            if !p.alive || ins == 0 || cycles == 0 {
                continue;
            }
            let misses = pc.interval.get(self.config.event);
            p.l1_rate = misses as f64 / cycles as f64;
            let mpki = 1000.0 * misses as f64 / ins as f64;
            p.cycles_run = p.cycles_run.saturating_add(cycles);
            p.accesses_run = p.accesses_run.saturating_add(misses);
            p.shared_cache |= live >= 2;
            let events = [self.config.event, Event::LlcMisses];
            let [event_ran, llc_ran] = model::counted_since(&pc.readings, events, &mut p.running);
            if p.colors.is_full() && event_ran && llc_ran {
                // The shared cache as it is: the decision's measured baseline.
                p.shared_llc_misses += pc.interval.get(Event::LlcMisses);
                p.shared_event_misses += misses;
            }
            if p.window.is_some() || p.curve.is_none() || p.wants_window || !event_ran {
                continue;
            }
            match p.reference_mpki {
                None => p.reference_mpki = Some(mpki),
                Some(r) => {
                    if (mpki - r).abs() > self.config.phase_threshold * r.max(0.5) {
                        p.drift += 1;
                    } else {
                        p.drift = 0;
                    }
                    if p.drift >= self.config.phase_ticks {
                        p.drift = 0;
                        p.wants_window = true;
                        // Its curve is stale: no decision is retaken on it.
                        self.reconsider = false;
                        p.reason = "phase";
                        self.phase_changes.push(PhaseChange {
                            time: t.now,
                            process: p.name.clone(),
                            l1_mpki_before: r,
                            l1_mpki_now: mpki,
                        });
                        self.resample = true;
                    }
                }
            }
        }
        if self.live() >= 2 {
            // Start the windows that are wanted, past the warm-up, as long as the budget affords.
            let c = &self.config;
            let sizes = (c.window, c.warmup, c.min_window);
            let (budget, cost) = (c.max_window_overhead, c.sample_cost_cycles);
            let mut started = Vec::new();
            for p in self.procs.values_mut() {
                if !(p.alive && p.wants_window && p.window.is_none())
                    || p.accesses_run < self.llc_lines
                {
                    continue;
                }
                if let Some((size, warmup)) =
                    window_afforded(p.window_paid, p.cycles_run, budget, cost, sizes)
                {
                    p.wants_window = false;
                    p.window_paid = p.window_paid.saturating_add(size * cost);
                    p.window = Some(MissWindow::new(size, warmup));
                    // The shared baseline is measured from here on; the accessed bits,
                    // cleared now, tell at the decision which pages are in use.
                    p.shared_llc_misses = 0;
                    p.shared_event_misses = 0;
                    started.push(p.pid);
                    self.resample = true;
                }
            }
            for pid in started {
                let lines = self.resident_lines(k, pid);
                self.procs
                    .get_mut(&pid)
                    .expect("started")
                    .lines_at_window_start = lines;
                let _ = k.scan_accessed(pid);
            }
        }
        if self.live() == 1 {
            self.reconsider = false;
            // Alone: every color, no profiling. Its pages stay where they are and the freed colors
            // serve its new pages only (spreading every page in use over the freed colors by eager
            // copies would make it pay for a co-runner's exit).
            let all = ColorSet::all(self.colors);
            if let Some(p) = self.procs.values_mut().find(|p| p.alive) {
                if p.colors != all {
                    p.colors = all;
                    self.allocations.push(Allocation {
                        time: t.now,
                        colors: BTreeMap::from([(p.name.clone(), (0, self.units))]),
                        shared: false,
                    });
                }
            }
            self.reallocate = false;
        } else if (self.reallocate || self.reconsider) && !self.profiling() {
            self.allocate(k, t.now);
        }
        if self.resample {
            self.program_sampling(k);
        }
    }

    fn report(&self) -> Value {
        serde_json::to_value(self.typed_report()).expect("plain data")
    }

    fn never_acted(&self) -> Option<String> {
        self.never_acted_reason()
    }
}

#[cfg(test)]
mod tests;
