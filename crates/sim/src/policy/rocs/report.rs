//! What `rocs` and `global-pollute` report of themselves (`policy_report`): `RocsReport`, with
//! a `RocsUnit` per unit and its searches (`SearchLog`, kept as the search runs). Its TypedDicts
//! in `python/cachecolor/_core.pyi` are generated from these structs' schemas (`make
//! docs-tables`; `tests/test_policy_reports.py`).

use super::{PolluteConfig, PolluteEngine, Stage};
use serde::Serialize;

/// The report of the pollute engine, under `rocs` (ROCS, papers/000, sections 3-5) or
/// `global-pollute` (Azimi et al. case study 2, section 4.2).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RocsReport {
    /// What `cachecolor simulate` prints on stderr: runs or units that ended mid-search.
    pub warnings: Vec<String>,
    /// `rocs` or `global-pollute`.
    pub policy: String,
    /// The pollute buffer's LLC colors (ROCS section 4; `PolluteEngine::buffer_colors`).
    pub pollute_colors: Vec<u64>,
    /// `[time, in normal use, chips reserved]` at each change: the colors start in normal use
    /// and are taken out when a unit is first targeted (ROCS 5.1).
    pub pollute_color_in_use: Vec<(u64, bool, Vec<usize>)>,
    /// The buffer's colors are out of normal use on some chip at the end.
    pub pollute_color_reserved: bool,
    /// Pages moved off the buffer's colors when they were taken out of normal use.
    pub pages_moved_off_pollute_color: u64,
    /// The sampled event (`rocs`: L1D misses, ROCS 3.1; `global-pollute`: LLC accesses, Azimi
    /// 4.2.1).
    pub sampled_event: String,
    /// Samples delivered, and those taken while their unit profiled.
    pub samples: u64,
    pub samples_used: u64,
    /// Pages moved into the buffer, and back out of it, over every search.
    pub pages_to_buffer: u64,
    pub pages_restored: u64,
    /// The `[policy.rocs]` / `[policy.global-pollute]` settings the run used.
    pub config: PolluteConfig,
    pub units: Vec<RocsUnit>,
}

/// One unit: a set of address spaces profiled and searched together (`rocs`: a process;
/// `global-pollute`: all of them).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RocsUnit {
    /// Every process the unit ever had.
    pub pids: Vec<usize>,
    /// Profiles taken (the after-search `verify_cycles` profiles included) and phase changes
    /// detected (ROCS 5.1).
    pub profiles: u32,
    pub phase_changes: u32,
    /// Its pages in the buffer at the end.
    pub in_buffer: u64,
    /// Cycles the kernel spent moving its pages into and out of the buffer, and the cycles
    /// its processes ran: the search budget's two sides (`max_search_overhead`).
    pub move_cycles: u64,
    pub unit_cycles: u64,
    /// The run ended with a step waiting for the budget to buy its pages.
    pub budget_bound: bool,
    /// The run ended, or its processes exited, mid-search: its last
    /// search has `chosen` and `pages` null.
    pub search_unfinished: bool,
    pub searches: Vec<SearchLog>,
}

/// One step of a search (Algorithm 1, ROCS 5.2): pages mapped and the IPC measured.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "RocsStep")]
pub struct Step {
    /// Stack pages in the buffer during the measurement.
    pub pages: u64,
    pub ipc: f64,
    /// Ticks the IPC was measured over.
    pub ticks: u32,
    /// Whether it beat the baseline by `significance` standard errors (a gain, not noise).
    pub significant: bool,
    /// Ticks it waited for the budget to buy its pages.
    pub waited_ticks: u32,
    /// Data references (L1D accesses) per kilo-instruction over the measurement: the program's
    /// phase, which no placement moves (set against the baseline's `baseline_data_apki`);
    /// `None` (null) when the multiplexed event was never on a counter during it.
    pub data_apki: Option<f64>,
}

