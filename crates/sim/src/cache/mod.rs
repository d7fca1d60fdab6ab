/*!
A set-associative cache array and the hierarchy built from such arrays.

`Cache` is mechanism only: it finds a line, fills a line (choosing a victim through its
`Replacement` policy, invalid ways first), invalidates a line, and keeps per-line metadata the
OS-level policies need (owning address space, privileged flag, prefetched flag, reuse count,
dirty bit). It counts nothing itself; `Hierarchy` decides what an access is and keeps the
statistics, because only it knows whether a lookup is a demand access, a prefetch, a write-back
or a back-invalidation.

Layout (DESIGN.md principle 5): the line numbers of a set are contiguous (`lines[set*ways..]`),
an invalid way holds `INVALID`, and replacement state lives in the policy in its own compact
arrays. A fully associative cache is the one-set case.
*/
mod aligned;
pub mod hierarchy;
pub mod prefetch;
pub mod replacement;
pub mod stats;

use crate::error::ConfigError;
use crate::geometry::CacheGeometry;
pub(crate) use aligned::Aligned;
pub use hierarchy::{Hierarchy, HierarchyConfig, Inclusion, LevelConfig, Serves, WritePolicy};
pub use replacement::{Replacement, ReplacementKind};
pub use stats::{Counters, KindCounts, LevelStats, ModeCounts, ModeStats};

/// Line number stored in an invalid way (no real line number reaches it: addresses are < 2^64
/// bytes, so line numbers are < 2^58).
pub const INVALID: u64 = u64::MAX;

/// Tag slots after the last set, so a scan of 16 ways starting at any set stays in bounds.
pub(crate) const SCAN_PAD: usize = 16;

/// Per-line metadata flags.
pub mod flags {
    pub const DIRTY: u8 = 1;
    pub const PREFETCHED: u8 = 2;
    pub const PRIVILEGED: u8 = 4;
}

/// What a cache remembers about each line beyond its address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineMeta {
    /// Address space that brought the line in (0 in cache-only simulations).
    pub asid: u16,
    /// `flags::DIRTY | PREFETCHED | PRIVILEGED`.
    pub flags: u8,
    /// Hits since the fill, saturating.
    pub reuse: u8,
}

impl LineMeta {
    #[inline]
    pub fn dirty(&self) -> bool {
        self.flags & flags::DIRTY != 0
    }
    #[inline]
    pub fn prefetched(&self) -> bool {
        self.flags & flags::PREFETCHED != 0
    }
}

/// Where a line sits: its set, its way, and `set * ways + way` (no divisions on the hot path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub set: usize,
    pub way: usize,
    pub index: usize,
}

/// A lookup that missed: the set, its first slot, and a bit mask of its invalid ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Miss {
    pub set: usize,
    pub base: usize,
    pub free: u64,
}

/// Result of `Cache::lookup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    Hit(Slot),
    Miss(Miss),
}

/// A line pushed out of a cache by a fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub line: u64,
    pub meta: LineMeta,
}

/// Issue a software prefetch for `p` (no effect on results; a hint to the host's caches).
#[inline(always)]
pub fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // SAFETY: prefetch never faults, whatever the address.
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Raw pointers into one cache's state, valid while the cache is neither moved nor resized
/// (see `Cache::lean_parts`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeanParts {
    pub lines: *mut u64,
    pub meta: *mut LineMeta,
    pub order: *mut u64,
    /// `sets - 1` when the set index is a mask of the line number; otherwise `geom` indexes.
    pub set_mask: Option<u64>,
    pub geom: *const CacheGeometry,
    pub ways: u32,
    pub valid: *mut usize,
    pub capacity: usize,
    pub state_bytes: usize,
}

