//! Whole-system and cache-only speed against decoding, on captured traces (`make bench` runs
//! it on the workload suite's traces when they are there; docs/PERFORMANCE.md).
//!
//! For each trace given: the first `LIMIT` records (default 4,000,000) are copied once into a
//! temporary native trace (`LIMIT=0`, or a trace no longer than `LIMIT`: the trace itself, all
//! of it). Then, for each machine of
//! `MACHINES` (default `xeon-e5506,power5`), three sides run alternating, `REPEATS` times
//! (default 3):
//! - **decode**: the trace read block by block and nothing else (`TraceReader::next_block`):
//!   the floor every other side stands on;
//! - **system**: one process with one thread on core 0 of the machine, 2 GiB of RAM, policy
//!   `linux` (what `cachecolor workloads characterize` runs: `workloads.system_config`), timed
//!   from `System::new` to its report;
//! - **cache-only**: the same machine's hierarchy (`Hierarchy::new` of the system config's
//!   hierarchy), the same trace read block by block, every record on core 0, `run_block`.
//!
//! With two traces or more, a mix follows per machine: the first `MIX` traces (default 2, at
//! most the machine's cores) as processes pinned to cores 0, 1, ... (system), their blocks
//! interleaved on those cores of the machine's hierarchies, one per chip, without coherence
//! between chips (cache-only), all decoded (decode).
//!
//! Every side decodes the same zstd-compressed trace file, so decoding is in each. Prints per
//! trace and machine the records/s of each side (best of the repeats) and the ratios of best
//! times: system and cache-only over decode, system over cache-only. Each side's time is taken
//! twice, as wall time and as the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`: every thread),
//! and the rates are given for both: on a shared machine the CPU-time rate is what a core does.
//!
//! `cargo run --release -p cachecolor-sim --example system_trace_speed -- TRACE...`
//! (`LIMIT`, `REPEATS`, `MACHINES`, `MIX`, `ONLY`);
//! `ONLY=system`, `ONLY=cache` or `ONLY=decode` runs one side alone (for a profiler:
//! `ONLY=system REPEATS=1 MACHINES=xeon-e5506 valgrind --tool=callgrind
//! target/release/examples/system_trace_speed TRACE`).
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::system::{system_config_from_json, System, SystemConfig};
use cachecolor_sim::trace::native::{TraceReader, TraceWriter};
use cachecolor_sim::trace::{Record, RecordSource};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The CPU time this process has used so far, every thread (the wall clock where that is not
/// available).
fn cpu_seconds(wall: &Instant) -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call's duration.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    wall.elapsed().as_secs_f64()
}

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
    count_upto(trace, u64::MAX)
}

/// The records in `trace`, counted block by block until there are more than `limit`.
fn count_upto(trace: &Path, limit: u64) -> u64 {
    let mut reader = TraceReader::open(trace).expect("a native trace");
    let mut buf = Vec::new();
    let mut n = 0u64;
    while n <= limit && reader.next_block(&mut buf).expect("readable trace") {
        n += buf.len() as u64;
    }
    n
}

/// One process per trace, each with one thread pinned to its own core (0, 1, ...).
fn system_config(traces: &[&Path], machine: &str) -> SystemConfig {
    let processes: Vec<_> = traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({"name": format!("p{i}"), "pin": [i],
                               "threads": [{"trace": t, "format": "native"}]})
        })
        .collect();
    let doc = serde_json::json!({
        "machine": {"preset": machine},
        "memory": {"ram": "2GiB"},
        "policy": {"name": "linux"},
        "processes": processes,
    });
    system_config_from_json(&doc.to_string()).expect("valid system config")
}

/// The traces through the machine's hierarchies (one per chip, no coherence between them),
/// trace `i` on core `i`, their blocks interleaved.
fn cache_only(config: &SystemConfig, traces: &[&Path]) -> u64 {
    let per_chip = config.machine.hierarchy.cores as usize;
    let mut chips: Vec<Hierarchy> = (0..config.machine.chips)
        .map(|_| Hierarchy::new(&config.machine.hierarchy).expect("hierarchy"))
        .collect();
    let mut readers: Vec<_> = traces
        .iter()
        .map(|t| TraceReader::open(t).expect("trace"))
        .collect();
    let mut live = vec![true; readers.len()];
    let mut buf: Vec<Record> = Vec::new();
    let mut n = 0;
    while live.iter().any(|&l| l) {
        for (core, reader) in readers.iter_mut().enumerate() {
            if !live[core] {
                continue;
            }
            if !reader.next_block(&mut buf).expect("readable trace") {
                live[core] = false;
                continue;
            }
            for r in &mut buf {
                // as the system's thread pinned to that core
                r.thread = (core % per_chip) as u32;
            }
            chips[core / per_chip].run_block(&buf);
            n += buf.len() as u64;
        }
    }
    assert!(chips.iter().all(|h| h.check_invariants().is_empty()));
    n
}

