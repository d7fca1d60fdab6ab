//! Mean, standard deviation and the 95% confidence interval of a mean (Student t), as the sweeps
//! report them (thesis 4.3.1: 20 trials per point "to reduce each experiment's variance").

/// Two-sided 97.5% quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t_{0.975, df}: the table up to 30, then the Cornish-Fisher expansion around the normal
/// quantile (error below 1e-3 for df > 30).
pub fn t975(df: usize) -> f64 {
    assert!(df >= 1, "t quantile needs at least one degree of freedom");
    if df <= 30 {
        return T975[df - 1];
    }
    let z: f64 = 1.959_964;
    let n = df as f64;
    z + (z.powi(3) + z) / (4.0 * n)
        + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n)
}

/// Summary of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one sample.
    pub sd: f64,
    /// Half-width of the 95% confidence interval of the mean: t_{0.975,n-1} sd / sqrt(n);
    /// NaN for fewer than two samples (no interval can be given).
    pub ci95: f64,
    pub min: f64,
    pub max: f64,
}

pub fn summarize(xs: &[f64]) -> Summary {
    let n = xs.len();
    if n == 0 {
        return Summary {
            n,
            mean: f64::NAN,
            sd: f64::NAN,
            ci95: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let ci95 = if n > 1 {
        t975(n - 1) * sd / (n as f64).sqrt()
    } else {
        f64::NAN
    };
    let min = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    Summary {
        n,
        mean,
        sd,
        ci95,
        min,
        max,
    }
}

/// Median (NaN for no samples).
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_of_known_samples() {
        // 1..=5: mean 3, sd sqrt(2.5), t(4) = 2.776.
        let s = summarize(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.mean, 3.0);
        assert!((s.sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.ci95 - 2.776 * 2.5f64.sqrt() / 5f64.sqrt()).abs() < 1e-9);
        assert!(summarize(&[7.0]).ci95.is_nan());
        assert_eq!(summarize(&[7.0]).sd, 0.0);
    }

    #[test]
    fn t_quantiles_join_the_table_smoothly() {
        assert_eq!(t975(19), 2.093);
        assert!((t975(31) - 2.040).abs() < 2e-3);
        assert!((t975(120) - 1.980).abs() < 2e-3);
        assert!(t975(31) < t975(30));
    }

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