/// One set-associative cache.
#[derive(Debug, Clone)]
pub struct Cache {
    geom: CacheGeometry,
    /// `sets - 1` when the set index is a plain mask of the line number (the common case),
    /// so the hot path skips the general slice/modulo indexing.
    set_mask: Option<u64>,
    ways: usize,
    /// Followed by `SCAN_PAD` tags that no set owns, for fixed-width tag scans.
    lines: Aligned<u64>,
    meta: Aligned<LineMeta>,
    repl: Replacement,
    /// Valid lines held: once every way of every set is valid (the steady state of most runs),
    /// the lean engine skips looking for invalid ways.
    valid: usize,
    /// Bumped by every change to the replacement state, so a caller that remembers the epoch
    /// after its own update can tell that nothing has changed the order since.
    epoch: u64,
}

impl Cache {
    pub fn new(
        geom: CacheGeometry,
        policy: ReplacementKind,
        seed: u64,
    ) -> Result<Self, ConfigError> {
        let sets =
            usize::try_from(geom.sets()).map_err(|_| ConfigError::new("size", "too many sets"))?;
        let ways = geom.ways() as usize;
        let n = sets
            .checked_mul(ways)
            .ok_or_else(|| ConfigError::new("size", "cache too large"))?;
        if ways > 64 {
            return Err(ConfigError::new(
                "ways",
                format!("{ways} ways: at most 64 are supported"),
            ));
        }
        if n > (1 << 34) {
            return Err(ConfigError::new(
                "size",
                format!("{} lines is more than this simulator holds (2^34)", n),
            ));
        }
        let repl = Replacement::new(policy, sets, ways, seed)?;
        let set_mask = geom.is_pow2().then(|| geom.sets() - 1);
        // Fallible: the size comes from a config, and a refused allocation is the config's
        // error, not an abort.
        let cannot = |what: usize| {
            ConfigError::new(
                "size",
                format!(
                    "cannot allocate {} for {n} lines of cache state; use a smaller cache",
                    crate::config::human_bytes(what as u128 * n as u128)
                ),
            )
        };
        let lines = Aligned::try_new(INVALID, n, SCAN_PAD).map_err(|_| cannot(8))?;
        let meta = Aligned::try_new(LineMeta::default(), n, 0)
            .map_err(|_| cannot(std::mem::size_of::<LineMeta>()))?;
        Ok(Cache {
            geom,
            set_mask,
            ways,
            lines,
            meta,
            repl,
            epoch: 0,
            valid: 0,
        })
    }

    pub fn geometry(&self) -> &CacheGeometry {
        &self.geom
    }

    pub fn ways(&self) -> usize {
        self.ways
    }

    /// Set number of a line.
    #[inline(always)]
    pub fn set_of_line(&self, line: u64) -> usize {
        match self.set_mask {
            Some(m) => (line & m) as usize,
            None => self.geom.set_of_line(line) as usize,
        }
    }

    /// Raw views of the state for the lean engine (`hierarchy::lean`), when this cache is one
    /// it handles: LRU with recency words (any set indexing: a mask, a modulo, slices).
    pub(crate) fn lean_parts(&mut self) -> Option<LeanParts> {
        let order = self.repl.recency_words()?;
        // The lean engine does not keep `epoch`; bump it so no `LastLine` taken before survives.
        self.epoch += 1;
        Some(LeanParts {
            lines: self.lines.padded_mut_ptr(),
            meta: self.meta.padded_mut_ptr(),
            order,
            set_mask: self.set_mask,
            geom: &self.geom,
            ways: self.ways as u32,
            valid: &mut self.valid,
            capacity: self.lines.len(),
            state_bytes: self.lines.len() * (8 + std::mem::size_of::<LineMeta>())
                + 8 * self.lines.len() / self.ways,
        })
    }

    /// Hint the host to bring in the state of the set `line` maps to.
    #[inline]
    pub fn prefetch_set(&self, line: u64) {
        let set = self.set_of_line(line);
        let base = set * self.ways;
        let p = self.lines.as_ptr().wrapping_add(base);
        prefetch_read(p);
        if self.ways > 8 {
            prefetch_read(p.wrapping_add(8));
        }
        prefetch_read(self.meta.as_ptr().wrapping_add(base));
        self.repl.prefetch(set);
    }

