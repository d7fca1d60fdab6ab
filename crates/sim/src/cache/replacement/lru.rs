/*!
True LRU, in one of two exact representations chosen by associativity:

- up to 16 ways, a *recency word* per set: a u64 whose 4-bit nibble `i` holds the way at
  recency position `i` (0 = most recent). A use finds the way's nibble with a SWAR zero-nibble
  search and rotates it to the front; the victim is the nibble at position `ways - 1`. Eight
  bytes of state per set instead of a timestamp per way: a 32 MiB 16-way cache keeps its whole
  LRU state (256 KiB) in the host's L2, which is what makes the simulated LLC fast.
- more ways, a u32 timestamp per way from a per-cache clock; the victim has the smallest stamp.
  Before the clock wraps every set's stamps are replaced by their ranks, which keeps the order.

Both give the same victim for the same history (tested against each other below).
*/

const NIBBLE_ONES: u64 = 0x1111_1111_1111_1111;
const NIBBLE_HIGHS: u64 = 0x8888_8888_8888_8888;

#[derive(Debug, Clone)]
pub enum Lru {
    Order {
        ways: u32,
        order: crate::cache::Aligned<u64>,
    },
    Stamps {
        ways: usize,
        stamps: Vec<u32>,
        clock: u32,
    },
}

impl Lru {
    pub fn new(sets: usize, ways: usize) -> Self {
        if ways <= 16 {
            Lru::Order {
                ways: ways as u32,
                order: crate::cache::Aligned::new(initial_order(ways as u32), sets, 0),
            }
        } else {
            Lru::Stamps {
                ways,
                stamps: vec![0; sets * ways],
                clock: 0,
            }
        }
    }

    /// Timestamp representation regardless of associativity (tests compare the two).
    #[cfg(test)]
    fn with_stamps(sets: usize, ways: usize) -> Self {
        Lru::Stamps {
            ways,
            stamps: vec![0; sets * ways],
            clock: 0,
        }
    }

    #[inline(always)]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        match self {
            Lru::Order { order, .. } => {
                let o = &mut order[set];
                *o = move_to_front(*o, way as u64);
            }
            Lru::Stamps {
                ways,
                stamps,
                clock,
            } => {
                if *clock == u32::MAX {
                    renormalise(stamps, *ways, clock);
                }
                *clock += 1;
                stamps[set * *ways + way] = *clock;
            }
        }
    }

    #[inline]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        // The array refills invalid ways before asking for a victim, so the order of an
        // invalid way does not matter; stamps are cleared to keep "never used" recognisable.
        if let Lru::Stamps { ways, stamps, .. } = self {
            stamps[set * *ways + way] = 0;
        }
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        match self {
            Lru::Order { ways, order } => ((order[set] >> (4 * (*ways - 1))) & 0xF) as usize,
            Lru::Stamps { ways, stamps, .. } => {
                let s = &stamps[set * *ways..(set + 1) * *ways];
                let mut best = 0;
                for w in 1..s.len() {
                    if s[w] < s[best] {
                        best = w;
                    }
                }
                best
            }
        }
    }

    /// The recency words (one per set), when this cache uses them.
    pub(crate) fn recency_words(&mut self) -> Option<*mut u64> {
        match self {
            Lru::Order { order, .. } => Some(order.padded_mut_ptr()),
            Lru::Stamps { .. } => None,
        }
    }

    #[inline]
    pub fn prefetch(&self, set: usize) {
        match self {
            Lru::Order { order, .. } => {
                crate::cache::prefetch_read(order.as_ptr().wrapping_add(set))
            }
            Lru::Stamps { ways, stamps, .. } => {
                crate::cache::prefetch_read(stamps.as_ptr().wrapping_add(set * ways))
            }
        }
    }
}

/// Position i holds way i; unused positions (ways < 16) hold 0xF, which no way number equals.
fn initial_order(ways: u32) -> u64 {
    let mut o = u64::MAX;
    for i in 0..ways as u64 {
        o &= !(0xF << (4 * i));
        o |= i << (4 * i);
    }
    o
}

