//! Statistics split by privileged mode (Nellans et al., UUCS-09-002, sections 3 and 5: demand
//! accesses and misses by mode, evictions attributed to the mode of the access that caused
//! them), checked three ways:
//! - against a one-level LRU cache written out plainly here, on a random mixed-mode trace, through
//!   every input path of both engines (records one by one, blocks with same-line runs, columns);
//! - on hand-made chains: an eviction further down (a write-back fill, a prefetch fill) belongs
//!   to the mode of the demand access that started it;
//! - against the paper's own core model (`oscache::model`) on the same trace and geometry.
use cachecolor_sim::cache::prefetch::PrefetcherKind;
mod common;
use common::level;

use cachecolor_sim::cache::{
    Hierarchy, HierarchyConfig, Inclusion, LevelConfig, LevelStats, Serves,
};
use cachecolor_sim::config::Size;
use cachecolor_sim::oscache::model::{Model, ModelConfig};
use cachecolor_sim::trace::{Kind, Record, RecordColumns, RecordSource};
use cachecolor_sim::workload::{Workload, WorkloadSpec};

fn hierarchy(levels: Vec<LevelConfig>) -> HierarchyConfig {
    HierarchyConfig {
        cores: 1,
        line_size: 64,
        page_size: Size(4096),
        inclusion: Inclusion::NonInclusive,
        seed: 0,
        prefetch_enabled: true,
        levels,
    }
}

/// splitmix64: a deterministic stream for the random traces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random trace over 40 lines (a 4-set, 2-way cache conflicts constantly) in stretches of one
/// mode, with repeats of a line (the engines' same-line runs) whose mode sometimes flips inside
/// the repeat, and some records spanning two lines.
fn mixed_trace(seed: u64, n: usize) -> Vec<Record> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(n);
    let mut privileged = false;
    while out.len() < n {
        if rng.below(8) == 0 {
            privileged = !privileged;
        }
        let line = rng.below(40);
        let kind = Kind::from_u8(rng.below(4) as u8).unwrap();
        let (off, size) = if rng.below(10) == 0 {
            (60, 8) // spans into the next line
        } else {
            (rng.below(8) * 8, 8)
        };
        let repeat = 1 + rng.below(4) as usize;
        for k in 0..repeat {
            // A mode switch inside a same-line run now and then.
            let p = if k > 0 && rng.below(5) == 0 {
                !privileged
            } else {
                privileged
            };
            out.push(Record {
                addr: 0x10_0000 + line * 64 + off,
                thread: 0,
                icount: 1,
                size,
                kind,
                privileged: p,
                syscall: 0,
            });
        }
    }
    out.truncate(n);
    out
}

/// What the plain cache counted: [user, privileged].
#[derive(Debug, Default, PartialEq)]
struct ModeCount {
    accesses: [u64; 2],
    misses: [u64; 2],
    evictions: [u64; 2],
}

/// One level, LRU, `sets` x `ways`, every set a list with the most recent line first.
fn plain_lru(recs: &[Record], sets: u64, ways: usize) -> ModeCount {
    let mut cache: Vec<Vec<u64>> = vec![Vec::new(); sets as usize];
    let mut c = ModeCount::default();
    for r in recs {
        let m = r.privileged as usize;
        let first = r.addr / 64;
        let last = (r.addr + r.size as u64 - 1) / 64;
        for line in first..=last {
            let set = &mut cache[(line % sets) as usize];
            c.accesses[m] += 1;
            if let Some(i) = set.iter().position(|&l| l == line) {
                set.remove(i);
            } else {
                c.misses[m] += 1;
                if set.len() == ways {
                    set.pop();
                    c.evictions[m] += 1;
                }
            }
            set.insert(0, line);
        }
    }
    c
}

fn modes(s: &LevelStats) -> ModeCount {
    ModeCount {
        accesses: [s.user.accesses, s.privileged.accesses],
        misses: [s.user.misses, s.privileged.misses],
        evictions: [s.user.evictions, s.privileged.evictions],
    }
}