    /// Slot holding `line`, if present. No state changes.
    #[inline(always)]
    pub fn find(&self, line: u64) -> Option<Slot> {
        match self.lookup(line) {
            Lookup::Hit(s) => Some(s),
            Lookup::Miss(_) => None,
        }
    }

    /// One scan of the set: the slot holding `line`, or where a fill would go if no invalid way
    /// is left to the policy.
    #[inline(always)]
    pub fn lookup(&self, line: u64) -> Lookup {
        let set_no = self.set_of_line(line);
        let base = set_no * self.ways;
        let hit = self.ways_equal(base, line);
        if hit != 0 {
            let way = hit.trailing_zeros() as usize;
            Lookup::Hit(Slot {
                set: set_no,
                way,
                index: base + way,
            })
        } else {
            Lookup::Miss(Miss {
                set: set_no,
                base,
                free: self.ways_equal(base, INVALID),
            })
        }
    }

    /// Bit `w` set where way `w` of the set starting at `base` holds `tag`. The tags are
    /// compared 8 or 16 at a time with vector instructions (the lean engine's `scan`), reading
    /// into the padding after the last set, and the bits past the set's ways dropped: the
    /// plain loop it replaces (one compare, shift and or per way, which LLVM did not vectorise
    /// for a way count known only at run time) was about 5% of a whole-system run's host
    /// instructions (callgrind, docs/PERFORMANCE.md).
    #[inline(always)]
    fn ways_equal(&self, base: usize, tag: u64) -> u64 {
        debug_assert!(base + self.ways <= self.lines.len());
        let tags = self.lines.padded_ptr().wrapping_add(base);
        let all = if self.ways >= 64 {
            u64::MAX
        } else {
            (1u64 << self.ways) - 1
        };
        // SAFETY: `base` starts a set, so `base + ways <= len`; each scan reads tags
        // `k..k + W` with `k < ways` and `W <= SCAN_PAD`, all below `len + SCAN_PAD`, inside
        // the allocation (`Aligned::padded_ptr`). SSE2 only (`V = false`): every x86-64 CPU.
        unsafe {
            if self.ways <= 8 {
                hierarchy::scan::<8, false>(tags, tag) as u64 & all
            } else {
                let mut mask = 0u64;
                let mut k = 0;
                while k < self.ways {
                    mask |= (hierarchy::scan::<16, false>(tags.add(k), tag) as u64) << k;
                    k += 16;
                }
                mask & all
            }
        }
    }

    #[inline]
    pub fn contains(&self, line: u64) -> bool {
        self.find(line).is_some()
    }

    /// A demand hit on `slot` (as returned by `find`): update replacement state and reuse count.
    #[inline(always)]
    pub fn touch(&mut self, slot: Slot) {
        self.epoch += 1;
        self.repl.on_hit(slot.set, slot.way);
        let m = &mut self.meta[slot.index];
        m.reuse = m.reuse.saturating_add(1);
    }

    #[inline]
    pub fn meta(&self, slot: Slot) -> LineMeta {
        self.meta[slot.index]
    }

    #[inline]
    pub fn meta_mut(&mut self, slot: Slot) -> &mut LineMeta {
        &mut self.meta[slot.index]
    }

    /// Place `line` (not present) in its set: an invalid way if any, else the policy's victim.
    /// Returns the slot used and the line evicted, if a valid one was.
    #[inline]
    pub fn fill(&mut self, line: u64, meta: LineMeta) -> (Slot, Option<Evicted>) {
        match self.lookup(line) {
            Lookup::Miss(m) => self.fill_at(m, line, meta),
            Lookup::Hit(_) => panic!("fill of line {line:#x} that is already cached"),
        }
    }

