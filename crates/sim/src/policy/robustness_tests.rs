//! The scenario test over the robustness matrix (`examples/robustness/`): configs written for the
//! matrix and tuned for no policy, each under `linux` and the policies, over 5 seeds (workload and
//! frame placement both move with the seed).
//!
//! - Where a policy has nothing to gain (nothing targeted, nothing shared, everything fits) its
//!   IPC is at least `NO_HARM` x linux's for every process and in sum, on every seed.
//! - Where the paper claims a gain (ROCS 3.2.2: a stream beside a reused array that the buffer
//!   leaves room for) the gain holds on every seed.
//!
//! Runs are cut (`scale`) to keep the test within its CI budget; which configs are run and why
//! is said beside each list. The full matrix over 5 seeds is `cachecolor report
//! examples/robustness/ --policy linux --policy rocs --policy mrc-partition --seeds 5`.
use crate::system::{testing, SystemConfig, SystemReport};

/// The do-no-harm bar for a policy with nothing to gain.
const NO_HARM: f64 = 0.99;
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

macro_rules! robustness {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!("../../../../examples/robustness/", $name, ".toml")),
        )
    };
}

/// `config` under `policy` and `seed`, every phase's references multiplied by `scale`.
fn run_scaled(text: &str, policy: &str, seed: u64, scale: f64) -> SystemReport {
    let config: SystemConfig = testing::config_for(text, policy, Some(seed));
    testing::run_config(&scaled(config, scale), None).1
}

/// `config` with every phase's references multiplied by `scale` (at least 1 each).
fn scaled(mut config: SystemConfig, scale: f64) -> SystemConfig {
    for p in &mut config.processes {
        for t in &mut p.threads {
            if let Some(w) = &mut t.workload {
                for ph in &mut w.phases {
                    ph.references = ((ph.references as f64 * scale) as u64).max(1);
                }
            }
        }
    }
    config
}

/// (per-process IPC ratios, summed-IPC ratio) of `policy` over `linux`.
fn ratios(policy: &SystemReport, linux: &SystemReport) -> (Vec<f64>, f64) {
    let each = policy
        .processes
        .iter()
        .zip(&linux.processes)
        .map(|(p, l)| p.ipc / l.ipc)
        .collect();
    let sum = |r: &SystemReport| r.processes.iter().map(|p| p.ipc).sum::<f64>();
    (each, sum(policy) / sum(linux))
}

/// Nothing to gain: one program that fits or just fits (nothing targeted: below ROCS's 25%
/// target; one process: nothing for mrc-partition to divide), two programs that both fit on
/// one chip and on the sliced Core i3, a 6 MiB stream of 8-byte elements beside 400 KiB (LLC
/// miss rate below the target), two threads of one process sharing an array. The pure stream
/// is targeted by rocs but has nothing reused: it may cost only its monitoring.
#[test]
fn policies_do_no_harm_where_they_have_nothing_to_gain() {
    let configs = [
        robustness!("just-fits"),
        robustness!("mix2-both-fit"),
        robustness!("sliced-i3-two-fit"),
        robustness!("stream-beside-400k"),
        robustness!("mt-sharing-one-chip"),
        robustness!("pure-stream"),
    ];
    let mut failures = Vec::new();
    for (name, text) in configs {
        for policy in ["rocs", "mrc-partition"] {
            if (name, policy) == ("pure-stream", "rocs") {
                continue; // an open defect: the ignored test below
            }
            failures.extend(harm_on_every_seed(name, text, policy));
        }
    }
    assert!(
        failures.is_empty(),
        "below {NO_HARM} x linux: {failures:#?}"
    );
}

/// The runs (quarter length, each seed) where `policy` falls below `NO_HARM` x linux for some
/// process or in sum, one line each.
fn harm_on_every_seed(name: &str, text: &str, policy: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for seed in SEEDS {
        let linux = run_scaled(text, "linux", seed, 0.25);
        let r = run_scaled(text, policy, seed, 0.25);
        let (each, sum) = ratios(&r, &linux);
        eprintln!("{name} seed {seed} {policy}: each {each:.4?} sum {sum:.4}");
        if each.iter().any(|&x| x < NO_HARM) || sum < NO_HARM {
            failures.push(format!("{name} seed {seed} {policy}: {each:.4?} {sum:.4}"));
        }
    }
    failures
}

