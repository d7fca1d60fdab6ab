//! `rocs` and `global-pollute` on configs of `examples/fresh/` and `examples/robustness/`:
//! what their papers' mechanisms must do whatever the run's length and tick (cut by `scale` to
//! keep within the CI budget).
use crate::system::{testing, SystemConfig, SystemReport};

macro_rules! example {
    ($path:literal) => {
        include_str!(concat!("../../../../examples/", $path, ".toml"))
    };
}

/// `text` under `policy`, seed 1, every phase's references times `scale`, `[scheduler] tick`
/// set to `tick` cycles.
fn run(text: &str, policy: &str, scale: f64, tick: u64) -> SystemReport {
    let mut config: SystemConfig = testing::config_for(text, policy, Some(1));
    config.scheduler.tick = tick;
    for p in &mut config.processes {
        for t in &mut p.threads {
            if let Some(w) = &mut t.workload {
                for ph in &mut w.phases {
                    ph.references = ((ph.references as f64 * scale) as u64).max(1);
                }
            }
        }
    }
    testing::run_config(&config, None).1
}

/// Summed IPC of `policy` over linux's at the same tick, and the policy's report.
fn ratio(text: &str, policy: &str, scale: f64, tick: u64) -> (f64, SystemReport) {
    let sum = |r: &SystemReport| r.processes.iter().map(|p| p.ipc).sum::<f64>();
    let linux = run(text, "linux", scale, tick);
    let r = run(text, policy, scale, tick);
    (sum(&r) / sum(&linux), r)
}

/// Pages of process `pid` in every search's chosen buffer, and the pages chosen, over the
/// report's units.
fn chosen_pages_of(r: &SystemReport, pid: u64) -> (usize, usize) {
    let mut of_pid = 0;
    let mut chosen = 0;
    for u in r.policy_report["units"].as_array().into_iter().flatten() {
        for s in u["searches"].as_array().into_iter().flatten() {
            for p in s["pages"].as_array().into_iter().flatten() {
                chosen += 1;
                if p[0].as_u64() == Some(pid) {
                    of_pid += 1;
                }
            }
        }
    }
    (of_pid, chosen)
}

/// Bug: with about one sample a page, the sensitive program's pages seen once at a miss tied
/// with the stream's at miss rate 1.0, were ordered by pid, and the chosen step held 33 of them
/// (a sensitive program's pages in a pollute buffer compete with the stream there: the
/// opposite of Azimi 4.2's shared buffer). Pages at the same rate now go first to the address
/// space that misses more (the stream's): the buffer holds (almost) none of the sensitive
/// program's pages.
#[test]
fn global_pollute_buffer_holds_almost_none_of_the_sensitive_programs_pages() {
    let text = example!("fresh/sensitive-stream-xeon");
    let r = run(text, "global-pollute", 0.5, 2_000_000);
    assert_eq!(r.processes[0].name, "sensitive");
    let (sensitive, chosen) = chosen_pages_of(&r, 0);
    eprintln!("chosen {chosen} pages, {sensitive} of the sensitive program");
    assert!(chosen > 0, "the search chose a buffer: {}", r.policy_report);
    assert!(
        sensitive * 100 <= chosen,
        "{sensitive} of {chosen} chosen pages are the sensitive program's"
    );
}

