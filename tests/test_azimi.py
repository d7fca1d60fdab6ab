"""Azimi et al.'s policies from Python and the CLI: bad parameters exit 2 naming the field, and
``cachecolor report`` writes the papers' tables (the scenario checks themselves are Rust tests in
crates/sim/src/policy/azimi_tests.rs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cachecolor import reports as report

ROOT = Path(__file__).resolve().parent.parent
AZIMI = ROOT / "examples" / "azimi"


@pytest.mark.parametrize(
    "config, edit, field",
    [
        ("corun.toml", ("window = 20000", "window = 0"), "policy.mrc-partition.window"),
        ("corun.toml", ("warmup = 6000", "warmup = 20000"), "policy.mrc-partition.warmup"),
        ("corun.toml", ("sample_cost_cycles = 100", "sample_cost_cycles = 100\nmin_colors = 99"), "policy.mrc-partition.min_colors"),
        ("sharing.toml", ("samples_per_tick = 64", "samples_per_tick = 0"), "policy.thread-cluster.samples_per_tick"),
        ("sharing.toml", ("sample_cost_cycles = 500", "sample_cost_cycles = 500\nstall_threshold = 2.0"), "policy.thread-cluster.stall_threshold"),
        ("sharing.toml", ("sample_cost_cycles = 500", "sample_cost_cycles = 500\nsimilarity = 0"), "policy.thread-cluster.similarity"),
    ],
)
def test_bad_policy_parameters_exit_2_naming_the_field(tmp_path, config, edit, field):
    text = (AZIMI / config).read_text()
    assert edit[0] in text
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text.replace(*edit))
    run = subprocess.run([sys.executable, "-m", "cachecolor", "simulate", str(cfg)], capture_output=True, text=True)
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert field in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_report_has_the_remote_access_table(tmp_path):
    runs = report.run_matrix([AZIMI / "sharing.toml"], policies=["linux", "thread-cluster"])
    assert all(not r.result.invariants for r in runs)
    text, written = report.write_report(runs, tmp_path, plots=False)
    assert "thread-cluster: remote cache accesses before and after" in text
    (title, frame), = report.REPORTERS["thread-cluster"].tables(runs)
    row = frame[frame.process == "server"].iloc[0]
    assert row.remote_reduction_pct > 50, row
    assert row.remote_accesses_thread_cluster < row.remote_accesses_linux