/// One search (ROCS 5.2, Algorithm 1 FindPollutePages), kept as it runs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "RocsSearch")]
pub struct SearchLog {
    /// Tick time the profile ended.
    pub time: u64,
    /// Pages in the miss-rate stack, and pages mapped per step.
    pub stack_pages: u64,
    pub step_pages: u64,
    /// IPC with nothing mapped.
    pub baseline_ipc: f64,
    /// Data references per kilo-instruction with nothing mapped (the baseline's phase); `None`
    /// (null) until measured, or when the multiplexed event was never on a counter during it.
    pub baseline_data_apki: Option<f64>,
    /// IPC standard deviation of a window of `measure_cycles` over the baseline's windows
    /// (pooled with every step's own when a step spans more than one), relative to the
    /// baseline IPC.
    pub noise: f64,
    pub steps: Vec<Step>,
    /// Cycles the unit's page moves had cost when the search ended (all searches so far), and
    /// the unit's cycles by then: the budget's two sides.
    pub move_cycles: u64,
    pub unit_cycles: u64,
    /// Pages left in the buffer (Algorithm 1's return value); `None` (null) until it returns
    /// (a search the run ended in the middle of chose nothing).
    pub chosen: Option<u64>,
    /// Why the stack was not walked: no sampled reference hit (no baseline taken), or the
    /// baseline's noise hides any gain the buffer could give (`null`: it was walked).
    pub skipped: Option<&'static str>,
    /// Cycles the search's steps lost against the baseline (each step's settling and measuring
    /// cycles times `1 - IPC / baseline IPC`; a step above the baseline gives back), floored at
    /// 0: the search's cost beside its page moves.
    pub loss_cycles: f64,
    /// Why the walk stopped before the end of the stack (`null`: it walked it all, or the run
    /// ended first).
    pub stopped: Option<&'static str>,
    /// `(pid, vpn)` of the chosen pages, top of the stack first; `None` as `chosen`.
    pub pages: Option<Vec<(usize, u64)>>,
    /// The per-page profile the stack came from: `(pid, vpn, samples, misses)`.
    pub profile: Vec<(usize, u64, u32, u32)>,
    /// The after-search profile (`verify_cycles`), same shape.
    pub verify_profile: Vec<(usize, u64, u32, u32)>,
    /// The kept pages measured again around a fresh baseline (`confirm`); `None` (null) when
    /// the walk kept nothing, `confirm` is off, or the run ended first.
    pub confirmation: Option<Confirmation>,
}

/// The confirmation of a search's kept pages (`confirm`): kept, nothing mapped, kept again,
/// each over `baseline_cycles`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "RocsConfirmation")]
pub struct Confirmation {
    /// The unit's IPC with the kept pages in the buffer, before and after the baseline.
    pub kept_ipc: [f64; 2],
    /// The unit's IPC with nothing mapped, between them.
    pub baseline_ipc: f64,
    /// Standard error of `mean(kept_ipc) - baseline_ipc` from the search's pooled noise.
    pub standard_error: f64,
    /// The mean kept IPC beat the baseline by `significance` standard errors: the pages stay;
    /// else they all leave the buffer.
    pub confirmed: bool,
}

impl PolluteEngine {
    /// The report (`Policy::report`), naming the policy `name`.
    pub fn typed_report(&self, name: &str) -> RocsReport {
        let mut warnings = Vec::new();
        let units = self
            .units
            .iter()
            .map(|u| {
                // The run ended, or the unit's processes exited, mid-search (before, an exit
                // made the unit `Done` and its last search read as finished with 0 pages).
                // Algorithm 1 has not returned: the last search's `chosen` and `pages` are
                // still `None` (set by `finish_search` only).
                let unfinished = u.searching() || u.exited_mid_search;
                if unfinished {
                    warnings.push(format!(
                        "{name}: the {} mid-search (unit of pids {:?}) with {} page(s) in \
                         the buffer: Algorithm 1 chose nothing yet; run longer",
                        if u.exited_mid_search {
                            "unit's processes exited"
                        } else {
                            "run ended"
                        },
                        u.members,
                        u.mapped
                    ));
                }
                RocsUnit {
                    pids: u.members.clone(),
                    profiles: u.profiles,
                    phase_changes: u.phase_changes,
                    in_buffer: u.mapped,
                    move_cycles: u.move_cost,
                    unit_cycles: u.cycles,
                    budget_bound: matches!(u.stage, Stage::Buying { .. }),
                    search_unfinished: unfinished,
                    searches: u.searches.clone(),
                }
            })
            .collect();
        RocsReport {
            warnings,
            policy: name.to_string(),
            pollute_colors: self.pollute.iter().collect(),
            pollute_color_in_use: self.reservations.clone(),
            pollute_color_reserved: self.reserved(),
            pages_moved_off_pollute_color: self.evicted,
            sampled_event: self.event.name(),
            samples: self.samples,
            samples_used: self.samples_used,
            pages_to_buffer: self.to_buffer,
            pages_restored: self.restored,
            config: self.cfg.clone(),
            units,
        }
    }
}
