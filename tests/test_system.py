"""Whole-system runs from Python and the CLI (the scenario checks themselves are Rust tests in
crates/sim/src/system/tests.rs; here: the API, the JSON contract and error handling)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor

ROOT = Path(__file__).resolve().parent.parent
OS = ROOT / "examples" / "os"


def test_api_runs_a_system_and_reports_per_process():
    r = cachecolor.simulate_system(OS / "placement-contiguous.toml")
    assert r.invariants == []
    p = r.process("uniform")
    assert p["instructions"] == 800_000
    assert 0 < p["ipc"] < 2
    assert p["faults"] == 256  # 1 MiB of 4 KiB pages, each faulted once
    frame = r.processes
    assert list(frame["name"]) == ["uniform"]
    assert abs(frame["cycles"][0] - sum(frame[c][0] for c in frame.columns if c.startswith("stall_"))) < 1e-3


def test_seed_and_policy_overrides_are_deterministic():
    a = cachecolor.simulate_system(OS / "placement-random.toml", seed=9).to_dict()
    b = cachecolor.simulate_system(OS / "placement-random.toml", seed=9).to_dict()
    c = cachecolor.simulate_system(OS / "placement-random.toml", seed=10).to_dict()
    assert a == b
    assert a["processes"] != c["processes"]
    s = cachecolor.simulate_system(OS / "placement-random.toml", policy="static")
    assert s.to_dict()["policy"] == "static"


def test_cli_writes_the_json_contract(tmp_path):
    out = tmp_path / "r.json"
    run = subprocess.run(
        [sys.executable, "-m", "cachecolor", "simulate", str(OS / "placement-contiguous.toml"), "--json", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "uniform" in run.stdout and "IPC" in run.stdout
    doc = json.loads(out.read_text())
    for key in ("name", "ipc", "llc_mpki", "llc_miss_rate", "tlb_misses", "page_walk_cycles"):
        assert key in doc["processes"][0], key
    assert doc["version"] == cachecolor.__version__
    assert doc["config"]["memory"]["allocator"] == "contiguous"


@pytest.mark.parametrize(
    "edit, message",
    [
        (('name = "linux"', 'name = "rocs2"'), "the policies are: linux, static"),
        (('allocator = "random"', 'allocator = "slab"'), "color-pool"),
        (('ram = "64MiB"', 'ram = "256KiB"'), "out of memory"),
    ],
)
def test_cli_bad_system_configs_exit_2_with_a_named_field(tmp_path, edit, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text((OS / "placement-random.toml").read_text().replace(*edit))
    run = subprocess.run([sys.executable, "-m", "cachecolor", "simulate", str(cfg)], capture_output=True, text=True)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr


def test_two_chips_time_series_and_flat_frames():
    r = cachecolor.simulate_system(OS / "sharing-two-chips.toml")
    assert r.invariants == []
    doc = r.to_dict()
    assert doc["chips"] == 2 and len(doc["cores"]) == 4
    procs = r.processes
    sharers = procs.set_index("name").loc["sharers"]
    assert sharers["remote_accesses"] > 0
    assert sharers["L1D_accesses"] >= sharers["references"]
    assert sharers["kernel_fault_count"] == sharers["faults"]
    assert sharers["stall_remote"] > 0
    cores = r.cores
    assert list(cores["chip"]) == [0, 0, 1, 1]
    iv = r.intervals
    # The time series adds up to each process's totals.
    totals = iv.groupby("process")["instructions"].sum()
    assert totals["sharers"] == sharers["instructions"]
    assert (iv.groupby("process")["time"].diff().dropna() > 0).all()
    assert "remote" in r.table()


def test_presets_run_as_systems_from_python(tmp_path):
    cfg = cachecolor.system.load_system_config(OS / "placement-random.toml")
    cfg["machine"] = {"preset": "xeon-e5506", "timing": {"mlp": 4}}
    r = cachecolor.simulate_system(cfg)
    assert r.invariants == []
    effective = r.to_dict()["config"]["machine"]
    assert effective["hierarchy"]["cores"] == 4 and effective["timing"]["mlp"] == 4


def test_time_series_plots_per_process(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    r = cachecolor.simulate_system(OS / "colors-overlap.toml")
    ax = r.plot_intervals("llc_mpki")
    assert [line.get_label() for line in ax.get_lines()] == ["victim", "stream"]
    assert len(ax.get_lines()[0].get_xdata()) == len(r.to_dict()["intervals"])
    ax.figure.savefig(tmp_path / "mpki.png")
    assert (tmp_path / "mpki.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="allowed ipc"):
        r.plot_intervals("colour")


def test_report_compares_policies_and_keeps_a_policys_tables(tmp_path):
    from cachecolor import reports as report

    out = tmp_path / "rep"
    run = subprocess.run(
        [sys.executable, "-m", "cachecolor", "report", str(OS / "colors-disjoint.toml"),
         "--policy", "linux", "--policy", "static", "--out", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    import pandas as pd

    frame = pd.read_csv(out / "comparison.csv")
    assert sorted(set(frame["policy"])) == ["linux", "static"]
    victim = frame[frame["process"] == "victim"].set_index("policy")
    # Disjoint colors keep the stream out of the victim's lines (COLORIS 4.2).
    assert victim.loc["static", "llc_miss_rate"] < 0.5 * victim.loc["linux", "llc_miss_rate"]
    assert victim.loc["static", "ipc_vs_baseline"] > 1.2
    assert victim.loc["linux", "ipc_vs_baseline"] == 1.0
    assert "comparison" in (out / "report.md").read_text()

    # A policy's registered reporter adds its tables to the report.
    runs = report.run_matrix([OS / "colors-disjoint.toml"], ["linux", "static"])
    report.REPORTERS["static"] = report.PolicyReporter(
        tables=lambda rs: [("static colors (per run)", pd.DataFrame({"runs": [len(rs)]}))]
    )
    try:
        text, written = report.write_report(runs, tmp_path / "rep2")
    finally:
        del report.REPORTERS["static"]
    assert "static colors" in text
    assert pd.read_csv(tmp_path / "rep2" / "static-colors.csv")["runs"][0] == 2


def test_report_keys_rows_by_config_path_and_keeps_finished_runs(tmp_path):
    """Review findings: two configs with one stem, a config named twice and a repeated policy
    still give one baseline per (config, seed, process); a bad policy is named with its config
    before anything runs. (Two processes of one name are now rejected as a config error, issue
    25: test_reliability.py.)"""
    import pandas as pd

    from cachecolor import reports as report

    text = (OS / "colors-disjoint.toml").read_text()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.toml").write_text(text)
    runs = report.run_matrix([tmp_path / "a", tmp_path / "a" / "x.toml", tmp_path / "b" / "x.toml"], ["linux", "static", "linux"])
    assert len(runs) == 4
    frame = report.comparison(runs)
    assert len(frame) == 8 and frame["ipc_vs_baseline"].notna().all()
    assert (frame[frame["policy"] == "linux"]["ipc_vs_baseline"] == 1.0).all()
    out = tmp_path / "o"
    run = subprocess.run(
        [sys.executable, "-m", "cachecolor", "report", str(tmp_path / "a"), "--policy", "static", "--policy", "nosuch",
         "--out", str(out), "-q"],
        capture_output=True, text=True,
    )
    # Every point is checked before any runs (cachecolor.sweep): the bad one is named, nothing
    # is computed or written.
    assert run.returncode == 2, run.stderr
    assert "x, nosuch" in run.stderr and "policy" in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert not (out / "comparison.csv").exists()


def test_report_names_a_missing_config(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "cachecolor", "report", str(tmp_path / "nope.toml"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "nope.toml: no such config" in run.stderr, run.stderr
    assert not (tmp_path / "o").exists()


def test_control_run_says_so_in_the_printed_table(tmp_path):
    """Regression: `simulate --policy rocs+control` printed `policy rocs` (a saved log of a
    control run read as the policy itself); the table's `recolored` column is eager + lazy
    recolors, the JSON's `recolors` the eager ones alone, and the header no longer calls both
    `recolors`."""
    cfg = ROOT / "examples" / "robustness" / "stream-beside-320k.toml"
    out = tmp_path / "c.json"
    run = subprocess.run([sys.executable, "-m", "cachecolor", "simulate", str(cfg), "--policy", "rocs+control",
                          "--json", str(out), "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("policy rocs+control, "), lines[0]
    assert "recolored" in lines[1].split() and "recolors" not in lines[1].split()
    doc = json.loads(out.read_text())
    assert doc["config"]["policy"]["control"] is True and sum(doc["control"].values()) > 0
