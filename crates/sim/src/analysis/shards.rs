/*!
SHARDS: approximate miss-rate curves from spatially hashed samples (Waldspurger, Park,
Garthwaite and Ahmad, "Efficient MRC Construction with SHARDS", FAST 2015).

A line is in the sample when `hash(line) < T`; the sampling rate is `R = T / 2^64`. Every
reference to a sampled line goes through an exact LRU stack of the sampled lines only
(`stack::LruStack`); a distance `d` among them estimates a distance of `d / R` in the full
trace (paper section 3). Two variants:

- **Fixed rate**: `T` constant. Distances are kept exactly (a count per sampled distance) and
  a cache of `C` lines hits the sampled references with `d <= C R`.
- **Fixed size** (`SHARDS_max`, section 4.3): at most `s_max` sampled lines are tracked; when a
  new one would exceed that, the tracked line with the largest hash is evicted from the stack
  and `T` drops to its hash, so `R` only decreases. A reference sampled at rate `R` is counted
  with weight `1 / R` at scaled distance `d / R` (in a log-linear histogram, `histogram.rs`);
  that is the paper's rescaling of earlier counts by `R_new / R_old`, applied once at the end
  instead of at every eviction. Memory is O(`s_max`) whatever the trace.

**SHARDS_adj** (section 4.2): the number of sampled references deviates from its expectation
`N R` (a hot line in or out of the sample moves the whole curve). The difference
`N R - sampled` is added to the first (smallest-distance) bucket and the curve is normalised by
`N R`. In weighted form (fixed size as well): the weights should sum to `N`; `N - sum` is added as
hits at the smallest distance and the curve is divided by `N`.

**Hash and salt**: `hash(line) = mix64(line ^ key)` with `key = mix64(salt + constant)`, a full
64-bit value, so samples under different salts are unrelated. (XOR-ing a small salt into the
line number before a hash only permutes lines within small aligned groups: every salt then samples
the same number of lines from each group, and the curves of different salts err together.)
Several salts give several independent curves; their spread is the confidence band.

Below about `50 / R` lines the estimate rests on a handful of sampled distances (a single hot
line in or out of the sample moves it by up to 0.2; ANCHORS.md): `reliable_from` reports that
size, and callers flag smaller sizes as unreliable.
*/
use std::collections::BinaryHeap;

use super::histogram::LogHistogram;
use super::stack::LruStack;
use crate::error::ConfigError;
use crate::rng::{mix64, GOLDEN_GAMMA};

/// Sizes below `RELIABLE_SAMPLES / R` lines are flagged unreliable.
pub const RELIABLE_SAMPLES: f64 = 50.0;

const TWO_64: f64 = 18_446_744_073_709_551_616.0;

/// The 64-bit key a salt selects (see the module comment).
#[inline]
pub fn salt_key(salt: u64) -> u64 {
    mix64(
        salt.wrapping_add(GOLDEN_GAMMA)
            .wrapping_mul(0xD6E8_FEB8_6659_FD93),
    )
}

/// The sampling hash of `line` under `key`.
#[inline(always)]
pub fn sample_hash(line: u64, key: u64) -> u64 {
    mix64(line ^ key)
}

/// Which SHARDS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShardsMode {
    /// Sample at `rate` in (0, 1].
    FixedRate(f64),
    /// Track at most `max_lines` sampled lines, starting at rate 1.
    FixedSize(u64),
}

