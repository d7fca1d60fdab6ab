"""`cachecolor evaluate` (issue 21 item 4) on a fake suite cache: every policy beside its
control and linux, on fresh and aged placements, with speedups against linux on the same
placement; and its bad input."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

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
    (["--seeds", "0"], "--seeds 0 leaves no aged placement"),
    (["--seeds", "-1", "--placements", "fresh"], "--seeds -1: the number of aged placements"),
    (["--machines", "power9"], "--machines 'power9': power9 is not a machine preset"),
    (["--only", "mixes", "--pairs", "--quads"], "no group to run"),
    (["--instructions", "10"], "--instructions 10: at least 1000"),
])
def test_evaluate_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    r = _evaluate(tmp_path, *args)
    assert r.returncode == 2
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_evaluate_window_is_the_trace_slice_and_counts_it(tmp_path):
    """The window (written by streaming, in Rust) against the slice of the whole trace read
    into memory: same records, its instructions and privileged share counted, its threads."""
    from cachecolor.evaluate import kernel_share, prefix_trace, trace_threads, window_counts_path
    from cachecolor.traces import read_trace

    n = (1 << 20) + 7000  # more than one block
    rng = np.random.default_rng(3)
    cols = {"addr": rng.integers(0, 1 << 30, n).astype(np.uint64), "icount": rng.integers(0, 4, n).astype(np.uint32),
            "thread": rng.integers(0, 3, n).astype(np.uint32), "privileged": rng.random(n) < 0.2}
    src = tmp_path / "src.cctrace"
    write_trace(src, cols)
    whole = read_trace(src)
    skip, recs = 600_000, 400_000
    dest = prefix_trace(src, tmp_path / "w.cctrace", recs, skip)
    back = read_trace(dest)
    part = whole.iloc[skip:skip + recs].reset_index(drop=True)
    for c in ("addr", "icount", "thread", "privileged", "kind", "size"):
        assert (back[c].to_numpy() == part[c].to_numpy()).all(), c
    counts = json.loads(window_counts_path(dest).read_text())
    insns = int(part.icount.sum())
    assert counts["records"] == recs and counts["instructions"] == insns
    assert kernel_share(dest) == pytest.approx(part.icount[part.privileged].sum() / insns)
    assert json.loads(back.attrs["metadata"])["skipped_records"] == skip
    from types import SimpleNamespace
    assert trace_threads(SimpleNamespace(threads=4, capture="user"), dest) == [0, 1, 2]
    assert trace_threads(SimpleNamespace(threads=1, capture="user"), dest) == []
    # Fixed in instructions: the window ends with the record that reaches them.
    want = 300_000
    d2 = prefix_trace(src, tmp_path / "i.cctrace", 1 << 62, skip, instructions=want)
    got = read_trace(d2)
    cum = np.cumsum(whole.icount.to_numpy()[skip:].astype(np.int64))
    end = int(np.searchsorted(cum, want)) + 1
    ic = got.icount.to_numpy().astype(np.int64)
    assert len(got) == end and ic[:-1].sum() < want <= ic.sum()


def test_evaluate_prefix_of_a_trace_with_pcs_drops_them(tmp_path):
    # Bug: once the suite's traces were native v3 (a `pc` column), every program was skipped
    # ("unknown record column 'pc'"). The window keeps every column the simulator reads and no
    # PCs (a version 2 trace); a PC-carrying source is read whatever its version.
    from cachecolor.evaluate import prefix_trace
    from cachecolor.traces import read_trace, trace_info

    src = tmp_path / "src.cctrace"
    write_trace(src, np.arange(1000, dtype=np.uint64) * 64)
    dest = prefix_trace(src, tmp_path / "out" / "prefix.cctrace", 300)
    back = read_trace(dest)
    assert len(back) == 300 and (back["addr"].to_numpy() == np.arange(300) * 64).all()
    assert "pc" not in back.columns and trace_info(dest)["version"] <= 2


def test_evaluate_window_of_a_recaptured_trace_is_cut_again(tmp_path):
    # Bug: a window was cut once per out directory and name, so after a program was re-captured
    # (glpk-mcf and hmmer, their regions moved) `evaluate` ran the old region's window again.
    import os

    from cachecolor.evaluate import prefix_trace
    from cachecolor.traces import read_trace

    src = tmp_path / "src.cctrace"
    write_trace(src, np.arange(1000, dtype=np.uint64) * 64)
    dest = prefix_trace(src, tmp_path / "w.cctrace", 300)
    cut = dest.stat().st_mtime_ns
    assert prefix_trace(src, dest, 300).stat().st_mtime_ns == cut, "the same source: reused"
    write_trace(src, np.arange(1000, dtype=np.uint64) * 128)
    os.utime(src, ns=(cut + 10**9, cut + 10**9))
    back = read_trace(prefix_trace(src, dest, 300))
    assert (back["addr"].to_numpy() == np.arange(300) * 128).all()


def _line_sweeps(path, records):
    """``records`` loads sweeping a 2 MiB array line by line, over and over (one instruction each)."""
    lines = (2 << 20) // 64
    addr = (0x10000000 + 64 * (np.arange(records, dtype=np.uint64) % lines)).astype(np.uint64)
    write_trace(path, {"addr": addr, "icount": np.ones(records, dtype=np.uint32)})


def _peak_rss_kib(cmd, env, cwd=None):
    """Run ``cmd``; (its result, the peak resident set of it and the children it waited for, KiB).
    wait4's rusage is this child's alone, so other processes on the machine do not count."""
    import os

    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err), usage.ru_maxrss


def test_evaluate_memory_is_flat_in_region_length(tmp_path):
    """Bug: evaluate held each prefix in memory (about 210 bytes per record: 4.3 GB at 20 M
    records) and died of a Rust allocation abort at 200 M. The windows are written by streaming
    and the simulator reads them block by block: 10x the records costs no memory. Peak RSS is
    the process's own (wait4), not the machine's, and RSS depends on no timing."""
    cache = tmp_path / "cache"
    d = cache / "workloads" / "xz"
    d.mkdir(parents=True)
    _line_sweeps(d / "trace.cctrace", 10_000_000)
    (d / "meta.json").write_text(json.dumps({"name": "xz"}))
    env = {"CACHECOLOR_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    peaks = {}
    for n in (1_000_000, 10_000_000):
        r, peaks[n] = _peak_rss_kib(
            [sys.executable, "-m", "cachecolor", "evaluate", "--out", str(tmp_path / "out"), "--quiet", "--workers", "1",
             "--programs", "xz", "--only", "alone", "--machines", "xeon-e5506", "--placements", "fresh", "--policies",
             "--records", str(n)], env)
        assert r.returncode == 0, r.stderr
        f = pd.read_csv(tmp_path / "out" / "evaluation.csv")
        assert len(f) == 1 and f.ipc.iloc[0] > 0
    # 9 M more records held anywhere would add >= 9e6 * 20 bytes = 172 MiB (the raw record);
    # the old prefix held ~210 bytes per record (1.8 GiB more).
    grew = (peaks[10_000_000] - peaks[1_000_000]) / 1024
    print(f"peak RSS {peaks} KiB")
    assert grew < 48, f"peak RSS grew {grew:.0f} MiB from 1 M to 10 M records ({peaks})"


def test_evaluate_relative_out_and_subsets(tmp_path):
    """Bug: a relative --out (the Makefile's out/evaluation) named out/configs/out/traces/...
    Subsets: only the fresh placement, one machine, only the mixes; --seeds 0 with fresh only."""
    cache = tmp_path / "cache"
    _fake_program(cache, "xz", 40, 3)
    _fake_program(cache, "sort", 24, 3)
    env = {"CACHECOLOR_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "cachecolor", "evaluate", "--out", "rel/out", "--quiet", "--workers", "1",
                        "--programs", "xz", "--pairs", "xz+sort", "--quads", "--policies", "coloris", "--only", "mixes",
                        "--placements", "fresh", "--seeds", "0", "--machines", "xeon-e5506", "--records", "20000"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    f = pd.read_csv(tmp_path / "rel" / "out" / "evaluation.csv")
    assert set(f.group) == {"xz+sort"} and set(f.machine) == {"xeon-e5506"}
    md = (tmp_path / "rel" / "out" / "evaluation.md").read_text()
    # With only the fresh placement its figures fill the summary (bug: the machine column once
    # printed a DataFrame).
    assert "| xz+sort | xeon-e5506 | coloris |" in md and "LLC MPKI (fresh)" in md
    assert set(f.placement) == {"fresh"} and set(f.policy) == {"linux", "coloris", "coloris+control"}
    cfg = json.loads((tmp_path / "rel" / "out" / "configs" / "xeon-e5506--xz+sort.json").read_text())
    assert [p["pin"] for p in cfg["processes"]] == [[0], [1]]
    assert cfg["processes"][0]["threads"][0]["trace"] == "../traces/xz-20000.cctrace"
    # Both fake regions are shorter than the 20,000 records asked: said, and kept in run.json.
    assert "warning: xz: its cached region holds 15,440 records" in r.stderr, r.stderr
    assert set(json.loads((tmp_path / "rel" / "out" / "run.json").read_text())["short_windows"]) == {"xz", "sort"}


def test_evaluate_short_window_is_named_not_silent(tmp_path):
    """Bug: `--records` (or `--instructions`) beyond a program's cached region (the suite's are
    20 M records) silently evaluated the whole region under the larger size's label."""
    from cachecolor.evaluate import prefix_trace, short_window

    n = 5000
    src = tmp_path / "src.cctrace"
    write_trace(src, {"addr": (64 * np.arange(n)).astype(np.uint64), "icount": np.full(n, 2, np.uint32)})
    full = prefix_trace(src, tmp_path / "full.cctrace", 3000)
    assert short_window("p", full, 3000) is None
    short = prefix_trace(src, tmp_path / "short.cctrace", 8000)
    note = short_window("p", short, 8000)
    assert note is not None and "holds 5,000 records (10,000 instructions), fewer than the 8,000 records asked" in note
    inside = prefix_trace(src, tmp_path / "i.cctrace", 1 << 62, instructions=9000)
    assert short_window("p", inside, 1 << 62, instructions=9000) is None
    beyond = prefix_trace(src, tmp_path / "b.cctrace", 1 << 62, instructions=12000)
    assert "fewer than the 12,000 instructions asked" in short_window("p", beyond, 1 << 62, instructions=12000)


