"""OS off-load experiments (Nellans et al. section 4): ``cachecolor offload``.

One off-load config (``examples/oscache/offload-*.toml``: an ``[offload]`` table for the machine
and mechanism, a ``[workload]`` table for the synthetic OS-intensive workload of each user core)
is run by the Rust model (``cachecolor_sim::oscache::offload``) as (``trace = "PATH"`` instead of
``[workload]`` replays a captured trace, e.g. a full-system one, on every user core):

- the single-core baseline (no off-load; its predictor still predicts every run, which gives the
  accuracy report: exact, within 5%, and the binary decision per trigger N, Figure 4);
- a grid of fixed triggers N x migration costs (Figure 5: IPC relative to the baseline; Table 1:
  share of execution time on the OS core);
- the dynamic N of section 4.4 at each migration cost;
- 1, 2, 4 user cores sharing one OS core at one (N, migration) point (section 6: queueing).

Everything is written to ``--out``: ``offload.json`` (every run's numbers), ``offload.md`` (the
tables) and, unless ``--no-plots``, ``accuracy.png`` and ``ipc.png``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from . import _core
from .config import parse_toml, read_config_text
from ._output import write_text
from .results import save_figure

DEFAULT_TRIGGERS = (0, 100, 500, 1000, 5000, 10000)
DEFAULT_MIGRATION = (100, 1000, 5000, 10000)
DEFAULT_CORES = (1, 2, 4)


def load(path: str | Path) -> dict[str, Any]:
    """Read an off-load config (TOML). ``workload_file = "PATH"`` (relative to the config) is
    replaced by that workload file's contents as ``[workload]``; ``trace = "PATH"`` (relative to
    the config; ``trace_format``, default native) replays a captured trace on every user core
    instead of a workload (full-system traces: docs/oscache.md)."""
    path = Path(path)
    config = _toml(path)
    if isinstance(config.get("trace"), str):
        config["trace"] = str(path.parent / config["trace"])
    wf = config.pop("workload_file", None)
    if wf is not None:
        if "workload" in config:
            raise _core.ConfigError(f"{path}: workload_file and [workload] are exclusive: give one")
        config["workload"] = _toml(path.parent / wf)
    return config


def _toml(path: Path) -> dict[str, Any]:
    return parse_toml(read_config_text(path), str(path))


def simulate_offload(config: dict[str, Any]) -> dict[str, Any]:
    """Run one off-load config (a dict as read from TOML); returns the run's report."""
    return json.loads(_core.simulate_offload(json.dumps(config), "json"))


def _with(config: dict[str, Any], **offload: Any) -> dict[str, Any]:
    c = copy.deepcopy(config)
    o = c.setdefault("offload", {})
    for k, v in offload.items():
        if v is None:
            o.pop(k, None)
        else:
            o[k] = v
    return c


