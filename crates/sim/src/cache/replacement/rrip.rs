/*!
Re-reference interval prediction (Jaleel, Theobald, Steely, Emer, ISCA 2010) with 2-bit RRPVs
(M = 2, distant = 3).

- SRRIP (hit priority): insert with RRPV 2 ("long"), a hit sets 0; the victim is the first way
  with RRPV 3, ageing every way by one until one exists.
- BRRIP: as SRRIP but inserts with RRPV 3 ("distant") except with probability 1/32, which
  resists thrashing.
- DRRIP: set dueling. 32 leader sets use SRRIP and 32 use BRRIP (fewer in small caches: one of
  each per 64 sets or so); a 10-bit saturating PSEL counts misses in the leaders (an SRRIP
  leader's miss increments, a BRRIP leader's decrements) and the follower sets use BRRIP when
  PSEL's top bit is set, SRRIP otherwise.
*/
use crate::rng::SplitMix64;

const DISTANT: u8 = 3;
const LONG: u8 = 2;
/// BRRIP inserts "long" once in 32 fills (epsilon of the paper).
const BIMODAL_EPSILON: u64 = 32;
const PSEL_MAX: u32 = (1 << 10) - 1;
const LEADERS_PER_POLICY: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RripInsertion {
    Static,
    Bimodal,
}

#[derive(Debug, Clone)]
pub struct Rrip {
    ways: usize,
    rrpv: Vec<u8>,
    insertion: RripInsertion,
    rng: SplitMix64,
}

impl Rrip {
    pub fn new(sets: usize, ways: usize, insertion: RripInsertion, seed: u64) -> Self {
        Rrip {
            ways,
            rrpv: vec![DISTANT; sets * ways],
            insertion,
            rng: SplitMix64::new(seed),
        }
    }

    #[inline]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        self.rrpv[set * self.ways + way] = 0;
    }

    #[inline]
    fn insert(&mut self, set: usize, way: usize, insertion: RripInsertion) {
        let v = match insertion {
            RripInsertion::Static => LONG,
            RripInsertion::Bimodal => {
                if self.rng.below(BIMODAL_EPSILON) == 0 {
                    LONG
                } else {
                    DISTANT
                }
            }
        };
        self.rrpv[set * self.ways + way] = v;
    }

    #[inline]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        self.insert(set, way, self.insertion)
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        self.rrpv[set * self.ways + way] = DISTANT;
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        let s = &mut self.rrpv[set * self.ways..(set + 1) * self.ways];
        loop {
            if let Some(w) = s.iter().position(|&v| v >= DISTANT) {
                return w;
            }
            for v in s.iter_mut() {
                *v += 1;
            }
        }
    }
}

/// Which policy a DRRIP set follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    SrripLeader,
    BrripLeader,
    Follower,
}

#[derive(Debug, Clone)]
pub struct Drrip {
    inner: Rrip,
    sets: usize,
    stride: usize,
    psel: u32,
}

impl Drrip {
    pub fn new(sets: usize, ways: usize, seed: u64) -> Self {
        // Spread the leaders evenly: set s leads SRRIP when s % stride == 0 and BRRIP when
        // s % stride == stride / 2 (for one- or two-set caches the leaders cover every set).
        let stride = (sets / LEADERS_PER_POLICY).max(2);
        Drrip {
            inner: Rrip::new(sets, ways, RripInsertion::Static, seed),
            sets,
            stride,
            psel: PSEL_MAX / 2,
        }
    }

    fn role(&self, set: usize) -> Role {
        let r = set % self.stride;
        if r == 0 {
            Role::SrripLeader
        } else if r == self.stride / 2 {
            Role::BrripLeader
        } else {
            Role::Follower
        }
    }

    #[inline]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        self.inner.on_hit(set, way)
    }

    /// A fill follows a miss in this set: leaders train PSEL, then insert by the set's policy.
    #[inline]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        debug_assert!(set < self.sets);
        let insertion = match self.role(set) {
            Role::SrripLeader => {
                self.psel = (self.psel + 1).min(PSEL_MAX);
                RripInsertion::Static
            }
            Role::BrripLeader => {
                self.psel = self.psel.saturating_sub(1);
                RripInsertion::Bimodal
            }
            Role::Follower => self.follower_insertion(),
        };
        self.inner.insert(set, way, insertion)
    }

    /// SRRIP missing more than BRRIP pushes PSEL up, and followers then use BRRIP.
    pub fn follower_insertion(&self) -> RripInsertion {
        if self.psel > PSEL_MAX / 2 {
            RripInsertion::Bimodal
        } else {
            RripInsertion::Static
        }
    }

    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        self.inner.on_invalidate(set, way)
    }

    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        self.inner.victim(set)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tests::run_one_set, ReplacementKind};
    use super::*;

    #[test]
    fn srrip_scan_resistance_example() {
        // A re-referenced line (RRPV 0) outlives two scan lines inserted at RRPV 2 (ISCA 2010,
        // section 3): 2 ways: a, a (hit: 0), b (2); c: age to (1, 3), b evicted; d: age to
        // (2, 3), c evicted; e: age to (3, 3), now a is distant too and goes first.
        let ev = run_one_set(ReplacementKind::Srrip, 2, &[1, 1, 2, 3, 4, 5]);
        assert_eq!(ev, vec![2, 3, 1]);
    }

    #[test]
    fn brrip_mostly_inserts_distant() {
        let mut r = Rrip::new(1, 1, RripInsertion::Bimodal, 9);
        let mut long = 0;
        for _ in 0..32_000 {
            r.on_fill(0, 0);
            if r.rrpv[0] == LONG {
                long += 1;
            }
        }
        // Expect 1000 of 32000; binomial sd ~31.
        assert!((850..1150).contains(&long), "{long}");
    }

    #[test]
    fn drrip_followers_switch_to_brrip_when_srrip_leaders_miss_more() {
        let mut d = Drrip::new(128, 4, 1);
        assert_eq!(d.follower_insertion(), RripInsertion::Static);
        for _ in 0..600 {
            d.on_fill(0, 0); // set 0 is an SRRIP leader
        }
        assert_eq!(d.follower_insertion(), RripInsertion::Bimodal);
        for _ in 0..1200 {
            d.on_fill(d.stride / 2, 0); // a BRRIP leader
        }
        assert_eq!(d.follower_insertion(), RripInsertion::Static);
    }
}