/// The 4-process POWER5 mix with each role in each position: the four roles (a stream, a 1 MiB
/// and a 256 KiB reused program, a stream beside a 256 KiB table) rotated over cores 0-3 and
/// pids, so each role runs on each core, beside each other role on its chip, and at each place
/// in pid order (where a policy serving processes in pid order shows it).
const ROTATED_MIX4: [(&str, &str); 4] = [
    robustness!("mix4-power5"),
    robustness!("mix4-power5-rot1"),
    robustness!("mix4-power5-rot2"),
    robustness!("mix4-power5-rot3"),
];

/// Each process of `text` alone (the same workload and seed it has in the mix, on its own
/// core) under linux, quarter length: (name, IPC).
fn alone_under_linux(text: &str, seed: u64) -> Vec<(String, f64)> {
    let mix: SystemConfig = testing::config_for(text, "linux", Some(seed));
    (0..mix.processes.len())
        .map(|i| {
            let mut one = mix.clone();
            one.processes = vec![mix.processes[i].clone()];
            let r = testing::run_config(&scaled(one, 0.25), None).1;
            (r.processes[0].name.clone(), r.processes[0].ipc)
        })
        .collect()
}

/// The worst ratio, over the roles of `text` under linux (seed 1, quarter length), of a role's
/// IPC in the mix to its IPC alone: what sharing costs, hence what a policy could gain.
fn what_sharing_costs_under_linux(name: &str, text: &str) -> f64 {
    let linux = run_scaled(text, "linux", 1, 0.25);
    let mut worst = f64::INFINITY;
    for (role, alone) in alone_under_linux(text, 1) {
        let shared = linux.processes.iter().find(|p| p.name == role).unwrap().ipc;
        eprintln!("{name} seed 1: {role} shared / alone {:.4}", shared / alone);
        worst = worst.min(shared / alone);
    }
    worst
}

/// What sharing costs on the rotations, checked here rather than assumed: on every rotation
/// the 1 MiB program or the 256 KiB table beside a stream loses 3.4-4.2% (seed 1: 0.958-0.966
/// x alone), the stream pushing it from the chip's 1.875 MiB L2 to the L3; the others stay
/// within 1 - `NO_HARM` (0.999-1.000). Before new pages were cleared (`clear_page`), a
/// quarter-length run's compulsory misses to memory diluted that loss below 1% where the
/// stream and the 1 MiB program share chip 0 (rotations 0 and 2); cleared lines are
/// established in the caches without a memory read, so the L2 sharing shows on all four.
/// Something to gain everywhere, then; `mrc-partition` as it is today (it affords no profiling
/// window in runs this short, docs/azimi.md "Doing no harm") still stays at or above `NO_HARM`
/// x linux for every process and in sum on every seed. rocs, global-pollute and coloris: the
/// ignored tests below.
#[test]
fn mrc_partition_does_no_harm_on_the_rotated_power5_mixes() {
    for (name, text) in ROTATED_MIX4 {
        let worst = what_sharing_costs_under_linux(name, text);
        assert!(
            worst < NO_HARM,
            "{name}: sharing costs no role more than {NO_HARM} ({worst:.4} x its IPC alone)"
        );
    }
    let mut failures = Vec::new();
    for (name, text) in ROTATED_MIX4 {
        failures.extend(harm_on_every_seed(name, text, "mrc-partition"));
    }
    assert!(
        failures.is_empty(),
        "below {NO_HARM} x linux: {failures:#?}"
    );
}

