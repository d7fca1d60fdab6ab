"""OS/user cache interference on the paper's uniprocessor (Nellans et al. sections 3 and 5):
``cachecolor oscache report``.

A *machine* is an ``examples/oscache/*.toml`` file: ``[model]`` (32 KB L1I/L1D, the 1 MB
baseline L2 or a ``[model.split]`` user/OS bank pair) run by the Rust model
(``cachecolor_sim::oscache::model``). Every machine runs on every *source*: the synthetic
presets (``examples/oscache/workloads/*.toml``), ``--workload`` files, or ``--trace`` files (which
must carry privileged records). Reported:

- the characterisation on the baseline machine (section 3): share of instructions in privileged
  mode (Figure 1), privileged run lengths (Figure 2), the share of L1 and L2 evictions caused by
  OS execution by the length of the run that caused them (Figure 3);
- IPC of every machine relative to the baseline (Tables 2 and 3 shape: rows workload x look-up,
  columns budget x placement), bank prediction accuracy and fallback epochs.

Written to ``--out``: ``oscache.json`` (every report), ``oscache.csv`` (one row per source x
machine), ``oscache.md`` (the tables) and, unless ``--no-plots``, ``fig1_privileged.png``,
``fig2_run_lengths.png``, ``fig3_os_evictions.png`` and ``ipc.png``.

The baseline is the machine named ``baseline`` if given, else the first machine without
``[model.split]``, else the paper's baseline (every ``[model]`` default), run as ``baseline``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from . import _core
from .config import parse_toml, read_config_text
from .data import example
from ._output import open_output, write_text
from .results import save_figure

#: The presets in the order of the paper's figures (OS-intensive first).
PRESET_ORDER = ("web-server", "jvm", "compute")


def examples_dir() -> Optional[Path]:
    """``examples/oscache`` of the working directory, else the copy inside the package (data.py)."""
    for c in (Path.cwd() / "examples" / "oscache", example("oscache")):
        if (c / "baseline.toml").is_file():
            return c
    return None


def _toml(path: Path) -> dict[str, Any]:
    return parse_toml(read_config_text(path, "machine or workload file"), str(path))


def machine_files(paths: Sequence[str | Path]) -> list[Path]:
    """Expand directories to their machine files (``*.toml`` with ``[model]`` or ``[model.split]``
    and no ``[offload]``), sorted; files are kept as given."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.glob("*.toml")):
                doc = _toml(f)
                if "offload" not in doc and "model" in doc:
                    out.append(f)
        elif p.is_file():
            out.append(p)
        else:
            raise _core.ConfigError(f"{p}: no such machine file or directory")
    return out


def preset_workloads() -> list[Path]:
    d = examples_dir()
    if d is None:
        raise _core.ConfigError("examples/oscache/workloads not found: give --workload or --trace")
    files = {f.stem: f for f in (d / "workloads").glob("*.toml")}
    order = [n for n in PRESET_ORDER if n in files] + sorted(n for n in files if n not in PRESET_ORDER)
    return [files[n] for n in order]


def load_workload(path: str | Path, references: Optional[int] = None) -> dict[str, Any]:
    """A workload file as a dict; ``references`` rescales its phases to that many records in all
    (each phase keeps its share, at least 1)."""
    w = _toml(Path(path))
    if references is not None:
        phases = w.get("phases") or []
        total = sum(int(p.get("references", 0)) for p in phases)
        for p in phases:
            share = int(p.get("references", 0)) / total if total else 1 / len(phases)
            p["references"] = max(1, round(references * share))
    return w


def run_model(
    machine: str | Path | dict[str, Any],
    workload: Optional[dict[str, Any]] = None,
    trace: Optional[str | Path] = None,
    trace_format: str = "native",
    progress: Optional[Callable[..., Any]] = None,
) -> dict[str, Any]:
    """Run one machine (a file or a dict with ``model``) on a workload dict or a trace file;
    returns its ``ModelReport`` as a dict (``ipc``, ``privileged_share``, ``runs_by_length``,
    ``caches``, ``bank_predictions``, ``invariants``, ...)."""
    if isinstance(machine, dict):
        text, fmt = json.dumps(machine), "json"
    else:
        text, fmt = read_config_text(Path(machine), "machine file"), "toml"
    w = json.dumps(workload) if workload is not None else None
    t = str(trace) if trace is not None else None
    return json.loads(_core.oscache_model(text, fmt, w, t, trace_format, progress))


