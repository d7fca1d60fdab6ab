//! Scenario tests: the off-load configs of `examples/oscache/` on the synthetic workloads
//! (`examples/oscache/workloads/`), asserting the paper's qualitative results (Nellans et al.
//! section 4.2 predictor accuracy, Figure 5 shape, section 6 scalability). References are cut
//! to keep each test well under 20 s in --release; every run's invariants must be empty.
use super::*;
use crate::oscache::predictor::PredictorConfig;

const WEB: (&str, &str) = (
    include_str!("../../../../../examples/oscache/offload-web-server.toml"),
    include_str!("../../../../../examples/oscache/workloads/web-server.toml"),
);
const JVM: (&str, &str) = (
    include_str!("../../../../../examples/oscache/offload-jvm.toml"),
    include_str!("../../../../../examples/oscache/workloads/jvm.toml"),
);
const COMPUTE: (&str, &str) = (
    include_str!("../../../../../examples/oscache/offload-compute.toml"),
    include_str!("../../../../../examples/oscache/workloads/compute.toml"),
);

/// The example with its workload inlined, `references` per phase, a fixed trigger (None =
/// baseline), a migration cost and a number of user cores.
fn file(
    w: (&str, &str),
    references: u64,
    trigger: Option<u64>,
    mig: u64,
    cores: u32,
) -> OffloadFile {
    let mut doc: serde_json::Value = toml::from_str(w.0).unwrap();
    let o = doc.as_object_mut().unwrap();
    o.remove("workload_file");
    o.insert("workload".into(), toml::from_str(w.1).unwrap());
    let mut f: OffloadFile = serde_json::from_value(doc).unwrap();
    for p in &mut f.workload.as_mut().unwrap().phases {
        p.references = references;
    }
    f.offload.trigger = trigger;
    if trigger.is_some() {
        f.offload.dynamic = None;
    }
    f.offload.migration_cycles = mig;
    f.offload.user_cores = cores;
    f
}

fn run(f: &OffloadFile) -> OffloadResult {
    let r = run_file(f).unwrap();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    r
}

fn speedup(w: (&str, &str), refs: u64, n: u64, mig: u64, cores: u32) -> (f64, OffloadResult) {
    let base = run(&file(w, refs, None, mig, cores));
    let r = run(&file(w, refs, Some(n), mig, cores));
    (r.mean_ipc() / base.mean_ipc(), r)
}

#[test]
fn predictor_is_accurate_on_the_os_intensive_workloads() {
    // Section 4.2: 71.2% exact + 21.1% within 5% averaged over the paper's benchmarks; 94.8% /
    // 93.4% correct decisions at N = 500 for Apache / SPECjbb.
    for (name, w) in [("web-server", WEB), ("jvm", JVM)] {
        let r = run(&file(w, 1_000_000, None, 5000, 1));
        let a = r.total_accuracy();
        let k500 = a.triggers.iter().position(|&n| n == 500).unwrap();
        eprintln!(
            "{name}: runs {} exact {:.3} within {:.3} global {:.3} decision@500 {:.3} decisions {:?}",
            a.runs,
            a.exact_fraction(),
            a.within_fraction(),
            a.global as f64 / a.runs as f64,
            a.decision_fraction(k500),
            (0..a.triggers.len())
                .map(|k| (a.triggers[k], (a.decision_fraction(k) * 1000.0).round() / 1000.0))
                .collect::<Vec<_>>()
        );
        assert!(a.runs > 500, "{name}: {} runs", a.runs);
        assert!(
            a.exact_fraction() + a.within_fraction() > 0.8,
            "{name}: exact {} within {}",
            a.exact_fraction(),
            a.within_fraction()
        );
        assert!(a.decision_fraction(k500) > 0.9, "{name}");
    }
}

#[test]
fn offload_helps_the_web_server_only_when_migration_is_cheap_and_n_is_well_chosen() {
    let refs = 1_000_000;
    let (cheap, r) = speedup(WEB, refs, 1000, 100, 1);
    let (costly, _) = speedup(WEB, refs, 100, 10_000, 1);
    let (costly_big_n, _) = speedup(WEB, refs, 10_000, 10_000, 1);
    eprintln!(
        "web-server: N=1000 mig=100 {cheap:.3} (OS time {:.3}); N=100 mig=10000 {costly:.3}; N=10000 mig=10000 {costly_big_n:.3}",
        r.os_time_fraction()
    );
    assert!(cheap > 1.0, "cheap migration, N = 1000: {cheap}");
    assert!(costly < 1.0, "10000-cycle migration, N = 100: {costly}");
    assert!(costly_big_n > costly, "a large N limits the damage");
}

#[test]
fn offload_does_not_help_the_compute_bound_workload() {
    for (n, mig) in [(100, 100), (1000, 100), (100, 5000)] {
        let (s, _) = speedup(COMPUTE, 600_000, n, mig, 1);
        eprintln!("compute: N={n} mig={mig} {s:.4}");
        assert!(s < 1.005, "N {n} migration {mig}: {s}");
    }
}

