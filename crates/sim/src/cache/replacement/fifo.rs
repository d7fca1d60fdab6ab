/*!
FIFO: the victim is the way filled longest ago; hits do not change the order. Insertion stamps
as in `lru.rs`, renormalised by rank before the clock wraps.
*/

#[derive(Debug, Clone)]
pub struct Fifo {
    ways: usize,
    stamps: Vec<u64>,
    clock: u64,
}

impl Fifo {
    pub fn new(sets: usize, ways: usize) -> Self {
        Fifo {
            ways,
            stamps: vec![0; sets * ways],
            clock: 0,
        }
    }

    #[inline]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        // u64 insertion counter: at one fill per nanosecond it wraps after 584 years.
        self.clock += 1;
        self.stamps[set * self.ways + way] = self.clock;
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        self.stamps[set * self.ways + way] = 0;
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        let s = &self.stamps[set * self.ways..(set + 1) * self.ways];
        let mut best = 0;
        for w in 1..s.len() {
            if s[w] < s[best] {
                best = w;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};

    #[test]
    fn hits_do_not_save_the_oldest_line() {
        // 4 ways: a b c d, touch a (no effect), e evicts a, f evicts b.
        let ev = run_one_set(ReplacementKind::Fifo, 4, &[1, 2, 3, 4, 1, 5, 6]);
        assert_eq!(ev, vec![1, 2]);
    }
}
