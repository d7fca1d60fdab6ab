//! COLORIS section 4 scenarios: each runs configs from `examples/coloris/` and checks the
//! paper's qualitative result, plus the invariants.
use crate::system::testing;
use crate::system::{ProcessStats, System, SystemConfig, SystemReport};

pub(crate) fn run_with(text: &str, policy: &str, seed: Option<u64>) -> SystemReport {
    let r = testing::run(text, policy, seed);
    if let Some(v) = r.policy_report.get("violations") {
        assert_eq!(v.as_array().map_or(0, |a| a.len()), 0, "{v}");
    }
    r
}

pub(crate) fn process<'a>(r: &'a SystemReport, name: &str) -> &'a ProcessStats {
    r.processes.iter().find(|p| p.name == name).unwrap()
}

const C1: &str = include_str!("../../../../../../examples/coloris/recolor-c1.toml");
const C1_SELECTIVE: &str =
    include_str!("../../../../../../examples/coloris/recolor-c1-selective.toml");

fn pages_recolored(r: &SystemReport) -> u64 {
    r.processes
        .iter()
        .map(|p| p.recolors + p.lazy_recolors)
        .sum()
}

/// The miss rates MONITOR saw for `name` (one per period).
fn cmrs(r: &SystemReport, name: &str) -> Vec<f64> {
    r.policy_report["monitor"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["process"] == name)
        .map(|m| m["cmr"].as_f64().unwrap())
        .collect()
}

fn final_colors(r: &SystemReport) -> Vec<usize> {
    r.policy_report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["colors"].as_array().unwrap().len())
        .collect()
}

/// When the first process exited (the end of the co-run the paper's tables describe: its
/// benchmarks run together to the end), or `u64::MAX`. After it, its colors are extra colors
/// for the next hot process (`released` in the report).
fn first_exit(r: &SystemReport) -> u64 {
    r.policy_report["released"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["time"].as_u64().unwrap())
        .min()
        .unwrap_or(u64::MAX)
}

/// Each process's number of colors while all of them ran: its last assignment before the
/// first exit, in the order of `processes`.
fn corun_colors(r: &SystemReport) -> Vec<usize> {
    let cut = first_exit(r);
    let history = r.policy_report["history"].as_array().unwrap();
    r.policy_report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            history
                .iter()
                .rev()
                .find(|h| h["process"] == p["name"] && h["time"].as_u64().unwrap() < cut)
                .expect("an assignment at creation")["colors"]
                .as_array()
                .unwrap()
                .len()
        })
        .collect()
}

fn counter(r: &SystemReport, name: &str, key: &str) -> u64 {
    r.policy_report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()[key]
        .as_u64()
        .unwrap()
}

/// Section 4.3, C1 vs C3 (Figure 9, Tables 4 and 5): with recoloring the cache-hungry program's
/// miss rate is brought below HighThreshold (65%); with static partitioning it stays above.
/// Colors come from the programs below LowThreshold; Selective Moving recolors fewer pages than
/// Redistribution. Table 3: despite the recoloring overhead the hungry program runs faster
/// (omnetpp +3.3% to +9.4%) while the system's total stays roughly the same.
#[test]
fn c1_recoloring_holds_the_hungry_miss_rate_below_high_threshold() {
    let st = run_with(C1, "static", None);
    let co = run_with(C1, "coloris", None);
    let sel = run_with(C1_SELECTIVE, "coloris", None);
    let (s, c, m) = (
        process(&st, "hungry"),
        process(&co, "hungry"),
        process(&sel, "hungry"),
    );
    let tail = |r: &SystemReport| {
        let v = cmrs(r, "hungry");
        v[v.len() - 3..].to_vec()
    };
    let total_ipc = |r: &SystemReport| r.processes.iter().map(|p| p.ipc).sum::<f64>();
    eprintln!(
        "hungry IPC: static {:.4}, redistribution {:.4}, selective {:.4}; total IPC {:.3} / {:.3} / {:.3}",
        s.ipc,
        c.ipc,
        m.ipc,
        total_ipc(&st),
        total_ipc(&co),
        total_ipc(&sel)
    );
    eprintln!(
        "hungry LLC miss rate: static {:.3}, redistribution {:.3}, selective {:.3}; last periods {:?} / {:?}; colors {:?} / {:?}; pages recolored {} / {}",
        s.llc_miss_rate,
        c.llc_miss_rate,
        m.llc_miss_rate,
        tail(&co),
        tail(&sel),
        final_colors(&co),
        final_colors(&sel),
        pages_recolored(&co),
        pages_recolored(&sel)
    );
    assert!(s.llc_miss_rate > 0.65, "static: {}", s.llc_miss_rate);
    for r in [&co, &sel] {
        assert!(tail(r).iter().all(|&x| x < 0.65), "{:?}", tail(r));
        let colors = final_colors(r);
        assert!(colors[2] > 16, "hungry gained colors: {colors:?}");
        assert!(colors[0] < 16, "small gave colors away: {colors:?}");
        assert_eq!(
            colors.iter().sum::<usize>(),
            64,
            "the LLC stays fully used, no sharing"
        );
    }
    assert!(c.llc_miss_rate < s.llc_miss_rate && m.llc_miss_rate < s.llc_miss_rate);
    // Table 3: the gain is net of the copies; the others' losses leave the total about even.
    for r in [&co, &sel] {
        let h = process(r, "hungry");
        assert!(h.ipc > 1.03 * s.ipc, "hungry {} vs static {}", h.ipc, s.ipc);
        assert!(
            (total_ipc(r) / total_ipc(&st) - 1.0).abs() < 0.05,
            "total {} vs static {}",
            total_ipc(r),
            total_ipc(&st)
        );
    }
    assert_eq!(pages_recolored(&st), 0);
    // Table 4: Redistribution recolors more pages than Selective Moving.
    assert!(pages_recolored(&co) > pages_recolored(&sel));
    assert!(
        sel.processes.iter().map(|p| p.recolors).sum::<u64>() > 0,
        "eager moves"
    );
    // A shrunk color's pages all move at their next touch: `small` touches all its pages.
    for r in [&co, &sel] {
        let small = process(r, "small");
        assert!(counter(r, "small", "shrink_marked") > 0);
        assert_eq!(small.lazy_recolors, counter(r, "small", "shrink_marked"));
    }
}

