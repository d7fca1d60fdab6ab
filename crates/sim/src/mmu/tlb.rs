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

/// An empty slot's key (no page number reaches it).
const EMPTY: u64 = u64::MAX;

/// A slot's key: `page << 1 | huge`, with the address space in the top 16 bits. For pages
/// below 2^47 (virtual addresses below 2^59, every real one) and address spaces below 2^16 the
/// fields do not overlap, so equal keys mean equal entries and the lookup needs nothing else;
/// otherwise the stored address space is checked too.
#[inline]
fn key(asid: u32, page: u64, huge: bool) -> u64 {
    (page << 1 | huge as u64) ^ ((asid as u64) << 48)
}

#[inline]
fn key_is_exact(asid: u32, page: u64) -> bool {
    page < 1 << 47 && asid < 1 << 16
}

/// A slot's frame and last use, side by side: a hit reads the one and writes the other, so it
/// touches one host line of them instead of two (an L2 TLB's set is mostly out of the host's
/// L1 cache by the time it is looked up again).
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    pfn: Pfn,
    /// The lookup clock at the slot's last use; 0 when empty, older than any entry.
    last_use: u64,
}

/// Four slots on one host line. A set's `stride` is a multiple of four, so every set starts a
/// host line and spans `stride / 4` whole lines, and `prefetch` knows which lines to fetch.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct SlotLine([Slot; 4]);

// `slots_ptr` reads the lines as one run of slots.
const _: () = assert!(std::mem::size_of::<SlotLine>() == 4 * std::mem::size_of::<Slot>());

/// The TLB's slots as parallel arrays, so a lookup compares packed keys of one set, one host
/// line or two, instead of walking optional structs (the whole-system engine looks up a TLB
/// for every reference).
#[derive(Debug, Clone)]
pub struct Tlb {
    sets: u64,
    /// `sets - 1` when the set count is a power of two (a mask instead of a division).
    set_mask: Option<u64>,
    ways: usize,
    /// Slots per set: `ways` rounded up to a multiple of 4 (the padding stays EMPTY), so a
    /// lookup compares whole groups of four keys.
    stride: usize,
    /// Per slot: `key(asid, page, huge)`, or EMPTY.
    keys: Vec<u64>,
    asids: Vec<u32>,
    /// Per slot: the page number of the entry's size (checked when keys are not exact).
    pages: Vec<u64>,
    /// Per slot, four to a host line (read through `slot` and `set_slots`).
    slot_lines: Vec<SlotLine>,
    /// 2 MiB entries held: the second probe of a lookup is skipped while there are none.
    huge_entries: usize,
    /// Entries whose key is not exact (`key_is_exact`): while there are any, every match is
    /// checked against the stored address space and page.
    inexact_entries: usize,
    clock: u64,
    pub hits: u64,
    pub misses: u64,
}

const HUGE_SHIFT: u32 = 9;

/// Bit `w` set where `keys[w] == key`; `keys` is a whole number of groups of four (a set's
/// `stride`), at most 64. Four keys per AVX2 compare: every lookup of a whole-system run comes
/// here (callgrind on examples/os/speed-4core.toml: an L2 TLB `find` from about 125 host
/// instructions to 96).
#[inline(always)]
fn equal_mask(keys: &[u64], key: u64) -> u64 {
    debug_assert!(keys.len().is_multiple_of(4) && keys.len() <= 64);
    // Group by group, each needed only when the set is wider, so the narrowest set, an L1
    // TLB's 4 ways looked up on every reference, costs one test; an L2 TLB's 12 ways three.
    // (A loop over a run-time count of groups cost a few host instructions per group, and a
    // jump table on the width about ten per lookup.)
    let n = keys.len();
    let mut mask = equal_mask4(keys, key);
    if n > 4 {
        mask |= equal_mask4(&keys[4..], key) << 4;
        if n > 8 {
            mask |= equal_mask4(&keys[8..], key) << 8;
            if n > 12 {
                for (g, four) in keys[12..].chunks_exact(4).enumerate() {
                    mask |= equal_mask4(four, key) << (12 + 4 * g);
                }
            }
        }
    }
    mask
}