    /// `fill` after a `lookup` that missed (and nothing touched the set since).
    #[inline(always)]
    pub fn fill_at(&mut self, m: Miss, line: u64, meta: LineMeta) -> (Slot, Option<Evicted>) {
        let way = if m.free != 0 {
            m.free.trailing_zeros() as usize
        } else {
            self.repl.victim(m.set)
        };
        let slot = m.base + way;
        let old = self.lines[slot];
        let evicted = (old != INVALID).then(|| Evicted {
            line: old,
            meta: self.meta[slot],
        });
        self.valid += (old == INVALID) as usize;
        self.lines[slot] = line;
        self.meta[slot] = meta;
        self.epoch += 1;
        self.repl.on_fill(m.set, way);
        (
            Slot {
                set: m.set,
                way,
                index: slot,
            },
            evicted,
        )
    }

    /// Remove `line` if present, returning its metadata.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<LineMeta> {
        let slot = self.find(line)?;
        self.lines[slot.index] = INVALID;
        self.valid -= 1;
        self.epoch += 1;
        self.repl.on_invalidate(slot.set, slot.way);
        Some(std::mem::take(&mut self.meta[slot.index]))
    }

    /// Replacement-state epoch: changes whenever a hit, fill or invalidation updates it.
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The line held in `slot` (`INVALID` if none).
    #[inline]
    pub fn line_at(&self, slot: Slot) -> u64 {
        self.lines[slot.index]
    }

    /// Every valid line (for invariant checks and inspection).
    pub fn valid_lines(&self) -> impl Iterator<Item = (u64, LineMeta)> + '_ {
        self.lines
            .iter()
            .zip(self.meta.iter())
            .filter(|(l, _)| **l != INVALID)
            .map(|(l, m)| (*l, *m))
    }

    /// Number of valid lines.
    pub fn occupancy(&self) -> usize {
        self.lines.iter().filter(|&&l| l != INVALID).count()
    }

    /// The running count of valid lines (kept by every fill and invalidation; checked against
    /// `occupancy` by `Hierarchy::check_invariants`).
    pub fn valid_count(&self) -> usize {
        self.valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(size: u64, ways: u32, policy: ReplacementKind) -> Cache {
        Cache::new(CacheGeometry::new(size, ways, 64, 4096).unwrap(), policy, 1).unwrap()
    }

    #[test]
    fn fills_invalid_ways_first_then_evicts() {
        let mut c = cache(4 * 64, 4, ReplacementKind::Lru); // one set, fully associative
        for l in 0..4 {
            assert_eq!(c.fill(l, LineMeta::default()).1, None);
        }
        assert_eq!(c.occupancy(), 4);
        let s = c.find(0).unwrap();
        c.touch(s);
        let (_, ev) = c.fill(10, LineMeta::default());
        assert_eq!(ev.unwrap().line, 1);
        assert!(c.contains(10) && c.contains(0) && !c.contains(1));
    }

    #[test]
    fn invalidate_frees_the_way() {
        let mut c = cache(2 * 64, 2, ReplacementKind::Lru);
        c.fill(
            1,
            LineMeta {
                flags: flags::DIRTY,
                ..Default::default()
            },
        );
        c.fill(2, LineMeta::default());
        assert!(c.invalidate(1).unwrap().dirty());
        assert_eq!(c.invalidate(1), None);
        assert_eq!(
            c.fill(3, LineMeta::default()).1,
            None,
            "the invalidated way is reused"
        );
    }

    #[test]
    fn lines_map_to_their_sets() {
        let mut c = cache(32 << 10, 8, ReplacementKind::Lru); // 64 sets
                                                              // 9 lines in one set (stride 64 lines) overflow an 8-way set; 9 lines in 9 sets do not.
        for i in 0..9u64 {
            c.fill(i * 64, LineMeta::default());
        }
        assert!(!c.contains(0));
        let mut d = cache(32 << 10, 8, ReplacementKind::Lru);
        for i in 0..9u64 {
            d.fill(i, LineMeta::default());
        }
        assert!((0..9).all(|i| d.contains(i)));
    }
}
