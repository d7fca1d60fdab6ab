//! Whole-system speed against the cache-only path on captured traces (issue 21 item 5; `make
//! bench` runs it on the workload suite's traces when they are there).
//!
//! For each trace given: the first `LIMIT` records (default 4,000,000) are copied once into a
//! temporary native trace (`LIMIT=0`: the trace itself, all of it), then run alternating, `REPEATS` times (default 3), as
//! - **system**: one process with one thread on core 0 of `MACHINE` (default `xeon-e5506`), 2 GiB
//!   of RAM, policy `linux` (what `cachecolor workloads characterize` runs:
//!   `workloads.system_config`), timed from `System::new` to its report;
//! - **cache-only**: the same machine's hierarchy (`Hierarchy::new` of the system config's
//!   hierarchy), the same trace read block by block, every record on core 0, `run_block`.
//!
//! Both sides decode the same zstd-compressed trace file, so decoding is on both. Prints per
//! trace the records/s of each side (best of the repeats), the ratio of best times and the
//! median over the repeats of system time / the cache-only time measured right after it.
//!
//! `cargo run --release -p cachecolor-sim --example system_trace_speed -- TRACE...`;
//! `ONLY=system` or `ONLY=cache` runs one side alone (for a profiler: `ONLY=system REPEATS=1
//! valgrind --tool=callgrind target/release/examples/system_trace_speed TRACE`).
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::system::{system_config_from_json, System, SystemConfig};
use cachecolor_sim::trace::native::{TraceReader, TraceWriter};
use cachecolor_sim::trace::{Record, RecordSource};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The first `limit` records of `trace` as a native trace at `out`. Returns how many were
/// written.
fn write_prefix(trace: &Path, out: &Path, limit: u64) -> u64 {
    let mut reader = TraceReader::open(trace).expect("a native trace");
    let mut writer = TraceWriter::create(out, "{}").expect("writable temp file");
    let mut buf = Vec::new();
    let mut n = 0u64;
    while n < limit && reader.next_block(&mut buf).expect("readable trace") {
        let take = buf.len().min((limit - n) as usize);
        writer.write_all(&buf[..take]).expect("write");
        n += take as u64;
    }
    writer.finish().expect("finish");
    n
}

/// The records in `trace`.
fn count(trace: &Path) -> u64 {
    let mut reader = TraceReader::open(trace).expect("a native trace");
    let mut buf = Vec::new();
    let mut n = 0u64;
    while reader.next_block(&mut buf).expect("readable trace") {
        n += buf.len() as u64;
    }
    n
}

fn system_config(trace: &Path, machine: &str) -> SystemConfig {
    let doc = serde_json::json!({
        "machine": {"preset": machine},
        "memory": {"ram": "2GiB"},
        "policy": {"name": "linux"},
        "processes": [{"name": "p", "pin": [0],
                       "threads": [{"trace": trace, "format": "native"}]}],
    });
    system_config_from_json(&doc.to_string()).expect("valid system config")
}

fn cache_only(config: &SystemConfig, trace: &Path) -> u64 {
    let mut h = Hierarchy::new(&config.machine.hierarchy).expect("hierarchy");
    let mut reader = TraceReader::open(trace).expect("trace");
    let mut buf: Vec<Record> = Vec::new();
    let mut n = 0;
    while reader.next_block(&mut buf).expect("readable trace") {
        for r in &mut buf {
            r.thread = 0; // core 0, as the system's one pinned thread
        }
        h.run_block(&buf);
        n += buf.len() as u64;
    }
    assert!(h.check_invariants().is_empty());
    n
}

fn system(config: &SystemConfig) -> u64 {
    let mut s = System::new(config).expect("system");
    s.run().expect("run");
    let r = s.report();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    r.processes.iter().map(|p| p.references).sum()
}

fn main() {
    let traces: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if traces.is_empty() {
        eprintln!(
            "usage: system_trace_speed TRACE... (native traces; LIMIT, REPEATS, MACHINE, ONLY)"
        );
        std::process::exit(2);
    }
    let limit = env_num("LIMIT", 4_000_000);
    let repeats = env_num("REPEATS", 3).max(1) as usize;
    let machine = std::env::var("MACHINE").unwrap_or_else(|_| "xeon-e5506".into());
    let only = std::env::var("ONLY").ok();
    let tmp = std::env::temp_dir().join(format!("system_trace_speed.{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    for (i, trace) in traces.iter().enumerate() {
        let (prefix, records) = if limit == 0 {
            (trace.clone(), count(trace))
        } else {
            let p = tmp.join(format!("{i}.cctrace"));
            let n = write_prefix(trace, &p, limit);
            (p, n)
        };
        let config = system_config(&prefix, &machine);
        let (mut best_sys, mut best_cache) = (f64::INFINITY, f64::INFINITY);
        let mut paired = Vec::new();
        for _ in 0..repeats {
            let mut t_sys = None;
            if only.as_deref() != Some("cache") {
                let t = Instant::now();
                let n = system(&config);
                let s = t.elapsed().as_secs_f64();
                assert_eq!(n, records, "the system simulates every record once");
                best_sys = best_sys.min(s);
                t_sys = Some(s);
            }
            if only.as_deref() != Some("system") {
                let t = Instant::now();
                let n = cache_only(&config, &prefix);
                let c = t.elapsed().as_secs_f64();
                assert_eq!(n, records);
                best_cache = best_cache.min(c);
                if let Some(s) = t_sys {
                    paired.push(s / c);
                }
            }
        }
        let name = trace.display();
        let rate = |best: f64| records as f64 / best / 1e6;
        match only.as_deref() {
            Some(side) => println!(
                "system_trace_speed {name} ({records} records, {machine}): best of {repeats}: {side} alone {:.2} M records/s",
                rate(if side == "system" { best_sys } else { best_cache })
            ),
            None => {
                paired.sort_by(f64::total_cmp);
                println!(
                    "system_trace_speed {name} ({records} records, {machine}): best of {repeats}: system {:.2} M records/s, cache-only {:.2} M records/s: the system is {:.2}x slower (median of the {repeats} back-to-back pairs {:.2}x)",
                    rate(best_sys),
                    rate(best_cache),
                    best_sys / best_cache,
                    paired[paired.len() / 2]
                );
            }
        }
        if limit > 0 {
            let _ = std::fs::remove_file(&prefix);
        }
    }
    let _ = std::fs::remove_dir(&tmp);
}