#[test]
fn several_user_cores_sharing_one_os_core_degrade() {
    let refs = 500_000;
    let (one, r1) = speedup(WEB, refs, 1000, 100, 1);
    let (four, r4) = speedup(WEB, refs, 1000, 100, 4);
    let q4: u64 = r4.user.iter().map(|u| u.queue_cycles).sum();
    eprintln!(
        "web-server N=1000 mig=100: 1 core {one:.3} (OS time {:.3}), 4 cores {four:.3} (OS time {:.3}, longest wait {}, queued {q4})",
        r1.os_time_fraction(),
        r4.os_time_fraction(),
        r4.max_queue_wait
    );
    assert_eq!(r1.user[0].queue_cycles, 0);
    assert!(q4 > 0);
    assert!(four < one, "4 cores {four} vs 1 core {one}");
}

#[test]
fn dynamic_n_picks_a_good_trigger_and_is_deterministic() {
    let f = file(WEB, 1_000_000, None, 1000, 1);
    assert!(f.offload.dynamic.is_some());
    let a = run(&f);
    let b = run(&f);
    assert_eq!(a, b, "same seed, same result");
    assert!(!a.phases.is_empty());
    eprintln!("web-server dynamic mig=1000: phases {:?}", a.phases);
    let base = run(&file(WEB, 1_000_000, None, 1000, 1));
    let worst = [100u64, 500, 1000, 5000, 10000]
        .iter()
        .map(|&n| run(&file(WEB, 1_000_000, Some(n), 1000, 1)).mean_ipc())
        .fold(f64::INFINITY, f64::min);
    eprintln!(
        "dynamic {:.4} worst fixed {:.4} baseline {:.4}",
        a.mean_ipc(),
        worst,
        base.mean_ipc()
    );
    assert!(a.mean_ipc() > worst);
}

#[test]
fn direct_mapped_1k_table_is_nearly_as_accurate_as_fully_associative_200() {
    // Section 4.2: "a direct-mapped RAM structure with 1K entries also provides the same
    // accuracy". Here the untagged table loses a few points where two frequent identities
    // alias (web-server: 0.907 vs 0.851 at 1 M records), so the bound is 0.1.
    for (name, w) in [("web-server", WEB), ("jvm", JVM)] {
        let fa = run(&file(w, 1_000_000, None, 5000, 1)).total_accuracy();
        let mut f = file(w, 1_000_000, None, 5000, 1);
        f.offload.predictor = PredictorConfig {
            table: super::super::predictor::TableKind::DirectMapped,
            entries: None,
            ..Default::default()
        };
        let dm = run(&f).total_accuracy();
        let good = |a: &Accuracy| a.exact_fraction() + a.within_fraction();
        eprintln!("{name}: FA-200 {:.3} DM-1K {:.3}", good(&fa), good(&dm));
        assert!(
            good(&dm) > 0.75 && (good(&fa) - good(&dm)).abs() < 0.1,
            "{name}"
        );
    }
}

/// `trace = PATH`: the web-server workload written to a native trace and replayed gives exactly the
/// `[workload]` run, for one and two user cores, with and without off-load (the trace's runs start
/// with the workload's syscall identities, so `TraceIdentity` gives the AStates `SyscallIdentity`
/// gives).
#[test]
fn a_trace_replays_exactly_as_its_workload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("web.cctrace");
    let base = file(WEB, 40_000, None, 1000, 1);
    let mut w = crate::trace::native::TraceWriter::create(&path, "{}").expect("trace file");
    let mut src = Workload::new(base.workload.as_ref().unwrap()).unwrap();
    let mut buf = Vec::new();
    while src.next_block(&mut buf).unwrap() {
        w.write_all(&buf).unwrap();
    }
    w.finish().unwrap();
    for (trigger, cores) in [(None, 1), (Some(500), 1), (Some(500), 2)] {
        let wl = file(WEB, 40_000, trigger, 1000, cores);
        let mut tr = wl.clone();
        tr.workload = None;
        tr.trace = Some(path.clone());
        let (a, b) = (run(&wl), run(&tr));
        if cores == 1 {
            assert_eq!(report_json(&wl, &a)["user"], report_json(&tr, &b)["user"]);
            assert_eq!(a.os.offloaded_runs, b.os.offloaded_runs);
        } else {
            // Core 1 replays the same records (the workload would use seed + 1).
            assert_eq!(b.user[0].thread_instructions, b.user[1].thread_instructions);
        }
        assert!(b.user[0].privileged_runs > 0);
        if trigger.is_some() {
            assert!(b.os.offloaded_runs > 0);
        }
    }
}

#[test]
fn offload_file_needs_exactly_one_source() {
    let mut f = file(WEB, 1000, None, 1000, 1);
    f.trace = Some("x.cctrace".into());
    let e = run_file(&f).unwrap_err().to_string();
    assert!(e.contains("trace") && e.contains("exclusive"), "{e}");
    f.workload = None;
    f.trace = None;
    let e = run_file(&f).unwrap_err().to_string();
    assert!(e.contains("workload") && e.contains("trace = PATH"), "{e}");
    f.trace = Some("x.cctrace".into());
    f.trace_format = Some("nope".into());
    let e = run_file(&f).unwrap_err().to_string();
    assert!(e.contains("trace_format") && e.contains("native"), "{e}");
    f.trace_format = None;
    let e = run_file(&f).unwrap_err().to_string();
    assert!(e.contains("x.cctrace"), "{e}");
}
