/*!
Random replacement from a seeded splitmix64 stream: uniform over all ways (pycachesim's RR
masks with `ways - 1`, which for 12 ways only ever picks 8 of them; this does not).
*/
use crate::rng::SplitMix64;

#[derive(Debug, Clone)]
pub struct RandomReplacement {
    ways: u64,
    rng: SplitMix64,
}

impl RandomReplacement {
    pub fn new(ways: usize, seed: u64) -> Self {
        RandomReplacement {
            ways: ways as u64,
            rng: SplitMix64::new(seed),
        }
    }

    #[inline]
    pub fn victim(&mut self) -> usize {
        self.rng.below(self.ways) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reaches_every_way_of_a_12_way_set() {
        let mut r = RandomReplacement::new(12, 3);
        let mut seen = [0u32; 12];
        for _ in 0..12_000 {
            seen[r.victim()] += 1;
        }
        // Each way expects 1000; 6 sigma of a binomial(12000, 1/12) is about 180.
        assert!(seen.iter().all(|&n| (820..=1180).contains(&n)), "{seen:?}");
    }
}