#[test]
fn one_level_lru_by_mode_matches_a_plain_cache_on_every_input_path() {
    let cfg = hierarchy(vec![level("L1", 4 * 2 * 64, 2, Serves::Unified)]);
    for seed in 1..=4 {
        let recs = mixed_trace(seed, 20_000);
        let want = plain_lru(&recs, 4, 2);
        assert!(want.accesses[1] > 1000 && want.evictions[1] > 100 && want.evictions[0] > 100);
        let total_records: u64 = recs.len() as u64;
        let mut runs: Vec<(&str, LevelStats)> = Vec::new();
        // Blocks of records (same-line runs batched), on the lean engine and the general one.
        for lean in [true, false] {
            let mut h = Hierarchy::new(&cfg).unwrap();
            h.set_lean_engine(lean);
            assert_eq!(h.uses_lean_engine(), lean);
            for chunk in recs.chunks(1000) {
                h.run_block(chunk);
            }
            assert!(
                h.check_invariants().is_empty(),
                "{:?}",
                h.check_invariants()
            );
            assert_eq!(h.stats().records, total_records);
            runs.push((
                if lean {
                    "lean blocks"
                } else {
                    "general blocks"
                },
                h.stats().levels[0].clone(),
            ));
        }
        // One record at a time (the system engine's path).
        for lean in [true, false] {
            let mut h = Hierarchy::new(&cfg).unwrap();
            h.set_lean_engine(lean);
            for r in &recs {
                h.access(r);
            }
            runs.push((
                if lean {
                    "lean access"
                } else {
                    "general access"
                },
                h.stats().levels[0].clone(),
            ));
        }
        // Columns with a `privileged` column (the NumPy path).
        let addr: Vec<u64> = recs.iter().map(|r| r.addr).collect();
        let kind: Vec<u8> = recs.iter().map(|r| r.kind as u8).collect();
        let size: Vec<u16> = recs.iter().map(|r| r.size).collect();
        let icount: Vec<u32> = recs.iter().map(|r| r.icount).collect();
        let privileged: Vec<u8> = recs.iter().map(|r| r.privileged as u8).collect();
        let cols = RecordColumns::new(
            &addr,
            Some(&kind),
            Some(&size),
            None,
            Some(&icount),
            Some(&privileged),
        )
        .unwrap();
        let mut h = Hierarchy::new(&cfg).unwrap();
        assert!(h.uses_lean_engine());
        h.run_columns(&cols);
        runs.push(("lean columns", h.stats().levels[0].clone()));
        for (name, s) in &runs {
            assert_eq!(modes(s), want, "seed {seed}, {name}");
            assert_eq!(
                s.privileged.hits + s.privileged.misses,
                s.privileged.accesses
            );
            assert_eq!(
                s.user.accesses + s.privileged.accesses,
                s.accesses,
                "{name}"
            );
        }
    }
}

#[test]
fn user_only_traces_leave_the_privileged_side_at_zero() {
    let cfg = hierarchy(vec![level("L1", 4 * 2 * 64, 2, Serves::Unified)]);
    let mut recs = mixed_trace(9, 5000);
    for r in &mut recs {
        r.privileged = false;
    }
    let mut h = Hierarchy::new(&cfg).unwrap();
    h.run_block(&recs);
    let s = &h.stats().levels[0];
    assert_eq!((s.privileged.accesses, s.privileged.evictions), (0, 0));
    assert!(!s.has_privileged());
    assert_eq!((s.user.accesses, s.user.misses), (s.accesses, s.misses));
    assert_eq!(s.user.evictions, s.evictions);
}

fn rec(kind: Kind, line: u64, privileged: bool) -> Record {
    Record {
        addr: line * 64,
        thread: 0,
        icount: 1,
        size: 8,
        kind,
        privileged,
        syscall: 0,
    }
}

