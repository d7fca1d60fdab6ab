//! The lean engine's per-line kernels: the tag scans (SSE2, AVX2 or plain), lookup, one demand
//! access with its fills, evictions and write-backs, and repeated first-level hits. Each is
//! inlined into `run_block_lean_in`'s loop; the caller holds the safety conditions stated on
//! each.

use super::*;

/// Mask of the `W` (8 or 16) tags from `tags` equal to `value` (bit `w` for tag `w`). `V`: use
/// AVX2 (four tags per compare), only inside `run_block_lean_avx2`; otherwise SSE2, which every
/// x86-64 CPU has (two tags per compare), or plain comparisons on other architectures.
///
/// SAFETY (caller): `W` tags from `tags` are inside the allocation (sets are followed by
/// `SCAN_PAD` padding tags); `V` only where the CPU has AVX2.
#[inline(always)]
pub(crate) unsafe fn scan<const W: usize, const V: bool>(tags: *const u64, value: u64) -> u32 {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // LLVM does not vectorise the scalar loop below into either of these.
        use core::arch::x86_64::*;
        let mut mask = 0u32;
        let mut k = 0;
        if V || cfg!(target_feature = "avx2") {
            let want = _mm256_set1_epi64x(value as i64);
            while k < W {
                let t = _mm256_loadu_si256(tags.add(k) as *const __m256i);
                let eq = _mm256_cmpeq_epi64(t, want);
                mask |= (_mm256_movemask_pd(_mm256_castsi256_pd(eq)) as u32) << k;
                k += 4;
            }
        } else {
            let want = _mm_set1_epi64x(value as i64);
            while k < W {
                let t = _mm_loadu_si128(tags.add(k) as *const __m128i);
                mask |= (sse2_eq64_mask(t, want) as u32) << k;
                k += 2;
            }
        }
        mask
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let set = unsafe { &*(tags as *const [u64; W]) };
        let mut mask = 0u32;
        for (w, &t) in set.iter().enumerate() {
            mask |= ((t == value) as u32) << w;
        }
        mask
    }
}

/// Two bits: bit `i` set where the 64-bit lanes `i` of `a` and `b` are equal. SSE2 has no 64-bit
/// compare (`pcmpeqq` is SSE4.1): both 32-bit halves equal is the 32-bit compare ANDed with
/// itself halves-swapped.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn sse2_eq64_mask(
    a: core::arch::x86_64::__m128i,
    b: core::arch::x86_64::__m128i,
) -> i32 {
    use core::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        let e = _mm_cmpeq_epi32(a, b);
        let both = _mm_and_si128(e, _mm_shuffle_epi32::<0b10_11_00_01>(e));
        _mm_movemask_pd(_mm_castsi128_pd(both))
    }
}

#[inline(always)]
pub(super) unsafe fn scan_set<const V: bool>(u: &Unit, base: usize, value: u64) -> u32 {
    let tags = unsafe { u.lines.add(base) };
    // Two widths only: a 12-way set is scanned as 16 (the extra tags are masked off), which
    // costs less than choosing among four widths on every lookup.
    let mask = unsafe {
        if u.wide {
            scan::<16, V>(tags, value)
        } else {
            scan::<8, V>(tags, value)
        }
    };
    mask & u.way_mask
}

/// The set of `line` in `u`: a mask of the line number, or (a set count that is not a power of
/// two, or slices) the geometry's own index, as `Cache::set_of_line` computes it.
#[inline(always)]
pub(super) fn set_of(u: &Unit, line: u64) -> usize {
    if u.geom.is_null() {
        (line & u.set_mask) as usize
    } else {
        // SAFETY: `geom` points at the cache's own geometry (`Unit`), which outlives the unit.
        unsafe { (*u.geom).set_of_line(line) as usize }
    }
}

/// The invalid ways of the set at `base`, or 0 when the cache is full (most of any long run).
#[inline(always)]
pub(super) unsafe fn free_ways<const V: bool>(u: &Unit, base: usize) -> u32 {
    unsafe {
        if *u.valid < u.capacity {
            scan_set::<V>(u, base, INVALID)
        } else {
            0
        }
    }
}

/// Set, first slot, hit mask and (on a miss) invalid-way mask of `line` in `u`. Once the cache
/// is full, which is most of any long run, a miss skips the search for invalid ways.
#[inline(always)]
pub(super) unsafe fn lookup<const V: bool>(u: &Unit, line: u64) -> (usize, usize, u32, u32) {
    let set = set_of(u, line);
    let base = set * u.ways;
    unsafe {
        let hit = scan_set::<V>(u, base, line);
        let free = if hit == 0 { free_ways::<V>(u, base) } else { 0 };
        (set, base, hit, free)
    }
}