impl ShardsMode {
    pub fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            ShardsMode::FixedRate(r) => {
                if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                    return Err(ConfigError::new(
                        "rate",
                        format!(
                            "{r} is not allowed: the SHARDS sampling rate must be in (0, 1] \
                             (e.g. 0.01 samples 1% of the lines)"
                        ),
                    ));
                }
            }
            ShardsMode::FixedSize(n) => {
                if n == 0 || n > u32::MAX as u64 {
                    return Err(ConfigError::new(
                        "max_lines",
                        format!(
                            "{n} is not allowed: fixed-size SHARDS tracks 1 to 2^32 - 1 sampled lines \
                             (e.g. 8192)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One SHARDS run with one salt.
#[derive(Debug, Clone)]
pub struct Shards {
    mode: ShardsMode,
    key: u64,
    /// Sample when `hash < threshold`, or every line when `all`.
    threshold: u64,
    all: bool,
    stack: LruStack,
    references: u64,
    sampled: u64,
    // Fixed rate: counts per sampled distance (index d) and first references.
    counts: Vec<u64>,
    cold: u64,
    // Fixed size: tracked lines by hash, and weights at scaled distances.
    heap: BinaryHeap<(u64, u64)>,
    weighted: LogHistogram,
    weighted_cold: f64,
}

impl Shards {
    pub fn new(mode: ShardsMode, salt: u64) -> Result<Self, ConfigError> {
        mode.validate()?;
        let (threshold, all) = match mode {
            ShardsMode::FixedRate(r) if r >= 1.0 => (u64::MAX, true),
            ShardsMode::FixedRate(r) => (((r * TWO_64) as u64).max(1), false),
            ShardsMode::FixedSize(_) => (u64::MAX, true),
        };
        Ok(Shards {
            mode,
            key: salt_key(salt),
            threshold,
            all,
            stack: LruStack::new(),
            references: 0,
            sampled: 0,
            counts: vec![0],
            cold: 0,
            heap: BinaryHeap::new(),
            weighted: LogHistogram::new(),
            weighted_cold: 0.0,
        })
    }

    /// The sampling rate: the fixed rate as given, or a fixed-size run's current rate.
    pub fn rate(&self) -> f64 {
        match self.mode {
            ShardsMode::FixedRate(r) => r,
            ShardsMode::FixedSize(_) if self.all => 1.0,
            ShardsMode::FixedSize(_) => self.threshold as f64 / TWO_64,
        }
    }

    pub fn references(&self) -> u64 {
        self.references
    }

    /// References that were sampled.
    pub fn sampled(&self) -> u64 {
        self.sampled
    }

    /// Estimated distinct lines: sampled lines / R.
    pub fn distinct_estimate(&self) -> f64 {
        self.stack.distinct() as f64 / self.rate()
    }

    /// Cache size (lines) from which the curve is considered reliable: `50 / R`, or 1 when
    /// every line is sampled (the curve is then exact).
    pub fn reliable_from(&self) -> u64 {
        if self.rate() >= 1.0 {
            return 1;
        }
        (RELIABLE_SAMPLES / self.rate()).ceil() as u64
    }

    /// Bytes of state (the sampled stack, the heap and histograms).
    pub fn state_bytes(&self) -> usize {
        self.stack.state_bytes()
            + self.counts.len() * 8
            + self.heap.capacity() * 16
            + self.weighted.bytes()
    }

    /// Feed a block of line numbers.
    pub fn run(&mut self, lines: &[u64]) {
        self.run_mapped(lines, |l| l);
    }

    /// Feed a block of byte addresses of 1-byte references, as lines of `1 << shift` bytes
    /// (no intermediate array of line numbers: the filter is most of SHARDS' time).
    pub fn run_addresses(&mut self, addrs: &[u64], shift: u32) {
        self.run_mapped(addrs, |a| a >> shift);
    }

    #[inline(always)]
    fn run_mapped(&mut self, xs: &[u64], line_of: impl Fn(u64) -> u64) {
        self.references += xs.len() as u64;
        match self.mode {
            ShardsMode::FixedRate(_) if self.all => {
                for &x in xs {
                    self.sample_fixed_rate(line_of(x));
                }
            }
            ShardsMode::FixedRate(_) => {
                // Test 64 references at a time into a bit mask (a branch-free loop the compiler
                // vectorises), then visit the few sampled ones.
                let (key, t) = (self.key, self.threshold);
                for chunk in xs.chunks(64) {
                    let mut mask = 0u64;
                    for (i, &x) in chunk.iter().enumerate() {
                        mask |= ((sample_hash(line_of(x), key) < t) as u64) << i;
                    }
                    while mask != 0 {
                        let i = mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        self.sample_fixed_rate(line_of(chunk[i]));
                    }
                }
            }
            ShardsMode::FixedSize(max) => {
                // As for a fixed rate, with the threshold at the start of each chunk: it only
                // falls, so the mask holds every reference still sampled, and each is checked
                // again against the threshold of its own time.
                let key = self.key;
                for chunk in xs.chunks(64) {
                    let mut mask = u64::MAX;
                    if !self.all {
                        let t = self.threshold;
                        mask = 0;
                        for (i, &x) in chunk.iter().enumerate() {
                            mask |= ((sample_hash(line_of(x), key) < t) as u64) << i;
                        }
                    }
                    while mask != 0 {
                        let i = mask.trailing_zeros() as usize;
                        mask &= mask - 1;
                        if i >= chunk.len() {
                            break;
                        }
                        let line = line_of(chunk[i]);
                        let h = sample_hash(line, key);
                        if self.all || h < self.threshold {
                            self.sample_fixed_size(line, h, max as usize);
                        }
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn sample_fixed_rate(&mut self, line: u64) {
        self.sampled += 1;
        match self.stack.access(line) {
            Some(d) => self.counts[d as usize] += 1,
            None => {
                self.cold += 1;
                self.counts.push(0);
            }
        }
    }

    fn sample_fixed_size(&mut self, line: u64, h: u64, max: usize) {
        self.sampled += 1;
        let r = self.rate();
        match self.stack.access(line) {
            Some(d) => {
                let scaled = (d as f64 / r).round() as u64;
                self.weighted.add(scaled, 1.0 / r);
            }
            None => {
                self.weighted_cold += 1.0 / r;
                self.heap.push((h, line));
                if self.heap.len() > max {
                    let (hmax, evicted) = self.heap.pop().expect("heap is not empty");
                    self.stack.remove(evicted);
                    self.threshold = hmax;
                    self.all = false;
                }
            }
        }
    }

    /// Miss rates at `sizes` (lines); `adjust` applies SHARDS_adj. Values are clamped to [0, 1].
    pub fn miss_rates(&self, sizes: &[u64], adjust: bool) -> Vec<f64> {
        let n = self.references as f64;
        if self.references == 0 {
            return vec![0.0; sizes.len()];
        }
        match self.mode {
            ShardsMode::FixedRate(_) => {
                let r = self.rate();
                // hits[k] = sampled references at distance <= k.
                let mut hits = Vec::with_capacity(self.counts.len());
                let mut acc = 0u64;
                for &c in &self.counts {
                    acc += c;
                    hits.push(acc);
                }
                let expected = n * r;
                let sampled = self.sampled as f64;
                let adj = expected - sampled;
                sizes
                    .iter()
                    .map(|&c| {
                        // d / R <= c  <=>  d <= c R (a hair of slack for rounding in c R).
                        let k = ((c as f64 * r) * (1.0 + 1e-12)).floor() as usize;
                        let h = hits[k.min(hits.len() - 1)] as f64;
                        let mr = if adjust {
                            let h = if k >= 1 { h + adj } else { h };
                            1.0 - h / expected
                        } else if sampled == 0.0 {
                            1.0
                        } else {
                            1.0 - h / sampled
                        };
                        mr.clamp(0.0, 1.0)
                    })
                    .collect()
            }
            ShardsMode::FixedSize(_) => {
                let total = self.weighted.total() + self.weighted_cold;
                let adj = n - total;
                let smallest = 1.0 / self.rate();
                // (bucket midpoint, weight of every bucket up to it), increasing.
                let mut cumulative: Vec<(f64, f64)> = Vec::new();
                let mut acc = 0.0;
                for (mid, w) in self.weighted.points() {
                    acc += w;
                    cumulative.push((mid, acc));
                }
                sizes
                    .iter()
                    .map(|&c| {
                        let c = c as f64;
                        let k = cumulative.partition_point(|&(mid, _)| mid <= c);
                        let h = if k == 0 { 0.0 } else { cumulative[k - 1].1 };
                        let mr = if adjust {
                            let h = if c >= smallest { h + adj } else { h };
                            1.0 - h / n
                        } else if total == 0.0 {
                            1.0
                        } else {
                            1.0 - h / total
                        };
                        mr.clamp(0.0, 1.0)
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stack::LruStack;
    use crate::rng::SplitMix64;

    fn exact_rates(lines: &[u64], sizes: &[u64]) -> Vec<f64> {
        let mut s = LruStack::new();
        s.run(lines);
        s.histogram().miss_rates(sizes)
    }

    #[test]
    fn rate_one_is_exact() {
        let mut g = SplitMix64::new(4);
        let t: Vec<u64> = (0..20_000).map(|_| g.below(700)).collect();
        let sizes: Vec<u64> = (0..800).collect();
        let mut s = Shards::new(ShardsMode::FixedRate(1.0), 0).unwrap();
        s.run(&t);
        let want = exact_rates(&t, &sizes);
        for adjust in [false, true] {
            let got = s.miss_rates(&sizes, adjust);
            for (c, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() < 1e-12,
                    "size {c}, adjust {adjust}: {a} vs {b}"
                );
            }
        }
        // Fixed size that never fills is exact too (up to the histogram's bucket width,
        // which is 1 below 256 lines).
        let mut f = Shards::new(ShardsMode::FixedSize(10_000), 0).unwrap();
        f.run(&t);
        let got = f.miss_rates(&sizes[..256], true);
        for (a, b) in got.iter().zip(&want[..256]) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
    }

    #[test]
    fn sampled_fraction_matches_the_rate() {
        let lines: Vec<u64> = (0..200_000).collect();
        for salt in 0..3 {
            let mut s = Shards::new(ShardsMode::FixedRate(0.05), salt).unwrap();
            s.run(&lines);
            let f = s.sampled() as f64 / lines.len() as f64;
            assert!((f - 0.05).abs() < 0.003, "salt {salt}: {f}");
        }
    }

    /// Correlation across aligned groups of 8 consecutive lines between the per-group sample
    /// counts of two hashes.
    fn group_correlation(h0: impl Fn(u64) -> bool, h1: impl Fn(u64) -> bool) -> f64 {
        let groups = 1u64 << 16;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for g in 0..groups {
            a.push((0..8).filter(|i| h0(g * 8 + i)).count() as f64);
            b.push((0..8).filter(|i| h1(g * 8 + i)).count() as f64);
        }
        let n = groups as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
        let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
        cov / (va * vb).sqrt()
    }

    #[test]
    fn salts_sample_unrelated_lines() {
        let t = (0.125 * TWO_64) as u64;
        // Small salts XOR-ed into the line before hashing: each salt samples exactly as many
        // lines of every aligned group of 8 (correlation 1), the pitfall the full key avoids.
        let naive = group_correlation(|l| mix64(l) < t, |l| mix64(l ^ 1) < t);
        assert!(naive > 0.999, "{naive}");
        let (k0, k1) = (salt_key(0), salt_key(1));
        let ours = group_correlation(|l| sample_hash(l, k0) < t, |l| sample_hash(l, k1) < t);
        assert!(ours.abs() < 0.02, "{ours}");
    }

    #[test]
    fn fixed_size_keeps_at_most_its_lines_and_lowers_the_rate() {
        let lines: Vec<u64> = (0..100_000).map(|i| i % 50_000).collect();
        let mut s = Shards::new(ShardsMode::FixedSize(1000), 7).unwrap();
        s.run(&lines);
        assert_eq!(s.heap.len(), 1000);
        assert_eq!(s.stack.distinct(), 1000);
        let r = s.rate();
        assert!((r - 1000.0 / 50_000.0).abs() < 0.004, "{r}");
        // A cyclic scan of 50,000 lines: every reuse is at distance 50,000 (estimated from the
        // 1,000 tracked lines: within a few percent).
        let m = s.miss_rates(&[10_000, 40_000, 60_000], false);
        assert!(m[0] > 0.999 && m[1] > 0.999, "{m:?}");
        assert!((m[2] - 0.5).abs() < 0.05, "{m:?}"); // the first pass misses at any size
                                                     // SHARDS_adj moves the whole curve by the sampling error of the reference count, a few
                                                     // percent with 1,000 tracked lines.
        let a = s.miss_rates(&[10_000, 40_000, 60_000], true);
        for (x, y) in a.iter().zip(&m) {
            assert!((x - y).abs() < 0.1, "{a:?} vs {m:?}");
        }
    }

    #[test]
    fn bad_rates_and_sizes_are_named() {
        for r in [0.0, -0.1, 1.5, f64::NAN] {
            let e = Shards::new(ShardsMode::FixedRate(r), 0).unwrap_err();
            assert_eq!(e.field, "rate");
            assert!(e.message.contains("(0, 1]"), "{}", e.message);
        }
        assert_eq!(
            Shards::new(ShardsMode::FixedSize(0), 0).unwrap_err().field,
            "max_lines"
        );
    }
}
