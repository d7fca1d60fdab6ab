//! Cache-only speed of the paper presets' hierarchies on a synthetic trace, general path
//! against the lean engine: `cargo run --release -p cachecolor-sim --example preset_cache_speed
//! [PRESET...]`. Prints, per preset, whether the lean engine runs it and the records per second
//! of each engine (best of `REPS`, 3 by default), and checks that both end with the same
//! statistics. `ENGINE=general` or `ENGINE=lean` runs one side only (`REPS=1` for callgrind,
//! which is deterministic); `N` sets the records (default 4 M).
//!
//! The trace is one thread per core, interleaved in bursts of 64 records, shaped like a
//! captured program's: two thirds instruction fetches walking 4-byte instructions through a
//! 192 KiB code footprint with a jump every 16, the rest data references (a third of them
//! stores) over a 48 MiB footprint, half of them 8-byte steps along a stream and half at random
//! in a hot 2 MiB region or (one in eight) anywhere.
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::rng::SplitMix64;
use cachecolor_sim::system::presets;
use cachecolor_sim::trace::{Kind, Record};
use std::path::Path;
use std::time::Instant;

fn trace(cores: u32, n: usize) -> Vec<Record> {
    let mut g = SplitMix64::new(7);
    let code = 0x40_0000u64;
    let data = 0x1_0000_0000u64;
    let mut pc = vec![code; cores as usize];
    let mut stream = vec![data; cores as usize];
    let mut out = Vec::with_capacity(n);
    let mut i = 0usize;
    while out.len() < n {
        let t = ((i / 64) % cores as usize) as u32;
        i += 1;
        let c = t as usize;
        let r = g.below(3);
        if r < 2 {
            pc[c] += 4;
            if g.below(16) == 0 {
                pc[c] = code + (g.below(192 << 10) & !3);
            }
            let mut rec = Record::load(pc[c]);
            rec.kind = Kind::IFetch;
            rec.size = 4;
            rec.thread = t;
            out.push(rec);
            continue;
        }
        let addr = if g.below(2) == 0 {
            stream[c] += 8;
            if stream[c] >= data + (48 << 20) {
                stream[c] = data;
            }
            stream[c] + ((c as u64) << 24)
        } else if g.below(8) == 0 {
            data + (g.below(48 << 20) & !7)
        } else {
            data + (g.below(2 << 20) & !7)
        };
        let mut rec = Record::load(addr);
        rec.size = 8;
        rec.thread = t;
        if g.below(3) == 0 {
            rec.kind = Kind::Store;
        }
        out.push(rec);
    }
    out
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let names: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<String> = if names.is_empty() {
        presets::PRESETS
            .iter()
            .map(|p| p.name.to_string())
            .collect()
    } else {
        names
    };
    let reps = env_usize("REPS", 3);
    let n = env_usize("N", 4_000_000);
    let engine = std::env::var("ENGINE").unwrap_or_default();
    println!(
        "{:14} {:5} {:>10} {:>10} {:>7}",
        "preset", "lean", "general", "lean", "ratio"
    );
    for name in &names {
        let m = presets::machine_config(name, Path::new("/nonexistent")).unwrap();
        let cfg = m.hierarchy;
        let recs = trace(cfg.cores, n);
        let mut rates = [0.0f64; 2];
        let mut stats = [None, None];
        let mut lean_runs = false;
        for (k, side) in ["general", "lean"].iter().enumerate() {
            if !engine.is_empty() && engine != *side {
                continue;
            }
            let mut best = f64::MAX;
            for _ in 0..reps {
                let mut h = Hierarchy::new(&cfg).unwrap();
                h.set_lean_engine(k == 1);
                if k == 1 {
                    lean_runs = h.blocks_use_lean_engine();
                }
                let t0 = Instant::now();
                for c in recs.chunks(1 << 14) {
                    h.run_block(c);
                }
                best = best.min(t0.elapsed().as_secs_f64());
                stats[k] = Some(h.stats());
            }
            rates[k] = n as f64 / best / 1e6;
        }
        if let [Some(a), Some(b)] = &stats {
            assert_eq!(a, b, "{name}: the engines disagree");
        }
        println!(
            "{name:14} {:5} {:>8.1} M {:>8.1} M {:>6.2}x",
            if lean_runs { "yes" } else { "no" },
            rates[0],
            rates[1],
            if rates[0] > 0.0 {
                rates[1] / rates[0]
            } else {
                0.0
            }
        );
    }
}
