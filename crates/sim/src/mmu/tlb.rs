//! A set-associative TLB with true LRU replacement. Entries are tagged with the address space
//! (so a context switch needs no flush) and the page size: a 4 KiB entry translates one virtual
//! page, a 2 MiB entry 512. Shootdowns invalidate one page of one address space, or all of an
//! address space's entries.
use crate::error::ConfigError;
use crate::memory::Pfn;
use serde::{Deserialize, Serialize};

/// One TLB's shape (`[[tlbs]]`-style config entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    pub entries: u32,
    pub ways: u32,
}

/// A translation held by a TLB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    /// Frame of the first 4 KiB page the entry covers.
    pub pfn: Pfn,
    pub huge: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    asid: u32,
    /// Virtual page number of the entry's page size (vpn, or vpn >> 9 for 2 MiB).
    page: u64,
    huge: bool,
    pfn: Pfn,
    last_use: u64,
}

#[derive(Debug, Clone)]
pub struct Tlb {
    sets: u64,
    ways: usize,
    slots: Vec<Option<Entry>>,
    clock: u64,
    pub hits: u64,
    pub misses: u64,
}

const HUGE_SHIFT: u32 = 9;

impl Tlb {
    pub fn new(config: &TlbConfig) -> Result<Self, ConfigError> {
        let (entries, ways) = (config.entries, config.ways);
        if ways == 0 || entries == 0 || entries % ways != 0 {
            return Err(ConfigError::new(
                "tlb",
                format!(
                    "{entries} entries in {ways} ways: entries must be a positive multiple of ways"
                ),
            ));
        }
        Ok(Tlb {
            sets: (entries / ways) as u64,
            ways: ways as usize,
            slots: vec![None; entries as usize],
            clock: 0,
            hits: 0,
            misses: 0,
        })
    }

    fn set_range(&self, page: u64) -> std::ops::Range<usize> {
        let s = (page % self.sets) as usize * self.ways;
        s..s + self.ways
    }

    /// Translate 4 KiB page `vpn` of `asid`: a 4 KiB entry for it, or a 2 MiB entry covering it.
    /// Counts a hit or a miss.
    pub fn lookup(&mut self, asid: u32, vpn: u64) -> Option<Translation> {
        self.clock += 1;
        for (page, huge) in [(vpn, false), (vpn >> HUGE_SHIFT, true)] {
            let range = self.set_range(page);
            let clock = self.clock;
            if let Some(e) = self.slots[range]
                .iter_mut()
                .flatten()
                .find(|e| e.asid == asid && e.page == page && e.huge == huge)
            {
                e.last_use = clock;
                self.hits += 1;
                let pfn = if huge {
                    e.pfn + (vpn & ((1 << HUGE_SHIFT) - 1))
                } else {
                    e.pfn
                };
                return Some(Translation { pfn, huge });
            }
        }
        self.misses += 1;
        None
    }

    /// Insert a translation after a walk (the least recently used entry of the set goes).
    pub fn insert(&mut self, asid: u32, vpn: u64, t: Translation) {
        self.clock += 1;
        let page = if t.huge { vpn >> HUGE_SHIFT } else { vpn };
        let pfn = if t.huge {
            t.pfn - (vpn & ((1 << HUGE_SHIFT) - 1))
        } else {
            t.pfn
        };
        let range = self.set_range(page);
        let set = &mut self.slots[range];
        let victim = set
            .iter()
            .position(|s| {
                s.is_none()
                    || s.is_some_and(|e| e.asid == asid && e.page == page && e.huge == t.huge)
            })
            .unwrap_or_else(|| {
                (0..set.len())
                    .min_by_key(|&i| set[i].map_or(0, |e| e.last_use))
                    .expect("ways > 0")
            });
        set[victim] = Some(Entry {
            asid,
            page,
            huge: t.huge,
            pfn,
            last_use: self.clock,
        });
    }

