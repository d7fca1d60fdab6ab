/*!
The software pollute buffer and its run-time search, shared by `rocs` (ROCS, papers/000,
sections 3-5) and `global-pollute` (Azimi et al., papers/001, case study 2, section 4.2).

- **Pollute buffer** (ROCS section 4, Figure 5): `buffer_size / color size` LLC colors
  (default 1/16 of the LLC, ROCS section 6; the last ones, or on a machine with a shared cache
  inside the LLC the ones that are the same share of both, `PolluteEngine::buffer_colors`)
  hold the pages classified as polluters and no other
  page, *while some unit is targeted*, and only in the LLCs (chips) the targeted unit runs on.
  Until a unit is first targeted the buffer's colors stay in normal use (`allowed_colors` gives
  every color, exactly as `linux`): ROCS 5.1 leaves a thread below the miss-rate threshold
  alone, "no overhead is observed". When a unit is targeted the colors are taken out of normal
  use on the chips its threads have run on: every page on them of a process that has run on
  such a chip is moved out by eager recoloring (allocate, copy, remap, shootdown: section 4;
  costs charged as any recolor), and such a process's `allowed_colors` is the remaining colors
  (a process first scheduled on such a chip later is cleared at that switch). A process on
  another chip shares no cache with the buffer and keeps every color. Pages are moved into the
  buffer (and back) the same way. When no unit is profiling or searching and none keeps pages in
  the buffer, the colors go back to normal use everywhere (`pollute_color_in_use` in the report
  logs every change with the chips).
- **Units.** The engine runs one search per *unit*, a set of address spaces profiled and searched
  together: `rocs` makes one unit per process (a process is *targeted* when its LLC miss rate over
  the last tick exceeds `target_miss_rate`, section 5.1 and Table 2's 25%); `global-pollute` one
  unit of every process, whose samples from all cores are aggregated per address space into one
  stack, all sharing the one pollute buffer (Azimi 4.2.1-4.2.2).
- **Online profiling** (ROCS 3.1, 5.1): while a unit profiles, the data-address sampler of each
  core is on only while a thread of a profiling unit runs there (`rocs`: L1D misses, whose data
  source tells L2/LLC hit from memory, ROCS 3.1; `global-pollute`: LLC accesses, Azimi 4.2.1 "L3
  hits and misses"); on a core running an untargeted thread it is off (ROCS 5.1: "When
  non-targeted threads are scheduled, profiling can be disabled"). Each profiled thread is
  throttled to at most one interrupt per `throttle_cycles` (5 K, ROCS 5.1) *of its own*: the
  period on its core is `ceil(throttle_cycles * events / cycles)` of its process's last interval
  (events and cycles summed over the process's threads), re-set at every context switch and
  tick, and raised at once when 16 samples on a core come in less than half the cycles the
  throttle allows them (a stale period lasted a whole tick: the profile moved with the tick).
  The prefetcher is off while profiling (ROCS 3.2.3) unless `profile_prefetch` (the Figure 8
  variant); the simulated machine switches prefetchers per chip only, so this one costs
  co-runners too (docs/rocs.md). A sample is a miss when its source is memory or another chip, a
  hit when a cache level served it.
- **Miss-rate stack** (ROCS 5.2): the unit's sampled small pages ordered by sampled miss rate,
  highest first (ties: the page whose address space misses more over all its samples, then more
  samples, then pid and page): only pages the monitor saw.
- **Algorithm 1, FindPollutePages** (ROCS 5.2): after a baseline measurement with nothing mapped,
  map `step` more pages from the top of the stack, let `settle_cycles` pass (remapping cost and
  cache warm-up stay out of the measure), measure the unit's IPC (instructions / cycles, summed
  over its processes) over `measure_cycles`, keep the best count; stop when `min_pages` pages are
  left; restore the excess pages beyond the best count. The baseline is the initial `best`, so
  when no mapping beats it every page goes back (the paper leaves `best`'s start open).
- **Phase detection** (ROCS 5.1): once settled, the unit's IPC (or LLC MPKI) over every
  `phase_cycles` window is compared with the first window after the search; a relative change
  above `phase_threshold` restores the unit's pages and profiles again.
- **Best offline** (ROCS Figure 8): `offline_pages = N` skips the search and maps the top N pages
  of the same stack; a harness (`python/cachecolor/reports/rocs.py`, `best_offline`) runs N over
  a grid, repeated runs, and keeps the best. `verify_cycles` profiles again after the search with
  the buffer in place (ROCS Figure 10 b's profile), at the cost of more monitoring.
*/
use super::{Kernel, MachineInfo, Placement, Policy, ProcessInfo, SchedEvent, Tick};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::{DataSource, Event, Reading, Sample, SamplingConfig};
use std::collections::BTreeMap;

