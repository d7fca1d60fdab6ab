/*!
Expected page-bin conflicts under uniformly random frame allocation (thesis section 3.2).

A cache of `B` page-sized bins (colors), each holding `A` pages (its associativity). An OS that
places each of `N` pages in a uniformly random bin puts `n` of them in a given bin with the
binomial probability (eq. 3.1)

```text
P(n) = C(N, n) p^n (1 - p)^(N - n),   p = 1 / B,
```

and the expected number of pages beyond the bins' capacity is (eq. 3.2)

```text
K_avg = B * sum_{u = A+1}^{N} (u - A) P(u),
```

against `K_min = max(0, N - B A)` for a perfect spread. Besides the thesis's two figures this
module gives the exact standard deviation of the realised `K` (bin counts are multinomial, so the
covariance of two bins' overflows is included), so a simulation's placement can be checked
against the model with a stated tolerance.

Why `K` predicts misses: under uniform random references to the `N` pages, a set in a bin with
`u > A` pages misses with probability `(u - A) / u` under LRU (each of its `u` lines is equally
likely, `A` are resident), and a reference falls in that bin with probability `u / N`, so the
steady-state miss ratio is `sum_b (u_b - A)^+ / N = K / N`.
*/

/// The model's figures for `pages` pages in `bins` bins of `ways` pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinConflicts {
    /// Eq. 3.2.
    pub k_avg: f64,
    /// Perfect placement.
    pub k_min: f64,
    /// Standard deviation of the realised K.
    pub k_sd: f64,
}

fn ln_factorials(n: u64) -> Vec<f64> {
    let mut v = vec![0.0; n as usize + 1];
    for i in 1..=n as usize {
        v[i] = v[i - 1] + (i as f64).ln();
    }
    v
}

/// Expected conflicts of `pages` pages over `bins` bins of capacity `ways` (eq. 3.1-3.2).
pub fn expected_conflicts(pages: u64, bins: u64, ways: u64) -> BinConflicts {
    assert!(bins >= 1 && ways >= 1);
    let k_min = pages.saturating_sub(bins * ways) as f64;
    if bins == 1 {
        return BinConflicts {
            k_avg: k_min,
            k_min,
            k_sd: 0.0,
        };
    }
    let p = 1.0 / bins as f64;
    let lf = ln_factorials(pages);
    let n = pages as usize;
    let a = ways as usize;
    // E[Y] and E[Y^2] of one bin's overflow Y = (X - A)^+, X ~ Binomial(N, p) (eq. 3.1).
    let (mut m1, mut m2) = (0.0, 0.0);
    for u in a + 1..=n {
        let ln = lf[n] - lf[u] - lf[n - u] + u as f64 * p.ln() + (n - u) as f64 * (1.0 - p).ln();
        let over = (u - a) as f64;
        m1 += over * ln.exp();
        m2 += over * over * ln.exp();
    }
    // E[Y1 Y2] of two bins: (X1, X2, rest) is multinomial(N; p, p, 1 - 2p).
    let mut m12 = 0.0;
    {
        let rest = (1.0 - 2.0 * p).max(0.0);
        for i in a + 1..=n {
            for j in a + 1..=n - i {
                let k = n - i - j;
                if rest == 0.0 && k > 0 {
                    continue;
                }
                let ln = lf[n] - lf[i] - lf[j] - lf[k]
                    + (i + j) as f64 * p.ln()
                    + if k > 0 { k as f64 * rest.ln() } else { 0.0 };
                m12 += ((i - a) * (j - a)) as f64 * ln.exp();
            }
        }
    }
    let b = bins as f64;
    let var = b * (m2 - m1 * m1) + b * (b - 1.0) * (m12 - m1 * m1);
    BinConflicts {
        k_avg: b * m1,
        k_min,
        k_sd: var.max(0.0).sqrt(),
    }
}

/// Eq. 3.2 with the exact hypergeometric in place of eq. 3.1's binomial: the `pages` frames are
/// drawn without replacement from a RAM of `frames_per_bin` free frames in each of `bins` bins
/// (the random allocator of a machine whose free frames are spread evenly over the colors), so
/// `P(n) = C(F, n) C((B - 1) F, N - n) / C(B F, N)`. As `F` grows this tends to the binomial;
/// with few frames per bin it is the smaller (a drawn frame makes its bin less likely).
/// Returns `K_avg`. Panics if `pages > bins * frames_per_bin`.
pub fn expected_conflicts_hypergeometric(
    pages: u64,
    bins: u64,
    ways: u64,
    frames_per_bin: u64,
) -> f64 {
    assert!(bins >= 1 && ways >= 1);
    assert!(bins.checked_mul(frames_per_bin).is_some_and(|t| pages <= t));
    if bins == 1 {
        return pages.saturating_sub(ways) as f64;
    }
    let total = bins * frames_per_bin;
    let lf = ln_factorials(total);
    let ln_choose = |n: u64, k: u64| lf[n as usize] - lf[k as usize] - lf[(n - k) as usize];
    let others = total - frames_per_bin;
    let denominator = ln_choose(total, pages);
    let top = pages.min(frames_per_bin);
    let mut m1 = 0.0;
    for u in ways + 1..=top {
        if pages - u > others {
            continue;
        }
        let ln = ln_choose(frames_per_bin, u) + ln_choose(others, pages - u) - denominator;
        m1 += (u - ways) as f64 * ln.exp();
    }
    bins as f64 * m1
}

