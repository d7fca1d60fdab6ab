//! Quick throughput probe of the cache model on ANCHORS' reference traces:
//! `cargo run --release -p cachecolor-sim --example throughput`. The side-by-side comparison
//! with other tools is `make bench` (benches/run.py); this is for quick checks while tuning.
use cachecolor_sim::cache::{Hierarchy, HierarchyConfig};
use cachecolor_sim::config::from_toml;
use cachecolor_sim::rng::SplitMix64;
use cachecolor_sim::trace::{Record, RecordColumns};
use std::time::Instant;

fn main() {
    let one = "[[levels]]\nname='L1'\nsize='32KiB'\nways=8\n";
    let three = "[[levels]]\nname='L1'\nsize='48KiB'\nways=12\n[[levels]]\nname='L2'\nsize='1MiB'\nways=16\n[[levels]]\nname='L3'\nsize='32MiB'\nways=16\n";
    // The three-level shape scaled down until its state fits the host's L2: it misses at
    // every level as often, so the difference from `three-level` is time spent waiting for
    // the host's memory.
    let small = "[[levels]]\nname='L1'\nsize='3KiB'\nways=12\n[[levels]]\nname='L2'\nsize='64KiB'\nways=16\n[[levels]]\nname='L3'\nsize='1MiB'\nways=16\n";
    let base = 0x2_0000_0000u64;
    let n = 5_000_000u64;
    let mut g = SplitMix64::new(1);
    let rand: Vec<Record> = (0..n)
        .map(|_| Record::load(base + 8 * (g.next_u64() >> 41)))
        .collect();
    let seq: Vec<Record> = (0..n).map(|i| Record::load(base + 8 * i)).collect();
    let only: Option<String> = std::env::args().nth(1);
    let split = |t: &[Record]| -> (Vec<u64>, Vec<u16>) {
        (
            t.iter().map(|r| r.addr).collect(),
            t.iter().map(|r| r.size).collect(),
        )
    };
    let columns = std::env::var_os("CC_COLUMNS").map(|_| (split(&rand), split(&seq)));
    for (cname, ctext) in [
        ("one-level", one),
        ("three-level", three),
        ("three-small", small),
    ] {
        for (tname, t) in [("uniform-64MiB", &rand), ("sequential", &seq)] {
            if only
                .as_deref()
                .is_some_and(|o| !format!("{cname}/{tname}").contains(o))
            {
                continue;
            }
            let cfg: HierarchyConfig = from_toml(ctext).unwrap();
            let mut best = f64::MAX;
            for _ in 0..reps() {
                let mut h = Hierarchy::new(&cfg).unwrap();
                let t0 = Instant::now();
                if let Some(cols) = &columns {
                    // `CC_COLUMNS=1`: the trace as NumPy hands it over (addresses and sizes).
                    let (addr, size) = if tname == "sequential" {
                        &cols.1
                    } else {
                        &cols.0
                    };
                    let rc = RecordColumns::new(addr, None, Some(size), None, None, None).unwrap();
                    h.run_columns(&rc);
                } else {
                    for c in t.chunks(1 << 16) {
                        h.run_block(c);
                    }
                }
                best = best.min(t0.elapsed().as_secs_f64());
                std::hint::black_box(h.stats());
            }
            println!(
                "{cname:12} {tname:14} {:7.1} M refs/s",
                n as f64 / best / 1e6
            );
        }
    }
}

/// Repetitions per case (best is reported); `REPS=1` for instruction counting under callgrind.
fn reps() -> usize {
    std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}