mod config;
mod counts;
mod report;
mod search;
pub use config::{PhaseMetric, PolluteConfig};
use counts::{Acc, READ};
pub use report::{Confirmation, RocsReport, RocsUnit, SearchLog, Step};

fn ratio_f(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// Cycles left before profiling may start.
    Warmup(u64),
    /// Waiting to be targeted (LLC miss rate and MPKI above their thresholds).
    Waiting,
    /// Profiling for this many more cycles (`verify`: the after-search profile).
    Profiling {
        left: u64,
        verify: bool,
    },
    /// Measuring with nothing mapped: settle cycles left, then measure.
    Baseline {
        settle: u64,
    },
    /// A search step: settle cycles left, then measure.
    Search {
        settle: u64,
    },
    /// A search step whose pages the budget (`max_search_overhead`) cannot buy yet: move more
    /// of `stack[..target]` each tick as the unit's cycles grow, then settle and measure.
    Buying {
        target: u64,
    },
    /// The walk is over and kept pages (`best_n`): the kept configuration is measured again
    /// around a fresh baseline, kept (`part` 0), nothing mapped (1), kept again (2), each
    /// after `settle` cycles, so a drift between the walk's baseline and its best step cancels
    /// (`confirm`).
    Confirm {
        settle: u64,
        part: u8,
    },
    /// Settled; phase detection running (`reference` from the first window). `discard`: the
    /// first window after a search holds the search's own page moves (the restore), not the
    /// program's phase, and is left out (a restore of 710 pages had cost a pure stream 67% of
    /// its first window and read as a phase change: three searches instead of one).
    Stable {
        reference: Option<f64>,
        discard: bool,
    },
    Done,
}

/// What one process of a unit has run and paid (its share of the search's budgets).
#[derive(Debug, Default, Clone, Copy)]
struct MemberCost {
    cycles: u64,
    move_cost: u64,
    in_buffer: u64,
}

#[derive(Debug)]
struct Unit {
    pids: Vec<usize>,
    /// Every process the unit ever had (for the report).
    members: Vec<usize>,
    stage: Stage,
    acc: Acc,
    /// (pid, vpn) -> (samples, misses) of the current profile.
    profile: BTreeMap<(usize, u64), (u32, u32)>,
    stack: Vec<(usize, u64)>,
    step: u64,
    /// Stack pages mapped to the buffer so far (`stack[..mapped]`).
    mapped: u64,
    best: f64,
    best_n: u64,
    /// Each member's last reading of the events it reads (`READ`'s order).
    last_read: BTreeMap<usize, [Reading; READ.len()]>,
    /// The last targeting window (`Waiting`): a unit is profiled only when two in a row are
    /// targeted and its phase held between them.
    last_window: Option<Acc>,
    /// The current measurement's window under way (`measure_cycles` of it, whatever the tick).
    window: Acc,
    /// The IPCs of the current measurement's whole windows of `measure_cycles`.
    window_ipcs: Vec<f64>,
    /// Windows of `measure_cycles` the current search's baseline was measured over.
    baseline_windows: u32,
    /// LLC MPKI of the current baseline's windows: a baseline whose windows move one way, the
    /// last beyond `phase_threshold` of the first, measured a phase change, not a phase (ROCS 5.1).
    baseline_mpkis: Vec<f64>,
    /// Sum of squared deviations and degrees of freedom behind the search's noise estimate.
    noise_ss: f64,
    noise_df: u32,
    /// A step of the current search beat the baseline significantly (the budget stops binding).
    gained: bool,
    /// Ticks the current step has waited for its budget.
    waited: u32,
    /// The unit's cycles since the current step's pages were all mapped (settling and
    /// measuring).
    step_cycles: u64,
    /// Cycles the current search's steps have lost against its baseline (net of steps above it).
    loss: f64,
    /// Cycles the unit's processes have run (every tick since creation).
    cycles: u64,
    /// Cycles the kernel spent moving the unit's pages into and out of the buffer.
    move_cost: u64,
    /// Per member: its cycles, what moving its pages cost it, and its pages in the buffer
    /// (`stack[..mapped]`). The search's budgets are shares of what the processes that pay
    /// them have run (a machine-wide unit's budget over every member's cycles, the exited ones'
    /// too, would let the search charge the one process left 2% of its run).
    member: BTreeMap<usize, MemberCost>,
    /// Pages moved into or out of the buffer for this unit (every search).
    moves: u64,
    searches: Vec<SearchLog>,
    profiles: u32,
    phase_changes: u32,
    /// Its last process exited while a search was under way (Algorithm 1 never returned).
    exited_mid_search: bool,
    /// The confirmation's measurements so far: (IPC, windows) of kept, nothing, kept.
    confirm: Vec<(f64, u32)>,
}

