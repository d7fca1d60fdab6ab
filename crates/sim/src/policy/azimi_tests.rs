//! Scenario tests of Azimi et al.'s case studies 1 and 3 (`mrc-partition`, `thread-cluster`):
//! each runs a config from `examples/azimi/` under `linux` and under the policy and checks the
//! paper's qualitative result, with the invariants and determinism.
use crate::system::testing;
use crate::system::{ProcessStats, System, SystemConfig, SystemReport};

const CORUN: &str = include_str!("../../../../examples/azimi/corun.toml");
const SHARING: &str = include_str!("../../../../examples/azimi/sharing.toml");

fn run_as(text: &str, policy: &str) -> SystemReport {
    let (s, r) = testing::run_config(&testing::config_for(text, policy, None), None);
    assert_eq!(s.free_frames(), s.total_frames(), "every frame comes back");
    r
}

fn process<'a>(r: &'a SystemReport, name: &str) -> &'a ProcessStats {
    r.processes.iter().find(|p| p.name == name).unwrap()
}

/// `mrc-partition` as the paper runs it: the window budget lifted (`max_window_overhead` 1.0; the
/// paper's runs last billions of cycles, so its windows are a small part of them) and the partition
/// applied whatever the decision (`always_partition`). The defaults' outcome on the co-run is
/// `mrc_partition_budget_is_a_rate_over_the_run_so_far`'s run.
fn run_paper_window(text: &str) -> SystemReport {
    let (s, r) = testing::run_config(&paper_window_config(text), None);
    assert_eq!(s.free_frames(), s.total_frames(), "every frame comes back");
    r
}

/// The config `run_paper_window` runs: `mrc-partition`, the ideal PMU (`config_for`), the
/// window budget lifted, and the partition applied whatever the decision
/// (`always_partition`, the paper's behaviour; the decision is the default).
fn paper_window_config(text: &str) -> SystemConfig {
    let mut config = testing::config_for(text, "mrc-partition", None);
    config.policy.mrc_partition.max_window_overhead = 1.0;
    config.policy.mrc_partition.always_partition = true;
    config
}

/// Regression: the window budget was a prerequisite: a window began only once its process had run
/// `window x sample_cost_cycles / max_window_overhead` cycles since its last one (10 G cycles for
/// the default 100 M-cycle window), so no run shorter than that ever measured. It is now a rate
/// over the run so far: a window begins once the warm-up is over and the budget affords at least
/// `min_window` samples, as long as what the budget affords then (`window_afforded`), so the
/// short co-run (~50 M cycles) measures under the defaults and its windows' interrupts cost at
/// most 1% of each process's cycles.
#[test]
fn mrc_partition_budget_is_a_rate_over_the_run_so_far() {
    let mrc = corun_defaults();
    let r = &mrc.policy_report;
    eprintln!("windows {}", r["windows"]);
    for p in &mrc.processes {
        let sizes: Vec<u64> = r["windows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["process"] == p.name.as_str())
            .map(|w| w["samples"].as_u64().unwrap())
            .collect();
        assert!(
            !sizes.is_empty(),
            "{}: no window in {} cycles",
            p.name,
            p.cycles
        );
        // Sized to the budget: shorter than the configured 20,000, at least min_window.
        assert!(
            sizes.iter().all(|&n| (1_000..20_000).contains(&n)),
            "{sizes:?}"
        );
        // Every interrupt of the run cost at most 1% of the process's cycles (100 cycles each).
        let paid = p.kernel.interrupt.count as f64 * 100.0;
        assert!(
            paid <= 0.01 * p.cycles,
            "{}: {paid} of {} cycles",
            p.name,
            p.cycles
        );
    }
}

/// `corun.toml` under `mrc-partition`'s defaults, run once for the tests that read it.
fn corun_defaults() -> &'static SystemReport {
    static RUN: std::sync::OnceLock<SystemReport> = std::sync::OnceLock::new();
    RUN.get_or_init(|| run_as(CORUN, "mrc-partition"))
}