/// Bit `w` set where `keys[w] == key`, for the first four keys.
#[inline(always)]
fn equal_mask4(keys: &[u64], key: u64) -> u64 {
    let four: &[u64; 4] = keys[..4].try_into().expect("four keys");
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    {
        use core::arch::x86_64::*;
        // SAFETY: reads the four keys of `four`; AVX2 is enabled at compile time (the cfg).
        unsafe {
            let want = _mm256_set1_epi64x(key as i64);
            let t = _mm256_loadu_si256(four.as_ptr() as *const __m256i);
            _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(t, want))) as u64
        }
    }
    #[cfg(all(target_arch = "x86_64", not(target_feature = "avx2")))]
    {
        // Baseline x86-64 (the wheel's target): two SSE2 compares of two keys each.
        use core::arch::x86_64::*;
        // SAFETY: reads the four keys of `four`; SSE2 is part of x86-64.
        unsafe {
            let want = _mm_set1_epi64x(key as i64);
            let lo = _mm_loadu_si128(four.as_ptr() as *const __m128i);
            let hi = _mm_loadu_si128(four.as_ptr().add(2) as *const __m128i);
            (crate::cache::hierarchy::sse2_eq64_mask(lo, want)
                | crate::cache::hierarchy::sse2_eq64_mask(hi, want) << 2) as u64
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (four[0] == key) as u64
            | ((four[1] == key) as u64) << 1
            | ((four[2] == key) as u64) << 2
            | ((four[3] == key) as u64) << 3
    }
}

/// Index of the first least recently used slot (the set is never empty: `ways >= 1`). Without
/// branches: which way is least recently used is a coin toss for the host's branch predictor.
#[inline(always)]
fn first_least(slots: &[Slot]) -> usize {
    use std::hint::select_unpredictable as select;
    if let &[a, b, c, d] = slots {
        // An L1 TLB's four ways as a tournament (ties go to the earlier way, as below).
        let (a, b, c, d) = (a.last_use, b.last_use, c.last_use, d.last_use);
        let (i, x) = select(b < a, (1, b), (0, a));
        let (j, y) = select(d < c, (3, d), (2, c));
        return select(y < x, j, i);
    }
    let mut best = 0;
    let mut least = slots[0].last_use;
    for (i, v) in slots.iter().enumerate().skip(1) {
        let less = v.last_use < least;
        best = select(less, i, best);
        least = select(less, v.last_use, least);
    }
    best
}

impl Tlb {
    pub fn new(config: &TlbConfig) -> Result<Self, ConfigError> {
        let (entries, ways) = (config.entries, config.ways);
        if ways == 0 || ways > 64 || entries == 0 || entries % ways != 0 {
            return Err(ConfigError::new(
                "tlb",
                format!(
                    "{entries} entries in {ways} ways: allowed 1 to 64 ways, entries a positive multiple of ways"
                ),
            ));
        }
        let sets = (entries / ways) as u64;
        let stride = (ways as usize).next_multiple_of(4);
        let n = sets as usize * stride;
        Ok(Tlb {
            sets,
            set_mask: sets.is_power_of_two().then_some(sets - 1),
            stride,
            keys: vec![EMPTY; n],
            asids: vec![0; n],
            pages: vec![0; n],
            slot_lines: vec![SlotLine::default(); n / 4],
            ways: ways as usize,
            huge_entries: 0,
            inexact_entries: 0,
            clock: 0,
            hits: 0,
            misses: 0,
        })
    }

    #[inline(always)]
    fn set_start(&self, page: u64) -> usize {
        let set = match self.set_mask {
            Some(m) => page & m,
            None => page % self.sets,
        };
        set as usize * self.stride
    }

    // Every slot index below is a set's start (`set_start`: a set below `sets`, times `stride`)
    // plus a way below `stride`, inside the `sets * stride` slots of each per-slot array. The
    // accessors skip the bounds checks on that (callgrind on examples/os/speed-4core.toml: the
    // checks were about a tenth of a TLB-hit reference's host instructions); debug builds
    // still check.

    /// The keys of the set starting at slot `s`.
    #[inline(always)]
    fn set_keys(&self, s: usize) -> &[u64] {
        debug_assert!(s.is_multiple_of(self.stride) && s + self.stride <= self.keys.len());
        // SAFETY: `s` is a set's start, so `s + stride` slots are in bounds (see above).
        unsafe { self.keys.get_unchecked(s..s + self.stride) }
    }

