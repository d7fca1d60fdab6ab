/*!
Exact Zipf sampling in O(1) memory: rank `k` in `1..=n` with probability `k^-alpha / H(n, alpha)`,
where `H(n, alpha) = sum_{r=1..n} r^-alpha` (for `alpha = 1` the harmonic numbers, thesis section
4.2.3's "harmonic series"). Used by the `zipf` and `harmonic` workload patterns.

Algorithm: rejection-inversion, W. Hörmann and G. Derflinger, "Rejection-inversion to generate
variates from monotone discrete distributions", ACM TOMACS 6(3), 1996, in the form that works
for every `alpha > 0` (hat integral `H(x) = (x^(1-alpha) - 1) / (1 - alpha)`, continuous at
`alpha = 1`), as Apache Commons RNG implements it. The acceptance rate is high for every `alpha`
(rank 1 is always accepted) and the cheap test `k - x <= s` accepts most other draws without a
second logarithm, so a draw costs about one `ln` and one `exp`; draws that land on the first
ranks (up to 1024) are resolved from small tables with no transcendental function at all
(`Head`), which gives the same ranks.

Why not `rand_distr::Zipf`: it is a different method (Crease's continuous-envelope rejection)
whose float maths goes through `num-traits`, which uses `libm` in a plain build but `std` once a
dev-dependency (proptest) turns on `num-traits/std`, so test and release builds could draw
different streams; and the whole sampler is this one small file. Our uniforms come from
`crate::rng::SplitMix64::next_f64`, so the stream is fixed by the workload seed alone.

Contract: `Zipf::new(n, alpha)` needs `n >= 1` and a finite `alpha > 0` (the caller validates and
reports a `ConfigError`); `sample` returns a rank in `1..=n` and consumes at least one `next_f64`
per call (more on rejection), deterministically.
*/
use crate::rng::SplitMix64;

/// A Zipf(n, alpha) rank sampler over `1..=n`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Zipf {
    n: u64,
    alpha: f64,
    /// `H(1.5) - 1`: the lower end of the hat integral's range.
    h_integral_x1: f64,
    /// `H(n + 0.5)`: the upper end.
    h_integral_n: f64,
    /// Squeeze constant: `2 - H^-1(H(2.5) - h(2))`.
    s: f64,
    /// `1 - alpha` and its inverse (unused at alpha = 1).
    one_minus_alpha: f64,
    inv_one_minus_alpha: f64,
    head: Head,
}

/// At most this many leading ranks are resolved from tables instead of `ln`/`exp` (`Head`).
const HEAD_RANKS: usize = 1024;
/// At most this many guide cells (4 bytes each).
const MAX_CELLS: usize = 8192;

/// Table form of rejection-inversion for the first `K` ranks (`K <= min(n, HEAD_RANKS)`).
///
/// A draw `u` picks rank `k` when `bound[k-1] < u <= bound[k]`, where `bound[k] = H(k + 0.5)`
/// and `bound[0] = H(1.5) - 1` (exactly what rounding `H^-1(u)` gives), and is accepted when
/// `u >= accept[k] = H(k + 0.5) - h(k)` (always for k = 1): the algorithm's exact acceptance
/// test, of which the `k - x <= s` squeeze is only a shortcut. So for `u <= bound[K]` the same
/// ranks come out with no transcendental function.
///
/// Finding `k`: equal cells of `u` at most half as wide as the narrowest head interval, so a
/// cell holds at most one boundary; `guide[c]` is 1 + the number of boundaries in cells before
/// `c`, computed with the very cell function the lookup uses (monotone, so rounding cannot
/// misplace a draw), and one branch-free comparison finishes. `K` is the largest count for
/// which that needs at most `MAX_CELLS` cells; tables take at most 48 KiB. Over 2^23 ranks the head
/// is K = 792 / 587 / 320 ranks carrying 25% / 42% / 75% of the draws at alpha 0.9 / 1 / 1.2;
/// below 1024 ranks and moderate alpha it carries all of them.
#[derive(Debug, Clone, PartialEq)]
struct Head {
    /// `bound[K]`: draws at or below it use the tables.
    end: f64,
    /// `bound[0]` and the inverse of the cell width.
    start: f64,
    inv_width: f64,
    k_max: usize,
    bound: Vec<f64>,
    accept: Vec<f64>,
    guide: Vec<u32>,
}

impl Head {
    fn empty() -> Head {
        Head {
            end: f64::NEG_INFINITY,
            start: 0.0,
            inv_width: 0.0,
            k_max: 0,
            bound: Vec::new(),
            accept: Vec::new(),
            guide: Vec::new(),
        }
    }

