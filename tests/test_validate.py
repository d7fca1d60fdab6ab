"""`cachecolor calibrate` and `cachecolor validate`: the plumbing on a tiny set, the pure parts
against independent computations, and the bad-input cases (docs/validation.md).

No test asserts anything about the measured error or any wall-clock figure: the machine is
shared and the figures live in docs/validation.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from cachecolor import _compat, calibrate as cal, validate as val
from conftest import assert_one_line_error, needs_cc, needs_qemu


def fake_doc(cpu: str | None = None, llc_effective: int | None = None) -> dict:
    """A calibration document as `calibrate` returns it, with invented measurements (no chase)."""
    from cachecolor import presets

    detected = presets.machine("detect")
    data = [lv for lv in detected["hierarchy"]["levels"] if lv.get("serves", "unified") != "instruction"]
    ns = [1.9, 5.5, 30.0, 60.0][: len(data)]
    doc = {
        "host": {"cpu": cpu or cal.host_cpu(), "loadavg_before": "[1]", "loadavg_after": "[1]"},
        "ghz": 2.0, "ghz_source": "cpuinfo", "pmu": "hardware events: none", "started": "t0", "finished": "t1",
        "latency": {lv["name"]: {"ns": x, "working_set_bytes": 1 << 14, "ci95": 0.1} for lv, x in zip(data, ns)},
        "dram": {"ns": 100.0, "working_set_bytes": 256 << 20},
        "fault": {"ns_per_fault": 500.0},
        "bandwidth": [{"cores": 1, "gbps": 5.0}],
    }
    if llc_effective:
        doc["capacity"] = {data[-1]["name"]: {"effective_bytes": llc_effective, "sysfs_bytes": cal._parse_size(data[-1]["size"])}}
    doc["machine"] = cal.calibrated_machine(doc, detected)
    return doc


def write_machine(tmp_path: Path, doc: dict, name: str = "machine.toml") -> Path:
    p = tmp_path / name
    p.write_text(cal.calibrated_toml(doc))
    return p


def test_calibrated_machine_turns_ns_into_cycles_and_names_every_source(tmp_path):
    doc = fake_doc()
    table = doc["machine"]["table"]
    t = table["timing"]
    # cycles = round(ns x GHz), by hand: 1.9 x 2 = 3.8 -> 4, DRAM 100 x 2 = 200, faults 500 x 2.
    assert t["dram_latency"] == 200
    assert t["fault_cycles"] == 1000
    # The measured first touch holds the real clear: the model does not charge its own on top.
    assert t["fault_cycles_include_clear"] is True
    data = [lv["name"] for lv in table["hierarchy"]["levels"] if lv.get("serves", "unified") != "instruction"]
    by_name = dict(zip([lv["name"] for lv in table["hierarchy"]["levels"]], t["level_latency"]))
    assert by_name[data[0]] == 4
    assert all(b >= a for a, b in zip(t["level_latency"], t["level_latency"][1:]))
    assert table["memory"]["core_ghz"] == 2.0
    text = cal.calibrated_toml(doc)
    parsed = _compat.tomllib.loads(text)["machine"]
    assert parsed["timing"]["level_latency"] == t["level_latency"]
    for key in ("level_latency", "dram_latency", "fault_cycles", "base_cpi", "mlp"):
        line = next(line for line in text.splitlines() if line.startswith(f"{key} ="))
        assert "# measured" in line or "# default" in line, line
    assert cal.calibrated_host(text) == cal.host_cpu()
    assert cal.calibrated_host("[machine]\n") is None


def test_effective_llc_from_the_capacity_scan_replaces_sysfs_size_with_its_source():
    doc = fake_doc(llc_effective=16 << 20)
    levels = doc["machine"]["table"]["hierarchy"]["levels"]
    llc = [lv for lv in levels if lv.get("serves", "unified") != "instruction"][-1]
    unit = llc["ways"] * 4096  # whole sets of whole pages (16 MiB itself on a 16-way LLC)
    assert cal._parse_size(llc["size"]) == (16 << 20) // unit * unit
    text = cal.calibrated_toml(doc)
    assert "latency knee of a capacity scan" in text


def test_calibrate_rounds_a_capacity_knee_to_whole_sets_of_a_20_way_llc():
    """Bug (CI on a KVM guest whose sysfs gives a 300 MiB, 20-way L3): the capacity scan's knee at
    32 MiB was written as the L3's size, 32 MiB / (20 ways x 64 B) is no whole number of sets,
    and `simulate` refused the calibrated config. The size is rounded down to whole sets of
    whole pages."""
    from cachecolor import presets

    detected = presets.machine("detect")
    detected["hierarchy"]["levels"] = [lv for lv in detected["hierarchy"]["levels"] if lv["name"] != "L3"] + [
        {"name": "L3", "size": "300MiB", "ways": 20, "serves": "unified", "shared": True}]
    doc = {"ghz": 2.0, "ghz_source": "cpuinfo",
           "latency": {lv["name"]: {"ns": 2.0 + i, "working_set_bytes": 1 << 14}
                       for i, lv in enumerate(detected["hierarchy"]["levels"]) if lv.get("serves") != "instruction"},
           "dram": {"ns": 100.0, "working_set_bytes": 256 << 20}, "fault": {"ns_per_fault": 500.0},
           "capacity": {"L3": {"effective_bytes": 32 << 20, "sysfs_bytes": 300 << 20}}}
    made = cal.calibrated_machine(doc, detected)
    table = made["table"]
    size = cal._parse_size(next(lv for lv in table["hierarchy"]["levels"] if lv["name"] == "L3")["size"])
    assert size % (20 * 4096) == 0 and (32 << 20) - 20 * 4096 < size <= 32 << 20, size
    assert size == 409 * 20 * 4096  # floor(32 MiB / 80 KiB) whole sets of whole pages
    presets.machine_hierarchy(table)  # the geometry loads (it raised ConfigError before)
    assert "32,768 KiB rounded down to whole sets of whole pages" in made["sources"]["hierarchy.L3.size"]


def test_calibrated_config_runs_in_simulate(tmp_path, run_cli, native_trace):
    cfg = write_machine(tmp_path, fake_doc())
    out = run_cli("simulate", cfg, "--trace", native_trace)
    assert out.returncode == 0, out.stderr
    # A system config built on it: the run's output says where its timing was validated.
    m = _compat.tomllib.loads(cfg.read_text())["machine"]
    sysdoc = val.system_config(m, [("p", native_trace, 0)])
    sys_cfg = tmp_path / "system.json"
    sys_cfg.write_text(json.dumps(sysdoc))
    out = run_cli("simulate", sys_cfg, "-q")
    assert out.returncode == 0, out.stderr
    assert "timing: not validated against hardware" in out.stdout


def test_validation_note_names_preset_detect_and_calibrated():
    assert "paper's machine" in val.validation_note({"machine": {"preset": "xeon-e5506"}})
    assert "not measured" in val.validation_note({"machine": {"preset": "detect"}})
    text = cal.calibrated_toml(fake_doc())
    assert "calibrated on" in val.validation_note({"machine": {}}, text)
    other = cal.calibrated_toml(fake_doc(cpu="Some Other CPU 9000"))
    assert "not this host" in val.validation_note({"machine": {}}, other)


def test_spearman_against_a_brute_force_formula():
    a = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6]
    b = [2.0, 7.0, 1.0, 8.0, 2.8, 1.8]
    n = len(a)
    ra = [sorted(a).index(x) + 1 for x in a]
    rb = [sorted(b).index(x) + 1 for x in b]
    d2 = sum((x - y) ** 2 for x, y in zip(ra, rb))
    assert val.spearman(a, b) == pytest.approx(1 - 6 * d2 / (n * (n * n - 1)))
    assert val.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert val.spearman([1, 2], [1, 2]) is None


def test_mean_ci_against_a_hand_computed_interval():
    m, ci = val.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0
    assert ci == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert val.mean_ci([5.0]) == (5.0, None)


def test_linear_reprediction_matches_a_resimulation(tmp_path, native_trace):
    """The grid search's estimate of the cycles under another base_cpi / mlp equals a run of
    the model with them (the queue aside: this trace does not load the controller)."""
    m = fake_doc()["machine"]["table"]
    base = val.simulate(m, [("p", native_trace, 0)])["p"]
    other = json.loads(json.dumps(m))
    other["timing"]["base_cpi"] = 0.4
    other["timing"]["mlp"] = 3.0
    other["timing"]["walk_factor"] = 2.5
    rerun = val.simulate(other, [("p", native_trace, 0)])["p"]
    est = val.predicted_cycles(base, 0.4, 3.0, 1.0, 1.0, 2.5, 1.0)
    assert est == pytest.approx(rerun["cycles"], rel=2e-3)
    assert base["stalls"]["tlb"] > 0 and rerun["stalls"]["tlb"] == pytest.approx(2.5 * base["stalls"]["tlb"], rel=1e-3)


def test_choose_parameters_finds_the_generating_ones():
    """Programs whose 'measured' times were made by the linear model with base_cpi 0.6, mlp 2
    and walk_factor 3: the grid search finds exactly those."""
    rows = []
    for comp, over, walks in [(1e6, 0.0, 0.0), (1e6, 4e6, 1e5), (2e5, 9e6, 0.0), (5e6, 1e5, 3e6), (1e6, 0.0, 2e6)]:
        sim = {"cycles": comp + over + walks, "stalls": {"dram": over, "tlb": walks}}
        rows.append({"sim": sim, "measured_s": val.predicted_cycles(sim, 0.6, 2.0, 1.0, 1.0, 3.0) / 1e9})
    chosen = val.choose_parameters(rows, 1.0, 1.0, 1.0)
    assert (chosen["base_cpi"], chosen["mlp"], chosen["walk_factor"]) == (0.6, 2.0, 3.0)
    assert chosen["train_mae_estimate"] == pytest.approx(0.0, abs=1e-9)


@needs_cc
def test_a_program_failing_natively_is_reported_and_skipped(tmp_path):
    cfg = write_machine(tmp_path, fake_doc())
    bad = val.Program("no-such", "no-such-kernel", 0, 1)
    doc = val.validate(str(cfg), programs=[bad], runs=1, work=tmp_path / "w", effects=False)
    assert doc["programs"] == []
    assert doc["skipped"][0]["name"] == "no-such" and doc["skipped"][0]["stage"] == "native"
    assert "unknown kernel" in doc["skipped"][0]["reason"]


@needs_cc
@needs_qemu
def test_validate_tiny_set_end_to_end(tmp_path, run_cli):
    cfg = write_machine(tmp_path, fake_doc())
    out = run_cli("validate", cfg, "--tiny", "--runs", "2", "--no-effects", "--work", tmp_path / "w",
                  "--json", tmp_path / "v.json", "--plot", tmp_path / "v.png", "--write-config", tmp_path / "tuned.toml",
                  timeout=600)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "v.json").read_text())
    names = [r["name"] for r in doc["programs"]]
    assert names == [p.name for p in val.TINY]
    for r in doc["programs"]:
        assert r["measured_s"] > 0 and len(r["native_runs"]) == 2
        assert r["records"] > 0 and r["predicted_s"] > 0
        assert r["error"] == pytest.approx((r["predicted_s"] - r["measured_s"]) / r["measured_s"])
    assert [r["half"] for r in doc["programs"]] == ["train", "held-out", "train", "held-out"]
    fit = doc["fit"]
    assert fit["train"]["programs"] == 2 and fit["held_out"]["programs"] == 2
    assert fit["held_out"]["mae"] == pytest.approx(
        sum(abs(r["error_tuned"]) for r in doc["programs"] if r["half"] == "held-out") / 2)
    assert "PMU" in out.stdout and "held-out half" in out.stdout
    tuned = _compat.tomllib.loads((tmp_path / "tuned.toml").read_text())["machine"]["timing"]
    assert (tuned["base_cpi"], tuned["mlp"]) == (fit["base_cpi"], fit["mlp"])
    assert tuned["walk_factor"] == fit["walk_factor"]
    assert (tmp_path / "v.png").stat().st_size > 0


def test_validate_bad_inputs(tmp_path, run_cli):
    missing = run_cli("validate", tmp_path / "none.toml", "--tiny")
    assert "cannot read" in assert_one_line_error(missing)
    system = tmp_path / "system.toml"
    system.write_text('[machine]\npreset = "xeon-e5506"\n[[processes]]\nname = "p"\n')
    assert "[[processes]]" in assert_one_line_error(run_cli("validate", system, "--tiny"))
    no_clock = tmp_path / "noclock.toml"
    no_clock.write_text("[machine.timing]\nlevel_latency = [4]\ndram_latency = 100\n")
    assert "core_ghz" in assert_one_line_error(run_cli("validate", no_clock, "--tiny"))
    cfg = write_machine(tmp_path, fake_doc())
    assert "unknown nope" in assert_one_line_error(run_cli("validate", cfg, "--programs", "nope"))
    assert "--runs" in assert_one_line_error(run_cli("validate", cfg, "--runs", "0"))
    assert "not both" in assert_one_line_error(run_cli("validate", cfg, "--tiny", "--programs", "compute"))
    assert "--trials" in assert_one_line_error(run_cli("calibrate", "--trials", "0"))
    assert "--duration-ms" in assert_one_line_error(run_cli("calibrate", "--duration-ms", "0"))


def test_config_from_another_cpu_warns(tmp_path):
    other = write_machine(tmp_path, fake_doc(cpu="Some Other CPU 9000"))
    warning = val.host_warning(other.read_text(), str(other))
    assert warning is not None and "Some Other CPU 9000" in warning and cal.host_cpu() in warning
    assert val.host_warning(cal.calibrated_toml(fake_doc()), "m.toml") is None
    assert "not written by `cachecolor calibrate`" in val.host_warning("[machine]\n", "m.toml")


def test_calibrate_measures_and_writes_a_config_simulate_accepts(tmp_path, run_cli, native_trace):
    """The real measurement, as short as it goes: every documented field present, the config
    accepted by simulate. (No assertion on the figures: the machine is shared.)"""
    out = run_cli("calibrate", "--trials", "1", "--duration-ms", "1", "--dram-bytes", "64MiB", "--no-bandwidth",
                  "-o", tmp_path / "m.toml", "--json", tmp_path / "m.json", "-q", timeout=600)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    for key in ("latency", "dram", "dram_4k", "page_walk_ns", "fault", "ghz", "ghz_source", "pmu", "machine"):
        assert key in doc, key
    assert all(p["ns"] > 0 for p in doc["latency"].values())
    text = (tmp_path / "m.toml").read_text()
    assert cal.calibrated_host(text) == cal.host_cpu()
    assert run_cli("simulate", tmp_path / "m.toml", "--trace", native_trace, "-q").returncode == 0


def test_report_names_where_each_configs_timing_was_validated(tmp_path, examples):
    from cachecolor.reports.base import Run, timing_notes

    cfg = tmp_path / "cal.toml"
    cfg.write_text(cal.calibrated_toml(fake_doc()))
    runs = [Run(str(examples / "os" / "colors-disjoint.toml"), "linux", 1, None),
            Run(str(cfg), "linux", 1, None), Run(str(cfg), "static", 1, None)]
    notes = timing_notes(runs)
    assert len(notes) == 2
    assert notes[0].startswith("colors-disjoint: timing: ") and "not validated against hardware" in notes[0]
    assert notes[1].startswith("cal: timing: calibrated on ")