    /// The slots, one after another: a `SlotLine` is exactly four `Slot`s (64 bytes, no
    /// padding), so slot `i` is the `i`th `Slot` from the start.
    #[inline(always)]
    fn slots_ptr(&self) -> *const Slot {
        self.slot_lines.as_ptr() as *const Slot
    }

    /// The occupied ways' slots of the set starting at slot `s` (not its padding).
    #[inline(always)]
    fn set_slots(&self, s: usize) -> &[Slot] {
        debug_assert!(s.is_multiple_of(self.stride) && s + self.ways <= 4 * self.slot_lines.len());
        // SAFETY: `s` is a set's start and `ways <= stride` (see above); the slots are
        // `4 * slot_lines.len()` contiguous, initialised `Slot`s.
        unsafe { std::slice::from_raw_parts(self.slots_ptr().add(s), self.ways) }
    }

    #[inline(always)]
    fn slot_at(&self, i: usize) -> Slot {
        debug_assert!(i < 4 * self.slot_lines.len());
        // SAFETY: `i` is a set's start plus a way (see above).
        unsafe { *self.slots_ptr().add(i) }
    }

    #[inline(always)]
    fn slot(&mut self, i: usize) -> &mut Slot {
        debug_assert!(i < 4 * self.slot_lines.len());
        // SAFETY: `i` is a set's start plus a way (see above), and `&mut self` makes the
        // reference unique.
        unsafe { &mut *(self.slot_lines.as_mut_ptr() as *mut Slot).add(i) }
    }

    #[inline(always)]
    fn key_of(&self, i: usize) -> u64 {
        debug_assert!(i < self.keys.len());
        // SAFETY: `i` is a set's start plus a way (see above).
        unsafe { *self.keys.get_unchecked(i) }
    }

    /// The slot holding `page` of `asid`: the set's keys compared four at a time into a mask
    /// (no branch per way: lookups mostly miss, or hit at an unpredictable way), then the
    /// address space checked for each match.
    #[inline(always)]
    fn find(&self, asid: u32, page: u64, huge: bool) -> Option<usize> {
        self.find_in(self.set_start(page), asid, page, huge)
    }

    /// `find` in the set starting at slot `s` (`set_start(page)`).
    #[inline(always)]
    fn find_in(&self, s: usize, asid: u32, page: u64, huge: bool) -> Option<usize> {
        let key = key(asid, page, huge);
        let mut mask = equal_mask(self.set_keys(s), key);
        if mask == 0 {
            return None;
        }
        if self.inexact_entries == 0 && key_is_exact(asid, page) {
            return Some(s + mask.trailing_zeros() as usize);
        }
        while mask != 0 {
            let i = s + mask.trailing_zeros() as usize;
            if self.asids[i] == asid && self.pages[i] == page {
                return Some(i);
            }
            mask &= mask - 1;
        }
        None
    }

    /// Translate 4 KiB page `vpn` of `asid`: a 4 KiB entry for it, or a 2 MiB entry covering it.
    /// Counts a hit or a miss.
    #[inline(always)]
    pub fn lookup(&mut self, asid: u32, vpn: u64) -> Option<Translation> {
        self.clock += 1;
        let clock = self.clock;
        if let Some(i) = self.find(asid, vpn, false) {
            self.hits += 1;
            let slot = self.slot(i);
            slot.last_use = clock;
            return Some(Translation {
                pfn: slot.pfn,
                huge: false,
            });
        }
        if self.huge_entries > 0 {
            if let Some(i) = self.find(asid, vpn >> HUGE_SHIFT, true) {
                self.hits += 1;
                let slot = self.slot(i);
                slot.last_use = clock;
                return Some(Translation {
                    pfn: slot.pfn + (vpn & ((1 << HUGE_SHIFT) - 1)),
                    huge: true,
                });
            }
        }
        self.misses += 1;
        None
    }

