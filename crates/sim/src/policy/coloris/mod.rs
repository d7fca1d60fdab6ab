/*!
COLORIS (paper 002, Ye, West, Cheng and Li, PACT'14): dynamic cache partitioning by page
coloring on possibly over-committed systems.

- **Color-aware page allocator** (section 3.1): the `color-pool` allocator (`memory::ColorPool`)
  is the mechanism: round-robin over the colors this policy allows, fallback to another
  allowed color, refill from the buddy system with frames of arbitrary colors, frees back to
  the pool up to a per-list cap (`[memory] pool_cap`), a bounded pool (`[memory] pool_size`).
  Every page a process faults (code pages too: the fault path does not distinguish them)
  takes one of its assigned colors, except pages of `shared_regions`, which take a random
  color or one of a reserved set (`shared_colors`).
- **Page Color Manager** (section 3.2): the static sections of `static_sections` (N sections of
  contiguous colors for N cores; a new process gets the section of the least-loaded core and
  is pinned there) are the initial assignments; hotness of a color = the number of live
  processes owning it (global), or of those whose local core is another core (remote).
- **Cache Utilization Monitor** (Algorithm 1): every `period` cycles (default 16 ticks), MONITOR(cmr)
  for each live process past its warm-up (section 4.3 enables the monitor after the programs'
  start), in pid order, cmr = its LLC misses / LLC accesses over the period (0 below
  `min_references` accesses), against its own QoS thresholds or the global ones; `isHot` and
  `isCold` are global, requests are served first come first served, and freed colors nobody
  claims go back to their donor; ALLOC_COLORS / PICK_VICTIMS pick by hotness as the paper
  defines.
  ALLOC_COLORS is also run when a fault finds the process out of memory in its colors
  (`Policy::out_of_colors`).
- **Recoloring Engine** (section 3.2 "Recoloring Engine"): shrink = lazy recoloring (every page
  in a taken color is marked; its next fault moves it, round-robin over the new assignment by
  the allocator); expand = Selective Moving (one in every n+1 pages of each old color, n the
  LLC's associativity, moved at once to the new colors round-robin) or Redistribution (clear
  the accessed bits, after `win` cycles scan them, lazily recolor every accessed page).

The counts come from `Tick::processes[..].interval`: the process's own LLC accesses and misses
over the tick, i.e. per-task virtualised counters (perf_event opened per task, two events, so
no multiplexing), which is what the paper's monitor reads per process. Decisions where the
paper is silent are listed in docs/coloris.md.
*/
use super::static_sections::{per_core_sections, StaticSections};
use super::{Kernel, MachineInfo, Placement, Policy, ProcessInfo, Tick};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::Event;
use crate::rng::SplitMix64;
use std::collections::{BTreeMap, VecDeque};

mod config;
mod free;
mod report;
pub use config::{ColorisConfig, Expansion, DEFAULT_PERIOD_TICKS, DEFAULT_WIN_TICKS};
pub use report::{ColorisProcess, ColorisReport, ColorsAt, MonitorCall, Overlap, Redistribution};

/// One process as the Page Color Manager knows it.
#[derive(Debug, Clone)]
struct Proc {
    name: String,
    /// Its local cores (section 3.2): the cores whose sections it started with (one per
    /// thread; the paper's single-threaded programs have one).
    cores: Vec<usize>,
    /// Its local colors: the union of its cores' sections.
    local: ColorSet,
    /// When its counts start to count: its start plus the warm-up.
    warm_at: u64,
    assignment: ColorSet,
    /// Its colors came from the config (`[[processes]] colors`).
    from_config: bool,
    /// The colors the config gave it (a color the config gives may be another's too).
    given: Option<ColorSet>,
    /// Colors beyond its local section it was lent at creation as the only process on its
    /// LLC (Table 1's setup: a program alone has every color), or took as free colors without a
    /// donor; taken back when another process is created on that LLC.
    lent: ColorSet,
    /// Times its assignment changed after its creation.
    changes: u64,
    /// QoS thresholds as fractions.
    low: f64,
    high: f64,
    alive: bool,
    /// LLC accesses and misses since the last MONITOR.
    accesses: u64,
    misses: u64,
    /// Redistribution: the time its accessed bits are to be scanned.
    scan_at: Option<u64>,
    /// Redistribution: pages marked for a move, with their color when marked.
    moving: BTreeMap<u64, u64>,
    /// Pages marked on shrink, moved at once by Selective Moving, marked by Redistribution.
    shrink_marked: u64,
    selective_moved: u64,
    redistribution_marked: u64,
    out_of_memory_allocs: u64,
}

