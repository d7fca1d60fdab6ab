"""COLORIS's part of ``cachecolor report`` (paper 002, section 4): tables shaped like Tables 1, 3,
4 and 5 and Figure 9 / Figure 7-8 / Figure 10, and a plot of each process's color assignment
over time, from the runs of ``examples/coloris/`` (``cachecolor report examples/coloris/``).

Which runs feed which table is read from the config file names (``overhead-*``, ``isolation-*``,
``recolor-*``, ``overcommit*``, ``sliced-*``) and from the ``coloris`` policy report (its
``expansion``, ``processes`` with their final ``colors``, ``history`` of assignments).
Instructions retired in a fixed time (Table 3) become IPC here: every simulated program retires a
fixed number of instructions, so IPC is the same measure of speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .base import PolicyReporter, Run

if TYPE_CHECKING:
    from .._core import ColorisReport


def _stem(run: Run) -> str:
    return Path(run.config).stem


def _label(stem: str) -> str:
    """recolor-c1-selective -> C1; recolor-c6-win1 -> C6.WIN=1; recolor-c5-hungry -> C5 (C5 is
    one config per program, each alone with the whole cache: their runs share the column).
    Any other word names a workload of its own, kept apart from the first one's column:
    recolor-c4-hotcold -> C4 hotcold; recolor-c6-hotcold-win3 -> C6 hotcold.WIN=3 (the
    workload built for C4 and C6)."""
    parts = stem.split("-")[1:]
    name = parts[0].upper()
    win = ""
    for p in parts[1:]:
        if p.startswith("win") and p[3:].isdigit():
            win = f".WIN={p[3:]}"
        elif p != "selective" and name != "C5":
            name += f" {p}"
    return name + win


def _report(run: Run) -> Optional[ColorisReport]:
    """A ``coloris`` run's own report (crates/sim/src/policy/coloris/report.rs)."""
    return run.result.policy_report


def _expansion(run: Run) -> str:
    pr = _report(run)
    return {"selective-moving": "Selective Moving", "redistribution": "Redistribution"}.get(
        pr["expansion"] if pr else "", "-"
    )


def _procs(run: Run) -> list[dict[str, Any]]:
    return run.result.to_dict()["processes"]


def table1(runs: list[Run]) -> Any:
    """Table 1: cycles of each program with the buddy allocator and with the color pool given
    every color (mean over seeds)."""
    import pandas as pd

    rows = []
    for r in runs:
        if not _stem(r).startswith("overhead-"):
            continue
        alloc = r.result.to_dict()["allocator"]
        for p in _procs(r):
            rows.append({"process": p["name"], "allocator": alloc, "cycles": p["cycles"]})
    if not rows:
        return pd.DataFrame()
    f = pd.DataFrame(rows).groupby(["process", "allocator"])["cycles"].mean().unstack()
    f = f.reset_index()
    if {"buddy", "color-pool"} <= set(f.columns):
        f["difference_pct"] = 100.0 * (f["color-pool"] - f["buddy"]) / f["buddy"]
    return f


def isolation(runs: list[Run]) -> Any:
    """Figures 7 and 8 (section 4.2) and 11 (4.5): the foreground's (last process's) cycles and
    LLC miss rate per experiment, with (static: P, S) and without (linux: F) coloring."""
    import pandas as pd

    rows = []
    for r in runs:
        stem = _stem(r)
        if not (stem.startswith("isolation-") or stem.startswith("sliced-")):
            continue
        fg = _procs(r)[-1]
        rows.append(
            {
                "config": stem,
                "policy": r.policy,
                "seed": r.seed,
                "foreground": fg["name"],
                "cycles": fg["cycles"],
                "llc_miss_rate": fg["llc_miss_rate"],
            }
        )
    return pd.DataFrame(rows)


def _recolor_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if _stem(r).startswith("recolor-") and r.policy == "coloris"]


def table3(runs: list[Run]) -> Any:
    """Table 3 (as IPC, mean over seeds) and Figure 9 (LLC miss rates): per expansion policy and
    process, one column per configuration, plus a total row."""
    import pandas as pd

    rows = []
    for r in _recolor_runs(runs):
        for p in _procs(r):
            rows.append(
                {
                    "expansion": _expansion(r),
                    "process": p["name"],
                    "config": _label(_stem(r)),
                    "ipc": p["ipc"],
                    "llc_miss_rate": p["llc_miss_rate"],
                }
            )
    if not rows:
        return pd.DataFrame(), pd.DataFrame()
    f = pd.DataFrame(rows)
    ipc = f.pivot_table(index=["expansion", "process"], columns="config", values="ipc", aggfunc="mean")
    totals = ipc.groupby(level=0).sum(min_count=1)
    totals.index = pd.MultiIndex.from_tuples(
        [(e, "total") for e in totals.index], names=["expansion", "process"]
    )
    ipc = pd.concat([ipc, totals]).sort_index().reset_index()
    miss = f.pivot_table(
        index=["expansion", "process"], columns="config", values="llc_miss_rate", aggfunc="mean"
    ).reset_index()
    return ipc, miss