    /// `n` more `lookup`s of `vpn` of `asid`, which the last lookup of this TLB found and
    /// nothing has changed since: exactly their updates (the clock moved `n` times, the hits
    /// counted, the entry's last use the final clock), with one search instead of `n`. For a
    /// caller that holds a run of records on one page (the whole-system engine's repeated
    /// lines). Panics if the entry is not there (the caller's promise was broken).
    #[inline]
    pub fn repeat_hits(&mut self, asid: u32, vpn: u64, n: u64) {
        if n == 0 {
            return;
        }
        let i = self
            .find(asid, vpn, false)
            .or_else(|| {
                (self.huge_entries > 0)
                    .then(|| self.find(asid, vpn >> HUGE_SHIFT, true))
                    .flatten()
            })
            .expect("repeat_hits: the entry the last lookup found");
        self.clock += n;
        self.hits += n;
        let clock = self.clock;
        self.slot(i).last_use = clock;
    }

    /// Hint the host to bring in what a lookup of 4 KiB page `vpn` reads and writes (the set's
    /// keys, frames and last uses), for a caller that knows its coming pages. Changes nothing.
    #[inline]
    pub fn prefetch(&self, vpn: u64) {
        let s = self.set_start(vpn);
        let keys = self.keys.as_ptr().wrapping_add(s);
        crate::cache::prefetch_read(keys);
        crate::cache::prefetch_read(keys.wrapping_add(self.stride - 1));
        // The lines of the set's first, middle and last slots: all of them up to 12 ways.
        let slots = self.slots_ptr().wrapping_add(s);
        crate::cache::prefetch_read(slots);
        crate::cache::prefetch_read(slots.wrapping_add(self.ways / 2));
        crate::cache::prefetch_read(slots.wrapping_add(self.ways - 1));
    }

    /// The frame of `vpn` if a 4 KiB entry holds it, without counting or touching anything
    /// (for the host prefetch of coming references; not something hardware does).
    #[inline]
    pub fn peek(&self, asid: u32, vpn: u64) -> Option<Pfn> {
        self.find(asid, vpn, false).map(|i| self.slot_at(i).pfn)
    }

    #[inline(always)]
    fn clear(&mut self, i: usize) {
        if self.uncount(i) {
            self.keys[i] = EMPTY;
            // Older than any entry (stamps start at 1): `insert` takes empty slots first.
            self.slot(i).last_use = 0;
        }
    }

    /// Take slot `i`'s entry, if any, out of the counts of huge and inexact entries (before it
    /// is cleared or overwritten). Returns whether the slot held one.
    #[inline(always)]
    fn uncount(&mut self, i: usize) -> bool {
        let k = self.key_of(i);
        if k == EMPTY {
            return false;
        }
        if k & 1 == 1 {
            self.huge_entries -= 1;
        }
        if self.inexact_entries > 0 && !key_is_exact(self.asids[i], self.pages[i]) {
            self.inexact_entries -= 1;
        }
        true
    }

    /// Insert a translation after a walk: over an entry already holding the page, else in the
    /// set's first empty slot, else over its least recently used entry. One pass over the
    /// set's last uses finds both of the latter, since an empty slot's last use is 0: the L1
    /// TLBs take an insert on every L1 miss (7 references in 8 on examples/os/speed-4core.toml),
    /// and the search way by way cost about 200 host instructions per insert (callgrind).
    #[inline(always)]
    pub fn insert(&mut self, asid: u32, vpn: u64, t: Translation) {
        self.insert_in(asid, vpn, t, true);
    }

    /// `insert` for a caller that knows no entry holds `vpn` of `asid` in either page size: a
    /// `lookup` of it just missed and nothing changed this TLB since (the L1 TLB filled from
    /// the L2 TLB, on nearly every L1 miss). Skips the search for an entry to overwrite.
    #[inline(always)]
    pub fn insert_absent(&mut self, asid: u32, vpn: u64, t: Translation) {
        debug_assert!(
            self.find(asid, vpn, false).is_none()
                && self.find(asid, vpn >> HUGE_SHIFT, true).is_none()
        );
        self.insert_in(asid, vpn, t, false);
    }

