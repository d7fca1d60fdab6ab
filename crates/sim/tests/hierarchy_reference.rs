//! The optimised hierarchy (recency words, reused lookups, batched same-line runs, host
//! prefetching) against a deliberately naive reference written from the semantics in
//! `cache/hierarchy.rs`'s header: per-set vectors of (line, dirty, last-use), linear searches,
//! one record at a time. Property tests drive both with random traces over small caches (many
//! conflicts) in every inclusion mode, write policy and core count, and compare every counter,
//! the privileged side included (records of both modes mixed; an eviction belongs to the mode
//! of the demand access whose fill chain caused it).
mod common;
use common::level;

use cachecolor_sim::cache::{Hierarchy, HierarchyConfig, Inclusion, Serves, WritePolicy};
use cachecolor_sim::config::Size;
use cachecolor_sim::trace::{Kind, Record, RecordColumns};
use proptest::prelude::*;

#[derive(Clone, Default, Debug, PartialEq)]
struct Counts {
    acc: [u64; 4],
    hit: [u64; 4],
    miss: [u64; 4],
    evictions: u64,
    writebacks: u64,
    wb_received: u64,
    wb_fills: u64,
    write_throughs: u64,
    back_inval: u64,
    victim_fills: u64,
    /// Privileged demand accesses, misses, and evictions caused by privileged accesses.
    p_acc: u64,
    p_miss: u64,
    p_evictions: u64,
}

#[derive(Clone, Copy, Debug)]
struct Line {
    line: u64,
    dirty: bool,
    used: u64,
}

struct RefCache {
    sets: u64,
    ways: usize,
    data: Vec<Vec<Line>>,
}

impl RefCache {
    fn new(size: u64, ways: usize) -> Self {
        let sets = size / 64 / ways as u64;
        RefCache {
            sets,
            ways,
            data: vec![Vec::new(); sets as usize],
        }
    }
    fn set(&mut self, line: u64) -> &mut Vec<Line> {
        &mut self.data[(line % self.sets) as usize]
    }
    fn has(&mut self, line: u64) -> bool {
        self.set(line).iter().any(|l| l.line == line)
    }
    /// Insert (absent) line; returns the LRU victim if the set was full.
    fn insert(&mut self, line: u64, dirty: bool, now: u64) -> Option<Line> {
        let ways = self.ways;
        let s = self.set(line);
        let victim = if s.len() == ways {
            let i = (0..s.len()).min_by_key(|&i| s[i].used).unwrap();
            Some(s.remove(i))
        } else {
            None
        };
        s.push(Line {
            line,
            dirty,
            used: now,
        });
        victim
    }
    fn remove(&mut self, line: u64) -> Option<Line> {
        let s = self.set(line);
        let i = s.iter().position(|l| l.line == line)?;
        Some(s.remove(i))
    }
}

struct RefLevel {
    serves: Serves,
    shared: bool,
    write_back: bool,
    write_allocate: bool,
    caches: Vec<RefCache>,
    counts: Vec<Counts>,
}

struct Reference {
    levels: Vec<RefLevel>,
    cores: usize,
    inclusion: Inclusion,
    now: u64,
    mem_reads: u64,
    mem_writes: u64,
}

