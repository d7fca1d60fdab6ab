/*!
Per-level statistics. Demand accesses are split by kind; prefetches, write-backs and
back-invalidations are counted apart from them (DESIGN.md: miss rate = demand misses / demand
accesses). Accesses, hits and misses are each counted where they happen, so
`hits + misses == accesses` is a real check on the hierarchy's bookkeeping, not an identity.

Privileged mode (Nellans et al. sections 3 and 5: "evictions caused by OS execution"): besides
the totals, each level counts the demand accesses and misses made by privileged records and the
evictions caused by a privileged access, i.e. by a fill that a privileged demand access started
(its own fills, and the write-backs, write-back fills, victim fills and prefetch fills down the
chain it set off). Only the privileged side is stored (`ModeCounts`): the common trace has no
privileged record, so its hot paths keep their increments and only test the record's flag on a
branch that is never taken; since every access, miss and eviction has exactly one causing mode,
the user side is the total minus the privileged side (`LevelStats::user`).
*/
use crate::trace::Kind;
use serde::Serialize;

/// Demand accesses of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindCounts {
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
}

impl KindCounts {
    fn add(&mut self, o: &KindCounts) {
        self.accesses += o.accesses;
        self.hits += o.hits;
        self.misses += o.misses;
    }
}

/// What privileged (kernel-mode) references did at one cache: demand accesses and misses made by
/// privileged records, and evictions caused by fills a privileged demand access started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ModeCounts {
    pub accesses: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl ModeCounts {
    fn add(&mut self, o: &ModeCounts) {
        self.accesses += o.accesses;
        self.misses += o.misses;
        self.evictions += o.evictions;
    }
}

/// One mode's share of a level's demand traffic, as reported (`LevelStats::user`,
/// `LevelStats::privileged`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ModeStats {
    /// Demand accesses, hits and misses made by records of this mode.
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    pub miss_rate: f64,
    /// Valid lines evicted by fills that an access of this mode started (Nellans et al.
    /// Figures 1-3's "evictions caused by OS execution" for the privileged side).
    pub evictions: u64,
}

impl ModeStats {
    fn new(accesses: u64, misses: u64, evictions: u64) -> ModeStats {
        ModeStats {
            accesses,
            hits: accesses.saturating_sub(misses),
            misses,
            miss_rate: if accesses == 0 {
                0.0
            } else {
                misses as f64 / accesses as f64
            },
            evictions,
        }
    }
}

/// Counters of one cache instance (the hot path increments these).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub by_kind: [KindCounts; 4],
    pub evictions: u64,
    pub writebacks: u64,
    pub writebacks_received: u64,
    pub writeback_fills: u64,
    pub write_throughs: u64,
    pub prefetches_issued: u64,
    pub prefetches_useful: u64,
    pub prefetch_accesses: u64,
    pub prefetch_misses: u64,
    pub back_invalidations: u64,
    pub victim_fills: u64,
    /// The privileged side (counted only for privileged records; see the module comment).
    pub privileged: ModeCounts,
}

impl Counters {
    #[inline]
    pub fn access(&mut self, kind: Kind, hit: bool) {
        let k = &mut self.by_kind[kind as usize];
        k.accesses += 1;
        if hit {
            k.hits += 1;
        } else {
            k.misses += 1;
        }
    }
}

/// Statistics of one level (summed over its instances: one per core for a private level).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LevelStats {
    pub name: String,
    /// Demand accesses, hits and misses over all kinds.
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    pub miss_rate: f64,
    pub load: KindCounts,
    pub store: KindCounts,
    pub ifetch: KindCounts,
    pub modify: KindCounts,
    /// Valid lines evicted to make room for a fill.
    pub evictions: u64,
    /// Dirty lines this level wrote to the level below (or to memory).
    pub writebacks: u64,
    /// Write-backs that arrived from the level above.
    pub writebacks_received: u64,
    /// Of those, how many were absent and allocated a line here.
    pub writeback_fills: u64,
    /// Stores this (write-through) level passed down.
    pub write_throughs: u64,
    /// Prefetches this level's prefetcher issued for lines it did not hold.
    pub prefetches_issued: u64,
    /// Prefetched lines that later served a demand hit here.
    pub prefetches_useful: u64,
    /// Prefetch lookups arriving from a prefetcher above, and how many missed.
    pub prefetch_accesses: u64,
    pub prefetch_misses: u64,
    /// Lines invalidated in the levels above when this (inclusive) level evicted them.
    pub back_invalidations: u64,
    /// Lines inserted as victims of the level above (exclusive last level).
    pub victim_fills: u64,
    /// The demand accesses, hits and misses above split by the mode of the record that made
    /// them, and `evictions` by the mode of the access that caused them (user = total -
    /// privileged; module comment).
    pub user: ModeStats,
    pub privileged: ModeStats,
}

