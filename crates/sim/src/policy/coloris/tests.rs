//! Algorithm 1 walked through each branch (the four cases of Figure 5, MONITOR's hot/cold
//! handshake, QoS thresholds, bad parameters), then the section 4 scenarios (`scenarios.rs`).
use super::*;

fn machine() -> MachineInfo {
    MachineInfo::for_tests(4, 1)
}

fn info(pid: usize, name: &str) -> ProcessInfo {
    ProcessInfo {
        pid,
        name: name.into(),
        colors: None,
        pinned: None,
        threads: 1,
    }
}

/// Four processes, one per core, each with its section of 4 colors (section 3.2).
fn four(config: ColorisConfig) -> Coloris {
    let mut c = Coloris::new(&config, &machine()).unwrap();
    for pid in 0..4 {
        let pin = c.process_created(&info(pid, &format!("p{pid}"))).pin;
        assert_eq!(pin, Some(vec![pid]), "least-loaded core, pinned");
    }
    c
}

fn colors(c: &Coloris, pid: usize) -> Vec<u64> {
    c.procs[&pid].assignment.iter().collect()
}

fn set(c: &mut Coloris, pid: usize, cs: &[u64]) {
    c.procs.get_mut(&pid).unwrap().assignment = ColorSet::of(16, cs.iter().copied()).unwrap();
}

#[test]
fn static_sections_are_the_initial_assignments() {
    let c = four(ColorisConfig::default());
    assert_eq!(colors(&c, 0), [0, 1, 2, 3]);
    assert_eq!(colors(&c, 3), [12, 13, 14, 15]);
}

#[test]
fn figure5_a_coldest_local_by_remote_hotness() {
    let mut c = four(ColorisConfig::default());
    set(&mut c, 0, &[0, 1]); // p0 gave 2 and 3 away earlier
    set(&mut c, 1, &[3, 4, 5, 6, 7]); // a remote process shares 3
    assert!(!c.need_remote(0));
    assert_eq!(c.alloc_colors(0, 1), [2], "2 has remote hotness 0, 3 has 1");
    assert_eq!(c.alloc_colors(0, 1), [3], "then the only local color left");
    assert!(c.need_remote(0));
}

#[test]
fn figure5_b_coldest_remote_by_global_hotness() {
    let mut c = four(ColorisConfig::default());
    set(&mut c, 3, &[12, 14, 15]); // 13 is owned by nobody
    set(&mut c, 2, &[8, 9, 10, 11, 14]); // 14 by two
    assert!(c.need_remote(0));
    assert_eq!(
        c.alloc_colors(0, 2),
        [13, 4],
        "hotness 0 first, then the lowest of hotness 1"
    );
    assert_eq!(colors(&c, 0), [0, 1, 2, 3, 4, 13]);
    assert!(c.has_remote(0));
}

#[test]
fn figure5_c_hottest_remote_by_global_hotness() {
    let mut c = four(ColorisConfig::default());
    set(&mut c, 0, &[0, 1, 2, 3, 5, 13]);
    set(&mut c, 2, &[5, 8, 9, 10, 11]); // 5: owned by p0, p1, p2; 13: by p0, p3
    assert!(c.has_remote(0));
    assert_eq!(c.pick_victims(0, 1), [5]);
    assert_eq!(c.pick_victims(0, 1), [13]);
    assert!(!c.has_remote(0));
}

#[test]
fn figure5_d_hottest_local_by_remote_hotness() {
    let mut c = four(ColorisConfig::default());
    set(&mut c, 1, &[2, 4, 5, 6, 7]); // a remote process shares 2
    assert!(!c.has_remote(0));
    assert_eq!(
        c.pick_victims(0, 1),
        [2],
        "2 has remote hotness 1, the others 0"
    );
    assert_eq!(c.pick_victims(0, 2), [3, 1], "ties: the highest color");
    assert_eq!(
        c.pick_victims(0, 4),
        Vec::<u64>::new(),
        "a process keeps its last color"
    );
    assert_eq!(colors(&c, 0), [0]);
}

