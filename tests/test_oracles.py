"""Oracles and verdicts (cachecolor.oracles, cachecolor.reports.verdicts; docs/verdicts.md):
each oracle's search against a brute force computed apart from it (simulate_system, no sweep),
the partition oracle against the static-color policy of the same report, the verdict rules, and
``report --oracle``'s bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor
from cachecolor import _core
from conftest import interruptible, two_level_machine
from cachecolor.oracles import (
    OracleError,
    check_partition,
    corun_profiles,
    corun_ranking,
    neighbours,
    page_ranking,
    per_access_profile,
    prefix_sizes,
    process_names,
    run_oracles,
    same_as_linux,
    two_process_splits,
    weighted_speedup,
)
from cachecolor.reports.verdicts import judge
from cachecolor.sweep import grid, prepare, sweep
from cachecolor.system import load_system_config, simulate_system

#: A machine of 8 LLC colors (64 KiB, 2-way, 4 KiB pages) under a 4 KiB L1: small enough that
#: every split and every prefix can be run apart.
TINY = two_level_machine(cores="{cores}", l1="4KiB", l1_ways=4, llc="64KiB", llc_ways=2) + """fault_cycles = 2000

[memory]
ram = "64MiB"
allocator = "color-pool"

[policy]
name = "{policy}"
"""

PROC = """
[[processes]]
name = "{name}"
pin = [{core}]
[[processes.threads]]
workload = {{ seed = {seed}, phases = [{{ pattern = "{pattern}", footprint = "{footprint}", references = {refs}, base = {base} }}] }}
"""


def tiny(tmp_path: Path, procs: list[tuple[str, str, str]], policy: str = "static", refs: int = 40_000, name: str = "tiny.toml") -> Path:
    text = TINY.format(cores=max(2, len(procs)), policy=policy)
    for i, (pname, pattern, footprint) in enumerate(procs):
        text += PROC.format(name=pname, core=i, seed=i + 1, pattern=pattern, footprint=footprint, refs=refs, base=hex(0x100000000 * (i + 1)))
    path = tmp_path / name
    path.write_text(text)
    return path


def linux_point(tmp_path: Path, config: Path, out: Path, seed: int = 1):
    points = grid([config], None, ["linux"], [seed])
    sweep(points, out, executor="serial", progress=False, write_table=False)
    return [prepare(0, points[0])]


def ws_apart(config: Path, seed: int, linux: list, colors=None, pollute=None) -> float:
    """A candidate run computed apart from the oracle: simulate_system on a config edited here."""
    cfg = load_system_config(config)
    cfg["policy"] = {"name": "static", "static": {"widen_when_out_of_memory": True}}
    for i, p in enumerate(cfg["processes"]):
        p["colors"] = [list(colors[i])] if colors else [[0, 8]]
    if pollute is not None:
        cfg["policy"]["static"].update({"pollute_colors": 1, "pollute": pollute})
    res = simulate_system(cfg, seed=seed).to_dict()["processes"]
    return weighted_speedup(res, linux)


def test_partition_search_equals_brute_force_over_every_split(tmp_path):
    config = tiny(tmp_path, [("sensitive", "uniform", "48KiB"), ("stream", "sequential", "1MiB")])
    out = tmp_path / "out"
    lps = linux_point(tmp_path, config, out)
    linux = simulate_system(config, policy="linux", seed=1).to_dict()["processes"]
    [o] = run_oracles(lps, out, ["partition"], steps=8, executor="serial", progress=False)
    brute = {k: ws_apart(config, 1, linux, colors=[(0, k), (k, 8)]) for k in range(1, 8)}
    assert o.runs == 7 and len(o.candidates) == 7
    best_k = max(brute, key=brute.get)
    assert o.gain == pytest.approx(brute[best_k] - 1.0, abs=1e-12)
    assert o.best_label == f"0-{best_k - 1} | {best_k}-7"
    # The stream beside a cache-sensitive program: a partition plainly pays here.
    assert o.gain > 0.05


def test_partition_climb_of_three_processes_equals_brute_force(tmp_path):
    config = tiny(tmp_path, [("a", "uniform", "32KiB"), ("b", "uniform", "16KiB"), ("s", "sequential", "1MiB")], refs=30_000)
    out = tmp_path / "out"
    lps = linux_point(tmp_path, config, out)
    linux = simulate_system(config, policy="linux", seed=1).to_dict()["processes"]
    [o] = run_oracles(lps, out, ["partition"], steps=8, executor="serial", progress=False)
    allocs = [(i, j, 8 - i - j) for i in range(1, 7) for j in range(1, 8 - i)]
    brute = {}
    for a in allocs:
        ranges, at = [], 0
        for n in a:
            ranges.append((at, at + n))
            at += n
        brute[a] = ws_apart(config, 1, linux, colors=ranges)
    assert o.gain == pytest.approx(max(brute.values()) - 1.0, abs=1e-12)
    assert o.runs < len(allocs), "the climb ran fewer simulations than the brute force"
    # The climb itself, from the worst start there is (a stream given most of the cache):
    # it must walk to the brute force's best.
    from cachecolor.oracles import OracleRun, _climb, _score, partition_candidate

    eff = json.loads(lps[0].config_json)
    worst = min(brute, key=brute.get)
    far = OracleRun("partition", str(config), 1, {}, None, "", math.nan)
    start = [partition_candidate(lps[0].point, list(worst))]
    _score([(far, start, eff, linux)], out, "serial", None, False)
    _climb(far, start, eff, linux, out, 8, "serial", None, False)
    assert far.gain == pytest.approx(max(brute.values()) - 1.0, abs=1e-12), (worst, far.best_label)


def test_oracle_partition_is_at_least_the_static_policy_of_the_same_report(tmp_path):
    from cachecolor.reports import report_sweep

    config = tiny(tmp_path, [("sensitive", "uniform", "48KiB"), ("stream", "sequential", "1MiB")])
    points = grid([config], None, ["linux", "static"], [1, 2])
    rep = report_sweep(points, tmp_path / "rep", executor="serial", progress=False, plots=False, html=False,
                       oracles=["partition"], oracle_steps=8)
    frame = rep.runs
    linux = {r.seed: r.result.to_dict()["processes"] for r in frame if r.policy == "linux"}
    for seed in (1, 2):
        static = next(r for r in frame if r.policy == "static" and r.seed == seed)
        oracle = next(r for r in frame if r.policy == "oracle:partition" and r.seed == seed)
        assert weighted_speedup(oracle.result.to_dict()["processes"], linux[seed]) >= weighted_speedup(static.result.to_dict()["processes"], linux[seed])
    text = (tmp_path / "rep" / "report.md").read_text()
    assert text.startswith("## verdicts"), "the verdict table opens the report"
    cmp = (tmp_path / "rep" / "comparison.csv").read_text().splitlines()[0].split(",")
    for col in ("headroom", "achieved", "share", "control", "verdict"):
        assert col in cmp


def _corun_ranking(config: Path, out: Path, lps: list) -> list:
    prof = corun_profiles(lps, out, executor="serial", progress=False)[lps[0].key]
    return corun_ranking(prof, process_names(json.loads(lps[0].config_json)))


def test_pollute_oracle_equals_brute_force_over_every_prefix(tmp_path):
    # One program: a reused array and a stream (ROCS's shape), all its prefixes run apart.
    cfg = TINY.format(cores=2, policy="rocs") + """