impl LevelStats {
    pub fn from_counters<'a>(name: &str, counters: impl IntoIterator<Item = &'a Counters>) -> Self {
        let mut s = LevelStats {
            name: name.to_string(),
            ..Default::default()
        };
        let mut privileged = ModeCounts::default();
        for c in counters {
            privileged.add(&c.privileged);
            s.load.add(&c.by_kind[Kind::Load as usize]);
            s.store.add(&c.by_kind[Kind::Store as usize]);
            s.ifetch.add(&c.by_kind[Kind::IFetch as usize]);
            s.modify.add(&c.by_kind[Kind::Modify as usize]);
            s.evictions += c.evictions;
            s.writebacks += c.writebacks;
            s.writebacks_received += c.writebacks_received;
            s.writeback_fills += c.writeback_fills;
            s.write_throughs += c.write_throughs;
            s.prefetches_issued += c.prefetches_issued;
            s.prefetches_useful += c.prefetches_useful;
            s.prefetch_accesses += c.prefetch_accesses;
            s.prefetch_misses += c.prefetch_misses;
            s.back_invalidations += c.back_invalidations;
            s.victim_fills += c.victim_fills;
        }
        for k in [s.load, s.store, s.ifetch, s.modify] {
            s.accesses += k.accesses;
            s.hits += k.hits;
            s.misses += k.misses;
        }
        s.miss_rate = if s.accesses == 0 {
            0.0
        } else {
            s.misses as f64 / s.accesses as f64
        };
        s.privileged = ModeStats::new(privileged.accesses, privileged.misses, privileged.evictions);
        // Saturating: a broken count shows up in `Hierarchy::check_invariants`, not as a panic.
        s.user = ModeStats::new(
            s.accesses.saturating_sub(privileged.accesses),
            s.misses.saturating_sub(privileged.misses),
            s.evictions.saturating_sub(privileged.evictions),
        );
        s
    }

    /// Whether any privileged record reached this level (the reports show the mode split only
    /// then).
    pub fn has_privileged(&self) -> bool {
        self.privileged.accesses > 0 || self.privileged.evictions > 0
    }

    /// The per-kind counts of `kind`.
    pub fn kind(&self, kind: Kind) -> &KindCounts {
        match kind {
            Kind::Load => &self.load,
            Kind::Store => &self.store,
            Kind::IFetch => &self.ifetch,
            Kind::Modify => &self.modify,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_side_is_the_total_minus_the_privileged_side_summed_over_instances() {
        let mut a = Counters::default();
        a.access(Kind::Load, true);
        a.access(Kind::Load, false);
        a.access(Kind::IFetch, false);
        a.evictions = 2;
        a.privileged = ModeCounts {
            accesses: 2,
            misses: 1,
            evictions: 1,
        };
        let mut b = Counters::default();
        b.access(Kind::Store, false);
        b.evictions = 1;
        let s = LevelStats::from_counters("L1", [&a, &b]);
        assert_eq!((s.accesses, s.misses, s.evictions), (4, 3, 3));
        let p = s.privileged;
        assert_eq!((p.accesses, p.hits, p.misses, p.evictions), (2, 1, 1, 1));
        assert_eq!(p.miss_rate, 0.5);
        let u = s.user;
        assert_eq!((u.accesses, u.hits, u.misses, u.evictions), (2, 0, 2, 2));
        assert_eq!(u.miss_rate, 1.0);
        assert!(s.has_privileged());
        let none = LevelStats::from_counters("L1", [&b]);
        assert!(!none.has_privileged());
        assert_eq!(none.privileged.miss_rate, 0.0);
    }
}