/// Table 5: the stable assignments are about the same from one repetition (seed) to the next.
#[test]
fn c1_assignments_are_stable_across_seeds() {
    let runs: Vec<Vec<usize>> = [21, 42]
        .iter()
        .map(|&seed| final_colors(&run_with(C1, "coloris", Some(seed))))
        .collect();
    eprintln!("stable assignments (small, medium, hungry, skewed): {runs:?}");
    for r in &runs {
        assert!(r[2] > 16 && r[0] <= 8, "{r:?}");
    }
    for k in 0..4 {
        assert!(runs[0][k].abs_diff(runs[1][k]) <= 8, "{runs:?}");
    }
}

const C1_HOTCOLD: &str = include_str!("../../../../../../examples/coloris/recolor-c1-hotcold.toml");
const C4_HOTCOLD: &str = include_str!("../../../../../../examples/coloris/recolor-c4-hotcold.toml");

/// The seeds the first-come-first-served tests repeat each experiment over: the paper repeats every
/// experiment three times (Table 5's EXP(1)-(3)); five, so a coin flip cannot pass.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// `f(seed)` for every seed of `SEEDS`, one thread each (the runs are independent and
/// deterministic; the threads only shorten the test), in the order of `SEEDS`.
fn over_seeds<T: Send>(f: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = SEEDS.iter().map(|&seed| s.spawn(move || f(seed))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The MONITOR calls of `name` that shrank its assignment: (cmr, colors after).
fn shrinks(r: &SystemReport, name: &str) -> Vec<(f64, u64)> {
    r.policy_report["monitor"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["process"] == name && m["decision"] == "shrink")
        .map(|m| (m["cmr"].as_f64().unwrap(), m["colors"].as_u64().unwrap()))
        .collect()
}

/// Table 5, C4: per-application QoS thresholds change the stable state, on every seed. On the first
/// workload C4 equalled C1 on seeds 2-6: `skewed`'s miss rate sat at 0.40 against its own 40%
/// LowThreshold (a coin flip per seed), `medium` never gave a color under C1 either (`small` alone
/// covered `hungry`'s demand of 12 colors), so its LowThreshold 0 protected nothing. On `hotcold`
/// (built for it: examples/coloris/recolor-c4-hotcold.toml) `hungry` takes whatever is freed, so
/// who gives decides, as in the paper's C1 (4,12,40,8) vs C4 (4,16,40,4): under C4 `medium` (tonto,
/// LowThreshold 0) keeps its 16 colors and `skewed` (gamess, LowThreshold 40%) gives; under C1 the
/// reverse. Control: the runs differ only in the thresholds, and every shrink of `skewed` under C4
/// came at a miss rate between the global LowThreshold and its own, i.e. the per-application
/// threshold made it. Measured (docs/coloris.md): C1 (4, 8, 36, 16) and C4 (4, 16, 40, 4) on seeds
/// 1-5. The monitor starts after `skewed`'s first pass over its stream (the configs' `warmup`,
/// section 4.3's monitor enabled a minute in): that pass is served by the kernel's clears (miss
/// rate 0.0002-0.30) and, read, made `skewed` give under C1 too (C1 (4, 8, 48, 4)).
#[test]
fn c4_per_application_thresholds_change_the_outcome_on_every_seed() {
    let runs = over_seeds(|seed| {
        (
            run_with(C1_HOTCOLD, "coloris", Some(seed)),
            run_with(C4_HOTCOLD, "coloris", Some(seed)),
        )
    });
    for (seed, (c1, c4)) in SEEDS.into_iter().zip(runs) {
        let (a, b) = (corun_colors(&c1), corun_colors(&c4));
        eprintln!(
            "seed {seed}: C1 {a:?}, C4 {b:?}; skewed shrinks under C4 (cmr, colors) {:?}; medium under C1 {:?}",
            shrinks(&c4, "skewed"),
            shrinks(&c1, "medium")
        );
        for colors in [&a, &b] {
            assert_eq!(colors.iter().sum::<usize>(), 64, "seed {seed}: {colors:?}");
            assert!(
                colors[2] > 16,
                "seed {seed}: hungry took colors: {colors:?}"
            );
            assert_eq!(
                colors[0], 4,
                "seed {seed}: small gives down to UNIT: {colors:?}"
            );
        }
        // tonto: LowThreshold 0 under C4 (never below it), 30% under C1 (its miss rate 0).
        assert_eq!(b[1], 16, "seed {seed}: C4 keeps medium's colors: {b:?}");
        assert_eq!(counter(&c4, "medium", "shrink_marked"), 0, "seed {seed}");
        assert!(a[1] < 16, "seed {seed}: C1 takes medium's colors: {a:?}");
        // gamess: LowThreshold 40% under C4, 30% under C1, its miss rate between.
        assert_eq!(a[3], 16, "seed {seed}: C1 leaves skewed alone: {a:?}");
        assert!(b[3] < 16, "seed {seed}: C4 takes skewed's colors: {b:?}");
        // Its first shrink (from its 16 colors, the decision C1 and C4 differ on) came at a
        // miss rate between the global LowThreshold and its own. (Later ones may come lower:
        // a period right after a shrink is measured while the moved pages' copies warm them.)
        let first = shrinks(&c4, "skewed")[0];
        assert!(
            (0.30..0.40).contains(&first.0) && first.1 == 12,
            "seed {seed}: skewed first shrank at {first:?}"
        );
    }
}

/// Table 4, C6: Redistribution recolors more pages the longer its window WIN, on every seed. On the
/// first workload C6 was flat (1,050 pages at WIN = 1, 3 and 5 ticks): the uniform `hungry`
/// references all its 1,024 pages within one tick, so any window marks all of them. On `hotcold`
/// half of `hungry`'s references read a 16 MiB stream, whose pages go unreferenced for about 100
/// ticks after their turn: a window of n ticks marks the hot pages and the stream pages of those n
/// ticks. Control: the three runs differ only in WIN; the pages are counted per window (one
/// window per expansion), so the window's length, not how often `hungry` expanded, makes the
/// difference. (How often it expands is the monitor's business and may differ between the
/// runs: a longer window slows `hungry` and moves when the others cross their thresholds;
/// on a base where a new page is cleared through the caches, `skewed`'s first pass over its
/// stream hits and it gives and asks for colors too, so the expansions were 7, 8, 7.)
#[test]
fn c6_redistribution_recolors_more_pages_the_longer_the_window_on_every_seed() {
    let configs = [
        include_str!("../../../../../../examples/coloris/recolor-c6-hotcold-win1.toml"),
        include_str!("../../../../../../examples/coloris/recolor-c6-hotcold-win3.toml"),
        include_str!("../../../../../../examples/coloris/recolor-c6-hotcold-win5.toml"),
    ];
    // Counted while all the programs run (before the first exit; after it the exited
    // program's colors go to `hungry` too, more often the longer its windows slowed it).
    let expansions = |r: &SystemReport| {
        let cut = first_exit(r);
        r.policy_report["monitor"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| {
                m["process"] == "hungry"
                    && m["decision"] == "expand"
                    && m["time"].as_u64().unwrap() < cut
            })
            .count() as u64
    };
    // Pages `hungry`'s windows marked while all ran, and the number of those windows.
    let marked_in_corun = |r: &SystemReport| -> (u64, u64) {
        let cut = first_exit(r);
        r.policy_report["redistributions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["process"] == "hungry" && w["time"].as_u64().unwrap() < cut)
            .fold((0, 0), |(m, n), w| {
                (m + w["marked"].as_u64().unwrap(), n + 1)
            })
    };
    let all = over_seeds(|seed| {
        configs
            .iter()
            .map(|c| run_with(c, "coloris", Some(seed)))
            .collect::<Vec<SystemReport>>()
    });
    for (seed, runs) in SEEDS.into_iter().zip(all) {
        let windows: Vec<(u64, u64)> = runs.iter().map(marked_in_corun).collect();
        let per_window: Vec<f64> = windows.iter().map(|&(m, w)| m as f64 / w as f64).collect();
        let n: Vec<u64> = runs.iter().map(expansions).collect();
        let total: Vec<u64> = runs.iter().map(pages_recolored).collect();
        let ipc: Vec<f64> = runs.iter().map(|r| process(r, "hungry").ipc).collect();
        eprintln!(
            "seed {seed}: WIN 1/3/5 ticks: hungry's expansions {n:?}, windows (pages marked, \
             windows) {windows:?}, per window {per_window:.0?}, pages recolored in all \
             {total:?}, hungry IPC {ipc:.4?}"
        );
        // Every run expanded `hungry` and closed windows while all ran.
        assert!(
            windows.iter().zip(&n).all(|(w, &x)| x > 0 && w.1 > 0),
            "seed {seed}: {windows:?} {n:?}"
        );
        assert!(
            per_window[0] < per_window[1] && per_window[1] < per_window[2],
            "seed {seed}: {per_window:?}"
        );
    }
}

/// Section 4.3, C5 of Table 2: "every benchmark ran alone with full cache space access", the
/// reference the partitioned runs are read against. Alone with all 64 colors (the config's
/// `colors`, which the Page Color Manager honours) and thresholds that never fire, each program
/// keeps its colors, nothing is recolored, and none runs slower or misses more in the LLC than
/// under C3's static quarter of the cache; the cache-hungry one gains the most.
#[test]
fn c5_alone_with_the_whole_cache_bounds_the_partitioned_runs() {
    let c3 = run_with(
        include_str!("../../../../../../examples/coloris/recolor-c3.toml"),
        "coloris",
        None,
    );
    let alone = [
        (
            "small",
            include_str!("../../../../../../examples/coloris/recolor-c5-small.toml"),
        ),
        (
            "medium",
            include_str!("../../../../../../examples/coloris/recolor-c5-medium.toml"),
        ),
        (
            "hungry",
            include_str!("../../../../../../examples/coloris/recolor-c5-hungry.toml"),
        ),
        (
            "skewed",
            include_str!("../../../../../../examples/coloris/recolor-c5-skewed.toml"),
        ),
    ];
    assert_eq!(final_colors(&c3), [16, 16, 16, 16]);
    let mut gains = Vec::new();
    for (name, text) in alone {
        let r = run_with(text, "coloris", None);
        assert_eq!(r.processes.len(), 1);
        assert_eq!(final_colors(&r), [64], "{name} keeps the whole cache");
        assert_eq!(pages_recolored(&r), 0, "{name}");
        let (a, p) = (process(&r, name), process(&c3, name));
        assert_eq!(a.instructions, p.instructions, "{name}: the same program");
        eprintln!(
            "{name}: IPC alone {:.4} vs C3 {:.4}; LLC miss rate {:.3} vs {:.3}",
            a.ipc, p.ipc, a.llc_miss_rate, p.llc_miss_rate
        );
        // Within 0.1%: a program that fits in its quarter (`medium`) runs the same either way.
        assert!(
            a.ipc >= 0.999 * p.ipc,
            "{name}: {} alone vs {}",
            a.ipc,
            p.ipc
        );
        assert!(a.llc_miss_rate <= p.llc_miss_rate + 1e-9, "{name}");
        gains.push((name, a.ipc / p.ipc));
    }
    let hungry = process(&c3, "hungry");
    assert!(hungry.llc_miss_rate > 0.65);
    let best = gains.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
    assert_eq!(best.0, "hungry", "{gains:?}");
}

/// Section 4.2 (Figures 7, 8): with page coloring the cache-sensitive foreground keeps close
/// to its run alone (S) under a heavy background; without, it varies much more from F.
#[test]
fn coloring_isolates_a_cache_sensitive_program_from_a_heavy_background() {
    let heavy = include_str!("../../../../../../examples/coloris/isolation-heavy.toml");
    let alone = include_str!("../../../../../../examples/coloris/isolation-alone.toml");
    let (hp, h) = (
        run_with(heavy, "static", None),
        run_with(heavy, "linux", None),
    );
    let (s, f) = (
        run_with(alone, "static", None),
        run_with(alone, "linux", None),
    );
    let fg = |r: &SystemReport| process(r, "sensitive").clone();
    let (hp, h, s, f) = (fg(&hp), fg(&h), fg(&s), fg(&f));
    let var = |x: f64, base: f64| (x - base).abs() / base;
    eprintln!(
        "sensitive: H+P {:.0} cycles (miss {:.3}), H {:.0} ({:.3}); S {:.0}, F {:.0}; variation {:.3} vs {:.3}",
        hp.cycles, hp.llc_miss_rate, h.cycles, h.llc_miss_rate, s.cycles, f.cycles,
        var(hp.cycles, s.cycles), var(h.cycles, f.cycles)
    );
    assert!(hp.llc_miss_rate * 2.0 < h.llc_miss_rate);
    assert!(hp.cycles < h.cycles);
    assert!(var(hp.cycles, s.cycles) * 2.0 < var(h.cycles, f.cycles));
}

/// Section 4.5 (Figure 11): coloring per slice isolates on a sliced LLC as well.
/// Section 4.2, Figures 7 and 8 for the other two foregrounds under every background mix:
/// with coloring (P) the cache-hungry program (omnetpp's shape) varies much less against running
/// alone in its quarter (S) than without coloring against running alone with the whole cache
/// (F) (the paper: 55% vs 90%); under the light mix coloring raises its miss rate (L vs L + P,
/// "high self-conflict from limiting its memory accesses to just 1/4 of the entire cache"); the
/// cache-insensitive one (hmmer's shape) varies within 0.5% with coloring.
#[test]
fn coloring_bounds_the_variation_of_the_hungry_and_insensitive_foregrounds() {
    const FOREGROUNDS: [(&str, &str); 2] = [
        (
            "hungry",
            include_str!("../../../../../../examples/coloris/isolation-alone-hungry.toml"),
        ),
        (
            "insensitive",
            include_str!("../../../../../../examples/coloris/isolation-alone-insensitive.toml"),
        ),
    ];
    let backgrounds = |shape: &str| -> [(&'static str, &'static str); 3] {
        if shape == "hungry" {
            [
                (
                    "H",
                    include_str!("../../../../../../examples/coloris/isolation-heavy-hungry.toml"),
                ),
                (
                    "M",
                    include_str!("../../../../../../examples/coloris/isolation-medium-hungry.toml"),
                ),
                (
                    "L",
                    include_str!("../../../../../../examples/coloris/isolation-light-hungry.toml"),
                ),
            ]
        } else {
            [
                (
                    "H",
                    include_str!(
                        "../../../../../../examples/coloris/isolation-heavy-insensitive.toml"
                    ),
                ),
                (
                    "M",
                    include_str!(
                        "../../../../../../examples/coloris/isolation-medium-insensitive.toml"
                    ),
                ),
                (
                    "L",
                    include_str!(
                        "../../../../../../examples/coloris/isolation-light-insensitive.toml"
                    ),
                ),
            ]
        }
    };
    let var = |x: f64, base: f64| (x - base).abs() / base;
    for (shape, alone) in FOREGROUNDS {
        let fg = |r: &SystemReport| process(r, shape).clone();
        let (s, f) = (
            fg(&run_with(alone, "static", None)),
            fg(&run_with(alone, "linux", None)),
        );
        let (mut with, mut without) = (0.0f64, 0.0f64);
        for (mix, text) in backgrounds(shape) {
            let (p, n) = (
                fg(&run_with(text, "static", None)),
                fg(&run_with(text, "linux", None)),
            );
            eprintln!(
                "{shape} {mix}+P {:.0} cycles (miss {:.3}), {mix} {:.0} ({:.3}); S {:.0}, F {:.0}",
                p.cycles, p.llc_miss_rate, n.cycles, n.llc_miss_rate, s.cycles, f.cycles
            );
            with = with.max(var(p.cycles, s.cycles));
            without = without.max(var(n.cycles, f.cycles));
            if shape == "hungry" && mix == "L" {
                assert!(
                    p.llc_miss_rate > n.llc_miss_rate,
                    "L + P raises the miss rate"
                );
            }
        }
        eprintln!("{shape}: largest variation {with:.3} with coloring, {without:.3} without");
        if shape == "hungry" {
            assert!(with * 2.0 < without, "{with} vs {without}");
        } else {
            assert!(with < 0.005, "{with}");
        }
    }
}

#[test]
fn coloring_isolates_on_a_sliced_llc() {
    let text = include_str!("../../../../../../examples/coloris/sliced-heavy.toml");
    let (p, n) = (
        run_with(text, "static", None),
        run_with(text, "linux", None),
    );
    let (p, n) = (process(&p, "sensitive"), process(&n, "sensitive"));
    eprintln!(
        "sliced: sensitive miss {:.3} vs {:.3}, cycles {:.0} vs {:.0}",
        p.llc_miss_rate, n.llc_miss_rate, p.cycles, n.cycles
    );
    assert!(p.llc_miss_rate * 2.0 < n.llc_miss_rate);
    assert!(p.cycles < n.cycles);
}

/// Section 4.4 (Figure 10): on an over-committed system (8 processes, 4 cores) COLORIS is no
/// worse than Linux.
#[test]
fn overcommitted_coloris_is_no_worse_than_linux() {
    // Pinned to the fixed-latency memory (the queued controller is the default; docs/system.md
    // "Memory bandwidth and queueing" says what this run shows under it).
    let text = &format!(
        "{}\n[machine.memory]\nmodel = \"fixed\"\n",
        include_str!("../../../../../../examples/coloris/overcommit.toml")
    );
    let ipc = |r: &SystemReport| r.processes.iter().map(|p| p.ipc).sum::<f64>();
    let (c, l) = (
        run_with(text, "coloris", None),
        run_with(text, "linux", None),
    );
    eprintln!(
        "summed IPC: coloris {:.4}, linux {:.4}; hungry colors {:?}",
        ipc(&c),
        ipc(&l),
        final_colors(&c)
    );
    assert!(ipc(&c) >= 0.98 * ipc(&l), "{} vs {}", ipc(&c), ipc(&l));
    assert!(final_colors(&c)[6] > 16, "the hungry one got colors");
    assert_eq!(final_colors(&c)[4], 16, "QoS (0, 100): no recoloring");

    // The paper's staggered launch (`start`, 1 M cycles apart in launch order): each program is
    // created when the ones before it are running, still gets its group's core (process i and
    // i + 4 on core i) and section, and COLORIS stays no worse than Linux.
    let text = &format!(
        "{}\n[machine.memory]\nmodel = \"fixed\"\n",
        include_str!("../../../../../../examples/coloris/overcommit-staggered.toml")
    );
    let (c, l) = (
        run_with(text, "coloris", None),
        run_with(text, "linux", None),
    );
    let cores: Vec<u64> = c.policy_report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["core"].as_u64().unwrap())
        .collect();
    eprintln!(
        "staggered, summed IPC: coloris {:.4}, linux {:.4}; colors {:?}; cores {cores:?}",
        ipc(&c),
        ipc(&l),
        final_colors(&c)
    );
    assert_eq!(cores, [0, 1, 2, 3, 0, 1, 2, 3]);
    assert!(ipc(&c) >= 0.98 * ipc(&l), "{} vs {}", ipc(&c), ipc(&l));
    assert!(final_colors(&c)[6] > 16, "the hungry one got colors");
    // The last program starts 7 M cycles in: its first instructions are in no earlier interval.
    let first = |r: &SystemReport, i: usize| {
        r.intervals
            .iter()
            .find(|iv| iv.processes[i].instructions > 0)
            .unwrap()
            .time
    };
    assert!(first(&c, 7) > 7_000_000 && first(&l, 7) > 7_000_000);
}

/// Section 4.1 (Table 1): the color pool with every color allowed runs as fast as buddy.
#[test]
fn color_pool_with_every_color_runs_as_fast_as_buddy() {
    let b = run_with(
        include_str!("../../../../../../examples/coloris/overhead-buddy.toml"),
        "linux",
        None,
    );
    let p = run_with(
        include_str!("../../../../../../examples/coloris/overhead-pool.toml"),
        "linux",
        None,
    );
    assert_eq!(
        (b.allocator.as_str(), p.allocator.as_str()),
        ("buddy", "color-pool")
    );
    for (x, y) in b.processes.iter().zip(&p.processes) {
        let d = (x.cycles - y.cycles).abs() / x.cycles;
        eprintln!(
            "{}: buddy {:.0}, pool {:.0} cycles ({:.2}%)",
            x.name,
            x.cycles,
            y.cycles,
            100.0 * d
        );
        assert!(d < 0.01, "{}: {d}", x.name);
    }
}

const OOM: &str = r#"
[machine.hierarchy]
cores = 2
[[machine.hierarchy.levels]]
name = "L1D"
size = "32KiB"
ways = 8
[[machine.hierarchy.levels]]
name = "LLC"
size = "1MiB"
ways = 16
[machine.timing]
level_latency = [4, 40]
dram_latency = 200
[memory]
ram = "64MiB"
allocator = "color-pool"
pool_size = "2MiB"
[scheduler]
tick = 100000
[policy]
name = "coloris"
[policy.coloris]
unit = 2
period = 100000000000
win = 100000
[[processes]]
name = "big"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "sequential", footprint = "1536KiB", size = 64, references = 60000 }] }
[[processes]]
name = "little"
[[processes.threads]]
workload = { seed = 2, phases = [{ pattern = "uniform", footprint = "64KiB", references = 60000 }] }
"#;