def test_evaluate_runs_a_multithreaded_program_as_threads_on_cores(tmp_path, monkeypatch):
    """A multithreaded capture's threads run as threads of one process, one per core, each
    reading its own records of the trace (not one stream on core 0)."""
    from cachecolor import evaluate, workloads

    cache = tmp_path / "cache"
    d = cache / "workloads" / "sort-mt"
    d.mkdir(parents=True)
    n = 40_000
    write_trace(d / "trace.cctrace", {"addr": (0x10000000 + 64 * (np.arange(n) % 4096)).astype(np.uint64),
                                      "thread": (np.arange(n) % 4).astype(np.uint32)})
    (d / "meta.json").write_text(json.dumps({"name": "sort-mt"}))
    env = {"CACHECOLOR_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "cachecolor", "evaluate", "--out", str(tmp_path / "out"), "--quiet",
                        "--workers", "1", "--programs", "sort-mt", "--only", "alone", "--machines", "xeon-e5506",
                        "--placements", "fresh", "--policies", "--records", "20000"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "out" / "configs" / "xeon-e5506--sort-mt.json").read_text())
    (proc,) = cfg["processes"]
    assert proc["pin"] == [0, 1, 2, 3]
    assert [t["trace_threads"] for t in proc["threads"]] == [[0], [1], [2], [3]]
    # More threads than cores share them in turn (the PPC970FX blade has two).
    from cachecolor.presets import machine_summaries

    m = machine_summaries("ppc970fx")[0]
    assert m["chips"] * m["cores"] == 2
    g = evaluate.Group(("sort-mt",), "ppc970fx")
    one = evaluate.group_config(g, {"sort-mt": d / "trace.cctrace"}, {"sort-mt": [0, 1, 2, 3]})
    assert one["processes"][0]["pin"] == [0, 1, 0, 1]


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


