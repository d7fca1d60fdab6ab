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
    /// Colors lent beyond its section to a process created alone on its LLC (4.1's setup).
    pub lent: Vec<ColorsAt>,
    /// Lent colors taken back when another process was created on that LLC.
    pub reclaimed: Vec<ColorsAt>,
    /// Colors ALLOC_COLORS gave a process that a process on another core of its LLC owns.
    pub overlaps: Vec<Overlap>,
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

/// Colors two processes on different cores of one LLC came to share (`overlaps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ColorisOverlap")]
pub struct Overlap {
    /// Cycles.
    pub time: u64,
    /// The process ALLOC_COLORS gave the colors to, and their other owner.
    pub process: String,
    pub other: String,
    pub colors: Vec<u64>,
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
    /// What the run should say on stderr: a monitor that never ran, a run in which no color moved
    /// (coloris was `static`, and why: how often a process was hot or cold, the colors nobody
    /// owned), colors that stayed unowned, processes that came to share colors again, colors the
    /// config gave a process that the monitor changed.
    pub(super) fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let usable = self.usable.len();
        if self.monitor.is_empty() {
            w.push(format!(
                "coloris: the Cache Utilization Monitor never ran: PERIOD ({} cycles) plus the \
                 warm-up ({} cycles) is longer than the run ({} cycles at the last tick), so no \
                 color moved and coloris behaved as `static`; give a shorter \
                 [policy.coloris] period or warmup",
                self.period, self.warmup, self.now
            ));
        } else if self.procs.values().all(|p| p.changes <= 1) {
            let why = if self.procs.values().all(|p| p.from_config) {
                "every process has its colors from the config; "
            } else {
                ""
            };
            let th = |pid: &usize| (self.procs[pid].low, self.procs[pid].high);
            let hot = self.monitor.iter().filter(|m| m.2 > th(&m.1).1).count();
            let cold = self.monitor.iter().filter(|m| m.2 < th(&m.1).0).count();
            let lent = if self.lent.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} process(es) alone on their LLC held every color",
                    self.lent.len()
                )
            };
            let what = if self.lent.is_empty() {
                "coloris behaved exactly as `static`"
            } else {
                "the partition stayed as placed"
            };
            w.push(format!(
                "coloris: no color moved in {n} MONITOR calls ({why}{hot} of them found a \
                 process above its HighThreshold, {cold} one below its LowThreshold; {u} of \
                 {usable} colors were owned by no process after the last round{lent}): {what}",
                n = self.monitor.len(),
                u = self.unowned_last,
            ));
        }
        // Most of the run, not the rounds after a process's exit before a hot one takes its colors.
        if 2 * self.rounds_unowned > self.rounds {
            w.push(format!(
                "coloris: some of the {usable} colors were owned by no live process after \
                 {} of {} MONITOR rounds ({} after the last): Algorithm 1 gives free colors only \
                 to a process above its HighThreshold",
                self.rounds_unowned, self.rounds, self.unowned_last
            ));
        }
        for (t, a, b, colors) in &self.overlaps {
            w.push(format!(
                "coloris: at {t} cycles ALLOC_COLORS gave `{}` {} color(s) `{}` (another core, \
                 the same LLC) owns: {colors:?}; the two share that part of the cache again \
                 (Algorithm 1 picks the coldest colors, owned ones when none is free)",
                self.procs[a].name,
                colors.len(),
                self.procs[b].name
            ));
        }
        for p in self
            .procs
            .values()
            .filter(|p| p.from_config && p.changes > 1)
        {
            w.push(format!(
                "coloris: process `{}` started with the colors its config gives and the \
                 monitor changed them ({} colors at the end): COLORIS starts from a partition \
                 and recolors it (section 3.2); give it qos = [0, 100] to keep them",
                p.name,
                p.assignment.len()
            ));
        }
        w
    }

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
            lent: colors_at(&self.lent),
            reclaimed: colors_at(&self.reclaimed),
            overlaps: self
                .overlaps
                .iter()
                .map(|(t, a, b, c)| Overlap {
                    time: *t,
                    process: name(a),
                    other: name(b),
                    colors: c.clone(),
                })
                .collect(),
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