/// What MONITOR decided for one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    None,
    /// Set isHot and wait for a donor.
    SignalHot,
    Expand(Vec<u64>),
    Shrink(Vec<u64>),
}

#[derive(Debug, Clone)]
pub struct Coloris {
    config: ColorisConfig,
    colors: u64,
    ways: u64,
    sections: Vec<ColorSet>,
    manager: StaticSections,
    procs: BTreeMap<usize, Proc>,
    is_hot: bool,
    is_cold: bool,
    /// Processes that signalled isHot and were not served yet, first come first served.
    requests: VecDeque<usize>,
    /// The donor of the colors freed while isCold is set, and those colors.
    freed: Option<(usize, Vec<u64>)>,
    /// Colors given back to their donor because no requester took them: (time, donor, colors).
    returned: Vec<(u64, usize, Vec<u64>)>,
    /// Processes that exited and the colors they left with no live owner: (time, pid, colors).
    released: Vec<(u64, usize, Vec<u64>)>,
    /// Colors lent to a process created alone on its LLC: (time, pid, colors).
    lent: Vec<(u64, usize, Vec<u64>)>,
    /// Lent colors taken back when another process was created: (time, pid, colors); their
    /// pages are marked (lazy recoloring) at the next tick.
    reclaimed: Vec<(u64, usize, Vec<u64>)>,
    /// Colors ALLOC_COLORS gave a process that a process on another core of its LLC owns:
    /// (time, pid, other pid, colors).
    overlaps: Vec<(u64, usize, usize, Vec<u64>)>,
    /// Reclaimed colors whose pages are still to be marked (needs the kernel: next tick).
    pending_shrink: Vec<(usize, Vec<u64>)>,
    /// MONITOR rounds and, of them, those that ended with some usable color owned by no live
    /// process; the unowned colors after the last round.
    rounds: u64,
    rounds_unowned: u64,
    unowned_last: u64,
    /// Each closed Redistribution window: (time, pid, pages it marked) (Table 4's pages per WIN).
    redistributions: Vec<(u64, usize, u64)>,
    /// PERIOD, WIN and the warm-up in cycles (resolved at the first tick when the config
    /// gives them in ticks by default).
    period: u64,
    win: u64,
    warmup: u64,
    last_monitor: u64,
    now: u64,
    shared_vpns: Vec<(u64, u64)>,
    shared_set: Option<ColorSet>,
    /// Colors ALLOC_COLORS may hand out (all but the reserved shared ones).
    usable: ColorSet,
    /// Cores sharing one LLC (a chip's); colors are owned per LLC.
    cores_per_chip: usize,
    rng: SplitMix64,
    scratch: ColorSet,
    /// (time, pid, colors) at every change of an assignment.
    history: Vec<(u64, usize, Vec<u64>)>,
    /// (time, pid, cmr, accesses, decision, colors after).
    monitor: Vec<(u64, usize, f64, u64, &'static str, u64)>,
    violations: Vec<String>,
}

fn pct(field: &str, low: f64, high: f64) -> Result<(), ConfigError> {
    if !(0.0..=100.0).contains(&low) || !(0.0..=100.0).contains(&high) {
        return Err(ConfigError::new(
            field,
            format!("thresholds ({low}, {high}) must be percentages within 0..=100"),
        ));
    }
    if low > high {
        return Err(ConfigError::new(
            field,
            format!("LowThreshold {low}% is above HighThreshold {high}%: allowed 0 <= low <= high <= 100"),
        ));
    }
    Ok(())
}

impl Coloris {
    pub fn new(config: &ColorisConfig, machine: &MachineInfo) -> Result<Self, ConfigError> {
        let f = |k: &str| format!("policy.coloris.{k}");
        let colors = machine.colors;
        pct(
            &f("low_threshold"),
            config.low_threshold,
            config.high_threshold,
        )?;
        for (name, [lo, hi]) in &config.qos {
            pct(&f(&format!("qos.{name}")), *lo, *hi)?;
        }
        if config.unit == 0 || config.unit > colors {
            return Err(ConfigError::new(
                f("unit"),
                format!(
                    "UNIT {} is not within 1..={colors} (the colors of this LLC)",
                    config.unit
                ),
            ));
        }
        if config.period == Some(0) {
            return Err(ConfigError::new(
                f("period"),
                "PERIOD must be at least 1 cycle",
            ));
        }
        let mut shared_set = None;
        if !config.shared_colors.is_empty() {
            let mut s = ColorSet::empty(colors);
            for &[a, b] in &config.shared_colors {
                if a >= b || b > colors {
                    return Err(ConfigError::new(
                        f("shared_colors"),
                        format!("range [{a}, {b}) is not within this LLC's colors 0..{colors}"),
                    ));
                }
                (a..b).for_each(|c| s.insert(c));
            }
            if colors - s.len() < machine.cores as u64 {
                return Err(ConfigError::new(
                    f("shared_colors"),
                    format!(
                        "{} reserved colors leave fewer than one color per core ({} cores, {colors} colors)",
                        s.len(),
                        machine.cores
                    ),
                ));
            }
            shared_set = Some(s);
        }
        let page_shift = machine.page_size.trailing_zeros();
        let mut shared_vpns = Vec::new();
        for &[a, b] in &config.shared_regions {
            if a >= b {
                return Err(ConfigError::new(
                    f("shared_regions"),
                    format!("[{a:#x}, {b:#x}) is empty"),
                ));
            }
            shared_vpns.push((a >> page_shift, (b + machine.page_size - 1) >> page_shift));
        }
        let usable_list: Vec<u64> = (0..colors)
            .filter(|c| !shared_set.as_ref().is_some_and(|s| s.contains(*c)))
            .collect();
        let secs = per_core_sections(machine, &usable_list);
        Ok(Coloris {
            config: config.clone(),
            colors,
            ways: machine.llc_ways as u64,
            manager: StaticSections::from_sections(secs.clone()),
            sections: secs,
            procs: BTreeMap::new(),
            is_hot: false,
            is_cold: false,
            requests: VecDeque::new(),
            freed: None,
            returned: Vec::new(),
            released: Vec::new(),
            lent: Vec::new(),
            reclaimed: Vec::new(),
            overlaps: Vec::new(),
            pending_shrink: Vec::new(),
            rounds: 0,
            rounds_unowned: 0,
            unowned_last: 0,
            redistributions: Vec::new(),
            period: config.period.unwrap_or(0),
            win: config.win.unwrap_or(0),
            warmup: config.warmup.or(config.period).unwrap_or(0),
            last_monitor: 0,
            now: 0,
            shared_vpns,
            shared_set,
            usable: ColorSet::of(colors, usable_list).expect("in range"),
            cores_per_chip: machine.cores_per_chip().max(1),
            rng: SplitMix64::new(config.seed),
            scratch: ColorSet::empty(colors),
            history: Vec::new(),
            monitor: Vec::new(),
            violations: Vec::new(),
        })
    }