def test_evaluate_on_a_dask_scheduler_and_two_workers_gives_the_local_pool_rows(tmp_path):
    """A real ``dask scheduler`` and ``dask worker`` (two worker processes) on loopback, started
    as the docs/sweep.md recipe does; ``evaluate --scheduler`` runs every point on them and its
    rows are the local pool's."""
    distributed = pytest.importorskip("distributed")
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)]
    try:
        for _ in range(600):  # the scheduler writes its address once it listens
            if sched_file.exists() and sched_file.stat().st_size:
                break
            assert procs[0].poll() is None, "dask scheduler exited"
            time.sleep(0.1)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                                       "--nworkers", "2", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True))
        with distributed.Client(scheduler_file=str(sched_file), timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            address = client.scheduler.address
            args = ("--programs", "xz", "--pairs", "xz+sort", "--quads", "--policies", "coloris",
                    "--seeds", "1", "--records", "20000", "--machines", "xeon-e5506")
            local = _evaluate(tmp_path, *args)
            assert local.returncode == 0, local.stderr
            pool = pd.read_csv(tmp_path / "out" / "evaluation.csv")
            (tmp_path / "out").rename(tmp_path / "pool")
            dask = _evaluate(tmp_path, *args, "--scheduler", address)
            assert dask.returncode == 0, dask.stderr
            # 2 groups x 2 placements x 3 policies: every run went to the two workers.
            assert "12 runs, 0 reused" in dask.stderr, dask.stderr
            executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
            assert len(executed) == 2 and sum(executed.values()) == 12, executed
        pd.testing.assert_frame_equal(pool, pd.read_csv(tmp_path / "out" / "evaluation.csv"))
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_evaluate_scheduler_that_is_not_an_address_is_one_line_and_exit_2(tmp_path):
    r = _evaluate(tmp_path, "--programs", "xz", "--scheduler", "localhost:8786")
    assert r.returncode == 2
    assert "--scheduler 'localhost:8786': a Dask scheduler address tcp://HOST:PORT" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