/// A user store dirties A in a one-line L1 over a one-line L2; a privileged load of B then
/// evicts B's L2 predecessor A (clean there), fills L1, whose dirty A goes back to L2 and,
/// absent there, evicts B again: every one of those evictions was caused by the privileged load.
#[test]
fn write_back_chain_is_attributed_to_the_mode_of_the_access_that_started_it() {
    let cfg = hierarchy(vec![
        level("L1", 64, 1, Serves::Unified),
        level("L2", 64, 1, Serves::Unified),
    ]);
    for lean in [true, false] {
        let mut h = Hierarchy::new(&cfg).unwrap();
        h.set_lean_engine(lean);
        assert_eq!(h.uses_lean_engine(), lean);
        h.run_block(&[rec(Kind::Store, 0, false), rec(Kind::Load, 1, true)]);
        let s = h.stats();
        let (l1, l2) = (&s.levels[0], &s.levels[1]);
        assert_eq!(
            (l1.evictions, l1.privileged.evictions),
            (1, 1),
            "lean {lean}"
        );
        assert_eq!(l2.writeback_fills, 1);
        assert_eq!(
            (l2.evictions, l2.privileged.evictions),
            (2, 2),
            "lean {lean}"
        );
        assert_eq!((l2.user.evictions, l1.user.evictions), (0, 0));
        assert_eq!((l2.privileged.accesses, l2.privileged.misses), (1, 1));
        assert_eq!((l2.user.accesses, l2.user.misses), (1, 1));
        // Now a privileged store of C (evicting dirty A from L2 and B from L1: one more each
        // for the OS), then the same chain as above started by a user load of D: its three
        // evictions (C from L2, C from L1, then D from L2 by C's write-back fill) are the user's.
        h.run_block(&[rec(Kind::Store, 2, true), rec(Kind::Load, 3, false)]);
        let s = h.stats();
        let (l1, l2) = (&s.levels[0], &s.levels[1]);
        assert_eq!((l1.privileged.evictions, l1.user.evictions), (2, 1));
        assert_eq!((l2.privileged.evictions, l2.user.evictions), (3, 2));
        assert_eq!(l2.writeback_fills, 2);
        assert!(h.check_invariants().is_empty());
    }
}

/// Prefetch fills are part of the chain of the demand access that triggered them: their
/// evictions go to that access's mode (a decision where the paper is silent; docs/cache.md).
#[test]
fn prefetch_caused_evictions_go_to_the_triggering_access() {
    let mut l1 = level("L1", 2 * 64, 2, Serves::Unified); // one set of two ways
    l1.prefetcher = PrefetcherKind::NextLine;
    let cfg = hierarchy(vec![l1]);
    let mut h = Hierarchy::new(&cfg).unwrap();
    assert!(
        !h.uses_lean_engine(),
        "a running prefetcher needs the general path"
    );
    // User load of 0 (prefetches 1), user load of 10 (evicts 0; its prefetch of 11 evicts 1),
    // then a privileged load of 20 (evicts 10; its prefetch of 21 evicts 11).
    h.run_block(&[
        rec(Kind::Load, 0, false),
        rec(Kind::Load, 10, false),
        rec(Kind::Load, 20, true),
    ]);
    let s = &h.stats().levels[0];
    assert_eq!(s.prefetches_issued, 3);
    assert_eq!(s.evictions, 4);
    assert_eq!((s.user.evictions, s.privileged.evictions), (2, 2));
    assert_eq!((s.privileged.accesses, s.privileged.misses), (1, 1));
    assert!(h.check_invariants().is_empty());
}

/// The paper's core model's geometry as a hierarchy: 32 KB 4-way L1I and L1D, an 8-way L2 of
/// `l2` bytes (the model's default is 1 MB).
fn model_geometry(l2: u64) -> HierarchyConfig {
    hierarchy(vec![
        level("L1I", 32 << 10, 4, Serves::Instruction),
        level("L1D", 32 << 10, 4, Serves::Data),
        level("L2", l2, 8, Serves::Unified),
    ])
}

fn workload(references: u64) -> Vec<Record> {
    let text = include_str!("../../../examples/oscache/workloads/web-server.toml");
    let mut spec: WorkloadSpec = cachecolor_sim::config::from_toml(text).unwrap();
    spec.phases[0].references = references;
    let mut w = Workload::new(&spec).unwrap();
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while w.next_block(&mut buf).unwrap() {
        out.extend_from_slice(&buf);
    }
    // The model maps a record to one line (`addr / 64`); none of these spans two.
    assert!(out
        .iter()
        .all(|r| r.addr / 64 == (r.addr + r.size as u64 - 1) / 64));
    out
}