impl Unit {
    /// A search is under way: its baseline, a step, or a step waiting for its budget.
    fn searching(&self) -> bool {
        matches!(
            self.stage,
            Stage::Baseline { .. }
                | Stage::Search { .. }
                | Stage::Buying { .. }
                | Stage::Confirm { .. }
        )
    }

    /// The cycles of the processes still in the unit: what a budget is a share of (the
    /// processes that pay it).
    fn live_cycles(&self) -> u64 {
        self.pids
            .iter()
            .map(|p| self.member.get(p).map_or(0, |m| m.cycles))
            .sum()
    }

    /// Add a tick to the measurement under way and to its window of `measure_cycles`; the
    /// window when this tick completes it (a window closes at the first tick that completes
    /// it, whatever the tick), its IPC kept for the noise.
    fn measure(&mut self, interval: &Acc, measure_cycles: u64) -> Option<Acc> {
        add(&mut self.acc, interval);
        add(&mut self.window, interval);
        if self.window.elapsed < measure_cycles {
            return None;
        }
        let w = std::mem::take(&mut self.window);
        self.window_ipcs.push(w.ipc());
        Some(w)
    }

    /// Pool the current measurement's window IPCs into the search's noise; the pooled
    /// standard deviation of a window of `measure_cycles` (the spread of the measurement's own
    /// windows is the noise a step must rise above). Windows, not ticks: a tick's IPC scatters
    /// more the shorter the tick, and a noise counted in ticks made the search's decisions move
    /// with `[scheduler] tick` (three 2 M-cycle ticks or six 1 M-cycle ones behind the same
    /// baseline, a step of one tick or of two).
    fn pool_noise(&mut self) -> f64 {
        self.window = Acc::default();
        let ipcs = std::mem::take(&mut self.window_ipcs);
        if ipcs.len() > 1 {
            let mean = ipcs.iter().sum::<f64>() / ipcs.len() as f64;
            self.noise_ss += ipcs.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
            self.noise_df += ipcs.len() as u32 - 1;
        }
        if self.noise_df > 0 {
            (self.noise_ss / self.noise_df as f64).sqrt()
        } else {
            0.0
        }
    }

    /// Eager recolor of page `vpn` of `pid` into `colors`, its cost (the kernel's own
    /// accounting) added to the unit's moves; whether the page moved.
    fn move_page(&mut self, k: &mut dyn Kernel, pid: usize, vpn: u64, colors: &ColorSet) -> bool {
        let before = k.policy_cycles(pid);
        let moved = matches!(k.recolor(pid, vpn, colors), Ok(Some(_)));
        if moved {
            let cost = k.policy_cycles(pid).saturating_sub(before);
            self.moves += 1;
            self.move_cost += cost;
            self.member.entry(pid).or_default().move_cost += cost;
        }
        moved
    }
}

/// Which events a variant samples and how it groups processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `rocs`: one unit per process, sampling L1D misses.
    PerProcess,
    /// `global-pollute`: one unit of all processes, sampling LLC accesses.
    Global,
}