/// Section 3.2: a process out of memory in its colors gets UNIT more (ALLOC_COLORS); the
/// bounded pool (section 4's 1 GiB pool, here 2 MiB: 32 frames per color) makes that happen.
#[test]
fn out_of_memory_in_its_colors_adds_unit_colors() {
    let r = run_with(OOM, "coloris", None);
    let big = counter(&r, "big", "out_of_memory_allocs");
    eprintln!(
        "big: {big} ALLOC_COLORS on running out; colors {:?}",
        final_colors(&r)
    );
    // 8 colors x 32 frames = 256 frames (page tables included); 384 pages are needed.
    assert!(big >= 2, "{big}");
    assert_eq!(final_colors(&r)[0] as u64, 8 + 2 * big);
    // Without the hook, the static scheme runs out.
    let mut config: SystemConfig = crate::config::from_toml(OOM).unwrap();
    config.policy.name = "static".into();
    let mut s = System::new(&config).unwrap();
    let e = s.run().unwrap_err().to_string();
    assert!(e.contains("out of memory"), "{e}");
    // Same seed, same result (DESIGN.md principle 3).
    let again = run_with(OOM, "coloris", None);
    assert_eq!(
        serde_json::to_string(&again.policy_report).unwrap(),
        serde_json::to_string(&r.policy_report).unwrap()
    );
    assert_eq!(again.processes[0].cycles, r.processes[0].cycles);
}

