//! The search of one unit (a chip, or the machine under `global-pollute`), tick by tick: the
//! stages of a phase (baseline, profile, stack of candidate pages, moves into the pollute buffer
//! and out again, each against the baseline IPC with its noise), and the moves that carry them
//! out within the overhead budget (section 4 of the paper, docs/rocs.md).

use super::*;

impl PolluteEngine {
    pub(super) fn step_unit(&mut self, k: &mut dyn Kernel, u: usize, interval: Acc, now: u64) {
        let cfg = self.cfg.clone();
        let stage = self.units[u].stage;
        if matches!(stage, Stage::Search { .. }) {
            // The step's pages are all mapped: these cycles (settling and measuring) ran the
            // configuration whose IPC the step measures. (Ticks spent buying its pages ran a
            // part of it, unmeasured.)
            self.units[u].step_cycles += interval.cycles();
        }
        match stage {
            Stage::Done => {}
            Stage::Warmup(left) => {
                let left = left.saturating_sub(interval.elapsed);
                let unit = &mut self.units[u];
                // The warm-up's windows of `measure_cycles`: its last is the one the first
                // targeting window is compared with (a phase must hold over two, below).
                add(&mut unit.acc, &interval);
                if unit.acc.elapsed >= cfg.measure_cycles {
                    unit.last_window = Some(std::mem::take(&mut unit.acc));
                }
                if left == 0 {
                    unit.acc = Acc::default();
                }
                unit.stage = if left == 0 {
                    Stage::Waiting
                } else {
                    Stage::Warmup(left)
                };
            }
            Stage::Waiting => {
                // Targeting (ROCS 5.1) over a window of `measure_cycles` after the warm-up,
                // whatever the tick: a high LLC miss rate (Table 2: > 25%) on enough misses per
                // instruction to pay for sampling (Table 2's targeted programs: L2 MPKI >= 3).
                // A program that fits its cache can show a high miss rate on a trickle of
                // accesses (a 4-process mix's fitting program, LLC MPKI 1.5, lost 12.9% to a
                // profile and search that had nothing to find).
                let unit = &mut self.units[u];
                add(&mut unit.acc, &interval);
                if unit.acc.elapsed < cfg.measure_cycles {
                    return;
                }
                let window = std::mem::take(&mut unit.acc);
                let hit = targeted(&window, &cfg);
                // ... in a stable phase: the window before was targeted too and the LLC MPKI
                // did not change between them by more than a phase change (`phase_threshold`,
                // ROCS 5.1's coarse phases). ROCS profiles "after the first 4 billion cycles, in
                // order to avoid application initialization" (6.2) and its programs "exhibit
                // stable IPC after initialization" (6.1); the profile stands for "the current
                // application phase" (5.1). A cold start is no phase: a program that fits a
                // 4 MiB LLC still misses at 200+ MPKI after the warm-up while its lines are
                // first fetched, its MPKI falling by a third every 2 M cycles, and was
                // profiled and searched for nothing (0.955x linux).
                let previous = unit
                    .last_window
                    .replace(window)
                    .filter(|w| hit && targeted(w, &cfg));
                let stable = previous.is_some_and(|w| {
                    relative_change(
                        w.metric(PhaseMetric::LlcMpki),
                        window.metric(PhaseMetric::LlcMpki),
                    ) <= cfg.phase_threshold
                });
                if hit && stable {
                    // Targeted (ROCS 5.1): profiled. The buffer's colors leave normal use only
                    // when a search is about to map pages (below): a profile that finds nothing
                    // to search moves no co-runner's pages (a fitting co-runner lost 4% to pages
                    // moved off the buffer's colors for a search that never ran).
                    self.start_profile(u, false, cfg.profile_cycles);
                }
            }
            Stage::Profiling { left, verify } => {
                let left = left.saturating_sub(interval.elapsed);
                if left > 0 {
                    self.units[u].stage = Stage::Profiling { left, verify };
                    return;
                }
                let profile = self.profile_rows(u);
                let unit = &mut self.units[u];
                if verify {
                    if let Some(s) = unit.searches.last_mut() {
                        s.verify_profile = profile;
                    }
                    unit.stage = Stage::Stable {
                        reference: None,
                        discard: false,
                    };
                    unit.acc = Acc::default();
                    return;
                }
                self.build_stack(k, u);
                let unit = &mut self.units[u];
                let size = unit.stack.len() as u64;
                unit.step = if cfg.step_pages > 0 {
                    cfg.step_pages
                } else {
                    size.div_ceil(16).max(1)
                };
                unit.searches.push(SearchLog {
                    time: now,
                    stack_pages: size,
                    step_pages: unit.step,
                    baseline_ipc: 0.0,
                    baseline_data_apki: None,
                    noise: 0.0,
                    steps: Vec::new(),
                    move_cycles: 0,
                    unit_cycles: 0,
                    chosen: None,
                    skipped: None,
                    loss_cycles: 0.0,
                    stopped: None,
                    pages: None,
                    profile,
                    verify_profile: Vec::new(),
                    confirmation: None,
                });
                unit.mapped = 0;
                unit.best_n = 0;
                unit.window_ipcs.clear();
                unit.window = Acc::default();
                unit.noise_ss = 0.0;
                unit.noise_df = 0;
                unit.gained = false;
                unit.waited = 0;
                unit.step_cycles = 0;
                unit.loss = 0.0;
                unit.acc = Acc::default();
                if let Some(n) = cfg.offline_pages {
                    let n = n.min(size);
                    self.reserve(k, now, u);
                    self.map_to(k, u, n, false);
                    self.units[u].best_n = n;
                    self.finish_search(k, u);
                } else if size <= cfg.min_pages {
                    self.finish_search(k, u);
                } else if unit.profile.values().all(|&(n, m)| n == m) {
                    // No sampled reference hit in a cache, so every page sits at miss rate 1 and
                    // the stack (ROCS 5.2: pages by miss rate) has no order: nothing is reused that
                    // the buffer could protect (a pure stream: the search cost it 10%). Leave it.
                    // A stack whose pages miss alike but not always is still searched: ROCS's
                    // swim gains from a buffer over pages that all miss (its page-table lines stay
                    // in the L2, section 6.4), and a test of the stack's order from one or two
                    // samples a page skipped a stream beside a victim too (docs/rocs.md).
                    if let Some(log) = unit.searches.last_mut() {
                        log.skipped = Some("no sampled reference hit: nothing reused to protect");
                    }
                    self.finish_search(k, u);
                } else {
                    unit.stage = Stage::Baseline {
                        settle: cfg.settle_cycles,
                    };
                    // The search begins: the buffer's colors leave normal use (ROCS 5.1).
                    self.reserve(k, now, u);
                }
            }
            Stage::Baseline { settle } | Stage::Search { settle } => {
                let unit = &mut self.units[u];
                if settle > 0 {
                    // This tick's cycles settle (remapping cost and warm-up out of the measure).
                    let settle = settle.saturating_sub(interval.elapsed);
                    unit.stage = match stage {
                        Stage::Baseline { .. } => Stage::Baseline { settle },
                        _ => Stage::Search { settle },
                    };
                    return;
                }
                // The measurement's windows of `measure_cycles`, whose spread is the noise.
                let closed = unit.measure(&interval, cfg.measure_cycles);
                let baseline = matches!(stage, Stage::Baseline { .. });
                if let (Some(w), true) = (closed, baseline) {
                    unit.baseline_mpkis.push(w.metric(PhaseMetric::LlcMpki));
                }
                // Measured over cycles, not ticks; under a significance bar the baseline spans
                // at least 3 windows so its spread has two degrees of freedom (`baseline_cycles`).
                let (want, min_windows) = if baseline {
                    cfg.baseline_span()
                } else {
                    (cfg.measure_cycles, 1)
                };
                if unit.acc.elapsed < want || unit.window_ipcs.len() < min_windows {
                    return;
                }
                if baseline {
                    let m = std::mem::take(&mut unit.baseline_mpkis);
                    let one_way =
                        m.windows(2).all(|p| p[1] >= p[0]) || m.windows(2).all(|p| p[1] <= p[0]);
                    if m.len() > 1
                        && one_way
                        && relative_change(m[0], m[m.len() - 1]) > cfg.phase_threshold
                    {
                        // The baseline's windows move one way across a phase change (ROCS 5.1's
                        // coarse phases): their spread is the change, not the phase's noise,
                        // and their mean no configuration's IPC. Measure the baseline again.
                        // (A phased program's swings up and down are its noise: kept.)
                        unit.acc = Acc::default();
                        unit.window = Acc::default();
                        unit.window_ipcs.clear();
                        return;
                    }
                }
                let perf = unit.acc.ipc();
                let ticks = unit.acc.ticks;
                let windows = unit.window_ipcs.len() as u32;
                let measured = std::mem::take(&mut unit.acc);
                let sd = unit.pool_noise();
                let live_cycles = unit.live_cycles();
                let log = unit.searches.last_mut().expect("a search runs");
                let limit = (unit.stack.len() as u64).saturating_sub(cfg.min_pages);
                let mut blind = false;
                if baseline {
                    unit.baseline_windows = windows;
                    log.baseline_ipc = perf;
                    log.baseline_data_apki = measured.data_apki();
                    unit.best = perf;
                    unit.best_n = 0;
                    // The walk's power (`significance` > 0): the least gain a one-window step can
                    // show above the baseline's noise, against the most the buffer could give,
                    // every LLC miss of the baseline made a hit (its stall of `miss_penalty`
                    // cycles, with no overlap: Azimi et al. 3's stall breakdown, an upper
                    // bound). A program whose IPC swings between windows by more than that
                    // (glpk-mcf: 19-56% of its baseline from one 2 M-cycle window to the
                    // next, against at most 80%) cannot show a step's gain: every step's
                    // measure is its phase, and a walk through the stack only pays the moves.
                    let least = cfg.significance
                        * ratio_f(sd, perf)
                        * (1.0 + 1.0 / windows.max(1) as f64).sqrt();
                    let stall = (measured.llc_misses() as f64 * self.miss_penalty as f64)
                        .min(0.99 * measured.cycles() as f64);
                    let most = ratio_f(stall, measured.cycles() as f64 - stall);
                    blind = cfg.significance > 0.0 && self.miss_penalty > 0 && least > most;
                    if blind {
                        log.skipped =
                            Some("the baseline's noise hides any gain the buffer could give");
                    }
                } else {
                    // Algorithm 1 keeps the best configuration. A step counts only when it beats
                    // the baseline (nothing mapped) by `significance` standard errors of the
                    // difference, so noise does not buy pages; among those the highest IPC is
                    // the best (ties keep the fewer pages, the minimal set). Against the
                    // baseline, not the best so far: a gain that grows step by step (swim's
                    // page walks) is many small steps, none significant over its neighbour.
                    let base_n = unit.baseline_windows.max(1) as f64;
                    let se = sd * (1.0 / windows as f64 + 1.0 / base_n).sqrt();
                    // A step measured in another phase than its baseline is no comparison:
                    // the program itself changed (its data references per instruction, which
                    // no placement moves, left the baseline's by more than a phase change,
                    // `phase_threshold`), and the step's IPC is that phase's. ROCS profiles and
                    // searches for "the current application phase" (5.1) and profiles again
                    // when it changes; a walk across phases read them as the buffer's doing
                    // (glpk-mcf: a baseline of IPC 0.070 at 1,001 references per
                    // kilo-instruction, then every step "significant" at 0.09-0.33 and 100-730).
                    let data_apki = measured.data_apki();
                    let phase_moved = match (log.baseline_data_apki, data_apki) {
                        (Some(b), Some(m)) => {
                            b > 0.0 && relative_change(b, m) > cfg.phase_threshold
                        }
                        _ => false,
                    };
                    let significant =
                        !phase_moved && perf - log.baseline_ipc > cfg.significance * se;
                    let better = significant && perf > unit.best;
                    log.steps.push(Step {
                        pages: unit.mapped,
                        ipc: perf,
                        ticks,
                        significant,
                        waited_ticks: unit.waited,
                        data_apki,
                    });
                    if better {
                        unit.best = perf;
                        unit.best_n = unit.mapped;
                        unit.gained = true;
                    }
                    // What the step cost against the baseline (on a stream beside a table, 13 of 16
                    // steps ran at half the baseline IPC while the walk mapped the table, a 16%
                    // loss over the run that no page move accounted for).
                    if log.baseline_ipc > 0.0 {
                        unit.loss += unit.step_cycles as f64 * (1.0 - perf / log.baseline_ipc);
                    }
                    unit.step_cycles = 0;
                    log.loss_cycles = unit.loss.max(0.0);
                    // What a search may lose (`max_search_overhead`, the share its page moves
                    // may cost). The moves can wait: a step whose pages the budget cannot buy yet
                    // waits for the unit's cycles to grow (`Buying`). Its steps' IPC cannot: a step
                    // significantly below the baseline, once the steps' measured net loss (gains
                    // offset it) is above that share of the unit's cycles, only loses more by
                    // walking on (the next step maps more of the same pages), so the walk stops
                    // there and keeps its best step. On a stream beside a table the walk had mapped
                    // the table at half the baseline IPC for 13 steps (0.84x linux). Algorithm 1
                    // walks the whole stack; the paper's search is 3 B cycles of runs minutes long
                    // (ROCS 5.2), a share of the run this bound does not reach. A step merely below
                    // the baseline does not stop it: art's walk dips 3.4% before its 49% gain.
                    let worse = log.baseline_ipc - perf > cfg.significance * se;
                    // The loss is a share of the cycles of the processes still in the unit:
                    // under `global-pollute` the exited members' cycles had let a second
                    // search charge the one process left 2% of its run.
                    if worse
                        && unit.loss > cfg.max_search_overhead * live_cycles as f64
                        && unit.mapped < limit
                    {
                        log.stopped = Some(
                            "its steps lost more than max_search_overhead of the unit's cycles",
                        );
                    }
                    if phase_moved {
                        // Abandoned: nothing the walk measured is the buffer's, so nothing is
                        // kept; the phase detector profiles again when a phase settles (`Stable`).
                        log.stopped = Some(
                            "the program's phase changed under the walk (its data references per \
                             instruction left the baseline's by more than phase_threshold)",
                        );
                        unit.best_n = 0;
                        unit.best = log.baseline_ipc;
                        unit.gained = false;
                    }
                }
                log.noise = ratio_f(sd, log.baseline_ipc);
                if blind {
                    self.finish_search(k, u);
                } else if log.stopped.is_some() || unit.mapped >= limit {
                    // Restore the excess pages of the buffer.
                    let best = unit.best_n;
                    let moved_before = unit.move_cost;
                    self.unmap_to(k, u, best);
                    if best > 0 && cfg.confirm {
                        self.units[u].confirm.clear();
                        self.confirm_part(u, 0, moved_before);
                    } else {
                        self.finish_search(k, u);
                    }
                } else {
                    let next = (unit.mapped + unit.step).min(limit);
                    self.units[u].waited = 0;
                    self.buy(k, u, next);
                }
            }
            Stage::Confirm { settle, part } => {
                let unit = &mut self.units[u];
                if settle > 0 {
                    let settle = settle.saturating_sub(interval.elapsed);
                    unit.stage = Stage::Confirm { settle, part };
                    return;
                }
                unit.measure(&interval, cfg.measure_cycles);
                // Each part as long as the baseline, with as many windows.
                let (want, min_windows) = cfg.baseline_span();
                if unit.acc.elapsed < want || unit.window_ipcs.len() < min_windows {
                    return;
                }
                let perf = unit.acc.ipc();
                let windows = unit.window_ipcs.len() as u32;
                unit.acc = Acc::default();
                let sd = unit.pool_noise();
                unit.confirm.push((perf, windows));
                let best = unit.best_n;
                let moved_before = unit.move_cost;
                match part {
                    0 => {
                        self.unmap_to(k, u, 0);
                        self.confirm_part(u, 1, moved_before);
                    }
                    1 => {
                        self.map_to(k, u, best, false);
                        self.confirm_part(u, 2, moved_before);
                    }
                    _ => {
                        // Kept, nothing, kept: the mean of the two kept measurements is the
                        // kept configuration at the baseline's time under a drift linear over
                        // the three (a phase moving under the walk had made its best step
                        // beat a baseline measured 20 M cycles before it).
                        let unit = &mut self.units[u];
                        let (a, na) = unit.confirm[0];
                        let (b, nb) = unit.confirm[1];
                        let (c, nc) = unit.confirm[2];
                        let kept = (a + c) / 2.0;
                        let se = sd
                            * ((1.0 / na as f64 + 1.0 / nc as f64) / 4.0 + 1.0 / nb as f64).sqrt();
                        let confirmed = kept - b > cfg.significance * se;
                        let log = unit.searches.last_mut().expect("a search runs");
                        log.confirmation = Some(Confirmation {
                            kept_ipc: [a, c],
                            baseline_ipc: b,
                            standard_error: se,
                            confirmed,
                        });
                        if !confirmed {
                            self.unmap_to(k, u, 0);
                        }
                        self.finish_search(k, u);
                    }
                }
            }
            Stage::Buying { target } => {
                self.units[u].waited += 1;
                self.buy(k, u, target);
            }
            Stage::Stable { reference, discard } => {
                let unit = &mut self.units[u];
                add(&mut unit.acc, &interval);
                if unit.acc.elapsed < cfg.phase_cycles {
                    return;
                }
                let m = unit.acc.metric(cfg.phase_metric);
                unit.acc = Acc::default();
                if discard {
                    unit.stage = Stage::Stable {
                        reference: None,
                        discard: false,
                    };
                    return;
                }
                match reference {
                    None => {
                        unit.stage = Stage::Stable {
                            reference: Some(m),
                            discard: false,
                        }
                    }
                    Some(r) => {
                        if relative_change(r, m) > cfg.phase_threshold {
                            // A coarse-grain phase change (ROCS 5.1): profile again.
                            unit.phase_changes += 1;
                            self.unmap_to(k, u, 0);
                            self.start_profile(u, false, cfg.profile_cycles);
                        }
                    }
                }
            }
        }
    }