impl Scope {
    /// The policy this scope makes.
    pub fn policy_name(self) -> &'static str {
        match self {
            Scope::PerProcess => "rocs",
            Scope::Global => "global-pollute",
        }
    }
}

/// The shared engine.
#[derive(Debug)]
pub struct PolluteEngine {
    cfg: PolluteConfig,
    scope: Scope,
    event: Event,
    /// Whether the data references (a step's phase signature) are read: on the ideal PMU, or
    /// when a programmable counter is free for them beside `pmu.events` and the engine's own
    /// events. Taking a counter from a full set multiplexes the sampled event more: on the
    /// 4-counter Nehalem it lost rocs 59% of its samples (3,590 -> 1,480 on a sensitive +
    /// stream pair) and left the sensitive program unprofiled.
    reads_refs: bool,
    page_size: u64,
    /// Cycles an LLC miss stalls a core (`MachineInfo::llc_miss_penalty`; 0: unknown): what
    /// the buffer could save at most (the search's power check).
    miss_penalty: u64,
    normal: ColorSet,
    pollute: ColorSet,
    /// Every color (what a page may use while the buffer is in normal use).
    all: ColorSet,
    /// Chips whose LLC has the buffer's colors out of normal use (a unit there is targeted or
    /// keeps pages in the buffer); empty: in normal use everywhere.
    reserved: std::collections::BTreeSet<usize>,
    /// Processes whose pages were moved off the buffer's colors and that are kept off them.
    cleared: std::collections::BTreeSet<usize>,
    /// pid -> the chips its threads have run on (from `Switch` events).
    on_chip: BTreeMap<usize, std::collections::BTreeSet<usize>>,
    cores_per_chip: usize,
    chips: usize,
    /// `(time, in normal use, chips reserved)` at every change, for the report.
    reservations: Vec<(u64, bool, Vec<usize>)>,
    /// Pages moved off the buffer's colors when they were taken out of normal use.
    evicted: u64,
    units: Vec<Unit>,
    /// pid -> unit index.
    unit_of: BTreeMap<usize, usize>,
    /// pid -> its sampled event per cycle over the last interval (the per-thread throttle).
    rate: BTreeMap<usize, f64>,
    /// core -> the process of the thread running there (from `Switch` events).
    running: BTreeMap<usize, usize>,
    /// core -> the sampling period programmed there (None: off).
    core_period: BTreeMap<usize, Option<u64>>,
    /// core -> (the period, the cycle its current throttle window began, samples in it).
    throttle_window: BTreeMap<usize, (u64, u64, u64)>,
    prefetch_off: bool,
    samples: u64,
    samples_used: u64,
    to_buffer: u64,
    restored: u64,
}

impl PolluteEngine {
    /// The `rocs` (`Scope::PerProcess`) or `global-pollute` (`Scope::Global`) policy, its
    /// settings checked against the machine (errors under `policy.<name>`).
    pub fn policy(cfg: &PolluteConfig, scope: Scope, m: &MachineInfo) -> Result<Self, ConfigError> {
        let colors = cfg.validate(&format!("policy.{}", scope.policy_name()), m)?;
        Ok(PolluteEngine::new(cfg.clone(), scope, colors, m))
    }

    /// The buffer's LLC colors. With no shared cache inside the LLC: the last `pollute_colors`.
    /// With one (POWER5: L2 of 16 colors inside the L3 of 256), a frame's inner color is its LLC
    /// color `mod inner_colors` (the frame number's low bits index both), so the last
    /// `pollute_colors` LLC colors (240-255) hold every inner color and confine nothing there. The
    /// buffer is then the LLC colors whose inner color is among the last `pollute_colors x inner /
    /// colors` inner colors: the same share of both caches (Azimi 4.2: 1/16 of the L2 and of the
    /// L3). Falls back to the last colors when the shares do not divide evenly.
    pub fn buffer_colors(pollute_colors: u64, m: &MachineInfo) -> ColorSet {
        let (c, i) = (m.colors, m.inner_colors);
        let composes = i > 1
            && i < c
            && c.is_multiple_of(i)
            && (pollute_colors * i).is_multiple_of(c)
            && pollute_colors * i >= c;
        if composes {
            let inner_first = i - pollute_colors * i / c;
            ColorSet::of(c, (0..c).filter(|x| x % i >= inner_first)).expect("in range")
        } else {
            ColorSet::range(c, c - pollute_colors, c).expect("in range")
        }
    }