/// Move `way` to recency position 0, shifting the more recent ways down by one position.
#[inline(always)]
pub(crate) fn move_to_front(order: u64, way: u64) -> u64 {
    // Nibbles equal to `way` become zero; the lowest zero nibble is found exactly by the
    // classic has-zero test (borrows only create false positives above a true zero).
    let x = order ^ way.wrapping_mul(NIBBLE_ONES);
    let zeros = x.wrapping_sub(NIBBLE_ONES) & !x & NIBBLE_HIGHS;
    debug_assert!(zeros != 0, "way {way} not in order word {order:#x}");
    // The found nibble's high bit is bit `4 pos + 3`; `upto` covers positions 0..=pos (all of
    // the word when pos = 15: 2 << 63 wraps to 0).
    let upto = (2u64 << zeros.trailing_zeros()).wrapping_sub(1);
    let below = upto >> 4; // positions more recent than `way`
    (order & !upto) | ((order & below) << 4) | way
}

#[cold]
fn renormalise(stamps: &mut [u32], ways: usize, clock: &mut u32) {
    let mut order: Vec<usize> = Vec::with_capacity(ways);
    for set in stamps.chunks_mut(ways) {
        order.clear();
        order.extend(0..ways);
        order.sort_by_key(|&i| set[i]);
        for (rank, &i) in order.iter().enumerate() {
            set[i] = if set[i] == 0 { 0 } else { rank as u32 + 1 };
        }
    }
    *clock = ways as u32 + 1;
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};
    use super::*;
    use crate::rng::SplitMix64;

    #[test]
    fn evicts_least_recently_used() {
        // 4 ways: fill a b c d, touch a, insert e -> b goes; insert f -> c goes.
        let ev = run_one_set(ReplacementKind::Lru, 4, &[1, 2, 3, 4, 1, 5, 6]);
        assert_eq!(ev, vec![2, 3]);
    }

    #[test]
    fn move_to_front_keeps_a_permutation() {
        let mut o = initial_order(16);
        let mut g = SplitMix64::new(5);
        for _ in 0..10_000 {
            o = move_to_front(o, g.below(16));
            let mut seen = 0u32;
            for i in 0..16 {
                seen |= 1 << ((o >> (4 * i)) & 0xF);
            }
            assert_eq!(seen, 0xFFFF);
        }
        let o12 = move_to_front(initial_order(12), 11);
        assert_eq!(o12 & 0xF, 11);
        assert_eq!(o12 >> 48, 0xFFFF, "unused positions stay 0xF");
    }

    #[test]
    fn recency_word_and_timestamps_agree() {
        for ways in [1usize, 2, 3, 8, 12, 16] {
            let mut a = Lru::new(1, ways);
            let mut b = Lru::with_stamps(1, ways);
            let mut g = SplitMix64::new(ways as u64);
            // Touch every way once so both representations start from a full set.
            for w in 0..ways {
                a.on_fill(0, w);
                b.on_fill(0, w);
            }
            for _ in 0..5_000 {
                assert_eq!(a.victim(0), b.victim(0), "{ways} ways");
                let w = g.below(ways as u64) as usize;
                a.on_hit(0, w);
                b.on_hit(0, w);
            }
        }
    }

    #[test]
    fn renormalisation_keeps_the_order() {
        let mut l = Lru::with_stamps(2, 4);
        if let Lru::Stamps { clock, .. } = &mut l {
            *clock = u32::MAX - 3;
        }
        for w in [2, 0, 3, 1] {
            l.on_hit(0, w);
        }
        l.on_hit(1, 1);
        // The clock wrapped during the sequence; the order must still be 2 < 0 < 3 < 1.
        assert_eq!(l.victim(0), 2);
        l.on_hit(0, 2);
        assert_eq!(l.victim(0), 0);
        l.on_hit(0, 0);
        assert_eq!(l.victim(0), 3);
        // Set 1: ways 0, 2, 3 unused (stamp 0), way 1 used.
        assert_eq!(l.victim(1), 0);
    }
}
