/*!
Seeded pseudo-random generators. Every random decision in the simulator (random replacement,
BRRIP insertion, synthetic workloads) draws from one of these, so a seed fixes the result
bit for bit (DESIGN.md principle 3).

`SplitMix64` is the generator ANCHORS.md uses for its reference traces: output `i` is the
finaliser applied to `seed + (i + 1) * 0x9E3779B97F4A7C15`, so a test can reproduce those traces
exactly.
*/

pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser (Steele, Lea, Flood 2014): a bijective 64-bit mix.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64: tiny, fast, and exactly reproducible across languages.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix64(self.state)
    }

    /// Uniform in `0..n` (n > 0) by Lemire's multiply-shift; bias is below 2^-32 for the
    /// ranges the simulator uses and the result is deterministic.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_splitmix64() {
        // Reference values of splitmix64 seeded with 0 (Vigna's splitmix64.c).
        let mut g = SplitMix64::new(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range() {
        let mut g = SplitMix64::new(7);
        for n in [1u64, 2, 3, 12, 1000] {
            for _ in 0..1000 {
                assert!(g.below(n) < n);
            }
        }
    }
}