    pub fn new(cfg: PolluteConfig, scope: Scope, pollute_colors: u64, m: &MachineInfo) -> Self {
        let pollute = Self::buffer_colors(pollute_colors, m);
        let normal = ColorSet::of(m.colors, (0..m.colors).filter(|&x| !pollute.contains(x)))
            .expect("in range");
        let event = match scope {
            Scope::PerProcess => Event::L1dMisses,
            Scope::Global => Event::LlcAccesses,
        };
        let reads_refs = m.pmu_counters.is_none_or(|counters| {
            let on = [
                Event::LlcAccesses,
                Event::LlcMisses,
                event,
                Event::L1dAccesses,
            ]
            .iter()
            .fold(m.pmu_events, |set, e| set | e.bit());
            on.count_ones() as usize <= counters
        });
        PolluteEngine {
            event,
            reads_refs,
            cfg,
            scope,
            page_size: m.page_size,
            miss_penalty: m.llc_miss_penalty,
            normal,
            pollute,
            all: ColorSet::all(m.colors),
            reserved: Default::default(),
            cleared: Default::default(),
            on_chip: BTreeMap::new(),
            cores_per_chip: m.cores_per_chip().max(1),
            chips: m.chips.max(1),
            reservations: Vec::new(),
            evicted: 0,
            units: Vec::new(),
            unit_of: BTreeMap::new(),
            rate: BTreeMap::new(),
            running: BTreeMap::new(),
            core_period: BTreeMap::new(),
            throttle_window: BTreeMap::new(),
            prefetch_off: false,
            samples: 0,
            samples_used: 0,
            to_buffer: 0,
            restored: 0,
        }
    }

    /// The colors of every page outside the buffer.
    pub fn normal(&self) -> &ColorSet {
        &self.normal
    }

    /// The colors a page of `pid` outside the buffer may use now: every color until a unit on
    /// a chip it has run on is targeted (ROCS 5.1), the non-buffer colors after.
    pub fn allowed_for(&self, pid: usize) -> &ColorSet {
        if self.cleared.contains(&pid) {
            &self.normal
        } else {
            &self.all
        }
    }

    /// Whether the buffer's colors are out of normal use anywhere.
    pub fn reserved(&self) -> bool {
        !self.reserved.is_empty()
    }

    /// Take the buffer's colors out of normal use on the chips unit `u` has run on (all chips
    /// if it has not been seen running): the pages on them of every process that has run on
    /// those chips move out (eager recolor, cost charged by the kernel as for any move).
    fn reserve(&mut self, k: &mut dyn Kernel, now: u64, u: usize) {
        let mut chips: std::collections::BTreeSet<usize> = self.units[u]
            .pids
            .iter()
            .filter_map(|p| self.on_chip.get(p))
            .flatten()
            .copied()
            .collect();
        if chips.is_empty() {
            chips = (0..self.chips).collect();
        }
        if chips.is_subset(&self.reserved) {
            return;
        }
        self.reserved.extend(chips);
        self.reservations
            .push((now, false, self.reserved.iter().copied().collect()));
        let pids: Vec<usize> = self.unit_of.keys().copied().collect();
        for pid in pids {
            self.clear_if_on_reserved_chip(k, pid);
        }
    }

    /// Move `pid`'s pages off the buffer's colors if it has run on a chip where they are
    /// reserved and was not cleared yet; from then on it is kept off them.
    fn clear_if_on_reserved_chip(&mut self, k: &mut dyn Kernel, pid: usize) {
        if self.cleared.contains(&pid) || !self.unit_of.contains_key(&pid) {
            return;
        }
        // A process not yet scheduled has no pages; its first switch clears it if needed.
        let on = self
            .on_chip
            .get(&pid)
            .is_some_and(|c| !c.is_disjoint(&self.reserved));
        if !on {
            return;
        }
        self.cleared.insert(pid);
        for p in k.pages(pid) {
            if p.huge || !self.pollute.contains(p.color) {
                continue;
            }
            if let Ok(Some(_)) = k.recolor(pid, p.vpn, &self.normal) {
                self.evicted += 1;
            }
        }
    }

