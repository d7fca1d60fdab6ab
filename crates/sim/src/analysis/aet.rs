/*!
AET: miss-rate curves from sampled reuse times (Hu, Wang, Zhou, Luo, Ding and Wang, "Kinetic
Modeling of Data Eviction in Cache", USENIX ATC 2016).

The model: let `P(t)` be the fraction of references whose reuse time (references until the same
line is referenced again; infinite for a line's last reference) exceeds `t`. In an LRU cache of
`c` lines a line is evicted `AET(c)` references after its last use, where `AET(c)` solves
`integral_0^AET P(t) dt = c` (the cache fills at rate `P`), and the miss rate is
`mr(c) = P(AET(c))`.

Reuse times are measured by **reference sampling**: each reference is sampled independently with
probability `rate` (gaps drawn from the geometric distribution by a seeded `SplitMix64`, so a
seed fixes the samples); a sampled reference's line is watched until its next reference, whose
distance in time is recorded. Watches still open at the end are infinite reuse times. State:
the open watches (about `rate` x distinct lines, in a `stack::LineTable`) and a log-linear
histogram of reuse times (`histogram.rs`); nothing grows with the trace.

ANCHORS.md: fed by reference sampling at 1% the model's mean absolute error on the zipf + scan
trace was 0.0026; fed by spatially hashed samples (SHARDS-style) it is badly biased, so only
reference sampling is offered.
*/
use super::histogram::LogHistogram;
use super::stack::LineTable;
use crate::error::ConfigError;
use crate::rng::SplitMix64;

/// Check an AET reference sampling rate.
pub fn validate_rate(rate: f64) -> Result<(), ConfigError> {
    if !(rate.is_finite() && rate > 0.0 && rate <= 1.0) {
        return Err(ConfigError::new(
            "rate",
            format!(
                "{rate} is not allowed: the AET reference sampling rate must be in (0, 1] \
                 (e.g. 0.01 samples 1% of the references)"
            ),
        ));
    }
    Ok(())
}

/// AET with reference sampling.
#[derive(Debug, Clone)]
pub struct Aet {
    rate: f64,
    rng: SplitMix64,
    /// `ln(1 - rate)` for geometric gaps (0 when every reference is sampled).
    ln_keep: f64,
    /// Index of the next reference to sample.
    next_sample: u64,
    now: u64,
    /// Open watches: line -> start time (split over the entry's slot and aux words).
    watches: LineTable,
    reuse: LogHistogram,
    samples: u64,
}

impl Aet {
    pub fn new(rate: f64, seed: u64) -> Result<Self, ConfigError> {
        validate_rate(rate)?;
        let mut a = Aet {
            rate,
            rng: SplitMix64::new(seed),
            ln_keep: if rate < 1.0 { (1.0 - rate).ln() } else { 0.0 },
            next_sample: 0,
            now: 0,
            watches: LineTable::new(),
            reuse: LogHistogram::new(),
            samples: 0,
        };
        a.next_sample = a.gap() - 1;
        Ok(a)
    }