/// Regression: the decision counted the windows' interrupts, paid whatever it decides, as a cost of
/// partitioning (200 M cycles on `xeon-e5506` against a partition's page moves of 0.8 M), so it
/// refused partitions that gain more than they cost. Its cost is the page moves alone; the windows
/// are reported beside it.
#[test]
fn decision_ignores_the_windows_already_paid() {
    let r = &corun_defaults().policy_report;
    let decisions = r["decisions"].as_array().unwrap();
    assert!(!decisions.is_empty(), "no decision: {r}");
    assert!(decisions[0]["window_cost_cycles"].as_u64().unwrap() > 0);
    for d in decisions {
        eprintln!("decision {d}");
        assert_eq!(
            d["cost_cycles"].as_f64().unwrap(),
            d["move_cost_cycles"].as_f64().unwrap(),
            "{d}"
        );
        let (saved, noise) = (
            d["cycles_saved"].as_f64().unwrap(),
            d["noise_cycles"].as_f64().unwrap(),
        );
        assert_eq!(
            d["partition"],
            saved - noise > d["move_cost_cycles"].as_f64().unwrap(),
            "{d}"
        );
    }
}

/// Margin by which `mrc-partition` may lower the streaming program's IPC (Azimi Table 1:
/// "0% for equake").
const STREAM_MARGIN: f64 = 0.05;