    /// Give the buffer's colors back to normal use once no unit is profiling or searching and
    /// none keeps pages in the buffer.
    fn release_if_unused(&mut self, now: u64) {
        if self.reserved.is_empty() {
            return;
        }
        let busy = self.units.iter().any(|u| {
            u.stage != Stage::Done
                && (u.mapped > 0
                    || matches!(
                        u.stage,
                        Stage::Profiling { .. }
                            | Stage::Baseline { .. }
                            | Stage::Search { .. }
                            | Stage::Buying { .. }
                            | Stage::Confirm { .. }
                    ))
        });
        if !busy {
            self.reserved.clear();
            self.cleared.clear();
            self.reservations.push((now, true, Vec::new()));
        }
    }

    pub fn process_created(&mut self, pid: usize) {
        let warmup = self.cfg.warmup_cycles;
        let new_unit = |pids: Vec<usize>| Unit {
            members: pids.clone(),
            pids,
            stage: Stage::Warmup(warmup),
            acc: Acc::default(),
            profile: BTreeMap::new(),
            stack: Vec::new(),
            step: 0,
            mapped: 0,
            best: 0.0,
            best_n: 0,
            last_read: BTreeMap::new(),
            last_window: None,
            window: Acc::default(),
            window_ipcs: Vec::new(),
            baseline_windows: 0,
            baseline_mpkis: Vec::new(),
            noise_ss: 0.0,
            noise_df: 0,
            gained: false,
            waited: 0,
            step_cycles: 0,
            loss: 0.0,
            cycles: 0,
            move_cost: 0,
            member: BTreeMap::new(),
            moves: 0,
            searches: Vec::new(),
            profiles: 0,
            phase_changes: 0,
            exited_mid_search: false,
            confirm: Vec::new(),
        };
        let u = match self.scope {
            Scope::PerProcess => {
                self.units.push(new_unit(vec![pid]));
                self.units.len() - 1
            }
            Scope::Global => {
                if self.units.is_empty() {
                    self.units.push(new_unit(Vec::new()));
                }
                self.units[0].pids.push(pid);
                self.units[0].members.push(pid);
                0
            }
        };
        self.unit_of.insert(pid, u);
    }

    pub fn process_exited(&mut self, pid: usize) {
        if let Some(u) = self.unit_of.remove(&pid) {
            let unit = &mut self.units[u];
            unit.pids.retain(|&p| p != pid);
            if unit.pids.is_empty() {
                unit.exited_mid_search = unit.searching();
                unit.stage = Stage::Done;
            }
        }
    }

    pub fn sample(&mut self, s: &Sample) {
        self.samples += 1;
        let pid = s.pid as usize;
        let Some(&u) = self.unit_of.get(&pid) else {
            return;
        };
        let unit = &mut self.units[u];
        if !matches!(unit.stage, Stage::Profiling { .. }) {
            return;
        }
        self.samples_used += 1;
        let miss = matches!(s.source, DataSource::Memory | DataSource::Remote);
        let e = unit
            .profile
            .entry((pid, s.vaddr / self.page_size))
            .or_insert((0, 0));
        e.0 += 1;
        e.1 += miss as u32;
    }