impl Reference {
    fn new(cfg: &HierarchyConfig) -> Self {
        let n = cfg.levels.len();
        let levels = cfg
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let shared = l.shared.unwrap_or(i == n - 1);
                let k = if shared { 1 } else { cfg.cores as usize };
                RefLevel {
                    serves: l.serves,
                    shared,
                    write_back: l.write_policy == WritePolicy::WriteBack,
                    write_allocate: l.write_allocate,
                    caches: (0..k)
                        .map(|_| RefCache::new(l.size.0, l.ways as usize))
                        .collect(),
                    counts: vec![Counts::default(); k],
                }
            })
            .collect();
        Reference {
            levels,
            cores: cfg.cores as usize,
            inclusion: cfg.inclusion,
            now: 0,
            mem_reads: 0,
            mem_writes: 0,
        }
    }

    fn path(&self, core: usize, instr: bool) -> Vec<(usize, usize)> {
        let want = if instr {
            Serves::Instruction
        } else {
            Serves::Data
        };
        self.levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.serves == want || l.serves == Serves::Unified)
            .map(|(i, l)| (i, if l.shared { 0 } else { core }))
            .collect()
    }

    fn last_level(&self) -> usize {
        self.levels.len() - 1
    }

    fn access(&mut self, r: &Record) {
        let core = r.thread as usize % self.cores;
        let first = r.addr / 64;
        let last = (r.addr + r.size.max(1) as u64 - 1) / 64;
        for line in first..=last {
            self.access_line(core, r.kind, line, r.privileged);
        }
    }

    fn access_line(&mut self, core: usize, kind: Kind, line: u64, privileged: bool) {
        self.now += 1;
        let path = self.path(core, kind == Kind::IFetch);
        let exclusive = self.inclusion == Inclusion::Exclusive;
        let ll = self.last_level();
        let mut hit_at = path.len();
        let mut moved_dirty = false;
        for (d, &(lv, c)) in path.iter().enumerate() {
            let k = kind as usize;
            self.levels[lv].counts[c].acc[k] += 1;
            self.levels[lv].counts[c].p_acc += privileged as u64;
            if self.levels[lv].caches[c].has(line) {
                self.levels[lv].counts[c].hit[k] += 1;
                let now = self.now;
                let s = self.levels[lv].caches[c].set(line);
                s.iter_mut().find(|l| l.line == line).unwrap().used = now;
                hit_at = d;
                if exclusive && lv == ll && d > 0 {
                    moved_dirty = self.levels[lv].caches[c].remove(line).unwrap().dirty;
                }
                break;
            }
            self.levels[lv].counts[c].miss[k] += 1;
            self.levels[lv].counts[c].p_miss += privileged as u64;
        }
        if hit_at == path.len() {
            self.mem_reads += 1;
        }
        let write = matches!(kind, Kind::Store | Kind::Modify);
        let mut first_fill = true;
        for d in (0..hit_at).rev() {
            let (lv, _) = path[d];
            if exclusive && lv == ll {
                continue;
            }
            if write && !self.levels[lv].write_allocate {
                continue;
            }
            let dirty = first_fill && moved_dirty;
            first_fill = false;
            self.fill(&path, d, line, dirty, privileged);
        }
        if write {
            let mut done = false;
            for &(lv, c) in &path {
                if self.levels[lv].caches[c].has(line) {
                    if self.levels[lv].write_back {
                        let s = self.levels[lv].caches[c].set(line);
                        s.iter_mut().find(|l| l.line == line).unwrap().dirty = true;
                        done = true;
                        break;
                    }
                    self.levels[lv].counts[c].write_throughs += 1;
                }
            }
            if !done {
                self.mem_writes += 1;
            }
        }
    }

    /// `privileged`: the mode of the demand access whose chain this fill belongs to.
    fn fill(
        &mut self,
        path: &[(usize, usize)],
        d: usize,
        line: u64,
        dirty: bool,
        privileged: bool,
    ) {
        let (lv, c) = path[d];
        let now = self.now;
        if let Some(v) = self.levels[lv].caches[c].insert(line, dirty, now) {
            self.evicted(path, d, v, privileged);
        }
    }

    fn evicted(&mut self, path: &[(usize, usize)], d: usize, mut v: Line, privileged: bool) {
        let (lv, c) = path[d];
        self.levels[lv].counts[c].evictions += 1;
        self.levels[lv].counts[c].p_evictions += privileged as u64;
        if self.inclusion == Inclusion::Inclusive {
            // Every cache above this one on any core's path through it.
            let mut uppers = Vec::new();
            for core in 0..self.cores {
                for instr in [false, true] {
                    let p = self.path(core, instr);
                    if let Some(pos) = p.iter().position(|&h| h == (lv, c)) {
                        for &u in &p[..pos] {
                            if !uppers.contains(&u) {
                                uppers.push(u);
                            }
                        }
                    }
                }
            }
            for (ul, uc) in uppers {
                if let Some(x) = self.levels[ul].caches[uc].remove(v.line) {
                    self.levels[lv].counts[c].back_inval += 1;
                    v.dirty |= x.dirty;
                }
            }
        }
        let below = d + 1;
        if self.inclusion == Inclusion::Exclusive
            && below < path.len()
            && path[below].0 == self.last_level()
        {
            if v.dirty {
                self.levels[lv].counts[c].writebacks += 1;
            }
            let (bl, bc) = path[below];
            self.levels[bl].counts[bc].victim_fills += 1;
            if self.levels[bl].caches[bc].has(v.line) {
                let s = self.levels[bl].caches[bc].set(v.line);
                let e = s.iter_mut().find(|l| l.line == v.line).unwrap();
                e.dirty |= v.dirty;
            } else {
                self.fill(path, below, v.line, v.dirty, privileged);
            }
            return;
        }
        if v.dirty {
            self.levels[lv].counts[c].writebacks += 1;
            if below >= path.len() {
                self.mem_writes += 1;
                return;
            }
            let (bl, bc) = path[below];
            self.levels[bl].counts[bc].wb_received += 1;
            let ll = self.last_level();
            let next = path.get(below + 1).copied();
            if self.levels[bl].caches[bc].has(v.line) {
                let s = self.levels[bl].caches[bc].set(v.line);
                s.iter_mut().find(|l| l.line == v.line).unwrap().dirty = true;
            } else if let Some((nl, nc)) = next.filter(|&(nl, nc)| {
                self.inclusion == Inclusion::Exclusive
                    && nl == ll
                    && self.levels[nl].caches[nc].has(v.line)
            }) {
                // Exclusive: the victim cache holds the line, so the write-back lands there.
                self.levels[nl].counts[nc].wb_received += 1;
                let s = self.levels[nl].caches[nc].set(v.line);
                s.iter_mut().find(|l| l.line == v.line).unwrap().dirty = true;
            } else {
                self.levels[bl].counts[bc].wb_fills += 1;
                self.fill(path, below, v.line, true, privileged);
            }
        }
    }
}