struct Compared {
    /// The model's L1I, L1D, L2 by mode.
    model: Vec<ModeCount>,
    /// The hierarchy's, on the lean engine and on the general one.
    hierarchy: [Vec<ModeCount>; 2],
    /// Dirty L1 victims the hierarchy allocated in its L2 (the model has no write-backs).
    l2_writeback_fills: u64,
}

/// Run `recs` on the model (baseline L2 of `l2` bytes) and on the same geometry as a hierarchy.
fn compare_with_model(recs: &[Record], l2: u64) -> Compared {
    let config = ModelConfig {
        l2_size: Size(l2),
        ..ModelConfig::default()
    };
    let mut m = Model::new(&config).unwrap();
    for r in recs {
        m.step(r);
    }
    let rep = m.finish();
    assert!(rep.invariants.is_empty());
    let model = rep
        .caches
        .iter()
        .map(|c| ModeCount {
            accesses: c.accesses,
            misses: c.misses,
            evictions: c.evictions,
        })
        .collect();
    let mut l2_writeback_fills = 0;
    let hierarchy = [true, false].map(|lean| {
        let mut h = Hierarchy::new(&model_geometry(l2)).unwrap();
        h.set_lean_engine(lean);
        assert_eq!(h.uses_lean_engine(), lean);
        h.run_block(recs);
        assert!(h.check_invariants().is_empty());
        let s = h.stats();
        l2_writeback_fills = s.levels[2].writeback_fills;
        s.levels.iter().map(modes).collect()
    });
    Compared {
        model,
        hierarchy,
        l2_writeback_fills,
    }
}

/// The same trace on the same geometry, by mode, at L1I, L1D and L2. The definitions agree (a
/// demand access per record and cache reached, a miss when absent, an eviction per valid line a
/// fill pushes out, charged to the filling access's mode); the one difference is what the model
/// leaves out: write-backs (its module comment). The hierarchy writes a dirty L1 victim back to the
/// L2, where it is usually still present (dirtied, no replacement update, nothing changes); only
/// when it is absent is it allocated there, which evicts. So: equal whenever the hierarchy made no
/// write-back fill, and then only the L2's misses and evictions can differ.
#[test]
fn per_mode_counts_equal_the_oscache_model() {
    let recs = workload(400_000);
    let privileged = recs.iter().filter(|r| r.privileged).count();
    assert!(privileged > 100_000, "an OS-intensive trace");
    assert!(recs.iter().any(|r| r.kind == Kind::Store));
    // The paper's 1 MB L2: every dirty L1 victim is still in the L2.
    let c = compare_with_model(&recs, 1 << 20);
    assert_eq!(c.l2_writeback_fills, 0);
    for h in &c.hierarchy {
        assert_eq!(h, &c.model, "L1I, L1D, L2 by mode");
    }
    assert!(c.model[2].evictions[1] > 1000 && c.model[2].evictions[0] > 1000);
    // A 64 KB L2 loses dirty L1 victims: the L1s still agree, the L2 no longer does.
    let c = compare_with_model(&recs, 64 << 10);
    assert!(c.l2_writeback_fills > 1000);
    for h in &c.hierarchy {
        assert_eq!(h[..2], c.model[..2], "L1I, L1D");
        assert_eq!(h[2].accesses, c.model[2].accesses, "L2 accesses");
        assert_ne!(h[2], c.model[2], "write-back fills change the L2");
    }
    assert_eq!(c.hierarchy[0], c.hierarchy[1], "lean and general engines");
    // Without stores there is no write-back at all: equal even at 64 KB.
    let loads: Vec<Record> = recs
        .iter()
        .map(|r| Record {
            kind: if r.kind.is_write() {
                Kind::Load
            } else {
                r.kind
            },
            ..*r
        })
        .collect();
    let c = compare_with_model(&loads, 64 << 10);
    assert_eq!(c.l2_writeback_fills, 0);
    for h in &c.hierarchy {
        assert_eq!(h, &c.model, "loads and ifetches only, 64 KB L2");
    }
}

/// Same seed, same counts (the split included).
#[test]
fn mode_split_is_deterministic() {
    let recs = mixed_trace(3, 5000);
    let cfg = model_geometry(1 << 20);
    let run = || {
        let mut h = Hierarchy::new(&cfg).unwrap();
        h.run_block(&recs);
        h.stats()
    };
    assert_eq!(run(), run());
}