#[test]
fn mrc_partition_protects_the_cache_sensitive_program() {
    // Table 1's shape is a cache result: pinned to the fixed-latency memory (the queued controller
    // is the default; docs/system.md "Memory bandwidth and queueing" says what this run shows under
    // it: it passes there too).
    let corun = format!("{CORUN}\n[machine.memory]\nmodel = \"fixed\"\n");
    let linux = run_as(&corun, "linux");
    let mrc = run_paper_window(&corun);
    let (ls, ms) = (process(&linux, "sensitive"), process(&mrc, "sensitive"));
    let (lt, mt) = (process(&linux, "stream"), process(&mrc, "stream"));
    let pr = &mrc.policy_report;
    eprintln!(
        "sensitive IPC {:.4} -> {:.4} ({:+.1}%), LLC miss rate {:.3} -> {:.3}; stream IPC {:.4} -> {:.4} ({:+.1}%)",
        ls.ipc,
        ms.ipc,
        100.0 * (ms.ipc / ls.ipc - 1.0),
        ls.llc_miss_rate,
        ms.llc_miss_rate,
        lt.ipc,
        mt.ipc,
        100.0 * (mt.ipc / lt.ipc - 1.0)
    );
    eprintln!("allocations {}", pr["allocations"]);
    // The first allocation: the stream's curve is flat (it never reuses a line), so it keeps
    // one color and the sensitive program gets the rest.
    let first = &pr["allocations"][0]["colors"];
    assert_eq!(
        first["stream"][1].as_u64().unwrap() - first["stream"][0].as_u64().unwrap(),
        1
    );
    assert_eq!(first["sensitive"], serde_json::json!([0, 15]));
    let windows = pr["windows"].as_array().unwrap();
    let stream_curve = windows.iter().find(|w| w["process"] == "stream").unwrap();
    assert!(stream_curve["miss_rate"]
        .as_array()
        .unwrap()
        .iter()
        .all(|m| m.as_f64().unwrap() > 0.99));
    // Table 1's shape: the cache-sensitive program gains, the stream does not lose (beyond a
    // stated margin).
    assert!(ms.ipc > 1.1 * ls.ipc, "{} vs {}", ms.ipc, ls.ipc);
    assert!(ms.llc_miss_rate < ls.llc_miss_rate);
    assert!(
        mt.ipc > (1.0 - STREAM_MARGIN) * lt.ipc,
        "{} vs {}",
        mt.ipc,
        lt.ipc
    );

    // The online curves against the exact curve of each program's whole L1-miss stream (a
    // validation run: sampling outside the windows is free, so the run itself is unchanged).
    // The same config as the run it is compared with, plus the check.
    let mut checked = paper_window_config(&corun);
    checked.policy.mrc_partition.exact_check = true;
    let mut s = System::new(&checked).unwrap();
    s.run().unwrap();
    let c = s.report();
    assert!(c.invariants.is_empty());
    assert_eq!(
        process(&c, "sensitive").cycles,
        ms.cycles,
        "the check does not perturb the run"
    );
    for w in c.policy_report["windows"].as_array().unwrap() {
        let mae = w["mae_vs_exact"].as_f64().unwrap();
        eprintln!(
            "window of {} at {}: MAE {:.4} against the exact curve",
            w["process"], w["time"], mae
        );
        if w["process"] == "stream" {
            assert!(mae < 0.01, "a stream's curve is flat in any window: {w}");
        } else {
            // The short window (20,000 misses, 6,000 of them warm-up, over a 14,336-line
            // footprint) counts its first touches of lines as misses at every size, where the
            // whole run's curve falls to almost nothing: most of the error is that cold floor
            // (0.143 measured; docs/azimi.md). The shape still ranks the utilities correctly.
            assert!(mae < 0.2, "{w}");
            let m: Vec<f64> = w["miss_rate"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert!(m[1] > m[14] + 0.3, "falls until the footprint fits: {m:?}");
            assert!((m[14] - m[16]).abs() < 1e-9, "flat once it fits: {m:?}");
        }
    }
    // When one program is done, the other has the cache to itself (the stream, whose first
    // pass the kernel's clears serve from the cache, finishes first).
    let last = &pr["allocations"].as_array().unwrap().last().unwrap()["colors"];
    let survivor = if mt.cycles > ms.cycles {
        "stream"
    } else {
        "sensitive"
    };
    assert_eq!(last, &serde_json::json!({ survivor: [0, 16] }));
    // A process alone has nothing to divide: no window, no sampling cost.
    let alone = run_as(SHARING, "mrc-partition");
    assert_eq!(alone.policy_report["windows"], serde_json::json!([]));
    assert_eq!(process(&alone, "server").kernel.interrupt.count, 0);
    // Same seed, same result.
    let again = run_paper_window(&corun);
    assert_eq!(process(&again, "sensitive").cycles, ms.cycles);
    assert_eq!(again.policy_report, mrc.policy_report);
}

#[test]
fn thread_cluster_cuts_remote_accesses() {
    let linux = run_as(SHARING, "linux");
    let tc = run_as(SHARING, "thread-cluster");
    let (l, t) = (process(&linux, "server"), process(&tc, "server"));
    eprintln!(
        "remote {} -> {} ({:.0}% fewer), IPC {:.4} -> {:.4}, remote stalls {:.0} -> {:.0}",
        l.remote_accesses,
        t.remote_accesses,
        100.0 * (1.0 - t.remote_accesses as f64 / l.remote_accesses as f64),
        l.ipc,
        t.ipc,
        l.stalls.remote,
        t.stalls.remote
    );
    let pr = &tc.policy_report;
    eprintln!("{pr}");
    // The stall breakdown found the remote stalls significant, the shMaps split the threads
    // into the two groups (threads i and i + 2 share data), and the groups went to one chip each.
    assert!(!pr["detections"].as_array().unwrap().is_empty());
    assert_eq!(
        pr["clusterings"][0]["clusters"],
        serde_json::json!([[0, 2, 4, 6], [1, 3, 5, 7]])
    );
    assert!(pr["migrations"].as_u64().unwrap() > 0);
    // Remote accesses cut substantially (the paper: up to 70% fewer remote-access stalls).
    assert!(
        (t.remote_accesses as f64) < 0.5 * l.remote_accesses as f64,
        "{} vs {}",
        t.remote_accesses,
        l.remote_accesses
    );
    assert!(t.ipc > l.ipc);
    // On one chip nothing is remote: the policy stays idle.
    let one = SHARING
        .replace("chips = 2", "chips = 1")
        .replace("remote_latency = 150\n", "");
    let r = run_as(&one, "thread-cluster");
    assert_eq!(r.policy_report["detections"], serde_json::json!([]));
    let again = run_as(SHARING, "thread-cluster");
    assert_eq!(again.policy_report, tc.policy_report);
}

#[test]
fn bad_policy_parameters_are_rejected_with_their_field() {
    let cases = [
        (
            CORUN,
            "[policy.mrc-partition]\nwindow = 20000",
            "[policy.mrc-partition]\nwindow = 0",
            "policy.mrc-partition.window",
        ),
        (
            CORUN,
            "warmup = 6000",
            "warmup = 40000",
            "policy.mrc-partition.warmup",
        ),
        (
            SHARING,
            "sample_cost_cycles = 500",
            "sample_cost_cycles = 500\nstall_threshold = 1.5",
            "policy.thread-cluster.stall_threshold",
        ),
        (
            SHARING,
            "samples_per_tick = 64",
            "samples_per_tick = 0",
            "policy.thread-cluster.samples_per_tick",
        ),
    ];
    for (base, from, to, field) in cases {
        let text = base.replace(from, to);
        assert_ne!(text, base);
        let config: SystemConfig = crate::config::from_toml(&text).unwrap();
        let e = System::new(&config).err().expect("rejected").to_string();
        assert!(e.contains(field), "{e}");
    }
    let text = CORUN.replace(
        "sample_cost_cycles = 100",
        "sample_cost_cycles = 100\nwindw = 5",
    );
    assert!(
        crate::config::from_toml::<SystemConfig>(&text).is_err(),
        "unknown keys are errors"
    );
}

/// The decision's mixes (`mrc-partition/testdata/`): on the co-run machine, two cache-sensitive
/// programs (768 + 384 KiB) and two that both fit (2 x 256 KiB).
const TWO_SENSITIVE: &str = include_str!("mrc-partition/testdata/two-sensitive.toml");
const TWO_FIT: &str = include_str!("mrc-partition/testdata/two-fit.toml");

/// `paper_window_config` with the decision applied or not (`always_partition`).
fn run_decided(text: &str, always_partition: bool) -> SystemReport {
    let mut config = paper_window_config(text);
    config.policy.mrc_partition.always_partition = always_partition;
    let (s, r) = testing::run_config(&config, None);
    assert_eq!(s.free_frames(), s.total_frames(), "every frame comes back");
    r
}

fn describe(name: &str, linux: &SystemReport, r: &SystemReport) {
    for (l, m) in linux.processes.iter().zip(&r.processes) {
        eprintln!(
            "{name} {}: IPC {:.4} -> {:.4} ({:+.1}%), LLC misses {} -> {}, interrupts {}, recolors {}",
            l.name,
            l.ipc,
            m.ipc,
            100.0 * (m.ipc / l.ipc - 1.0),
            l.llc_misses,
            m.llc_misses,
            m.kernel.interrupt.count,
            m.recolors
        );
    }
    eprintln!("{name} decisions {}", r.policy_report["decisions"]);
}

/// The cycles `r`'s process `i` ran beyond linux's that its own kernel work does not explain
/// (the window's interrupts, page moves, scans), as a fraction of linux's cycles.
fn unexplained_loss(linux: &SystemReport, r: &SystemReport, i: usize) -> f64 {
    let (l, m) = (&linux.processes[i], &r.processes[i]);
    // The kernel time the policy added: linux's own (the faults) is in both runs (it had been
    // subtracted whole, which let a process lose its fault time's worth unseen).
    (m.cycles - l.cycles - (m.stalls.kernel - l.stalls.kernel)) / l.cycles
}

/// Regression: with the window the paper affords, `mrc-partition` partitioned both of the defect's
/// mixes and lost to sharing (two cache-sensitive programs, two that fit). The decision keeps the
/// cache shared: no page moves, the misses are linux's, and what is lost against linux is the
/// window's own cost (the control: the same run with `always_partition = true`, the paper's
/// behaviour, loses more).
#[test]
fn mrc_partition_keeps_the_cache_shared_on_the_mixes_that_gain_nothing() {
    for (name, text) in [("two-sensitive", TWO_SENSITIVE), ("two-fit", TWO_FIT)] {
        let linux = run_as(text, "linux");
        let decided = run_decided(text, false);
        let always = run_decided(text, true);
        describe(&format!("{name} decided"), &linux, &decided);
        describe(&format!("{name} always"), &linux, &always);
        let d = &decided.policy_report["decisions"][0];
        assert_eq!(d["applied"], "shared", "{name}: {d}");
        assert_eq!(d["partition"], false, "{name}: {d}");
        assert!(d["cycles_saved"].as_f64().unwrap() < d["cost_cycles"].as_f64().unwrap());
        assert_eq!(
            decided.policy_report["allocations"][0]["shared"], true,
            "{name}"
        );
        let sum = |r: &SystemReport| r.processes.iter().map(|p| p.ipc).sum::<f64>();
        assert!(
            sum(&decided) > sum(&always),
            "{name}: the control loses more"
        );
        // The same decision with the window's interrupts free: what the window changes other
        // than its time. Its interrupts slow each program while the other runs on, which
        // shifts how their references interleave in the shared cache; a new page's lines
        // are stored by the kernel's clear (`clear_page`) and wait there for the program's
        // first touch, so a program slowed while it first walks its pages finds fewer of
        // them (b: 2,035 LLC misses under linux, 2,732 with the window's interrupts, 2,031
        // with them free; before pages were cleared 8,064, 8,393 and 8,073). That time is
        // the window's cost, bounded below with its kernel time (`unexplained_loss`).
        let mut free = paper_window_config(text);
        free.policy.mrc_partition.always_partition = false;
        free.policy.mrc_partition.sample_cost_cycles = 1;
        let free = testing::run_config(&free, None).1;
        assert_eq!(
            free.policy_report["decisions"][0]["applied"], "shared",
            "{name}"
        );
        for i in 0..linux.processes.len() {
            assert_eq!(decided.processes[i].recolors, 0, "{name}");
            assert_eq!(free.processes[i].recolors, 0, "{name}");
            // Shared, the misses are linux's, within 5%.
            assert!(
                free.processes[i].llc_misses <= linux.processes[i].llc_misses * 105 / 100,
                "{name}: {} vs {}",
                free.processes[i].llc_misses,
                linux.processes[i].llc_misses
            );
            let loss = unexplained_loss(&linux, &decided, i);
            eprintln!("{name} process {i}: loss beyond its kernel time {loss:.4}");
            assert!(
                loss < 0.01,
                "{name} process {i}: {loss} beyond its kernel time"
            );
        }
    }
}

/// The decision's other side: where the gain is clear the decision partitions. The co-run pair with
/// the paper's window budget, the default window (50,000 misses, 12,500 of warm-up: long enough to
/// see the sensitive program's reuse, docs/azimi.md) and runs four times as long (the paper's run
/// billions of cycles): the first decision keeps the cache shared (the gain over the cycles run so
/// far does not yet pay for the windows), it is retaken each tick (ski rental) and partitions once
/// it does; the sensitive program gains.
#[test]
fn mrc_partition_partitions_when_the_gain_is_clear() {
    let long = CORUN
        .replace("window = 20000\nwarmup = 6000\n", "")
        .replace("references = 1000000", "references = 4000000")
        .replace("references = 250000", "references = 1000000");
    assert_ne!(long, CORUN);
    let linux = run_as(&long, "linux");
    let r = run_decided(&long, false);
    describe("corun x4, default window", &linux, &r);
    let decisions = r.policy_report["decisions"].as_array().unwrap();
    let applied = decisions
        .iter()
        .find(|d| d["applied"] == "partition")
        .unwrap_or_else(|| panic!("never partitioned: {decisions:?}"));
    assert!(applied["cycles_saved"].as_f64().unwrap() > applied["cost_cycles"].as_f64().unwrap());
    let (ls, ms) = (process(&linux, "sensitive"), process(&r, "sensitive"));
    let (lt, mt) = (process(&linux, "stream"), process(&r, "stream"));
    eprintln!("decisions {decisions:?}");
    assert!(ms.ipc > ls.ipc, "{} vs {}", ms.ipc, ls.ipc);
    assert!(ms.llc_misses < ls.llc_misses);
    // The stream pays for its own partition: the window's interrupts and the lazy marks of its
    // pages, kernel time charged to it (the marks' shootdowns run on a core of the process whose
    // pages they are, so the sensitive program pays none of them). With that, the stream is at
    // 0.947x linux, below Table 1's "0% for equake" and the 5% margin; what the partition may not
    // cost it is anything beyond that kernel time (its misses are a stream's either way).
    let st = r.processes.iter().position(|p| p.name == "stream").unwrap();
    let loss = unexplained_loss(&linux, &r, st);
    eprintln!(
        "stream: IPC {:.4} of linux, cycles {:.0} -> {:.0}, kernel {:.0} (linux {:.0}), loss beyond it {loss:.4}",
        mt.ipc / lt.ipc,
        lt.cycles,
        mt.cycles,
        mt.stalls.kernel,
        lt.stalls.kernel
    );
    assert!(
        loss < 0.01,
        "stream: {loss} beyond the kernel time the partition added"
    );
    assert!(
        mt.stalls.kernel > lt.stalls.kernel,
        "the partition's kernel work is the stream's"
    );
}

/// Regression: the paper's co-run as `examples/azimi/corun.toml` writes it (a 20,000-miss window)
/// was not partitioned by the decision: the window counted every line it had not yet seen as a
/// miss at every size, its curve stayed at 0.43 misses per access with 15 colors, above the 0.28
/// the PMU measured while the cache was shared. With first sightings counted as censored
/// distances and the curve bounded at the process's footprint, the sensitive program's curve
/// falls below what it measured shared and the decision partitions.
#[test]
fn mrc_partition_partitions_the_short_window_corun() {
    let r = run_decided(CORUN, false);
    let d = &r.policy_report["decisions"][0];
    let s = &d["processes"]["sensitive"];
    eprintln!("corun decision {d}");
    assert_eq!(d["applied"], "partition");
    assert!(s["partitioned_miss_rate"].as_f64().unwrap() < s["shared_miss_rate"].as_f64().unwrap());
    assert_eq!(s["measured"], true);
}

/// Regression: under the realistic PMU (multiplexed counters) an event that was not on a physical
/// counter in a tick reads 0 there, and `mrc-partition` took that 0 as a measurement: the shared
/// cache's baseline of a window shorter than a tick was 0.0 LLC misses per access for both
/// programs of the co-run (a stream included), so the decision predicted a loss and kept the
/// cache shared, and a tick of 0 L1 misses counted as a phase change. Ticks in which an event
/// was not counted are now no measurement (`counted_since`).
#[test]
fn mrc_partition_takes_an_uncounted_event_for_no_measurement() {
    let text = format!("{CORUN}\n[pmu]\nideal = false\n");
    let r = run_as(&text, "mrc-partition").policy_report;
    let decisions = r["decisions"].as_array().unwrap();
    assert!(!decisions.is_empty(), "no decision: {r}");
    for d in decisions {
        let stream = &d["processes"]["stream"];
        eprintln!("decision {d}");
        // A stream misses on every access: measured or predicted, its shared rate is near 1.
        assert!(stream["shared_miss_rate"].as_f64().unwrap() > 0.9, "{d}");
    }
    for c in r["phase_changes"].as_array().unwrap() {
        assert!(c["l1_mpki_now"].as_f64().unwrap() > 0.0, "{c}");
    }
}