    pub fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        if self.running.is_empty() {
            // No switch seen yet (a kernel without a scheduler): each core's first thread.
            for th in k.threads() {
                if !th.done && !self.running.contains_key(&th.core) {
                    self.running.insert(th.core, th.pid);
                    let chip = th.core / self.cores_per_chip;
                    self.on_chip.entry(th.pid).or_default().insert(chip);
                }
            }
        }
        for p in &t.processes {
            let cycles = p.interval.get(Event::Cycles);
            if cycles > 0 {
                self.rate
                    .insert(p.pid, ratio(p.interval.get(self.event), cycles));
            }
        }
        for u in 0..self.units.len() {
            if self.units[u].stage == Stage::Done {
                continue;
            }
            let mut acc = Acc::default();
            let unit = &mut self.units[u];
            for p in &t.processes {
                if unit.pids.contains(&p.pid) {
                    // Each event's reading since the last tick: under a realistic PMU the
                    // raw count with its times (perf's), under the ideal one the exact count.
                    let last = unit
                        .last_read
                        .entry(p.pid)
                        .or_insert_with(|| READ.map(Reading::zero));
                    let cycles = p.interval.get(Event::Cycles).max(1);
                    for (i, &e) in READ.iter().enumerate() {
                        let delta = match p.readings.iter().find(|r| r.event == e) {
                            Some(now) => now.since(&std::mem::replace(&mut last[i], *now)),
                            None => Reading::exact(e, p.interval.get(e), cycles),
                        };
                        acc.counts[i].add(&delta);
                    }
                    unit.member.entry(p.pid).or_default().cycles += p.interval.get(Event::Cycles);
                }
            }
            unit.cycles += acc.cycles();
            acc.elapsed = t.interval;
            self.step_unit(k, u, acc, t.now);
        }
        self.release_if_unused(t.now);
        self.program_pmu(k);
    }

    /// A context switch: program the sampler of the core for the thread now running there.
    pub fn scheduled(&mut self, k: &mut dyn Kernel, e: &SchedEvent) {
        if let SchedEvent::Switch { core, to, .. } = *e {
            if let Some(t) = k.threads().into_iter().find(|t| t.tid == to) {
                self.running.insert(core, t.pid);
                let chip = core / self.cores_per_chip;
                if self.on_chip.entry(t.pid).or_default().insert(chip)
                    && self.reserved.contains(&chip)
                {
                    // First time on a chip whose buffer is reserved: off the buffer's colors.
                    self.clear_if_on_reserved_chip(k, t.pid);
                }
            }
            self.program_core(k, core);
        }
    }

    /// The sampling period for a thread of `pid`: off unless its unit profiles; else one
    /// interrupt per `throttle_cycles` of its own cycles (ROCS 5.1).
    fn period_for(&self, pid: usize) -> Option<u64> {
        let u = *self.unit_of.get(&pid)?;
        if !matches!(self.units[u].stage, Stage::Profiling { .. }) {
            return None;
        }
        let rate = self.rate.get(&pid).copied().unwrap_or(0.0);
        Some(((self.cfg.throttle_cycles as f64 * rate).ceil() as u64).max(1))
    }

    /// The throttle as it acts between ticks (ROCS 5.1: at most one interrupt per
    /// `throttle_cycles`): the period set at a tick or switch comes from the process's event
    /// rate over its last interval, which a change of behaviour makes stale. A stream whose
    /// first pass was served by the lines the kernel's clear stored had almost no LLC accesses,
    /// so its profile began at period 1 on its second pass and every access interrupted for a
    /// whole tick: the longer the tick, the more of the profile went to its first pages (2 M
    /// tick: 2,947 samples on 187 pages; 1 M: 2,019 on 301), and the search moved with the
    /// tick. When `THROTTLE_SAMPLES` samples on a core come in less than half the cycles the
    /// throttle allows them, the period grows at once by the measured excess.
    fn throttle(&mut self, k: &mut dyn Kernel, s: &Sample) {
        const THROTTLE_SAMPLES: u64 = 16;
        let core = s.core as usize;
        let Some(Some(period)) = self.core_period.get(&core).copied() else {
            return;
        };
        let w = self
            .throttle_window
            .entry(core)
            .or_insert((period, s.cycle, 0));
        if w.0 != period {
            *w = (period, s.cycle, 0);
        }
        w.2 += 1;
        if w.2 <= THROTTLE_SAMPLES {
            return;
        }
        let span = s.cycle.saturating_sub(w.1).max(1);
        *w = (period, s.cycle, 0);
        let allowed = THROTTLE_SAMPLES * self.cfg.throttle_cycles;
        if span.saturating_mul(2) >= allowed {
            return;
        }
        let period = (period as f64 * allowed as f64 / span as f64).ceil() as u64;
        k.set_sampling(
            Some(core),
            Some(SamplingConfig {
                event: self.event,
                period,
                cost_cycles: self.cfg.sample_cost_cycles,
                pollute_l1_lines: self.cfg.handler_lines,
            }),
        );
        self.core_period.insert(core, Some(period));
    }

    /// Program `core`'s sampler for the process running there (off if none or untargeted).
    fn program_core(&mut self, k: &mut dyn Kernel, core: usize) {
        let period = self
            .running
            .get(&core)
            .and_then(|&pid| self.period_for(pid));
        let before = self.core_period.get(&core).copied().flatten();
        if period != before {
            k.set_sampling(
                Some(core),
                period.map(|period| SamplingConfig {
                    event: self.event,
                    period,
                    cost_cycles: self.cfg.sample_cost_cycles,
                    pollute_l1_lines: self.cfg.handler_lines,
                }),
            );
            self.core_period.insert(core, period);
        }
    }

    /// Sampler and prefetcher as the units' stages want them.
    fn program_pmu(&mut self, k: &mut dyn Kernel) {
        for core in 0..k.cores() {
            self.program_core(k, core);
        }
        let profiling = self
            .units
            .iter()
            .any(|u| matches!(u.stage, Stage::Profiling { .. }));
        let want_off = profiling && !self.cfg.profile_prefetch;
        if want_off != self.prefetch_off {
            // ROCS 3.2.3: profile with the prefetcher off, run with it on.
            k.set_prefetch(!want_off);
            self.prefetch_off = want_off;
        }
    }

    /// The report as JSON (`RocsReport`), naming the policy `name`.
    pub fn report(&self, name: &str) -> serde_json::Value {
        serde_json::to_value(self.typed_report(name)).expect("plain data")
    }
}