def table4(runs: list[Run]) -> Any:
    """Table 4: total pages recolored (eager + lazy moves, all processes; mean over seeds)."""
    import pandas as pd

    rows = []
    for r in _recolor_runs(runs):
        n = sum(p["recolors"] + p["lazy_recolors"] for p in _procs(r))
        rows.append({"expansion": _expansion(r), "config": _label(_stem(r)), "pages": n})
    if not rows:
        return pd.DataFrame()
    return (
        pd.DataFrame(rows)
        .pivot_table(index="expansion", columns="config", values="pages", aggfunc="mean")
        .reset_index()
    )


def table5(runs: list[Run]) -> Any:
    """Table 5: the final (stable) color assignment sizes, one row per expansion and seed."""
    import pandas as pd

    rows = []
    for r in _recolor_runs(runs):
        pr = _report(r)
        for p in pr["processes"] if pr else []:
            rows.append(
                {
                    "expansion": _expansion(r),
                    "seed": "-" if r.seed is None else r.seed,
                    "config": _label(_stem(r)),
                    "process": p["name"],
                    "colors": len(p["colors"]),
                }
            )
    if not rows:
        return pd.DataFrame()
    # One tuple per (expansion, seed, config), in the processes' order of appearance over all
    # runs: C1-C4 and C6 list their four processes in config order; C5's four single-process
    # runs then appear in the same order as long as C1 (or any four-process run) came first.
    order = {n: i for i, n in enumerate(dict.fromkeys(r["process"] for r in rows))}
    f = pd.DataFrame(rows)
    f["rank"] = f["process"].map(order)

    def tuple_of(g: Any) -> str:
        return "(" + ",".join(str(c) for c in g.sort_values("rank")["colors"]) + ")"

    cells = f.groupby(["expansion", "seed", "config"]).apply(tuple_of, include_groups=False)
    return cells.rename("assignment").reset_index().pivot_table(
        index=["expansion", "seed"], columns="config", values="assignment", aggfunc="first"
    ).reset_index()


def overcommit(runs: list[Run]) -> Any:
    """Figure 10 (section 4.4): IPC of every process under each policy, and the sum."""
    import pandas as pd

    rows = []
    for r in runs:
        if not _stem(r).startswith("overcommit"):
            continue
        row: dict[str, Any] = {"config": _stem(r), "policy": r.policy, "seed": r.seed}
        for p in _procs(r):
            row[p["name"]] = p["ipc"]
        row["total"] = sum(p["ipc"] for p in _procs(r))
        rows.append(row)
    return pd.DataFrame(rows)


def tables(runs: list[Run]) -> list[tuple[str, Any]]:
    out = []
    t1 = table1(runs)
    if not t1.empty:
        out.append(("COLORIS Table 1: allocator overhead (cycles)", t1))
    iso = isolation(runs)
    if not iso.empty:
        out.append(("COLORIS Figures 7, 8, 11: foreground cycles and LLC miss rate", iso))
    ipc, miss = table3(runs)
    if not ipc.empty:
        out.append(("COLORIS Table 3: IPC (instructions retired per cycle)", ipc))
        out.append(("COLORIS Figure 9: LLC miss rates", miss))
        out.append(("COLORIS Table 4: total pages recolored", table4(runs)))
        out.append(("COLORIS Table 5: stable color assignments", table5(runs)))
    oc = overcommit(runs)
    if not oc.empty:
        out.append(("COLORIS Figure 10: over-committed system, IPC", oc))
    return out


def assignment_series(run: Run) -> dict[str, list[tuple[int, list[int]]]]:
    """Per process: (time, colors) at every change of its assignment."""
    out: dict[str, list[tuple[int, list[int]]]] = {}
    pr = _report(run)
    for h in pr["history"] if pr else []:
        out.setdefault(h["process"], []).append((h["time"], h["colors"]))
    return out


def plots(runs: list[Run], out: Path) -> list[Path]:
    """One PNG per coloris run: each process's colors over time (a bar per owned color)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for r in runs:
        if r.policy != "coloris":
            continue
        series = assignment_series(r)
        if not series:
            continue
        end = max(p["cycles"] for p in _procs(r))
        fig, axes = plt.subplots(len(series), 1, sharex=True, figsize=(8, 1.2 + 1.1 * len(series)))
        if len(series) == 1:
            axes = [axes]
        ncolors = max((c for _, cs in sum(series.values(), []) for c in cs), default=0) + 1
        for ax, (name, points) in zip(axes, series.items()):
            for i, (t, cs) in enumerate(points):
                t_end = points[i + 1][0] if i + 1 < len(points) else end
                for c in cs:
                    ax.broken_barh([(t, max(t_end - t, 1))], (c, 0.9), color="tab:blue")
            ax.set_ylim(0, ncolors)
            ax.set_ylabel(f"{name}\ncolor", fontsize=8)
        axes[-1].set_xlabel("cycles")
        seed = "" if r.seed is None else f" seed {r.seed}"
        fig.suptitle(f"{_stem(r)}{seed}: color assignments over time")
        name = f"coloris-assignments-{_stem(r)}" + ("" if r.seed is None else f"-s{r.seed}") + ".png"
        path = out / name
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


#: This module's reporter (the registry in ``reports/__init__.py`` lists it).
COLORIS = PolicyReporter(tables=tables, plots=plots)
