//! Unit tests of the off-load model on hand-written record streams: each rule of the module
//! comment (migration and return cost, coherence misses, the OS core's FIFO queue, the
//! accounting invariants, the section 4.4 controller) and the bad-input errors.
use super::*;
use crate::oscache::predictor::PredictorConfig;
use crate::trace::VecSource;

/// AState = the first record's address (tests choose it).
struct ByAddr;
impl RunIdentity for ByAddr {
    fn astate(&self, first: &Record) -> u64 {
        first.addr
    }
}

fn rec(kind: Kind, addr: u64, icount: u32, privileged: bool) -> Record {
    let mut r = Record::new(kind, addr, 8);
    r.icount = icount;
    r.privileged = privileged;
    r
}

/// `n` repetitions of: 10 user loads of `user_addr`, then a privileged run of 5 loads at the
/// same kernel address `kaddr` with 200 instructions each (run length 1000).
fn syscalls(n: usize, user_addr: u64, kaddr: u64) -> Vec<Record> {
    let mut v = Vec::new();
    for _ in 0..n {
        for _ in 0..10 {
            v.push(rec(Kind::Load, user_addr, 1, false));
        }
        for _ in 0..5 {
            v.push(rec(Kind::Load, kaddr, 200, true));
        }
    }
    v
}

fn cfg(trigger: Option<u64>, mig: u64) -> OffloadConfig {
    OffloadConfig {
        trigger,
        migration_cycles: mig,
        ..Default::default()
    }
}

fn run(c: &OffloadConfig, threads: Vec<Vec<Record>>) -> OffloadResult {
    let r = OffloadModel::new(c)
        .unwrap()
        .run(threads.into_iter().map(VecSource::new).collect(), &ByAddr)
        .unwrap();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    r
}

#[test]
fn defaults_are_the_papers_machine() {
    let c = OffloadConfig::default();
    assert_eq!(c.l1_size.bytes(), 32 << 10);
    assert_eq!(c.l2_size.bytes(), 1 << 20);
    assert_eq!((c.l1_latency, c.l2_latency, c.memory_latency), (1, 5, 500));
    assert_eq!((c.remote_latency, c.directory_latency), (5, 5));
    assert_eq!(c.user_cores, 1);
    assert_eq!(c.trigger, None);
    assert_eq!(c.return_cost(), c.migration_cycles);
}

#[test]
fn baseline_runs_everything_on_the_user_core() {
    let r = run(&cfg(None, 100), vec![syscalls(4, 0x1000, 0x9000)]);
    let u = &r.user[0];
    assert_eq!(u.thread_instructions, 4 * (10 + 1000));
    assert_eq!(u.privileged_runs, 4);
    assert_eq!(u.offloaded_runs, 0);
    assert_eq!(r.os.cycles, 0);
    // Two cold misses (user line and kernel line), everything else hits L1.
    assert_eq!(u.l2_misses, 2);
    assert_eq!(u.cycles, u.thread_instructions + 2 * (5 + 500));
}

#[test]
fn predicted_long_runs_go_to_the_os_core_and_pay_migration_both_ways() {
    // N = 500: the first run is predicted 0 (no history) and runs locally; the next three are
    // predicted 1000 (> 500) and are off-loaded.
    let r = run(&cfg(Some(500), 100), vec![syscalls(4, 0x1000, 0x9000)]);
    let u = &r.user[0];
    assert_eq!(u.offloaded_runs, 3);
    assert_eq!(u.offloaded_instructions, 3000);
    assert_eq!(r.os.offloaded_runs, 3);
    assert_eq!(u.migration_cycles, 3 * 200);
    assert_eq!(u.queue_cycles, 0);
    // The kernel line was brought in by the user core's local run: the OS core's first access
    // is a coherence miss (1 + 5 + remote 5 + directory 5), then hits.
    assert_eq!(r.os.coherence_misses, 1);
    assert_eq!(r.os.stall_cycles, 5 + 5 + 5);
    assert_eq!(u.remote_cycles, r.os.cycles);
    assert_eq!(r.os.cycles, 3000 + 15);
    // A trigger above every prediction never off-loads.
    let r = run(&cfg(Some(1000), 100), vec![syscalls(4, 0x1000, 0x9000)]);
    assert_eq!(r.user[0].offloaded_runs, 0);
}

