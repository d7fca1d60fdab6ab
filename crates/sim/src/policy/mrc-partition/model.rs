//! The model behind an allocation (section 3.2): the utility-based lookahead division of the
//! colors, the occupancy each process would reach in a shared cache, and the decision whether
//! partitioning pays for its moves. Pure functions of the curves.

use super::{Kernel, MissWindow, MrcPartition};
use crate::pmu::{Event, Reading};
use serde::Serialize;

/// One process's inputs to `MrcPartition::decide`.
#[derive(Debug, Clone)]
pub struct DecisionInput {
    /// The window's miss rate at `0..=units` units.
    pub curve: Vec<f64>,
    /// The curve's accesses (the sampled event's misses) per cycle.
    pub access_rate: f64,
    /// LLC misses per access measured while the cache was shared, if measured.
    pub measured_shared: Option<f64>,
    /// Units the lookahead gives it.
    pub alloc: u64,
    /// Cycles it has run: how long the gain is counted for.
    pub horizon: f64,
    /// Accesses its window counted (past the warm-up): the curve's sample size.
    pub counted: f64,
}

/// Partition or keep the cache shared, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionDecisionOutcome")]
pub struct Decision {
    pub partition: bool,
    /// LLC misses per kilo-cycle, summed over the processes: shared (measured where it was)
    /// and predicted under the partition.
    pub shared_misses_per_kcycle: f64,
    pub partitioned_misses_per_kcycle: f64,
    /// Predicted cycles saved over the horizon (each process's cycles run so far).
    pub cycles_saved: f64,
    /// Two standard errors of `cycles_saved` from the windows' sampling.
    pub noise_cycles: f64,
    /// Page moves plus the windows' interrupts.
    pub cost_cycles: f64,
    pub reason: String,
}

/// One process's prediction behind a `Decision`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "MrcPartitionPrediction")]
pub struct ProcessPrediction {
    pub shared_occupancy_units: f64,
    /// Whether `shared_miss_rate` was measured (else predicted from the curves).
    pub measured: bool,
    pub shared_miss_rate: f64,
    pub partitioned_miss_rate: f64,
    pub horizon_cycles: f64,
}

impl MrcPartition {
    /// Utility-based lookahead allocation (Qureshi and Patt 2006, the paper's [27]) of `total`
    /// colors: `misses[i][c]` are process i's misses with `c` colors. Returns colors per process.
    pub fn lookahead(misses: &[Vec<f64>], total: u64, min: u64) -> Vec<u64> {
        let n = misses.len();
        let mut alloc = vec![min; n];
        let mut balance = total.saturating_sub(min * n as u64);
        while balance > 0 {
            let mut best: Option<(f64, usize, u64)> = None;
            for (i, m) in misses.iter().enumerate() {
                let have = alloc[i] as usize;
                for extra in 1..=balance {
                    let to = (have + extra as usize).min(m.len() - 1);
                    let mu = (m[have] - m[to]) / extra as f64;
                    if best.is_none_or(|(b, _, _)| mu > b + 1e-12) {
                        best = Some((mu, i, extra));
                    }
                }
            }
            let (_, i, extra) = best.expect("n > 0 and balance > 0");
            alloc[i] += extra;
            balance -= extra;
        }
        alloc
    }