#[inline(always)]
pub(super) fn host_prefetch(units: &[Unit], list: &PrefetchList, line: u64) {
    for &k in &list.units[..list.len as usize] {
        let u = &units[k as usize];
        let set = set_of(u, line);
        let base = set * u.ways;
        // Prefetch hints never fault, so plain wrapping arithmetic on the pointers is enough.
        prefetch_read(u.lines.wrapping_add(base));
        if u.wide {
            prefetch_read(u.lines.wrapping_add(base + 8));
        }
        prefetch_read(u.meta.wrapping_add(base));
        prefetch_read(u.order.wrapping_add(set));
    }
}

/// One demand access to `line`; returns the first level's slot holding it afterwards and the
/// depth on the path that served it (the path's length for memory).
/// Same steps as `Hierarchy::access_line` for these configurations: look up level by level
/// until a hit (counting each), then fill every level that missed, deepest first, reusing the
/// lookup's scan; a store dirties the first level's copy.
///
/// The record's mode picks one of two compiled copies (`P`), so the privileged counting costs a
/// user record one branch here and nothing per level, fill or eviction.
#[inline(always)]
pub(super) unsafe fn access_line<const V: bool>(
    units: &[Unit],
    path: &LeanPath,
    memory: &mut MemoryStats,
    line: u64,
    kind: Kind,
    privileged: bool,
) -> (usize, usize) {
    unsafe {
        if privileged {
            access_line_in::<true, V>(units, path, memory, line, kind)
        } else {
            access_line_in::<false, V>(units, path, memory, line, kind)
        }
    }
}

/// `access_line` for a record of mode `P` (privileged when true).
#[inline(always)]
pub(super) unsafe fn access_line_in<const P: bool, const V: bool>(
    units: &[Unit],
    path: &LeanPath,
    memory: &mut MemoryStats,
    line: u64,
    kind: Kind,
) -> (usize, usize) {
    let n = path.len as usize;
    // Written at each depth that misses before it is read (zeroing it cost more than a level's
    // lookup).
    let mut missed = [std::mem::MaybeUninit::<(usize, usize, u32)>::uninit(); MAX_DEPTH];
    let mut slot = 0;
    let mut d = 0;
    let served;
    unsafe {
        while d < n {
            let u = units.get_unchecked(*path.units.get_unchecked(d) as usize);
            let (set, base, hit, free) = lookup::<V>(u, line);
            let kc = &mut (*u.counters).by_kind[kind as usize];
            kc.accesses += 1;
            if hit != 0 {
                kc.hits += 1;
                let way = hit.trailing_zeros() as usize;
                slot = base + way;
                let o = u.order.add(set);
                *o = move_to_front(*o, way as u64);
                let m = &mut *u.meta.add(slot);
                m.reuse = m.reuse.saturating_add(1);
                if m.flags & flags::PREFETCHED != 0 {
                    // Prefetched while the prefetchers were on; they are off now.
                    m.flags &= !flags::PREFETCHED;
                    (*u.counters).prefetches_useful += 1;
                }
                break;
            }
            kc.misses += 1;
            missed.get_unchecked_mut(d).write((set, base, free));
            d += 1;
        }
        if d == n {
            memory.reads += 1;
        }
        served = d;
        if P {
            count_privileged(units, path, served);
        }
        let meta = LineMeta {
            asid: 0,
            flags: if P { flags::PRIVILEGED } else { 0 },
            reuse: 0,
        };
        while d > 0 {
            d -= 1;
            let u = units.get_unchecked(*path.units.get_unchecked(d) as usize);
            let (set, base, mut free) = missed.get_unchecked(d).assume_init();
            if u.inclusive {
                // A deeper fill's back-invalidation may have freed a way of this set since the
                // lookup (`Hierarchy::fill` looks the set up again).
                free = free_ways::<V>(u, base);
            }
            slot = place::<P>(units, path, memory, d, u, set, base, free, line, meta);
        }
        if kind.is_write() {
            let u = units.get_unchecked(path.units[0] as usize);
            // The line is still there in an inclusive hierarchy too: a back-invalidation
            // removes a victim of a deeper fill, never the line being filled, and a write-back
            // into an inclusive level always hits (what is above is below), so it evicts nothing.
            debug_assert_eq!(*u.lines.add(slot), line);
            (*u.meta.add(slot)).flags |= flags::DIRTY;
        }
    }
    (slot, served)
}

/// Inclusive: `line`, evicted from `u`, leaves every cache above it on any core's path
/// (`Hierarchy::evicted`), each copy removed counted as a back-invalidation of `u`. Returns
/// whether a removed copy was dirty (it is newer, and leaves with the victim).
///
/// SAFETY (caller): as `access_line`; `u` is one of `units`.
#[inline(never)]
pub(super) unsafe fn back_invalidate(units: &[Unit], u: &Unit, line: u64) -> bool {
    let mut dirty = false;
    for k in 0..u.n_uppers {
        unsafe {
            let up = units.get_unchecked(*u.uppers.add(k) as usize);
            let base = set_of(up, line) * up.ways;
            let hit = scan_set::<false>(up, base, line);
            if hit != 0 {
                // As `Cache::invalidate`: the way becomes invalid with default metadata; LRU's
                // recency word is left as it is (an invalid way is refilled before any victim).
                let slot = base + hit.trailing_zeros() as usize;
                *up.lines.add(slot) = INVALID;
                let m = std::mem::take(&mut *up.meta.add(slot));
                *up.valid -= 1;
                (*u.counters).back_invalidations += 1;
                dirty |= m.dirty();
            }
        }
    }
    dirty
}

