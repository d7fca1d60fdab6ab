//! Presets: every one parses and validates, encodes its paper's numbers, and resolves with
//! overrides; `[machine] preset` keeps field paths in errors.
use super::*;
use crate::cache::Hierarchy;
use crate::mmu::{AddressSpace, Tlb};
use crate::system::detect::fake::FakeSysfs;
use crate::system::System;
use crate::timing::Timing;

const NOWHERE: &str = "/nonexistent/cachecolor-test/cpu";

fn config(name: &str) -> MachineConfig {
    machine_config(name, Path::new(NOWHERE)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A small system config on a preset, with extra `[machine]` TOML after the preset line.
fn system_text(preset: &str, machine_extra: &str) -> String {
    format!(
        r#"[machine]
preset = "{preset}"
{machine_extra}
[memory]
ram = "64MiB"

[[processes]]
name = "p"
[[processes.threads]]
workload = {{ seed = 1, phases = [{{ pattern = "uniform", footprint = "512KiB", references = 20000 }}] }}
"#
    )
}

#[test]
fn every_preset_builds_a_valid_hierarchy_timing_tlbs_and_page_tables() {
    assert_eq!(PRESETS.len(), 7);
    for p in PRESETS {
        let doc = toml_value(p.toml).unwrap();
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["machine"],
            "{}: the file is one [machine] table",
            p.name
        );
        let m = config(p.name);
        assert!(m.chips >= 1, "{}", p.name);
        let h = Hierarchy::new(&m.hierarchy).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let levels = h.config().levels.len();
        Timing::new(&m.timing, levels).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        AddressSpace::validate(&m.mmu).unwrap();
        for t in [&m.tlb.l1d, &m.tlb.l1i, &m.tlb.l2] {
            Tlb::new(t).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
        assert_eq!(h.config().page_size.0, 4096, "{}: 4 KiB pages", p.name);
        assert!(
            h.config()
                .levels
                .iter()
                .all(|l| l.policy == crate::cache::ReplacementKind::Lru),
            "{}: LRU everywhere",
            p.name
        );
    }
}

#[test]
fn every_preset_cites_its_paper_and_marks_vendor_figures() {
    for p in PRESETS {
        let first = p.toml.lines().next().unwrap();
        assert!(first.starts_with("# "), "{}: starts with its title", p.name);
        // By title and venue (a user has no papers/ directory), never by a development path.
        let header: String = p.toml.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            header.contains('"') && (header.contains("20") && !p.toml.contains("papers/")),
            "{}: cites its paper by title and year, not by a file of the repository",
            p.name
        );
        assert!(
            p.toml.contains("vendor documentation"),
            "{}: says which numbers are the vendor's",
            p.name
        );
    }
}

#[test]
fn every_preset_runs_a_system_with_all_its_chips() {
    for p in PRESETS {
        let cfg = system_config_from_toml(&system_text(p.name, ""))
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let mut s = System::new(&cfg).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        s.run().unwrap();
        let r = s.report();
        assert!(r.invariants.is_empty(), "{}: {:?}", p.name, r.invariants);
        assert_eq!(r.processes[0].instructions, 20_000, "{}", p.name);
        assert_eq!(r.chips, cfg.machine.chips as usize, "{}", p.name);
        assert_eq!(
            r.cores.len(),
            (cfg.machine.chips * cfg.machine.hierarchy.cores) as usize,
            "{}",
            p.name
        );
    }
}

/// The numbers each paper states, checked against the preset built from it.
#[test]
fn presets_encode_their_papers_numbers() {
    let llc = |m: &MachineConfig| m.hierarchy.levels.last().unwrap().clone();
    let level = |m: &MachineConfig, name: &str| {
        m.hierarchy
            .levels
            .iter()
            .find(|l| l.name == name)
            .unwrap()
            .clone()
    };
    let summary = |name: &str| summarize(name, "", &config(name)).unwrap();

    // ROCS Table 1 and section 2.1 (Figure 1: 512 L2 sets, 16 colors); section 6: 2 chips.
    let m = config("ppc970fx");
    assert_eq!(
        (m.chips, m.hierarchy.cores, m.hierarchy.line_size),
        (2, 1, 128)
    );
    assert_eq!(
        (level(&m, "L1I").size.0, level(&m, "L1I").ways),
        (64 << 10, 1)
    );
    assert_eq!(
        (level(&m, "L1D").size.0, level(&m, "L1D").ways),
        (32 << 10, 2)
    );
    assert_eq!((llc(&m).size.0, llc(&m).ways), (512 << 10, 8));
    assert_eq!(
        (m.timing.level_latency.clone(), m.timing.dram_latency),
        (vec![1, 2, 12], 300)
    );
    assert_eq!(summary("ppc970fx").llc_colors, 16);

    // Azimi sections 4.2-5.3: 2 chips x 2 cores; L2 1.875 MB and L3 36 MB per chip, each
    // partitioned 16 ways by color: 1/16 is 120 kB of L2 and 2.25 MB of L3.
    let m = config("power5");
    assert_eq!((m.chips, m.hierarchy.cores), (2, 2));
    assert_eq!(level(&m, "L2").size.0 / 16, 120 << 10);
    assert_eq!(llc(&m).size.0 / 16, 2304 << 10);
    let s = summary("power5");
    assert_eq!(s.levels.iter().find(|l| l.name == "L2").unwrap().colors, 16);
    assert_eq!(
        s.llc_colors % 16,
        0,
        "an L2 color is a whole number of L3 colors"
    );

    // COLORIS section 4: 4 cores share a 4 MB 16-way L3, 64 colors with 4 KB pages.
    let m = config("xeon-e5506");
    assert_eq!((m.chips, m.hierarchy.cores), (1, 4));
    assert_eq!((llc(&m).size.0, llc(&m).ways), (4 << 20, 16));
    assert_eq!(summary("xeon-e5506").llc_colors, 64);

    // COLORIS section 4.5: dual core, two 1.5 MB 12-way L3 slices.
    let m = config("core-i3-2100");
    assert_eq!(m.hierarchy.cores, 2);
    let l3 = llc(&m);
    assert_eq!(
        (l3.size.0 / l3.slices as u64, l3.ways, l3.slices),
        (1536 << 10, 12, 2)
    );
    assert_eq!(
        summary("core-i3-2100").llc_colors,
        32,
        "1.5 MiB / (12 x 4 KiB)"
    );

    // Thesis Table 4.1 (AMD column), section 4.1 latencies, section 3.4 TLB entries.
    let m = config("opteron-2427");
    assert_eq!(m.hierarchy.cores, 6);
    assert_eq!(level(&m, "L1D").size.0, 64 << 10);
    assert_eq!(
        (level(&m, "L2").size.0, level(&m, "L2").ways),
        (512 << 10, 16)
    );
    assert_eq!((llc(&m).size.0, llc(&m).ways), (6 << 20, 48));
    assert_eq!(m.timing.level_latency[1..], [3, 18, 43]);
    assert_eq!(m.timing.dram_latency, 135);
    assert_eq!(m.tlb.l2.entries, 1024);

    // Thesis Table 4.1 (Power 7 column): TLB coverage 32 MB of 64 kB pages = 512 entries.
    let m = config("power7-740");
    assert_eq!(
        (level(&m, "L1D").size.0, level(&m, "L1D").ways),
        (32 << 10, 8)
    );
    assert_eq!(
        (level(&m, "L2").size.0, level(&m, "L2").ways),
        (256 << 10, 8)
    );
    assert_eq!((llc(&m).size.0, llc(&m).ways), (4 << 20, 8));
    assert_eq!(m.tlb.l2.entries as u64 * (64 << 10), 32 << 20);

    // Thesis Table 4.1 (Intel column).
    let m = config("core-i7-720qm");
    assert_eq!(
        (level(&m, "L1D").size.0, level(&m, "L1D").ways),
        (32 << 10, 8)
    );
    assert_eq!(
        (level(&m, "L2").size.0, level(&m, "L2").ways),
        (256 << 10, 8)
    );
    assert_eq!((llc(&m).size.0, llc(&m).ways), (6 << 20, 12));
}

#[test]
fn the_power7_page_size_of_the_thesis_is_one_override_away() {
    // Thesis Table 4.1: 64 kB default pages on POWER7; 4 MiB / (8 x 64 KiB) = 8 colors.
    let cfg = system_config_from_toml(&system_text(
        "power7-740",
        "[machine.hierarchy]\npage_size = \"64KiB\"",
    ))
    .unwrap();
    let s = summarize("power7-740", "", &cfg.machine).unwrap();
    assert_eq!(s.llc_colors, 8);
    assert_eq!(s.levels.len(), 4, "the preset's levels are kept");
    let mut sys = System::new(&cfg).unwrap();
    sys.run().unwrap();
    assert!(sys.report().invariants.is_empty());
}

#[test]
fn config_keys_override_the_preset_tables_merge_and_arrays_replace() {
    let base = config("xeon-e5506");
    let cfg = system_config_from_toml(&system_text(
        "xeon-e5506",
        "chips = 1\n[machine.hierarchy]\ncores = 2\n[machine.timing]\ndram_latency = 500\nmlp = 4",
    ))
    .unwrap();
    let m = &cfg.machine;
    assert_eq!(m.hierarchy.cores, 2, "overridden");
    assert_eq!(
        m.hierarchy.levels, base.hierarchy.levels,
        "merged table keeps the rest"
    );
    assert_eq!(m.hierarchy.inclusion, base.hierarchy.inclusion);
    assert_eq!((m.timing.dram_latency, m.timing.mlp), (500, 4.0));
    assert_eq!(m.timing.level_latency, base.timing.level_latency);
    assert_eq!(m.tlb, base.tlb);

    // An array (the levels) replaces the preset's whole.
    let cfg = system_config_from_toml(&system_text(
        "xeon-e5506",
        "[[machine.hierarchy.levels]]\nname = \"LLC\"\nsize = \"1MiB\"\nways = 16\n[machine.timing]\nlevel_latency = [40]",
    ))
    .unwrap();
    assert_eq!(cfg.machine.hierarchy.levels.len(), 1);
    assert_eq!(cfg.machine.hierarchy.levels[0].name, "LLC");
    assert_eq!(
        cfg.machine.hierarchy.cores, 4,
        "the preset's other hierarchy keys stay"
    );
    System::new(&cfg).unwrap();
}

#[test]
fn merge_is_deep_for_tables_only() {
    let mut a = serde_json::json!({"t": {"x": 1, "y": {"z": 2, "w": 3}}, "arr": [1, 2], "s": "a"});
    merge(
        &mut a,
        serde_json::json!({"t": {"y": {"z": 9}, "n": true}, "arr": [7], "s": {"now": "table"}}),
    );
    assert_eq!(
        a,
        serde_json::json!({"t": {"x": 1, "y": {"z": 9, "w": 3}, "n": true}, "arr": [7], "s": {"now": "table"}})
    );
}

#[test]
fn configs_without_a_preset_parse_exactly_as_before() {
    for text in [
        include_str!("../../../../../examples/os/colors-disjoint.toml"),
        include_str!("../../../../../examples/os/pagewalk-stream.toml"),
        include_str!("../../../../../examples/os/placement-random.toml"),
    ] {
        let old: SystemConfig = crate::config::from_toml(text).unwrap();
        assert_eq!(system_config_from_toml(text).unwrap(), old);
        let json = serde_json::to_string(&old).unwrap();
        assert_eq!(system_config_from_json(&json).unwrap(), old);
    }
}

#[test]
fn json_and_toml_resolve_the_same_way() {
    let text = system_text("core-i3-2100", "[machine.timing]\nmlp = 2");
    let from_toml = system_config_from_toml(&text).unwrap();
    let doc = toml_value(&text).unwrap();
    let from_json = system_config_from_json(&doc.to_string()).unwrap();
    assert_eq!(from_toml, from_json);
}

#[test]
fn unknown_presets_list_the_valid_names() {
    let e = system_config_from_toml(&system_text("xeon-5506", "")).unwrap_err();
    assert_eq!(e.field, "machine.preset");
    assert!(
        e.message.contains("`xeon-5506` is not a machine preset"),
        "{e}"
    );
    for name in names() {
        assert!(e.message.contains(name), "{name} missing from: {e}");
    }
    let e =
        system_config_from_toml("[machine]\npreset = 3\n[[processes]]\nname = \"p\"\nthreads = []")
            .unwrap_err();
    assert_eq!(e.field, "machine.preset");
    assert!(e.message.contains("give a string"), "{e}");
    assert!(machine_toml("nope", Path::new(NOWHERE))
        .unwrap_err()
        .message
        .contains("power5"));
}

#[test]
fn errors_keep_their_field_paths_through_a_preset() {
    let e = system_config_from_toml(&system_text("power5", "[machine.timing]\nmlp = \"fast\""))
        .unwrap_err();
    assert_eq!(e.field, "machine.timing.mlp", "{e}");
    let e = system_config_from_toml(&system_text("power5", "[machine.hierarchy]\ncolour = 1"))
        .unwrap_err();
    assert_eq!(e.field, "machine.hierarchy.colour", "{e}");
    assert!(e.message.contains("unknown field `colour`"), "{e}");
    let e = system_config_from_toml(&system_text(
        "power5",
        "[[machine.hierarchy.levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = \"eight\"",
    ))
    .unwrap_err();
    assert_eq!(e.field, "machine.hierarchy.levels[0].ways", "{e}");
    let e = system_config_from_toml("[machine]\npreset = \"power5\"\nchips = = 2\n").unwrap_err();
    assert!(e.message.starts_with("line 3, column"), "{e}");
}

#[test]
fn detect_resolves_from_sysfs_and_says_why_it_cannot() {
    let s = FakeSysfs::new("resolve");
    s.write("online", "0-1");
    s.cpu(0, 0, 0);
    s.cpu(1, 0, 1);
    s.cache(0, 0, 1, "Data", "32K", 8, 64, "0");
    s.cache(0, 1, 1, "Instruction", "32K", 8, 64, "0");
    s.cache(0, 2, 2, "Unified", "1M", 16, 1024, "0");
    s.cache(0, 3, 3, "Unified", "12M", 12, 16384, "0-1");
    let mut doc = toml_value(&system_text(
        "detect",
        "[machine.timing]\ndram_latency = 250",
    ))
    .unwrap();
    resolve_with_sysfs(&mut doc, &s.0).unwrap();
    let cfg: SystemConfig = deserialize(doc).unwrap();
    assert_eq!((cfg.machine.chips, cfg.machine.hierarchy.cores), (1, 2));
    assert_eq!(cfg.machine.hierarchy.levels.len(), 4);
    assert_eq!(cfg.machine.timing.dram_latency, 250);
    let mut sys = System::new(&cfg).unwrap();
    sys.run().unwrap();
    assert!(sys.report().invariants.is_empty());
    let summary = summarize("detect", "", &cfg.machine).unwrap();
    assert_eq!(
        summary.llc_colors,
        (12 << 20) / (12 * 4096),
        "12 MiB / (12 x 4 KiB)"
    );

    let mut doc = toml_value(&system_text("detect", "")).unwrap();
    let e = resolve_with_sysfs(&mut doc, Path::new(NOWHERE)).unwrap_err();
    assert_eq!(e.field, "machine.preset");
    assert!(e.message.contains("could not describe this host"), "{e}");
    assert!(e.message.contains(NOWHERE), "{e}");
    assert!(
        e.message.contains("xeon-e5506"),
        "names the presets to use instead: {e}"
    );
}

#[test]
fn summaries_cover_every_preset() {
    let all = summaries().unwrap();
    assert_eq!(
        all.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        PRESETS.iter().map(|p| p.name).collect::<Vec<_>>()
    );
    for s in &all {
        let last = s.levels.last().unwrap();
        let sets_per_slice =
            last.size / (last.ways as u64 * s.line_size as u64) / last.slices as u64;
        assert_eq!(
            s.llc_colors,
            (sets_per_slice * s.line_size as u64 / s.page_size).max(1)
        );
    }
}
