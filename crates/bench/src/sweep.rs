//! Experiments (thesis 4.3): working-set sweeps over a cache level and synchronised co-runs.
//!
//! A sweep takes 16 working-set sizes evenly spread over ±0.5 of the level's size (4.3.3: "16
//! evenly distributed working set sizes in the range ±0.5(cachesize)"; the 8th is the last that
//! fits), and runs `trials` trials at each (4.3.1: 20). Every trial allocates a fresh buffer (the
//! variability the thesis studies comes from the layout each allocation gets), installs a fresh
//! chain (which also warms the caches, 4.2.3), warms up with one loop of the chain, and chases
//! for a fixed time pinned to one core, with the PMU counting around the loop only.

use serde::{Deserialize, Serialize};

use crate::buffer::{AllocOptions, BinGeometry, BinReport, Buffer, BufferKind};
use crate::chain::{self, Pattern};
use crate::engine::{self, Pin};
use crate::pmu::{self, Counters, EventStatus};
use crate::stats::{summarize, Summary};
use crate::{host_caches, Error, HostCache};

fn d_trials() -> usize {
    20
}
fn d_duration() -> f64 {
    25.0
}
fn d_points() -> usize {
    16
}
fn d_alpha() -> f64 {
    1.0
}
fn d_seed() -> u64 {
    1
}
fn d_true() -> bool {
    true
}

/// A sweep's parameters (JSON from Python; every field optional but `level`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BenchConfig {
    /// "L1", "L2" or "L3" (L1 means the L1 data cache).
    pub level: String,
    #[serde(default = "d_buffer")]
    pub buffer: String,
    #[serde(default = "d_pattern")]
    pub pattern: String,
    #[serde(default = "d_trials")]
    pub trials: usize,
    /// Milliseconds per trial (time-bounded mode).
    #[serde(default = "d_duration")]
    pub duration_ms: f64,
    /// Working-set points (evenly over ±0.5 of the level's size).
    #[serde(default = "d_points")]
    pub points: usize,
    /// Explicit working-set sizes in bytes instead of the ±0.5 range.
    #[serde(default)]
    pub sizes: Option<Vec<u64>>,
    #[serde(default)]
    pub core: Option<usize>,
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Zipf exponent.
    #[serde(default = "d_alpha")]
    pub alpha: f64,
    #[serde(default)]
    pub reserve_hugepages: bool,
    #[serde(default = "d_true")]
    pub counters: bool,
}

fn d_buffer() -> String {
    "naive".into()
}
fn d_pattern() -> String {
    "uniform".into()
}

