//! What `mrc-partition` reports of itself (`policy_report`): `MrcPartitionReport` and the
//! records the policy logs as it runs (allocations, decisions, phase changes). Its TypedDicts in
//! `python/cachecolor/_core.pyi` are generated from these structs' schemas (`make docs-tables`;
//! `tests/test_policy_reports.py`).

use super::{Decision, MrcPartition, ProcessPrediction};
use serde::Serialize;
use std::collections::BTreeMap;

/// The `mrc-partition` report (Azimi et al. case study 1, section 3).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MrcPartitionReport {
    /// Colors of the LLC.
    pub colors: u64,
    /// Allocations, curves and `min_colors` are in units of `llc_colors_per_unit` LLC colors (unit
    /// u: every LLC color x with x mod units == u), the same share of every partitioned cache;
    /// units == colors on a machine with one colorable shared cache.
    pub units: u64,
    pub llc_colors_per_unit: u64,
    /// LLC lines per unit (the curve's x step).
    pub lines_per_unit: u64,
    /// Sampled misses per window and its warm-up (`[policy.mrc-partition]`, RapidMRC 3.2.2).
    pub window: u64,
    pub warmup: u64,
    /// Each complete window (a curve).
    pub windows: Vec<Window>,
    /// `exact_check`: process -> its whole-run miss rate at `0..=units` units (`null` without
    /// the check).
    pub exact_miss_rate: Option<BTreeMap<String, Vec<f64>>>,
    /// The colors per process at every change.
    pub allocations: Vec<Allocation>,
    /// Partition or keep sharing, per allocation.
    pub decisions: Vec<DecisionRecord>,
    /// Phase changes that asked for a new window (step 5).
    pub phase_changes: Vec<PhaseChange>,
    /// Pages copied at once (eager moves and the spreading of pages in use) and pages marked
    /// for a lazy move.
    pub pages_recolored: u64,
    pub pages_marked: u64,
    /// The longest window costs `window x sample_cost_cycles` (a shorter one what the budget
    /// afforded: its samples x `sample_cost_cycles`).
    pub window_cost_cycles: u64,
    /// Processes still waiting for a window at the end, and for what (`WindowWanted`).
    pub windows_not_afforded: Vec<WindowWanted>,
    /// Windows begun but not complete when the run (or the process) ended: the run was shorter
    /// than the window.
    pub windows_incomplete: Vec<WindowIncomplete>,
    /// Processes whose partition ran out of frames and fell back to every color.
    pub out_of_memory: Vec<OutOfMemory>,
}

/// One complete window: a miss-rate curve (steps 1 and 2).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionWindow")]
pub struct Window {
    pub process: String,
    /// Cycles, when the window completed.
    pub time: u64,
    /// Why it was taken: `start` or `phase`.
    #[schemars(extend("enum" = ["start", "phase"]))]
    pub reason: &'static str,
    /// Sampled misses it saw.
    pub samples: u64,
    /// Miss rate of the shared cache at `0..=units` units.
    pub miss_rate: Vec<f64>,
    /// `exact_check`: mean absolute error against the whole-run curve over `1..=units` units
    /// (`analysis::rapidmrc`'s definition); `null` without the check.
    pub mae_vs_exact: Option<f64>,
    /// `exact_check`: the exact miss rate of the window's own counted lines at `0..=units`
    /// units, their distances in a stack warm since the process started (what the window's
    /// curve estimates); `null` without the check.
    pub exact_window_miss_rate: Option<Vec<f64>>,
}

