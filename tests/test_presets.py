"""Machine presets from Python and the CLI: ``presets.machine``, ``[machine] preset = NAME`` in a
system config, ``cachecolor machine``, ``detect`` against a fake sysfs tree, and the docs' preset
table against the presets themselves. (Each preset's paper numbers are checked in Rust:
crates/sim/src/system/presets/tests.rs.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import cachecolor
from cachecolor import presets

PRESETS = ["ppc970fx", "power5", "xeon-e5506", "core-i3-2100", "opteron-2427", "power7-740", "core-i7-720qm"]

SYSTEM = """
[memory]
ram = "64MiB"

[[processes]]
name = "p"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "512KiB", references = 20000 }] }
"""


def fake_sysfs(root: Path, llc_shared: str = "0-3") -> Path:
    """A sysfs CPU directory: one package, 4 cores without SMT, L1D/L1I/L2 per core, a shared L3."""
    cpu = root / "cpu"

    def write(rel: str, text: str) -> None:
        p = cpu / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")

    write("online", "0-3")
    for c in range(4):
        write(f"cpu{c}/topology/physical_package_id", "0")
        write(f"cpu{c}/topology/core_id", str(c))
    caches = [(1, "Data", "32K", 8, "0"), (1, "Instruction", "32K", 8, "0"), (2, "Unified", "512K", 8, "0"), (3, "Unified", "8192K", 16, llc_shared)]
    for i, (level, kind, size, ways, shared) in enumerate(caches):
        d = f"cpu0/cache/index{i}"
        for name, value in [("level", level), ("type", kind), ("size", size), ("ways_of_associativity", ways), ("coherency_line_size", 64), ("shared_cpu_list", shared)]:
            write(f"{d}/{name}", str(value))
    return cpu


def test_machine_names_are_the_presets_then_detect():
    assert presets.machine_names() == PRESETS + ["detect"]


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_is_a_machine_table_that_matches_its_toml(name):
    m = presets.machine(name)
    assert set(m) >= {"chips", "hierarchy", "tlb", "mmu", "timing"}
    assert len(m["timing"]["level_latency"]) == len(m["hierarchy"]["levels"])
    text = presets.machine_toml(name)
    assert text.startswith("# ")
    assert tomllib.loads(text)["machine"] == m


def test_unknown_machine_names_list_the_valid_ones():
    with pytest.raises(cachecolor.ConfigError) as e:
        presets.machine("xeon")
    for name in PRESETS + ["detect"]:
        assert name in str(e.value)


def test_a_system_config_names_a_preset_and_overrides_keys():
    base = presets.machine("xeon-e5506")
    config = tomllib.loads('[machine]\npreset = "xeon-e5506"\n[machine.timing]\ndram_latency = 400\n' + SYSTEM)
    r = cachecolor.simulate_system(config).to_dict()
    assert r["invariants"] == []
    machine = r["config"]["machine"]  # the effective config: the preset expanded
    assert machine["timing"]["dram_latency"] == 400
    assert machine["timing"]["level_latency"] == base["timing"]["level_latency"]
    assert [lv["name"] for lv in machine["hierarchy"]["levels"]] == ["L1I", "L1D", "L2", "L3"]
    assert machine["hierarchy"]["cores"] == 4
    # The CLI's --seed writes machine.hierarchy.seed: merged into the preset, not replacing it.
    r2 = cachecolor.simulate_system(config, seed=5).to_dict()
    assert r2["config"]["machine"]["hierarchy"]["seed"] == 5
    assert len(r2["config"]["machine"]["hierarchy"]["levels"]) == 4


def test_preset_errors_name_the_field():
    config = tomllib.loads('[machine]\npreset = "xeon-e5506"\n[machine.timing]\nmlp = "fast"\n' + SYSTEM)
    with pytest.raises(cachecolor.ConfigError) as e:
        cachecolor.simulate_system(config)
    assert e.value.field == "machine.timing.mlp"
    config["machine"] = {"preset": "pentium"}
    with pytest.raises(cachecolor.ConfigError) as e:
        cachecolor.simulate_system(config)
    assert e.value.field == "machine.preset"
    assert "core-i7-720qm" in str(e.value)


def test_detect_reads_a_sysfs_tree(tmp_path):
    cpu = fake_sysfs(tmp_path)
    m = presets.machine("detect", cpu_dir=cpu)
    assert m["chips"] == 1 and m["hierarchy"]["cores"] == 4
    assert [lv["name"] for lv in m["hierarchy"]["levels"]] == ["L1I", "L1D", "L2", "L3"]
    assert [lv["shared"] for lv in m["hierarchy"]["levels"]] == [False, False, False, True]
    (summary,) = presets.machine_summaries("detect", cpu_dir=cpu)
    assert summary["llc_colors"] == (8 << 20) // (16 * 4096)
    assert "typical recent x86" in presets.machine_toml("detect", cpu_dir=cpu)


def test_detect_without_sysfs_is_a_config_error_naming_the_directory(tmp_path):
    with pytest.raises(cachecolor.ConfigError) as e:
        presets.machine("detect", cpu_dir=tmp_path / "missing")
    assert str(tmp_path / "missing") in str(e.value)


def test_cli_prints_a_preset_that_starts_a_system_config(run_cli, tmp_path):
    r = run_cli("machine", "xeon-e5506")
    assert r.returncode == 0, r.stderr
    assert "COLORIS section 4" in r.stdout, "the sources stay in the printed TOML"
    config = tmp_path / "system.toml"
    config.write_text(r.stdout + SYSTEM)
    run = run_cli("simulate", str(config), "-q")
    assert run.returncode == 0, run.stderr
    assert "IPC" in run.stdout


def test_cli_lists_the_presets(run_cli):
    r = run_cli("machine", "--list", "-q")
    assert r.returncode == 0, r.stderr
    for name in PRESETS + ["detect"]:
        assert re.search(rf"^{re.escape(name)}\s", r.stdout, re.M), name
    assert re.search(r"^xeon-e5506\s.*\b1 x 4\b.*\b4 MiB 16-way\b.*\b64$", r.stdout, re.M), r.stdout
    assert "1.5 MiB" in r.stdout and "32 per slice" in r.stdout  # the i3-2100's two L3 slices


def test_cli_detect_with_a_fake_sysfs(run_cli, tmp_path):
    cpu = fake_sysfs(tmp_path, llc_shared="0-1")  # an L3 per core pair: two "chips" of 2 cores
    r = run_cli("machine", "--detect", "--sysfs", str(cpu))
    assert r.returncode == 0, r.stderr
    m = tomllib.loads(r.stdout)["machine"]
    assert (m["chips"], m["hierarchy"]["cores"]) == (2, 2)
    assert "remote_latency" in m["timing"], "two chips: a remote latency is given"


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["machine"], 2, "give a preset NAME, --detect or --list; the presets are: ppc970fx"),
        (["machine", "xeon"], 2, "`xeon` is not a machine preset; the presets are: ppc970fx"),
        (["machine", "power5", "--detect"], 2, "not both"),
        (["machine", "power5", "--sysfs", "/tmp"], 2, "--sysfs applies to --detect only"),
        (["machine", "--list", "power5"], 2, "--list takes no NAME"),
        # A --sysfs path the user gave that describes no CPU is bad input (exit 2; it was 1).
        (["machine", "--detect", "--sysfs", "/nonexistent/cachecolor"], 2, "--sysfs /nonexistent/cachecolor: cannot read /nonexistent/cachecolor"),
    ],
)
def test_cli_machine_errors(run_cli, args, code, message):
    r = run_cli(*args)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert message in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_docs_table_matches_the_presets(repo):
    """docs/system.md's preset table states chips x cores and LLC colors: they must be the presets'."""
    text = (repo / "docs" / "system.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`([a-z0-9-]+)`\s*\|", line)
        if m and m.group(1) in PRESETS:
            rows[m.group(1)] = [c.strip() for c in line.strip().strip("|").split("|")]
    assert sorted(rows) == sorted(PRESETS)
    for s in presets.machine_summaries():
        cells = rows[s["name"]]
        assert f"{s['chips']} × {s['cores']}" in cells, (s["name"], cells)
        assert cells[-1].split()[0] == str(s["llc_colors"]), (s["name"], cells)