#[test]
fn remote_hotness_ignores_owners_on_the_same_core() {
    // Over-committed (section 3.2): two processes of core 0 share its section; that is no
    // interference, they never run at once.
    let mut c = four(ColorisConfig::default());
    assert_eq!(c.process_created(&info(4, "p4")).pin, Some(vec![0]));
    assert_eq!(colors(&c, 4), [0, 1, 2, 3]);
    assert_eq!(c.remote_hotness(0, 1), 0);
    assert_eq!(c.global_hotness(1), 2);
}

#[test]
fn monitor_hot_cold_handshake_moves_unit_colors() {
    let config = ColorisConfig {
        low_threshold: 30.0,
        high_threshold: 65.0,
        unit: 2,
        ..Default::default()
    };
    let mut c = four(config);
    // Hot, nobody cold yet: only the signal.
    assert_eq!(c.monitor(2, 0.8), Decision::SignalHot);
    assert!(c.is_hot && !c.is_cold);
    assert_eq!(colors(&c, 2), [8, 9, 10, 11]);
    // Between the thresholds: nothing.
    assert_eq!(c.monitor(1, 0.5), Decision::None);
    // Cold while someone is hot: gives UNIT colors away.
    assert_eq!(c.monitor(0, 0.1), Decision::Shrink(vec![3, 2]));
    assert!(!c.is_hot && c.is_cold);
    // Another cold process: nobody is hot any more.
    assert_eq!(c.monitor(3, 0.1), Decision::None);
    assert_eq!(colors(&c, 3), [12, 13, 14, 15]);
    // The hot one takes the coldest colors: p0's freed 2 and 3 (global hotness 0).
    assert_eq!(c.monitor(2, 0.8), Decision::Expand(vec![2, 3]));
    assert!(!c.is_cold);
    assert_eq!(colors(&c, 2), [2, 3, 8, 9, 10, 11]);
    assert_eq!(colors(&c, 0), [0, 1]);
}

#[test]
fn qos_thresholds_override_the_global_ones() {
    let mut config = ColorisConfig {
        low_threshold: 30.0,
        high_threshold: 65.0,
        unit: 2,
        ..Default::default()
    };
    config.qos.insert("p1".into(), [0.0, 40.0]);
    let mut c = four(config);
    assert_eq!(c.monitor(1, 0.5), Decision::SignalHot, "above its own 40%");
    assert_eq!(
        c.monitor(1, 0.1),
        Decision::None,
        "never below its LowThreshold of 0"
    );
    assert_eq!(c.monitor(0, 0.1), Decision::Shrink(vec![3, 2]));
}

#[test]
fn running_out_of_memory_in_its_colors_runs_alloc_colors() {
    let mut c = four(ColorisConfig::default());
    assert!(c.out_of_colors(0));
    assert_eq!(colors(&c, 0).len(), 8, "UNIT = 4 more");
    set(&mut c, 0, &(0..16).collect::<Vec<_>>());
    assert!(!c.out_of_colors(0), "nothing left to add");
}

#[test]
fn shared_pages_take_random_or_reserved_colors() {
    let config: ColorisConfig = crate::config::from_toml(
        "shared_regions = [[0x7f0000000000, 0x7f0000100000]]\nshared_colors = [[14, 16]]",
    )
    .unwrap();
    let mut c = four(config);
    assert_eq!(
        colors(&c, 3),
        [9, 10, 11, 12, 13],
        "sections cut from the 14 other colors"
    );
    let shared = c
        .allowed_colors(0, 0x7f0000000000 >> 12)
        .iter()
        .collect::<Vec<_>>();
    assert_eq!(shared, [14, 15]);
    let config: ColorisConfig =
        crate::config::from_toml("shared_regions = [[0x7f0000000000, 0x7f0000100000]]").unwrap();
    let mut c = four(config);
    let picks: std::collections::BTreeSet<u64> = (0..64)
        .map(|i| {
            let s = c.allowed_colors(0, (0x7f0000000000 >> 12) + i);
            assert_eq!(s.len(), 1);
            s.iter().next().unwrap()
        })
        .collect();
    assert!(
        picks.len() > 8,
        "random colors over the whole cache: {picks:?}"
    );
    assert_eq!(
        c.allowed_colors(0, 5).len(),
        4,
        "a private page: its assignment"
    );
}