/// The records of the traces, decoded and dropped.
fn decode(traces: &[&Path]) -> u64 {
    traces.iter().map(|t| count(t)).sum()
}

fn system(config: &SystemConfig) -> u64 {
    let mut s = System::new(config).expect("system");
    s.run().expect("run");
    let r = s.report();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    r.processes.iter().map(|p| p.references).sum()
}

/// Best seconds of each side over `repeats` alternating rounds: (wall, CPU).
struct Best {
    decode: (f64, f64),
    system: (f64, f64),
    cache: (f64, f64),
}

/// `side`'s wall and CPU seconds, each the best so far.
fn timed(best: &mut (f64, f64), side: impl FnOnce()) {
    let wall = Instant::now();
    let cpu = cpu_seconds(&wall);
    side();
    best.0 = best.0.min(wall.elapsed().as_secs_f64());
    best.1 = best.1.min(cpu_seconds(&wall) - cpu);
}

fn measure(
    traces: &[&Path],
    machine: &str,
    records: u64,
    repeats: usize,
    only: Option<&str>,
) -> Best {
    let config = system_config(traces, machine);
    let none = (f64::INFINITY, f64::INFINITY);
    let mut best = Best {
        decode: none,
        system: none,
        cache: none,
    };
    let wanted = |side: &str| only.is_none_or(|o| o == side);
    for _ in 0..repeats {
        if wanted("decode") {
            timed(&mut best.decode, || assert_eq!(decode(traces), records));
        }
        if wanted("system") {
            timed(&mut best.system, || {
                let n = system(&config);
                assert_eq!(n, records, "the system simulates every record once");
            });
        }
        if wanted("cache") {
            timed(&mut best.cache, || {
                assert_eq!(cache_only(&config, traces), records)
            });
        }
    }
    best
}

fn report(name: &str, records: u64, machine: &str, repeats: usize, b: &Best) {
    let rate = |s: f64| records as f64 / s / 1e6;
    for (clock, pick) in [("wall", 0), ("cpu", 1)] {
        let t = |s: (f64, f64)| if pick == 0 { s.0 } else { s.1 };
        println!(
            "system_trace_speed {name} ({records} records, {machine}): best of {repeats} ({clock}): decode {:.2} M records/s, system {:.2} M records/s, cache-only {:.2} M records/s: system/decode {:.2}x, cache-only/decode {:.2}x, system/cache-only {:.2}x",
            rate(t(b.decode)),
            rate(t(b.system)),
            rate(t(b.cache)),
            t(b.system) / t(b.decode),
            t(b.cache) / t(b.decode),
            t(b.system) / t(b.cache),
        );
    }
}

fn main() {
    let traces: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if traces.is_empty() {
        eprintln!(
            "usage: system_trace_speed TRACE... (native traces; LIMIT, REPEATS, MACHINES, MIX, ONLY)"
        );
        std::process::exit(2);
    }
    let limit = env_num("LIMIT", 4_000_000);
    let repeats = env_num("REPEATS", 3).max(1) as usize;
    let machines = std::env::var("MACHINES").unwrap_or_else(|_| "xeon-e5506,power5".into());
    let only = std::env::var("ONLY").ok();
    let mix = env_num("MIX", 2) as usize;
    let tmp = std::env::temp_dir().join(format!("system_trace_speed.{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let mut prefixes = Vec::new();
    for (i, trace) in traces.iter().enumerate() {
        let upto = count_upto(trace, if limit == 0 { u64::MAX } else { limit });
        prefixes.push(if limit == 0 || upto <= limit {
            (trace.clone(), upto)
        } else {
            let p = tmp.join(format!("{i}.cctrace"));
            let n = write_prefix(trace, &p, limit);
            (p, n)
        });
    }
    for machine in machines.split(',') {
        for (trace, (prefix, records)) in traces.iter().zip(&prefixes) {
            let b = measure(
                &[prefix.as_path()],
                machine,
                *records,
                repeats,
                only.as_deref(),
            );
            report(&trace.display().to_string(), *records, machine, repeats, &b);
        }
        let cores = {
            let c = system_config(&[prefixes[0].0.as_path()], machine).machine;
            (c.chips * c.hierarchy.cores) as usize
        };
        let k = mix.min(prefixes.len()).min(cores);
        if k >= 2 {
            let group: Vec<&Path> = prefixes[..k].iter().map(|p| p.0.as_path()).collect();
            let records = prefixes[..k].iter().map(|p| p.1).sum();
            let b = measure(&group, machine, records, repeats, only.as_deref());
            let names: Vec<String> = traces[..k]
                .iter()
                .map(|t| t.display().to_string())
                .collect();
            let name = format!("mix {}", names.join(" + "));
            report(&name, records, machine, repeats, &b);
        }
    }
    for (p, _) in &prefixes {
        if p.starts_with(&tmp) {
            let _ = std::fs::remove_file(p);
        }
    }
    let _ = std::fs::remove_dir(&tmp);
}