[[processes]]
name = "art"
pin = [0]
[[processes.threads]]
workload = { seed = 3, phases = [{ pattern = "mix", references = 30000, size = 8, parts = [
  { pattern = "sequential", footprint = "64KiB", base = 0x100000000, weight = 0.5 },
  { pattern = "uniform", footprint = "40KiB", base = 0x200000000, weight = 0.5 },
] }] }
"""
    config = tmp_path / "art.toml"
    config.write_text(cfg)
    out = tmp_path / "out"
    lps = linux_point(tmp_path, config, out)
    [ranking] = _corun_ranking(config, out, lps)
    n = len(ranking)
    assert 0 < n <= 40
    # ROCS's shape: the stream's pages miss far more often than the reused array's. Not every
    # time: a new page's lines are cleared through the caches on its fault (clear_page), so the
    # stream's first pass hits.
    stream = [r for v, r, _ in ranking if 0x100000000 >> 12 <= v < (0x100000000 + 65536) >> 12]
    reused = [r for v, r, _ in ranking if v >= 0x200000000 >> 12]
    assert len(stream) == 16 and len(reused) == 10
    assert sum(stream) / len(stream) > 3 * sum(reused) / len(reused), ranking
    linux = simulate_system(config, policy="linux", seed=1).to_dict()["processes"]
    [o] = run_oracles(lps, out, ["pollute"], steps=n, executor="serial", progress=False)
    assert prefix_sizes(n, n) == list(range(n + 1))
    brute = []
    for k in range(n + 1):
        pages = [v for v, _, _ in ranking[:k]]
        brute.append(ws_apart(config, 1, linux, pollute=[{"process": "art", "pages": pages}] if pages else []))
    assert o.runs == n + 1
    assert o.gain == pytest.approx(max(brute) - 1.0, abs=1e-12)
    assert "linux co-run" in o.basis and "WARNING" not in o.basis


def test_pollute_oracle_ranks_pages_by_the_linux_corun_and_equals_brute_force_machine_wide(tmp_path):
    """The ranking is of the linux co-run (the profile run reproduces it exactly), not of each
    process alone: beside a stream, the reused array's pages miss where alone they hit. The
    machine-wide candidates are the prefixes of both processes' pages ranked together, each
    equal to a run made apart."""
    config = tiny(tmp_path, [("reuse", "uniform", "40KiB"), ("stream", "sequential", "96KiB")], refs=20_000)
    out = tmp_path / "out"
    lps = linux_point(tmp_path, config, out)
    eff = json.loads(lps[0].config_json)
    prof = corun_profiles(lps, out, executor="serial", progress=False)[lps[0].key]
    linux = simulate_system(config, policy="linux", seed=1).to_dict()["processes"]
    assert same_as_linux(prof, linux), "the profile run is the linux run, observed"
    # the simulator's tally is the per-access tally of a Python policy sampling every LLC access
    brute = per_access_profile(lps[0].config_json)
    assert prof["pages"] == brute["pages"] and prof["processes"] == brute["processes"]
    # every data reference reaching the LLC is tallied once (walks are the rest of llc_accesses)
    for name, p in zip(("reuse", "stream"), linux):
        rows = [r for r in prof["pages"] if r[0] == name]
        assert 0 < sum(r[2] for r in rows) <= p["llc_accesses"] and sum(r[3] for r in rows) <= p["llc_misses"]
    reuse_corun, _stream = corun_ranking(prof, process_names(eff))
    reuse_alone = page_ranking(eff)[0]
    mean = lambda rk: sum(r * a for _, r, a in rk) / sum(a for _, _, a in rk)  # noqa: E731
    assert mean(reuse_corun) > 1.5 * mean(reuse_alone), (mean(reuse_corun), mean(reuse_alone))
    [o] = run_oracles(lps, out, ["pollute"], steps=4, executor="serial", progress=False)
    merged = sorted(((v, r, a, n) for n, rk in zip(("reuse", "stream"), (reuse_corun, _stream)) for v, r, a in rk),
                    key=lambda x: (-x[1], -x[2], x[3], x[0]))
    machine = [c for c in o.candidates if c["scope"] == "machine"]
    assert len(machine) == 4
    for c, k in zip(machine, prefix_sizes(len(merged), 4)[1:]):
        sets: dict = {}
        for v, _, _, n in merged[:k]:
            sets.setdefault(n, []).append(v)
        pollute = [{"process": n, "pages": sorted(sets[n])} for n in ("reuse", "stream") if n in sets]
        assert c["weighted_speedup"] == pytest.approx(ws_apart(config, 1, linux, pollute=pollute), abs=1e-12), c["label"]
    # a second run reads the profile back instead of simulating it again
    before = sorted((out / "oracle-profiles").iterdir())
    assert len(before) == 1
    assert corun_profiles(lps, out, executor="serial", progress=False)[lps[0].key] == prof


def test_two_process_splits_and_neighbours():
    assert two_process_splits(64, 16) == [[k, 64 - k] for k in range(4, 64, 4)]
    assert two_process_splits(8, 16) == [[k, 8 - k] for k in range(1, 8)]
    assert sorted(neighbours([2, 1, 5], 1)) == [[1, 1, 6], [1, 2, 5], [2, 2, 4], [3, 1, 4]]


@pytest.mark.parametrize(
    "h, a, c, verdict",
    [
        ([0.0, 0.002], [0.001, -0.002], [], "nothing to gain"),
        ([0.0, 0.0, 0.0], [-0.05, -0.051, -0.05], [], "harm"),
        ([0.20, 0.21], [0.15, 0.16], [0.0, 0.001], "gain taken"),
        ([0.20, 0.21], [0.02, 0.03], [0.0, 0.0], "gain missed"),
        ([0.20, 0.21], [0.10, 0.10], [0.10, 0.105], "side effect"),
        ([0.0, 0.0], [-0.05, -0.05], [-0.05, -0.05], "side effect"),
    ],
)
def test_verdict_rules(h, a, c, verdict):
    row = judge("cfg", "p", h, a, c, ["oracle:partition"] * len(h), ["never targeted"])
    assert row["verdict"] == verdict
    assert row["noise"] >= 0.01
    if verdict == "gain missed":
        assert "never targeted" in row["reason"]


def test_verdict_share_is_achieved_over_headroom():
    row = judge("cfg", "p", [0.2, 0.2], [0.1, 0.1], [], ["oracle:mrc"] * 2, [])
    assert row["share"] == pytest.approx(0.5)
    assert row["verdict"] == "gain taken"
    assert not row["above_oracle"]
    assert judge("cfg", "p", [0.0], [0.3], [], ["x"], [])["above_oracle"]
    assert math.isnan(judge("cfg", "p", [0.0], [0.0], [], ["x"], [])["share"])


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cachecolor", *args], capture_output=True, text=True, cwd=cwd)


def test_report_oracle_bad_input_is_one_line_and_exit_2(tmp_path):
    linux_only = tiny(tmp_path, [("a", "uniform", "16KiB"), ("b", "uniform", "16KiB")], policy="linux", name="linux-only.toml")
    r = _cli("report", str(linux_only), "--oracle", "--out", str(tmp_path / "o1"), "-q", cwd=tmp_path)
    assert r.returncode == 2 and "nothing to judge" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # a config with no [policy] table at all runs linux too
    bare = tmp_path / "no-policy.toml"
    bare.write_text(linux_only.read_text().replace('[policy]\nname = "linux"\n', ""))
    assert "[policy]" not in bare.read_text()
    r = _cli("report", str(bare), "--oracle", "--out", str(tmp_path / "o1"), "-q", cwd=tmp_path)
    assert r.returncode == 2 and "nothing to judge" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    one = tiny(tmp_path, [("a", "uniform", "16KiB")], name="one.toml")
    r = _cli("report", str(one), "--oracle", "partition", "--out", str(tmp_path / "o2"), "-q", cwd=tmp_path)
    assert r.returncode == 2 and "at least 2 processes" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    many = tiny(tmp_path, [(f"p{i}", "uniform", "8KiB") for i in range(9)], refs=1000, name="many.toml")
    r = _cli("report", str(many), "--oracle", "partition", "--out", str(tmp_path / "o3"), "-q", cwd=tmp_path)
    assert r.returncode == 2 and "9 processes but the LLC has 8 colors" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _cli("report", str(one), "--oracle", "bogus", "--out", str(tmp_path / "o4"), "-q", cwd=tmp_path)
    assert r.returncode == 2 and "unknown oracle 'bogus'" in r.stderr, r.stderr
    for d in ("o1", "o2", "o3", "o4"):
        assert not (tmp_path / d).exists(), "bad input ran nothing and wrote nothing"


def test_evaluate_oracle_bad_input_is_one_line_and_exit_2_before_anything_is_built(tmp_path):
    import os

    env = {**os.environ, "CACHECOLOR_CACHE": str(tmp_path / "cache")}
    cases = [
        (["--oracle", "bogus"], "unknown oracle 'bogus'"),
        (["--oracle", "--policies"], "nothing to judge"),
        (["--oracle", "partition", "--only", "alone", "--programs", "xz"], "every group runs one program"),
        (["--oracle", "--oracle-steps", "0"], "--oracle-steps 0: at least 1"),
    ]
    for args, want in cases:
        r = subprocess.run([sys.executable, "-m", "cachecolor", "evaluate", "--out", str(tmp_path / "ev"), *args],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
        assert r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    assert not (tmp_path / "ev").exists() and not (tmp_path / "cache").exists(), "nothing built, nothing run"


def test_oracle_is_not_a_policy():
    with pytest.raises(Exception, match="oracle:partition"):
        simulate_system({"machine": {"preset": "xeon-e5506"}, "processes": []}, policy="oracle:partition")


def test_check_partition_names_the_limit():
    eff = {"machine": {"hierarchy": {"levels": [{"size": "64KiB", "ways": 2}], "line_size": 64}}, "processes": [{"name": "a"}]}
    with pytest.raises(OracleError, match="at least 2 processes"):
        check_partition(eff, "x.toml", 16)


def test_report_oracle_shows_progress_and_stops_on_ctrl_c(tmp_path):
    import signal
    import time

    config = tiny(tmp_path, [("sensitive", "uniform", "48KiB"), ("stream", "sequential", "1MiB")], refs=400_000)
    out = tmp_path / "rep"
    proc = interruptible([sys.executable, "-m", "cachecolor", "report", str(config), "--policy", "static", "--oracle", "partition",
                             "--oracle-steps", "8", "--workers", "1", "--out", str(out), "--no-plots"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    points = out / "points"
    deadline = time.monotonic() + 600
    # linux and static, then at least one oracle candidate: the oracle's sweep is under way
    while time.monotonic() < deadline and proc.poll() is None:
        if points.is_dir() and len(list(points.glob("*.json"))) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "sweep" in err, "the oracle's runs show the sweep's progress"
    assert not (out / "report.md").exists(), "an interrupted report writes no partial verdict"
    assert len(list(points.glob("*.json"))) < 2 + 7, "stopped before every candidate ran"


def test_evaluate_oracle_adds_the_verdict_columns(tmp_path):
    """evaluate --oracle on two tiny traces (a reused array, a stream) as one pair on the Xeon:
    the verdict columns joined to evaluation.csv's rows, verdicts.csv written."""
    import argparse

    import numpy as np
    import pandas as pd

    from cachecolor.evaluate import Group, _with_oracles, group_config, placements, rows_of, speedups
    from cachecolor.sweep import Point, results_of
    from cachecolor.traces import write_trace

    rng = np.random.default_rng(1)
    traces = {
        "reuse": tmp_path / "reuse.cctrace",
        "stream": tmp_path / "stream.cctrace",
    }
    write_trace(traces["reuse"], (0x10000000 + rng.integers(0, 3 << 20, 60_000) // 64 * 64).astype(np.uint64))
    write_trace(traces["stream"], (0x40000000 + np.arange(60_000, dtype=np.uint64) * 64))
    g = Group(("reuse", "stream"), "xeon-e5506")
    path = tmp_path / f"{g.machine}--{g.name}.json"
    path.write_text(json.dumps(group_config(g, traces)))
    points, where = [], {}
    for placement, seed in placements(1):
        for pol in ("linux", "static"):
            where[len(points)] = (g, placement, seed, pol)
            points.append(Point(str(path), pol, seed, {"memory.aged": placement == "aged"}))
    out = tmp_path / "ev"
    res = sweep(points, out / "sweep", executor="serial", progress=False)
    rows = []
    for prep, result in results_of(out / "sweep", res.points):
        rows += rows_of(result, *where[prep.index][:3], where[prep.index][3])
    frame = speedups(pd.DataFrame(rows))
    args = argparse.Namespace(oracle="partition", oracle_steps=4, workers=1, quiet=True)
    frame, parts = _with_oracles(args, out, res, where, frame)
    for col in ("headroom", "achieved", "share", "control", "verdict"):
        assert col in frame.columns
    static = frame[frame.policy == "static"]
    assert static["verdict"].isin(["nothing to gain", "gain taken", "gain missed", "side effect", "harm"]).all()
    assert (out / "verdicts.csv").exists() and parts[0].startswith("#### verdicts")
    v = pd.read_csv(out / "verdicts.csv")
    assert list(v.policy) == ["static"] and v.seeds.iloc[0] == 2  # fresh and aged seed 1


def test_a_policy_above_its_oracle_is_flagged_and_named_in_the_verdict_sentence():
    """A dynamic policy may beat the static oracles (a phased program, thread placement): the
    row says so (above_oracle, its reason) and the sentence opening the report names it."""
    import pandas as pd

    from cachecolor.reports.verdicts import COLUMNS, verdict_markdown

    above = judge("phased", "coloris", [0.05, 0.06, 0.05], [0.20, 0.21, 0.20], [], ["oracle:partition"] * 3, [])
    below = judge("phased", "rocs", [0.05, 0.06, 0.05], [0.05, 0.06, 0.05], [], ["oracle:partition"] * 3, [])
    assert above["above_oracle"] and not below["above_oracle"]
    assert above["reason"].startswith("above the best oracle (+20.3% > +5.3% + noise)")
    # within the noise of the headroom is not above it
    assert not judge("c", "p", [0.05, 0.05], [0.055, 0.055], [], ["x"] * 2, [])["above_oracle"]
    table = pd.DataFrame([above, below], columns=list(COLUMNS))
    md = verdict_markdown(table, None)
    assert "1 policy row(s) came above the best oracle" in md
    assert "coloris on phased (+20.3% against a headroom of +5.3%, oracle:partition)" in md
    assert "No policy came above its oracle" in verdict_markdown(table.iloc[1:], None)


def test_the_corun_page_profile_shows_progress_and_stops_on_ctrl_c(tmp_path):
    import signal
    import time

    config = tiny(tmp_path, [("sensitive", "uniform", "48KiB"), ("stream", "sequential", "1MiB")], refs=1_500_000)
    out = tmp_path / "rep"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err_file:
        proc = interruptible([sys.executable, "-m", "cachecolor", "report", str(config), "--policy", "static", "--oracle", "pollute",
                                 "--workers", "1", "--out", str(out), "--no-plots"],
                                stdout=subprocess.PIPE, stderr=err_file, text=True)
        deadline = time.monotonic() + 600
        # the co-run page profile (the linux run, stepped record by record) is under way
        while time.monotonic() < deadline and proc.poll() is None and "page profile" not in log.read_text():
            time.sleep(0.05)
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    err = log.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not list((out / "oracle-profiles").glob("*.json")), "a profile cut short is not stored"
    assert not (out / "report.md").exists()


def test_verdict_reason_names_a_profile_whose_walk_was_skipped():
    """A search whose baseline noise hides any gain is profiled and not walked: the verdict's
    reason says so, where it had read "targeted no process" (skipped searches were left out)."""
    from types import SimpleNamespace

    from cachecolor.reports.base import Run
    from cachecolor.reports.verdicts import _facts

    skipped = {"skipped": "the baseline's noise hides any gain the buffer could give", "chosen": 0,
               "stack_pages": 158, "stopped": None}
    walked = {"skipped": None, "chosen": 40, "stack_pages": 155, "stopped": None}
    result = SimpleNamespace(policy_report={"units": [{"pids": [0], "searches": [skipped, walked]}]},
                             _doc={"processes": [{"name": "glpk-mcf"}]})
    facts = _facts(Run("glpk.toml", "rocs", 1, result))
    assert facts == ["profiled glpk-mcf, not walked: the baseline's noise hides any gain the buffer could give",
                     "searched glpk-mcf: kept 40 of 155 pages"]
    result.policy_report["units"][0]["searches"] = []
    assert _facts(Run("glpk.toml", "rocs", 1, result)) == ["targeted no process"]