#[test]
fn qos_for_an_unknown_process_is_rejected() {
    let text = OOM.replace("unit = 2", "unit = 2\nqos = { nobody = [0, 100] }");
    let config: SystemConfig = crate::config::from_toml(&text).unwrap();
    let e = System::new(&config).err().expect("rejected").to_string();
    assert!(e.contains("policy.coloris.qos.nobody"), "{e}");
    assert!(e.contains("the processes are: big, little"), "{e}");
    let text = OOM.replace("unit = 2", "unit = 17");
    let config: SystemConfig = crate::config::from_toml(&text).unwrap();
    let e = System::new(&config).err().expect("rejected").to_string();
    assert!(
        e.contains("policy.coloris.unit") && e.contains("1..=16"),
        "{e}"
    );
}

/// Exploration aid (ignored): `COLORIS_EXPLORE="file.toml:policy[:seed] ..."` prints each run.
#[test]
#[ignore]
fn explore() {
    let spec = std::env::var("COLORIS_EXPLORE").unwrap_or_default();
    for item in spec.split_whitespace() {
        let parts: Vec<&str> = item.split(':').collect();
        let text = std::fs::read_to_string(parts[0]).unwrap();
        let seed = parts.get(2).map(|s| s.parse().unwrap());
        let r = run_with(&text, parts[1], seed);
        for p in &r.processes {
            eprintln!(
                "{item} {}: cycles {} ipc {:.3} llc miss {:.3} acc {} recolors {} lazy {}",
                p.name,
                p.cycles,
                p.ipc,
                p.llc_miss_rate,
                p.llc_accesses,
                p.recolors,
                p.lazy_recolors
            );
        }
        if let Some(ps) = r.policy_report.get("processes") {
            for p in ps.as_array().unwrap() {
                eprintln!(
                    "  {} colors {} shrink {} sel {} redis {} oom {}",
                    p["name"],
                    p["colors"].as_array().unwrap().len(),
                    p["shrink_marked"],
                    p["selective_moved"],
                    p["redistribution_marked"],
                    p["out_of_memory_allocs"]
                );
            }
            if std::env::var("COLORIS_MONITOR").is_ok() {
                for m in r.policy_report["monitor"].as_array().unwrap() {
                    eprintln!("  {m}");
                }
            }
        }
    }
}

