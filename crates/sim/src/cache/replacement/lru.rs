/*!
True LRU by timestamps: each way keeps the value of a per-cache clock at its last use; the
victim is the way with the smallest stamp. Stamps are u32 (64 B of state for a 16-way set) and
are renormalised to their rank within each set when the clock would wrap, which preserves the
order exactly, so the policy is true LRU for any trace length.
*/

#[derive(Debug, Clone)]
pub struct Lru {
    ways: usize,
    stamps: Vec<u32>,
    clock: u32,
}

impl Lru {
    pub fn new(sets: usize, ways: usize) -> Self {
        Lru { ways, stamps: vec![0; sets * ways], clock: 0 }
    }

    #[inline]
    fn tick(&mut self) -> u32 {
        if self.clock == u32::MAX {
            self.renormalise();
        }
        self.clock += 1;
        self.clock
    }

    #[cold]
    fn renormalise(&mut self) {
        let w = self.ways;
        let mut order: Vec<usize> = Vec::with_capacity(w);
        for set in self.stamps.chunks_mut(w) {
            order.clear();
            order.extend(0..w);
            order.sort_by_key(|&i| set[i]);
            for (rank, &i) in order.iter().enumerate() {
                // Stamp 0 marks "never used" (invalid ways are filled first anyway).
                set[i] = if set[i] == 0 { 0 } else { rank as u32 + 1 };
            }
        }
        self.clock = w as u32 + 1;
    }

    #[inline]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        let t = self.tick();
        self.stamps[set * self.ways + way] = t;
    }

    #[inline]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way)
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        self.stamps[set * self.ways + way] = 0;
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        let s = &self.stamps[set * self.ways..(set + 1) * self.ways];
        let mut best = 0;
        let mut best_stamp = s[0];
        for (w, &st) in s.iter().enumerate().skip(1) {
            if st < best_stamp {
                best = w;
                best_stamp = st;
            }
        }
        best
    }

    #[inline]
    pub fn prefetch(&self, set: usize) {
        crate::cache::prefetch_read(self.stamps.as_ptr().wrapping_add(set * self.ways));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        // 4 ways: fill a b c d, touch a, insert e -> b goes; insert f -> c goes.
        let ev = run_one_set(ReplacementKind::Lru, 4, &[1, 2, 3, 4, 1, 5, 6]);
        assert_eq!(ev, vec![2, 3]);
    }

    #[test]
    fn renormalisation_keeps_the_order() {
        let mut l = Lru::new(2, 4);
        l.clock = u32::MAX - 3;
        for w in [2, 0, 3, 1] {
            l.on_hit(0, w);
        }
        l.on_hit(1, 1);
        // Clock wrapped during the sequence; the order must still be 2 < 0 < 3 < 1.
        assert_eq!(l.victim(0), 2);
        l.on_hit(0, 2);
        assert_eq!(l.victim(0), 0);
        l.on_hit(0, 0);
        assert_eq!(l.victim(0), 3);
        // Set 1: ways 0, 2, 3 unused (stamp 0), way 1 used.
        assert_eq!(l.victim(1), 0);
    }
}
