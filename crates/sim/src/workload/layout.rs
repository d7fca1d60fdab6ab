/*!
Seeded data layouts for the workload patterns: where ranks and list nodes live in the footprint.

- `Scatter`: a keyed bijection of `0..n` for any `n >= 1`, in O(1) memory, used by the
  `harmonic` pattern to scatter its hot ranks over the footprint. It is a 4-round unbalanced
  Feistel network on the smallest power-of-two domain `2^k >= n` (each round XORs one half with a
  `mix64` of the other half and a round key, so every round, and the network, is invertible),
  restricted to `0..n` by cycle walking (re-apply until the value lands below `n`; the domain is
  under `2n`, so under two rounds trips on average). Scattering quality only needs to break up
  contiguity; it is not a cryptographic permutation.
- `cycle_order`: one uniformly random *cyclic* permutation of `0..lines`, stored as the order in
  which following it from line 0 visits the lines: `order[0] = 0`, then a Fisher-Yates shuffle
  of `1..lines`. Each cyclic permutation (the (lines-1)! outcomes of Sattolo's algorithm) is
  exactly one such order, so the distribution is Sattolo's; storing the visit order instead of
  the successor table lets the generator stream it rather than chase it through host memory.
  Following it visits every line exactly once before returning to line 0: the circular pointer
  chain of Cachetest's execution engine (thesis section 4.2.3: "Every access distribution must
  use the first array field as the final memory access, to create a circular access chain";
  uniform random: "each cache line sized block of memory is equally likely to be accessed
  next").

Both draw only from a `SplitMix64` the caller seeds (the workload's layout seed), so a layout is
a pure function of that seed.
*/
use crate::rng::{mix64, SplitMix64};

/// A keyed bijection of `0..n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scatter {
    n: u64,
    lo_bits: u32,
    lo_mask: u64,
    hi_mask: u64,
    keys: [u64; 4],
}

impl Scatter {
    pub(crate) fn new(n: u64, rng: &mut SplitMix64) -> Scatter {
        assert!(n >= 1);
        // Smallest k with 2^k >= n.
        let bits = 64 - (n - 1).leading_zeros();
        let lo_bits = bits / 2;
        let hi_bits = bits - lo_bits;
        let mask = |b: u32| if b == 0 { 0 } else { u64::MAX >> (64 - b) };
        let keys = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        Scatter {
            n,
            lo_bits,
            lo_mask: mask(lo_bits),
            hi_mask: mask(hi_bits),
            keys,
        }
    }

    /// The image of `x` (which must be below `n`).
    #[inline]
    pub(crate) fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.n);
        let mut y = x;
        loop {
            y = self.feistel(y);
            if y < self.n {
                return y;
            }
        }
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mut lo = x & self.lo_mask;
        let mut hi = x >> self.lo_bits;
        hi ^= mix64(lo ^ self.keys[0]) & self.hi_mask;
        lo ^= mix64(hi ^ self.keys[1]) & self.lo_mask;
        hi ^= mix64(lo ^ self.keys[2]) & self.hi_mask;
        lo ^= mix64(hi ^ self.keys[3]) & self.lo_mask;
        (hi << self.lo_bits) | lo
    }
}

/// The visit order of a random cyclic permutation of `0..lines` followed from line 0
/// (`1 <= lines <= 2^32`).
pub(crate) fn cycle_order(lines: u64, rng: &mut SplitMix64) -> Vec<u32> {
    assert!((1..=1 << 32).contains(&lines));
    let mut order: Vec<u32> = (0..lines).map(|i| i as u32).collect();
    // Fisher-Yates over order[1..]: the line after 0, the one after that, ...
    let rest = &mut order[1..];
    for i in (1..rest.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        rest.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 8, 9, 1000, 1024, 4097, 65_536] {
            let s = Scatter::new(n, &mut SplitMix64::new(n));
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.apply(x);
                assert!(y < n, "n {n}: {x} -> {y}");
                assert!(!seen[y as usize], "n {n}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn scatter_breaks_contiguity() {
        // The first 64 ranks should not stay in a few neighbouring slots.
        let n = 1 << 20;
        let s = Scatter::new(n, &mut SplitMix64::new(9));
        let mut pages: Vec<u64> = (0..64).map(|x| s.apply(x) / 512).collect();
        pages.sort_unstable();
        pages.dedup();
        assert!(
            pages.len() > 48,
            "only {} distinct 4 KiB pages",
            pages.len()
        );
    }

    #[test]
    fn cycle_order_is_one_cycle_from_line_zero() {
        for lines in [1u64, 2, 3, 10, 4096] {
            let order = cycle_order(lines, &mut SplitMix64::new(lines + 100));
            assert_eq!(order[0], 0);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert!(
                sorted.iter().enumerate().all(|(i, &l)| i as u32 == l),
                "a permutation"
            );
        }
        // Uniform over the (n-1)! cycles: for n = 4 each of the 6 orders after line 0 appears
        // about equally often (60,000 draws, expected 10,000 each, sd ~91).
        let mut rng = SplitMix64::new(1);
        let mut counts = std::collections::BTreeMap::new();
        for _ in 0..60_000 {
            *counts.entry(cycle_order(4, &mut rng)).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 6);
        assert!(
            counts.values().all(|&c| (c as i64 - 10_000).abs() < 500),
            "{counts:?}"
        );
    }
}