fn config(cores: u32, inclusion: Inclusion, variant: u8) -> HierarchyConfig {
    let mut levels = vec![
        level("L1I", 512, 2, Serves::Instruction),
        level("L1D", 512, 2, Serves::Data),
        level("L2", 2048, 4, Serves::Unified),
        // 7 sets of 6 ways: neither the set count nor the associativity is a power of two.
        level("L3", 7 * 6 * 64, 6, Serves::Unified),
    ];
    match variant {
        1 => levels[1].write_policy = WritePolicy::WriteThrough,
        2 => levels[1].write_allocate = false,
        3 => {
            levels.remove(2); // two levels
        }
        4 => {
            // One unified first level shared by instruction fetches and data.
            levels.remove(0);
            levels[0].serves = Serves::Unified;
        }
        // Power-of-two set counts everywhere: the shapes the lean engine takes in
        // non-inclusive mode (`hierarchy/lean.rs`), checked here against the reference too.
        5 => levels[3] = level("L3", 8 * 4 * 64, 4, Serves::Unified),
        6 => {
            levels[3] = level("L3", 8 * 4 * 64, 4, Serves::Unified);
            levels.remove(0);
            levels[0].serves = Serves::Unified;
        }
        // Wide sets: the tag scans compare 8 or 16 tags at a time and drop the bits past the
        // set's ways; 12 ways (one 16-tag scan), 20 (two) and 64 (four, every bit kept).
        7 => {
            levels[2] = level("L2", 4 * 12 * 64, 12, Serves::Unified);
            levels[3] = level("L3", 3 * 20 * 64, 20, Serves::Unified);
        }
        8 => levels[3] = level("L3", 64 * 64, 64, Serves::Unified),
        _ => {}
    }
    HierarchyConfig {
        cores,
        line_size: 64,
        page_size: Size(4096),
        inclusion,
        seed: 0,
        prefetch_enabled: true,
        levels,
    }
}