    fn new(z: &Zipf) -> Head {
        let cap = (z.n as usize).min(HEAD_RANKS);
        let mut bound = Vec::with_capacity(cap + 1);
        let mut accept = Vec::with_capacity(cap + 1);
        bound.push(z.h_integral_x1);
        accept.push(f64::NEG_INFINITY);
        for k in 1..=cap {
            let b = z.h_integral(k as f64 + 0.5);
            bound.push(b);
            accept.push(if k == 1 {
                f64::NEG_INFINITY
            } else {
                b - z.h(k as f64)
            });
        }
        // Interval widths shrink with k, so the last one is the narrowest.
        let cells_for =
            |k: usize| ((bound[k] - bound[0]) / (0.5 * (bound[k] - bound[k - 1]))).ceil();
        let mut k_max = cap;
        while k_max > 1 && cells_for(k_max) > MAX_CELLS as f64 {
            k_max -= 1;
        }
        let cells = cells_for(k_max) as usize;
        bound.truncate(k_max + 1);
        accept.truncate(k_max + 1);
        let (start, end) = (bound[0], bound[k_max]);
        let inv_width = cells as f64 / (end - start);
        let mut head = Head {
            end,
            start,
            inv_width,
            k_max,
            bound,
            accept,
            guide: Vec::new(),
        };
        let mut k = 1;
        head.guide = (0..=cells)
            .map(|c| {
                while k <= k_max && head.cell(head.bound[k]) < c {
                    k += 1;
                }
                k.min(k_max) as u32
            })
            .collect();
        debug_assert!((2..=k_max).all(|k| head.cell(head.bound[k]) > head.cell(head.bound[k - 1])));
        head
    }

    #[inline]
    fn cell(&self, u: f64) -> usize {
        ((u - self.start) * self.inv_width) as usize
    }

    /// The rank whose interval holds `u` (`start < u <= end`).
    #[inline]
    fn rank(&self, u: f64) -> usize {
        let c = self.cell(u).min(self.guide.len() - 1);
        let k = self.guide[c] as usize;
        (k + (u > self.bound[k]) as usize).min(self.k_max)
    }
}

impl Zipf {
    pub(crate) fn new(n: u64, alpha: f64) -> Zipf {
        assert!(n >= 1, "zipf needs at least one element");
        assert!(
            alpha > 0.0 && alpha.is_finite(),
            "zipf needs a finite alpha > 0"
        );
        let one_minus_alpha = 1.0 - alpha;
        let mut z = Zipf {
            n,
            alpha,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
            one_minus_alpha,
            inv_one_minus_alpha: if alpha == 1.0 {
                0.0
            } else {
                1.0 / one_minus_alpha
            },
            head: Head::empty(),
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z.head = Head::new(&z);
        z
    }

    /// A rank in `1..=n`.
    #[inline]
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            // u is uniform in (h_integral_x1, h_integral_n].
            let u = self.h_integral_n + rng.next_f64() * (self.h_integral_x1 - self.h_integral_n);
            if u <= self.head.end {
                let k = self.head.rank(u);
                if u >= self.head.accept[k] {
                    return k as u64;
                }
                continue;
            }
            let x = self.h_integral_inverse(u);
            // `as` saturates; clamp absorbs rounding at both ends of the range.
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            // For k = 1 the second test always holds (u > H(1.5) - h(1)), so rank 1 is never
            // rejected; for k >= 2 the first test is a cheap squeeze for most draws.
            if k as f64 - x <= self.s || u >= self.h_integral(k as f64 + 0.5) - self.h(k as f64) {
                return k;
            }
        }
    }

    /// The unnormalised probability `h(x) = x^-alpha`.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.alpha * x.ln()).exp()
    }

    /// `H(x) = (x^(1-alpha) - 1) / (1 - alpha)`, or `ln x` at `alpha = 1`.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.alpha) * log_x) * log_x
    }

    /// Inverse of `H`: `(1 + (1 - alpha) x)^(1 / (1 - alpha))`, or `e^x` at `alpha = 1`.
    #[inline]
    fn h_integral_inverse(&self, x: f64) -> f64 {
        // t < -1 can only come from rounding; clamp to the function's domain.
        let t = (x * self.one_minus_alpha).max(-1.0);
        if t.abs() > 1e-3 {
            // Same value as below, but `ln` is about twice as fast as `ln_1p` here; away from
            // t = 0 it loses no accuracy that matters (relative error of ln(1 + t) < 2e-13).
            ((1.0 + t).ln() * self.inv_one_minus_alpha).exp()
        } else {
            (helper1(t) * x).exp()
        }
    }
}

