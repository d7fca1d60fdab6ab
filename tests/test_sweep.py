"""Sweeps (python/cachecolor/sweep.py, ``cachecolor sweep``): field paths, specs, the same table
from every executor (in this process, the process pool, a Dask LocalCluster), content-hash keys
that make an interrupted or extended sweep compute only what is missing, failing points recorded,
and whole-system runs that stop on SIGINT / SIGTERM within a tick with nothing half-written."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import cachecolor
from cachecolor.sweep import Point, SweepError, grid, load_spec, parse_path, parse_set, prepare, set_path, sweep
from conftest import interruptible

OS = Path(__file__).resolve().parent.parent / "examples" / "os"
DISJOINT = OS / "colors-disjoint.toml"
REFS = ["processes[0].threads[0].workload.phases[0].references", "processes[1].threads[0].workload.phases[0].references"]


def small(tmp_path: Path, references: int = 20_000) -> Path:
    """colors-disjoint.toml with fewer references (a point takes a fraction of a second)."""
    text = DISJOINT.read_text().replace("references = 600000", f"references = {references}")
    p = tmp_path / "small.toml"
    p.write_text(text)
    return p


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cachecolor", *args], capture_output=True, text=True, **kw)


# --- field paths -------------------------------------------------------------------------------


def test_field_paths_read_as_the_config_errors_spell_them():
    assert parse_path("machine.hierarchy.levels[2].size") == ["machine", "hierarchy", "levels", 2, "size"]
    assert parse_path("processes[1].threads[0].workload") == ["processes", 1, "threads", 0, "workload"]
    with pytest.raises(SweepError, match="not NAME or NAME\\[INDEX\\]"):
        parse_path("machine..size")
    cfg = {"machine": {"hierarchy": {"levels": [{"size": 1}, {"size": 2}]}}}
    set_path(cfg, "machine.hierarchy.levels[1].size", "8MiB")
    set_path(cfg, "memory.ram", "1GiB")  # a table the config left to its default
    assert cfg["machine"]["hierarchy"]["levels"][1]["size"] == "8MiB" and cfg["memory"] == {"ram": "1GiB"}
    with pytest.raises(SweepError, match="index out of range"):
        set_path(cfg, "machine.hierarchy.levels[5].size", 1)
    with pytest.raises(SweepError, match="not a list"):
        set_path(cfg, "memory[0].ram", 1)
    assert parse_set("a.b=4") == ("a.b", 4)
    assert parse_set("a.b = 8MiB") == ("a.b", "8MiB")
    assert parse_set('a.b={ pattern = "uniform" }') == ("a.b", {"pattern": "uniform"})
    with pytest.raises(SweepError, match="PATH=VALUE"):
        parse_set("a.b")


def test_keys_follow_the_effective_config_not_its_spelling(tmp_path):
    cfg = small(tmp_path)
    a = prepare(0, Point(str(cfg), "linux", 1, {"machine.hierarchy.levels[2].size": "1MiB"}))
    b = prepare(1, Point(str(cfg), "linux", 1, {"machine.hierarchy.levels[2].size": 1 << 20}))
    c = prepare(2, Point(str(cfg), "linux", 1, {"machine.hierarchy.levels[2].size": "2MiB"}))
    d = prepare(3, Point(str(cfg), "linux", 2, {}))
    assert a.key == b.key  # "1MiB" and 1048576 are the same cache
    assert len({a.key, c.key, d.key}) == 3


def test_bad_overrides_are_named_before_anything_runs(tmp_path):
    cfg = small(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_text(f'configs = ["{cfg}"]\n[parameters]\n"machine.hierarchy.levels[2].ways" = [16, 0]\n')
    out = tmp_path / "o"
    run = cli("sweep", str(spec), "--out", str(out), "-q")
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("cachecolor: error: ") and run.stderr.count("\n") == 1, run.stderr
    assert "levels[2].ways" in run.stderr and "Traceback" not in run.stderr
    assert not out.exists()
    spec.write_text(f'configs = ["{cfg}"]\nsedes = [1]\n')
    run = cli("sweep", str(spec), "-q")
    assert run.returncode == 2 and "unknown key 'sedes'" in run.stderr, run.stderr
    run = cli("simulate", str(cfg), "--set", "machine.hierarchy.levels[9].size=1MiB", "-q")
    assert run.returncode == 2 and "levels[9]: index out of range" in run.stderr, run.stderr


def test_simulate_set_overrides_a_field(tmp_path):
    cfg = small(tmp_path)
    out = tmp_path / "r.json"
    run = cli("simulate", str(cfg), "--set", "machine.hierarchy.levels[2].size=2MiB", "--set", "policy.name=linux", "--json", str(out), "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["config"]["machine"]["hierarchy"]["levels"][2]["size"] == 2 << 20
    assert doc["policy"] == "linux"


# --- the same table from every executor ---------------------------------------------------------


def spec_points(cfg: Path) -> list[Point]:
    return grid([cfg], {"machine.hierarchy.levels[2].size": ["1MiB", "2MiB"]}, ["linux", "static"], [1, 2])


def test_serial_pool_and_dask_give_identical_tables(tmp_path):
    distributed = pytest.importorskip("distributed")
    cfg = small(tmp_path)
    points = spec_points(cfg)
    serial = sweep(points, tmp_path / "serial", executor="serial", progress=False)
    assert len(serial.ran) == 8 and not serial.failed
    assert len(serial.table) == 16  # 8 points x 2 processes
    pool = sweep(points, tmp_path / "pool", executor="pool", workers=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            dask = sweep(points, tmp_path / "dask", executor=client, progress=False)
    for other in (pool, dask):
        assert len(other.ran) == 8
        pd.testing.assert_frame_equal(serial.table, other.table)
        assert [p.key for p in other.points] == [p.key for p in serial.points]
    # What is written reads back as the same table (CSV and Parquet).
    csv = pd.read_csv(tmp_path / "pool" / "results.csv")
    assert list(csv.columns) == list(serial.table.columns)
    pq = pd.read_parquet(tmp_path / "dask" / "results.parquet")
    pd.testing.assert_frame_equal(pq, serial.table, check_dtype=False)
    # The swept size is a column; the LLC size changes the LLC misses.
    t = serial.table
    assert set(t["machine.hierarchy.levels[2].size"]) == {"1MiB", "2MiB"}
    victim = t[(t["process"] == "victim") & (t["policy"] == "linux") & (t["seed"] == 1)].set_index("machine.hierarchy.levels[2].size")
    assert victim.loc["1MiB", "LLC_misses"] > victim.loc["2MiB", "LLC_misses"]
    # Each point's full JSON is kept beside the table.
    rec = json.loads((tmp_path / "serial" / "points" / f"{serial.points[0].key}.json").read_text())
    assert rec["status"] == "ok" and rec["result"]["processes"][0]["name"] == "victim"
    assert rec["point"]["params"] == {"machine.hierarchy.levels[2].size": "1MiB"}


def test_a_rerun_or_an_extended_grid_computes_only_what_is_missing(tmp_path):
    cfg = small(tmp_path)
    first = sweep(grid([cfg], None, ["linux"], [1, 2]), tmp_path / "o", executor="serial", progress=False)
    assert len(first.ran) == 2
    again = sweep(grid([cfg], None, ["linux"], [1, 2]), tmp_path / "o", executor="serial", progress=False)
    assert again.ran == [] and len(again.reused) == 2
    more = sweep(grid([cfg], None, ["linux"], [1, 2, 3]), tmp_path / "o", executor="serial", progress=False)
    assert len(more.ran) == 1 and len(more.reused) == 2 and len(more.table) == 6


def test_a_rebuilt_simulator_recomputes_every_point(tmp_path, monkeypatch):
    # Bug: the key held the version string only, which a checkout keeps while its code changes,
    # so a sweep after a rebuild handed back points the old simulator computed.
    sweep_module = importlib.import_module("cachecolor.sweep")  # `cachecolor.sweep` is the function

    cfg = small(tmp_path)
    first = sweep(grid([cfg], None, ["linux"], [1]), tmp_path / "o", executor="serial", progress=False)
    assert len(first.ran) == 1
    monkeypatch.setattr(sweep_module, "simulator_build", lambda: "another build")
    again = sweep(grid([cfg], None, ["linux"], [1]), tmp_path / "o", executor="serial", progress=False)
    assert len(again.ran) == 1 and again.reused == []
    assert again.points[0].key != first.points[0].key


def test_a_failing_point_is_recorded_and_the_others_go_on(tmp_path):
    # 16 MiB of RAM is too little for the stream's 16 MiB footprint and its page tables under
    # any policy. That shows only when it runs (the config itself is valid). (It used to be a
    # 2 MiB LLC under static, two of its 32 colors; static's sections are now cut per chip
    # among the chip's cores, which gives the stream more than 16 MiB.)
    cfg = small(tmp_path)
    oom = {"memory.ram": "16MiB", REFS[1]: 300_000}
    res = sweep([Point(str(cfg), "static", 1), Point(str(cfg), "static", 1, oom)], tmp_path / "o", executor="serial", progress=False)
    assert len(res.ran) == 2 and len(res.failed) == 1
    t = res.table
    bad = t[t["status"] == "error"]
    assert len(bad) == 1 and "out of memory" in bad["error"].iloc[0] and bad["process"].isna().all()
    assert len(t[t["status"] == "ok"]) == 2
    rec = json.loads((tmp_path / "o" / "points" / f"{res.failed[0]}.json").read_text())
    assert rec["status"] == "error" and rec["point"]["params"]["memory.ram"] == "16MiB"
    # It is tried again on the next run (a failure is not a result); the good point is not.
    again = sweep([Point(str(cfg), "static", 1), Point(str(cfg), "static", 1, oom)], tmp_path / "o", executor="serial", progress=False)
    assert again.ran == res.failed and len(again.reused) == 1


def test_a_bad_trace_is_named_before_anything_runs(tmp_path):
    cfg = small(tmp_path)
    trace = tmp_path / "bad.cctrace"
    trace.write_bytes(b"not a trace at all")
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace(
        'workload = { seed = 2, phases = [{ pattern = "sequential", footprint = "16MiB", references = 20000, size = 64, base = 0x400000000 }] }',
        f'trace = "{trace}"',
    ))
    with pytest.raises(SweepError, match="bad, linux, seed 1: .*not a cachecolor trace"):
        sweep([Point(str(cfg), "linux", 1), Point(str(bad), "linux", 1)], tmp_path / "o", executor="serial", progress=False)
    assert not (tmp_path / "o").exists()


# --- interrupts ----------------------------------------------------------------------------------


def test_an_interrupted_sweep_keeps_the_finished_points_and_writes_no_table(tmp_path):
    # Deterministic regardless of machine speed (the CI flake this pins: eight quick points all
    # finished between the poll and the SIGINT): two quick points run first (the spec expands
    # config-major), then two points of minutes each that cannot finish before the signal.
    quick = small(tmp_path, references=20_000)
    (tmp_path / "long").mkdir()
    long = long_system(tmp_path / "long")
    spec = tmp_path / "s.toml"
    spec.write_text(f'configs = ["{quick}", "{long}"]\npolicies = ["linux", "static"]\nseeds = [1]\n')
    out = tmp_path / "o"
    proc = interruptible([sys.executable, "-m", "cachecolor", "sweep", str(spec), "--out", str(out), "--workers", "2", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    points = out / "points"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if points.is_dir() and len(list(points.glob("*.json"))) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    time.sleep(0.5)  # both workers are now inside a long point
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    done = sorted(points.glob("*.json"))
    assert len(done) == 2, [f.name for f in done]
    for f in done:
        rec = json.loads(f.read_text())
        assert rec["status"] == "ok" and rec["point"]["config"] == str(quick), rec["point"]
    assert not (out / "results.csv").exists() and not (out / "results.parquet").exists()
    assert not list(points.glob(".*tmp")), "no half-written point"


def test_a_resumed_sweep_runs_only_the_missing_points(tmp_path):
    cfg = small(tmp_path, references=150_000)
    spec = tmp_path / "s.toml"
    spec.write_text(f'configs = ["{cfg}"]\npolicies = ["linux", "static"]\nseeds = {{ first = 1, count = 4 }}\n')
    total = 8
    out = tmp_path / "o"
    first = cli("sweep", str(spec), "--out", str(out), "--workers", "2", "-q")
    assert first.returncode == 0, first.stderr
    points = out / "points"
    files = sorted(points.glob("*.json"))
    assert len(files) == total
    # What an interrupted sweep leaves (see the test above): some points, no table.
    for f in files[::2]:
        f.unlink()
    (out / "results.csv").unlink()
    (out / "results.parquet").unlink()
    done = {f.name: (f.stat().st_mtime_ns, f.read_bytes()) for f in points.glob("*.json")}
    assert len(done) == total // 2

    run = cli("sweep", str(spec), "--out", str(out), "--workers", "1")
    assert run.returncode == 0, run.stderr
    assert f"{total - len(done)} run now, {len(done)} already done" in run.stderr, run.stderr
    for name, (mtime, data) in done.items():
        f = points / name
        assert f.stat().st_mtime_ns == mtime and f.read_bytes() == data, f"{name} was recomputed"
    assert len(list(points.glob("*.json"))) == total
    whole = sweep(load_spec(spec), tmp_path / "whole", executor="serial", progress=False)
    resumed = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(resumed, whole.table, check_dtype=False)


def long_system(tmp_path: Path) -> Path:
    # Uninterrupted this runs for minutes (2 x 400 M references).
    return small(tmp_path, references=400_000_000)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_long_system_simulate_stops_on_a_signal(tmp_path, sig, code):
    cfg = long_system(tmp_path)
    out = tmp_path / "r.json"
    proc = interruptible([sys.executable, "-m", "cachecolor", "simulate", str(cfg), "--json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # past the imports: the run is in the Rust loop
    assert proc.poll() is None
    proc.send_signal(sig)
    # A hang check on a run of minutes, not a timing: the stop latency is measured in
    # docs/reliability.md (a loaded machine must not fail this).
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert not out.exists() and list(tmp_path.glob("*")) == [cfg], list(tmp_path.glob("*"))
    assert "Traceback" not in err


def test_simulate_system_reports_progress_per_tick(tmp_path):
    cfg = small(tmp_path, references=200_000)
    seen = []
    r = cachecolor.simulate_system(cfg, progress=lambda *a: seen.append(a))
    ticks = len(r.intervals["time"].unique())
    assert len(seen) >= ticks - 2 and len(seen) <= ticks
    records = [s[0] for s in seen]
    assert records == sorted(records) and records[-1] <= seen[-1][3] == 400_000
    whole = cachecolor.simulate_system(cfg)
    assert whole.to_dict() == r.to_dict(), "progress never changes the run"


def test_dask_is_imported_only_when_used(tmp_path):
    # (pyarrow is not checked: pandas 3 itself imports it when installed, for its string dtype.)
    cfg = small(tmp_path)
    code = (
        "import sys, cachecolor\n"
        f"r = cachecolor.sweep(cachecolor.grid([{str(cfg)!r}], None, ['linux'], [1]), {str(tmp_path / 'o')!r}, executor='serial', progress=False, write_table=False)\n"
        "print(sorted(m for m in ('dask', 'distributed', 'tqdm') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_set_works_on_cache_only_configs_too(tmp_path):
    out = tmp_path / "c.json"
    one = Path(__file__).resolve().parent.parent / "examples" / "crossval" / "one-level.toml"
    run = cli("simulate", str(one), "--set", "hierarchy.levels[0].ways=4",
              "--set", 'workload.phases=[{ pattern = "uniform", footprint = "64KiB", references = 10000 }]', "--json", str(out), "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["config"]["hierarchy"]["levels"][0]["ways"] == 4 and doc["records"] == 10_000


def test_the_cli_names_a_failed_point_and_counts_each_point_once(tmp_path):
    """Regressions (`cachecolor sweep`): a failed point was named by a 12-digit key alone, and a
    spec repeating a value counted the repeats as points ("2 points: 0 run now, 1 already
    done")."""
    cfg = small(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_text(f'configs = ["{cfg}"]\npolicies = ["static"]\nseeds = [1, 1]\n'
                    f'[parameters]\n"memory.ram" = ["16MiB", "16MiB"]\n"{REFS[1]}" = [300000]\n')
    run = subprocess.run([sys.executable, "-m", "cachecolor", "sweep", str(spec), "--out", str(tmp_path / "o"),
                          "--workers", "1"], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    assert "1 points: 1 run now, 0 already done, 1 failed" in run.stderr, run.stderr
    assert f"point failed ({cfg.stem}, static, memory.ram=16MiB" in run.stderr and "seed 1; points/" in run.stderr, run.stderr


def test_a_size_swept_as_text_keeps_a_numeric_column(tmp_path):
    """Regression: a sweep's sizes came back from results.parquet as strings ("1MiB"); the
    column as given stays, and PATH_value holds the bytes the effective config has."""
    import cachecolor

    cfg = tmp_path / "c.toml"
    cfg.write_text((Path(__file__).resolve().parent.parent / "examples" / "os" / "colors-disjoint.toml").read_text()
                   .replace("references = 600000", "references = 5000"))
    path = "machine.hierarchy.levels[2].size"
    res = cachecolor.sweep(cachecolor.grid([cfg], {path: ["1MiB", "2MiB"]}, ["linux"], [1]), tmp_path / "out",
                           executor="serial", progress=False)
    table = res.table
    assert set(table[path]) == {"1MiB", "2MiB"}
    assert sorted(set(table[f"{path}_value"])) == [1 << 20, 2 << 20]
    import pandas as pd

    pq = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert pq[f"{path}_value"].dtype.kind in "iu"