def _label(machine_report: dict[str, Any]) -> dict[str, Any]:
    """Table 2/3 coordinates of a machine: budget (MB), placement, look-up, adaptive ("" or
    "adaptive", with the round-robin reading when not per-set)."""
    s = machine_report["config"].get("split")
    if not s:
        return {"split": False}
    total = (s["user_size"] + s["os_size"]) / (1 << 20)
    return {
        "split": True,
        "budget": f"{total:g}MB",
        "placement": s["placement"],
        "lookup": s["lookup"],
        # The fallback's round-robin reading, when it is not the default per-set one.
        "adaptive": ("adaptive" + ("" if s.get("round_robin", "per-set") == "per-set" else f" ({s['round_robin']})")) if s["adaptive"] else "",
    }


def evictions(c: dict[str, Any]) -> int:
    return c["evictions"][0] + c["evictions"][1]


def characterisation(rep: dict[str, Any]) -> dict[str, Any]:
    """Figures 1-3 numbers of one (baseline) report."""
    runs = rep["runs_by_length"]
    total_runs = sum(runs)
    by_name = {c["name"]: c for c in rep["caches"]}
    l1 = [by_name[n] for n in ("L1I", "L1D")]
    l2 = [c for c in rep["caches"] if c["name"].startswith("L2")]

    def share(levels: list[dict[str, Any]]) -> dict[str, Any]:
        ev = sum(evictions(c) for c in levels)
        by_run = [sum(c["os_evictions_by_run"][b] for c in levels) for b in range(len(runs))]
        return {
            "evictions": ev,
            "os_caused": sum(c["evictions"][1] for c in levels) / ev if ev else 0.0,
            "os_caused_by_run": [x / ev if ev else 0.0 for x in by_run],
        }

    return {
        "privileged_share": rep["privileged_share"],
        "buckets": rep["run_buckets"],
        "runs": total_runs,
        "runs_by_length": runs,
        "run_share": [r / total_runs if total_runs else 0.0 for r in runs],
        "instructions_by_length": rep["run_instructions_by_length"],
        "L1": share(l1),
        "L1I": share([by_name["L1I"]]),
        "L1D": share([by_name["L1D"]]),
        "L2": share(l2),
    }


def run_report(
    machines: Sequence[str | Path],
    sources: Sequence[tuple[str, dict[str, Any] | None, Optional[Path]]],
    trace_format: str = "native",
    progress: Callable[[str], None] = lambda m: None,
    record_progress: Optional[Callable[[str], Callable[..., Any]]] = None,
) -> dict[str, Any]:
    """Run every machine on every source (``(name, workload dict or None, trace path or None)``).
    Returns ``{"machines": [names], "baseline": name, "sources": {name: {"characterisation",
    "reports": {machine: report}}}}``; raises on a broken invariant."""
    files = machine_files(machines)
    named = [(f.stem, f) for f in files]
    base_name = next((n for n, _ in named if n == "baseline"), None)
    if base_name is None:
        base_name = next((n for n, f in named if "split" not in _toml(f).get("model", {})), None)
    if base_name is None:
        named.insert(0, ("baseline", {"model": {}}))
        base_name = "baseline"
    else:
        # The baseline first: the characterisation is measured on it.
        named.sort(key=lambda x: x[0] != base_name)
    out: dict[str, Any] = {"machines": [n for n, _ in named], "baseline": base_name, "sources": {}}
    for sname, workload, trace in sources:
        reports: dict[str, Any] = {}
        for mname, m in named:
            progress(f"{sname}: {mname}")
            cb = record_progress(f"{sname}: {mname}") if record_progress else None
            try:
                r = run_model(m, workload, trace, trace_format, cb)
            finally:
                if cb is not None and hasattr(cb, "close"):
                    cb.close()
            if r["invariants"]:
                raise RuntimeError(f"invariant violated ({sname}, {mname}): {r['invariants'][0]}")
            reports[mname] = r
        out["sources"][sname] = {"characterisation": characterisation(reports[base_name]), "reports": reports}
        if trace is not None:
            from .fullsys import kernel_note, task_summary

            out["sources"][sname]["kernel_note"] = kernel_note(trace, trace_format)
            out["sources"][sname]["tasks"] = task_summary(trace, trace_format)
    return out