/// The level named "L1" / "L1D" / "L2" / "L3" among the host's data / unified caches.
pub fn find_level(caches: &[HostCache], name: &str) -> Result<HostCache, Error> {
    let n: u32 = match name.to_ascii_uppercase().as_str() {
        "L1" | "L1D" => 1,
        "L2" => 2,
        "L3" => 3,
        "L4" => 4,
        _ => {
            return Err(Error::BadInput(format!(
                "level: unknown {name:?}; allowed: L1, L2, L3"
            )))
        }
    };
    caches
        .iter()
        .find(|c| c.level == n && c.kind != "Instruction")
        .cloned()
        .ok_or_else(|| {
            Error::BadInput(format!(
                "level: this machine reports no {name} data cache (sysfs lists: {})",
                caches
                    .iter()
                    .filter(|c| c.kind != "Instruction")
                    .map(level_name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

pub fn level_name(c: &HostCache) -> String {
    if c.level == 1 {
        "L1D".into()
    } else {
        format!("L{}", c.level)
    }
}

/// The thesis's 16 sizes over [0.5 C, 1.5 C], in whole lines.
pub fn sweep_sizes(cache: u64, points: usize) -> Vec<u64> {
    let p = points.max(2) as u64;
    (0..p)
        .map(|i| ((cache / 2 + i * cache / (p - 1)) / 64).max(1) * 64)
        .collect()
}

/// Progress of a long run; the hook may stop it by returning an error (Ctrl-C).
pub struct Progress<'a> {
    pub done: usize,
    pub total: usize,
    pub line: &'a str,
}

pub type Hook<'a> = &'a mut dyn FnMut(&Progress) -> Result<(), Error>;

#[derive(Debug, Clone, Serialize)]
pub struct CounterSummary {
    /// Mean count per access over the trials that counted it.
    pub per_access: f64,
    pub ci95: f64,
    pub multiplexed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub working_set_bytes: u64,
    /// Mean over trials.
    pub ns_per_access: f64,
    /// Half-width of the 95% CI of the mean (Student t).
    pub ci95: f64,
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    pub accesses_per_second: f64,
    pub trials: Vec<f64>,
    /// The same from the thread's CPU time (time slices taken by other tasks excluded).
    pub cpu_ns_per_access: f64,
    pub cpu_ci95: f64,
    pub cpu_trials: Vec<f64>,
    /// Only the events that were available, per access (software events too).
    pub counters: std::collections::BTreeMap<String, CounterSummary>,
    /// Realised bin conflicts (K) of each trial's buffer, when frames were visible.
    pub realised_conflicts: Option<Vec<u64>>,
    /// The binomial model's expectation for uniformly random frames (thesis 3.2).
    pub model_k_avg: f64,
    pub model_k_min: f64,
    pub bins: BinReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct LevelInfo {
    pub name: String,
    pub size: u64,
    pub ways: u32,
    pub line_size: u32,
    pub shared_by: u32,
}

impl From<&HostCache> for LevelInfo {
    fn from(c: &HostCache) -> Self {
        LevelInfo {
            name: level_name(c),
            size: c.size,
            ways: c.ways,
            line_size: c.line_size,
            shared_by: c.shared_by,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub caches: Vec<LevelInfo>,
    pub cpus: Vec<usize>,
    pub hypervisor: bool,
    pub thp: Option<String>,
    pub huge_page_size: usize,
    pub pfns_visible: bool,
    pub root: bool,
    pub loadavg: Option<String>,
}

pub fn machine() -> Machine {
    let caches = host_caches();
    Machine {
        caches: caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .map(LevelInfo::from)
            .collect(),
        cpus: engine::allowed_cpus(),
        hypervisor: std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
            s.lines().any(|l| {
                (l.starts_with("flags") || l.starts_with("Features"))
                    && l.split_whitespace().any(|w| w == "hypervisor")
            })
        }),
        thp: crate::buffer::thp_mode(),
        huge_page_size: crate::buffer::huge_page_size(),
        pfns_visible: crate::pagemap::pfns_visible(),
        // SAFETY: geteuid has no preconditions.
        root: unsafe { libc::geteuid() } == 0,
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|s| s.trim().to_string()),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub schema: &'static str,
    pub config: BenchConfig,
    pub level: LevelInfo,
    pub machine: Machine,
    pub engine: &'static str,
    pub core: usize,
    pub pmu: Vec<EventStatus>,
    pub points: Vec<Point>,
    /// What could not be done, in words.
    pub notes: Vec<String>,
}

fn validate(cfg: &BenchConfig) -> Result<(BufferKind, Pattern), Error> {
    let kind = BufferKind::parse(&cfg.buffer)?;
    let pat = Pattern::parse(&cfg.pattern)?;
    if cfg.trials == 0 {
        return Err(Error::BadInput("trials: must be at least 1".into()));
    }
    if cfg.duration_ms.is_nan() || cfg.duration_ms <= 0.0 || cfg.duration_ms > 60_000.0 {
        return Err(Error::BadInput("duration_ms: must be in (0, 60000]".into()));
    }
    if cfg.points < 2 && cfg.sizes.is_none() {
        return Err(Error::BadInput("points: must be at least 2".into()));
    }
    if cfg.alpha.is_nan() || cfg.alpha <= 0.0 {
        return Err(Error::BadInput(
            "alpha: the Zipf exponent must be positive".into(),
        ));
    }
    if let Some(s) = &cfg.sizes {
        if s.is_empty() || s.iter().any(|&b| b < 64) {
            return Err(Error::BadInput(
                "sizes: give at least one size, each at least 64 bytes".into(),
            ));
        }
    }
    Ok((kind, pat))
}

/// Run a sweep.
pub fn run_sweep(cfg: &BenchConfig, hook: Hook) -> Result<BenchResult, Error> {
    let (kind, pattern) = validate(cfg)?;
    let caches = host_caches();
    let level = find_level(&caches, &cfg.level)?;
    let geom = BinGeometry {
        cache_size: level.size,
        ways: level.ways as u64,
    };
    let cpus = engine::allowed_cpus();
    let core = cfg.core.unwrap_or(*cpus.last().unwrap_or(&0));
    let _pin = Pin::to(core)?;
    let sizes = cfg
        .sizes
        .clone()
        .unwrap_or_else(|| sweep_sizes(level.size, cfg.points));
    let mut notes = Vec::new();
    let statuses = if cfg.counters {
        pmu::probe_events()
    } else {
        Vec::new()
    };
    let counters = Counters::open(&statuses);
    let unsupported: Vec<&str> = statuses
        .iter()
        .filter(|s| s.status == "not supported")
        .map(|s| s.name.as_str())
        .collect();
    if !unsupported.is_empty() {
        notes.push(format!(
            "not supported here (reported as missing, not 0): {}",
            unsupported.join(", ")
        ));
    }
    if let Some(s) = statuses.iter().find(|s| s.status == "no permission") {
        notes.push(s.detail.clone().unwrap_or_default());
    }
    let opts = AllocOptions {
        reserve_hugepages: cfg.reserve_hugepages,
    };
    let total = sizes.len() * cfg.trials;
    let mut points = Vec::new();
    let dur_ns = (cfg.duration_ms * 1e6) as u64;
    for (pi, &ws) in sizes.iter().enumerate() {
        let mut ns = Vec::new();
        let mut cpu = Vec::new();
        let mut aps = Vec::new();
        let mut conflicts: Vec<u64> = Vec::new();
        let mut conflicts_ok = true;
        let mut counter_vals: std::collections::BTreeMap<String, (Vec<f64>, bool)> =
            Default::default();
        let mut first_bins = None;
        for t in 0..cfg.trials {
            let buf = Buffer::allocate(kind, ws, geom, opts)?;
            let seed = cfg
                .seed
                .wrapping_mul(1_000_003)
                .wrapping_add((pi * 10_007 + t) as u64);
            let ch = chain::install(&buf, ws, pattern, cfg.alpha, seed)?;
            let base = buf.base() as *const u32;
            // Warm-up: one loop of the chain (bounded).
            // SAFETY: the chain was installed in buf, which lives to the end of the trial.
            unsafe { engine::chase_count(base, ch.start, (ch.length as u64).min(4 << 20)) };
            let deadline = engine::now_ns() + dur_ns;
            // SAFETY: as above.
            let run = unsafe {
                engine::chase_until(
                    base,
                    ch.start,
                    deadline,
                    &mut || counters.enable(),
                    &mut || counters.disable(),
                )?
            };
            ns.push(run.ns_per_access());
            cpu.push(run.cpu_ns_per_access());
            aps.push(run.accesses_per_second());
            for r in counters.read() {
                let e = counter_vals.entry(r.name.clone()).or_default();
                if let Some(v) = r.value {
                    e.0.push(v / run.accesses.max(1) as f64);
                }
                e.1 |= r.multiplexed;
            }
            match buf.realised_conflicts(geom) {
                Some(k) => conflicts.push(k),
                None => conflicts_ok = false,
            }
            if first_bins.is_none() {
                first_bins = Some(buf.bin_report(geom));
            }
            drop(buf);
            let line = format!(
                "{} {} {}: {} KiB trial {}/{}: {:.2} ns/access ({:.2} on-CPU)",
                level_name(&level),
                kind,
                pattern.name(),
                ws >> 10,
                t + 1,
                cfg.trials,
                run.ns_per_access(),
                run.cpu_ns_per_access()
            );
            hook(&Progress {
                done: pi * cfg.trials + t + 1,
                total,
                line: &line,
            })?;
        }
        let s: Summary = summarize(&ns);
        let bins = first_bins.expect("at least one trial");
        if !conflicts_ok && pi == 0 {
            notes.push(format!(
                "bin distributions unavailable: {}",
                bins.note.clone().unwrap_or_default()
            ));
        }
        points.push(Point {
            working_set_bytes: ws,
            ns_per_access: s.mean,
            ci95: s.ci95,
            sd: s.sd,
            min: s.min,
            max: s.max,
            accesses_per_second: summarize(&aps).mean,
            trials: ns,
            cpu_ns_per_access: summarize(&cpu).mean,
            cpu_ci95: summarize(&cpu).ci95,
            cpu_trials: cpu,
            counters: counter_vals
                .into_iter()
                .filter(|(_, (v, _))| !v.is_empty())
                .map(|(k, (v, m))| {
                    let s = summarize(&v);
                    (
                        k,
                        CounterSummary {
                            per_access: s.mean,
                            ci95: s.ci95,
                            multiplexed: m,
                        },
                    )
                })
                .collect(),
            realised_conflicts: conflicts_ok.then_some(conflicts),
            model_k_avg: bins.model_k_avg,
            model_k_min: bins.model_k_min,
            bins,
        });
    }
    Ok(BenchResult {
        schema: "cachecolor-bench/1",
        config: cfg.clone(),
        level: LevelInfo::from(&level),
        machine: machine(),
        engine: engine::ENGINE,
        core,
        pmu: counters.statuses.clone(),
        points,
        notes,
    })
}

fn d_max_cores() -> Option<usize> {
    None
}

/// A synchronised co-run (thesis Figure 2.5 / 4.3.1): 1..=N threads, each pinned to its own
/// core with its own buffer and chain over a shared level, all released together and stopped by
/// timers armed to one absolute deadline.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CorunConfig {
    /// The shared level (default L3).
    #[serde(default = "d_l3")]
    pub level: String,
    #[serde(default = "d_buffer")]
    pub buffer: String,
    #[serde(default = "d_pattern")]
    pub pattern: String,
    /// Per-thread working set (default: half the level, so one thread fits and two fill it).
    #[serde(default)]
    pub working_set_bytes: Option<u64>,
    #[serde(default = "d_max_cores")]
    pub max_cores: Option<usize>,
    #[serde(default = "d_trials")]
    pub trials: usize,
    #[serde(default = "d_duration")]
    pub duration_ms: f64,
    #[serde(default = "d_seed")]
    pub seed: u64,
    #[serde(default)]
    pub reserve_hugepages: bool,
}

fn d_l3() -> String {
    "L3".into()
}

#[derive(Debug, Clone, Serialize)]
pub struct CorunPoint {
    pub cores: usize,
    /// Mean ns per access over threads and trials.
    pub ns_per_access: f64,
    pub ci95: f64,
    /// Sum over threads of accesses per second (mean over trials).
    pub total_accesses_per_second: f64,
    pub trials: Vec<Vec<f64>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorunResult {
    pub schema: &'static str,
    pub config: CorunConfig,
    pub level: LevelInfo,
    pub working_set_bytes: u64,
    pub cpus: Vec<usize>,
    pub points: Vec<CorunPoint>,
    pub machine: Machine,
}

pub fn run_corun(cfg: &CorunConfig, hook: Hook) -> Result<CorunResult, Error> {
    let kind = BufferKind::parse(&cfg.buffer)?;
    let pattern = Pattern::parse(&cfg.pattern)?;
    if cfg.trials == 0 || cfg.duration_ms.is_nan() || cfg.duration_ms <= 0.0 {
        return Err(Error::BadInput(
            "trials and duration_ms: must be positive".into(),
        ));
    }
    let caches = host_caches();
    let level = find_level(&caches, &cfg.level)?;
    let geom = BinGeometry {
        cache_size: level.size,
        ways: level.ways as u64,
    };
    let ws = cfg.working_set_bytes.unwrap_or(level.size / 2) / 64 * 64;
    let cpus = engine::allowed_cpus();
    let n_max = cfg.max_cores.unwrap_or(cpus.len());
    if n_max == 0 || n_max > cpus.len() {
        return Err(Error::BadInput(format!(
            "max_cores: {n_max} cores asked, {} available ({})",
            cpus.len(),
            engine::cpu_list(&cpus)
        )));
    }
    let opts = AllocOptions {
        reserve_hugepages: cfg.reserve_hugepages,
    };
    let dur_ns = (cfg.duration_ms * 1e6) as u64;
    let mut points = Vec::new();
    let total = n_max * cfg.trials;
    for n in 1..=n_max {
        let mut trials = Vec::new();
        for t in 0..cfg.trials {
            let barrier = std::sync::Barrier::new(n + 1);
            let deadline = std::sync::atomic::AtomicU64::new(0);
            let results: Vec<Result<engine::Run, Error>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..n)
                    .map(|k| {
                        let (barrier, deadline) = (&barrier, &deadline);
                        let cpu = cpus[k];
                        s.spawn(move || -> Result<engine::Run, Error> {
                            let setup = (|| {
                                let pin = Pin::to(cpu)?;
                                let buf = Buffer::allocate(kind, ws, geom, opts)?;
                                let ch = chain::install(
                                    &buf,
                                    ws,
                                    pattern,
                                    1.0,
                                    cfg.seed + (t * 64 + k) as u64,
                                )?;
                                Ok::<_, Error>((pin, buf, ch))
                            })();
                            barrier.wait();
                            barrier.wait();
                            let (_pin, buf, ch) = setup?;
                            let d = deadline.load(std::sync::atomic::Ordering::SeqCst);
                            // SAFETY: chain installed in buf, alive here.
                            unsafe {
                                engine::chase_until(
                                    buf.base() as *const u32,
                                    ch.start,
                                    d,
                                    &mut || {},
                                    &mut || {},
                                )
                            }
                        })
                    })
                    .collect();
                barrier.wait();
                deadline.store(
                    engine::now_ns() + dur_ns,
                    std::sync::atomic::Ordering::SeqCst,
                );
                barrier.wait();
                hs.into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::Unsupported("co-run thread panicked".into()))
                        })
                    })
                    .collect()
            });
            let mut per = Vec::new();
            for r in results {
                per.push(r?.ns_per_access());
            }
            let line = format!(
                "co-run {n} cores, trial {}/{}: {:?} ns/access",
                t + 1,
                cfg.trials,
                per.iter()
                    .map(|x| (x * 100.0).round() / 100.0)
                    .collect::<Vec<_>>()
            );
            trials.push(per);
            hook(&Progress {
                done: (n - 1) * cfg.trials + t + 1,
                total,
                line: &line,
            })?;
        }
        let all: Vec<f64> = trials.iter().flatten().copied().collect();
        let s = summarize(&all);
        let tot = trials
            .iter()
            .map(|p| p.iter().map(|ns| 1e9 / ns).sum::<f64>())
            .sum::<f64>()
            / trials.len() as f64;
        points.push(CorunPoint {
            cores: n,
            ns_per_access: s.mean,
            ci95: s.ci95,
            total_accesses_per_second: tot,
            trials,
        });
    }
    Ok(CorunResult {
        schema: "cachecolor-corun/1",
        config: cfg.clone(),
        level: LevelInfo::from(&level),
        working_set_bytes: ws,
        cpus: cpus[..n_max].to_vec(),
        points,
        machine: machine(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_span_plus_minus_half() {
        let s = sweep_sizes(32 << 10, 16);
        assert_eq!(s.len(), 16);
        assert_eq!(s[0], 16 << 10);
        assert_eq!(s[15], 48 << 10);
        assert!(
            s[7] < 32 << 10 && s[8] > 32 << 10,
            "the 8th point is the last that fits"
        );
        assert!(s.iter().all(|x| x % 64 == 0));
    }

    fn cfg(level: &str) -> BenchConfig {
        serde_json::from_str(&format!(r#"{{"level": "{level}", "trials": 2, "duration_ms": 2, "points": 2, "sizes": [4096, 16384]}}"#)).unwrap()
    }

    #[test]
    fn a_small_sweep_reports_points_and_only_available_counters() {
        let r = run_sweep(&cfg("L1"), &mut |_| Ok(())).unwrap();
        assert_eq!(r.points.len(), 2);
        for p in &r.points {
            assert_eq!(p.trials.len(), 2);
            assert!(p.ns_per_access > 0.0 && p.ci95.is_finite());
            for name in p.counters.keys() {
                assert!(
                    r.pmu
                        .iter()
                        .any(|s| &s.name == name && s.status == "supported"),
                    "{name}"
                );
            }
        }
        let v = serde_json::to_value(&r).unwrap();
        assert!(v["points"][0]["working_set_bytes"].is_u64());
    }

    #[test]
    fn bad_inputs_are_clear() {
        let mut c = cfg("L1");
        c.core = Some(4096);
        assert!(run_sweep(&c, &mut |_| Ok(()))
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        let mut c = cfg("L1");
        c.sizes = Some(vec![1 << 50]);
        assert!(run_sweep(&c, &mut |_| Ok(()))
            .unwrap_err()
            .to_string()
            .contains("available"));
        let mut c = cfg("L9");
        c.level = "L9".into();
        assert!(run_sweep(&c, &mut |_| Ok(()))
            .unwrap_err()
            .to_string()
            .contains("allowed"));
        let mut c = cfg("L1");
        c.buffer = "malloc".into();
        assert!(run_sweep(&c, &mut |_| Ok(()))
            .unwrap_err()
            .to_string()
            .contains("allowed"));
        assert!(serde_json::from_str::<BenchConfig>(r#"{"level":"L1","trails":3}"#).is_err());
    }

    #[test]
    fn the_hook_can_stop_a_sweep() {
        let mut calls = 0;
        let e = run_sweep(&cfg("L1"), &mut |_| {
            calls += 1;
            Err(Error::Interrupted)
        })
        .unwrap_err();
        assert!(matches!(e, Error::Interrupted));
        assert_eq!(calls, 1);
    }

    #[test]
    fn corun_runs_every_core_count() {
        let c: CorunConfig = serde_json::from_str(
            r#"{"level": "L1", "working_set_bytes": 8192, "trials": 1, "duration_ms": 2}"#,
        )
        .unwrap();
        let r = run_corun(&c, &mut |_| Ok(())).unwrap();
        assert_eq!(r.points.len(), engine::allowed_cpus().len());
        for (i, p) in r.points.iter().enumerate() {
            assert_eq!(p.trials[0].len(), i + 1);
        }
    }
}