def sweep(
    config: dict[str, Any],
    triggers: Sequence[int] = DEFAULT_TRIGGERS,
    migration: Sequence[int] = DEFAULT_MIGRATION,
    cores: Sequence[int] = DEFAULT_CORES,
    scaling_point: Optional[tuple[int, int]] = None,
    dynamic: bool = True,
    progress: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    """The whole experiment for one config; see the module comment."""
    out: dict[str, Any] = {"triggers": list(triggers), "migration": list(migration)}
    if isinstance(config.get("trace"), str):
        from .fullsys import kernel_note

        out["trace"] = config["trace"]
        out["note"] = kernel_note(config["trace"], config.get("trace_format", "native"))
    progress("baseline")
    base = simulate_offload(_with(config, trigger=None, dynamic=None, user_cores=1))
    out["baseline"] = base
    base_ipc = base["mean_ipc"]
    grid = []
    for m in migration:
        for n in triggers:
            progress(f"N={n} migration={m}")
            r = simulate_offload(_with(config, trigger=n, dynamic=None, user_cores=1, migration_cycles=m))
            grid.append(_point(r, base_ipc, trigger=n, migration=m))
    out["grid"] = grid
    dyn = []
    if dynamic:
        # The config's own [offload.dynamic] (epochs scaled to its length), else the paper's.
        d = dict(config.get("offload", {}).get("dynamic") or {})
        for m in migration:
            progress(f"dynamic N, migration={m}")
            c = _with(config, trigger=None, user_cores=1, migration_cycles=m, dynamic=d)
            r = simulate_offload(c)
            p = _point(r, base_ipc, trigger=None, migration=m)
            p["phases"] = r["phases"]
            dyn.append(p)
    out["dynamic"] = dyn
    if scaling_point is None:
        # The best point that off-loads anything (section 6 measures the OS core's queue): the
        # points that off-load nothing tie at speedup 1.0 and the first of them had won, so the
        # table measured a machine with an idle OS core. With none, the one that off-loads most
        # often (the smallest N, the cheapest migration), and the table says nothing moved.
        offloading = [p for p in grid if p["offloaded_runs"] > 0]
        best = max(offloading, key=lambda p: p["speedup"]) if offloading else None
        if best is None and grid:
            best = min(grid, key=lambda p: (p["trigger"], p["migration"]))
        scaling_point = (best["trigger"], best["migration"]) if best else (1000, 5000)
    n, m = scaling_point
    scaling = []
    for k in cores:
        progress(f"{k} user cores, N={n} migration={m}")
        kb = simulate_offload(_with(config, trigger=None, dynamic=None, user_cores=k))
        r = simulate_offload(_with(config, trigger=n, dynamic=None, user_cores=k, migration_cycles=m))
        p = _point(r, kb["mean_ipc"], trigger=n, migration=m)
        p["user_cores"] = k
        scaling.append(p)
    out["scaling"] = scaling
    return out


def _point(r: dict[str, Any], base_ipc: float, **keys: Any) -> dict[str, Any]:
    bad = r.get("invariants") or []
    if bad:
        raise RuntimeError(f"invariant violated: {bad[0]}")
    return {
        **keys,
        "mean_ipc": r["mean_ipc"],
        "speedup": r["mean_ipc"] / base_ipc if base_ipc else 0.0,
        "os_time_fraction": r["os_time_fraction"],
        "offloaded_runs": sum(u["offloaded_runs"] for u in r["user"]),
        "privileged_runs": sum(u["privileged_runs"] for u in r["user"]),
        "queue_cycles": sum(u["queue_cycles"] for u in r["user"]),
        "max_queue_wait": r["max_queue_wait"],
        "os_coherence_misses": r["os"]["coherence_misses"],
    }


def tables(name: str, s: dict[str, Any]) -> str:
    """Markdown tables of one config's sweep."""
    base = s["baseline"]
    acc = base["accuracy"]
    lines = [f"### {name}", ""]
    if s.get("trace"):
        lines += [f"Trace: `{s['trace']}`, replayed whole by each user core.", ""]
    if s.get("note"):
        lines += [s["note"], ""]
    lines.append(
        f"Baseline: IPC {base['mean_ipc']:.4f}, privileged instructions "
        f"{100 * base['privileged_fraction']:.1f}%, {acc['runs']} privileged runs."
    )
    lines.append("")
    lines.append(
        f"Predictor: exact {100 * acc['exact_fraction']:.1f}%, within 5% (not exact) "
        f"{100 * acc['within_fraction']:.1f}%, global (confidence 0 or no entry) "
        f"{100 * acc['global'] / max(acc['runs'], 1):.1f}%."
    )
    lines.append("")
    lines.append("| N | " + " | ".join(str(n) for n in acc["triggers"]) + " |")
    lines.append("|---|" + "---|" * len(acc["triggers"]))
    lines.append(
        "| decision correct | "
        + " | ".join(f"{100 * c / max(acc['runs'], 1):.1f}%" for c in acc["decision_correct"])
        + " |"
    )
    lines.append(
        "| runs longer than N | "
        + " | ".join(f"{100 * c / max(acc['runs'], 1):.1f}%" for c in acc["longer_than"])
        + " |"
    )
    lines.append("")
    trig = s["triggers"]
    lines.append("IPC relative to the baseline (rows: migration cycles each way; columns: trigger N):")
    lines.append("")
    lines.append("| migration | " + " | ".join(f"N={n}" for n in trig) + " | dynamic N |")
    lines.append("|---|" + "---|" * (len(trig) + 1))
    for m in s["migration"]:
        row = [p for p in s["grid"] if p["migration"] == m]
        dyn = [p for p in s["dynamic"] if p["migration"] == m]
        d = f"{dyn[0]['speedup']:.3f} (N {', '.join(str(ph['chosen']) for ph in dyn[0]['phases'])})" if dyn else "-"
        lines.append(f"| {m} | " + " | ".join(f"{p['speedup']:.3f}" for p in row) + f" | {d} |")
    lines.append("")
    lines.append("Share of execution time on the OS core (Table 1; migration = 5000 if swept, else the first):")
    lines.append("")
    m0 = 5000 if 5000 in s["migration"] else s["migration"][0]
    row = [p for p in s["grid"] if p["migration"] == m0]
    lines.append("| N | " + " | ".join(str(p["trigger"]) for p in row) + " |")
    lines.append("|---|" + "---|" * len(row))
    lines.append("| OS core time | " + " | ".join(f"{100 * p['os_time_fraction']:.1f}%" for p in row) + " |")
    lines.append("")
    if s["scaling"]:
        p0 = s["scaling"][0]
        lines.append(
            f"User cores sharing one OS core (N={p0['trigger']}, migration {p0['migration']}; "
            "speedup over as many cores without off-load):"
        )
        lines.append("")
        if all(p["offloaded_runs"] == 0 for p in s["scaling"]):
            lines += ["No privileged run reaches N here: nothing is off-loaded and the OS core stays idle.", ""]
        lines.append("| user cores | speedup | OS core time | queue cycles | longest wait |")
        lines.append("|---|---|---|---|---|")
        for p in s["scaling"]:
            lines.append(
                f"| {p['user_cores']} | {p['speedup']:.3f} | {100 * p['os_time_fraction']:.1f}% | "
                f"{p['queue_cycles']} | {p['max_queue_wait']} |"
            )
        lines.append("")
    return "\n".join(lines)


def plots(results: dict[str, dict[str, Any]], out: Path) -> list[Path]:
    """accuracy.png (binary decision accuracy vs N, Figure 4) and ipc.png (relative IPC vs N
    per migration cost, one panel per config, Figure 5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, s in results.items():
        acc = s["baseline"]["accuracy"]
        xs = [max(n, 1) for n in acc["triggers"]]
        ys = [100 * c / max(acc["runs"], 1) for c in acc["decision_correct"]]
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("switch trigger N (instructions; 0 drawn at 1)")
    ax.set_ylabel("correct off-load decisions (%)")
    ax.set_title("Binary prediction hit rate (Figure 4 shape)")
    ax.legend()
    written.append(save_figure(fig, out / "accuracy.png"))

    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 4), squeeze=False)
    for ax, (name, s) in zip(axes[0], results.items()):
        for m in s["migration"]:
            row = [p for p in s["grid"] if p["migration"] == m]
            ax.plot([max(p["trigger"], 1) for p in row], [p["speedup"] for p in row], marker="o", label=f"{m} cycles")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("switch trigger N (instructions; 0 drawn at 1)")
        ax.set_ylabel("IPC relative to no off-load")
        ax.set_title(name)
        ax.legend(title="migration", fontsize=8)
    written.append(save_figure(fig, out / "ipc.png"))
    return written


def run_report(
    paths: Sequence[str],
    out: str | Path,
    triggers: Sequence[int] = DEFAULT_TRIGGERS,
    migration: Sequence[int] = DEFAULT_MIGRATION,
    cores: Sequence[int] = DEFAULT_CORES,
    with_plots: bool = True,
    progress: Callable[[str], None] = lambda m: None,
) -> tuple[str, list[Path]]:
    """Sweep every config and write offload.json, offload.md and the plots into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    for path in paths:
        name = Path(path).stem
        progress(f"{name}")
        results[name] = sweep(load(path), triggers, migration, cores, progress=lambda m, n=name: progress(f"{n}: {m}"))
    text = "\n".join(tables(name, s) for name, s in results.items())
    written = []
    j = out / "offload.json"
    write_text(j, json.dumps(results, indent=1))
    md = out / "offload.md"
    write_text(md, text)
    written += [j, md]
    if with_plots:
        written += plots(results, out)
    return text, written
