//! The exact per-page LLC profile (`System::keep_page_llc`) against a brute force: the exact
//! PMU sampling every LLC access (period 1, no cost, no handler lines) into a policy's own tally.
use super::testing::{run_config, Scripted};
use super::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

type Pages = BTreeMap<(u64, u64), [u64; 2]>;

/// Two chips (remote LLC misses), two processes of two threads each, shorter than the example.
fn two_chips(sampled: bool) -> SystemConfig {
    let mut text = include_str!("../../../../examples/os/sharing-two-chips.toml")
        .replace("references = 400000", "references = 40000");
    text.push_str("\n[pmu]\nideal = true\n");
    if sampled {
        text.push_str(
            "[pmu.sampling]\nevent = \"llc-accesses\"\nperiod = 1\ncost_cycles = 0\npollute_l1_lines = 0\n",
        );
    }
    crate::config::from_toml(&text).unwrap()
}

/// A policy placing nothing (every color allowed) that tallies every sample it gets by page.
fn sampling_tally(pages: Arc<Mutex<Pages>>) -> Box<dyn Policy> {
    Box::new(
        Scripted::new("test-page-llc", 16, pages).on_sample(|p, _k, s| {
            let mut t = p.state.lock().unwrap();
            let e = t.entry((s.pid as u64, s.vaddr >> 12)).or_insert([0, 0]);
            e[0] += 1;
            e[1] += !matches!(s.source, DataSource::Level(_)) as u64;
        }),
    )
}

#[test]
fn page_llc_tally_equals_the_exact_sampler_of_every_llc_access() {
    let pages = Arc::new(Mutex::new(Pages::new()));
    let (_, sampled) = run_config(&two_chips(true), Some(sampling_tally(pages.clone())));
    let brute = pages.lock().unwrap().clone();

    let mut s = System::with_policy(
        &two_chips(false),
        sampling_tally(Arc::new(Mutex::new(Pages::new()))),
    )
    .unwrap();
    s.keep_page_llc();
    s.run().unwrap();
    let r = s.report();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    let rows = s.page_llc().expect("kept");
    let kept: Pages = rows.iter().map(|&[p, v, a, m]| ((p, v), [a, m])).collect();
    assert_eq!(kept.len(), rows.len(), "one row per page");
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "sorted by pid, page");
    assert_eq!(kept, brute);
    // The run is the sampled run observed: the same counts, no interrupt taken.
    for (p, q) in r.processes.iter().zip(&sampled.processes) {
        assert_eq!(
            (
                p.llc_accesses,
                p.llc_misses,
                p.remote_accesses,
                p.references
            ),
            (
                q.llc_accesses,
                q.llc_misses,
                q.remote_accesses,
                q.references
            )
        );
        assert_eq!(p.kernel.interrupt.count, 0);
    }
    // Both processes' data references reach the LLC, some miss remotely; data references
    // are part of llc_accesses (page-walk reads are the rest).
    for (pid, p) in r.processes.iter().enumerate() {
        let (a, m) = kept
            .iter()
            .filter(|((q, _), _)| *q == pid as u64)
            .fold((0, 0), |(a, m), (_, v)| (a + v[0], m + v[1]));
        assert!(
            a > 0 && a <= p.llc_accesses && m <= p.llc_misses && m <= a,
            "{p:?}"
        );
    }
    assert!(r.processes[0].remote_accesses > 0);
}

#[test]
fn page_llc_tally_is_not_kept_unless_asked() {
    assert!(System::new(&two_chips(false)).unwrap().page_llc().is_none());
}