    fn local(&self, pid: usize) -> &ColorSet {
        &self.procs[&pid].local
    }

    /// Global hotness: live processes owning `c` (section 3.2).
    fn global_hotness(&self, c: u64) -> usize {
        self.procs
            .values()
            .filter(|p| p.alive && p.assignment.contains(c))
            .count()
    }

    /// Remote hotness for `pid`: live owners of `c` whose local cores are none of `pid`'s.
    fn remote_hotness(&self, pid: usize, c: u64) -> usize {
        let cores = &self.procs[&pid].cores;
        self.procs
            .values()
            .filter(|p| {
                p.alive && !p.cores.iter().any(|x| cores.contains(x)) && p.assignment.contains(c)
            })
            .count()
    }

    /// needRemote(): `pid` already uses its entire local section.
    fn need_remote(&self, pid: usize) -> bool {
        let a = &self.procs[&pid].assignment;
        self.local(pid).iter().all(|c| a.contains(c))
    }

    /// hasRemote(): `pid` owns a color outside its local section.
    fn has_remote(&self, pid: usize) -> bool {
        let local = self.local(pid);
        self.procs[&pid]
            .assignment
            .iter()
            .any(|c| !local.contains(c))
    }

    /// A remote color not owned by `pid` with the smallest global hotness (lowest on ties).
    fn pick_coldest_remote(&self, pid: usize) -> Option<u64> {
        let (local, a) = (self.local(pid), &self.procs[&pid].assignment);
        self.usable
            .iter()
            .filter(|&c| !local.contains(c) && !a.contains(c))
            .min_by_key(|&c| (self.global_hotness(c), c))
    }

