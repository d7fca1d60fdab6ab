//! The lean engine's two compiled copies (`cachecolor_sim::isa`: baseline x86-64 with SSE2 tag
//! scans, and AVX2/BMI chosen at run time) give identical results: the same trace through a
//! hierarchy with 8-, 12- and 16-way levels (both scan widths; 12 ways is scanned as 16 and
//! masked), once with the baseline forced and once as dispatched, must leave every statistic and
//! every cache's contents the same. The dispatched run is compared with the baseline, so on a CPU
//! without AVX2 both runs take the baseline and the test says so.
mod common;
use common::level;

use cachecolor_sim::cache::{Hierarchy, HierarchyConfig, Inclusion, Serves};
use cachecolor_sim::config::Size;
use cachecolor_sim::isa;
use cachecolor_sim::trace::{Kind, Record};

fn config(cores: u32) -> HierarchyConfig {
    HierarchyConfig {
        cores,
        line_size: 64,
        page_size: Size(4096),
        inclusion: Inclusion::NonInclusive,
        seed: 0,
        prefetch_enabled: false,
        levels: vec![
            level("L1I", 8 * 8 * 64, 8, Serves::Instruction),
            level("L1D", 16 * 8 * 64, 8, Serves::Data),
            level("L2", 32 * 16 * 64, 16, Serves::Unified),
            level("L3", 64 * 12 * 64, 12, Serves::Unified),
        ],
    }
}

/// A deterministic mix of loads, stores, fetches and both modes over a footprint several times
/// the last level, with hot lines (hits) and line-crossing records.
fn trace(n: usize) -> Vec<Record> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let hot = x.is_multiple_of(4);
            let addr = if hot {
                (x >> 8) % 4096
            } else {
                (x >> 8) % (4 << 20)
            };
            Record {
                addr,
                size: if i % 11 == 0 { 16 } else { 8 },
                kind: [Kind::Load, Kind::Store, Kind::IFetch, Kind::Modify][(x >> 40) as usize % 4],
                thread: (x >> 50) as u32 % 2,
                icount: 1,
                privileged: (x >> 33).is_multiple_of(5),
                syscall: 0,
            }
        })
        .collect()
}

fn run(cfg: &HierarchyConfig, recs: &[Record], baseline: bool) -> Hierarchy {
    isa::force_baseline(baseline);
    let mut h = Hierarchy::new(cfg).unwrap();
    assert!(h.uses_lean_engine(), "the shape the lean engine takes");
    for block in recs.chunks(4096) {
        h.run_block(block);
    }
    isa::force_baseline(false);
    h
}

#[test]
fn baseline_and_dispatched_copies_agree() {
    println!(
        "this CPU: {} (dispatched copy: {})",
        if isa::cpu_has_avx2() {
            "AVX2/BMI"
        } else {
            "no AVX2"
        },
        isa::name()
    );
    // One test, not two: the forcing is process-wide, and tests run in parallel threads.
    isa::force_baseline(true);
    assert!(!isa::avx2() && isa::name() == "baseline", "forcing is seen");
    isa::force_baseline(false);
    let env_baseline = std::env::var("CACHECOLOR_ISA").as_deref() == Ok("baseline");
    assert_eq!(isa::avx2(), isa::cpu_has_avx2() && !env_baseline);
    let recs = trace(400_000);
    for cores in [1, 2] {
        let cfg = config(cores);
        let base = run(&cfg, &recs, true);
        let fast = run(&cfg, &recs, false);
        assert_eq!(base.stats(), fast.stats(), "{cores} core(s): statistics");
        let total_hits: u64 = base.stats().levels.iter().map(|l| l.hits).sum();
        assert!(
            total_hits > 0 && total_hits < recs.len() as u64 * 2,
            "a mix of hits and misses"
        );
        for lv in 0..cfg.levels.len() {
            for core in 0..cores as usize {
                let a: Vec<_> = base.cache(lv, core).valid_lines().collect();
                let b: Vec<_> = fast.cache(lv, core).valid_lines().collect();
                assert_eq!(a, b, "{cores} core(s): contents of level {lv} core {core}");
            }
        }
    }
}
