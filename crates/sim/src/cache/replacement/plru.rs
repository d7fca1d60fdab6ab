/*!
Tree pseudo-LRU: `ways - 1` bits per set form a binary tree; each bit points to the half that
was used less recently. A use flips the bits on the way's path to point away from it; the
victim is found by following the bits from the root. Needs a power-of-two way count up to 64.
*/
use crate::error::ConfigError;

#[derive(Debug, Clone)]
pub struct TreePlru {
    ways: usize,
    levels: u32,
    bits: Vec<u64>,
}

impl TreePlru {
    pub fn new(sets: usize, ways: usize) -> Result<Self, ConfigError> {
        if !ways.is_power_of_two() || ways > 64 {
            return Err(ConfigError::new(
                "ways",
                format!("tree-plru needs a power-of-two associativity up to 64, not {ways}; use lru, nru or an rrip policy"),
            ));
        }
        Ok(TreePlru {
            ways,
            levels: ways.trailing_zeros(),
            bits: vec![0; sets],
        })
    }

    #[inline]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        let mut b = self.bits[set];
        let mut node = 1usize; // heap numbering, root = 1
        for level in (0..self.levels).rev() {
            let right = (way >> level) & 1;
            // Point away from the used half: bit = 1 means "victim is on the left".
            if right == 1 {
                b |= 1 << node;
            } else {
                b &= !(1 << node);
            }
            node = node * 2 + right;
        }
        self.bits[set] = b;
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        let b = self.bits[set];
        let mut node = 1usize;
        let mut way = 0usize;
        for _ in 0..self.levels {
            // bit set: the right half was used last, go left.
            let go_right = (b >> node) & 1 == 0;
            way = way * 2 + go_right as usize;
            node = node * 2 + go_right as usize;
        }
        debug_assert!(way < self.ways);
        way
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};
    use super::*;

    #[test]
    fn textbook_four_way_example() {
        // Fill 0..3 in order; the tree then points at way 0. Touch way 0: the victim becomes way 2
        // (left half used, right subtree points at its left leaf).
        let mut p = TreePlru::new(1, 4).unwrap();
        for w in 0..4 {
            p.on_hit(0, w);
        }
        assert_eq!(p.victim(0), 0);
        p.on_hit(0, 0);
        assert_eq!(p.victim(0), 2);
        p.on_hit(0, 2);
        assert_eq!(p.victim(0), 1);
        let ev = run_one_set(ReplacementKind::TreePlru, 4, &[1, 2, 3, 4, 1, 5]);
        assert_eq!(ev, vec![3]);
    }

    #[test]
    fn rejects_non_power_of_two() {
        assert_eq!(TreePlru::new(1, 12).unwrap_err().field, "ways");
    }
}