    /// A local color not owned by `pid` with the smallest remote hotness (lowest on ties).
    fn pick_coldest_local(&self, pid: usize) -> Option<u64> {
        let a = &self.procs[&pid].assignment;
        self.local(pid)
            .iter()
            .filter(|&c| !a.contains(c))
            .min_by_key(|&c| (self.remote_hotness(pid, c), c))
    }

    /// A remote color owned by `pid` with the largest global hotness (highest on ties).
    fn pick_hottest_remote(&self, pid: usize) -> Option<u64> {
        let local = self.local(pid);
        self.procs[&pid]
            .assignment
            .iter()
            .filter(|&c| !local.contains(c))
            .max_by_key(|&c| (self.global_hotness(c), c))
    }

    /// A local color owned by `pid` with the largest remote hotness (highest on ties).
    fn pick_hottest_local(&self, pid: usize) -> Option<u64> {
        let a = &self.procs[&pid].assignment;
        self.local(pid)
            .iter()
            .filter(|&c| a.contains(c))
            .max_by_key(|&c| (self.remote_hotness(pid, c), c))
    }

    /// ALLOC_COLORS(num) of Algorithm 1; the colors are added to the assignment as picked (so
    /// needRemote sees the previous picks). Stops early if `pid` owns every usable color.
    pub(crate) fn alloc_colors(&mut self, pid: usize, num: u64) -> Vec<u64> {
        let mut new = Vec::new();
        for _ in 0..num {
            let literal = if self.need_remote(pid) {
                self.pick_coldest_remote(pid)
            } else {
                self.pick_coldest_local(pid)
            };
            // "Given sufficient capacity" (section 3): a color another core's process owns is
            // shared only when no free color is left (the over-commit case). The literal local
            // pick (smallest remote hotness) would take a remote owner's color while a donor's
            // freed color sat in another section: two processes then owned one color and the
            // freed one stayed unowned (C1 on `hotcold`: 68 colors of 64 handed out).
            let c = match literal {
                Some(c) if self.owned_on_other_core(pid, c) => self
                    .pick_coldest_remote(pid)
                    .filter(|&r| !self.owned_on_other_core(pid, r))
                    .or(literal),
                other => other,
            };
            let Some(c) = c else { break };
            self.procs
                .get_mut(&pid)
                .expect("known")
                .assignment
                .insert(c);
            new.push(c);
        }
        new
    }