def relative_ipc(res: dict[str, Any], source: str, machine: str) -> float:
    reps = res["sources"][source]["reports"]
    b = reps[res["baseline"]]["ipc"]
    return reps[machine]["ipc"] / b if b else 0.0


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def tables(res: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines: list[str] = []
    srcs = res["sources"]
    first = next(iter(srcs.values()))["characterisation"]
    buckets = first["buckets"]
    lines += [f"## Characterisation on `{res['baseline']}` (section 3)", ""]
    notes = [f"{name}: {s['kernel_note']}" for name, s in srcs.items() if s.get("kernel_note")]
    notes += [f"{name}: {s['tasks']}" for name, s in srcs.items() if s.get("tasks")]
    if notes:
        lines += notes + [""]
    lines += ["Figure 1 (privileged instructions) and Figure 2 (privileged runs by length, instructions):", ""]
    lines.append("| source | privileged instructions | runs | " + " | ".join(buckets) + " |")
    lines.append("|---|---|---|" + "---|" * len(buckets))
    for name, s in srcs.items():
        c = s["characterisation"]
        cells = [f"{n} ({_pct(f)})" for n, f in zip(c["runs_by_length"], c["run_share"])]
        lines.append(f"| {name} | {_pct(c['privileged_share'])} | {c['runs']} | " + " | ".join(cells) + " |")
    lines += ["", "Figure 3 (share of evictions caused by OS execution, by the length of the causing run):", ""]
    lines.append("| source | cache | evictions | OS-caused | " + " | ".join(buckets) + " |")
    lines.append("|---|---|---|---|" + "---|" * len(buckets))
    for name, s in srcs.items():
        c = s["characterisation"]
        for level in ("L1", "L2"):
            e = c[level]
            lines.append(
                f"| {name} | {level} | {e['evictions']} | {_pct(e['os_caused'])} | "
                + " | ".join(_pct(x) for x in e["os_caused_by_run"])
                + " |"
            )
    lines += ["", f"## IPC relative to `{res['baseline']}` (sections 5.1-5.2)", ""]
    machines = [m for m in res["machines"] if m != res["baseline"]]
    labels = {m: _label(next(iter(srcs.values()))["reports"][m]) for m in machines}
    split = [m for m in machines if labels[m]["split"]]
    if split:
        cols: list[tuple[str, str, str]] = []
        for m in split:
            k = (labels[m]["budget"], labels[m]["placement"], labels[m]["adaptive"])
            if k not in cols:
                cols.append(k)
        cols.sort(key=lambda k: (-float(k[0][:-2]), k[2], k[1]))
        lookups = sorted({labels[m]["lookup"] for m in split}, key=lambda x: x != "parallel")
        lines.append("Tables 2 and 3 shape (rows: source and look-up; columns: budget and placement):")
        lines.append("")
        head = [f"{b} {p}" + (f" {a}" if a else "") for b, p, a in cols]
        lines.append("| source | look-up | " + " | ".join(head) + " |")
        lines.append("|---|---|" + "---|" * len(cols))
        for name in srcs:
            for lk in lookups:
                cells = []
                for b, p, a in cols:
                    ms = [m for m in split if (labels[m]["budget"], labels[m]["placement"], labels[m]["adaptive"], labels[m]["lookup"]) == (b, p, a, lk)]
                    cells.append(f"{relative_ipc(res, name, ms[0]):.3f}" if ms else "")
                lines.append(f"| {name} | {lk} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Every machine (IPC, relative IPC, bank predictor accuracy, adaptive fallback epochs):")
    lines.append("")
    lines.append("| source | machine | IPC | relative | bank prediction | fallback epochs |")
    lines.append("|---|---|---|---|---|---|")
    for name, s in srcs.items():
        for m in res["machines"]:
            r = s["reports"][m]
            bp = r["bank_predictions"]
            acc = f"{bp[0] / (bp[0] + bp[1]):.3f}" if bp[0] + bp[1] else "-"
            fb = f"{r['fallback_epochs']}/{r['epochs']}" if r["config"].get("split", {}) and r["config"]["split"]["adaptive"] else "-"
            lines.append(f"| {name} | {m} | {r['ipc']:.4f} | {relative_ipc(res, name, m):.3f} | {acc} | {fb} |")
    lines.append("")
    return "\n".join(lines)


CSV_FIELDS = (
    "source",
    "machine",
    "records",
    "instructions",
    "privileged_share",
    "cycles",
    "ipc",
    "relative_ipc",
    "l1i_miss_ratio",
    "l1d_miss_ratio",
    "l2_miss_ratio",
    "l2_os_caused_evictions",
    "bank_prediction_accuracy",
    "fallback_epochs",
    "epochs",
)


def rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, s in res["sources"].items():
        for m in res["machines"]:
            r = s["reports"][m]
            by = {c["name"]: c for c in r["caches"]}
            l2 = [c for c in r["caches"] if c["name"].startswith("L2")]

            def ratio(cs: list[dict[str, Any]]) -> float:
                a = sum(sum(c["accesses"]) for c in cs)
                return sum(sum(c["misses"]) for c in cs) / a if a else 0.0

            ev = sum(evictions(c) for c in l2)
            bp = r["bank_predictions"]
            out.append(
                {
                    "source": name,
                    "machine": m,
                    "records": r["records"],
                    "instructions": sum(r["instructions"]),
                    "privileged_share": r["privileged_share"],
                    "cycles": r["cycles"],
                    "ipc": r["ipc"],
                    "relative_ipc": relative_ipc(res, name, m),
                    "l1i_miss_ratio": ratio([by["L1I"]]),
                    "l1d_miss_ratio": ratio([by["L1D"]]),
                    "l2_miss_ratio": ratio(l2),
                    "l2_os_caused_evictions": sum(c["evictions"][1] for c in l2) / ev if ev else 0.0,
                    "bank_prediction_accuracy": bp[0] / (bp[0] + bp[1]) if bp[0] + bp[1] else "",
                    "fallback_epochs": r["fallback_epochs"],
                    "epochs": r["epochs"],
                }
            )
    return out


def plots(res: dict[str, Any], out: Path) -> list[Path]:
    """Figures 1-3 and the IPC bars (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    srcs = res["sources"]
    names = list(srcs)
    chars = [srcs[n]["characterisation"] for n in names]
    buckets = chars[0]["buckets"]
    written = []

    fig, ax = plt.subplots(figsize=(1.5 + 1.2 * len(names), 3.5))
    ax.bar(names, [100 * c["privileged_share"] for c in chars], color="tab:red")
    ax.set_ylabel("privileged instructions (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Figure 1: share of privileged instructions")
    written.append(save_figure(fig, out / "fig1_privileged.png"))

    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(names)
    for k, (n, c) in enumerate(zip(names, chars)):
        xs = [i + k * width for i in range(len(buckets))]
        ax.bar(xs, [100 * s for s in c["run_share"]], width, label=n)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(buckets))], buckets)
    ax.set_xlabel("privileged run length (instructions)")
    ax.set_ylabel("privileged runs (%)")
    ax.set_title("Figure 2: privileged run lengths")
    ax.legend()
    written.append(save_figure(fig, out / "fig2_run_lengths.png"))

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    cmap = plt.get_cmap("viridis")
    for ax, level in zip(axes, ("L1", "L2")):
        bottom = [0.0] * len(names)
        for b, bname in enumerate(buckets):
            vals = [100 * c[level]["os_caused_by_run"][b] for c in chars]
            ax.bar(names, vals, bottom=bottom, label=bname, color=cmap(b / max(len(buckets) - 1, 1)))
            bottom = [x + v for x, v in zip(bottom, vals)]
        ax.set_title(f"{level} evictions caused by the OS")
        ax.set_ylim(0, 100)
    axes[0].set_ylabel("share of all evictions (%)")
    axes[1].legend(title="run length", fontsize=8)
    fig.suptitle("Figure 3: OS-caused evictions by privileged run length")
    written.append(save_figure(fig, out / "fig3_os_evictions.png"))

    machines = [m for m in res["machines"] if m != res["baseline"]]
    if machines:
        fig, ax = plt.subplots(figsize=(max(7, 0.45 * len(machines) * len(names)), 4.2))
        width = 0.8 / len(names)
        for k, n in enumerate(names):
            xs = [i + k * width for i in range(len(machines))]
            ax.bar(xs, [relative_ipc(res, n, m) for m in machines], width, label=n)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(machines))], machines, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel(f"IPC relative to {res['baseline']}")
        ax.set_title("Split OS/user L2 (Tables 2 and 3)")
        ax.legend()
        written.append(save_figure(fig, out / "ipc.png"))
    return written


def write_report(res: dict[str, Any], out: str | Path, with_plots: bool = True) -> tuple[str, list[Path]]:
    """Write oscache.json, oscache.csv, oscache.md (and the plots) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = tables(res)
    j = out / "oscache.json"
    write_text(j, json.dumps(res, indent=1))
    c = out / "oscache.csv"
    with open_output(c) as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, lineterminator="\r\n")
        w.writeheader()
        w.writerows(rows(res))
    md = out / "oscache.md"
    write_text(md, text)
    written = [j, c, md]
    if with_plots:
        written += plots(res, out)
    return text, written
