"""Azimi et al.'s case studies in a report (``cachecolor report examples/azimi/ --policy linux
--policy mrc-partition --policy thread-cluster``):

- ``mrc-partition``: Table 1's shape, per co-run config and seed: each program's IPC under the
  config's first policy (``linux``) and under ``mrc-partition`` and the improvement in percent;
  the colors the first allocation gave each program; a plot of the online miss-rate curves
  (miss rate against colors), with the exact whole-run curve when the run had ``exact_check``.
- ``thread-cluster``: remote cache accesses before (``linux``) and after, per process, with the
  reduction in percent (the paper's Table 2 reports the reduction of remote-access stalls), the
  remote-stall cycles, IPC, and the clusters found.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .base import PolicyReporter, Run

if TYPE_CHECKING:
    from .._core import MrcPartitionReport, ThreadClusterReport


def _baseline(runs: list[Run]) -> dict[tuple[str, Any], Run]:
    """The first policy's run of each (config, seed)."""
    first: dict[str, str] = {}
    for r in runs:
        first.setdefault(r.config, r.policy)
    return {(r.config, r.seed): r for r in runs if first[r.config] == r.policy}


def _mrc_report(run: Run) -> Optional[MrcPartitionReport]:
    """An ``mrc-partition`` run's own report (crates/sim/src/policy/mrc-partition/report.rs)."""
    return run.result.policy_report


def _cluster_report(run: Run) -> Optional[ThreadClusterReport]:
    """A ``thread-cluster`` run's own report (crates/sim/src/policy/thread-cluster/report.rs)."""
    return run.result.policy_report


def _processes(run: Run) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in run.result.to_dict()["processes"]}


def mrc_tables(runs: list[Run]) -> list[tuple[str, Any]]:
    import pandas as pd

    base = _baseline(runs)
    rows = []
    for r in runs:
        if r.policy != "mrc-partition":
            continue
        b = base.get((r.config, r.seed))
        if b is None or b is r:
            continue
        pr = _mrc_report(r)
        allocs = pr["allocations"] if pr else []
        first = allocs[0]["colors"] if allocs else {}
        mine, theirs = _processes(r), _processes(b)
        for name, p in mine.items():
            q = theirs.get(name)
            if q is None:
                continue
            span = first.get(name)
            rows.append(
                {
                    "config": Path(r.config).stem,
                    "seed": r.seed,
                    "process": name,
                    f"ipc_{b.policy}": q["ipc"],
                    "ipc_mrc_partition": p["ipc"],
                    "ipc_improvement_pct": 100.0 * (p["ipc"] / q["ipc"] - 1.0) if q["ipc"] else float("nan"),
                    f"llc_miss_rate_{b.policy}": q["llc_miss_rate"],
                    "llc_miss_rate_mrc_partition": p["llc_miss_rate"],
                    # Allocations are in units of llc_colors_per_unit LLC colors.
                    "colors_first_allocation": (span[1] - span[0]) * (pr["llc_colors_per_unit"] if pr else 1)
                    if span
                    else None,
                }
            )
    out = [("mrc-partition: IPC against the baseline (Azimi Table 1)", pd.DataFrame(rows))]
    err = []
    for r in runs:
        if r.policy != "mrc-partition":
            continue
        mrc = _mrc_report(r)
        for w in mrc["windows"] if mrc else []:
            err.append(
                {
                    "config": Path(r.config).stem,
                    "seed": r.seed,
                    "process": w["process"],
                    "time": w["time"],
                    "reason": w["reason"],
                    "samples": w["samples"],
                    "mae_vs_exact": w["mae_vs_exact"],
                }
            )
    if err:
        out.append(("mrc-partition: online miss-rate curve windows and their error", pd.DataFrame(err)))
    return out


def mrc_plots(runs: list[Run], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for r in runs:
        pr = _mrc_report(r)
        if r.policy != "mrc-partition" or not pr or not pr["windows"]:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for w in pr["windows"]:
            ax.plot(range(len(w["miss_rate"])), w["miss_rate"], marker="o", label=f"{w['process']} (online, t={w['time']})")
        for name, curve in (pr["exact_miss_rate"] or {}).items():
            ax.plot(range(len(curve)), curve, linestyle="--", label=f"{name} (exact, whole run)")
        ax.set_xlabel("colors of the shared cache")
        ax.set_ylabel("miss rate")
        ax.set_title(f"{Path(r.config).stem}: online MRCs (Azimi Fig. 4b)")
        ax.legend(fontsize=7)
        path = out / f"mrc-partition-{Path(r.config).stem}-seed{r.seed}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def cluster_tables(runs: list[Run]) -> list[tuple[str, Any]]:
    import pandas as pd

    base = _baseline(runs)
    rows = []
    for r in runs:
        if r.policy != "thread-cluster":
            continue
        b = base.get((r.config, r.seed))
        if b is None or b is r:
            continue
        pr = _cluster_report(r)
        clusters = [c["clusters"] for c in pr["clusterings"]] if pr else []
        mine, theirs = _processes(r), _processes(b)
        for name, p in mine.items():
            q = theirs.get(name)
            if q is None or p["threads"] < 2:
                continue
            before, after = q["remote_accesses"], p["remote_accesses"]
            rows.append(
                {
                    "config": Path(r.config).stem,
                    "seed": r.seed,
                    "process": name,
                    f"remote_accesses_{b.policy}": before,
                    "remote_accesses_thread_cluster": after,
                    "remote_reduction_pct": 100.0 * (1.0 - after / before) if before else float("nan"),
                    f"remote_stall_cycles_{b.policy}": q["stalls"]["remote"],
                    "remote_stall_cycles_thread_cluster": p["stalls"]["remote"],
                    f"ipc_{b.policy}": q["ipc"],
                    "ipc_thread_cluster": p["ipc"],
                    "migrations": pr["migrations"] if pr else None,
                    "clusters": str(clusters[-1]) if clusters else "",
                }
            )
    return [("thread-cluster: remote cache accesses before and after (Azimi Table 2)", pd.DataFrame(rows))]


#: This module's reporters (the registry in ``reports/__init__.py`` lists them).
MRC_PARTITION = PolicyReporter(tables=mrc_tables, plots=mrc_plots)
THREAD_CLUSTER = PolicyReporter(tables=cluster_tables)