/// Regression: on `mix4-power5`, Algorithm 1 walked the whole stack of "mixed" (a stream beside a
/// 256 KiB table) while its steps mapped the table at half the baseline IPC, and global-pollute's
/// walk over all four processes' pages ran the stream at 0.79x: the mechanism itself did the harm
/// (their control runs, the same profile and colors with no page moved, were at 0.94-0.99). A step
/// significantly below the baseline now ends the walk once the steps' net loss is above
/// `max_search_overhead` of the unit's cycles. Here: on the rotations with nothing to gain, each
/// policy is within `NO_HARM` of its own control for every process and in sum on every seed, so
/// what is left against linux is the profile (the ignored test below). Revert checked: without the
/// bound, global-pollute's stream is at 0.876-0.892 of its control's (fails). rocs passes here
/// either way: at this length its walk of "mixed" stops before the table (at full length it did
/// not: `rocs_walk_stops_when_its_steps_lose_...`).
#[test]
fn pollute_buffer_mechanism_does_no_harm_on_the_rotated_power5_mixes() {
    let mut failures = Vec::new();
    for (name, text) in [ROTATED_MIX4[0], ROTATED_MIX4[2]] {
        for policy in ["rocs", "global-pollute"] {
            for seed in SEEDS {
                let mut control: SystemConfig = testing::config_for(text, policy, Some(seed));
                control.policy.control = true;
                let control = testing::run_config(&scaled(control, 0.25), None).1;
                let r = run_scaled(text, policy, seed, 0.25);
                let (each, sum) = ratios(&r, &control);
                eprintln!(
                    "{name} seed {seed} {policy} / its control: each {each:.4?} sum {sum:.4}"
                );
                if each.iter().any(|&x| x < NO_HARM) || sum < NO_HARM {
                    failures.push(format!("{name} seed {seed} {policy}: {each:.4?} {sum:.4}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "below {NO_HARM} x the control: {failures:#?}"
    );
}

/// Open: on the rotations with nothing to gain (0 and 2), rocs, global-pollute and coloris cost
/// some process more than 1% at this length. Measured (quarter length, seeds 1-5, each role's IPC
/// over linux's; sum), after the search's loss bound (the test above): rocs: the stream 0.964 /
/// 0.968 and "mixed" 0.939 / 0.939 (rotation 0 / 2), sum 0.991-0.992; global-pollute: the stream
/// 0.972 / 0.968, "mixed" 0.941 / 0.945, sum 0.991-0.992 (before it: the stream 0.789-0.826, sum
/// 0.961-0.981; the stream 0.966 at rotation 0 without the budget over the live members,
/// `global_pollute_budget_counts_only_the_processes_still_in_the_unit`); coloris: the stream
/// 0.968 as pid 0 (rotation 0; 0.9905 as pid 2), sum 0.998-0.9998. What is left for rocs and
/// global-pollute is their profile, which their control runs pay too
/// (`pollute_buffer_mechanism_...` above): 4 ticks at one interrupt per 5 K cycles of 1 K
/// cycles, the chip's prefetcher off, in runs of 16-26 ticks. Run with
/// `cargo test --release -p cachecolor-sim --lib policies_do_no_harm_on_the_rotated_power5_mixes -- --ignored --nocapture`.
#[test]
#[ignore = "open: the rocs/global-pollute profile (paid by their controls too) and coloris's sections cost 1-6% on rotated POWER5 mixes with nothing to gain at quarter length"]
fn policies_do_no_harm_on_the_rotated_power5_mixes() {
    let mut failures = Vec::new();
    for (name, text) in [ROTATED_MIX4[0], ROTATED_MIX4[2]] {
        for policy in ["rocs", "global-pollute", "coloris"] {
            failures.extend(harm_on_every_seed(name, text, policy));
        }
    }
    assert!(
        failures.is_empty(),
        "below {NO_HARM} x linux: {failures:#?}"
    );
}

/// Open: on the rotations where the stream shares a chip with the stream-beside-a-table (1 and 3:
/// 2.4-2.9% to gain), the pollute buffer claims a gain (ROCS 3.2.2, Azimi 4.2: the polluter's pages
/// confined, the table keeps the cache) and does not reach it at this length: the profile costs
/// more than the buffer recovers before the run ends. Measured (quarter length, seeds 1-5; rotation
/// 1 / 3), after the search's loss bound: rocs "mixed" 0.935 / 0.934, the stream 0.973 / 0.971, sum
/// 0.9917 / 0.9915; global-pollute "mixed" 0.937 / 0.934, the stream 0.967 / 0.965, sum 0.9915 /
/// 0.9912 (before it: the stream 0.830, sum 0.982). (coloris gains 1.0001-1.0008 in sum there.)
/// Run with
/// `cargo test --release -p cachecolor-sim --lib pollute_buffer_gain_on_the_rotated_power5_mixes -- --ignored --nocapture`.
#[test]
#[ignore = "open: rocs and global-pollute lose 0.8-0.9% in sum (their profile) where the rotated POWER5 mixes have something to gain, at quarter length"]
fn pollute_buffer_gain_on_the_rotated_power5_mixes_holds_on_every_seed() {
    let mut failures = Vec::new();
    for (name, text) in [ROTATED_MIX4[1], ROTATED_MIX4[3]] {
        for policy in ["rocs", "global-pollute"] {
            for seed in SEEDS {
                let linux = run_scaled(text, "linux", seed, 0.25);
                let r = run_scaled(text, policy, seed, 0.25);
                let (each, sum) = ratios(&r, &linux);
                eprintln!("{name} seed {seed} {policy}: each {each:.4?} sum {sum:.4}");
                if sum <= 1.0 {
                    failures.push(format!("{name} seed {seed} {policy}: {each:.4?} {sum:.4}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "no gain over linux: {failures:#?}");
}

/// Regression (found under the queued memory controller): rocs targets a pure stream (miss rate
/// ~1), and its search moved the stream's pages into the pollute buffer and back; the copies used
/// the bandwidth the stream needs: 0.897x linux at quarter length on every seed (3 searches: the
/// restore of the first read as a phase change). Now a profile with no sampled hit is not searched
/// (nothing reused to protect) and the buffer's colors are taken only when a search begins:
/// 0.9927x, the profile's interrupts. Revert checked: without the skip, the search's budget
/// (`max_search_overhead`) alone leaves 0.9877x (fails).
#[test]
fn rocs_does_no_harm_on_a_pure_stream() {
    let (name, text) = robustness!("pure-stream");
    let failures = harm_on_every_seed(name, text, "rocs");
    assert!(
        failures.is_empty(),
        "below {NO_HARM} x linux: {failures:#?}"
    );
}

/// ROCS 3.2.2 / Fig. 8: a stream beside a reused array that still fits beside the buffer gains
/// from the buffer. Claimed where measured above the noise on the golden runs: 320 KiB (+3.6%)
/// and 480 KiB (+2.4%) on the 512 KiB L2; held here on every seed (+4.0 to +6.2%). It also pins
/// the stack's order: ranked by a lower confidence bound on each page's rate, the reused
/// array's pages (4-8 samples each) went above the stream's pages seen once (1 sample, bound
/// 0.2), 18 of them went into the buffer and the gain was 0.998-1.011.
#[test]
fn rocs_gain_on_a_stream_beside_a_reused_array_holds_on_every_seed() {
    let configs = [robustness!("stream-beside-320k")];
    let mut gains = Vec::new();
    for (name, text) in configs {
        for seed in SEEDS {
            let linux = run_scaled(text, "linux", seed, 1.0);
            let rocs = run_scaled(text, "rocs", seed, 1.0);
            let (_, sum) = ratios(&rocs, &linux);
            eprintln!(
                "{name} seed {seed}: rocs / linux {sum:.4}, chosen {}",
                rocs.policy_report["units"][0]["searches"][0]["chosen"]
            );
            gains.push((name, seed, sum));
        }
    }
    assert!(
        gains.iter().all(|&(_, _, g)| g > 1.0),
        "rocs gains on every seed: {gains:?}"
    );
}

/// Bug (queued memory the default): a recolor's page copy booked its lines on the controller at
/// the copying core's clock while the core was charged only `copy_cycles_per_page` (0 on the
/// ppc970fx preset), so the controller ran a backlog far past the clock; the stream's next
/// record after the shootdown then waited it out once per page-walk level and once more for its
/// data (all issued at the record's start), about 5x the backlog: on pure-stream at a quarter
/// length, 115.7 M bandwidth-stall cycles against linux's 0.07 M. The copier now waits for its
/// own traffic, so the rocs run's extra cycles over linux are the kernel time it was charged
/// (the copies and the samples, each paid once), and its reads wait no more than linux's.
#[test]
fn a_recolor_copy_backlog_is_paid_by_the_copier_not_amplified_over_later_reads() {
    let (_, text) = robustness!("pure-stream");
    // rocs no longer searches a pure stream (its profile has no hit): the best-offline mode
    // maps the stack's top pages with no search, so the copies run as they did.
    let text = &format!("{text}\n[policy.rocs]\noffline_pages = 400\n");
    let linux = run_scaled(text, "linux", 1, 0.05);
    let rocs = run_scaled(text, "rocs", 1, 0.05);
    assert_eq!(
        rocs.memory[0].model,
        crate::dram::DramModel::Queued,
        "the default memory model"
    );
    let (l, r) = (&linux.processes[0], &rocs.processes[0]);
    assert!(r.recolors > 0, "rocs recolors the stream's pages");
    // The copies moved lines over the channel: the copier was charged for them although the
    // preset's copy_cycles_per_page is 0.
    assert!(r.kernel.recolor.cycles > 0.0, "{:?}", r.kernel);
    // Paid once: the extra cycles are the kernel time (1% slack for the cache's differences).
    let extra = r.cycles - l.cycles;
    assert!(
        extra <= r.stalls.kernel * 1.01 + 0.01 * l.cycles,
        "rocs ran {extra} cycles more than linux, its kernel time is {}",
        r.stalls.kernel
    );
    // Not amplified: no backlog left for the stream's reads (linux's are about 0.03% of cycles).
    assert!(
        r.stalls.bandwidth < 0.01 * r.cycles,
        "bandwidth stalls {} of {} cycles",
        r.stalls.bandwidth,
        r.cycles
    );
}
