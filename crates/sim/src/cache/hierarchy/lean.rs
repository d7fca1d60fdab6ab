/*!
The lean engine: the same hierarchy semantics as the general path in `hierarchy.rs`, for the
configurations most runs use (every level LRU with at most 16 ways, any set count and slices,
write-back and write-allocate, non-inclusive or inclusive with back-invalidation, no prefetcher
running: `xeon-e5506`, `core-i3-2100` and `core-i7-720qm` among the presets), without the general path's
per-access generality: no policy dispatch, no `Vec` of levels indexed twice per hop, no bounds
checks inside a set, no epochs. `Hierarchy::run_block` hands a block here whenever the
configuration and the prefetch switch allow it, and the general path takes over otherwise; both
work on the same cache arrays, so a run can move between them from block to block.

Why a second implementation of the same rules is worth its upkeep: on the three-level
cross-validation config the general path spent ~600 host instructions on a reference that misses
everywhere, and the simulated LLC's state (6.5 MiB) does not fit the host's caches, so every
instruction saved and every host miss overlapped counts (docs/PERFORMANCE.md). Its equality with
the general path is a property test (`tests/hierarchy_reference.rs`: counters and every line's
contents and metadata, on random configs and traces the engine accepts).

What it uses from the trace being known ahead (as `run_block` does):
- the sets of the record `AHEAD` places on are prefetched into the host's caches, at the levels
  whose state is too big to stay there (`HOST_PREFETCH_MIN_STATE`);
- a run of records on the line the previous record left in the first level is applied at once.
*/
use super::super::replacement::move_to_front;
use super::super::{flags, LeanParts, LineMeta, Slot, INVALID};
use super::{Hierarchy, LastLine, MemoryStats, MAX_DEPTH, SERVED_BY_MEMORY};
use crate::cache::prefetch_read;
use crate::cache::stats::Counters;
use crate::geometry::CacheGeometry;
use crate::trace::{Kind, Record};

mod line;
pub(crate) use line::scan;
#[cfg(target_arch = "x86_64")]
pub(crate) use line::sse2_eq64_mask;
use line::{access_line, host_prefetch, repeat_hits, set_of};

/// How many records ahead the host prefetch looks. Far enough to cover a host memory miss
/// (~100-300 ns here) at ~10-30 ns per simulated reference, near enough that the prefetched
/// lines are still in the host's L1/L2 when used.
const AHEAD: usize = 12;

/// Levels whose state (tags, metadata, recency words) is smaller than this stay in the host's
/// L1/L2 on their own; prefetching them costs more instructions than it saves. Above it (here
/// the 1 MiB L2's 200 KiB, which the LLC's prefetched lines push out of a 512 KiB host L2)
/// prefetching measured a few percent faster. Counted per level over all its instances (the
/// private levels of a whole system's cores, whose bursts interleave, share the host's caches).
const HOST_PREFETCH_MIN_STATE: usize = 128 << 10;

/// One cache instance as the lean engine sees it.
#[derive(Clone, Copy)]
struct Unit {
    lines: *mut u64,
    meta: *mut LineMeta,
    order: *mut u64,
    counters: *mut Counters,
    /// The set index of a line is `line & set_mask` when `geom` is null (a power-of-two set
    /// count, one slice); otherwise the geometry's own (a modulo, slices).
    set_mask: u64,
    geom: *const CacheGeometry,
    ways: usize,
    /// Only the low `ways` bits of a scan are this set's.
    way_mask: u32,
    /// Position of the least recent way in the recency word.
    victim_shift: u32,
    /// The cache's running count of valid lines, and how many it holds when full.
    valid: *mut usize,
    capacity: usize,
    /// Recency-word bits that hold this set's ways (the rest hold 0xF).
    order_mask: u64,
    /// More than 8 ways: scan 16 tags (two host lines) rather than 8.
    wide: bool,
    host_prefetch: bool,
    /// Inclusive hierarchy: the units above this one on some core's path (`Hierarchy::uppers`),
    /// `n_uppers` of them from `uppers` (into `LeanPlan::upper_units`), which lose a line this
    /// one evicts; and fills here look for invalid ways again, since a deeper fill's
    /// back-invalidation may have freed one after the lookup.
    inclusive: bool,
    uppers: *const u16,
    n_uppers: usize,
}

