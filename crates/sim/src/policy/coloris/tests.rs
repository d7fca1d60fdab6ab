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

/// Two processes, `hot` and `other`, on cores 0 and 1 of the 16-color machine, UNIT = 2: the
/// sections of cores 2 and 3 (colors 8-15) are free.
fn hot_beside_other() -> Coloris {
    let config = ColorisConfig {
        unit: 2,
        ..Default::default()
    };
    let mut c = Coloris::new(&config, &machine()).unwrap();
    c.process_created(&info(0, "hot"));
    c.process_created(&info(1, "other"));
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

/// Regression: a program alone got its core's section only (16 of 64 colors, 0.55x linux on
/// `examples/fresh/alone-hungry-xeon.toml`), where COLORIS Table 1 runs each program alone with
/// every color. A process created alone on its LLC is lent every color; the next process
/// created on that LLC gets its own core's section and the lone one goes back to its own.
#[test]
fn coloris_gives_a_program_alone_every_color() {
    let mut c = Coloris::new(&ColorisConfig::default(), &machine()).unwrap();
    c.process_created(&info(0, "alone"));
    assert_eq!(
        colors(&c, 0),
        (0..16).collect::<Vec<_>>(),
        "Table 1's setup"
    );
    assert_eq!(c.lent.len(), 1);
    c.process_created(&info(1, "second"));
    assert_eq!(colors(&c, 0), [0, 1, 2, 3], "its own section again");
    assert_eq!(colors(&c, 1), [4, 5, 6, 7], "the second core's section");
    assert_eq!(c.reclaimed.len(), 1);
    assert_eq!(c.pending_shrink, vec![(0, (4..16).collect::<Vec<_>>())]);
    // A process with colors from the config is lent nothing.
    let mut c = Coloris::new(&ColorisConfig::default(), &machine()).unwrap();
    let mut given = info(0, "given");
    given.colors = Some(ColorSet::of(16, [0, 1]).unwrap());
    c.process_created(&given);
    assert_eq!(colors(&c, 0), [0, 1]);
}

/// Regression: a hot process grew only when a cold donor existed, so the sections of idle cores
/// stayed unowned (cmr 0.77 > HighThreshold at every MONITOR, 16 of 64 colors all run long).
/// Colors no live process owns are free: a hot process takes UNIT of them without a donor, the
/// lowest first, and never an owned color on that path.
#[test]
fn coloris_hot_process_takes_free_colors_without_a_cold_donor() {
    let mut c = hot_beside_other();
    assert_eq!(colors(&c, 0), [0, 1, 2, 3]);
    assert_eq!(c.free_colors(0), (8..16).collect::<Vec<_>>());
    assert!(!c.is_cold);
    assert_eq!(c.monitor(0, 0.9), Decision::Expand(vec![8, 9]));
    assert_eq!(c.monitor(0, 0.9), Decision::Expand(vec![10, 11]));
    // One free color left: it takes that one and nothing owned.
    set(&mut c, 1, &[4, 5, 6, 7, 12, 13, 14]);
    assert_eq!(c.monitor(0, 0.9), Decision::Expand(vec![15]));
    assert!(c.overlaps.is_empty());
    // None left and no cold donor: isHot only (Algorithm 1), nothing taken.
    assert_eq!(c.monitor(0, 0.9), Decision::SignalHot);
    assert_eq!(colors(&c, 1), [4, 5, 6, 7, 12, 13, 14]);
}

/// Regression: a stream (cmr 1.0) took colors beside a sensitive program until it held every
/// color, in silence. Without a donor below its LowThreshold Algorithm 1 only sets isHot; a
/// color ALLOC_COLORS gives that a process on another core owns is an overlap, reported and
/// warned about.
#[test]
fn coloris_takes_nothing_from_a_process_that_is_not_cold_and_warns_of_overlaps() {
    let config = ColorisConfig {
        unit: 2,
        ..Default::default()
    };
    let mut c = four(config);
    // Every color owned; `p0` at 0.31 is not below LowThreshold (30%): no donor.
    assert_eq!(c.monitor(3, 1.0), Decision::SignalHot);
    assert_eq!(c.monitor(0, 0.31), Decision::None);
    assert_eq!(c.monitor(3, 1.0), Decision::SignalHot);
    assert_eq!(colors(&c, 3), [12, 13, 14, 15]);
    assert_eq!(colors(&c, 0), [0, 1, 2, 3]);
    // Out of memory in its colors, ALLOC_COLORS (3.2) finds only owned colors: an overlap.
    assert!(c.out_of_colors(3));
    assert_eq!(c.overlaps, vec![(0, 3, 0, vec![0, 1])]);
    c.monitor.push((1, 0, 0.5, 5000, "none", 4));
    let w = c.warnings();
    assert!(
        w.iter()
            .any(|w| w.contains("`p3` 2 color(s) `p0`") && w.contains("share")),
        "{w:?}"
    );
}

/// Regression: the warning of a run in which no color moved said no process was hot "while
/// another was below its LowThreshold", not how often one was hot nor that colors were unused.
#[test]
fn coloris_warning_counts_hot_calls_and_unowned_colors() {
    let mut c = Coloris::new(&ColorisConfig::default(), &machine()).unwrap();
    c.process_created(&info(0, "a"));
    let mut given = info(1, "b");
    given.colors = Some(ColorSet::of(16, [4, 5]).unwrap());
    c.process_created(&given);
    c.monitor.push((1, 0, 0.77, 5000, "hot", 4));
    c.monitor.push((1, 1, 0.1, 5000, "none", 2));
    (c.rounds, c.rounds_unowned, c.unowned_last) = (1, 1, 10);
    let w = c.warnings();
    assert!(
        w[0].contains("no color moved in 2 MONITOR calls")
            && w[0].contains("1 of them found a process above its HighThreshold, 1 one below")
            && w[0].contains("10 of 16 colors were owned by no process"),
        "{w:?}"
    );
    assert!(
        w[1].contains("after 1 of 1 MONITOR rounds (10 after the last)"),
        "{w:?}"
    );
}

/// Regression: colors could be assigned twice: a hot process took an idle core's section as
/// free colors, and the process created on that core
/// next was given the same section, so two processes on different cores owned it together
/// without any over-commit ALLOC_COLORS having put them there. Free colors taken without a donor
/// go back when a process is created on the LLC, and the invariant (no color owned by processes
/// on two cores of one LLC unless `overlaps` or the config says so) is checked after every
/// creation, running out of memory and MONITOR round.
#[test]
fn coloris_never_gives_one_color_to_processes_on_two_cores() {
    let mut c = hot_beside_other();
    assert_eq!(c.monitor(0, 0.9), Decision::Expand(vec![8, 9]));
    assert_eq!(c.check_exclusive(), 0);
    // The next process is placed on core 2, whose section holds 8 and 9.
    c.process_created(&info(2, "third"));
    assert_eq!(colors(&c, 2), [8, 9, 10, 11]);
    assert_eq!(colors(&c, 0), [0, 1, 2, 3], "the free colors went back");
    assert!(c.pending_shrink.contains(&(0, vec![8, 9])));
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // The check itself: a color handed out twice is a violation (once per pair and color)...
    set(&mut c, 1, &[4, 5, 6, 7, 8]);
    assert_eq!(c.check_exclusive(), 1);
    assert_eq!(c.check_exclusive(), 0, "reported once");
    assert!(c.violations[0].contains("color 8 is owned by both `other`"));
    // ... but not one the paper's ALLOC_COLORS gave when no color was free (an overlap).
    let mut c = four(ColorisConfig {
        unit: 2,
        ..Default::default()
    });
    assert!(c.out_of_colors(3));
    assert_eq!(c.overlaps, vec![(0, 3, 0, vec![0, 1])]);
    assert_eq!(c.check_exclusive(), 0);
    assert!(c.violations.is_empty(), "{:?}", c.violations);
}

/// Regression: C1 on `hotcold` handed out 68 of 64 colors. `skewed` had given 12 of its 16
/// colors to `hungry`, turned hot, and took the donor `medium`'s freed colors' turn: the literal
/// ALLOC_COLORS (its local section not whole, so pick_coldest_local by remote hotness) took 4
/// of its old colors that `hungry` owned, and the 4 `medium` freed, owned by nobody, went to
/// `hungry` as free colors. Given sufficient capacity (section 3) a free color is taken before
/// one another core's process owns; an owned one only when none is free (the over-commit case).
#[test]
fn coloris_alloc_colors_takes_a_free_color_before_sharing_an_owned_one() {
    let mut c = four(ColorisConfig::default());
    set(&mut c, 2, &[8, 9, 10, 11, 12, 13]); // took 12 and 13 from p3 earlier
    set(&mut c, 3, &[14, 15]);
    set(&mut c, 1, &[6, 7]); // a donor freed 4 and 5
    assert!(!c.need_remote(3));
    assert_eq!(
        c.alloc_colors(3, 2),
        [4, 5],
        "the free colors, not p2's 12 and 13"
    );
    assert_eq!(c.check_exclusive(), 0);
    // Nothing free: Algorithm 1's own pick, its local 12 shared with p2 (noted as an overlap by
    // MONITOR and out_of_colors).
    assert_eq!(c.alloc_colors(3, 1), [12]);
}