    #[inline(always)]
    fn insert_in(&mut self, asid: u32, vpn: u64, t: Translation, may_hold: bool) {
        self.clock += 1;
        let page = if t.huge { vpn >> HUGE_SHIFT } else { vpn };
        let pfn = if t.huge {
            t.pfn - (vpn & ((1 << HUGE_SHIFT) - 1))
        } else {
            t.pfn
        };
        let s = self.set_start(page);
        let held = if may_hold {
            self.find_in(s, asid, page, t.huge)
        } else {
            None
        };
        let victim = match held {
            Some(i) => i,
            None => s + first_least(self.set_slots(s)),
        };
        self.uncount(victim);
        debug_assert!(victim < self.keys.len());
        // SAFETY: `victim` is a set's start plus a way (see `set_keys`), and the per-slot
        // arrays all hold `sets * stride` slots.
        unsafe {
            *self.keys.get_unchecked_mut(victim) = key(asid, page, t.huge);
            *self.asids.get_unchecked_mut(victim) = asid;
            *self.pages.get_unchecked_mut(victim) = page;
        }
        if !key_is_exact(asid, page) {
            self.inexact_entries += 1;
        }
        let clock = self.clock;
        *self.slot(victim) = Slot {
            pfn,
            last_use: clock,
        };
        if t.huge {
            self.huge_entries += 1;
        }
    }

    /// Shootdown of one 4 KiB page (and a 2 MiB entry covering it). Returns entries removed.
    pub fn invalidate(&mut self, asid: u32, vpn: u64) -> usize {
        let mut n = 0;
        for (page, huge) in [(vpn, false), (vpn >> HUGE_SHIFT, true)] {
            if let Some(i) = self.find(asid, page, huge) {
                self.clear(i);
                n += 1;
            }
        }
        n
    }

    /// Drop every entry of `asid` (process exit, full flush). Returns entries removed.
    pub fn flush_asid(&mut self, asid: u32) -> usize {
        let mut n = 0;
        for i in 0..self.keys.len() {
            if self.keys[i] != EMPTY && self.asids[i] == asid {
                self.clear(i);
                n += 1;
            }
        }
        n
    }

    pub fn occupancy(&self) -> usize {
        self.keys.iter().filter(|&&k| k != EMPTY).count()
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
    fn packed_keys_that_collide_are_told_apart() {
        // (asid 1, page 5) and (asid 0, page 5 + 2^47) pack to the same key; so do (asid 2^16,
        // page 9) and (asid 0, page 9 + 2^47): both pairs share a set.
        let mut t = Tlb::new(&TlbConfig {
            entries: 8,
            ways: 4,
        })
        .unwrap();
        let tr = |pfn| Translation { pfn, huge: false };
        assert_eq!(key(1, 5, false), key(0, 5 | 1 << 47, false));
        t.insert(0, 5 | 1 << 47, tr(200));
        assert_eq!(
            t.lookup(1, 5),
            None,
            "an exact lookup meets an inexact entry"
        );
        t.insert(1, 5, tr(100));
        assert_eq!(t.lookup(1, 5).map(|x| x.pfn), Some(100));
        assert_eq!(t.lookup(0, 5 | 1 << 47).map(|x| x.pfn), Some(200));
        t.insert(1 << 16, 9, tr(300));
        assert_eq!(t.lookup(0, 9 | 1 << 47), None);
        assert_eq!(t.lookup(1 << 16, 9).map(|x| x.pfn), Some(300));
        assert_eq!(t.invalidate(0, 5 | 1 << 47), 1);
        assert_eq!(t.lookup(1, 5).map(|x| x.pfn), Some(100));
        assert_eq!(t.flush_asid(1 << 16), 1);
        assert_eq!(t.inexact_entries, 0);
    }

    #[test]
    fn lru_matches_a_naive_model() {
        // Shootdowns leave holes that later fills must take before evicting anything.
        for (entries, ways) in [
            (16u32, 4u32),
            (64, 8),
            (8, 8),
            (12, 1),
            (48, 12),
            (24, 6),
            (64, 16),
            (40, 20),
            (64, 64),
        ] {
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
                if g.below(10) == 0 {
                    let held = n.lists[(vpn % n.sets) as usize].contains(&(asid, vpn));
                    n.lists[(vpn % n.sets) as usize].retain(|&e| e != (asid, vpn));
                    assert_eq!(t.invalidate(asid, vpn), held as usize);
                    continue;
                }
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
            assert!(t.hits + t.misses > 17_000);
            assert_eq!(t.occupancy(), n.lists.iter().map(Vec::len).sum::<usize>());
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