/// The units a reference of one core and class (data or instruction) visits, in order.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct LeanPath {
    units: [u16; MAX_DEPTH],
    len: u8,
}

/// The units of a path whose sets are worth a host prefetch, filled per block.
#[derive(Debug, Clone, Copy, Default)]
struct PrefetchList {
    units: [u16; MAX_DEPTH],
    len: u8,
}

/// The lean engine's view of the caches, built at its first use. The units are raw pointers
/// into the hierarchy's own heap arrays (which never move or reallocate once built), so a
/// clone of the hierarchy must not inherit them: cloning gives an empty cache, rebuilt for the
/// clone's own arrays.
#[derive(Default)]
pub(super) struct UnitCache(Option<Vec<Unit>>, Vec<[PrefetchList; 2]>);

impl Clone for UnitCache {
    fn clone(&self) -> Self {
        UnitCache(None, Vec::new())
    }
}

impl UnitCache {
    /// Forget the units (they are rebuilt at the lean engine's next use).
    #[inline]
    pub(super) fn clear(&mut self) {
        if self.0.is_some() {
            self.0 = None;
        }
    }
}

impl std::fmt::Debug for UnitCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UnitCache({})",
            if self.0.is_some() { "built" } else { "empty" }
        )
    }
}

// SAFETY: the pointers address arrays owned by the same `Hierarchy`, which moves between
// threads as a whole; nothing else holds them.
unsafe impl Send for UnitCache {}

/// What `Hierarchy::new` precomputes for the lean engine.
#[derive(Debug, Clone, Default)]
pub(super) struct LeanPlan {
    /// Per core: [data, instruction].
    paths: Vec<[LeanPath; 2]>,
    /// Unit index -> (level, instance).
    units: Vec<(usize, usize)>,
    /// Inclusive: per unit, the units above it (`Hierarchy::uppers`), as `(start, len)` into
    /// `upper_units`; empty otherwise.
    uppers: Vec<(usize, usize)>,
    upper_units: Vec<u16>,
    inclusive: bool,
    /// A shape beyond non-inclusive power-of-two caches (inclusive, a modulo or sliced set
    /// index): see `Hierarchy::lean_ready`.
    extended: bool,
}

impl LeanPlan {
    /// The plan for `h`, or `None` when a level or the inclusion policy needs the general path.
    pub(super) fn for_hierarchy(h: &Hierarchy) -> Option<LeanPlan> {
        let inclusive = match h.inclusion {
            super::Inclusion::NonInclusive => false,
            super::Inclusion::Inclusive => true,
            super::Inclusion::Exclusive => return None,
        };
        let mut base = Vec::with_capacity(h.levels.len());
        let mut units = Vec::new();
        for (lv, (level, cfg)) in h.levels.iter().zip(&h.config.levels).enumerate() {
            let eligible = cfg.policy == super::ReplacementKind::Lru
                && cfg.ways <= 16
                && level.write_back
                && level.write_allocate;
            if !eligible {
                return None;
            }
            base.push(units.len());
            for inst in 0..level.caches.len() {
                units.push((lv, inst));
            }
        }
        let paths = h
            .paths
            .iter()
            .map(|pair| {
                pair.map(|p| {
                    let mut lp = LeanPath::default();
                    for d in 0..p.len as usize {
                        let hop = p.get(d);
                        lp.units[d] = (base[hop.level as usize] + hop.instance as usize) as u16;
                    }
                    lp.len = p.len;
                    lp
                })
            })
            .collect();
        if units.len() > u16::MAX as usize {
            return None;
        }
        let mut uppers = vec![(0, 0); if inclusive { units.len() } else { 0 }];
        let mut upper_units = Vec::new();
        if inclusive {
            for (k, &(lv, inst)) in units.iter().enumerate() {
                let above = &h.uppers[lv][inst];
                uppers[k] = (upper_units.len(), above.len());
                upper_units.extend(
                    above
                        .iter()
                        .map(|up| (base[up.level as usize] + up.instance as usize) as u16),
                );
            }
        }
        let extended = inclusive
            || h.levels
                .iter()
                .any(|l| l.caches.iter().any(|c| !c.geometry().is_pow2()));
        Some(LeanPlan {
            paths,
            units,
            uppers,
            upper_units,
            inclusive,
            extended,
        })
    }
}

