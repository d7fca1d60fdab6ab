//! Where `cachecolor annotate`'s Rust time goes, stage by stage, on a native trace with PCs
//! (docs/PERFORMANCE.md, "annotate against cachegrind"). Sides, alternating, `REPEATS` times
//! (default 3), CPU seconds of this process (best of the repeats):
//! - **decode**: the trace read block by block (`TraceReader::next_block`: zstd, checksums,
//!   the column decode, the PC column);
//! - **hierarchy**: decode, then every record through the hierarchy (`run_block_served`);
//! - **attribute**: all of `analysis::attribute` (the hierarchy and the tallies).
//!
//! `cargo run --release -p cachecolor-sim --example attribute_speed -- CONFIG.toml TRACE`;
//! `ONLY=decode|hierarchy|attribute` runs one side alone (for a profiler).
use cachecolor_sim::analysis::attribute::attribute;
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::config::SimulationConfig;
use cachecolor_sim::error::TraceError;
use cachecolor_sim::trace::native::TraceReader;
use cachecolor_sim::trace::{RecordSource, BLOCK_RECORDS};
use std::path::Path;

fn cpu_seconds() -> f64 {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct it is given.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn side(name: &str, config: &SimulationConfig, trace: &Path) -> u64 {
    let mut r = TraceReader::open(trace).expect("trace");
    let mut h = Hierarchy::new(&config.hierarchy).expect("hierarchy");
    let levels = config.hierarchy.levels.len();
    let mut buf = Vec::with_capacity(BLOCK_RECORDS);
    let mut served = Vec::with_capacity(BLOCK_RECORDS);
    let mut n = 0u64;
    match name {
        "decode" => {
            while r.next_block(&mut buf).expect("decode") {
                n += buf.len() as u64 + r.block_pcs().len() as u64 % 2;
            }
        }
        "hierarchy" => {
            while r.next_block(&mut buf).expect("decode") {
                served.clear();
                h.run_block_served(&buf, &mut served);
                n += served.len() as u64;
            }
        }
        _ => {
            let a = attribute::<TraceError>(&mut h, levels, &mut r, |_| Ok(())).expect("attribute");
            n = a.records + a.pcs.counts.iter().sum::<u64>() % 2;
            eprintln!(
                "{:>10}: {:.1}% of the records (fetches the reader folded out)",
                "folded",
                100.0 * a.folded as f64 / a.records.max(1) as f64
            );
        }
    }
    n
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    assert_eq!(args.len(), 2, "usage: attribute_speed CONFIG.toml TRACE");
    let text = std::fs::read_to_string(&args[0]).expect("config");
    let config = SimulationConfig::from_toml(&text).expect("config");
    let trace = Path::new(&args[1]);
    let repeats: usize = std::env::var("REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let sides: Vec<String> = match std::env::var("ONLY") {
        Ok(s) => vec![s],
        Err(_) => vec!["decode".into(), "hierarchy".into(), "attribute".into()],
    };
    let mut best = vec![f64::INFINITY; sides.len()];
    let mut records = 0;
    for _ in 0..repeats {
        for (i, s) in sides.iter().enumerate() {
            let t0 = cpu_seconds();
            records = side(s, &config, trace);
            best[i] = best[i].min(cpu_seconds() - t0);
        }
    }
    for (s, t) in sides.iter().zip(&best) {
        println!(
            "{s:>10}: {t:.3} CPU s ({:.1} M records/s)",
            records as f64 / t / 1e6
        );
    }
}