    /// References from one sample to the next (at least 1).
    fn gap(&mut self) -> u64 {
        if self.ln_keep == 0.0 {
            return 1;
        }
        // Geometric: 1 + floor(ln(U) / ln(1 - rate)), U uniform in (0, 1].
        let u = 1.0 - self.rng.next_f64();
        1 + (u.ln() / self.ln_keep).floor().min(1e18) as u64
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    pub fn state_bytes(&self) -> usize {
        self.watches.bytes() + self.reuse.bytes()
    }

    /// Feed a block of line numbers.
    pub fn run(&mut self, lines: &[u64]) {
        for &line in lines {
            if self.watches.len() > 0 {
                if let Some(i) = self.watches.find(line) {
                    let e = self.watches.get(i);
                    let start = e.slot as u64 | (e.aux as u64) << 32;
                    self.reuse.add(self.now - start, 1.0);
                    self.watches.remove_at(i, |_, _| {});
                }
            }
            if self.now == self.next_sample {
                self.samples += 1;
                let (i, _) = self.watches.find_or_insert(line);
                let e = self.watches.get_mut(i);
                e.slot = self.now as u32;
                e.aux = (self.now >> 32) as u32;
                self.watches.grow_if_needed(|_, _| {});
                self.next_sample = self.now.saturating_add(self.gap());
            }
            self.now += 1;
        }
    }

    /// Estimated distinct lines: the fraction of samples never reused (each line's last
    /// reference) times the references.
    pub fn distinct_estimate(&self) -> f64 {
        if self.samples == 0 {
            return 0.0;
        }
        self.watches.len() as f64 / self.samples as f64 * self.now as f64
    }

    /// Miss rates at `sizes` (lines) from the AET model.
    pub fn miss_rates(&self, sizes: &[u64]) -> Vec<f64> {
        if self.samples == 0 {
            return vec![1.0; sizes.len()];
        }
        let total = self.samples as f64;
        // P(t) is a step function: 1 below the first reuse time, dropping by w / total at each
        // reuse time, and the fraction of infinite reuse times beyond the last. `steps` holds
        // (time, integral of P from 0 to time, P just before time).
        let mut steps: Vec<(f64, f64, f64)> = Vec::new();
        let (mut t_prev, mut acc, mut p) = (0.0f64, 0.0f64, 1.0f64);
        for (t, w) in self.reuse.points() {
            acc += p * (t - t_prev);
            steps.push((t, acc, p));
            p -= w / total;
            t_prev = t;
        }
        let p_inf = p.max(0.0);
        sizes
            .iter()
            .map(|&c| {
                let c = c as f64;
                // The first step whose integral exceeds c: AET(c) lies before it, where P has
                // that step's value from before. (An integral equal to c puts AET(c) at that
                // step's time, where P has already dropped: P counts reuse times > t.)
                let k = steps.partition_point(|&(_, integral, _)| integral <= c);
                let mr = if k < steps.len() { steps[k].2 } else { p_inf };
                mr.clamp(0.0, 1.0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stack::LruStack;
    use crate::rng::SplitMix64;

    #[test]
    fn sampling_every_reference_of_a_cyclic_scan_gives_its_cliff() {
        // A cyclic scan over 200 lines: every reuse time is 200 (kept exactly: below 256), so
        // P(t) = 1 up to 200; a cache of c < 200 lines fills at rate 1 and misses everything,
        // c >= 200 keeps all but the first pass.
        let lines: Vec<u64> = (0..20_000).map(|i| i % 200).collect();
        let mut a = Aet::new(1.0, 0).unwrap();
        a.run(&lines);
        assert_eq!(a.samples(), 20_000);
        let m = a.miss_rates(&[10, 199, 200, 5000]);
        assert_eq!(m[0], 1.0);
        assert_eq!(m[1], 1.0);
        // The infinite reuse times: 200 / 20000.
        assert!(
            (m[2] - 0.01).abs() < 1e-9 && (m[3] - 0.01).abs() < 1e-9,
            "{m:?}"
        );
        assert!((a.distinct_estimate() - 200.0).abs() < 1e-6);
    }

    #[test]
    fn sampled_aet_is_close_to_exact_on_random_references() {
        let mut g = SplitMix64::new(11);
        let lines: Vec<u64> = (0..400_000).map(|_| g.below(4000)).collect();
        let sizes: Vec<u64> = (1..=40).map(|k| k * 100).collect();
        let mut s = LruStack::new();
        s.run(&lines);
        let exact = s.histogram().miss_rates(&sizes);
        let mut a = Aet::new(0.05, 3).unwrap();
        a.run(&lines);
        let est = a.miss_rates(&sizes);
        let mae: f64 = est
            .iter()
            .zip(&exact)
            .map(|(x, y)| (x - y).abs())
            .sum::<f64>()
            / sizes.len() as f64;
        assert!(mae < 0.02, "mae {mae}");
        let frac = a.samples() as f64 / lines.len() as f64;
        assert!((frac - 0.05).abs() < 0.003, "{frac}");
    }

    #[test]
    fn same_seed_same_samples() {
        let mut g = SplitMix64::new(2);
        let lines: Vec<u64> = (0..50_000).map(|_| g.below(3000)).collect();
        let run = |seed| {
            let mut a = Aet::new(0.1, seed).unwrap();
            a.run(&lines);
            a.miss_rates(&[10, 100, 1000])
        };
        assert_eq!(run(5), run(5));
        assert_ne!(run(5), run(6));
    }
}