/// Bug: rocs on a program that just fits a 4 MiB LLC gave 0.933x linux at a 1 M-cycle tick and
/// 1.000x at 4 M: warm-up, windows and profile were counted in ticks. They are counted in
/// cycles (ROCS 5.1 and 6.2 count billions of cycles), so at a 1 M and at a 2 M tick, which
/// both divide every default duration (each stage spans the same cycles), a policy's result
/// against linux at the same tick moves by no more than its seed-to-seed noise: where rocs acts
/// (a stream beside a reused array, ROCS 3.2.2) and where global-pollute acts (a sensitive
/// program beside a stream, Azimi 4.2).
///
/// The bound is 2 x sqrt(2) standard deviations of the ratio over `cachecolor simulate --seed`
/// 1-5 at a 2 M tick, at these scales, exact-oracle PMU (the ~95% bound on the difference of two
/// runs that scatter as seeds do): rocs 0.933, 0.958, 0.981, 0.975, 0.958 (sd 0.0186, bound 0.053: its search decides
/// on a noise estimate of two degrees of freedom); global-pollute 0.920, 0.914, 0.914, 0.919,
/// 0.915 (sd 0.0029, bound 0.0082). A tick longer than `settle_cycles` and `measure_cycles`
/// (2 M) cannot honour them: each lasts a whole tick, a step 8 M cycles at a 4 M tick instead of
/// 4 M, and global-pollute on sensitive-stream-xeon moves 1.2% (0.918x to 0.930x), beyond its
/// noise (docs/rocs.md, "Fresh configs").
#[test]
fn rocs_and_global_pollute_results_do_not_move_with_the_tick_length() {
    let mut moved = Vec::new();
    for (name, text, policy, scale, bound) in [
        (
            "stream-beside-320k",
            example!("robustness/stream-beside-320k"),
            "rocs",
            0.25,
            0.053,
        ),
        (
            "sensitive-stream-xeon",
            example!("fresh/sensitive-stream-xeon"),
            "global-pollute",
            0.5,
            0.0082,
        ),
    ] {
        let (short, rs) = ratio(text, policy, scale, 1_000_000);
        let (long, rl) = ratio(text, policy, scale, 2_000_000);
        eprintln!(
            "{name} {policy}: {short:.4} at a 1 M tick, {long:.4} at 2 M; chosen {:?} / {:?}",
            chosen_pages_of(&rs, 0),
            chosen_pages_of(&rl, 0)
        );
        for r in [&rs, &rl] {
            assert!(
                r.policy_report["units"][0]["profiles"].as_u64() > Some(0),
                "{name}: {policy} targets and profiles at both ticks"
            );
        }
        if (short - long).abs() > bound {
            moved.push(format!("{name} {policy}: {short:.4} vs {long:.4}"));
        }
    }
    assert!(moved.is_empty(), "moved with the tick: {moved:#?}");
}

/// Regression: a program that just fits the Xeon's 4 MiB LLC, alone, was targeted on its cold
/// start (when a first touch read memory, its LLC MPKI after the 4 M-cycle warm-up was 200+,
/// falling by a third every 2 M cycles) and profiled and searched for nothing: rocs 0.955x
/// linux, global-pollute 0.941x. Neither policy profiles it. With the kernel's page clear its
/// first touches hit the lines the clears stored (no user LLC miss in the whole run), so this
/// test no longer fails with the stable-phase rule off;
/// `rocs_does_not_target_a_cold_start_whose_misses_are_still_falling` pins that rule.
#[test]
fn pollute_policies_do_not_target_a_fitting_program_on_its_cold_start() {
    let text = example!("fresh/just-fits-xeon");
    for policy in ["rocs", "global-pollute"] {
        let r = run(text, policy, 0.25, 1_000_000);
        let u = &r.policy_report["units"][0];
        assert_eq!(u["profiles"], 0, "{policy} profiled the cold start: {u}");
    }
}

/// A uniform program twice the Xeon's LLC, alone (a steady LLC miss rate near 50%, rightly
/// targeted), is profiled and then searched: with about one sample a page the stack looks
/// ordered, and the walk's page moves and steps cost it 3.8-4.2% (0.962x / 0.958x linux). Open:
/// a test of the stack's order (all-miss pages against a single miss rate's) skipped it, but
/// also skipped ROCS's swim (6.4: pages that all miss, a gain through the page walks) and a
/// stream beside a victim under global-pollute (one or two samples a page cannot tell them
/// apart), so it was not kept (docs/rocs.md).
#[test]
#[ignore = "open: a flat stack of a program alone is still searched (1.8%): its baseline is measured with the buffer reserved (docs/rocs.md, A flat stack)"]
fn pollute_policies_do_not_search_a_program_whose_pages_all_miss_alike() {
    let text = example!("fresh/alone-hungry-xeon");
    for policy in ["rocs", "global-pollute"] {
        let r = run(text, policy, 0.25, 1_000_000);
        let u = &r.policy_report["units"][0];
        assert!(u["profiles"].as_u64() > Some(0), "{policy} targets it: {u}");
        for s in u["searches"].as_array().into_iter().flatten() {
            assert_eq!(
                s["skipped"], "no more pages missed on every sample than if all missed alike",
                "{policy}: {s}"
            );
        }
        assert_eq!(r.policy_report["pages_to_buffer"], 0, "{policy}");
    }
}