/// The privileged side of a demand access that `access_line` served at depth `served`: an
/// access and a miss at every depth above it, an access (the hit) there. Out of line: user
/// records never come here.
///
/// SAFETY (caller): as `access_line`.
#[cold]
#[inline(never)]
pub(super) unsafe fn count_privileged(units: &[Unit], path: &LeanPath, served: usize) {
    for d in 0..(served + 1).min(path.len as usize) {
        unsafe {
            let c = &mut (*units
                .get_unchecked(*path.units.get_unchecked(d) as usize)
                .counters)
                .privileged;
            c.accesses += 1;
            c.misses += (d < served) as u64;
        }
    }
}

/// Put `line` (absent) into its set of the unit at depth `d`: an invalid way if any, else the
/// least recent; a valid line pushed out is counted (as caused by an access of mode `P`,
/// privileged when true, which started this fill) and, if dirty, written back below.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn place<const P: bool>(
    units: &[Unit],
    path: &LeanPath,
    memory: &mut MemoryStats,
    d: usize,
    u: &Unit,
    set: usize,
    base: usize,
    free: u32,
    line: u64,
    meta: LineMeta,
) -> usize {
    unsafe {
        let o = u.order.add(set);
        let way;
        if free != 0 {
            way = free.trailing_zeros() as usize;
            *o = move_to_front(*o, way as u64);
        } else {
            // The least recent way moves from the last position to the first: a rotation of
            // the set's nibbles (the general move-to-front costs three times the instructions).
            way = ((*o >> u.victim_shift) & 0xF) as usize;
            *o = ((*o << 4) & u.order_mask) | (*o & !u.order_mask) | way as u64;
        }
        let slot = base + way;
        let old = *u.lines.add(slot);
        let mut old_meta = *u.meta.add(slot);
        *u.lines.add(slot) = line;
        *u.meta.add(slot) = meta;
        if old == INVALID {
            *u.valid += 1;
        } else {
            (*u.counters).evictions += 1;
            if P {
                (*u.counters).privileged.evictions += 1;
            }
            if u.n_uppers != 0 && back_invalidate(units, u, old) {
                old_meta.flags |= flags::DIRTY;
            }
            if old_meta.dirty() {
                (*u.counters).writebacks += 1;
                write_back::<P>(units, path, memory, d + 1, old, old_meta);
            }
        }
        slot
    }
}

/// A dirty line arrives at depth `d` (memory past the last level): dirtied where present
/// without a replacement update, else allocated dirty (`Hierarchy::write_back`); `P` is the
/// mode of the demand access whose fill evicted it.
#[inline(never)]
pub(super) unsafe fn write_back<const P: bool>(
    units: &[Unit],
    path: &LeanPath,
    memory: &mut MemoryStats,
    d: usize,
    line: u64,
    meta: LineMeta,
) {
    if d >= path.len as usize {
        memory.writes += 1;
        return;
    }
    unsafe {
        let u = units.get_unchecked(path.units[d] as usize);
        (*u.counters).writebacks_received += 1;
        // The baseline scan: this function is not inlined into the AVX2 copy of the loop.
        let (set, base, hit, free) = lookup::<false>(u, line);
        if hit != 0 {
            (*u.meta.add(base + hit.trailing_zeros() as usize)).flags |= flags::DIRTY;
            return;
        }
        (*u.counters).writeback_fills += 1;
        let meta = LineMeta {
            flags: (meta.flags & flags::PRIVILEGED) | flags::DIRTY,
            reuse: 0,
            ..meta
        };
        place::<P>(units, path, memory, d, u, set, base, free, line, meta);
    }
}

/// `per_kind` more demand hits on the line in `slot` of the first level `u`, which the last
/// access left there as its set's most recent (so the recency word does not change).
#[inline(always)]
pub(super) unsafe fn repeat_hits(u: &Unit, slot: usize, per_kind: &[u64; 4]) {
    unsafe {
        let c = &mut *u.counters;
        let mut count = 0;
        for (k, &n) in per_kind.iter().enumerate() {
            c.by_kind[k].accesses += n;
            c.by_kind[k].hits += n;
            count += n;
        }
        let m = &mut *u.meta.add(slot);
        m.reuse = u8::try_from(m.reuse as u64 + count).unwrap_or(u8::MAX);
        if per_kind[Kind::Store as usize] + per_kind[Kind::Modify as usize] > 0 {
            m.flags |= flags::DIRTY;
        }
    }
}
