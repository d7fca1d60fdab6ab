//! What `coloris` reports of itself (`policy_report`): `ColorisReport`, filled from the Page
//! Color Manager's logs at the end of a run. Its TypedDicts in `python/cachecolor/_core.pyi` are
//! generated from these structs' schemas (`make docs-tables`; `tests/test_policy_reports.py`).

use super::{Coloris, Expansion};
use serde::Serialize;

/// The `coloris` report (COLORIS sections 3.2-3.3, Algorithm 1).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ColorisReport {
    /// PERIOD, WIN and the warm-up, in cycles as resolved (`[policy.coloris]` or the defaults
    /// in ticks).
    pub period: u64,
    pub win: u64,
    pub warmup: u64,
    /// UNIT: colors added or taken at a time.
    pub unit: u64,
    /// The Recoloring Engine's expansion (Selective Moving or Redistribution).
    pub expansion: Expansion,
    /// The global HighThreshold and LowThreshold (% of LLC miss rate, Table 2).
    pub high_threshold: f64,
    pub low_threshold: f64,
    /// Every process, in pid order, at the end of the run.
    pub processes: Vec<ColorisProcess>,
    /// Each process's assignment at every change (the plot's data).
    pub history: Vec<ColorsAt>,
    /// Each MONITOR(cmr) call (Algorithm 1).
    pub monitor: Vec<MonitorCall>,
    /// Invariant violations the policy found (a color of a process's pages outside its
    /// assignment after a recoloring); empty when correct.
    pub violations: Vec<String>,
    /// Colors freed while isCold that no requester took, given back to their donor.
    pub returned: Vec<ColorsAt>,
    /// Colors a process left at its exit that no live process owns.
    pub released: Vec<ColorsAt>,
    /// Each closed Redistribution window and the pages it marked (Table 4's pages per WIN).
    pub redistributions: Vec<Redistribution>,
    /// Processes whose colors came from the config (`[[processes]] colors`).
    pub colors_from_config: Vec<String>,
    /// What `cachecolor simulate` prints on stderr: a monitor that never ran, a run in which no
    /// color moved, config colors the monitor changed.
    pub warnings: Vec<String>,
}

/// One process as the Page Color Manager knows it at the end (section 3.2).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ColorisProcess {
    pub pid: usize,
    pub name: String,
    /// Its first local core, and all of them (one per thread).
    pub core: usize,
    pub cores: Vec<usize>,
    /// Its QoS thresholds (% of LLC miss rate).
    pub low: f64,
    pub high: f64,
    /// Its assignment at the end.
    pub colors: Vec<u64>,
    /// Pages marked on shrink (lazy recoloring), moved at once by Selective Moving, marked by
    /// Redistribution.
    pub shrink_marked: u64,
    pub selective_moved: u64,
    pub redistribution_marked: u64,
    /// ALLOC_COLORS runs because a fault found it out of memory in its colors.
    pub out_of_memory_allocs: u64,
}

/// A process's colors at a time (`history`, `returned`, `released`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ColorisColorsAt")]
pub struct ColorsAt {
    /// Cycles.
    pub time: u64,
    pub process: String,
    pub colors: Vec<u64>,
}

/// One MONITOR(cmr) call (Algorithm 1).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ColorisMonitorCall")]
pub struct MonitorCall {
    /// Cycles.
    pub time: u64,
    pub process: String,
    /// LLC misses / LLC accesses over the PERIOD (0 below `min_references` accesses).
    pub cmr: f64,
    /// LLC accesses over the PERIOD.
    pub accesses: u64,
    /// `none`, `hot` (isHot set, waiting for a donor), `expand` or `shrink`.
    #[schemars(extend("enum" = ["none", "hot", "expand", "shrink"]))]
    pub decision: &'static str,
    /// Colors it has after the call.
    pub colors: u64,
}

/// One closed Redistribution window (section 3.2, "Recoloring Engine").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ColorisRedistribution")]
pub struct Redistribution {
    /// Cycles.
    pub time: u64,
    pub process: String,
    /// Accessed pages marked for a lazy move.
    pub marked: u64,
}

impl Coloris {
    /// The report (`Policy::report`).
    pub(super) fn typed_report(&self) -> ColorisReport {
        let name = |pid: &usize| self.procs[pid].name.clone();
        let colors_at = |log: &[(u64, usize, Vec<u64>)]| {
            log.iter()
                .map(|(t, pid, c)| ColorsAt {
                    time: *t,
                    process: name(pid),
                    colors: c.clone(),
                })
                .collect()
        };
        ColorisReport {
            period: self.period,
            win: self.win,
            warmup: self.warmup,
            unit: self.config.unit,
            expansion: self.config.expansion,
            high_threshold: self.config.high_threshold,
            low_threshold: self.config.low_threshold,
            processes: self
                .procs
                .iter()
                .map(|(pid, p)| ColorisProcess {
                    pid: *pid,
                    name: p.name.clone(),
                    core: p.cores[0],
                    cores: p.cores.clone(),
                    low: p.low * 100.0,
                    high: p.high * 100.0,
                    colors: p.assignment.iter().collect(),
                    shrink_marked: p.shrink_marked,
                    selective_moved: p.selective_moved,
                    redistribution_marked: p.redistribution_marked,
                    out_of_memory_allocs: p.out_of_memory_allocs,
                })
                .collect(),
            history: colors_at(&self.history),
            monitor: self
                .monitor
                .iter()
                .map(|(t, pid, cmr, acc, d, n)| MonitorCall {
                    time: *t,
                    process: name(pid),
                    cmr: *cmr,
                    accesses: *acc,
                    decision: d,
                    colors: *n,
                })
                .collect(),
            violations: self.violations.clone(),
            // A monitor that never ran makes coloris the static scheme in silence (the default
            // PERIOD, 5 s of the paper's machine, is longer than most simulated runs); `cachecolor
            // simulate` prints the warnings on stderr.
            returned: colors_at(&self.returned),
            released: colors_at(&self.released),
            redistributions: self
                .redistributions
                .iter()
                .map(|(t, pid, n)| Redistribution {
                    time: *t,
                    process: name(pid),
                    marked: *n,
                })
                .collect(),
            colors_from_config: self
                .procs
                .values()
                .filter(|p| p.from_config)
                .map(|p| p.name.clone())
                .collect(),
            warnings: self.warnings(),
        }
    }
}