/// What the lean engine reads records from: a block of records, or NumPy-style columns of
/// addresses and sizes read in place (the common in-memory case; other columns go through
/// `RecordColumns::extend_records`).
pub(super) trait LeanInput {
    fn len(&self) -> usize;
    fn at(&self, i: usize) -> Record;
    #[inline(always)]
    fn addr(&self, i: usize) -> u64 {
        self.at(i).addr
    }
    /// How many records from `i` (before `limit`) are first-level hits on the line `first`
    /// that record `i - 1` just left there: on that line, within it, and on the same core and
    /// of the same class (`same_stream`). Also their per-kind counts, in 16-bit lanes of one
    /// word (lane `k` for `Kind` `k`; `limit - i` is at most 65,535).
    #[inline(always)]
    fn same_line_run(
        &self,
        i: usize,
        limit: usize,
        first: u64,
        line_shift: u32,
        same_stream: impl Fn(&Record) -> bool,
    ) -> (usize, u64) {
        let line_mask = (1u64 << line_shift) - 1;
        // Counting into an array indexed by kind made each record wait for the previous
        // one's store; one register of lanes does not.
        let mut lanes = 0u64;
        let mut j = i;
        while j < limit {
            let x = self.at(j);
            if x.addr >> line_shift != first
                || (x.addr & line_mask) + (x.size as u64).max(1) > line_mask + 1
                || !same_stream(&x)
            {
                break;
            }
            lanes += 1 << (16 * x.kind as u64);
            j += 1;
        }
        (j - i, lanes)
    }
}

impl LeanInput for [Record] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[Record]>::len(self)
    }
    #[inline(always)]
    fn at(&self, i: usize) -> Record {
        self[i]
    }
}

/// Addresses with their sizes (or 1-byte loads when `size` is empty); every other field takes
/// its default. `size` is empty or as long as `addr`.
pub(super) struct AddrSize<'a> {
    pub addr: &'a [u64],
    pub size: &'a [u16],
}

impl LeanInput for AddrSize<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.addr.len()
    }
    #[inline(always)]
    fn at(&self, i: usize) -> Record {
        Record {
            addr: self.addr[i],
            thread: 0,
            icount: 0,
            size: if self.size.is_empty() {
                1
            } else {
                self.size[i]
            },
            kind: Kind::Load,
            privileged: false,
            syscall: 0,
        }
    }
    #[inline(always)]
    fn addr(&self, i: usize) -> u64 {
        self.addr[i]
    }
    /// Every record here is a load on core 0 (as is the one before the run), so only the
    /// address and size decide; the slices are walked without building records (a sequential
    /// trace of 8-byte loads spends 7 of every 8 records here).
    #[inline(always)]
    fn same_line_run(
        &self,
        i: usize,
        limit: usize,
        first: u64,
        line_shift: u32,
        _same_stream: impl Fn(&Record) -> bool,
    ) -> (usize, u64) {
        let line = 1u64 << line_shift;
        let start = first << line_shift;
        let addr = &self.addr[i..limit];
        let mut k = 0;
        if self.size.is_empty() {
            // 1-byte loads: on the line is within it.
            while k < addr.len() && addr[k] >> line_shift == first {
                k += 1;
            }
        } else {
            let size = &self.size[i..limit];
            while k < addr.len() {
                // Offset into the line (huge, so failing the test, when below it); a record
                // ending past the line's end is not a hit on it alone.
                let off = addr[k].wrapping_sub(start);
                if !(off < line && off + (size[k].max(1) as u64) <= line) {
                    break;
                }
                k += 1;
            }
        }
        (k, (k as u64) << (16 * Kind::Load as u64))
    }
}

