"""OS off-load (Nellans et al. section 4) from Python and the CLI: the JSON contract, the
sweep's tables and plots, and bad input. The scenario checks themselves are Rust tests
(crates/sim/src/oscache/offload/scenarios.rs)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from cachecolor import _core
from cachecolor.offload import load, simulate_offload, sweep, tables

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "oscache"


def small(name: str, references: int = 100_000) -> dict:
    c = load(EX / f"offload-{name}.toml")
    for p in c["workload"]["phases"]:
        p["references"] = references
    c["offload"]["dynamic"]["epoch_instructions"] = 20_000
    return c


def test_a_run_reports_predictor_accuracy_and_invariants():
    r = simulate_offload(small("web-server"))
    assert r["invariants"] == []
    a = r["accuracy"]
    assert a["runs"] > 50
    assert 0 <= a["exact_fraction"] + a["within_fraction"] <= 1
    assert len(a["decision_fraction"]) == len(a["triggers"])
    assert r["privileged_fraction"] > 0.3
    assert r["phases"], "the example runs the dynamic N of section 4.4"


def test_sweep_tables_cover_triggers_migration_and_cores():
    s = sweep(small("web-server", 60_000), triggers=(100, 1000), migration=(100, 5000), cores=(1, 2))
    assert len(s["grid"]) == 4
    assert [p["user_cores"] for p in s["scaling"]] == [1, 2]
    text = tables("web-server", s)
    assert "| migration | N=100 | N=1000 | dynamic N |" in text
    assert "User cores sharing one OS core" in text


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda c: c["offload"].setdefault("predictor", {}).update(entries=0), "offload.predictor.entries"),
        (lambda c: c["offload"].update(user_cores=0), "offload.user_cores"),
        (lambda c: c["offload"].update(trigger=100), "offload.dynamic"),
        (lambda c: c["offload"]["dynamic"].update(candidates=[]), "offload.dynamic.candidates"),
        (lambda c: c["offload"].update(migration_cyles=5), "offload"),
    ],
)
def test_impossible_offload_parameters_name_the_field(edit, field):
    c = small("web-server")
    edit(c)
    with pytest.raises(_core.ConfigError) as e:
        simulate_offload(c)
    assert field in str(e.value)


def test_cli_rejects_bad_lists_and_configs(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "cachecolor", "offload", *args], capture_output=True, text=True)

    r = cli(str(EX / "offload-web-server.toml"), "--triggers", "a,b", "--out", str(tmp_path))
    assert r.returncode != 0 and "--triggers" in r.stderr
    bad = tmp_path / "bad.toml"
    c = (EX / "offload-web-server.toml").read_text().replace("entries = 200", "entries = 0")
    bad.write_text(c.replace('workload_file = "workloads/', f'workload_file = "{EX}/workloads/'))
    r = cli(str(bad), "--out", str(tmp_path / "o"))
    assert r.returncode != 0 and "offload.predictor.entries" in r.stderr, r.stderr