/// `ln(1 + x) / x`, continuous at 0.
#[inline]
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, continuous at 0.
#[inline]
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// Exact probabilities of ranks `1..=n` (tests only: O(n) time and memory).
#[cfg(test)]
pub(crate) fn probabilities(n: u64, alpha: f64) -> Vec<f64> {
    let w: Vec<f64> = (1..=n).map(|r| (r as f64).powf(-alpha)).collect();
    // Sum smallest first for accuracy.
    let total: f64 = w.iter().rev().sum();
    w.into_iter().map(|x| x / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Draw `draws` ranks and return the counts of ranks 1..=n.
    fn histogram(n: u64, alpha: f64, draws: u64, seed: u64) -> Vec<u64> {
        let z = Zipf::new(n, alpha);
        let mut rng = SplitMix64::new(seed);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            counts[(k - 1) as usize] += 1;
        }
        counts
    }

    /// Pearson chi-square of the counts against the exact probabilities. With n - 1 degrees of
    /// freedom the statistic has mean n - 1 and standard deviation sqrt(2 (n - 1)); we accept
    /// anything below mean + 6 sd, which a correct sampler exceeds with probability far below
    /// 1e-6 (the seed is fixed, so the test is not flaky either way), while a sampler that
    /// mis-weights a band of ranks by a few percent over these draw counts lands far above.
    fn chi_square_ok(n: u64, alpha: f64, draws: u64, seed: u64) {
        let counts = histogram(n, alpha, draws, seed);
        let p = probabilities(n, alpha);
        let chi2: f64 = counts
            .iter()
            .zip(&p)
            .map(|(&c, &p)| {
                let e = p * draws as f64;
                (c as f64 - e).powi(2) / e
            })
            .sum();
        let df = (n - 1) as f64;
        let limit = df + 6.0 * (2.0 * df).sqrt();
        assert!(
            chi2 < limit,
            "alpha {alpha}: chi-square {chi2:.1} over limit {limit:.1} (df {df})"
        );
        // The head, rank by rank, within 5 standard errors of the exact probability: this
        // catches a small bias on the hottest ranks that the summed statistic would dilute.
        for (r, (&c, &p)) in counts.iter().zip(&p).take(10).enumerate() {
            let e = p * draws as f64;
            let sd = (draws as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (c as f64 - e).abs() < 5.0 * sd,
                "alpha {alpha}: rank {} seen {c} times, expected {e:.0} +- {sd:.0}",
                r + 1
            );
        }
    }

    #[test]
    fn rank_frequencies_match_theory() {
        // alpha below, at (the harmonic special case of the helpers) and above 1.
        chi_square_ok(1000, 0.9, 2_000_000, 11);
        chi_square_ok(1000, 1.0, 2_000_000, 12);
        chi_square_ok(500, 1.5, 2_000_000, 13);
        chi_square_ok(64, 0.2, 1_000_000, 14);
    }

    #[test]
    fn head_frequencies_on_a_large_domain() {
        // 2^23 slots (64 MiB of 8-byte elements): only the head can be checked cheaply.
        let n = 1u64 << 23;
        let alpha = 0.9;
        let p = probabilities(n, alpha);
        let z = Zipf::new(n, alpha);
        let mut rng = SplitMix64::new(5);
        let draws = 1_000_000u64;
        let mut head = [0u64; 4];
        let mut max = 0;
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            max = max.max(k);
            if k <= 4 {
                head[(k - 1) as usize] += 1;
            }
        }
        assert!(max <= n);
        for (r, &c) in head.iter().enumerate() {
            let e = p[r] * draws as f64;
            let sd = (draws as f64 * p[r] * (1.0 - p[r])).sqrt();
            assert!(
                (c as f64 - e).abs() < 5.0 * sd,
                "rank {}: {c} vs {e:.0} +- {sd:.0}",
                r + 1
            );
        }
    }

    /// The head tables give the rank and the verdict the formulas give, over a fine grid of
    /// draws (except that a draw exactly on an interval boundary may round either way).
    #[test]
    fn head_tables_agree_with_the_formulas() {
        for (n, alpha) in [
            (1u64, 0.9),
            (2, 0.5),
            (10, 1.0),
            (1000, 0.9),
            (1 << 23, 0.9),
            (1 << 20, 1.2),
            (1 << 16, 3.0),
        ] {
            let z = Zipf::new(n, alpha);
            let steps = 200_000;
            for i in 1..=steps {
                let u = z.head.start + (z.head.end - z.head.start) * (i as f64 / steps as f64);
                if u > z.head.end {
                    continue; // rounding past the end; `sample` only looks up u <= end
                }
                let k = z.head.rank(u);
                let x = z.h_integral_inverse(u);
                let k_formula = ((x + 0.5) as u64).clamp(1, n) as usize;
                if k != k_formula {
                    // Only a draw on an interval boundary may round either way.
                    let b = z.head.bound[k.min(k_formula)];
                    assert!(
                        (u - b).abs() <= 1e-12 * b.abs().max(1.0),
                        "n {n} alpha {alpha} u {u}: {k} vs {k_formula}"
                    );
                    continue;
                }
                let ok_formula = k == 1 || u >= z.h_integral(k as f64 + 0.5) - z.h(k as f64);
                assert_eq!(
                    u >= z.head.accept[k],
                    ok_formula,
                    "n {n} alpha {alpha} u {u}"
                );
            }
        }
    }

    #[test]
    fn single_element_and_determinism() {
        let z = Zipf::new(1, 0.9);
        let mut rng = SplitMix64::new(1);
        assert!((0..100).all(|_| z.sample(&mut rng) == 1));
        let z = Zipf::new(1 << 20, 1.2);
        let a: Vec<u64> = {
            let mut r = SplitMix64::new(3);
            (0..1000).map(|_| z.sample(&mut r)).collect()
        };
        let b: Vec<u64> = {
            let mut r = SplitMix64::new(3);
            (0..1000).map(|_| z.sample(&mut r)).collect()
        };
        assert_eq!(a, b);
    }
}