    /// Enter part `part` of the confirmation, which settles once the moves made since the unit's
    /// move cost was `moved_before` are paid: the kernel's copies of the whole kept set stall
    /// the unit for their cost (art's 455 pages: 4 M cycles at IPC 0, which a settle of
    /// `settle_cycles` alone had let into the measure).
    fn confirm_part(&mut self, u: usize, part: u8, moved_before: u64) {
        let unit = &mut self.units[u];
        unit.stage = Stage::Confirm {
            settle: self.cfg.settle_cycles + (unit.move_cost - moved_before),
            part,
        };
    }

    pub(super) fn start_profile(&mut self, u: usize, verify: bool, cycles: u64) {
        let unit = &mut self.units[u];
        unit.profile.clear();
        unit.profiles += 1;
        unit.stage = Stage::Profiling {
            left: cycles,
            verify,
        };
    }

    pub(super) fn profile_rows(&self, u: usize) -> Vec<(usize, u64, u32, u32)> {
        self.units[u]
            .profile
            .iter()
            .map(|(&(pid, vpn), &(n, m))| (pid, vpn, n, m))
            .collect()
    }

    /// The miss-rate stack (ROCS 5.2): the unit's sampled small pages "ordered by miss rate
    /// (highest miss-rate at the top)", the page's own sampled rate as the paper has it. Pages at
    /// the same rate go first to the one whose address space misses more over all its samples:
    /// with about one sample a page, a sensitive program's pages seen once at a miss tie with a
    /// stream's at 1.0, and ordered by pid they had filled a global buffer (a sensitive +
    /// stream pair: 33 of the sensitive program's pages in the chosen step). Then more samples
    /// first, then pid and page. Not a confidence bound on each page's rate: that ranks a
    /// reused array's pages (6-8 samples, miss rate 0.5-0.7) above a stream's pages seen once
    /// or twice (miss rate 1.0), the stream beside a reused array of ROCS 3.2.2, and put the
    /// reused pages in the buffer.
    pub(super) fn build_stack(&mut self, k: &mut dyn Kernel, u: usize) {
        let unit = &mut self.units[u];
        let mut pooled: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for (&(pid, _), &(n, m)) in &unit.profile {
            let e = pooled.entry(pid).or_default();
            e.0 += n as u64;
            e.1 += m as u64;
        }
        let space_rate = |pid: usize| pooled.get(&pid).map_or(0.0, |&(n, m)| ratio(m, n));
        // (page, samples, sampled miss rate)
        let mut rows: Vec<((usize, u64), u32, f64)> = Vec::new();
        for &pid in &unit.pids {
            for p in k.pages(pid) {
                if p.huge {
                    continue;
                }
                if let Some(&(n, m)) = unit.profile.get(&(pid, p.vpn)) {
                    rows.push(((pid, p.vpn), n, ratio(m as u64, n as u64)));
                }
            }
        }
        rows.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then(space_rate(b.0 .0).total_cmp(&space_rate(a.0 .0)))
                .then(b.1.cmp(&a.1))
                .then(a.0.cmp(&b.0))
        });
        unit.stack = rows.into_iter().map(|(key, _, _)| key).collect();
    }

    /// Move `stack[mapped..target]` into the buffer as far as the budget allows; the step
    /// settles and is measured once every page is in, else it waits (`Buying`) for the unit's
    /// cycles to grow.
    pub(super) fn buy(&mut self, k: &mut dyn Kernel, u: usize, target: u64) {
        self.map_to(k, u, target, true);
        let settle = self.cfg.settle_cycles;
        let unit = &mut self.units[u];
        unit.stage = if unit.mapped >= target {
            Stage::Search { settle }
        } else {
            Stage::Buying { target }
        };
    }

    /// Map `stack[mapped..n]` to the buffer. `budgeted`: a search step, which stops before a
    /// page whose move, with every page in the buffer moved back out, would take the unit's
    /// move cost above `max_search_overhead` of its cycles while no step has gained (a
    /// search on a pure stream would cost it 10%). The first move is always made: it measures the
    /// price.
    pub(super) fn map_to(&mut self, k: &mut dyn Kernel, u: usize, n: u64, budgeted: bool) {
        let budget = self.cfg.max_search_overhead;
        let unit = &mut self.units[u];
        while unit.mapped < n {
            let (pid, vpn) = unit.stack[unit.mapped as usize];
            // A page of a process that has exited cannot move and costs nothing.
            let live = unit.pids.contains(&pid);
            if budgeted && !unit.gained && unit.moves > 0 && live {
                let per_move = unit.move_cost as f64 / unit.moves as f64;
                // What the searches have cost the page's process so far, this page in, and
                // every page of it in the buffer back out, against that process's own cycles:
                // the kernel charges a move to the process whose page moves (under
                // `global-pollute` a budget over every member's cycles had let the walk charge
                // one process 4% of its run). The profile's interrupts are not counted: they
                // are what targeting buys (ROCS 5.1), paid before the search can learn anything.
                let m = unit.member.get(&pid).copied().unwrap_or_default();
                let need = m.move_cost as f64 + per_move * (m.in_buffer as f64 + 2.0);
                if need > budget * m.cycles as f64 {
                    break;
                }
            }
            if unit.move_page(k, pid, vpn, &self.pollute) {
                self.to_buffer += 1;
            }
            unit.member.entry(pid).or_default().in_buffer += 1;
            unit.mapped += 1;
        }
    }

    /// Move `stack[n..mapped]` back out of the buffer (never held back by the budget: its cost
    /// was reserved when the pages went in).
    pub(super) fn unmap_to(&mut self, k: &mut dyn Kernel, u: usize, n: u64) {
        let unit = &mut self.units[u];
        for i in n..unit.mapped {
            let (pid, vpn) = unit.stack[i as usize];
            if let Some(m) = unit.member.get_mut(&pid) {
                m.in_buffer = m.in_buffer.saturating_sub(1);
            }
            // Out to the colors the buffer is not on (it is reserved while pages leave it).
            if unit.move_page(k, pid, vpn, &self.normal) {
                self.restored += 1;
            }
        }
        unit.mapped = n;
    }

    pub(super) fn finish_search(&mut self, _k: &mut dyn Kernel, u: usize) {
        let verify = self.cfg.verify_cycles;
        let unit = &mut self.units[u];
        let log = unit.searches.last_mut().expect("a search runs");
        log.chosen = Some(unit.mapped);
        log.pages = Some(unit.stack[..unit.mapped as usize].to_vec());
        log.move_cycles = unit.move_cost;
        log.unit_cycles = unit.cycles;
        unit.acc = Acc::default();
        if verify > 0 {
            self.start_profile(u, true, verify);
        } else {
            unit.stage = Stage::Stable {
                reference: None,
                discard: true,
            };
        }
    }
}

/// `|m - r| / r`: how far a window's metric `m` moved from the reference `r` (infinite from 0).
fn relative_change(r: f64, m: f64) -> f64 {
    if r == 0.0 {
        if m == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (m - r).abs() / r
    }
}

/// Whether a unit's window calls for profiling (ROCS 5.1, Table 2): its LLC miss rate above
/// `target_miss_rate` and its LLC misses per kilo-instruction at least `min_llc_mpki`.
pub(super) fn targeted(w: &Acc, cfg: &PolluteConfig) -> bool {
    let rate = ratio(w.llc_misses(), w.llc_accesses());
    let mpki = 1000.0 * ratio(w.llc_misses(), w.instructions());
    w.llc_accesses() > 0 && rate > cfg.target_miss_rate && mpki >= cfg.min_llc_mpki
}
