//! Behaviour of the hierarchy beyond plain LRU counting: prefetchers (and switching them off and
//! on mid-run, as ROCS section 4 does while profiling), seeded policies' determinism, inclusion
//! modes on a multi-core machine, and config errors.
use cachecolor_sim::cache::{Hierarchy, HierarchyConfig};
use cachecolor_sim::config::from_toml;
use cachecolor_sim::trace::{Kind, Record};

fn hierarchy(toml: &str) -> Hierarchy {
    let cfg: HierarchyConfig = from_toml(toml).unwrap();
    Hierarchy::new(&cfg).unwrap()
}

fn seq(n: u64, stride: u64) -> Vec<Record> {
    (0..n)
        .map(|i| Record::load(0x10_0000 + i * stride))
        .collect()
}

const TWO_LEVEL_PF: &str = r#"
    [[levels]]
    name = "L1"
    size = "32KiB"
    ways = 8
    prefetcher = "next-line"
    [[levels]]
    name = "L2"
    size = "256KiB"
    ways = 8
"#;

#[test]
fn next_line_prefetcher_hides_sequential_misses_and_can_be_switched_off() {
    let recs = seq(100_000, 64); // one access per line
    let mut h = hierarchy(TWO_LEVEL_PF);
    h.run_block(&recs);
    let on = h.stats().levels[0].clone();
    // The first access misses; from then on each line was prefetched by the first hit on the
    // line before it (tagged prefetching), so it is the only miss.
    assert_eq!(on.misses + on.hits, 100_000);
    assert_eq!(on.misses, 1, "{on:?}");
    assert_eq!(on.prefetches_useful, 99_999);
    assert_eq!(
        on.prefetches_issued, 100_000,
        "the last prefetch is never used"
    );
    // Prefetches reach L2 as prefetch traffic, not demand accesses.
    let l2 = &h.stats().levels[1];
    assert_eq!(l2.accesses, 1);
    assert_eq!(l2.prefetch_accesses, 100_000);

    let mut off = hierarchy(TWO_LEVEL_PF);
    off.set_prefetch_enabled(false);
    off.run_block(&recs[..50_000]);
    assert_eq!(
        off.stats().levels[0].misses,
        50_000,
        "no prefetches while switched off"
    );
    assert_eq!(off.stats().levels[0].prefetches_issued, 0);
    off.set_prefetch_enabled(true);
    off.run_block(&recs[50_000..]);
    let s = off.stats().levels[0].clone();
    assert_eq!(
        s.misses,
        50_000 + 1,
        "prefetching resumes when switched back on"
    );
    assert!(off.check_invariants().is_empty());
}

#[test]
fn stride_prefetcher_follows_a_page_stride() {
    let recs = seq(20_000, 4096); // one line per page: next-line cannot help, stride can
    let cfg = TWO_LEVEL_PF.replace("next-line", "stride");
    let mut h = hierarchy(&cfg);
    h.run_block(&recs);
    let l1 = &h.stats().levels[0];
    // Three misses train it (two equal strides); every later page was prefetched.
    assert_eq!(l1.misses, 3, "{l1:?}");
    assert_eq!(l1.prefetches_useful, 19_997);
    let mut n = hierarchy(TWO_LEVEL_PF);
    n.run_block(&recs);
    assert_eq!(
        n.stats().levels[0].prefetches_useful,
        0,
        "next-line prefetches are useless here"
    );
}

#[test]
fn seeded_policies_are_deterministic_and_seed_sensitive() {
    let mut g = cachecolor_sim::rng::SplitMix64::new(3);
    let recs: Vec<Record> = (0..200_000)
        .map(|_| Record::load(g.below(1 << 22) * 8))
        .collect();
    for policy in [
        "random", "brrip", "drrip", "srrip", "nru", "plru", "fifo", "lru",
    ] {
        let cfg = |seed: u64| {
            format!("seed = {seed}\n[[levels]]\nname = \"L1\"\nsize = \"64KiB\"\nways = 8\npolicy = \"{policy}\"\n[[levels]]\nname = \"L2\"\nsize = \"1MiB\"\nways = 16\npolicy = \"{policy}\"\n")
        };
        let run = |seed: u64| {
            let mut h = hierarchy(&cfg(seed));
            h.run_block(&recs);
            assert!(h.check_invariants().is_empty());
            h.stats()
        };
        assert_eq!(run(1), run(1), "{policy}: same seed, same result");
        if matches!(policy, "random" | "brrip" | "drrip") {
            assert_ne!(run(1), run(2), "{policy}: the seed matters");
        } else {
            assert_eq!(
                run(1),
                run(2),
                "{policy}: deterministic policies ignore the seed"
            );
        }
    }
}

