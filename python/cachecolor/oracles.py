"""Oracles: offline upper bounds on what each cache-management mechanism can gain on a run, and
the verdict of every policy against them (docs/verdicts.md).

An oracle is never an online policy: it is a set of extra simulation runs of the *same* config,
overrides and seed as the ``linux`` run it is measured against, each a plain ``static`` run
(COLORIS section 3.2's fixed colors, with ``[[processes]] colors`` and ``[policy.static]``'s
offline pollute set), run through ``cachecolor.sweep`` (so cached by content hash in
``OUT/points`` and run on its pool, with its progress bar and Ctrl-C). Tables name the best run of
each as ``oracle:NAME``; the name is refused as a policy (``cachecolor.system`` knows no such
policy). The objective is the weighted speedup over ``linux`` (the mean over the processes of
IPC / the same process's IPC under linux, the papers' metric; Azimi et al. 5.3).

- ``oracle:partition``: the best static partition of the LLC's colors into one contiguous range
  per process. Two processes: every split at a granularity of ``steps`` (default 16: the LLC's
  colors in steps of 1/16). More: a hill climb from ``oracle:mrc``'s allocation, one granule
  moved between two processes at a time, every candidate simulated, until no move gains.
- ``oracle:pollute``: ROCS Figure 8's best offline, generalised. Pages are ranked by their exact
  last-level miss rate (ROCS 3.2.1: the inverse of a page's reuse; ties: more accesses first,
  then the lower page) in the ``linux`` co-run itself: the same config, placement and seed
  rerun with the simulator's exact per-page LLC tally, which costs the run nothing
  (``corun_profiles``; the run is checked to reproduce the linux run's counts), so a page's
  rate is what it suffers beside its co-runners. Prefixes of the ranking (``steps`` + 1 sizes
  from none to all) are put in a pollute buffer of ``rocs``'s size (1/16 of the LLC unless
  ``[policy.rocs] buffer_size`` says otherwise), every other page of every process kept off the buffer's colors. Per process
  (only its pages in the buffer) and machine-wide (all processes' pages ranked together: Azimi
  et al.'s shared buffer, case study 2).
- ``oracle:mrc``: Azimi et al.'s own allocation (section 3.2's lookahead,
  ``MrcPartition::lookahead``) fed each process's exact miss-rate curve (Mattson's stack
  algorithm over all its references, fully associative LRU, at every whole number of colors)
  instead of RapidMRC's sampled windows: the best that method can do. One run.

Doing nothing is always allowed: a best candidate below linux gives a headroom of 0 (the oracle's
own gain is reported as measured, negative then).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

ORACLES = ("partition", "pollute", "mrc")
PREFIX = "oracle:"
#: Default granularity: the LLC's colors in steps of 1/16 (partition), 16 + 1 prefix sizes
#: (pollute).
STEPS = 16
#: The smallest headroom that counts, whatever the seeds say: the project's do-no-harm bar
#: (`rocs`'s and `mrc-partition`'s 1% budgets).
NOISE_FLOOR = 0.01
VERDICTS = ("nothing to gain", "gain taken", "gain missed", "side effect", "harm")


class OracleError(ValueError):
    """Bad input to an oracle (one line naming what is wrong and what is allowed)."""


def parse_oracles(text: Optional[str]) -> tuple[str, ...]:
    """``--oracle`` (all) or ``--oracle partition,pollute``."""
    if text is None or text in ("", "all"):
        return ORACLES
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    bad = [n for n in names if n not in ORACLES]
    if bad or not names:
        raise OracleError(f"--oracle {text}: unknown oracle {bad[0] if bad else '(none)'!r} (allowed: {', '.join(ORACLES)}, or all)")
    return names


# ---------------------------------------------------------------------------------------------
# the machine and the processes of an effective config


@dataclass
class Machine:
    colors: int
    llc_bytes: int
    line: int
    page: int


def machine_of(effective: dict[str, Any]) -> Machine:
    """The LLC's colors, size and line, and the page size, of an effective system config."""
    h = effective["machine"]["hierarchy"]
    llc = h["levels"][-1]
    line = int(h.get("line_size", 64))
    page = _bytes(h.get("page_size", 4096))
    size = _bytes(llc["size"])
    ways = int(llc["ways"])
    slices = int(llc.get("slices", 1) or 1)
    colors = max(1, size // (slices * ways * page))
    return Machine(colors, size, line, page)


def _bytes(v: Any) -> int:
    from .reports.rocs import _bytes as parse

    return parse(v)


def process_names(effective: dict[str, Any]) -> list[str]:
    return [p["name"] for p in effective.get("processes", [])]


# ---------------------------------------------------------------------------------------------
# candidates: sweep points


@dataclass
class Candidate:
    """One oracle run: which oracle, a label for people (``0-7 | 8-15``), the sweep point."""

    oracle: str
    label: str
    point: Any
    scope: str = "machine"
    #: partition and mrc: colors per process.
    alloc: Optional[list[int]] = None


def _colors_params(ranges: Sequence[tuple[int, int]]) -> dict[str, Any]:
    # Out of frames in its colors a candidate widens them as mrc-partition does (static's
    # widen_when_out_of_memory), rather than fail.
    out: dict[str, Any] = {"policy.static.widen_when_out_of_memory": True}
    out.update({f"processes[{i}].colors": [[a, b]] for i, (a, b) in enumerate(ranges)})
    return out


def split_ranges(alloc: Sequence[int]) -> list[tuple[int, int]]:
    """Contiguous color ranges in process order for an allocation (colors per process), as
    ``mrc-partition`` lays them out."""
    out, at = [], 0
    for n in alloc:
        out.append((at, at + n))
        at += n
    return out


def granule(colors: int, steps: int) -> int:
    return max(1, colors // max(1, steps))


def two_process_splits(colors: int, steps: int) -> list[list[int]]:
    """Every split of ``colors`` between two processes in granules of ``colors // steps``
    (each process at least one granule)."""
    g = granule(colors, steps)
    return [[k, colors - k] for k in range(g, colors, g)]


def check_partition(effective: dict[str, Any], config: str, steps: int) -> None:
    """Bad input for ``oracle:partition``: one process, or more processes than granules."""
    n = len(effective.get("processes", []))
    m = machine_of(effective)
    if n < 2:
        raise OracleError(f"{config}: oracle:partition needs at least 2 processes to split the cache among (this config has {n})")
    g = granule(m.colors, steps)
    if n * g > m.colors:
        raise OracleError(
            f"{config}: oracle:partition: {n} processes but the LLC has {m.colors} colors in granules of {g}: "
            f"at most {m.colors // g} processes (give more --oracle-steps, up to {m.colors})"
        )


def base_point(point: Any, **extra: Any) -> Any:
    from .sweep import Point

    return Point(point.config, "static", point.seed, {**point.params, **extra})


def partition_candidates(point: Any, effective: dict[str, Any], steps: int) -> list[Candidate]:
    """Two processes: every split (``two_process_splits``)."""
    m = machine_of(effective)
    return [partition_candidate(point, alloc) for alloc in two_process_splits(m.colors, steps)]


def partition_candidate(point: Any, alloc: Sequence[int], oracle: str = "partition") -> Candidate:
    """Process i gets the i-th contiguous range of ``alloc[i]`` colors."""
    ranges = split_ranges(alloc)
    return Candidate(oracle, " | ".join(f"{a}-{b - 1}" for a, b in ranges), base_point(point, **_colors_params(ranges)), alloc=list(alloc))


def neighbours(alloc: Sequence[int], g: int) -> list[list[int]]:
    """Allocations one granule away: ``g`` colors moved from one process to another (each
    keeping at least one color)."""
    out = []
    for i in range(len(alloc)):
        for j in range(len(alloc)):
            if i != j and alloc[i] - g >= 1:
                a = list(alloc)
                a[i] -= g
                a[j] += g
                out.append(a)
    return out


# --- exact curves and the lookahead (oracle:mrc)


def _thread_sources(effective: dict[str, Any], proc: dict[str, Any]) -> list[tuple[Any, str]]:
    out = []
    for t in proc.get("threads", []):
        if t.get("workload") is not None:
            out.append((t["workload"], "native"))
        elif t.get("trace"):
            out.append((t["trace"], t.get("format", "native")))
    return out


def exact_misses(effective: dict[str, Any]) -> list[list[float]]:
    """Per process, its misses with 0..C colors of the LLC: each thread's exact fully
    associative LRU curve (lines) at ``c x LLC/C`` bytes, times its references, summed over
    the threads."""
    from .analysis import mrc

    m = machine_of(effective)
    lines_per_color = max(1, m.llc_bytes // m.colors // m.line)
    sizes = [c * lines_per_color for c in range(m.colors + 1)]
    out = []
    for proc in effective.get("processes", []):
        total = [0.0] * (m.colors + 1)
        for src, fmt in _thread_sources(effective, proc):
            curve = mrc(src, format=fmt, line_size=m.line, method="exact", all_sizes=True)
            rates = curve.at(sizes)
            for c, r in enumerate(rates):
                total[c] += float(r) * curve.references
        out.append(total)
    return out


def mrc_allocation(effective: dict[str, Any]) -> list[int]:
    """``oracle:mrc``'s colors per process: the lookahead over exact curves, each process given
    at least ``[policy.mrc-partition] min_colors``."""
    from . import _core

    m = machine_of(effective)
    minimum = int(effective.get("policy", {}).get("mrc-partition", {}).get("min_colors", 1))
    misses = exact_misses(effective)
    return list(_core.lookahead_allocation(misses, m.colors, min(minimum, m.colors // max(1, len(misses)))))


def mrc_candidate(point: Any, effective: dict[str, Any], oracle: str = "mrc") -> Candidate:
    return partition_candidate(point, mrc_allocation(effective), oracle)


# --- page ranking and prefixes (oracle:pollute)

#: Where the co-run page profiles are kept beside the sweep's points (one file per linux run,
#: named by that run's key, so a rebuilt simulator or a changed config profiles again).
PROFILES = "oracle-profiles"
#: The counts of each process's result the profile run must reproduce exactly to be the linux
#: run observed, and ``cycles``, which may move by ``CYCLES_TOLERANCE`` (relative): the tally
#: keeps the engine on its one-record-at-a-time path, while the batched path's queued-DRAM
#: timing spreads a burst's reads over its time (the two paths agree to the cycle under
#: fixed-latency memory), so a few cycles in a million move while no cache event does.
SAME_RUN_FIELDS = ("instructions", "references", "llc_accesses", "llc_misses", "remote_accesses", "faults", "pages_per_color")
CYCLES_TOLERANCE = 1e-3


def profile_config(effective: dict[str, Any]) -> dict[str, Any]:
    """The linux run's effective config for its page profile: the same run (``linux``'s
    placement, the same PMU and seed), run by ``_core.simulate_system_page_llc``, which keeps the
    exact per-page LLC tally at no simulated cost."""
    cfg = json.loads(json.dumps(effective))
    cfg.setdefault("policy", {})["name"] = "linux"
    return cfg


def _same_run_fields(proc: dict[str, Any]) -> dict[str, Any]:
    return {k: proc.get(k) for k in ("cycles", *SAME_RUN_FIELDS) if k in proc}


def corun_profile(config_json: str) -> dict[str, Any]:
    """One co-run page profile (runs in a worker): ``pages`` as ``[process, vpn, LLC accesses,
    LLC misses]`` (process order, then page), every data reference of the run that reached the
    LLC counted by the simulator (``System::keep_page_llc``: a miss is a reference memory or
    another chip's cache served), and each process's ``SAME_RUN_FIELDS`` to compare with the
    linux run."""
    import numpy as np

    from . import _core

    t0 = time.perf_counter()
    cfg = profile_config(json.loads(config_json))
    text, raw = _core.simulate_system_page_llc(json.dumps(cfg), "json", None)
    doc = json.loads(text)
    names = process_names(cfg)
    rows = np.frombuffer(raw, dtype="<u8").reshape(-1, 4)
    return {
        "pages": [[names[pid], vpn, a, m] for pid, vpn, a, m in rows.tolist()],
        "processes": [_same_run_fields(p) for p in doc["processes"]],
        "elapsed": time.perf_counter() - t0,
    }


def per_access_profile(config_json: str) -> dict[str, Any]:
    """The brute force ``corun_profile`` is checked against (tests/test_oracles.py) and timed
    against (benches/oracle_profile.py), not used by the oracle: the same co-run profile taken
    by a Python policy placing as ``linux`` does (the adapter answers every hook it does not
    define as ``linux`` does) whose ``sample`` hook gets every LLC access, the exact PMU
    (``[pmu] ideal``) sampling ``llc-accesses`` at period 1 with no interrupt cycles and no
    handler lines: one Python call per LLC access. The same dictionary as ``corun_profile``."""
    from . import _core
    from .policy import Policy

    class CorunPageProfile(Policy):
        name = "linux-page-profile"

        def __init__(self) -> None:
            self.names: list[str] = []
            self.tally: dict[tuple[int, int], list[int]] = {}

        def check_processes(self, names: list[str]) -> None:
            self.names = list(names)

        def sample(self, kernel: Any, sample: Any) -> None:
            t = self.tally.setdefault((sample.pid, sample.vaddr // self.machine.page_size), [0, 0])
            t[0] += 1
            # Served by a cache it hit the LLC; from memory or another chip's cache it missed.
            if sample.source != "cache":
                t[1] += 1

    t0 = time.perf_counter()
    cfg = profile_config(json.loads(config_json))
    pmu = cfg.setdefault("pmu", {})
    pmu["ideal"] = True
    pmu["sampling"] = {"event": "llc-accesses", "period": 1, "cost_cycles": 0, "pollute_l1_lines": 0}
    policy = CorunPageProfile()
    doc = json.loads(_core.simulate_system_policy(json.dumps(cfg), policy, "json", None))
    return {
        "pages": [[policy.names[pid], vpn, a, m] for (pid, vpn), (a, m) in sorted(policy.tally.items())],
        "processes": [_same_run_fields(p) for p in doc["processes"]],
        "elapsed": time.perf_counter() - t0,
    }


def _profile_task(args: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    key, config_json = args
    return key, corun_profile(config_json)


def corun_profiles(linux_points: Sequence[Any], out: Path, executor: Any = "pool", workers: Optional[int] = None,
                   progress: Any = True) -> dict[str, dict[str, Any]]:
    """The co-run page profile of every linux point (``sweep.Prepared``), by its key: read from
    ``OUT/oracle-profiles`` or run now (``workers`` processes, the sweep's progress bar, Ctrl-C
    terminates the workers and writes nothing of a run cut short)."""
    from .sweep import _Bar, _pool_worker_init, write_text

    folder = out / PROFILES
    got: dict[str, dict[str, Any]] = {}
    todo: dict[str, str] = {}
    for lp in linux_points:
        try:
            got[lp.key] = json.loads((folder / f"{lp.key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            todo.setdefault(lp.key, lp.config_json)
    if not todo:
        return got
    bar = _Bar(progress, len(todo))

    def finish(key: str, prof: dict[str, Any]) -> None:
        write_text(folder / f"{key}.json", json.dumps(prof))
        got[key] = prof
        bar.step(f"page profile of the linux co-run {key[:8]}")

    try:
        n = 1 if executor == "serial" else min(len(todo), workers or os.cpu_count() or 1)
        if n <= 1:
            for key, cj in todo.items():
                finish(*_profile_task((key, cj)))
        else:
            import multiprocessing

            pool = multiprocessing.get_context("spawn").Pool(n, initializer=_pool_worker_init)
            try:
                for key, prof in pool.imap_unordered(_profile_task, list(todo.items())):
                    finish(key, prof)
                pool.close()
            except BaseException:
                pool.terminate()
                raise
            finally:
                pool.join()
    finally:
        bar.close()
    return got


def corun_ranking(profile: dict[str, Any], names: Sequence[str]) -> list[list[tuple[int, float, int]]]:
    """Per process (config order): its pages whose data references reached the LLC in the
    linux co-run, as ``(vpn, miss rate, accesses)``, highest exact LLC miss rate first (ROCS
    3.2.1: the inverse of a page's reuse; ties: more accesses, then the lower page)."""
    by: dict[str, list[tuple[int, float, int]]] = {n: [] for n in names}
    for name, vpn, a, m in profile["pages"]:
        if a > 0:
            by[name].append((int(vpn), m / a, int(a)))
    return [sorted(by[n], key=lambda x: (-x[1], -x[2], x[0])) for n in names]


def profile_disagreement(profile: dict[str, Any], linux: Sequence[dict[str, Any]]) -> str:
    """How the profile run differs from the linux run it observes: "" when every process's
    ``SAME_RUN_FIELDS`` are equal and its cycles within ``CYCLES_TOLERANCE``, else what differs."""
    mine = profile["processes"]
    if len(mine) != len(linux):
        return f"{len(mine)} processes against linux's {len(linux)}"
    out = []
    for p, q in zip(mine, linux):
        b = _same_run_fields(q)
        out += [f"{q.get('name', '?')} {k} {p.get(k)} vs {b.get(k)}" for k in SAME_RUN_FIELDS if p.get(k) != b.get(k)]
        c, d = float(p.get("cycles", 0.0)), float(b.get("cycles", 0.0))
        if abs(c - d) > CYCLES_TOLERANCE * max(abs(d), 1.0):
            out.append(f"{q.get('name', '?')} cycles {c:.0f} vs {d:.0f}")
    return "; ".join(out)


def same_as_linux(profile: dict[str, Any], linux: Sequence[dict[str, Any]]) -> bool:
    """Whether the profile run reproduced the linux run (``profile_disagreement``)."""
    return not profile_disagreement(profile, linux)


def page_ranking(effective: dict[str, Any]) -> list[list[tuple[int, float, int]]]:
    """Per process: its pages ranked as ``corun_ranking`` does, but from a page profile of each
    thread's references *alone* through the machine's hierarchy (no co-runner, no scheduler):
    the intrinsic reuse, for comparison with the co-run's."""
    from .pages import page_profile

    h = effective["machine"]["hierarchy"]
    hierarchy = {k: v for k, v in h.items() if k not in ("seed",)}
    out = []
    for proc in effective.get("processes", []):
        tally: dict[int, list[int]] = {}
        for src, fmt in _thread_sources(effective, proc):
            if isinstance(src, dict):
                prof = page_profile({"hierarchy": hierarchy, "workload": src})
            else:
                prof = page_profile({"hierarchy": hierarchy}, src, trace_format=fmt)
            for row in prof.doc["pages"]:
                if row["accesses"] > 0:
                    t = tally.setdefault(int(row["vpn"]), [0, 0])
                    t[0] += int(row["accesses"])
                    t[1] += int(row["misses"])
        ranked = sorted(((v, m / a, a) for v, (a, m) in tally.items()), key=lambda x: (-x[1], -x[2], x[0]))
        out.append(ranked)
    return out


def prefix_sizes(n: int, steps: int) -> list[int]:
    """``steps`` + 1 prefix sizes from 0 to ``n`` (each once)."""
    if n <= 0:
        return [0]
    return sorted({round(k * n / steps) for k in range(steps + 1)})


def buffer_colors(effective: dict[str, Any]) -> int:
    """Colors of ``rocs``'s pollute buffer on this machine (``[policy.rocs] buffer_size``, else
    1/16 of the LLC: ROCS section 6)."""
    m = machine_of(effective)
    size = effective.get("policy", {}).get("rocs", {}).get("buffer_size")
    if size is None:
        return max(1, m.colors // 16)
    return max(1, _bytes(size) // max(1, m.llc_bytes // m.colors))


def buffer_capacity(effective: dict[str, Any]) -> int:
    """Pages the buffer's colors hold in RAM (prefixes beyond it cannot be placed in it)."""
    m = machine_of(effective)
    ram = _bytes(effective.get("memory", {}).get("ram", 1 << 30))
    return ram // m.page * buffer_colors(effective) // m.colors


def pollute_candidates(point: Any, effective: dict[str, Any], steps: int, ranking: Optional[list[list[tuple[int, float, int]]]] = None) -> list[Candidate]:
    """Per process (only its pages buffered) and, with several processes, machine-wide (every
    process's pages ranked together); every process keeps all the colors but the buffer's.
    ``ranking``: ``run_oracles`` passes the linux co-run's (``corun_ranking``); without one,
    each process's pages ranked alone (``page_ranking``)."""
    m = machine_of(effective)
    names = process_names(effective)
    ranking = page_ranking(effective) if ranking is None else ranking
    bc = buffer_colors(effective)
    cap = buffer_capacity(effective)
    everything = _colors_params([(0, m.colors)] * len(names))
    out: list[Candidate] = []
    seen: set[str] = set()

    def add(scope: str, pages: dict[str, list[int]], label: str) -> None:
        sets = [{"process": n, "pages": sorted(pages[n])} for n in names if pages.get(n)]
        key = json.dumps(sets)
        if key in seen:  # the empty set: one run for every scope
            return
        seen.add(key)
        out.append(Candidate("pollute", label, base_point(point, **everything, **{"policy.static.pollute_colors": bc, "policy.static.pollute": sets}), scope))

    for i, name in enumerate(names):
        for k in prefix_sizes(min(cap, len(ranking[i])), steps):
            add(name, {name: [v for v, _, _ in ranking[i][:k]]}, f"{name}: top {k} of {len(ranking[i])} pages")
    if len(names) > 1:
        merged = sorted(((v, r, a, n) for n, rk in zip(names, ranking) for v, r, a in rk), key=lambda x: (-x[1], -x[2], x[3], x[0]))
        for k in prefix_sizes(min(cap, len(merged)), steps)[1:]:
            pages: dict[str, list[int]] = {}
            for v, _, _, n in merged[:k]:
                pages.setdefault(n, []).append(v)
            add("machine", pages, f"machine-wide: top {k} of {len(merged)} pages")
    return out


# ---------------------------------------------------------------------------------------------
# scoring and the search


def weighted_speedup(procs: Sequence[dict[str, Any]], linux: Sequence[dict[str, Any]]) -> float:
    """Mean over processes (by position) of IPC / the same process's IPC under linux."""
    ratios = [p["ipc"] / b["ipc"] for p, b in zip(procs, linux) if b["ipc"] > 0]
    return sum(ratios) / len(ratios) if ratios else float("nan")


@dataclass
class OracleRun:
    """The outcome of one oracle for one linux run: its best candidate (its result and label,
    ``gain`` its weighted speedup over linux minus 1, negative when even the best is below
    linux; None and NaN when no candidate ran), every candidate scored, the runs and seconds
    spent, and ``note``: why it did not apply."""

    oracle: str
    config: str
    seed: Optional[int]
    params: dict[str, Any]
    best: Optional[dict[str, Any]]
    best_label: str
    gain: float
    candidates: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0
    note: str = ""
    #: What the candidates were built from, when it matters (pollute: the ranking's source).
    basis: str = ""


def run_oracles(
    linux_points: Sequence[Any],
    out_dir: Any,
    oracles: Sequence[str] = ORACLES,
    steps: int = STEPS,
    *,
    executor: Any = "pool",
    workers: Optional[int] = None,
    progress: Any = True,
    say: Callable[[str], None] = lambda m: None,
    strict: bool = False,
) -> list[OracleRun]:
    """Run ``oracles`` for every prepared ``linux`` point (``sweep.Prepared``, already run into
    ``out_dir``). ``strict``: an oracle that cannot apply to a config (partition on one process,
    too many processes) raises ``OracleError``; otherwise it is skipped with a note."""
    from .sweep import prepare, read_point, sweep

    out = Path(out_dir)
    results: list[OracleRun] = []
    pending: list[tuple[OracleRun, list[Candidate], dict[str, Any], Any]] = []
    profiles: dict[str, dict[str, Any]] = {}
    if "pollute" in oracles:
        ran = [lp for lp in linux_points if (read_point(out, lp.key) or {}).get("status") == "ok"]
        if ran:
            say(f"oracle:pollute: page profiles of {len(ran)} linux co-run(s) (every LLC access by page)")
            profiles = corun_profiles(ran, out, executor, workers, progress)
    for lp in linux_points:
        eff = json.loads(lp.config_json)
        rec = read_point(out, lp.key)
        if not rec or rec.get("status") != "ok":
            continue
        linux = rec["result"]["processes"]
        for name in oracles:
            o = OracleRun(name, lp.point.config, lp.point.seed, dict(lp.point.params), None, "", math.nan)
            cands: list[Candidate] = []
            try:
                if name == "partition":
                    check_partition(eff, lp.point.config, steps)
                    if len(eff["processes"]) == 2:
                        cands = partition_candidates(lp.point, eff, steps)
                    else:
                        say(f"oracle:partition: exact miss-rate curves of {Path(lp.point.config).stem} (the climb's start)")
                        cands = [mrc_candidate(lp.point, eff, "partition")]
                elif name == "pollute":
                    prof = profiles[lp.key]
                    cands = pollute_candidates(lp.point, eff, steps, corun_ranking(prof, process_names(eff)))
                    o.basis = f"pages ranked by the linux co-run's exact LLC miss rates ({len(prof['pages'])} pages)"
                    differs = profile_disagreement(prof, linux)
                    if differs:
                        o.basis += f"; WARNING: the profile run did not reproduce the linux run ({differs})"
                else:
                    if len(eff["processes"]) < 2:
                        raise OracleError(f"{lp.point.config}: oracle:mrc divides the cache among processes: this config has 1")
                    say(f"oracle:mrc: exact miss-rate curves of {Path(lp.point.config).stem}")
                    cands = [mrc_candidate(lp.point, eff)]
            except OracleError as e:
                if strict:
                    raise
                o.note = str(e).split(": ", 1)[-1]
                results.append(o)
                continue
            pending.append((o, cands, eff, linux))
    # One sweep of every first-round candidate (the pool stays busy across configs).
    _score(pending, out, executor, workers, progress)
    # More than two processes: hill-climb the partition from the lookahead's allocation.
    for o, cands, eff, linux in pending:
        if o.oracle == "partition" and len(eff["processes"]) > 2:
            _climb(o, cands, eff, linux, out, steps, executor, workers, progress)
        results.append(o)
    return results


def _score(pending: list[tuple[OracleRun, list[Candidate], dict[str, Any], Any]], out: Path, executor: Any, workers: Optional[int], progress: Any) -> None:
    from .sweep import read_point, sweep

    points = [c.point for _, cands, _, _ in pending for c in cands]
    if not points:
        return
    res = sweep(points, out, executor=executor, workers=workers, progress=progress, write_table=False)
    keys = iter(res.points)
    for o, cands, _eff, linux in pending:
        for c in cands:
            p = next(keys)
            _record(o, c, p.key, read_point(out, p.key), linux)


def _record(o: OracleRun, c: Candidate, key: str, rec: Optional[dict[str, Any]], linux: Sequence[dict[str, Any]]) -> None:
    o.runs += 1
    if not rec or rec.get("status") != "ok":
        o.candidates.append({"label": c.label, "scope": c.scope, "key": key, "weighted_speedup": float("nan"), "error": (rec or {}).get("error", "not run")})
        return
    o.seconds += float(rec.get("elapsed", 0.0))
    ws = weighted_speedup(rec["result"]["processes"], linux)
    o.candidates.append({"label": c.label, "scope": c.scope, "key": key, "weighted_speedup": ws, "error": ""})
    if not math.isnan(ws) and (math.isnan(o.gain) or ws - 1.0 > o.gain):
        o.gain, o.best, o.best_label = ws - 1.0, rec["result"], c.label


def _climb(o: OracleRun, first: list[Candidate], eff: dict[str, Any], linux: Any, out: Path, steps: int,
           executor: Any, workers: Optional[int], progress: Any, rounds: int = 8) -> None:
    """Hill climb from the lookahead's allocation: every allocation one granule away is run;
    the best replaces the current while it gains; at most ``rounds`` rounds."""
    m = machine_of(eff)
    g = granule(m.colors, steps)
    current = list(first[0].alloc or [])
    score = o.candidates[0]["weighted_speedup"] if o.candidates else float("nan")
    tried = {tuple(current)}
    for _ in range(rounds):
        nxt = [a for a in neighbours(current, g) if tuple(a) not in tried]
        if not nxt:
            break
        tried.update(tuple(a) for a in nxt)
        cands = [partition_candidate(first[0].point, a) for a in nxt]
        before = len(o.candidates)
        _score([(o, cands, eff, linux)], out, executor, workers, progress)
        scored = [(a, r["weighted_speedup"]) for a, r in zip(nxt, o.candidates[before:]) if not math.isnan(r["weighted_speedup"])]
        if not scored:
            break
        alloc, ws = max(scored, key=lambda x: x[1])
        if not math.isnan(score) and ws <= score:
            break
        current, score = alloc, ws
