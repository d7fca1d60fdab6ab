"""COLORIS from Python and the CLI (the algorithm and section 4's scenarios are Rust tests in
crates/sim/src/policy/coloris/): the report's tables and plot, and bad parameters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor
from cachecolor import reports as report

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "coloris"


def test_report_tables_and_assignment_plot(tmp_path):
    runs = report.run_matrix([EX / "recolor-c1.toml", *sorted(EX.glob("recolor-c5-*.toml"))], ["coloris"])
    runs += report.run_matrix([EX / "overhead-buddy.toml", EX / "overhead-pool.toml"], ["linux"])
    text, written = report.write_report(runs, tmp_path)
    for title in ("Table 1", "Table 3", "Figure 9", "Table 4", "Table 5"):
        assert f"COLORIS {title}" in text, title
    names = {p.name for p in written}
    assert "coloris-assignments-recolor-c1.png" in names
    t5 = report.REPORTERS["coloris"].tables(runs)
    table5 = dict(t5)["COLORIS Table 5: stable color assignments"]
    sizes = eval(table5["C1"][0])  # "(small,medium,hungry,skewed)" colors at the end
    assert sum(sizes) == 64 and sizes[2] > 16
    # C5: four single-program runs, each alone with the whole cache, joined into one column.
    assert table5["C5"][0] == "(64,64,64,64)"
    ipc = dict(t5)["COLORIS Table 3: IPC (instructions retired per cycle)"].set_index("process")
    assert ipc.loc["hungry", "C5"] > ipc.loc["hungry", "C1"]
    assert ipc.loc["total", "C5"] == pytest.approx(ipc.loc[["small", "medium", "hungry", "skewed"], "C5"].sum())
    t1 = dict(t5)["COLORIS Table 1: allocator overhead (cycles)"]
    assert (t1["difference_pct"].abs() < 1.0).all()
    run = next(r for r in runs if r.policy == "coloris" and "recolor" in r.config)
    assert run.result.invariants == []
    assert run.result.policy_report["violations"] == []


@pytest.mark.parametrize(
    "edit, message",
    [
        (("low_threshold = 30", "low_threshold = 70"), "policy.coloris.low_threshold: LowThreshold 70% is above HighThreshold 65%"),
        (("unit = 4", "unit = 65"), "policy.coloris.unit: UNIT 65 is not within 1..=64"),
        (("unit = 4", 'unit = 4\nqos = { omnetpp = [0, 100] }'), "policy.coloris.qos.omnetpp: no process is named `omnetpp`"),
    ],
)
def test_cli_rejects_bad_coloris_parameters(tmp_path, edit, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text((EX / "recolor-c1.toml").read_text().replace(*edit))
    run = subprocess.run([sys.executable, "-m", "cachecolor", "simulate", str(cfg)], capture_output=True, text=True)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert message in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_policy_override_runs_c1_under_static_and_coloris():
    a = cachecolor.simulate_system(EX / "recolor-c1.toml", policy="static")
    assert a.to_dict()["policy"] == "static"
    assert sum(p["recolors"] + p["lazy_recolors"] for p in a.to_dict()["processes"]) == 0


def test_report_keeps_the_hotcold_workload_apart_from_the_first():
    """Issue 19 defect 5: the workload built for C4 and C6 gets columns of its own, so C1 on it
    is not averaged with C1 on the first workload; every shipped recolor config has a label."""
    from cachecolor.reports.coloris import _label

    labels = {p.stem: _label(p.stem) for p in EX.glob("recolor-*.toml")}
    assert labels["recolor-c1"] == labels["recolor-c1-selective"] == "C1"
    assert labels["recolor-c5-hungry"] == labels["recolor-c5-small"] == "C5"
    assert labels["recolor-c6-win5"] == "C6.WIN=5"
    assert labels["recolor-c1-hotcold"] == "C1 hotcold"
    assert labels["recolor-c4-hotcold"] == "C4 hotcold"
    assert labels["recolor-c6-hotcold-win3"] == "C6 hotcold.WIN=3"


def test_lazy_marks_and_scans_are_charged_to_the_process_whose_pages_they_touch():
    """Regression (issue 19's rule that an untouched co-runner never pays for another process's
    pages): COLORIS's lazy marks (their shootdowns) and Redistribution's accessed-bit scans ran
    on the core of the policy's hook, so `small`, which gives colours up, stalled 533 K cycles
    for `hungry`'s pages (its kernel stalls 619,480 against 86,000 of its own kernel work).
    Each process's kernel stall is now exactly the kernel work done on its behalf."""
    doc = cachecolor.simulate_system(EX / "recolor-c6-win5.toml", policy="coloris").to_dict()
    marks = 0
    for p in doc["processes"]:
        own = sum(v["cycles"] for v in p["kernel"].values() if isinstance(v, dict))
        assert p["stalls"]["kernel"] == pytest.approx(own, abs=1.0), p["name"]
        marks += p["lazy_recolors"]
    assert marks > 0, "the run recolors lazily (the case the bug was in)"