fn compare(cfg: &HierarchyConfig, recs: &[Record]) {
    let mut fast = Hierarchy::new(cfg).unwrap();
    let lean_shape = cfg.inclusion != Inclusion::Exclusive
        && cfg
            .levels
            .iter()
            .all(|l| l.write_policy == WritePolicy::WriteBack && l.write_allocate && l.ways <= 16);
    assert_eq!(
        fast.blocks_use_lean_engine(),
        lean_shape,
        "which engine runs"
    );
    // Odd block boundaries exercise the run batching across blocks.
    for chunk in recs.chunks(37) {
        fast.run_block(chunk);
    }
    let mut slow = Reference::new(cfg);
    for r in recs {
        slow.access(r);
    }
    for (i, l) in slow.levels.iter().enumerate() {
        let got = fast.instance_stats(i);
        for (c, want) in l.counts.iter().enumerate() {
            let g = &got[c];
            let name = &g.name;
            for k in Kind::ALL {
                let gk = g.kind(k);
                assert_eq!(
                    (gk.accesses, gk.hits, gk.misses),
                    (
                        want.acc[k as usize],
                        want.hit[k as usize],
                        want.miss[k as usize]
                    ),
                    "{name} {}",
                    k.name()
                );
            }
            assert_eq!(g.evictions, want.evictions, "{name} evictions");
            assert_eq!(g.writebacks, want.writebacks, "{name} writebacks");
            assert_eq!(
                g.writebacks_received, want.wb_received,
                "{name} writebacks received"
            );
            assert_eq!(g.writeback_fills, want.wb_fills, "{name} writeback fills");
            assert_eq!(
                g.write_throughs, want.write_throughs,
                "{name} write-throughs"
            );
            assert_eq!(
                g.back_invalidations, want.back_inval,
                "{name} back-invalidations"
            );
            assert_eq!(g.victim_fills, want.victim_fills, "{name} victim fills");
            assert_eq!(
                (
                    g.privileged.accesses,
                    g.privileged.misses,
                    g.privileged.evictions
                ),
                (want.p_acc, want.p_miss, want.p_evictions),
                "{name} privileged accesses, misses, evictions"
            );
            assert_eq!(
                (g.user.accesses, g.user.misses, g.user.evictions),
                (
                    want.acc.iter().sum::<u64>() - want.p_acc,
                    want.miss.iter().sum::<u64>() - want.p_miss,
                    want.evictions - want.p_evictions
                ),
                "{name} user accesses, misses, evictions"
            );
        }
    }
    let s = fast.stats();
    assert_eq!(
        (s.memory.reads, s.memory.writes),
        (slow.mem_reads, slow.mem_writes),
        "memory traffic"
    );
    let bad = fast.check_invariants();
    assert!(bad.is_empty(), "{bad:?}");
}

fn record() -> impl Strategy<Value = Record> {
    // A small address range (many conflicts), unaligned sizes that sometimes cross lines, and
    // a bias towards repeating nearby addresses so that same-line runs occur.
    (
        0u64..96,
        0u64..64,
        prop_oneof![Just(1u16), Just(4), Just(8), Just(16), Just(64)],
        0u8..4,
        0u32..3,
    )
        .prop_map(|(line, off, size, kind, thread)| Record {
            addr: 0x1000 + line * 64 + off,
            thread,
            icount: 1,
            size,
            kind: Kind::from_u8(kind).unwrap(),
            privileged: false,
            syscall: 0,
        })
}