fn add(acc: &mut Acc, i: &Acc) {
    for (a, b) in acc.counts.iter_mut().zip(&i.counts) {
        a.add(b);
    }
    acc.elapsed += i.elapsed;
    acc.ticks += 1;
}

/// `rocs` and `global-pollute` are the engine itself; the scope names the policy.
impl Policy for PolluteEngine {
    fn name(&self) -> &'static str {
        self.scope.policy_name()
    }
    fn counter_events(&self) -> Vec<Event> {
        // Phase detection (IPC / MPKI, section 3.3) and the per-process rate of the sampled event.
        let mut events = vec![
            Event::Instructions,
            Event::Cycles,
            Event::LlcAccesses,
            Event::LlcMisses,
            self.event,
        ];
        if self.reads_refs {
            events.push(Event::L1dAccesses);
        }
        events
    }
    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        PolluteEngine::process_created(self, p.pid);
        Placement::default()
    }
    fn process_exited(&mut self, pid: usize) {
        PolluteEngine::process_exited(self, pid);
    }
    fn allowed_colors(&mut self, pid: usize, _vpn: u64) -> &ColorSet {
        self.allowed_for(pid)
    }
    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        PolluteEngine::tick(self, k, t);
    }
    fn scheduled(&mut self, k: &mut dyn Kernel, e: &SchedEvent) {
        PolluteEngine::scheduled(self, k, e);
    }
    fn sample(&mut self, k: &mut dyn Kernel, s: &Sample) {
        PolluteEngine::sample(self, s);
        self.throttle(k, s);
    }
    fn report(&self) -> serde_json::Value {
        PolluteEngine::report(self, self.scope.policy_name())
    }
    fn never_acted(&self) -> Option<String> {
        let name = self.scope.policy_name();
        let r = self.typed_report(name);
        // A unit that ended mid-search already has its warning in the report.
        if !r.warnings.is_empty() || r.pages_to_buffer > 0 {
            return None;
        }
        Some(if r.units.iter().all(|u| u.profiles == 0) {
            format!(
                "{name} targeted no process (no two measure_cycles windows in a row with the LLC \
                 miss rate above target_miss_rate, LLC MPKI at least min_llc_mpki and the MPKI \
                 within phase_threshold): nothing was sampled or moved"
            )
        } else {
            format!(
                "{name} moved no page into the pollute buffer: every search kept 0 pages or was \
                 skipped (the profile's cost remains)"
            )
        })
    }
}

#[cfg(test)]
mod tests;
