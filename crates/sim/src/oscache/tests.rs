//! Scenario tests of the split L2 (Nellans et al. section 5, Tables 2 and 3) on the synthetic
//! workloads, and the model's bad-input and invariant checks. Each run is 1M records.
use super::model::*;
use crate::trace::{Kind, Record, VecSource};
use crate::workload::WorkloadSpec;

const WEB: &str = include_str!("../../../../examples/oscache/workloads/web-server.toml");
const JVM: &str = include_str!("../../../../examples/oscache/workloads/jvm.toml");
const COMPUTE: &str = include_str!("../../../../examples/oscache/workloads/compute.toml");
const BASE: &str = include_str!("../../../../examples/oscache/baseline.toml");
const S2_DATA_SEQ: &str =
    include_str!("../../../../examples/oscache/split-2mb-data-sequential.toml");
const S2_DATA_PAR: &str = include_str!("../../../../examples/oscache/split-2mb-data-parallel.toml");
const S2_INS_SEQ: &str =
    include_str!("../../../../examples/oscache/split-2mb-instructions-sequential.toml");
const S1_DATA_SEQ: &str =
    include_str!("../../../../examples/oscache/split-1mb-data-sequential.toml");
const S1_INS_SEQ: &str =
    include_str!("../../../../examples/oscache/split-1mb-instructions-sequential.toml");
const S1_ADAPTIVE: &str = include_str!("../../../../examples/oscache/split-1mb-adaptive.toml");

fn ipc(machine: &str, workload: &str, references: u64) -> f64 {
    let m = RunConfig::from_toml(machine).unwrap().model;
    let mut w: WorkloadSpec = crate::config::from_toml(workload).unwrap();
    w.phases[0].references = references;
    let r = run_workload(&m, &w).unwrap();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    r.ipc
}

#[test]
fn table_2_orderings_on_the_synthetic_workloads() {
    const N: u64 = 1_000_000;
    for (name, w) in [("web-server", WEB), ("jvm", JVM)] {
        let base = ipc(BASE, w, N);
        let data_seq = ipc(S2_DATA_SEQ, w, N) / base;
        let data_par = ipc(S2_DATA_PAR, w, N) / base;
        let ins_seq = ipc(S2_INS_SEQ, w, N) / base;
        eprintln!("{name}: data seq {data_seq:.3} par {data_par:.3} instructions seq {ins_seq:.3}");
        assert!(
            data_seq > 1.2,
            "{name}: the OS bank helps an OS-intensive workload"
        );
        assert!(
            data_seq > ins_seq,
            "{name}: routing data beats routing instructions"
        );
        assert!(
            data_seq >= data_par,
            "{name}: sequential look-up at least as good"
        );
    }
    let base = ipc(BASE, COMPUTE, N);
    let data_seq = ipc(S2_DATA_SEQ, COMPUTE, N) / base;
    eprintln!("compute: data seq {data_seq:.3}");
    assert!(data_seq <= 1.0, "no gain without OS activity");
}

#[test]
fn table_3_data_routing_beats_instruction_routing_and_fallback_protects_compute() {
    const N: u64 = 1_000_000;
    for w in [WEB, JVM] {
        assert!(ipc(S1_DATA_SEQ, w, N) > ipc(S1_INS_SEQ, w, N));
    }
    let base = ipc(BASE, COMPUTE, N);
    let fixed = ipc(S1_DATA_SEQ, COMPUTE, N) / base;
    let adaptive = ipc(S1_ADAPTIVE, COMPUTE, N) / base;
    let global = ipc(
        &S1_ADAPTIVE.replace("round_robin = \"per-set\"", "round_robin = \"global\""),
        COMPUTE,
        N,
    ) / base;
    eprintln!("compute equal budget: fixed {fixed:.4} adaptive {adaptive:.4} (global {global:.4})");
    assert!(fixed < 0.9, "a static half for the OS starves compute");
    // Section 5.2: "only 0.4% below the baseline"; the issue asks for within 1%. The per-set
    // alternation keeps every set's fills balanced between the banks (2 x 8 ways of 1024 sets
    // behave like one 16-way cache); the one-toggle global alternation is a coin flip per set
    // and loses about 1.6% on this cache-filling footprint (docs/oscache.md).
    assert!(adaptive > 0.99, "{adaptive}");
    assert!(global < adaptive, "{global} vs {adaptive}");
}

