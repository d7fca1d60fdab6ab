"""Cachetest on real hardware (thesis chapter 4): working-set sweeps, co-runs, the page-color probe.

The measuring happens in Rust (``crates/bench``: a one-load-per-iteration assembly pointer
chase, pinned to a core, with the GIL released); this module turns its JSON into pandas frames
and plots with 95% confidence bands.

- ``bench(level, buffer, pattern, trials, ...)`` -> ``Sweep`` (``.doc`` the JSON document with
  ``points``, each with ``working_set_bytes``, ``ns_per_access`` (mean), ``ci95`` and the
  counters that were available; ``.frame`` one row per point; ``.knee()``).
- ``corun(...)`` -> dict (synchronised co-runs over 1..N cores on a shared level, Figure 2.5).
- ``probe(...)`` -> dict with ``verdict`` and ``levels`` (``name``, ``color_effective``).
- ``environment()`` -> dict: each PMU event probed on its own, the machine's facts.
- ``plot_sweeps(sweeps, out)``: ns per access against working set, one panel per level, one line
  per buffer with its 95% CI band, the sysfs cache size marked.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Optional, Sequence

from . import _core
from .config import read_config_text
from ._output import save_figure

LEVELS = ("L1", "L2", "L3")
BUFFERS = ("naive", "contiguous", "thp", "hugetlb", "hugetlb-contiguous")
PATTERNS = ("uniform", "sequential", "strided", "zipf", "harmonic")

# Knee: the first working set whose mean latency exceeds the in-cache plateau (mean of the points
# at or below 0.8 C) by this factor.
KNEE_RISE = 1.15


def environment() -> dict:
    """Each PMU event probed on its own (``pmu``: name, status, detail) and the machine facts."""
    return json.loads(_core.bench_environment())


class Sweep:
    """One sweep's result: ``doc`` (the JSON document), ``frame`` (pandas, one row per point)."""

    def __init__(self, doc: dict):
        self.doc = doc

    @property
    def level(self) -> dict:
        return self.doc["level"]

    @property
    def buffer(self) -> str:
        return self.doc["config"]["buffer"]

    @property
    def frame(self) -> Any:
        import pandas as pd

        rows = []
        for p in self.doc["points"]:
            row = {k: p.get(k) for k in ("working_set_bytes", "ns_per_access", "ci95", "sd", "min", "max", "accesses_per_second",
                                         "cpu_ns_per_access", "cpu_ci95")}
            row["level"] = self.doc["level"]["name"]
            row["buffer"] = self.doc["config"]["buffer"]
            row["pattern"] = self.doc["config"]["pattern"]
            row["trials"] = len(p["trials"])
            if p.get("realised_conflicts") is not None:
                row["realised_conflicts_mean"] = sum(p["realised_conflicts"]) / len(p["realised_conflicts"])
            row["model_k_avg"] = p["model_k_avg"]
            for name, c in p["counters"].items():
                row[f"{name}_per_access"] = c["per_access"]
            rows.append(row)
        return pd.DataFrame(rows)

    def knee(self) -> dict:
        """Where the latency leaves the in-cache plateau, against the sysfs size."""
        return knee(self.doc)

    def __repr__(self) -> str:
        return f"Sweep({self.level['name']}, {self.buffer}, {len(self.doc['points'])} points)"


