/*!
NRU (not recently used): one reference bit per way, set on every use. The victim is the first
way whose bit is clear; when all are set, all bits are cleared first (the classic one-bit clock
approximation of LRU, as in SPARC and many L2s).
*/

#[derive(Debug, Clone)]
pub struct Nru {
    ways: usize,
    used: Vec<bool>,
}

impl Nru {
    pub fn new(sets: usize, ways: usize) -> Self {
        Nru {
            ways,
            used: vec![false; sets * ways],
        }
    }

    #[inline]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        self.used[set * self.ways + way] = true;
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        self.used[set * self.ways + way] = false;
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        let s = &mut self.used[set * self.ways..(set + 1) * self.ways];
        if let Some(w) = s.iter().position(|&u| !u) {
            return w;
        }
        s.fill(false);
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};

    #[test]
    fn clears_bits_when_all_are_used() {
        // 2 ways: a b fill (both used); c: all used -> clear, evict way 0 (a), c used;
        // d: way 1 (b) is clear -> evict b.
        let ev = run_one_set(ReplacementKind::Nru, 2, &[1, 2, 3, 4]);
        assert_eq!(ev, vec![1, 2]);
    }
}
