/*!
Replacement policies: the cache array proposes a full set, the policy only ranks its ways
(zsim's split of mechanism and policy). One file per policy; this module is the registry.

Dispatch is by `match` on an enum, not a trait object: this is the per-access hot path and the
branch is perfectly predictable within a run (DESIGN.md principle 5). To add a policy: write its
file with `on_hit`, `on_fill`, `on_invalidate` and `victim`, add a `ReplacementKind` variant and
one arm in each `match` below; the compiler lists any arm you miss.

Contract: `victim(set)` is asked only when every way of the set holds a valid line (the array
fills invalid ways first, lowest way first), and returns a way in `0..ways`. All randomness
comes from a generator seeded by the config, so results are reproducible.
*/
mod fifo;
mod lru;
mod nru;
mod plru;
mod random;
mod rrip;

use crate::error::ConfigError;

pub use fifo::Fifo;
pub(crate) use lru::move_to_front;
pub use lru::Lru;
pub use nru::Nru;
pub use plru::TreePlru;
pub use random::RandomReplacement;
pub use rrip::{Drrip, Rrip, RripInsertion};

crate::registry! {
    /// The replacement policies a cache level can use (config key `policy`): the registry
    /// (`crate::registry`), one line per policy.
    #[derive(Default)]
    pub enum ReplacementKind (field = "policy", what = "replacement policy", plural = "replacement policies") {
        #[default]
        Lru = "lru",
        TreePlru = "tree-plru" | "plru",
        Random = "random",
        Nru = "nru",
        Srrip = "srrip",
        Brrip = "brrip",
        Drrip = "drrip",
        Fifo = "fifo",
    }
}

/// Replacement state of one cache (all its sets).
#[derive(Debug, Clone)]
pub enum Replacement {
    Lru(Lru),
    TreePlru(TreePlru),
    Random(RandomReplacement),
    Nru(Nru),
    Srrip(Rrip),
    Brrip(Rrip),
    Drrip(Drrip),
    Fifo(Fifo),
}

impl Replacement {
    pub fn new(
        kind: ReplacementKind,
        sets: usize,
        ways: usize,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        Ok(match kind {
            ReplacementKind::Lru => Replacement::Lru(Lru::new(sets, ways)),
            ReplacementKind::TreePlru => Replacement::TreePlru(TreePlru::new(sets, ways)?),
            ReplacementKind::Random => Replacement::Random(RandomReplacement::new(ways, seed)),
            ReplacementKind::Nru => Replacement::Nru(Nru::new(sets, ways)),
            ReplacementKind::Srrip => {
                Replacement::Srrip(Rrip::new(sets, ways, RripInsertion::Static, seed))
            }
            ReplacementKind::Brrip => {
                Replacement::Brrip(Rrip::new(sets, ways, RripInsertion::Bimodal, seed))
            }
            ReplacementKind::Drrip => Replacement::Drrip(Drrip::new(sets, ways, seed)),
            ReplacementKind::Fifo => Replacement::Fifo(Fifo::new(sets, ways)),
        })
    }

    /// A demand hit on `way` of `set`.
    #[inline(always)]
    pub fn on_hit(&mut self, set: usize, way: usize) {
        match self {
            Replacement::Lru(p) => p.on_hit(set, way),
            Replacement::TreePlru(p) => p.on_hit(set, way),
            Replacement::Random(_) => {}
            Replacement::Nru(p) => p.on_hit(set, way),
            Replacement::Srrip(p) | Replacement::Brrip(p) => p.on_hit(set, way),
            Replacement::Drrip(p) => p.on_hit(set, way),
            Replacement::Fifo(_) => {}
        }
    }

    /// A new line was placed in `way` of `set` (after a miss).
    #[inline(always)]
    pub fn on_fill(&mut self, set: usize, way: usize) {
        match self {
            Replacement::Lru(p) => p.on_fill(set, way),
            Replacement::TreePlru(p) => p.on_hit(set, way),
            Replacement::Random(_) => {}
            Replacement::Nru(p) => p.on_hit(set, way),
            Replacement::Srrip(p) | Replacement::Brrip(p) => p.on_fill(set, way),
            Replacement::Drrip(p) => p.on_fill(set, way),
            Replacement::Fifo(p) => p.on_fill(set, way),
        }
    }