    /// PICK_VICTIMS(num) of Algorithm 1; the colors are taken from the assignment as picked.
    /// A process keeps at least one color.
    pub(crate) fn pick_victims(&mut self, pid: usize, num: u64) -> Vec<u64> {
        let mut victims = Vec::new();
        for _ in 0..num {
            if self.procs[&pid].assignment.len() <= 1 {
                break;
            }
            let c = if self.has_remote(pid) {
                self.pick_hottest_remote(pid)
            } else {
                self.pick_hottest_local(pid)
            };
            let Some(c) = c else { break };
            self.procs
                .get_mut(&pid)
                .expect("known")
                .assignment
                .remove(c);
            victims.push(c);
        }
        victims
    }

    /// MONITOR(cmr) of Algorithm 1 for process `pid` (cmr as a fraction).
    ///
    /// Requests are served first come, first served: a process above its HighThreshold signals
    /// isHot and joins the queue of requests; a donor's freed colors (isCold) go to the process at
    /// the head of the queue at its next MONITOR, not to whichever hot process MONITOR happens to
    /// reach first. Algorithm 1 has the hot process signal and then take the colors a cold one
    /// freed "at its next MONITOR": with one hot process the two readings are the same; with
    /// several, the queue keeps the colors for the one that asked. A queued process that is no
    /// longer above HighThreshold leaves the queue.
    pub(crate) fn monitor(&mut self, pid: usize, cmr: f64) -> Decision {
        let (low, high) = (self.procs[&pid].low, self.procs[&pid].high);
        if cmr > high {
            // "isCold is set when extra page colors are available" (section 3.2): colors a
            // donor freed, or free colors (no live process on this LLC owns them: an idle
            // core's section, an exited process's colors), which need no donor. Without a cold
            // donor and with no free color Algorithm 1 only sets isHot: nothing is taken from a
            // process that is not below its LowThreshold.
            let donated = self.is_cold;
            let extra = donated || !self.free_colors(pid).is_empty();
            if !extra || self.requests.front().is_some_and(|&h| h != pid) {
                if !self.requests.contains(&pid) {
                    self.requests.push_back(pid);
                }
                self.is_hot = true;
                return Decision::SignalHot;
            }
            self.requests.retain(|&q| q != pid);
            let new = if donated {
                self.alloc_colors(pid, self.config.unit)
            } else {
                self.alloc_free(pid, self.config.unit)
            };
            self.note_overlaps(pid, &new);
            self.is_cold = false;
            self.freed = None;
            // The others still waiting keep signalling.
            self.is_hot = !self.requests.is_empty();
            Decision::Expand(new)
        } else {
            self.requests.retain(|&q| q != pid);
            if cmr < low
                && self.is_hot
                && !self.is_cold
                // A process that holds no more than UNIT colors is no donor (docs/coloris.md).
                && self.procs[&pid].assignment.len() > self.config.unit
            {
                self.is_hot = false;
                self.is_cold = true;
                let victims = self.pick_victims(pid, self.config.unit);
                self.freed = Some((pid, victims.clone()));
                Decision::Shrink(victims)
            } else {
                Decision::None
            }
        }
    }

    /// After a round of MONITOR: colors a donor freed that no requester is waiting for go back
    /// to the donor (a program marked hot by a cold start and warm by the time the colors were
    /// freed would never take them, and 6% of the LLC would belong to nobody). The donor's pages
    /// marked for the move fault once and stay where they are (their color is allowed again).
    /// Returns the donor when it got colors back.
    fn return_unclaimed(&mut self) -> Option<usize> {
        if !self.is_cold || !self.requests.is_empty() {
            return None;
        }
        let (donor, colors) = self.freed.take()?;
        self.is_cold = false;
        self.is_hot = false;
        let back: Vec<u64> = colors
            .into_iter()
            .filter(|&c| self.global_hotness(c) == 0)
            .collect();
        let p = self.procs.get_mut(&donor)?;
        if !p.alive || back.is_empty() {
            return None;
        }
        back.iter().for_each(|&c| p.assignment.insert(c));
        self.returned.push((self.now, donor, back));
        Some(donor)
    }