/// The colors per process from a time on (step 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionAllocation")]
pub struct Allocation {
    /// Cycles.
    pub time: u64,
    /// Process -> its units `[start, end)`.
    pub colors: BTreeMap<String, (u64, u64)>,
    /// Present (true) when the decision kept the cache shared (every process every unit).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// One allocation's decision with what it was made from.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionDecision")]
pub struct DecisionRecord {
    #[serde(flatten)]
    pub decision: Decision,
    /// Cycles.
    pub time: u64,
    /// Process -> its prediction.
    pub processes: BTreeMap<String, ProcessPrediction>,
    /// Pages outside their process's new colors (lazily: those in use) and what moving them
    /// costs (`pages_to_move x MachineInfo::page_move_cycles`).
    pub pages_to_move: u64,
    pub move_cost_cycles: u64,
    /// The windows' interrupts not yet paid for by a partition.
    pub window_cost_cycles: u64,
    /// Cycles an LLC miss avoided saves (`MachineInfo::llc_miss_penalty`).
    pub miss_penalty_cycles: u64,
    /// `partition` or `shared` (`always_partition` partitions whatever `partition` says).
    #[schemars(extend("enum" = ["partition", "shared"]))]
    pub applied: &'static str,
    /// Times the decision was retaken and kept the cache shared since the last one recorded.
    pub reconsidered_before: u64,
}

/// A phase change (step 5): a process's L1D MPKI moved beyond `phase_threshold`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionPhaseChange")]
pub struct PhaseChange {
    /// Cycles.
    pub time: u64,
    pub process: String,
    /// L1D misses per kilo-instruction when its curve was taken, and now.
    pub l1_mpki_before: f64,
    pub l1_mpki_now: f64,
}

/// A process that wants a window it has not begun.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionWindowWanted")]
pub struct WindowWanted {
    pub process: String,
    /// `start` or `phase`.
    #[schemars(extend("enum" = ["start", "phase"]))]
    pub reason: &'static str,
    /// What it waits for: `co-runner` (it never shared the cache with another live process:
    /// nothing to divide), `warm-up` (fewer shared-cache accesses than the LLC has lines), or
    /// `budget` (what is left of `max_window_overhead` of its cycles affords fewer than
    /// `min_window` sampled misses).
    #[schemars(extend("enum" = ["co-runner", "warm-up", "budget"]))]
    pub waiting_for: &'static str,
    /// Cycles it has run, its shared-cache accesses, and the interrupt cycles of its windows.
    pub cycles_run: u64,
    pub accesses_run: u64,
    pub window_paid_cycles: u64,
}

/// A window begun and not complete at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionWindowIncomplete")]
pub struct WindowIncomplete {
    pub process: String,
    /// Samples it had of the `size` it was begun with (what the budget afforded then).
    pub samples: u64,
    pub size: u64,
}

/// A process whose partition had no free frame left (`Policy::out_of_colors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionOutOfMemory")]
pub struct OutOfMemory {
    pub process: String,
    /// Times it happened.
    pub times: u32,
}

impl MrcPartition {
    /// The report (`Policy::report`).
    pub(super) fn typed_report(&self) -> MrcPartitionReport {
        let sizes: Vec<u64> = (0..=self.units).map(|c| c * self.lines_per_unit).collect();
        let exact: BTreeMap<usize, Vec<f64>> = self
            .procs
            .values()
            .filter_map(|p| {
                p.whole
                    .as_ref()
                    .map(|w| (p.pid, w.histogram().miss_rates(&sizes)))
            })
            .collect();
        let windows = self
            .windows
            .iter()
            .map(|w| Window {
                process: self.procs[&w.pid].name.clone(),
                time: w.time,
                reason: w.reason,
                samples: w.samples,
                miss_rate: w.miss_rate.clone(),
                // Error over the partition sizes 1..=units (0 units is a miss either way).
                mae_vs_exact: exact.get(&w.pid).map(|e| {
                    let n = self.units as usize;
                    (1..=n).map(|c| (w.miss_rate[c] - e[c]).abs()).sum::<f64>() / n as f64
                }),
                exact_window_miss_rate: w.exact_window_miss_rate.clone(),
            })
            .collect();
        MrcPartitionReport {
            colors: self.colors,
            units: self.units,
            llc_colors_per_unit: self.colors / self.units,
            lines_per_unit: self.lines_per_unit,
            window: self.config.window,
            warmup: self.config.warmup,
            windows,
            exact_miss_rate: self.config.exact_check.then(|| {
                exact
                    .iter()
                    .map(|(pid, e)| (self.procs[pid].name.clone(), e.clone()))
                    .collect()
            }),
            allocations: self.allocations.clone(),
            decisions: self.decisions.clone(),
            phase_changes: self.phase_changes.clone(),
            pages_recolored: self.moved,
            pages_marked: self.marked,
            window_cost_cycles: self.config.window * self.config.sample_cost_cycles,
            windows_not_afforded: self
                .procs
                .values()
                .filter(|p| p.wants_window)
                .map(|p| WindowWanted {
                    process: p.name.clone(),
                    reason: p.reason,
                    waiting_for: if !p.shared_cache {
                        "co-runner"
                    } else if p.accesses_run < self.llc_lines {
                        "warm-up"
                    } else {
                        "budget"
                    },
                    cycles_run: p.cycles_run,
                    accesses_run: p.accesses_run,
                    window_paid_cycles: p.window_paid,
                })
                .collect(),
            windows_incomplete: self
                .procs
                .values()
                .filter_map(|p| {
                    let w = p.window.as_ref().or(p.ended_window.as_ref())?;
                    Some(WindowIncomplete {
                        process: p.name.clone(),
                        samples: w.seen(),
                        size: w.size(),
                    })
                })
                .collect(),
            out_of_memory: self
                .procs
                .values()
                .filter(|p| p.out_of_memory > 0)
                .map(|p| OutOfMemory {
                    process: p.name.clone(),
                    times: p.out_of_memory,
                })
                .collect(),
        }
    }

    /// Why no partition was set, per process: a window the run ended before it was complete (the
    /// window is longer than the run), or what it still waits for (a co-runner, its warm-up, the
    /// budget), and the decisions that kept the cache shared.
    pub(super) fn never_acted_reason(&self) -> Option<String> {
        if self.allocations.iter().any(|a| !a.shared) {
            return None;
        }
        let r = self.typed_report();
        let mut why: Vec<String> = r
            .windows_incomplete
            .iter()
            .map(|w| {
                format!(
                    "{}'s window had {} of its {} samples when the run ended (the window is longer than the run)",
                    w.process, w.samples, w.size
                )
            })
            .collect();
        for w in &r.windows_not_afforded {
            why.push(match w.waiting_for {
                "co-runner" => format!(
                    "{} never shared the cache with another process (nothing to divide)",
                    w.process
                ),
                "warm-up" => format!(
                    "{} made {} shared-cache accesses, fewer than the LLC's lines (the window's warm-up)",
                    w.process, w.accesses_run
                ),
                _ => format!(
                    "{}'s budget (max_window_overhead of its {} cycles, less the {} its windows cost) affords fewer than min_window = {} samples",
                    w.process, w.cycles_run, w.window_paid_cycles, self.config.min_window
                ),
            });
        }
        let shared = r.decisions.iter().filter(|d| !d.decision.partition).count();
        if shared > 0 {
            why.push(format!("{shared} decision(s) kept the cache shared"));
        }
        if why.is_empty() {
            why.push("no reason recorded".into());
        }
        let paid = !r.windows.is_empty() || !r.windows_incomplete.is_empty();
        Some(format!(
            "mrc-partition set no partition ({} window(s) measured): {}; the run is linux's placement{}",
            r.windows.len(),
            why.join("; "),
            if paid { " plus the windows' cost" } else { "" }
        ))
    }
}