    /// Shootdown of one 4 KiB page (and a 2 MiB entry covering it). Returns entries removed.
    pub fn invalidate(&mut self, asid: u32, vpn: u64) -> usize {
        let mut n = 0;
        for (page, huge) in [(vpn, false), (vpn >> HUGE_SHIFT, true)] {
            let range = self.set_range(page);
            for s in &mut self.slots[range] {
                if s.is_some_and(|e| e.asid == asid && e.page == page && e.huge == huge) {
                    *s = None;
                    n += 1;
                }
            }
        }
        n
    }

    /// Drop every entry of `asid` (process exit, full flush). Returns entries removed.
    pub fn flush_asid(&mut self, asid: u32) -> usize {
        let mut n = 0;
        for s in &mut self.slots {
            if s.is_some_and(|e| e.asid == asid) {
                *s = None;
                n += 1;
            }
        }
        n
    }

    pub fn occupancy(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A naive LRU TLB: per set, a list ordered most recent first.
    struct Naive {
        sets: u64,
        ways: usize,
        lists: Vec<Vec<(u32, u64)>>,
    }

    impl Naive {
        fn access(&mut self, asid: u32, vpn: u64) -> bool {
            let l = &mut self.lists[(vpn % self.sets) as usize];
            if let Some(i) = l.iter().position(|&e| e == (asid, vpn)) {
                let e = l.remove(i);
                l.insert(0, e);
                true
            } else {
                l.insert(0, (asid, vpn));
                l.truncate(self.ways);
                false
            }
        }
    }

    #[test]
    fn lru_matches_a_naive_model() {
        for (entries, ways) in [(16u32, 4u32), (64, 8), (8, 8), (12, 1)] {
            let mut t = Tlb::new(&TlbConfig { entries, ways }).unwrap();
            let mut n = Naive {
                sets: (entries / ways) as u64,
                ways: ways as usize,
                lists: vec![Vec::new(); (entries / ways) as usize],
            };
            let mut g = SplitMix64::new(entries as u64);
            for _ in 0..20_000 {
                let asid = g.below(2) as u32;
                let vpn = g.below(3 * entries as u64);
                let hit = t.lookup(asid, vpn).is_some();
                if !hit {
                    t.insert(
                        asid,
                        vpn,
                        Translation {
                            pfn: vpn + 100,
                            huge: false,
                        },
                    );
                }
                assert_eq!(hit, n.access(asid, vpn), "{entries}/{ways}");
            }
            assert_eq!(t.hits + t.misses, 20_000);
        }
    }

    #[test]
    fn huge_entries_shootdowns_and_flushes() {
        let mut t = Tlb::new(&TlbConfig {
            entries: 32,
            ways: 4,
        })
        .unwrap();
        // A 2 MiB entry for the huge page holding vpn 1030 (pages 1024..1536, frames from 5120).
        t.insert(
            1,
            1030,
            Translation {
                pfn: 5126,
                huge: true,
            },
        );
        assert_eq!(
            t.lookup(1, 1024),
            Some(Translation {
                pfn: 5120,
                huge: true
            })
        );
        assert_eq!(t.lookup(1, 1535).map(|x| x.pfn), Some(5631));
        assert_eq!(t.lookup(1, 1536), None);
        assert_eq!(t.lookup(2, 1030), None, "other address spaces miss");
        t.insert(
            1,
            7,
            Translation {
                pfn: 70,
                huge: false,
            },
        );
        t.insert(
            2,
            7,
            Translation {
                pfn: 71,
                huge: false,
            },
        );
        assert_eq!(
            t.invalidate(1, 1100),
            1,
            "a page inside the huge entry drops it"
        );
        assert_eq!(t.lookup(1, 1030), None);
        assert_eq!(t.flush_asid(1), 1);
        assert_eq!(t.lookup(2, 7).map(|x| x.pfn), Some(71));
        assert_eq!(t.occupancy(), 1);
        assert!(Tlb::new(&TlbConfig {
            entries: 10,
            ways: 4
        })
        .is_err());
    }
}