def knee(doc: dict, key: Optional[str] = None) -> dict:
    """``{"cache_bytes", "plateau_ns", "knee_bytes" (or None), "knee_over_cache", "text"}``.

    The plateau is the mean latency of the points at or below 0.8 of the level's size; the knee
    is the first working set whose mean exceeds it by ``KNEE_RISE`` and stays above it. ``key``:
    the latency to use, by default the on-CPU ``cpu_ns_per_access`` when the document has it
    (the wall clock on a shared machine also counts other tasks' time slices), else
    ``ns_per_access``."""
    size = doc["level"]["size"]
    pts = doc["points"]
    if key is None:
        key = "cpu_ns_per_access" if pts and pts[0].get("cpu_ns_per_access") is not None else "ns_per_access"
    pts = [dict(p, ns_per_access=p[key]) for p in pts]
    inside = [p["ns_per_access"] for p in pts if p["working_set_bytes"] <= 0.8 * size]
    if not inside:
        return {"cache_bytes": size, "plateau_ns": None, "knee_bytes": None, "knee_over_cache": None,
                "text": "no point below 0.8 C: no plateau to measure a knee from"}
    plateau = sum(inside) / len(inside)
    found = None
    for i, p in enumerate(pts):
        if all(q["ns_per_access"] > KNEE_RISE * plateau for q in pts[i:]):
            found = p["working_set_bytes"]
            break
    name = doc["level"]["name"]
    if found is None:
        text = f"{name}: no knee within 0.5-1.5x the sysfs size ({size >> 10} KiB): latency stays within {KNEE_RISE:.2f}x of {plateau:.2f} ns"
    else:
        text = f"{name}: knee at {found >> 10} KiB = {found / size:.2f} x the sysfs size ({size >> 10} KiB)"
    return {"cache_bytes": size, "plateau_ns": plateau, "knee_bytes": found,
            "knee_over_cache": None if found is None else found / size, "text": text}


