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
