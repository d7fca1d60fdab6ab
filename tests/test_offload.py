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


def test_cores_table_is_measured_where_something_is_offloaded():
    """Regression: the user-cores table took the grid's best speedup; on `compute` the points
    that off-load nothing tie at 1.000 with it, the first won (N=5000), and the table measured an
    idle OS core (0 runs off-loaded, 0.0% OS core time)."""
    s = sweep(small("compute", 60_000), triggers=(0, 1_000_000), migration=(100,), cores=(1,))
    none = next(p for p in s["grid"] if p["trigger"] == 1_000_000)
    assert none["offloaded_runs"] == 0 and none["speedup"] == pytest.approx(1.0)
    assert s["scaling"][0]["trigger"] == 0 and s["scaling"][0]["offloaded_runs"] > 0
    # Nothing off-loaded at any point: the table says so.
    s = sweep(small("compute", 60_000), triggers=(1_000_000,), migration=(100,), cores=(1,))
    assert "nothing is off-loaded" in tables("compute", s)


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


def _syscall_trace(path: Path, rounds: int = 400) -> tuple[int, int, int]:
    """A trace of `rounds` x (50 user loads of one instruction each, then a privileged run of
    3 records x 400 instructions, its first record carrying a syscall identity that alternates
    between two calls). Returns (privileged runs, privileged instructions, all instructions)."""
    import numpy as np

    import cachecolor

    per = 50 + 3
    n = rounds * per
    i = np.arange(n)
    pos = i % per
    priv = pos >= 50
    addr = np.where(priv, 0x7F00_0010_0000 + 64 * (pos - 50), 0x10_0000 + 8 * (i % 4096)).astype(np.uint64)
    icount = np.where(priv, 400, 1).astype(np.uint32)
    syscall = np.where(pos == 50, np.where((i // per) % 2 == 0, 1 << 22, 2 << 22), 0).astype(np.uint32)
    cachecolor.write_trace(path, {"addr": addr, "kind": np.zeros(n, np.uint8), "size": np.full(n, 8, np.uint16),
                                  "icount": icount, "privileged": priv.astype(np.uint8), "syscall": syscall})
    return rounds, int(icount[priv].sum()), int(icount.sum())


def test_offload_runs_on_a_trace_and_says_what_it_holds(tmp_path):
    runs, priv, total = _syscall_trace(tmp_path / "t.cctrace")
    cfg = tmp_path / "on-trace.toml"
    cfg.write_text('trace = "t.cctrace"\n[offload]\nmigration_cycles = 100\n')
    c = load(cfg)
    assert c["trace"] == str(tmp_path / "t.cctrace")
    r = simulate_offload(dict(c, offload={"trigger": 0, "migration_cycles": 100}))
    assert r["invariants"] == []
    (u,) = r["user"]
    assert (u["privileged_runs"], u["privileged_instructions"], u["thread_instructions"]) == (runs, priv, total)
    assert u["offloaded_runs"] == runs - 1, "trigger 0 off-loads every run but the first (nothing predicted yet)"
    out = tmp_path / "rep"
    p = subprocess.run([sys.executable, "-m", "cachecolor", "offload", str(cfg), "--triggers", "0,1000",
                        "--migration", "100", "--cores", "1,2", "--no-plots", "--out", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    md = (out / "offload.md").read_text()
    assert "Trace: `" in md and "does not say it holds kernel code" in md
    assert f"{runs} privileged runs" in md


def test_offload_trace_bad_input_names_the_field(tmp_path):
    _syscall_trace(tmp_path / "t.cctrace", rounds=10)
    both = {"trace": str(tmp_path / "t.cctrace"), **small("web-server")}
    with pytest.raises(_core.ConfigError, match="exclusive"):
        simulate_offload(both)
    with pytest.raises(_core.ConfigError, match="trace_format"):
        simulate_offload({"trace": str(tmp_path / "t.cctrace"), "trace_format": "nope"})
    with pytest.raises(_core.ConfigError, match="trace = PATH"):
        simulate_offload({"offload": {}})
    with pytest.raises(Exception, match="missing.cctrace"):
        simulate_offload({"trace": str(tmp_path / "missing.cctrace")})