def bench(
    level: str,
    buffer: str = "naive",
    pattern: str = "uniform",
    trials: int = 20,
    duration_ms: float = 25.0,
    points: int = 16,
    sizes: Optional[Sequence[int]] = None,
    core: Optional[int] = None,
    seed: int = 1,
    alpha: float = 1.0,
    reserve_hugepages: bool = False,
    counters: bool = True,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> Sweep:
    """A working-set sweep over a cache level (16 sizes over 0.5-1.5x its sysfs size), ``trials``
    fresh buffers per size, each chased for ``duration_ms``. ``progress(done, total, line)`` is
    called after every trial. Raises ``ConfigError`` for bad input, ``CachecolorError`` for what
    this machine cannot do (e.g. frames hidden for ``contiguous``), ``KeyboardInterrupt`` on Ctrl-C
    (after releasing every buffer and hugetlb reservation)."""
    cfg: dict = {"level": level, "buffer": buffer, "pattern": pattern, "trials": trials, "duration_ms": duration_ms,
                 "points": points, "seed": seed, "alpha": alpha, "reserve_hugepages": reserve_hugepages, "counters": counters}
    if sizes is not None:
        cfg["sizes"] = [int(s) for s in sizes]
    if core is not None:
        cfg["core"] = core
    return Sweep(json.loads(_core.bench_sweep(json.dumps(cfg), progress)))


def corun(
    level: str = "L3",
    buffer: str = "naive",
    pattern: str = "uniform",
    working_set_bytes: Optional[int] = None,
    max_cores: Optional[int] = None,
    trials: int = 20,
    duration_ms: float = 25.0,
    seed: int = 1,
    reserve_hugepages: bool = False,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> dict:
    """Synchronised co-runs of 1..N cores, each with its own buffer over the shared ``level``
    (default per-thread working set: half the level). Returns the JSON document (``points``: one
    per core count with ``ns_per_access``, ``ci95``, ``total_accesses_per_second``)."""
    cfg: dict = {"level": level, "buffer": buffer, "pattern": pattern, "trials": trials, "duration_ms": duration_ms,
                 "seed": seed, "reserve_hugepages": reserve_hugepages}
    if working_set_bytes is not None:
        cfg["working_set_bytes"] = int(working_set_bytes)
    if max_cores is not None:
        cfg["max_cores"] = max_cores
    return json.loads(_core.bench_corun(json.dumps(cfg), progress))


def probe(reps: int = 15, duration_ms: float = 3.0, core: Optional[int] = None, huge: bool = True,
          reserve_hugepages: bool = False) -> dict:
    """Does page color matter here? Returns ``verdict`` (a sentence), ``control`` (the L1
    positive control) and ``levels`` (``name``, ``colors``, ``color_effective``: True, False or
    None, ``color_effective_2m``, the measured comparisons, ``bit_scan``: the stride scan with its
    measured ``top_bit`` index bit, and notes)."""
    cfg: dict = {"reps": reps, "duration_ms": duration_ms, "huge": huge, "reserve_hugepages": reserve_hugepages}
    if core is not None:
        cfg["core"] = core
    return json.loads(_core.bench_probe(json.dumps(cfg)))


def load(path: str) -> Sweep:
    """A sweep written by ``cachecolor bench --json``; ValueError naming the path when the file
    is not one (another command's JSON was a KeyError from deep in the plot)."""
    text = read_config_text(path, "result of bench --json")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from e
    need = ("level", "points", "config")
    if not isinstance(doc, dict) or any(k not in doc for k in need) or "pattern" not in doc["config"]:
        raise ValueError(f"{path}: not a sweep written by `cachecolor bench --json` "
                         f"(expected the keys {', '.join(need)}; a --corun result cannot be replotted as a sweep)")
    return Sweep(doc)


def plot_sweeps(sweeps: Iterable[Sweep], out: Optional[str] = None) -> Any:
    """One panel per level: mean ns per access against working set (KiB), one line per buffer
    with its 95% confidence band, the sysfs size as a dashed line (Figures 4.7-4.9)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweeps = list(sweeps)
    levels: list[str] = []
    for s in sweeps:
        if s.level["name"] not in levels:
            levels.append(s.level["name"])
    import pandas as pd

    fig, axes = plt.subplots(1, len(levels), figsize=(5 * len(levels), 4), squeeze=False)
    for ax, name in zip(axes[0], levels):
        size = None
        mine = [s for s in sweeps if s.level["name"] == name]
        # The pattern is each sweep's own (the title had said "uniform chase" for every one).
        patterns = list(dict.fromkeys(s.doc["config"].get("pattern", "uniform") for s in mine))
        for s in mine:
            f = s.frame
            x = f["working_set_bytes"] / 1024
            y = f["ns_per_access"]
            tag = f"{s.buffer}" + (f", {s.doc['config'].get('pattern')}" if len(patterns) > 1 else "")
            (line,) = ax.plot(x, y, marker="o", ms=3, label=f"{tag}: wall clock")
            # One trial has no interval (null in the JSON): no band then, not a zero-width one
            # (an all-null column stayed of object type and the plot failed).
            ci = pd.to_numeric(f["ci95"], errors="coerce")
            if ci.notna().any():
                ax.fill_between(x, y - ci, y + ci, color=line.get_color(), alpha=0.25)
            if f["cpu_ns_per_access"].notna().all():
                yc, cc = f["cpu_ns_per_access"], pd.to_numeric(f["cpu_ci95"], errors="coerce")
                ax.plot(x, yc, ls="--", marker="x", ms=3, color=line.get_color(), label=f"{tag}: on-CPU")
                if cc.notna().any():
                    ax.fill_between(x, yc - cc, yc + cc, color=line.get_color(), alpha=0.15)
            size = s.level["size"]
        if size:
            ax.axvline(size / 1024, color="grey", ls="--", lw=1, label=f"sysfs {name} = {size >> 10} KiB")
        trials = min((s.doc["config"].get("trials", 2) for s in mine), default=2)
        ax.set_title(f"{name}: mean ns per access, {', '.join(patterns)} chase\n"
                     + ("95% CI" if trials > 1 else "1 trial: no interval"), fontsize=10)
        ax.set_xlabel("working set (KiB)")
        ax.set_ylabel("ns per access")
        ax.legend(fontsize=8)
    fig.tight_layout()
    if out:
        save_figure(fig, out, dpi=120)
    return fig


def plot_corun(doc: dict, out: Optional[str] = None) -> Any:
    """Per-thread ns per access and total throughput against the number of co-running cores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = doc["points"]
    n = [p["cores"] for p in pts]
    fig, ax = plt.subplots(figsize=(5, 4))
    y = [p["ns_per_access"] for p in pts]
    ci = [p["ci95"] or 0 for p in pts]
    ax.errorbar(n, y, yerr=ci, marker="o", capsize=3)
    ax.set_xlabel("co-running cores")
    ax.set_ylabel("ns per access (per thread), 95% CI")
    ax.set_title(f"co-run over {doc['level']['name']}: {doc['working_set_bytes'] >> 10} KiB each")
    ax.set_xticks(n)
    fig.tight_layout()
    if out:
        save_figure(fig, out, dpi=120)
    return fig