#[test]
fn bad_parameters_are_named() {
    let m = machine();
    let err = |text: &str| Coloris::new(&crate::config::from_toml(text).unwrap(), &m).unwrap_err();
    let e = err("low_threshold = 70\nhigh_threshold = 65");
    assert_eq!(e.field, "policy.coloris.low_threshold");
    assert!(
        e.message
            .contains("LowThreshold 70% is above HighThreshold 65%"),
        "{e:?}"
    );
    let e = err("unit = 17");
    assert_eq!(e.field, "policy.coloris.unit");
    assert!(e.message.contains("UNIT 17 is not within 1..=16"), "{e:?}");
    let e = err("qos = { p1 = [50, 10] }");
    assert_eq!(e.field, "policy.coloris.qos.p1");
    let e = err("period = 0");
    assert_eq!(e.field, "policy.coloris.period");
    let e = err("shared_colors = [[0, 14]]");
    assert_eq!(e.field, "policy.coloris.shared_colors");
    let c = Coloris::new(
        &crate::config::from_toml("qos = { nobody = [0, 100] }").unwrap(),
        &m,
    )
    .unwrap();
    let e = c.check_processes(&["a".into(), "b".into()]).unwrap_err();
    assert_eq!(e.field, "policy.coloris.qos.nobody");
    assert!(e
        .message
        .contains("no process is named `nobody`; the processes are: a, b"));
    let e = crate::config::from_toml::<ColorisConfig>("bogus = 1").unwrap_err();
    assert!(e.message.contains("unknown field"), "{e:?}");
}

mod scenarios;

/// Regression: a program marked hot (by a cold start's compulsory misses) that is warm by the time
/// a donor freed colors never took them, and they belonged to nobody for the rest of the run.
/// Colors no requester is waiting for go back to their donor after the round.
#[test]
fn coloris_never_leaves_freed_colors_owned_by_nobody() {
    let config = ColorisConfig {
        low_threshold: 30.0,
        high_threshold: 75.0,
        unit: 2,
        ..Default::default()
    };
    let mut c = four(config);
    assert_eq!(c.monitor(2, 0.9), Decision::SignalHot);
    assert_eq!(c.monitor(0, 0.1), Decision::Shrink(vec![3, 2]));
    assert_eq!(colors(&c, 0), [0, 1]);
    // Warm now (0.72 < 0.75): it no longer asks.
    assert_eq!(c.monitor(2, 0.72), Decision::None);
    assert_eq!(c.return_unclaimed(), Some(0));
    assert_eq!(colors(&c, 0), [0, 1, 2, 3], "back to the donor");
    assert!(!c.is_cold && !c.is_hot);
    for col in 0..16 {
        assert!(c.global_hotness(col) > 0, "color {col} owned by nobody");
    }
    // While the requester still waits, the freed colors wait for it.
    assert_eq!(c.monitor(2, 0.9), Decision::SignalHot);
    assert_eq!(c.monitor(0, 0.1), Decision::Shrink(vec![3, 2]));
    assert_eq!(c.return_unclaimed(), None);
    assert_eq!(c.monitor(2, 0.9), Decision::Expand(vec![2, 3]));
}

/// Regression: isHot/isCold evaluated in pid order gave the colors one hungry program asked for to
/// another hot program that MONITOR reached first. Requests are served in the order they were
/// signalled.
#[test]
fn coloris_serves_color_requests_first_come_first_served() {
    let config = ColorisConfig {
        low_threshold: 30.0,
        high_threshold: 65.0,
        unit: 2,
        ..Default::default()
    };
    let mut c = four(config);
    assert_eq!(c.monitor(3, 0.8), Decision::SignalHot, "p3 asks first");
    assert_eq!(c.monitor(0, 0.1), Decision::Shrink(vec![3, 2]));
    assert_eq!(
        c.monitor(2, 0.8),
        Decision::SignalHot,
        "p2 is hot too but asked later: it waits"
    );
    assert_eq!(colors(&c, 2), [8, 9, 10, 11]);
    assert_eq!(c.monitor(3, 0.8), Decision::Expand(vec![2, 3]));
    assert!(c.is_hot, "p2 still waits");
    // The next donor's colors go to p2.
    assert_eq!(c.monitor(1, 0.1), Decision::Shrink(vec![7, 6]));
    assert_eq!(c.monitor(2, 0.8), Decision::Expand(vec![6, 7]));
}