impl Hierarchy {
    /// Whether `run_block` and `run_columns` may hand the next block to the lean engine.
    #[inline]
    pub(super) fn lean_ready_blocks(&self) -> bool {
        self.lean_enabled && self.lean.is_some() && !(self.prefetch_enabled && self.has_prefetchers)
    }

    /// Whether the record-at-a-time calls (`access`, `run_block_served`, `prefetch_host`)
    /// take the lean engine: as `lean_ready_blocks`, on the shapes beyond non-inclusive
    /// power-of-two caches only when asked (`Hierarchy::set_lean_engine_on_access_path`).
    #[inline]
    pub(super) fn lean_ready(&self) -> bool {
        self.lean_ready_blocks()
            && (self.lean_on_access_path || self.lean.as_ref().is_some_and(|p| !p.extended))
    }

    /// The lean view of every cache instance, built once per hierarchy (see `UnitCache`).
    fn build_units(&mut self, plan: &LeanPlan) -> Vec<Unit> {
        let mut units = Vec::with_capacity(plan.units.len());
        for &(lv, inst) in &plan.units {
            let level = &mut self.levels[lv];
            let parts: LeanParts = level.caches[inst]
                .lean_parts()
                .expect("LeanPlan admits only LRU caches with recency words");
            let ways = parts.ways as usize;
            let (start, n_uppers) = plan.uppers.get(units.len()).copied().unwrap_or((0, 0));
            units.push(Unit {
                lines: parts.lines,
                meta: parts.meta,
                order: parts.order,
                counters: &mut level.counters[inst] as *mut Counters,
                set_mask: parts.set_mask.unwrap_or(0),
                geom: if parts.set_mask.is_some() {
                    std::ptr::null()
                } else {
                    parts.geom
                },
                inclusive: plan.inclusive,
                // The plan's vector never changes after `for_hierarchy`, and lives as long as
                // the hierarchy (a clone rebuilds its units from its own plan).
                uppers: plan.upper_units.as_ptr().wrapping_add(start),
                n_uppers,
                ways,
                valid: parts.valid,
                capacity: parts.capacity,
                way_mask: (1u32 << ways) - 1,
                victim_shift: 4 * (parts.ways - 1),
                wide: ways > 8,
                order_mask: if ways == 16 {
                    u64::MAX
                } else {
                    (1u64 << (4 * ways)) - 1
                },
                // The level's state over all its instances: private levels of cores whose
                // references interleave (a whole system's bursts) share the host's caches.
                host_prefetch: parts.state_bytes * level.caches.len() >= HOST_PREFETCH_MIN_STATE,
            });
        }
        units
    }

    fn ensure_units(&mut self, plan: &LeanPlan) {
        if self.lean_units.0.is_none() {
            let units = self.build_units(plan);
            self.lean_units.1 = plan
                .paths
                .iter()
                .map(|pair| {
                    pair.map(|p| {
                        let mut list = PrefetchList::default();
                        for &u in &p.units[..p.len as usize] {
                            if units[u as usize].host_prefetch {
                                list.units[list.len as usize] = u;
                                list.len += 1;
                            }
                        }
                        list
                    })
                })
                .collect();
            self.lean_units.0 = Some(units);
        }
    }

    /// Bring into the host's caches the simulated sets a coming record will visit, at the
    /// levels too big to stay there (`HOST_PREFETCH_MIN_STATE`): what `run_block` does for
    /// records `AHEAD` places on, for a caller that feeds records one at a time but knows its
    /// next ones (the system engine, once it can translate them).
    #[inline]
    pub(super) fn host_prefetch_lean(&mut self, r: &Record) {
        if self.lean_units.0.is_none() {
            let plan = self.lean.take().expect("lean_ready checked");
            self.ensure_units(&plan);
            self.lean = Some(plan);
        }
        let units = self.lean_units.0.as_deref().expect("built above");
        let core = if self.cores == 1 {
            0
        } else {
            r.thread as usize % self.cores
        };
        let list = &self.lean_units.1[core][r.kind.is_instruction() as usize];
        host_prefetch(units, list, r.addr >> self.line_shift);
    }