    /// Note `pid`'s assignment now (`history`, the plot's data); a change after its creation.
    fn record(&mut self, pid: usize) {
        let p = self.procs.get_mut(&pid).expect("known");
        p.changes += 1;
        let colors = p.assignment.iter().collect();
        self.history.push((self.now, pid, colors));
    }

    /// Shrink (lazy recoloring): mark every page of `pid` in a taken color.
    fn shrink(&mut self, k: &mut dyn Kernel, pid: usize, victims: &[u64]) {
        for page in k.pages(pid) {
            if !page.huge
                && !page.marked
                && victims.contains(&page.color)
                && !self.shared(page.vpn)
                && k.mark_for_recolor(pid, page.vpn).is_ok()
            {
                self.procs.get_mut(&pid).expect("known").shrink_marked += 1;
            }
        }
    }

    /// Expand: Selective Moving or the first half of Redistribution.
    fn expand(&mut self, k: &mut dyn Kernel, pid: usize, new: &[u64]) {
        if new.is_empty() {
            return;
        }
        match self.config.expansion {
            Expansion::SelectiveMoving => {
                // One in every n+1 pages of each (old) color, in page-table order, moved at once
                // to the new colors in turn.
                let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
                let mut next = 0;
                for page in k.pages(pid) {
                    if page.huge || new.contains(&page.color) || self.shared(page.vpn) {
                        continue;
                    }
                    let i = seen.entry(page.color).or_insert(0);
                    *i += 1;
                    if !(*i).is_multiple_of(self.ways + 1) {
                        continue;
                    }
                    let target = ColorSet::of(self.colors, [new[next % new.len()]]).expect("ok");
                    next += 1;
                    if let Ok(Some(_)) = k.recolor(pid, page.vpn, &target) {
                        self.procs.get_mut(&pid).expect("known").selective_moved += 1;
                    }
                }
            }
            Expansion::Redistribution => {
                let _ = k.scan_accessed(pid);
                self.procs.get_mut(&pid).expect("known").scan_at = Some(k.now() + self.win);
            }
        }
    }

    /// Redistribution after WIN: lazily recolor every page accessed in the window.
    fn redistribute(&mut self, k: &mut dyn Kernel, pid: usize) {
        let Ok(hot) = k.scan_accessed(pid) else {
            return;
        };
        let colors: BTreeMap<u64, (u64, bool)> = k
            .pages(pid)
            .into_iter()
            .map(|p| (p.vpn, (p.color, p.huge)))
            .collect();
        let mut marked = 0;
        for vpn in hot {
            let Some(&(color, huge)) = colors.get(&vpn) else {
                continue;
            };
            if huge || self.shared(vpn) {
                continue;
            }
            if k.mark_for_recolor(pid, vpn).is_ok() {
                let p = self.procs.get_mut(&pid).expect("known");
                p.moving.insert(vpn, color);
                p.redistribution_marked += 1;
                marked += 1;
            }
        }
        self.redistributions.push((k.now(), pid, marked));
    }

    fn shared(&self, vpn: u64) -> bool {
        self.shared_vpns.iter().any(|&(a, b)| (a..b).contains(&vpn))
    }

    /// Invariant: every page of `pid` outside its assignment is awaiting its lazy move.
    fn check(&mut self, k: &dyn Kernel, pid: usize) {
        let p = &self.procs[&pid];
        for page in k.pages(pid) {
            if !page.huge
                && !page.marked
                && !self.shared(page.vpn)
                && !p.assignment.contains(page.color)
            {
                self.violations.push(format!(
                    "process `{}`: page {:#x} is in color {} outside its assignment and not marked for recoloring",
                    p.name, page.vpn, page.color
                ));
            }
        }
    }

