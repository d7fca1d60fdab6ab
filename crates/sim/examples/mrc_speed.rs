//! Quick speed probe of the miss-rate-curve profilers on ANCHORS.md's MRC trace (10 M
//! references over 1 M lines, half zipf(0.9), half cyclic scan):
//! `cargo run --release -p cachecolor-sim --example mrc_speed [refs]`. The side-by-side
//! comparison with other tools is `benches/mrc.py`; this is for quick checks while tuning.
use cachecolor_sim::analysis::reference::zipf_scan;
use cachecolor_sim::analysis::shards::{Shards, ShardsMode};
use cachecolor_sim::analysis::stack::{LruStack, SetStacks};
use std::time::Instant;

fn main() {
    let refs: u64 = std::env::args()
        .nth(1)
        .map_or(10_000_000, |s| s.parse().expect("refs"));
    let lines = refs / 10;
    let t0 = Instant::now();
    let trace = zipf_scan(refs, lines, 0.9, 1);
    eprintln!("trace: {:.2} s", t0.elapsed().as_secs_f64());
    let rate = |t: Instant| refs as f64 / t.elapsed().as_secs_f64() / 1e6;

    let t = Instant::now();
    let mut s = LruStack::new();
    s.run(&trace);
    let h = s.histogram();
    println!(
        "exact:        {:7.2} M refs/s  ({} distinct, state {:.1} MiB, miss rate at {}: {:.4})",
        rate(t),
        h.distinct(),
        s.state_bytes() as f64 / (1 << 20) as f64,
        lines / 2,
        h.miss_rates(&[lines / 2])[0]
    );
    for r in [0.1, 0.01, 0.001] {
        let t = Instant::now();
        let mut sh = Shards::new(ShardsMode::FixedRate(r), 0).unwrap();
        sh.run(&trace);
        println!("shards {r:5}: {:7.2} M refs/s", rate(t));
    }
    let t = Instant::now();
    let mut sh = Shards::new(ShardsMode::FixedSize(8192), 0).unwrap();
    sh.run(&trace);
    println!("shards 8192 lines: {:7.2} M refs/s", rate(t));
    let t = Instant::now();
    let mut ss = SetStacks::new(32768, 16).unwrap();
    ss.run(&trace);
    println!("per-set 32768 sets: {:7.2} M refs/s", rate(t));
}