    /// One record through the lean engine (`lean_ready`); returns where its last line was
    /// served, as `access` does. The whole-system engine sends records one at a time, with
    /// translation between them, so this is its path to the lean engine.
    #[inline]
    pub(super) fn access_lean(&mut self, r: &Record) -> u8 {
        if self.lean_units.0.is_none() {
            let plan = self.lean.take().expect("lean_ready checked");
            self.ensure_units(&plan);
            self.lean = Some(plan);
        }
        // The general path's first-level shortcut relies on epochs this path does not keep.
        self.last_stale = true;
        let plan = self.lean.as_ref().expect("lean_ready checked");
        let units = self.lean_units.0.as_deref().expect("built above");
        let core = if self.cores == 1 {
            0
        } else {
            r.thread as usize % self.cores
        };
        let path = &plan.paths[core][r.kind.is_instruction() as usize];
        let first = r.addr >> self.line_shift;
        let end = r.addr.saturating_add(r.size.max(1) as u64 - 1) >> self.line_shift;
        self.records += 1;
        let lines = end - first + 1;
        self.line_accesses += lines;
        if path.len == 0 {
            self.unserved += lines;
            return SERVED_BY_MEMORY;
        }
        let (mut slot, mut depth) = (0, 0);
        for line in first..=end {
            // SAFETY: the units point into this hierarchy's own arrays (`UnitCache`); every
            // index is a set of the unit's own geometry.
            (slot, depth) = unsafe {
                access_line::<false>(units, path, &mut self.memory, line, r.kind, r.privileged)
            };
        }
        // The first level's last hit, as the general path keeps it (`holds_last_hit` reads
        // it; `repeat_last_hit_lean` applies more hits to it): the record's last line, filled
        // there if it missed (every level write-allocates).
        let u = &units[path.units[0] as usize];
        let set = set_of(u, end);
        self.last[core][r.kind.is_instruction() as usize] = LastLine {
            line: end,
            slot: Slot {
                set,
                way: slot - set * u.ways,
                index: slot,
            },
            touched: false,
            epoch: 0,
        };
        if depth == path.len as usize {
            SERVED_BY_MEMORY
        } else {
            plan.units[path.units[depth] as usize].0 as u8
        }
    }

    /// `run_block` for a hierarchy the lean engine handles (`lean_ready`); `sink` learns where
    /// each record was served (`()` when nobody asks: the calls compile away).
    ///
    /// Dispatch (`crate::isa`): the loop below is compiled twice, for baseline x86-64 and with
    /// AVX2/BMI; the CPU picks one copy per block.
    #[inline(never)]
    pub(super) fn run_block_lean<R: LeanInput + ?Sized, S: ServedSink>(
        &mut self,
        recs: &R,
        sink: &mut S,
    ) {
        #[cfg(target_arch = "x86_64")]
        if crate::isa::avx2() {
            // SAFETY: `isa::avx2` checked that the CPU has every feature the copy enables.
            unsafe { self.run_block_lean_avx2(recs, sink) };
            return;
        }
        self.run_block_lean_in::<R, S, false>(recs, sink);
    }