    /// The line in `way` of `set` was invalidated (back-invalidation, exclusive move).
    #[inline]
    pub fn on_invalidate(&mut self, set: usize, way: usize) {
        match self {
            Replacement::Lru(p) => p.on_invalidate(set, way),
            Replacement::Fifo(p) => p.on_invalidate(set, way),
            Replacement::Nru(p) => p.on_invalidate(set, way),
            Replacement::Srrip(p) | Replacement::Brrip(p) => p.on_invalidate(set, way),
            Replacement::Drrip(p) => p.on_invalidate(set, way),
            Replacement::TreePlru(_) | Replacement::Random(_) => {}
        }
    }

    /// The way to evict from a full set.
    #[inline]
    pub fn victim(&mut self, set: usize) -> usize {
        match self {
            Replacement::Lru(p) => p.victim(set),
            Replacement::TreePlru(p) => p.victim(set),
            Replacement::Random(p) => p.victim(),
            Replacement::Nru(p) => p.victim(set),
            Replacement::Srrip(p) | Replacement::Brrip(p) => p.victim(set),
            Replacement::Drrip(p) => p.victim(set),
            Replacement::Fifo(p) => p.victim(set),
        }
    }

    /// LRU's recency words, when the policy is LRU of at most 16 ways.
    pub(crate) fn recency_words(&mut self) -> Option<*mut u64> {
        match self {
            Replacement::Lru(p) => p.recency_words(),
            _ => None,
        }
    }

    /// Hint that `set` will be used soon (software prefetch of its state).
    #[inline]
    pub fn prefetch(&self, set: usize) {
        if let Replacement::Lru(p) = self {
            p.prefetch(set)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fill a 1-set cache of `ways` and then run `refs` (way numbers are tags here); return the
    /// sequence of victims chosen. A tiny reference model of the array for policy tests.
    pub(super) fn run_one_set(kind: ReplacementKind, ways: usize, refs: &[u64]) -> Vec<u64> {
        let mut r = Replacement::new(kind, 1, ways, 1).unwrap();
        let mut tags: Vec<Option<u64>> = vec![None; ways];
        let mut evicted = Vec::new();
        for &t in refs {
            if let Some(w) = tags.iter().position(|&x| x == Some(t)) {
                r.on_hit(0, w);
            } else {
                let w = match tags.iter().position(|x| x.is_none()) {
                    Some(w) => w,
                    None => {
                        let v = r.victim(0);
                        evicted.push(tags[v].unwrap());
                        v
                    }
                };
                tags[w] = Some(t);
                r.on_fill(0, w);
            }
        }
        evicted
    }

    #[test]
    fn every_policy_returns_a_valid_way() {
        for kind in [
            ReplacementKind::Lru,
            ReplacementKind::TreePlru,
            ReplacementKind::Random,
            ReplacementKind::Nru,
            ReplacementKind::Srrip,
            ReplacementKind::Brrip,
            ReplacementKind::Drrip,
            ReplacementKind::Fifo,
        ] {
            let refs: Vec<u64> = (0..2000u64).map(|i| (i * 7919) % 37).collect();
            let ev = run_one_set(kind, 8, &refs);
            assert!(!ev.is_empty(), "{kind:?} never evicted");
        }
    }

    #[test]
    fn policy_names_parse() {
        for (s, k) in [
            ("\"lru\"", ReplacementKind::Lru),
            ("\"plru\"", ReplacementKind::TreePlru),
            ("\"drrip\"", ReplacementKind::Drrip),
        ] {
            assert_eq!(serde_json::from_str::<ReplacementKind>(s).unwrap(), k);
        }
        assert!(serde_json::from_str::<ReplacementKind>("\"belady\"").is_err());
    }
}