    /// The colors of each process (by name) now.
    pub fn assignments(&self) -> BTreeMap<String, Vec<u64>> {
        self.procs
            .values()
            .map(|p| (p.name.clone(), p.assignment.iter().collect()))
            .collect()
    }
}

fn decision_name(d: &Decision) -> &'static str {
    match d {
        Decision::None => "none",
        Decision::SignalHot => "hot",
        Decision::Expand(_) => "expand",
        Decision::Shrink(_) => "shrink",
    }
}

impl Policy for Coloris {
    fn name(&self) -> &'static str {
        "coloris"
    }
    fn counter_events(&self) -> Vec<Event> {
        vec![Event::LlcAccesses, Event::LlcMisses]
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        let placement = self.manager.process_created(p);
        let (colors, cores) = self.manager.assignment(p.pid).expect("just created");
        let (colors, mut cores) = (colors.clone(), cores.to_vec());
        // A process with colors of its own: its local core is its first pinned core, else the
        // core whose section holds its first color.
        if cores.is_empty() {
            cores.push(p.pinned.as_ref().map(|v| v[0]).unwrap_or_else(|| {
                let first = colors.iter().next().unwrap_or(0);
                (0..self.sections.len())
                    .find(|&c| self.manager.section(c).contains(first))
                    .unwrap_or(0)
            }));
        }
        let mut local = ColorSet::empty(self.colors);
        for &c in &cores {
            self.sections[c].iter().for_each(|col| local.insert(col));
        }
        let (low, high) = self.config.qos.get(&p.name).map_or(
            (self.config.low_threshold, self.config.high_threshold),
            |q| (q[0], q[1]),
        );
        let given = p.colors.is_some().then(|| colors.clone());
        self.procs.insert(
            p.pid,
            Proc {
                name: p.name.clone(),
                cores,
                local,
                warm_at: self.now.saturating_add(self.warmup),
                assignment: colors,
                from_config: p.colors.is_some(),
                given,
                lent: ColorSet::empty(self.colors),
                changes: 0,
                low: low / 100.0,
                high: high / 100.0,
                alive: true,
                accesses: 0,
                misses: 0,
                scan_at: None,
                moving: BTreeMap::new(),
                shrink_marked: 0,
                selective_moved: 0,
                redistribution_marked: 0,
                out_of_memory_allocs: 0,
            },
        );
        self.lend_or_reclaim(p.pid);
        self.record(p.pid);
        self.check_exclusive();
        placement
    }

    fn process_exited(&mut self, pid: usize) {
        self.manager.process_exited(pid);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.alive = false;
            p.moving.clear();
        }
        // Its colors that no live process owns now are extra colors for the next hot process
        // (`monitor`); the report names them.
        if let Some(p) = self.procs.get(&pid) {
            let left: Vec<u64> = p
                .assignment
                .iter()
                .filter(|&c| self.global_hotness(c) == 0)
                .collect();
            self.released.push((self.now, pid, left));
        }
    }

    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet {
        if self.shared(vpn) {
            // Section 3.1: shared pages take random colors, or a reserved set.
            if let Some(s) = &self.shared_set {
                return s;
            }
            let c = self.rng.below(self.colors);
            self.scratch = ColorSet::of(self.colors, [c]).expect("in range");
            return &self.scratch;
        }
        let p = self.procs.get_mut(&pid).expect("process_created first");
        if let Some(old) = p.moving.remove(&vpn) {
            // Redistribution: the page moves, round-robin over the rest of the assignment.
            let mut s = p.assignment.clone();
            s.remove(old);
            if !s.is_empty() {
                self.scratch = s;
                return &self.scratch;
            }
        }
        &self.procs[&pid].assignment
    }

    fn out_of_colors(&mut self, pid: usize) -> bool {
        let new = self.alloc_colors(pid, self.config.unit);
        if new.is_empty() {
            return false;
        }
        self.note_overlaps(pid, &new);
        self.procs
            .get_mut(&pid)
            .expect("known")
            .out_of_memory_allocs += 1;
        self.record(pid);
        self.check_exclusive();
        true
    }

    fn check_processes(&self, names: &[String]) -> Result<(), ConfigError> {
        for name in self.config.qos.keys() {
            if !names.contains(name) {
                return Err(ConfigError::new(
                    format!("policy.coloris.qos.{name}"),
                    format!(
                        "no process is named `{name}`; the processes are: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        if self.period == 0 {
            // Defaults in ticks: resolved at the first tick, whose interval
            // is the scheduler's tick. The processes created before it warm up from cycle 0.
            let tick = t.interval.max(1);
            self.period = self.config.period.unwrap_or(DEFAULT_PERIOD_TICKS * tick);
            self.win = self.config.win.unwrap_or(DEFAULT_WIN_TICKS * tick);
            self.warmup = self.config.warmup.unwrap_or(self.period);
            let warmup = self.warmup;
            self.procs
                .values_mut()
                .for_each(|p| p.warm_at = p.warm_at.max(warmup));
        }
        self.now = t.now;
        for pc in &t.processes {
            if let Some(p) = self.procs.get_mut(&pc.pid) {
                // Counts of the warm-up are not the program's steady demand (section 4.3).
                if t.now > p.warm_at {
                    p.accesses += pc.interval.get(Event::LlcAccesses);
                    p.misses += pc.interval.get(Event::LlcMisses);
                }
                if !pc.alive {
                    p.alive = false;
                }
            }
        }
        // Colors taken back at a creation: their pages move lazily (the shrink of section 3.2).
        for (q, colors) in std::mem::take(&mut self.pending_shrink) {
            if self.procs[&q].alive {
                self.shrink(k, q, &colors);
            }
        }
        // Redistribution windows that have closed.
        let due: Vec<usize> = self
            .procs
            .iter()
            .filter(|(_, p)| p.alive && p.scan_at.is_some_and(|at| at <= t.now))
            .map(|(&pid, _)| pid)
            .collect();
        for pid in due {
            self.procs.get_mut(&pid).expect("known").scan_at = None;
            self.redistribute(k, pid);
        }
        if t.now < self.last_monitor + self.period {
            return;
        }
        self.last_monitor = t.now;
        let pids: Vec<usize> = self.procs.keys().copied().collect();
        for pid in pids {
            let p = self.procs.get_mut(&pid).expect("known");
            if !p.alive {
                p.accesses = 0;
                p.misses = 0;
                continue;
            }
            // Its first MONITOR once a whole PERIOD of warm counts is in.
            if t.now < p.warm_at.saturating_add(self.period) {
                continue;
            }
            let (acc, miss) = (p.accesses, p.misses);
            p.accesses = 0;
            p.misses = 0;
            let cmr = if acc < self.config.min_references {
                0.0
            } else {
                miss as f64 / acc as f64
            };
            let d = self.monitor(pid, cmr);
            match &d {
                Decision::Expand(new) if !new.is_empty() => {
                    self.record(pid);
                    self.expand(k, pid, new);
                }
                Decision::Shrink(victims) if !victims.is_empty() => {
                    self.record(pid);
                    self.shrink(k, pid, victims);
                }
                _ => {}
            }
            let n = self.procs[&pid].assignment.len();
            self.monitor
                .push((t.now, pid, cmr, acc, decision_name(&d), n));
            self.check(k, pid);
        }
        // A process that exited while queued asks for nothing any more.
        let procs = &self.procs;
        self.requests.retain(|q| procs[q].alive);
        if let Some(donor) = self.return_unclaimed() {
            self.record(donor);
        }
        self.check_exclusive();
        let unowned = self
            .usable
            .iter()
            .filter(|&c| self.global_hotness(c) == 0)
            .count() as u64;
        self.rounds += 1;
        self.rounds_unowned += u64::from(unowned > 0);
        self.unowned_last = unowned;
    }

    fn report(&self) -> serde_json::Value {
        serde_json::to_value(self.typed_report()).expect("plain data")
    }
}

#[cfg(test)]
mod tests;