    /// `run_block_lean_in` compiled with AVX2, BMI1/2, LZCNT and POPCNT (everything it inlines,
    /// which is the whole loop but `write_back` and `count_privileged`, gets them).
    ///
    /// SAFETY (caller): the CPU supports those features.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn run_block_lean_avx2<R: LeanInput + ?Sized, S: ServedSink>(
        &mut self,
        recs: &R,
        sink: &mut S,
    ) {
        self.run_block_lean_in::<R, S, true>(recs, sink);
    }

    /// The loop of `run_block_lean`; `V`: whether the tag scans use AVX2 (only inside
    /// `run_block_lean_avx2`).
    #[inline(always)]
    fn run_block_lean_in<R: LeanInput + ?Sized, S: ServedSink, const V: bool>(
        &mut self,
        recs: &R,
        sink: &mut S,
    ) {
        let plan = self.lean.take().expect("lean_ready checked");
        self.ensure_units(&plan);
        let units = self.lean_units.0.take().expect("built above");
        let prefetch_lists = std::mem::take(&mut self.lean_units.1);
        // Traffic to and from memory, written back to `self` after the block.
        let mut memory = self.memory;
        let line_shift = self.line_shift;
        let cores = self.cores;
        let core_of = |t: u32| if cores == 1 { 0 } else { t as usize % cores };
        let (mut records, mut line_accesses, mut unserved) = (0u64, 0u64, 0u64);
        let n = recs.len();
        let mut i = 0;
        while i < n {
            if i + AHEAD < n {
                let ahead = recs.at(i + AHEAD);
                let line = ahead.addr >> line_shift;
                if line != recs.addr(i + AHEAD - 1) >> line_shift {
                    let list = &prefetch_lists[core_of(ahead.thread)]
                        [ahead.kind.is_instruction() as usize];
                    host_prefetch(&units, list, line);
                }
            }
            let r = recs.at(i);
            let core = core_of(r.thread);
            let class = r.kind.is_instruction() as usize;
            let path = &plan.paths[core][class];
            let first = r.addr >> line_shift;
            let end = r.addr.saturating_add(r.size.max(1) as u64 - 1) >> line_shift;
            records += 1;
            i += 1;
            let level_at = |d: usize| {
                if d == path.len as usize {
                    SERVED_BY_MEMORY
                } else {
                    plan.units[path.units[d] as usize].0 as u8
                }
            };
            if path.len == 0 {
                let lines = end - first + 1;
                line_accesses += lines;
                unserved += lines;
                sink.record_after(SERVED_BY_MEMORY, &memory);
                continue;
            }
            if first != end {
                // A record spanning lines is one access per line.
                let mut line = first;
                loop {
                    line_accesses += 1;
                    // SAFETY: as above; every index is a set of the unit's own geometry.
                    let (_, d) = unsafe {
                        access_line::<V>(&units, path, &mut memory, line, r.kind, r.privileged)
                    };
                    if line == end {
                        sink.record_after(level_at(d), &memory);
                        break;
                    }
                    line += 1;
                }
                continue;
            }
            line_accesses += 1;
            // SAFETY: as above.
            let (slot, d) =
                unsafe { access_line::<V>(&units, path, &mut memory, first, r.kind, r.privileged) };
            sink.record_after(level_at(d), &memory);
            // The records that follow on the same line, core and class are first-level hits on
            // the slot just served (nothing else has touched that cache since), and the line
            // is already its set's most recent: applying them together leaves exactly the
            // counters and metadata that applying them one by one would.
            if i == n || recs.addr(i) >> line_shift != first {
                continue;
            }

            // Per-kind counts in 16-bit lanes of one register (so a run is cut at 65,535
            // records).
            let limit = n.min(i + 0xFFFF);
            // A run is of one mode too, so that its privileged accesses are counted at once
            // below (the flag is in the record already loaded; a user trace never cuts here).
            let privileged = r.privileged;
            let same_stream = |x: &Record| {
                x.kind.is_instruction() as usize == class
                    && core_of(x.thread) == core
                    && x.privileged == privileged
            };
            let (run, lanes) = recs.same_line_run(i, limit, first, line_shift, same_stream);
            let j = i + run;
            let per_kind = [0, 1, 2, 3].map(|k| (lanes >> (16 * k)) & 0xFFFF);
            if j > i {
                let count = (j - i) as u64;
                // SAFETY: `slot` is the first level's slot holding `first` (from access_line).
                unsafe { repeat_hits(&units[path.units[0] as usize], slot, &per_kind) };
                if privileged {
                    let c = units[path.units[0] as usize].counters;
                    // SAFETY: the unit's counters live in this hierarchy (`UnitCache`).
                    unsafe { (*c).privileged.accesses += count };
                }
                sink.repeat(level_at(0), count as usize);
                records += count;
                line_accesses += count;
                i = j;
            }
        }
        self.memory = memory;
        self.records += records;
        self.line_accesses += line_accesses;
        self.unserved += unserved;
        // The lean engine keeps no replacement epochs, so no shortcut remembered by the
        // general path may outlive this block.
        for l in &mut self.last {
            *l = [LastLine::default(); 2];
        }
        self.lean_units.0 = Some(units);
        self.lean_units.1 = prefetch_lists;
        self.lean = Some(plan);
    }
}