#[test]
fn return_cost_is_configurable() {
    let mut c = cfg(Some(500), 100);
    c.return_cycles = Some(7);
    let r = run(&c, vec![syscalls(3, 0x1000, 0x9000)]);
    assert_eq!(r.user[0].migration_cycles, 2 * (100 + 7));
}

#[test]
fn user_data_dirtied_before_the_call_moves_by_a_coherence_miss_and_back() {
    // The user stores to A, the off-loaded run loads A (coherence miss on the OS core), stores
    // to A (invalidating the user's copy), then the user loads A again (coherence miss back).
    let a = 0x4_0000;
    let mut t = syscalls(2, 0x1000, 0x9000); // trains the predictor: runs of 1000
    t.push(rec(Kind::Store, a, 1, false));
    t.push(rec(Kind::Load, 0x9000, 200, true));
    t.push(rec(Kind::Load, a, 200, true));
    t.push(rec(Kind::Store, a, 200, true));
    t.push(rec(Kind::Load, 0x9000, 200, true));
    t.push(rec(Kind::Load, 0x9000, 200, true));
    t.push(rec(Kind::Load, a, 1, false));
    let r = run(&cfg(Some(500), 100), vec![t]);
    assert_eq!(r.user[0].offloaded_runs, 2);
    // OS core: kernel line (first off-load) and A, both held by the user core.
    assert_eq!(r.os.coherence_misses, 2);
    assert_eq!(r.os.invalidations, 1);
    // User core: A comes back from the OS core.
    assert_eq!(r.user[0].coherence_misses, 1);
}

#[test]
fn several_user_cores_queue_at_the_one_os_core() {
    let c = OffloadConfig {
        user_cores: 2,
        ..cfg(Some(500), 100)
    };
    // Identical threads at disjoint user addresses, same kernel line: their calls collide.
    let r = run(
        &c,
        vec![syscalls(6, 0x1000, 0x9000), syscalls(6, 0x2000, 0x9000)],
    );
    assert_eq!(r.os.offloaded_runs, 10);
    let waited: u64 = r.user.iter().map(|u| u.queue_cycles).sum();
    assert!(waited > 0, "no core waited: {:?}", r.user);
    assert!(r.max_queue_wait > 0);
    // One user core alone never waits.
    let one = run(&cfg(Some(500), 100), vec![syscalls(6, 0x1000, 0x9000)]);
    assert_eq!(one.user[0].queue_cycles, 0);
    assert!(r.makespan() > one.makespan());
}

#[test]
fn run_boundaries_follow_the_identity() {
    // Two back-to-back privileged records are one run unless the identity splits them.
    struct Split;
    impl RunIdentity for Split {
        fn astate(&self, first: &Record) -> u64 {
            first.addr
        }
        fn new_run(&self, prev: &Record, next: &Record) -> bool {
            prev.addr != next.addr
        }
    }
    let t = vec![
        rec(Kind::Load, 0x1000, 1, false),
        rec(Kind::Load, 0x9000, 10, true),
        rec(Kind::Load, 0xa000, 10, true),
        rec(Kind::Load, 0x1000, 1, false),
    ];
    let one = run(&cfg(None, 1), vec![t.clone()]);
    assert_eq!(one.user[0].privileged_runs, 1);
    let two = OffloadModel::new(&cfg(None, 1))
        .unwrap()
        .run(vec![VecSource::new(t)], &Split)
        .unwrap();
    assert_eq!(two.user[0].privileged_runs, 2);
}

#[test]
fn invariants_catch_a_broken_account() {
    let mut r = run(&cfg(Some(500), 100), vec![syscalls(3, 0x1000, 0x9000)]);
    r.user[0].cycles += 1;
    r.os.offloaded_runs += 1;
    let v = check_invariants(&r);
    assert_eq!(v.len(), 2, "{v:?}");
}

