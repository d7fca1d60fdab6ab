"""`cachecolor evaluate` (issue 21 item 4) on a fake suite cache: every policy beside its
control and linux, on fresh and aged placements, with speedups against linux on the same
placement; and its bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from cachecolor.traces import write_trace


def _fake_program(cache, name, pages, sweeps):
    """Two arrays of `pages` pages each, first touched in turn (the defect-7 shape), then swept
    line by line `sweeps` times."""
    d = cache / "workloads" / name
    d.mkdir(parents=True)
    a, b = 0x10000000, 0x20000000
    first = np.ravel(np.column_stack([a + 4096 * np.arange(pages), b + 4096 * np.arange(pages)]))
    lines = np.concatenate([a + 64 * np.arange(pages * 64), b + 64 * np.arange(pages * 64)])
    write_trace(d / "trace.cctrace", np.concatenate([first] + [lines] * sweeps).astype(np.uint64))
    (d / "meta.json").write_text(json.dumps({"name": name}))


def _evaluate(tmp_path, *args):
    cache = tmp_path / "cache"
    if not cache.exists():
        _fake_program(cache, "xz", 40, 3)
        _fake_program(cache, "sort", 24, 3)
    env = {"CACHECOLOR_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "cachecolor", "evaluate", "--out", str(tmp_path / "out"), "--quiet",
                           "--workers", "1", *args], capture_output=True, text=True, env=env)


def test_evaluate_runs_each_policy_beside_its_control_on_every_placement(tmp_path):
    r = _evaluate(tmp_path, "--programs", "xz", "--pairs", "xz+sort", "--quads", "--policies", "coloris",
                  "--seeds", "2", "--records", "20000")
    assert r.returncode == 0, r.stderr
    f = pd.read_csv(tmp_path / "out" / "evaluation.csv")
    # Alone on two machines, the pair on two: 4 groups x 3 placements x 3 policies, per process.
    runs = f.groupby(["group", "machine", "placement", "seed", "policy"]).ngroups
    assert runs == 4 * 3 * 3
    assert set(f.policy) == {"linux", "coloris", "coloris+control"}
    assert set(zip(f.placement, f.seed)) == {("fresh", 0), ("aged", 1), ("aged", 2)}
    # Speedups are against linux on the same placement: exactly 1 for linux itself.
    assert np.allclose(f[f.policy == "linux"].speedup, 1.0)
    # A control run moves no page.
    assert (f[f.policy == "coloris+control"].recolored == 0).all()
    assert f[f.policy == "coloris+control"].refused_moves.notna().all()
    # The aged placements are different machines: linux's frames differ, so do its counts.
    lin = f[(f.policy == "linux") & (f.group == "xz") & (f.machine == "ppc970fx")]
    assert len(lin) == 3
    md = (tmp_path / "out" / "evaluation.md").read_text()
    assert "#### alone" in md and "#### 2-program mixes" in md and "coloris+control" in md
    # Run again: every point is reused.
    r2 = _evaluate(tmp_path, "--programs", "xz", "--pairs", "xz+sort", "--quads", "--policies", "coloris",
                   "--seeds", "2", "--records", "20000")
    assert r2.returncode == 0 and "0 runs, 36 reused" in r2.stderr, r2.stderr


@pytest.mark.parametrize("args, says", [
    (["--programs", "nosuch"], "program 'nosuch' is not in the suite"),
    (["--pairs", "xz"], "mix 'xz': expected 2 programs"),
    (["--seeds", "0"], "--seeds 0: at least 1"),
])
def test_evaluate_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    r = _evaluate(tmp_path, *args)
    assert r.returncode == 2
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_evaluate_prefix_of_a_trace_with_pcs_drops_them(tmp_path, monkeypatch):
    # Bug: once the suite's traces were native v3 (a `pc` column), every program was skipped
    # ("unknown record column 'pc'") and the evaluation ran 0 groups, then failed with an
    # AttributeError. The prefix keeps every column the simulator reads and drops the PCs.
    import cachecolor.traces as traces
    from cachecolor.evaluate import prefix_trace

    src = tmp_path / "src.cctrace"
    write_trace(src, np.arange(1000, dtype=np.uint64) * 64)
    real = traces.read_trace

    def with_pcs(path, **kw):
        frame = real(path, **kw)
        frame["pc"] = np.arange(len(frame), dtype=np.uint64) + 0x400000
        return frame

    monkeypatch.setattr(traces, "read_trace", with_pcs)
    dest = prefix_trace(src, tmp_path / "out" / "prefix.cctrace", 300)
    back = real(dest)
    assert len(back) == 300 and (back["addr"].to_numpy() == np.arange(300) * 64).all()
    # write_trace names what it cannot write instead of a bare "unknown column".
    with pytest.raises(ValueError, match="column 'pc'.*drop it first"):
        write_trace(tmp_path / "x.cctrace", with_pcs(src))


def test_evaluate_with_no_program_traced_is_one_line_and_exit_2(tmp_path):
    # Bug: every program skipped gave "0 groups" and then an AttributeError.
    cache = tmp_path / "cache"
    (cache / "workloads" / "xz").mkdir(parents=True)
    (cache / "workloads" / "xz" / "trace.cctrace").write_bytes(b"not a trace")
    (cache / "workloads" / "xz" / "meta.json").write_text(json.dumps({"name": "xz"}))
    env = {"CACHECOLOR_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "cachecolor", "evaluate", "--out", str(tmp_path / "out"), "--quiet",
                        "--workers", "1", "--programs", "xz", "--pairs", "--quads"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2, r.stderr
    assert "no group can run" in r.stderr and "Traceback" not in r.stderr


def test_evaluate_reads_a_full_system_region_at_its_end(tmp_path, monkeypatch):
    """A full-system workload's region starts at the exec (no fast-forward), and its first 2 M
    records were 98% kernel for `find`: the evaluation read only the program's start. Its
    window is now the region's last `records` records, read through in chunks; a user-mode
    workload keeps its prefix."""
    from types import SimpleNamespace

    from cachecolor import evaluate, workloads
    from cachecolor.traces import read_trace

    src = tmp_path / "src.cctrace"
    n = (1 << 20) + 5000  # more than one chunk, so the window crosses a chunk boundary
    write_trace(src, np.arange(n, dtype=np.uint64) * 64)
    dest = evaluate.prefix_trace(src, tmp_path / "w.cctrace", 3000, skip=n - 3000)
    back = read_trace(dest)
    assert (back["addr"].to_numpy() == (np.arange(n - 3000, n) * 64)).all()
    assert json.loads(back.attrs["metadata"])["skipped_records"] == n - 3000

    system = SimpleNamespace(capture="system")
    user = SimpleNamespace(capture="user")
    monkeypatch.setattr(workloads, "info", lambda w, root=None: {"records": 40_000_000})
    assert evaluate.system_skip(system, 2_000_000) == 38_000_000
    assert evaluate.system_skip(system, 50_000_000) == 0
    assert evaluate.system_skip(user, 2_000_000) == 0