impl Hierarchy {
    /// `repeat_first_hits` on the lean engine: `per_kind` more demand hits (`privileged` of
    /// them privileged) on `line`, the first-level hit `access_lean` left in `last` for `core`
    /// and `class`, if that slot still holds it and it is not a tagged prefetch. The line moves
    /// to its set's front again: a no-op when nothing touched the set since, and this engine
    /// keeps no epochs to tell. Returns false, changing nothing, when the slot no longer holds
    /// the line.
    pub(super) fn repeat_last_hit_lean(
        &mut self,
        core: usize,
        class: usize,
        line: u64,
        per_kind: &[u64; 4],
        privileged: u64,
    ) -> bool {
        let last = self.last[core][class];
        let (Some(plan), Some(units)) = (self.lean.as_ref(), self.lean_units.0.as_deref()) else {
            return false;
        };
        let path = &plan.paths[core][class];
        if last.line != line || path.len == 0 {
            return false;
        }
        let u = &units[path.units[0] as usize];
        debug_assert!(last.slot.index < u.capacity && last.slot.way < u.ways);
        // SAFETY: `last` holds a slot of this cache (left by `access_lean` or the general
        // path, on the same arrays), and the units point into this hierarchy's own arrays.
        unsafe {
            if *u.lines.add(last.slot.index) != line
                || (*u.meta.add(last.slot.index)).flags & flags::PREFETCHED != 0
            {
                return false;
            }
            let o = u.order.add(last.slot.set);
            *o = move_to_front(*o, last.slot.way as u64);
            repeat_hits(u, last.slot.index, per_kind);
            (*u.counters).privileged.accesses += privileged;
        }
        true
    }
}

/// Where the records of a block were served, for a caller that asks (the system engine).
pub(crate) trait ServedSink {
    fn record(&mut self, served: u8);
    /// `n` records in a row served at `served`.
    fn repeat(&mut self, served: u8, n: usize);
    /// `record`, told the block's memory traffic so far (this access's included).
    #[inline(always)]
    fn record_after(&mut self, served: u8, _memory: &MemoryStats) {
        self.record(served);
    }
}

/// Where each access was served, and the memory traffic of those that made any, by the access's
/// index (`Hierarchy::run_block_served_traffic`).
pub(super) struct TrafficSink<'a> {
    pub served: &'a mut Vec<u8>,
    pub traffic: &'a mut Vec<(u32, MemoryStats)>,
    /// The traffic before the latest access recorded.
    pub last: MemoryStats,
}

impl ServedSink for TrafficSink<'_> {
    #[inline(always)]
    fn record(&mut self, served: u8) {
        self.served.push(served);
    }
    /// Repeats are first-level hits: no traffic.
    #[inline(always)]
    fn repeat(&mut self, served: u8, n: usize) {
        self.served.extend(std::iter::repeat_n(served, n));
    }
    #[inline(always)]
    fn record_after(&mut self, served: u8, memory: &MemoryStats) {
        if *memory != self.last {
            self.traffic
                .push((self.served.len() as u32, memory.since(&self.last)));
            self.last = *memory;
        }
        self.served.push(served);
    }
}

impl ServedSink for () {
    #[inline(always)]
    fn record(&mut self, _: u8) {}
    #[inline(always)]
    fn repeat(&mut self, _: u8, _: usize) {}
}

impl ServedSink for Vec<u8> {
    #[inline(always)]
    fn record(&mut self, served: u8) {
        self.push(served);
    }
    #[inline(always)]
    fn repeat(&mut self, served: u8, n: usize) {
        self.extend(std::iter::repeat_n(served, n));
    }
}