#[test]
fn per_set_round_robin_alternates_the_banks_within_a_set() {
    // Fallback from the start (no epoch measured yet); L1D of 4 KiB, 4 ways (16 sets, 1 KiB
    // apart), so loads 64 KiB apart miss the L1D and meet in one set of both 512 KiB banks
    // (1024 sets, 64 KiB apart).
    let run = |rr: &str| {
        let text = S1_ADAPTIVE.replace(
            "round_robin = \"per-set\"",
            &format!("round_robin = \"{rr}\""),
        );
        let mut cfg = RunConfig::from_toml(&text).unwrap().model;
        cfg.l1d_size = crate::config::Size(4096);
        let mut m = Model::new(&cfg).unwrap();
        // Two sets, fills alternating between them: the global toggle sends every set-0 fill
        // to one bank and every set-1 fill to the other; per set, each set uses both banks.
        for k in 0..16u64 {
            m.step(&Record::load(k << 16)); // set 0
            m.step(&Record::load((k << 16) + 64)); // set 1
        }
        // Re-touch set 0's first 16 lines: with per-set alternation 8 + 8 ways hold them all.
        for k in 0..16u64 {
            m.step(&Record::load(k << 16));
        }
        m.finish()
    };
    let per_set = run("per-set");
    let global = run("global");
    let l2_hits = |r: &ModelReport| -> u64 {
        r.caches[2..]
            .iter()
            .map(|c| c.accesses[0] - c.misses[0])
            .sum()
    };
    // Per set: set 0's 16 lines went 8 to each bank, all still there: 16 hits.
    assert_eq!(l2_hits(&per_set), 16);
    // Global: all 16 of set 0 went to one bank (8 ways): the re-touch misses every time.
    assert_eq!(l2_hits(&global), 0);
    assert!(per_set.invariants.is_empty() && global.invariants.is_empty());
}

#[test]
fn bad_input_is_rejected_clearly() {
    let over = S2_DATA_SEQ.replace("budget = \"2MiB\"", "budget = \"1MiB\"");
    let e = RunConfig::from_toml(&over).unwrap_err();
    assert_eq!(e.field, "model.split.budget");
    assert!(e.message.contains("budget is 1MiB"), "{e}");
    let e = RunConfig::from_toml(&S1_DATA_SEQ.replace("ways = 8", "ways = 0")).unwrap_err();
    assert!(e.field.starts_with("model.split"), "{e}");
    let e = RunConfig::from_toml(
        &S1_DATA_SEQ.replace("mispredict_latency = 7", "mispredict_latency = 3"),
    )
    .unwrap_err();
    assert_eq!(e.field, "model.split.mispredict_latency");
    let e =
        RunConfig::from_toml(&S1_DATA_SEQ.replace("placement = \"data\"", "placement = \"code\""))
            .unwrap_err();
    assert!(e.to_string().contains("instructions"), "{e}");
    // A trace with no privileged record cannot give an OS report.
    let recs: Vec<Record> = (0..1000).map(|i| Record::load(i * 64)).collect();
    let e = run_source(&ModelConfig::default(), &mut VecSource::new(recs)).unwrap_err();
    assert!(e.to_string().contains("none is privileged"), "{e}");
}

#[test]
fn banks_stay_exclusive_and_placement_follows_the_policy() {
    // A privileged load then a user load of the same line: route-data places it in the OS bank
    // and the user access finds it there (a bank mispredict), never a second copy.
    let mut cfg = RunConfig::from_toml(S2_DATA_SEQ).unwrap().model;
    cfg.l1d_size = crate::config::Size(4096);
    let mut m = Model::new(&cfg).unwrap();
    let os = Record {
        privileged: true,
        icount: 1,
        ..Record::load(0x1000)
    };
    m.step(&os);
    // Evict it from the L1D (4 KiB, 4 ways: 16 sets; same set every 1 KiB).
    for k in 1..=8 {
        m.step(&Record::load(0x1000 + k * 1024));
    }
    m.step(&Record {
        kind: Kind::Load,
        ..Record::load(0x1000)
    });
    let r = m.finish();
    assert!(r.invariants.is_empty());
    let os_bank = r.caches.iter().find(|c| c.name == "L2-os").unwrap();
    assert_eq!(os_bank.misses, [0, 1], "filled once, by the OS access");
    assert_eq!(os_bank.accesses[0], 1, "the user access hit it there");
    assert_eq!(
        r.bank_predictions,
        [0, 1],
        "found in the second bank probed"
    );
    assert_eq!(run_bucket(24), 0);
    assert_eq!(run_bucket(25), 1);
    assert_eq!(run_bucket(10_000), 5);
}

#[test]
fn characterisation_attributes_evictions_to_the_os() {
    let m = RunConfig::from_toml(BASE).unwrap().model;
    let mut w: WorkloadSpec = crate::config::from_toml(WEB).unwrap();
    w.phases[0].references = 300_000;
    let r = run_workload(&m, &w).unwrap();
    assert!((0.6..0.75).contains(&r.privileged_share));
    assert_eq!(r.runs_with_identity, r.runs_by_length.iter().sum::<u64>());
    for c in &r.caches {
        assert!(c.evictions[1] > 0, "{}", c.name);
        let by_run: u64 = c.os_evictions_by_run.iter().sum();
        assert_eq!(
            by_run, c.evictions[1],
            "{}: every OS eviction has a run",
            c.name
        );
    }
    // Figure 3: long runs cause most of the OS evictions at L2.
    let l2 = &r.caches[2];
    assert!(
        l2.os_evictions_by_run[3..].iter().sum::<u64>()
            > l2.os_evictions_by_run[..3].iter().sum::<u64>()
    );
    assert_eq!(run_workload(&m, &w).unwrap(), r, "deterministic");
}