/// The realised K of a placement: pages beyond `ways` in each bin, summed.
pub fn realised_conflicts(pages_per_bin: &[u64], ways: u64) -> u64 {
    pages_per_bin.iter().map(|&n| n.saturating_sub(ways)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn matches_a_monte_carlo_of_random_placement() {
        for (pages, bins, ways) in [
            (256u64, 16u64, 16u64),
            (64, 8, 8),
            (100, 8, 8),
            (512, 64, 8),
        ] {
            let m = expected_conflicts(pages, bins, ways);
            let mut g = SplitMix64::new(pages ^ bins);
            let trials = 20_000;
            let ks: Vec<f64> = (0..trials)
                .map(|_| {
                    let mut h = vec![0u64; bins as usize];
                    for _ in 0..pages {
                        h[g.below(bins) as usize] += 1;
                    }
                    realised_conflicts(&h, ways) as f64
                })
                .collect();
            let mean = ks.iter().sum::<f64>() / trials as f64;
            let sd = (ks.iter().map(|k| (k - mean).powi(2)).sum::<f64>() / trials as f64).sqrt();
            // Both figures are exact; the Monte Carlo's are within its sampling error.
            assert!(
                (mean - m.k_avg).abs() < 4.0 * sd / (trials as f64).sqrt() + 1e-9,
                "{pages}/{bins}/{ways}: {mean} vs {}",
                m.k_avg
            );
            assert!(
                (m.k_sd - sd).abs() < 0.05 * sd,
                "{pages}/{bins}/{ways}: sd {} vs {sd}",
                m.k_sd
            );
        }
    }

    #[test]
    fn hypergeometric_matches_drawing_frames_without_replacement() {
        for (pages, bins, ways, per_bin) in [
            (64u64, 8u64, 8u64, 12u64),
            (128, 16, 4, 16),
            (100, 8, 8, 200),
        ] {
            let exact = expected_conflicts_hypergeometric(pages, bins, ways, per_bin);
            let mut g = SplitMix64::new(pages + per_bin);
            let trials = 20_000;
            let mut frames: Vec<u64> = (0..bins * per_bin).collect();
            let mut sum = 0.0;
            let mut sq = 0.0;
            for _ in 0..trials {
                // A partial Fisher-Yates shuffle draws `pages` distinct frames.
                let mut h = vec![0u64; bins as usize];
                for i in 0..pages as usize {
                    let j = i + g.below(frames.len() as u64 - i as u64) as usize;
                    frames.swap(i, j);
                    h[(frames[i] % bins) as usize] += 1;
                }
                let k = realised_conflicts(&h, ways) as f64;
                sum += k;
                sq += k * k;
            }
            let mean = sum / trials as f64;
            let sd = (sq / trials as f64 - mean * mean).sqrt();
            assert!(
                (mean - exact).abs() < 4.0 * sd / (trials as f64).sqrt() + 1e-9,
                "{pages}/{bins}/{ways}/{per_bin}: {mean} vs {exact}"
            );
            // Fewer conflicts than the binomial (with replacement) predicts.
            assert!(exact < expected_conflicts(pages, bins, ways).k_avg);
        }
        // Many frames per bin: the binomial.
        let (h, b) = (
            expected_conflicts_hypergeometric(64, 8, 8, 100_000),
            expected_conflicts(64, 8, 8).k_avg,
        );
        assert!((h - b).abs() < 1e-3 * b, "{h} vs {b}");
        assert_eq!(expected_conflicts_hypergeometric(10, 1, 4, 10), 6.0);
        // Every frame taken: each bin holds exactly `per_bin` pages.
        assert!((expected_conflicts_hypergeometric(96, 8, 8, 12) - 32.0).abs() < 1e-9);
    }

    #[test]
    fn the_thesis_example_and_edge_cases() {
        // Figure 3.2's cache: 8 bins of 8 pages. At 64 pages a perfect spread has no conflict
        // but random placement expects some; far beyond the cache both approach N - 64.
        let at = expected_conflicts(64, 8, 8);
        assert_eq!(at.k_min, 0.0);
        assert!(at.k_avg > 5.0 && at.k_avg < 12.0, "{}", at.k_avg);
        let far = expected_conflicts(4096, 8, 8);
        assert!((far.k_avg - far.k_min) / far.k_min < 0.01);
        assert_eq!(expected_conflicts(10, 1, 4).k_avg, 6.0);
        assert_eq!(realised_conflicts(&[3, 9, 8, 12], 8), 5);
    }
}