#[test]
fn controller_samples_each_candidate_then_keeps_the_best_until_a_phase_change() {
    let d = DynamicConfig {
        candidates: vec![100, 500, 1000],
        epoch_instructions: 10,
        phase_threshold: 0.1,
    };
    let mut c = Controller::new(&d);
    let mut out = Vec::new();
    assert_eq!(c.current, 100);
    // Epochs of 10 instructions at IPC 0.5, 0.8, 0.4 (cycles 20, 12.5 -> 13, 25).
    let mut instr = 0;
    let mut cycles = 0;
    let mut epoch = |c: &mut Controller, cyc: u64, out: &mut Vec<PhaseChoice>| {
        instr += 10;
        cycles += cyc;
        c.after_step(0, instr, cycles, (100, 10), out);
    };
    epoch(&mut c, 20, &mut out);
    assert_eq!(c.current, 500);
    epoch(&mut c, 12, &mut out);
    assert_eq!(c.current, 1000);
    epoch(&mut c, 25, &mut out);
    assert_eq!(c.current, 500, "best IPC was N = 500");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].chosen, 500);
    assert_eq!(out[0].sampled.len(), 3);
    // Steady: the first epoch sets the reference, a similar one keeps N.
    epoch(&mut c, 12, &mut out);
    epoch(&mut c, 12, &mut out);
    assert_eq!(c.current, 500);
    assert!(c.sampling.is_none());
    // IPC halves: a phase change, sampling starts over at the first candidate.
    epoch(&mut c, 24, &mut out);
    assert_eq!(c.sampling, Some(0));
    assert_eq!(c.current, 100);
    // An epoch is not closed before epoch_instructions.
    c.after_step(0, instr + 5, cycles + 5, (100, 10), &mut out);
    assert_eq!(c.sampling, Some(0));
}

#[test]
fn dynamic_trigger_runs_and_reports_its_choices() {
    let c = OffloadConfig {
        dynamic: Some(DynamicConfig {
            candidates: vec![100, 5000],
            epoch_instructions: 3000,
            phase_threshold: 0.1,
        }),
        ..cfg(None, 100)
    };
    let r = run(&c, vec![syscalls(40, 0x1000, 0x9000)]);
    assert!(!r.phases.is_empty());
    // Off-loading a warm run for 200 cycles of migration is worse than running it locally
    // (its line stays in the user's L1): N = 5000 (never) wins.
    assert_eq!(r.phases[0].chosen, 5000);
}

#[test]
fn impossible_parameters_are_rejected_with_the_field() {
    let cases: Vec<(OffloadConfig, &str)> = vec![
        (
            OffloadConfig {
                user_cores: 0,
                ..Default::default()
            },
            "offload.user_cores",
        ),
        (
            OffloadConfig {
                trigger: Some(100),
                dynamic: Some(DynamicConfig::default()),
                ..Default::default()
            },
            "offload.dynamic",
        ),
        (
            OffloadConfig {
                dynamic: Some(DynamicConfig {
                    candidates: vec![],
                    ..Default::default()
                }),
                ..Default::default()
            },
            "offload.dynamic.candidates",
        ),
        (
            OffloadConfig {
                dynamic: Some(DynamicConfig {
                    epoch_instructions: 0,
                    ..Default::default()
                }),
                ..Default::default()
            },
            "offload.dynamic.epoch_instructions",
        ),
        (
            OffloadConfig {
                predictor: PredictorConfig {
                    entries: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
            "offload.predictor.entries",
        ),
        (
            OffloadConfig {
                l2_size: Size(1000),
                ..Default::default()
            },
            "offload.l2_size",
        ),
        (
            OffloadConfig {
                memory_latency: 1,
                ..Default::default()
            },
            "offload.memory_latency",
        ),
    ];
    for (c, field) in cases {
        let e = OffloadModel::new(&c).err().expect(field);
        assert_eq!(e.field, field, "{e}");
    }
    // Streams must match the user cores.
    let e = OffloadModel::new(&OffloadConfig::default())
        .unwrap()
        .run(Vec::<VecSource>::new(), &ByAddr)
        .unwrap_err();
    assert!(e.to_string().contains("user_cores"), "{e}");
}