/// A 3 MiB uniform program (`hungry`: about 0.8 LLC miss rate in its 8 colors, above the
/// default 75%) beside a 256 KiB one that fits its 8 colors (`fits`: below 30% once warm), on
/// two cores sharing a 1 MiB 16-way LLC (16 colors). The `[policy.coloris]` table is left to
/// its defaults (period, win, warm-up).
const TWO: &str = r#"
[machine.hierarchy]
cores = 2
[[machine.hierarchy.levels]]
name = "L1D"
size = "32KiB"
ways = 8
[[machine.hierarchy.levels]]
name = "LLC"
size = "1MiB"
ways = 16
[machine.timing]
level_latency = [4, 40]
dram_latency = 200
[memory]
ram = "64MiB"
allocator = "color-pool"
[scheduler]
tick = 100000
[policy]
name = "coloris"
[policy.coloris]
min_references = 1000
[[processes]]
name = "hungry"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "3MiB", references = 400000 }] }
[[processes]]
name = "fits"
[[processes.threads]]
workload = { seed = 2, phases = [{ pattern = "uniform", footprint = "256KiB", references = 2000000 }] }
"#;

fn warnings(r: &SystemReport) -> Vec<String> {
    r.policy_report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// Regression: the default PERIOD was 5 s of the paper's machine (10.65 G cycles),
/// longer than every simulated run, so coloris silently acted as `static` (`monitor: []`). It is 16
/// scheduler ticks now; the monitor runs and moves colors to the hungry program.
#[test]
fn coloris_default_period_is_scaled_to_the_tick_so_the_monitor_acts() {
    let r = run_with(TWO, "coloris", None);
    assert_eq!(r.policy_report["period"], 16 * 100_000);
    assert_eq!(r.policy_report["win"], 100_000);
    assert!(!r.policy_report["monitor"].as_array().unwrap().is_empty());
    let colors = final_colors(&r);
    eprintln!(
        "colors (hungry, fits) {colors:?}; warnings {:?}",
        warnings(&r)
    );
    assert!(colors[0] > 8, "hungry got colors: {colors:?}");
    assert!(warnings(&r).is_empty(), "{:?}", warnings(&r));
}

/// Regression: the monitor ran from cycle 0, so a program's compulsory misses made it
/// look hot. Counts are read only after a warm-up (default one PERIOD; section 4.3 enables the
/// monitor a minute into the runs): `fits`'s first miss rate falls once the cold start is out.
#[test]
fn coloris_monitor_reads_counts_only_after_the_warm_up() {
    let first = |text: &str| {
        let r = run_with(text, "coloris", None);
        let m = r.policy_report["monitor"].as_array().unwrap().clone();
        let f = m.iter().find(|m| m["process"] == "fits").unwrap().clone();
        (f["time"].as_u64().unwrap(), f["cmr"].as_f64().unwrap())
    };
    let (t_warm, cmr_warm) = first(TWO);
    let (t_cold, cmr_cold) =
        first(&TWO.replace("min_references = 1000", "min_references = 1000\nwarmup = 0"));
    eprintln!("first MONITOR of `fits`: warm-up 0 at {t_cold} cmr {cmr_cold:.3}; default warm-up at {t_warm} cmr {cmr_warm:.3}");
    assert!(
        t_cold >= 1_600_000 && t_warm >= 2 * 1_600_000,
        "{t_cold} {t_warm}"
    );
    assert!(cmr_cold > 2.0 * cmr_warm, "{cmr_cold} vs {cmr_warm}");
}

/// Regression: with colors from the config coloris recolored them, or (QoS pairs that
/// disable recoloring) behaved exactly as `static`, in silence. Both are said now, in the policy
/// report's `warnings` (printed on stderr by `cachecolor simulate`) and `colors_from_config`.
#[test]
fn coloris_says_when_it_changed_the_configs_colors_or_behaved_as_static() {
    let given = TWO
        .replace(
            "name = \"hungry\"",
            "name = \"hungry\"\ncolors = [[0, 8]]\npin = [0]",
        )
        .replace(
            "name = \"fits\"",
            "name = \"fits\"\ncolors = [[8, 16]]\npin = [1]",
        );
    let r = run_with(&given, "coloris", None);
    assert_eq!(
        r.policy_report["colors_from_config"],
        serde_json::json!(["hungry", "fits"])
    );
    let w = warnings(&r);
    eprintln!("{w:?}");
    assert!(
        w.iter()
            .any(|w| w.contains("`hungry`") && w.contains("monitor changed them")),
        "{w:?}"
    );
    let kept = given.replace(
        "min_references = 1000",
        "min_references = 1000\nqos = { hungry = [0, 100], fits = [0, 100] }",
    );
    let r = run_with(&kept, "coloris", None);
    let w = warnings(&r);
    eprintln!("{w:?}");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("every process has its colors from the config")
            && w[0].contains("behaved exactly as `static`"),
        "{w:?}"
    );
}