    /// Colors (fractional) each process occupies in the *shared* cache, predicted from the
    /// curves by footprint composition (Xiang et al., "HOTL", ASPLOS 2013; the footprint
    /// `F(n)` of `n` accesses grows by the miss rate at `F`, `dF/dn = m(F)`): over a common
    /// window of `t` cycles process `i` makes `rates[i] * t` accesses; the window whose
    /// footprints sum to the cache is the shared cache's steady state (all LRU, fully
    /// associative: the curve's own model). Everything fits: each its whole footprint.
    pub fn shared_occupancy(curves: &[Vec<f64>], rates: &[f64], lines_per_color: f64) -> Vec<f64> {
        // n_i(c): accesses to grow the footprint to c colors (piecewise, mid-segment rate).
        let fill: Vec<Vec<f64>> = curves
            .iter()
            .map(|m| {
                let mut n = vec![0.0; m.len()];
                for c in 1..m.len() {
                    let rate = 0.5 * (m[c - 1] + m[c]);
                    n[c] = if rate <= 1e-9 {
                        f64::INFINITY
                    } else {
                        n[c - 1] + lines_per_color / rate
                    };
                }
                n
            })
            .collect();
        let colors = curves.first().map_or(0, |m| m.len() - 1) as f64;
        let occupancy = |t: f64| -> Vec<f64> {
            fill.iter()
                .zip(rates)
                .map(|(n, &a)| {
                    let acc = a * t;
                    let c = n.iter().rposition(|&x| x <= acc).unwrap_or(0);
                    if c + 1 >= n.len() || !n[c + 1].is_finite() {
                        return c as f64;
                    }
                    c as f64 + (acc - n[c]) / (n[c + 1] - n[c])
                })
                .collect()
        };
        let total = |o: &[f64]| o.iter().sum::<f64>();
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        while total(&occupancy(hi)) < colors && hi < 1e18 {
            hi *= 2.0;
        }
        if total(&occupancy(hi)) < colors {
            return occupancy(hi);
        }
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if total(&occupancy(mid)) < colors {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        occupancy(hi)
    }

    /// Miss rate of `curve` at a fractional number of colors (linear between color counts).
    fn at(curve: &[f64], c: f64) -> f64 {
        let c = c.clamp(0.0, (curve.len() - 1) as f64);
        let i = c.floor() as usize;
        if i + 1 >= curve.len() {
            return curve[i];
        }
        curve[i] + (c - i as f64) * (curve[i + 1] - curve[i])
    }

    /// Partition only where the cycles the partition is predicted to save exceed what it costs. Per
    /// process (`DecisionInput`):
    ///
    /// - *shared*: the LLC misses per access it had while the cache was shared, measured by
    ///   the PMU over its window (`measured_shared`); without a measurement, the curve at the
    ///   occupancy footprint composition predicts (`shared_occupancy`).
    /// - *partitioned*: its window's curve at its allocation. The window counts every line
    ///   it had not yet seen as a miss at every size (its cold floor, docs/azimi.md "Online
    ///   curve error"), so this over-counts the partition's misses: the predicted gain is a
    ///   lower bound, and a window too short to see a program's reuse predicts none. (A shift
    ///   of the curve onto the measurement, RapidMRC's [35] correction, was tried and
    ///   dropped: under sharing the size to shift at is not known, docs/azimi.md.)
    /// - *cycles saved* = (shared - partitioned) x accesses per cycle x `miss_penalty` x
    ///   `horizon`: the cycles it has run so far. The rest of a run is unknown, so the
    ///   partition is bought as in ski rental: only if it pays for itself within as long again
    ///   as the processes have already run (the deterministic break-even rule, within twice
    ///   the cost of the best choice made knowing the future).
    ///
    /// Partition iff the cycles saved, less two standard errors of the curves' sampling
    /// (`sqrt(m (1 - m) / counted)` at each predicted point), exceed `cost` (the page moves and the
    /// windows' interrupts). Returns the decision and each process's prediction.
    pub fn decide(
        inputs: &[DecisionInput],
        lines_per_unit: f64,
        miss_penalty: f64,
        cost: f64,
    ) -> (Decision, Vec<ProcessPrediction>) {
        let rates: Vec<f64> = inputs.iter().map(|i| i.access_rate).collect();
        let curves: Vec<Vec<f64>> = inputs.iter().map(|i| i.curve.clone()).collect();
        let occ = Self::shared_occupancy(&curves, &rates, lines_per_unit);
        let (mut saved, mut var, mut shared_rate, mut part_rate) = (0.0, 0.0, 0.0, 0.0);
        let mut each = Vec::new();
        for (i, &o) in inputs.iter().zip(&occ) {
            let at_occupancy = Self::at(&i.curve, o);
            let shared = i.measured_shared.unwrap_or(at_occupancy).clamp(0.0, 1.0);
            let partitioned = i.curve[(i.alloc as usize).min(i.curve.len() - 1)];
            let per_miss = i.access_rate * miss_penalty * i.horizon;
            saved += (shared - partitioned) * per_miss;
            // The curve's sampling error at the point used (and at the predicted occupancy
            // when the shared rate is predicted, not measured).
            var += per_miss * per_miss * partitioned * (1.0 - partitioned) / i.counted.max(1.0);
            if i.measured_shared.is_none() {
                var += per_miss * per_miss * shared * (1.0 - shared) / i.counted.max(1.0);
            }
            shared_rate += shared * i.access_rate;
            part_rate += partitioned * i.access_rate;
            each.push(ProcessPrediction {
                shared_occupancy_units: o,
                measured: i.measured_shared.is_some(),
                shared_miss_rate: shared,
                partitioned_miss_rate: partitioned,
                horizon_cycles: i.horizon,
            });
        }
        let noise = 2.0 * var.sqrt();
        let partition = saved - noise > cost;
        let reason = if partition {
            format!(
                "predicted to save {saved:.0} cycles (noise {noise:.0}) over the horizon, more than the {cost:.0} it costs"
            )
        } else if saved <= 0.0 {
            format!("the curves predict no fewer misses than sharing ({saved:.0} cycles saved)")
        } else {
            format!(
                "predicted to save {saved:.0} cycles (noise {noise:.0}) over the horizon, not more than the {cost:.0} it costs"
            )
        };
        (
            Decision {
                partition,
                shared_misses_per_kcycle: 1000.0 * shared_rate,
                partitioned_misses_per_kcycle: 1000.0 * part_rate,
                cycles_saved: saved,
                noise_cycles: noise,
                cost_cycles: cost,
                reason,
            },
            each,
        )
    }
}

/// A window's process's memory (`MrcPartition::curve_of`): the lines of its pages at the window's
/// end, and at most how many of its counted accesses were to lines new to the process.
#[derive(Debug, Clone, Copy)]
pub(super) struct Footprint {
    pub(super) lines: u64,
    pub(super) new_line_rate: f64,
}

/// Base pages per huge page (2 MiB of 4 KiB).
const HUGE_PAGES: u64 = 512;

/// The window a process may begin now, in sampled misses (warm-up included), and its warm-up:
/// the budget is a rate over the run so far. The windows it has begun (`paid` interrupt cycles)
/// plus this one cost at most `budget` of the `cycles_run` it has run, so the window is as long
/// as what is left of the budget affords, at most `window` (the configured length, a short
/// period as 3.2.2 has it: "a trace of nearly all L2 cache accesses over a short period of
/// time"); its warm-up is the same share of it as `warmup` is of `window`. `None` while that is
/// fewer than `min_window` misses: the window waits for the run to afford it. A window sized this
/// way is paid when it begins, so whatever the run's length, the windows never cost more than
/// `budget` of it.
pub fn window_afforded(
    paid: u64,
    cycles_run: u64,
    budget: f64,
    sample_cost_cycles: u64,
    (window, warmup, min_window): (u64, u64, u64),
) -> Option<(u64, u64)> {
    let room = budget * cycles_run as f64 - paid as f64;
    if room <= 0.0 {
        return None;
    }
    let size = ((room / sample_cost_cycles.max(1) as f64) as u64).min(window);
    if size < min_window.max(2) {
        return None;
    }
    // The warm-up's share of the configured window, rounded up; at least one line counted.
    let warm = (warmup as u128 * size as u128).div_ceil(window.max(1) as u128) as u64;
    Some((size, warm.clamp(1, size - 1)))
}

impl MrcPartition {
    /// Miss rate at every unit count `0..=units` from a window, its first sightings counted as
    /// what they are (distances beyond the stack's depth then, `censored_miss_rates`), not as
    /// misses at every size. With the process's `footprint`, a size that holds every line of
    /// its pages misses at most its new lines: no reuse distance exceeds the lines the process
    /// has, so from there on the misses are first touches of lines, at most the lines of the pages
    /// it gained during the window per counted access. Between the window's deepest stack and
    /// the footprint the curve stays at its last value (unobserved; over-counted).
    pub(super) fn curve_of(&self, w: &MissWindow, footprint: Option<Footprint>) -> Vec<f64> {
        let mut curve = w.censored_miss_rates(&self.sizes);
        if let Some(f) = footprint {
            for (m, &size) in curve.iter_mut().zip(&self.sizes) {
                if size >= f.lines {
                    *m = m.min(f.new_line_rate);
                }
            }
        }
        curve
    }

    /// Lines of the pages `pid` has (the OS's page tables: what its accesses can reach).
    pub(super) fn resident_lines(&self, k: &dyn Kernel, pid: usize) -> u64 {
        let per_page = self.page_size / (1u64 << self.line_shift);
        k.pages(pid)
            .iter()
            .map(|p| {
                if p.huge {
                    HUGE_PAGES * per_page
                } else {
                    per_page
                }
            })
            .sum()
    }
}

/// Whether each of `events` was on a physical counter at some time since `before` (its
/// cycles counted so far, summed over a process's threads, which this updates). Under a
/// multiplexed PMU an event that was not counted in an interval reads 0 there: no measurement,
/// not zero events. Under the ideal PMU (no readings) every event is always counted.
pub(super) fn counted_since(
    readings: &[Reading],
    events: [Event; 2],
    before: &mut [u64; 2],
) -> [bool; 2] {
    if readings.is_empty() {
        return [true; 2];
    }
    let mut ran = [false; 2];
    for (i, e) in events.iter().enumerate() {
        let now: u64 = readings
            .iter()
            .filter(|r| r.event == *e)
            .map(|r| r.time_running)
            .sum();
        ran[i] = now > before[i];
        before[i] = now;
    }
    ran
}
