/*!
A log-linear histogram of positive values with fixed memory: exact below 256, then 256 buckets
per power of two (relative width at most 1/256, like an HDR histogram with 8 bits of mantissa).
The approximate profilers use it where an exact array would grow with the trace: fixed-size
SHARDS for distances scaled by a changing rate, AET for reuse times. About 15,000 buckets cover
all of `u64`.
*/

const EXACT: u64 = 256;

/// Weighted counts of values in log-linear buckets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogHistogram {
    weights: Vec<f64>,
}

/// The bucket of `x`.
#[inline]
pub fn bucket(x: u64) -> usize {
    if x < EXACT {
        return x as usize;
    }
    let e = 63 - x.leading_zeros() as u64; // >= 8
    let m = (x >> (e - 8)) - EXACT; // 0..256
    (EXACT * (e - 7) + m) as usize
}

/// The smallest value in bucket `b`, and the bucket's width.
#[inline]
pub fn bucket_range(b: usize) -> (u64, u64) {
    let b = b as u64;
    if b < EXACT {
        return (b, 1);
    }
    let e = b / EXACT + 7;
    let m = b % EXACT;
    ((EXACT + m) << (e - 8), 1 << (e - 8))
}

impl LogHistogram {
    pub fn new() -> Self {
        LogHistogram::default()
    }

    #[inline]
    pub fn add(&mut self, x: u64, w: f64) {
        let b = bucket(x);
        if b >= self.weights.len() {
            self.weights.resize(b + 1, 0.0);
        }
        self.weights[b] += w;
    }

    pub fn bytes(&self) -> usize {
        self.weights.len() * 8
    }

    pub fn total(&self) -> f64 {
        self.weights.iter().sum()
    }

    /// `(midpoint, weight)` of every non-empty bucket, in increasing order.
    pub fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.weights
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 0.0)
            .map(|(b, &w)| {
                let (lo, width) = bucket_range(b);
                (lo as f64 + (width - 1) as f64 / 2.0, w)
            })
    }

    /// Weight of values whose bucket midpoint is at most `x`.
    pub fn weight_up_to(&self, x: f64) -> f64 {
        self.points()
            .take_while(|&(mid, _)| mid <= x)
            .map(|(_, w)| w)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once_with_bounded_width() {
        let mut prev = 0usize;
        for x in (0u64..5000).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket(x);
            let (lo, w) = bucket_range(b);
            assert!(lo <= x && x - lo < w, "{x}: bucket {b} = [{lo}, +{w})");
            assert!(w == 1 || (w as f64) / (lo as f64) <= 1.0 / 256.0 + 1e-12);
            if x < 5000 {
                assert!(b >= prev);
                prev = b;
            }
        }
        assert!(bucket(u64::MAX) < 15_000);
    }

    #[test]
    fn weights_accumulate_by_midpoint() {
        let mut h = LogHistogram::new();
        h.add(3, 1.0);
        h.add(3, 2.0);
        h.add(1000, 0.5);
        assert_eq!(h.total(), 3.5);
        assert_eq!(h.weight_up_to(3.0), 3.0);
        assert_eq!(h.weight_up_to(2.9), 0.0);
        assert_eq!(h.weight_up_to(1e6), 3.5);
    }
}