const MT_ONE_CHIP: &str =
    include_str!("../../../../../../examples/robustness/mt-sharing-one-chip.toml");
const MT_CROSS_CHIP: &str =
    include_str!("../../../../../../examples/robustness/mt-sharing-cross-chip.toml");

/// Regression: `static` and `coloris` ran at 0.11-0.16x linux on the multithreaded-sharing
/// configs: the process's two threads were both pinned to one core (the least-loaded core
/// rule, made for single-threaded programs) with one core's section, and on the two-chip 970FX that
/// section was half of a chip's L2 that no other core shares. Each thread gets a core now, and the
/// sections cut each chip's LLC among its own cores: with nothing to partition against, both run as
/// linux does.
#[test]
fn static_and_coloris_do_not_serialise_a_multithreaded_process_on_one_core() {
    for (name, text) in [("one chip", MT_ONE_CHIP), ("cross chip", MT_CROSS_CHIP)] {
        let linux = run_with(text, "linux", None).processes[0].ipc;
        for policy in ["static", "coloris"] {
            let r = run_with(text, policy, None);
            let ipc = r.processes[0].ipc;
            eprintln!("{name}: {policy} IPC {ipc:.4} vs linux {linux:.4}");
            assert!(ipc >= 0.99 * linux, "{name} {policy}: {ipc} vs {linux}");
        }
    }
}

/// Regression: a program alone ran in its core's section (half the colors here; 16 of 64 and
/// 0.73x linux on `examples/fresh/alone-hungry-xeon.toml`). Alone on its LLC it holds every color
/// from its first fault (COLORIS Table 1's setup), so nothing is recolored and it runs as linux.
#[test]
fn coloris_program_alone_holds_every_color_and_runs_as_linux() {
    let alone = TWO.split("[[processes]]\nname = \"fits\"").next().unwrap();
    let linux = run_with(alone, "linux", None).processes[0].ipc;
    let r = run_with(alone, "coloris", None);
    eprintln!(
        "alone: coloris IPC {:.4} vs linux {linux:.4}; colors {:?}",
        r.processes[0].ipc,
        final_colors(&r)
    );
    assert_eq!(final_colors(&r), [16]);
    assert_eq!(pages_recolored(&r), 0);
    assert!(
        r.processes[0].ipc >= 0.99 * linux,
        "{} vs {linux}",
        r.processes[0].ipc
    );
}
