//! Accuracy of the approximate curves on ANCHORS.md's MRC trace (10 M references over 1 M
//! lines, half zipf(0.9), half cyclic scan) against the exact curve: mean absolute error over
//! every size from the method's reliable size to the distinct lines.
//! `cargo run --release -p cachecolor-sim --example mrc_accuracy [refs] [salts]`.
use cachecolor_sim::analysis::mrc::{MethodName, MrcOptions, MrcProfiler};
use cachecolor_sim::analysis::reference::zipf_scan;

fn main() {
    let refs: u64 = std::env::args()
        .nth(1)
        .map_or(10_000_000, |s| s.parse().expect("refs"));
    let salts: u64 = std::env::args()
        .nth(2)
        .map_or(3, |s| s.parse().expect("salts"));
    let lines = refs / 10;
    let trace = zipf_scan(refs, lines, 0.9, 1);
    let all: Vec<u64> = (1..=lines).collect();
    let curve = |o: MrcOptions| {
        let mut p = MrcProfiler::new(MrcOptions {
            sizes: Some(all.clone()),
            ..o
        })
        .unwrap();
        p.feed_units(&trace);
        p.finish().unwrap()
    };
    let exact = curve(MrcOptions::default());
    let mae = |m: &[f64], from: u64| {
        let from = from.max(1) as usize - 1;
        m[from..]
            .iter()
            .zip(&exact.miss_rate[from..])
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
            / (m.len() - from) as f64
    };
    for (method, rate, max_lines, adjust) in [
        (MethodName::Shards, Some(0.1), None, true),
        (MethodName::Shards, Some(0.01), None, true),
        (MethodName::Shards, Some(0.01), None, false),
        (MethodName::Shards, Some(0.001), None, true),
        (MethodName::Shards, None, Some(8192), true),
        (MethodName::Aet, Some(0.01), None, false),
    ] {
        for seed in 0..salts {
            let r = curve(MrcOptions {
                method,
                rate,
                max_lines,
                adjust,
                seed,
                ..MrcOptions::default()
            });
            println!(
                "{:6} rate {:>7} max_lines {:>6} adj {:5} seed {seed}: MAE {:.4} from {} lines (all sizes: {:.4})",
                r.method,
                format!("{:.4}", r.rate.unwrap_or(1.0)),
                max_lines.map_or("-".into(), |n: u64| n.to_string()),
                adjust,
                mae(&r.miss_rate, r.reliable_from),
                r.reliable_from,
                mae(&r.miss_rate, 1),
            );
        }
    }
}