#[test]
fn inclusive_llc_back_invalidates_on_every_core() {
    let cfg = r#"
        cores = 2
        inclusion = "inclusive"
        [[levels]]
        name = "L1"
        size = "4KiB"
        ways = 2
        [[levels]]
        name = "LLC"
        size = "16KiB"
        ways = 4
    "#;
    let mut h = hierarchy(cfg);
    let mut g = cachecolor_sim::rng::SplitMix64::new(9);
    let recs: Vec<Record> = (0..50_000)
        .map(|i| Record {
            thread: (i % 2) as u32,
            kind: if i % 3 == 0 { Kind::Store } else { Kind::Load },
            ..Record::load(g.below(2048) * 64)
        })
        .collect();
    h.run_block(&recs);
    let s = h.stats();
    assert!(s.levels[1].back_invalidations > 0);
    assert!(
        h.check_invariants().is_empty(),
        "{:?}",
        h.check_invariants()
    );
}

#[test]
fn a_line_crossing_access_is_two_accesses() {
    let mut h = hierarchy("[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n");
    h.access(&Record {
        size: 8,
        ..Record::load(60)
    }); // bytes 60..68: lines 0 and 1
    let s = h.stats();
    assert_eq!(s.levels[0].accesses, 2);
    assert_eq!(s.records, 1);
    assert_eq!(s.line_accesses, 2);
}

#[test]
fn impossible_hierarchies_are_rejected_with_the_field() {
    let cases = [
        ("[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 0\n", "levels[0].ways"),
        ("[[levels]]\nname = \"L1\"\nsize = 1000\nways = 8\n", "levels[0].size"),
        ("line_size = 48\n[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n", "line_size"),
        ("line_size = 8192\n[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n", "line_size"),
        ("levels = []\n", "levels"),
        ("[[levels]]\nname = \"L1\"\nsize = \"48KiB\"\nways = 12\npolicy = \"plru\"\n", "levels[0].policy"),
        ("[[levels]]\nname = \"A\"\nsize = \"32KiB\"\nways = 8\n[[levels]]\nname = \"A\"\nsize = \"1MiB\"\nways = 8\n", "levels[1].name"),
        ("[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\nshared = true\n[[levels]]\nname = \"L2\"\nsize = \"1MiB\"\nways = 8\nshared = false\n", "levels[1].shared"),
        ("cores = 0\n[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n", "cores"),
        ("inclusion = \"exclusive\"\n[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\n", "inclusion"),
    ];
    for (text, field) in cases {
        let cfg: HierarchyConfig = from_toml(text).unwrap();
        let e = Hierarchy::new(&cfg).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
    }
    let e = from_toml::<HierarchyConfig>(
        "[[levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\ncolour = 1\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
}

/// An instruction cache above a unified first level: the unified level takes data accesses
/// first-hand and instruction fetches that missed L1I, and the accounting check knows that.
#[test]
fn an_l1i_above_a_unified_l1_keeps_the_flow_invariant() {
    let mut h = hierarchy(
        r#"
        [[levels]]
        name = "L1I"
        size = "4KiB"
        ways = 2
        serves = "instruction"
        [[levels]]
        name = "L1"
        size = "8KiB"
        ways = 4
        [[levels]]
        name = "L2"
        size = "64KiB"
        ways = 8
    "#,
    );
    let recs: Vec<Record> = (0..20_000u64)
        .map(|i| {
            let kind = if i % 3 == 0 { Kind::IFetch } else { Kind::Load };
            Record::new(kind, 0x40_0000 + (i * 4_099) % 65_536, 4)
        })
        .collect();
    h.run_block(&recs);
    let s = h.stats();
    let (l1i, l1) = (&s.levels[0], &s.levels[1]);
    assert_eq!(
        l1.ifetch.accesses, l1i.ifetch.misses,
        "L1 sees the fetches L1I missed"
    );
    assert!(l1.load.accesses > 13_000, "and every load first-hand");
    assert!(
        h.check_invariants().is_empty(),
        "{:?}",
        h.check_invariants()
    );
}