fn trace() -> impl Strategy<Value = Vec<Record>> {
    prop::collection::vec((record(), 1usize..6), 1..400).prop_map(|v| {
        v.into_iter()
            .flat_map(|(r, rep)| std::iter::repeat_n(r, rep))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn matches_reference_non_inclusive(recs in privileged_trace(), cores in 1u32..3, variant in 0u8..9) {
        compare(&config(cores, Inclusion::NonInclusive, variant), &recs);
    }

    #[test]
    fn matches_reference_inclusive(recs in privileged_trace(), cores in 1u32..3, variant in 0u8..9) {
        compare(&config(cores, Inclusion::Inclusive, variant), &recs);
    }

    #[test]
    fn matches_reference_exclusive(recs in privileged_trace(), cores in 1u32..3, variant in 0u8..9) {
        compare(&config(cores, Inclusion::Exclusive, variant), &recs);
    }
}

/// The lean engine against the general path on the same shapes, block by block, with a
/// prefetcher switched on and off between blocks (so runs move between the engines and lines
/// prefetched under the general path are hit under the lean one): every statistic and every
/// cache's contents, slot by slot with metadata, must be identical.
fn lean_equals_general(
    cfg: &HierarchyConfig,
    recs: &[Record],
    blocks: &[(usize, bool)],
) -> Result<(), TestCaseError> {
    let mut lean = Hierarchy::new(cfg).unwrap();
    let mut general = Hierarchy::new(cfg).unwrap();
    general.set_lean_engine(false);
    // The same blocks handed over as columns (the NumPy path), read in place by the lean
    // engine and converted to records by the general one.
    let mut columns = Hierarchy::new(cfg).unwrap();
    let mut used_lean = false;
    let mut rest = recs;
    let mut k = 0;
    while !rest.is_empty() {
        let (len, prefetch) = blocks[k % blocks.len()];
        k += 1;
        let (block, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        for h in [&mut lean, &mut general, &mut columns] {
            h.set_prefetch_enabled(prefetch);
        }
        used_lean |= lean.blocks_use_lean_engine();
        prop_assert!(!general.blocks_use_lean_engine());
        lean.run_block(block);
        general.run_block(block);
        let addr: Vec<u64> = block.iter().map(|r| r.addr).collect();
        let kind: Vec<u8> = block.iter().map(|r| r.kind as u8).collect();
        let size: Vec<u16> = block.iter().map(|r| r.size).collect();
        let thread: Vec<u32> = block.iter().map(|r| r.thread).collect();
        let icount: Vec<u32> = block.iter().map(|r| r.icount).collect();
        let privileged: Vec<u8> = block.iter().map(|r| r.privileged as u8).collect();
        let cols = RecordColumns::new(
            &addr,
            Some(&kind),
            Some(&size),
            Some(&thread),
            Some(&icount),
            Some(&privileged),
        )
        .unwrap();
        columns.run_columns(&cols);
    }
    prop_assert_eq!(columns.stats(), general.stats());
    for lv in 0..cfg.levels.len() {
        for core in 0..cfg.cores as usize {
            let a: Vec<_> = columns.cache(lv, core).valid_lines().collect();
            let b: Vec<_> = general.cache(lv, core).valid_lines().collect();
            prop_assert_eq!(a, b, "columns: contents of level {} core {}", lv, core);
        }
    }
    prop_assert!(used_lean, "the lean engine never ran");
    prop_assert_eq!(lean.stats(), general.stats());
    for lv in 0..cfg.levels.len() {
        for core in 0..cfg.cores as usize {
            let a: Vec<_> = lean.cache(lv, core).valid_lines().collect();
            let b: Vec<_> = general.cache(lv, core).valid_lines().collect();
            prop_assert_eq!(a, b, "contents of level {} core {}", lv, core);
        }
        for (a, b) in lean
            .instance_stats(lv)
            .iter()
            .zip(general.instance_stats(lv))
        {
            prop_assert_eq!(a, &b);
        }
    }
    let bad = lean.check_invariants();
    prop_assert!(bad.is_empty(), "{:?}", bad);
    Ok(())
}

/// The lean engine's shapes: `shape` picks split or unified first levels and the depth;
/// `variant` the inclusion (bit 0: inclusive, with back-invalidation) and the last level's set
/// indexing (the rest: 0 a power-of-two set count, 1 seven sets, 2 two slices of four sets, 3
/// three slices of four, 4 three slices of three, 5 two slices chosen by an XOR hash), as the
/// paper presets have them (POWER5's three-slice L2 and L3, Sandy Bridge's sliced L3).
fn lean_config(
    cores: u32,
    shape: u8,
    ways: u32,
    prefetch_level: usize,
    variant: u8,
) -> HierarchyConfig {
    let mut l3 = level("L3", 8 * 64 * 12, 12, Serves::Unified);
    let (sets, slices) = match variant >> 1 {
        1 => (7, 1),
        2 => (8, 2),
        3 => (12, 3),
        4 => (9, 3),
        5 => (8, 2),
        _ => (8, 1),
    };
    l3.size = Size(sets * 64 * 12);
    l3.slices = slices;
    if variant >> 1 == 5 {
        l3.slice_hash = cachecolor_sim::geometry::SliceHash::Xor { masks: vec![0xAC0] };
    }
    let mut levels = vec![
        level("L1I", 2 * 64 * ways as u64, ways, Serves::Instruction),
        level("L1D", 2 * 64 * ways as u64, ways, Serves::Data),
        level("L2", 4 * 64 * 16, 16, Serves::Unified),
        l3,
    ];
    match shape {
        1 => {
            levels.remove(0);
            levels[0].serves = Serves::Unified;
        }
        2 => {
            levels.truncate(2);
            levels[1].serves = Serves::Unified;
            levels[0].serves = Serves::Unified;
            levels.remove(0);
        }
        _ => {}
    }
    let p = prefetch_level.min(levels.len() - 1);
    levels[p].prefetcher = cachecolor_sim::cache::prefetch::PrefetcherKind::NextLine;
    HierarchyConfig {
        cores,
        line_size: 64,
        page_size: Size(4096),
        inclusion: if variant & 1 == 1 {
            Inclusion::Inclusive
        } else {
            Inclusion::NonInclusive
        },
        seed: 0,
        prefetch_enabled: false,
        levels,
    }
}

fn privileged_trace() -> impl Strategy<Value = Vec<Record>> {
    (trace(), prop::collection::vec(any::<bool>(), 1..50)).prop_map(|(mut recs, p)| {
        for (i, r) in recs.iter_mut().enumerate() {
            r.privileged = p[i % p.len()];
        }
        recs
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn lean_engine_equals_general_path(
        recs in privileged_trace(),
        cores in 1u32..4,
        shape in 0u8..3,
        ways in prop_oneof![Just(1u32), Just(2), Just(3), Just(8), Just(12), Just(16)],
        prefetch_level in 0usize..4,
        variant in 0u8..12,
        blocks in prop::collection::vec((1usize..120, any::<bool>()), 1..8),
    ) {
        let mut blocks = blocks;
        blocks[0].1 = false; // the first block runs on the lean engine
        let cfg = lean_config(cores, shape, ways, prefetch_level, variant);
        lean_equals_general(&cfg, &recs, &blocks)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Loads given only by address (and size), as NumPy arrays usually come: the lean engine
    /// reads these columns in place; everything must equal the general path on records.
    #[test]
    fn address_columns_equal_records(
        recs in trace(),
        shape in 0u8..3,
        ways in prop_oneof![Just(1u32), Just(4), Just(12), Just(16)],
        with_sizes in any::<bool>(),
        variant in 0u8..12,
    ) {
        let recs: Vec<Record> = recs
            .into_iter()
            .map(|r| Record {
                kind: Kind::Load,
                thread: 0,
                icount: 0,
                privileged: false,
                syscall: 0,
                size: if with_sizes { r.size } else { 1 },
                ..r
            })
            .collect();
        let cfg = lean_config(1, shape, ways, 0, variant);
        let mut general = Hierarchy::new(&cfg).unwrap();
        general.set_lean_engine(false);
        general.run_block(&recs);
        let mut columns = Hierarchy::new(&cfg).unwrap();
        prop_assert!(columns.blocks_use_lean_engine());
        let addr: Vec<u64> = recs.iter().map(|r| r.addr).collect();
        let size: Vec<u16> = recs.iter().map(|r| r.size).collect();
        let cols = RecordColumns::new(&addr, None, with_sizes.then_some(&size[..]), None, None, None)
            .unwrap();
        prop_assert!(cols.addresses_and_sizes().is_some());
        columns.run_columns(&cols);
        prop_assert_eq!(columns.stats(), general.stats());
        for lv in 0..cfg.levels.len() {
            let a: Vec<_> = columns.cache(lv, 0).valid_lines().collect();
            let b: Vec<_> = general.cache(lv, 0).valid_lines().collect();
            prop_assert_eq!(a, b, "contents of level {}", lv);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Records one at a time through `access` (as the system engine sends them), the lean
    /// engine against the general path: the level that served each record, the statistics and
    /// every line must agree, also when some records' lines are removed by coherence
    /// invalidations in between and when the prefetchers are switched on for a while (the
    /// general path then runs on the lean engine's state and back).
    #[test]
    fn single_record_access_equals_general_path(
        recs in privileged_trace(),
        cores in 1u32..4,
        shape in 0u8..3,
        ways in prop_oneof![Just(1u32), Just(2), Just(8), Just(12), Just(16)],
        prefetch_level in 0usize..4,
        invalidate_every in 3usize..40,
        prefetch_window in (0usize..200, 0usize..60),
        variant in 0u8..12,
    ) {
        let cfg = lean_config(cores, shape, ways, prefetch_level, variant);
        let mut lean = Hierarchy::new(&cfg).unwrap();
        lean.set_lean_engine_on_access_path(true);
        let mut general = Hierarchy::new(&cfg).unwrap();
        general.set_lean_engine(false);
        let (from, len) = prefetch_window;
        let mut used_lean = false;
        for (i, r) in recs.iter().enumerate() {
            let prefetch = (from..from + len).contains(&i);
            for h in [&mut lean, &mut general] {
                h.set_prefetch_enabled(prefetch);
            }
            used_lean |= lean.uses_lean_engine();
            lean.prefetch_host(r);
            prop_assert_eq!(lean.access(r), general.access(r), "record {}", i);
            if i % invalidate_every == 0 {
                let victim = recs[i / 2].addr;
                prop_assert_eq!(lean.holds(victim), general.holds(victim));
                prop_assert_eq!(lean.invalidate_line(victim), general.invalidate_line(victim));
            }
        }
        prop_assert!(used_lean || recs.len() <= from + len, "the lean engine never ran");
        prop_assert_eq!(lean.stats(), general.stats());
        prop_assert!(lean.check_invariants().is_empty(), "{:?}", lean.check_invariants());
        for lv in 0..cfg.levels.len() {
            for core in 0..cfg.cores as usize {
                let a: Vec<_> = lean.cache(lv, core).valid_lines().collect();
                let b: Vec<_> = general.cache(lv, core).valid_lines().collect();
                prop_assert_eq!(a, b, "contents of level {} core {}", lv, core);
            }
        }
    }
}

/// Records one at a time through the general path, `fast` taking the first-level-hit shortcut
/// (`Hierarchy::access_first_hit`, as `access` and the system's stepped runs do) and `slow`
/// without it: the level that served each record must agree, and at the end the statistics
/// and every line with its metadata. Coherence invalidations come in between and the
/// prefetchers are on for `prefetch_window` (a tagged prefetch hit must leave the shortcut).
/// Returns how many records took the shortcut.
fn first_hit_run(
    cfg: &HierarchyConfig,
    recs: &[Record],
    invalidate_every: usize,
    prefetch_window: (usize, usize),
) -> Result<usize, TestCaseError> {
    let mut fast = Hierarchy::new(cfg).unwrap();
    let mut slow = Hierarchy::new(cfg).unwrap();
    for h in [&mut fast, &mut slow] {
        h.set_lean_engine(false);
    }
    slow.set_first_hit_path(false);
    let (from, len) = prefetch_window;
    let mut shortcuts = 0;
    for (i, r) in recs.iter().enumerate() {
        let prefetch = (from..from + len).contains(&i);
        for h in [&mut fast, &mut slow] {
            h.set_prefetch_enabled(prefetch);
        }
        let served = match fast.access_first_hit(r) {
            Some(s) => {
                shortcuts += 1;
                s
            }
            None => fast.access(r),
        };
        prop_assert_eq!(served, slow.access(r), "record {}", i);
        if i % invalidate_every == 0 {
            let victim = recs[i / 2].addr;
            prop_assert_eq!(fast.invalidate_line(victim), slow.invalidate_line(victim));
        }
    }
    prop_assert_eq!(fast.stats(), slow.stats());
    for lv in 0..cfg.levels.len() {
        for core in 0..cfg.cores as usize {
            let a: Vec<_> = fast.cache(lv, core).valid_lines().collect();
            let b: Vec<_> = slow.cache(lv, core).valid_lines().collect();
            prop_assert_eq!(a, b, "contents of level {} core {}", lv, core);
        }
    }
    // Both hold every invariant (exclusion included, with prefetchers above the victim cache:
    // `exclusive_prefetch_keeps_exclusion`).
    prop_assert_eq!(fast.check_invariants(), Vec::<String>::new());
    prop_assert_eq!(slow.check_invariants(), Vec::<String>::new());
    Ok(shortcuts)
}

/// `config`'s shapes with a next-line prefetcher at `prefetch_level` (none past the last level).
fn first_hit_config(
    cores: u32,
    inclusion: Inclusion,
    variant: u8,
    prefetch_level: usize,
) -> HierarchyConfig {
    let mut cfg = config(cores, inclusion, variant);
    if let Some(l) = cfg.levels.get_mut(prefetch_level) {
        l.prefetcher = cachecolor_sim::cache::prefetch::PrefetcherKind::NextLine;
    }
    cfg
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The first-level-hit shortcut against the general path without it, on every shape the
    /// paper presets use: inclusive, exclusive and non-inclusive, a write-through or
    /// no-write-allocate L1D, split or unified first levels, a non-power-of-two L3, prefetchers.
    #[test]
    fn first_hit_path_equals_general_path(
        recs in privileged_trace(),
        cores in 1u32..3,
        inclusion in prop_oneof![
            Just(Inclusion::NonInclusive),
            Just(Inclusion::Inclusive),
            Just(Inclusion::Exclusive)
        ],
        variant in 0u8..9,
        prefetch_level in 0usize..6,
        invalidate_every in 3usize..40,
        prefetch_window in (0usize..200, 0usize..60),
    ) {
        let cfg = first_hit_config(cores, inclusion, variant, prefetch_level);
        first_hit_run(&cfg, &recs, invalidate_every, prefetch_window)?;
    }
}

/// The shortcut is taken: a loop over a few lines, loads, stores and fetches on two cores, is
/// mostly first-level hits in every inclusion mode and shape.
#[test]
fn first_hit_path_serves_repeated_lines() {
    let recs: Vec<Record> = (0..600u64)
        .map(|i| Record {
            addr: 0x1000 + (i % 5) * 64 + (i % 7) * 8,
            thread: (i % 2) as u32,
            icount: 1,
            size: 8,
            kind: Kind::from_u8((i % 4) as u8).unwrap(),
            privileged: i % 3 == 0,
            syscall: 0,
        })
        .collect();
    for inclusion in [
        Inclusion::NonInclusive,
        Inclusion::Inclusive,
        Inclusion::Exclusive,
    ] {
        for variant in 0..7 {
            let cfg = first_hit_config(2, inclusion, variant, 9);
            let taken = first_hit_run(&cfg, &recs, 1000, (0, 0)).unwrap();
            assert!(
                taken > recs.len() / 4,
                "{inclusion:?} variant {variant}: {taken} shortcuts"
            );
        }
    }
}

/// A defect of the general path that `first_hit_path_equals_general_path` found (its shrunk
/// case): an exclusive hierarchy with a next-line prefetcher at L1D, switched on for the last
/// records, with coherence invalidations, ended with a line in both the L2 and its victim L3.
/// A prefetch that found its line in the victim cache filled the levels above and left it
/// there; a demand hit there moves the line up, and so must a prefetch (`Hierarchy::prefetch`).
/// The first-level-hit shortcut is off here: the general path alone did it.
#[test]
fn exclusive_prefetch_keeps_exclusion() {
    let runs: [(u64, u16, usize); 14] = [
        (4096, 1, 17),
        (4800, 1, 4),
        (4096, 1, 43),
        (5697, 64, 3),
        (4096, 1, 44),
        (7808, 1, 2),
        (4096, 1, 10),
        (7296, 1, 2),
        (4096, 1, 5),
        (4353, 64, 3),
        (4221, 4, 5),
        (4721, 16, 3),
        (4096, 1, 1),
        (5696, 1, 1),
    ];
    let recs: Vec<Record> = runs
        .iter()
        .flat_map(|&(addr, size, n)| std::iter::repeat_n(Record::new(Kind::Load, addr, size), n))
        .collect();
    let cfg = first_hit_config(1, Inclusion::Exclusive, 0, 1);
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.set_lean_engine(false);
    h.set_first_hit_path(false);
    for (i, r) in recs.iter().enumerate() {
        h.set_prefetch_enabled(i >= 108);
        h.access(r);
        if i % 3 == 0 {
            h.invalidate_line(recs[i / 2].addr);
        }
    }
    assert!(
        h.check_invariants().is_empty(),
        "{:?}",
        h.check_invariants()
    );
}
