"""ROCS and global-pollute tables and plots for ``cachecolor report`` (papers/000 Table 3,
Figures 7, 8 and 10; Azimi et al. case study 2), the best-offline harness (ROCS Figure 8) and the
ROCS part of ``cachecolor demo``.

Everything here reads what the runs wrote: the processes' kernel cycles by path (monitoring =
sample interrupts, remapping = recolor copies + shootdowns: Figure 7's split), and the policy's
own report (``policy_report``: per unit, its searches with the miss-rate stack's size, the step
IPCs, the pages chosen, the profile the stack came from and, with ``verify_cycles``, the profile
taken with the buffer in place). Address ranges of the workload's arrays come from the effective
config: a ``mix`` part whose pattern is ``sequential`` or ``strided`` is a *streaming* array, any
other part a *reused* one.

Best offline (``best_offline``): the config is run again with ``[policy.rocs] offline_pages = N``
for N over a grid up to the stack's size (the same seed gives the same profile, hence the same
stack); the best IPC is ROCS Figure 8's "Best Offline". ``best_offline_points`` sets how many
runs the report spends on it per rocs run (config and seed), one after another after the sweep;
it is 0 (none) unless asked for (``cachecolor report --best-offline N``): at 17 points a report
over the 19 robustness configs and 5 seeds spent more than 20 minutes in it after a 3-minute sweep.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .. import _core
from .base import PolicyReporter, Run, write_report

if TYPE_CHECKING:
    from .._core import RocsReport, RocsSearch

#: The policies that run the pollute engine: those reporting its struct (the registry's lines).
POLLUTE_POLICIES = tuple(p for p, struct in _core.POLICY_REPORTS.items() if struct == "RocsReport")
#: Runs of the best-offline sweep per rocs run in a report (0, the default, turns it off;
#: ``cachecolor report --best-offline N`` sets it).
best_offline_points = 0
#: Where Figure 8's best-offline runs are stored as sweep points (``report`` sets its ``--out``,
#: so a report run again takes them from there); None: a temporary directory per call.
best_offline_dir: Optional[Path] = None
#: Whether Figure 8 says on stderr which best-offline runs it starts (``report -q``: no).
best_offline_progress = True


def arrays(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The arrays of the config's ``mix`` workloads: ``process``, ``name`` (pattern@base),
    ``lo``, ``hi`` (byte addresses) and ``streaming``; and, for a thread that replays a
    captured trace with a memory map, its data objects of a page or more by name
    (``object_ranges``: globals, heap, stacks, anonymous mappings), ``streaming`` None
    (unknown)."""
    out = []
    for proc in config.get("processes", []):
        for th in proc.get("threads", []):
            for lo, hi, name in _trace_objects(th):
                entry = {"process": proc["name"], "name": name, "lo": lo, "hi": hi, "streaming": None}
                if entry not in out:
                    out.append(entry)
            for ph in (th.get("workload") or {}).get("phases", []):
                for part in ph.get("parts") or []:
                    lo = int(part.get("base", 0x2_0000_0000))
                    hi = lo + int(_bytes(part["footprint"]))
                    entry = {
                        "process": proc["name"],
                        "name": f"{part['pattern']}@{lo:#x}",
                        "lo": lo,
                        "hi": hi,
                        "streaming": part["pattern"] in ("sequential", "strided"),
                    }
                    if entry not in out:
                        out.append(entry)
    return out


def _trace_objects(thread: Any) -> list[tuple[int, int, str]]:
    """``(lo, hi, name)`` of the data objects of a thread's native trace that carries a memory
    map (none otherwise)."""
    from ..annotate import memory_map, object_ranges

    trace = thread.get("trace") if isinstance(thread, dict) else None
    if not trace or thread.get("format", "native") != "native" or not os.path.exists(trace):
        return []
    try:
        if memory_map(trace) is None:
            return []
        objs = object_ranges(trace)
    except (ValueError, OSError):
        return []
    data = ("symbol", "heap", "stack", "thread stack", "anon")
    # the program's own globals, not the libraries' (named LIB:NAME)
    libs = tuple(f"{name}:" for _lo, _hi, name, kind in objs if kind == "file")
    return [(lo, hi, name) for lo, hi, name, kind in objs
            if kind in data and hi - lo >= 4096 and not name.startswith(libs)]


def _bytes(v: Any) -> int:
    """A size from a config: bytes, or text read by the one size parser (``_core.parse_size``)."""
    if isinstance(v, (int, float)):
        return int(v)
    from .. import _core

    return _core.parse_size(str(v))


def _page_size(doc: dict[str, Any]) -> int:
    h = doc["config"]["machine"]["hierarchy"]
    return _bytes(h.get("page_size", 4096))


def _searches(run: Run) -> list[RocsSearch]:
    """The searches of a ``rocs`` / ``global-pollute`` run's report (crates/sim/src/policy/rocs/report.rs)."""
    rep: Optional[RocsReport] = run.result.policy_report
    return [s for u in rep["units"] for s in u["searches"]] if rep else []


def _in(arrs: list[dict[str, Any]], addr: int, streaming: Optional[bool] = None) -> Optional[dict[str, Any]]:
    for a in arrs:
        if a["lo"] <= addr < a["hi"] and (streaming is None or a["streaming"] == streaming):
            return a
    return None


def table3(runs: list[Run]) -> Any:
    """ROCS Table 3: pages in the stack, pages picked (% of the stack and of all pages mapped),
    and the fraction of picked pages that belong to streaming arrays."""
    import pandas as pd

    rows = []
    for r in runs:
        if r.policy not in POLLUTE_POLICIES:
            continue
        doc = r.result.to_dict()
        page = _page_size(doc)
        arrs = arrays(doc["config"])
        # Pages mapped at the fullest moment (the report's `frames` counts recolor copies too).
        frames = max((sum(p["frames"] for p in iv["processes"]) for iv in doc["intervals"]), default=0)
        for i, s in enumerate(_searches(r)):
            # A search the run's end or its processes' exit cut short chose nothing yet
            # (`chosen: null`): its row says so with NaN rather than a count.
            chosen = s["chosen"]
            picked = s["pages"] or []
            streaming = sum(1 for _, vpn in picked if _in(arrs, vpn * page, True))
            nan = float("nan")
            rows.append(
                {
                    "config": Path(r.config).stem,
                    "policy": r.policy,
                    "seed": r.seed,
                    "search": i,
                    "stack_pages": s["stack_pages"],
                    "pollute_pages": nan if chosen is None else chosen,
                    "pct_of_stack": nan if chosen is None else 100.0 * chosen / max(s["stack_pages"], 1),
                    "pct_of_mapped": nan if chosen is None else 100.0 * chosen / max(frames, 1),
                    "from_streaming": streaming / max(len(picked), 1)
                    if chosen is not None and any(a["streaming"] is not None for a in arrs) else nan,
                    # Why a search measured nothing (its 0 pages are not a search's verdict).
                    "skipped": s.get("skipped") or "",
                }
            )
    return pd.DataFrame(rows)


def figure7(runs: list[Run]) -> Any:
    """ROCS Figure 7: run-time overhead split into monitoring (sample interrupts) and remapping
    (page copies and shootdowns), as % of the process's cycles."""
    import pandas as pd

    rows = []
    for r in runs:
        if r.policy not in POLLUTE_POLICIES:
            continue
        for p in r.result.to_dict()["processes"]:
            k = p["kernel"]
            mon = k["interrupt"]["cycles"]
            rem = k["recolor"]["cycles"] + k["shootdown"]["cycles"]
            rows.append(
                {
                    "config": Path(r.config).stem,
                    "policy": r.policy,
                    "seed": r.seed,
                    "process": p["name"],
                    "samples": k["interrupt"]["count"],
                    "remaps": k["recolor"]["count"],
                    "monitoring_pct": 100.0 * mon / p["cycles"],
                    "remapping_pct": 100.0 * rem / p["cycles"],
                    "total_pct": 100.0 * (mon + rem) / p["cycles"],
                }
            )
    return pd.DataFrame(rows)


def figure10(runs: list[Run]) -> Any:
    """ROCS Figure 10: per array, the sampled miss rate in the profile the stack came from
    (before) and in the profile taken with the buffer in place (after, needs ``verify_cycles``)."""
    import pandas as pd

    rows = []
    for r in runs:
        if r.policy not in POLLUTE_POLICIES:
            continue
        doc = r.result.to_dict()
        page = _page_size(doc)
        arrs = arrays(doc["config"])
        for i, s in enumerate(_searches(r)):
            for a in arrs:
                def rate(profile: list[tuple[int, int, int, int]]) -> tuple[int, float]:
                    n = m = 0
                    for _pid, vpn, samples, misses in profile:
                        if a["lo"] <= vpn * page < a["hi"]:
                            n += samples
                            m += misses
                    return n, (m / n if n else float("nan"))

                nb, before = rate(s["profile"])
                na, after = rate(s["verify_profile"])
                rows.append(
                    {
                        "config": Path(r.config).stem,
                        "policy": r.policy,
                        "seed": r.seed,
                        "search": i,
                        "array": a["name"],
                        "streaming": a["streaming"],
                        "samples_before": nb,
                        "miss_rate_before": before,
                        "samples_after": na,
                        "miss_rate_after": after,
                    }
                )
    return pd.DataFrame(rows)


def best_offline(
    config: Any,
    seed: Optional[int] = None,
    points: Optional[list[int]] = None,
    n_points: int = 17,
    out_dir: Any = None,
) -> Any:
    """ROCS Figure 8's best offline: run the config file ``config`` under ``rocs`` with
    ``offline_pages = N`` for each N of ``points`` (default: ``n_points`` evenly spaced multiples
    of the search step, from 0 to the stack's size, from one ``rocs`` run), one run each, as
    points of ``cachecolor.sweep`` (stored in ``out_dir``, default ``best_offline_dir``, and
    taken from there when run again; a temporary directory without either); returns a frame of
    ``pages``, ``ipc`` and ``llc_mpki`` (summed over processes) with the best row flagged."""
    import pandas as pd

    from ..sweep import Point

    def run(pages: list[Optional[int]]) -> list[Any]:
        pts = [Point(str(config), "rocs", seed, {} if n is None else {"policy.rocs.offline_pages": int(n)}) for n in pages]
        return _sweep_results(pts, out_dir if out_dir is not None else best_offline_dir)

    if points is None:
        [first] = run([None])
        searches = [s for u in (first.policy_report or {}).get("units", []) for s in u["searches"]]
        if not searches:
            return pd.DataFrame(columns=["pages", "ipc", "llc_mpki", "best"])
        size, step = searches[0]["stack_pages"], max(searches[0]["step_pages"], 1)
        steps = list(range(0, size + step, step))
        steps[-1] = size
        if len(steps) > n_points:
            stride = (len(steps) - 1) / (n_points - 1)
            steps = sorted({steps[round(i * stride)] for i in range(n_points)})
        points = steps
    rows = []
    for n, result in zip(points, run([int(n) for n in points])):
        res = result.to_dict()
        ins = sum(p["instructions"] for p in res["processes"])
        cyc = sum(p["cycles"] for p in res["processes"])
        miss = sum(p["llc_misses"] for p in res["processes"])
        rows.append({"pages": int(n), "ipc": ins / cyc, "llc_mpki": 1000.0 * miss / max(ins, 1)})
    frame = pd.DataFrame(rows)
    frame["best"] = frame["ipc"] == frame["ipc"].max()
    return frame


def _sweep_results(points: list[Any], out_dir: Any) -> list[Any]:
    """The results of ``points`` run by ``cachecolor.sweep`` in this process, in order (stored
    in ``out_dir``; a temporary directory when None); a failed point raises its error."""
    import tempfile

    from ..sweep import SweepError, read_point, results_of, sweep

    with tempfile.TemporaryDirectory(prefix="cachecolor-best-offline-") as tmp:
        out = Path(out_dir) if out_dir is not None else Path(tmp)
        res = sweep(points, out, executor="serial", progress=False, write_table=False)
        got = {p.key: r for p, r in results_of(out, res.points)}
        for p in res.points:
            if p.key not in got:
                raise SweepError(f"{p.point.label()}: {(read_point(out, p.key) or {}).get('error', 'unknown error')}")
        return [got[p.key] for p in res.points]


def figure8(runs: list[Run]) -> Any:
    """ROCS Figure 8: IPC of rocs over linux, and of best offline over linux (``best_offline``
    with ``best_offline_points`` runs; skipped when 0). The IPC is the system's, as ROCS Figure 8
    reports it: all the config's processes' instructions over their cycles, one row per seed.
    The comparison table's ``ipc_vs_baseline`` is each process's IPC over its own under the
    config's first policy, so a victim slowed by 21% beside a polluter barely moved shows there
    as -21% while Figure 8 shows the system's change."""
    import pandas as pd

    linux = {(r.config, r.seed): r for r in runs if r.policy == "linux"}
    rows = []
    for r in runs:
        if r.policy != "rocs" or (r.config, r.seed) not in linux:
            continue
        base = linux[(r.config, r.seed)].result.to_dict()["processes"]
        mine = r.result.to_dict()["processes"]
        ipc = lambda ps: sum(p["instructions"] for p in ps) / sum(p["cycles"] for p in ps)  # noqa: E731
        row = {
            "config": Path(r.config).stem,
            "seed": r.seed,
            "linux_ipc": ipc(base),
            "rocs_ipc": ipc(mine),
            "rocs_speedup_pct": 100.0 * (ipc(mine) / ipc(base) - 1.0),
        }
        if best_offline_points > 0:
            if best_offline_progress:
                print(f"best offline: {Path(r.config).stem}, seed {r.seed}: up to {best_offline_points + 1} runs",
                      file=sys.stderr, flush=True)
            off = best_offline(r.config, r.seed, n_points=best_offline_points)
            if len(off):
                b = off[off["best"]].iloc[0]
                row.update(
                    {
                        "best_offline_pages": int(b["pages"]),
                        "best_offline_ipc": float(b["ipc"]),
                        "best_offline_speedup_pct": 100.0 * (b["ipc"] / ipc(base) - 1.0),
                        "rocs_vs_best_pct": 100.0 * (ipc(mine) / b["ipc"] - 1.0),
                    }
                )
        rows.append(row)
    return pd.DataFrame(rows)


def _tables(runs: list[Run], policy: str = "rocs") -> list[tuple[str, Any]]:
    """Every ROCS table of the rocs and global-pollute runs in ``runs`` (linux runs are kept as
    Figure 8's baseline)."""
    out = [
        (f"{policy} - ROCS Table 3: pollute pages (from_streaming: fraction of them in streaming arrays)", table3(runs)),
        (f"{policy} - ROCS Figure 7: overhead (monitoring = sample interrupts, remapping = copies + shootdowns)", figure7(runs)),
        (f"{policy} - ROCS Figure 10: sampled miss rate per array before and with the pollute buffer", figure10(runs)),
    ]
    if any(r.policy == "rocs" for r in runs):
        out.append((f"{policy} - ROCS Figure 8: speedup over linux, rocs and best offline (the IPC of all the "
                    "config's processes together, their instructions over their cycles, per seed; the comparison "
                    "table's ipc_vs_baseline is per process and averaged over seeds, so with several processes "
                    "the two differ)", figure8(runs)))
    return out


def _plots(runs: list[Run], out: Path) -> list[Path]:
    """Per rocs/global-pollute run: the search (IPC per pages mapped, ROCS Algorithm 1) and the
    per-page sampled miss rates before and with the buffer (ROCS Figure 10)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for r in runs:
        if r.policy not in POLLUTE_POLICIES:
            continue
        searches = _searches(r)
        if not searches:
            continue
        s = searches[0]
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        if s.get("skipped"):
            # Nothing was measured: no baseline IPC to draw (it had been drawn as an IPC of 0).
            a.text(0.5, 0.5, f"search skipped:\n{s['skipped']}", ha="center", va="center", transform=a.transAxes, wrap=True)
            a.set_xticks([])
            a.set_yticks([])
        else:
            xs = [0] + [st["pages"] for st in s["steps"]]
            ys = [s["baseline_ipc"]] + [st["ipc"] for st in s["steps"]]
            a.plot(xs, ys, marker="o")
            if s["chosen"] is not None:
                a.axvline(s["chosen"], color="red", linestyle="--", label=f"kept {s['chosen']}")
            else:
                a.plot([], [], " ", label="unfinished: the run ended mid-search")
            a.legend()
        a.set_xlabel("pages mapped to the pollute buffer (top of the stack)")
        a.set_ylabel("IPC over the step's interval")
        a.set_title("Algorithm 1 FindPollutePages")
        for prof, label in ((s["profile"], "before"), (s["verify_profile"], "with buffer")):
            if prof:
                b.plot([row[1] - prof[0][1] for row in prof], [row[3] / row[2] for row in prof], ".", label=label, alpha=0.6)
        b.set_xlabel("page (index from the lowest sampled page)")
        b.set_ylabel("sampled miss rate")
        b.set_title("per-page profile (ROCS Figures 3, 10)")
        b.legend()
        fig.suptitle(f"{Path(r.config).stem}: {r.policy}" + ("" if r.seed is None else f", seed {r.seed}"))
        fig.tight_layout()
        path = out / f"{Path(r.config).stem}-{r.policy}{'' if r.seed is None else f'-{r.seed}'}-search.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def reporter(policy: str) -> PolicyReporter:
    """The reporter of one pollute-engine policy (``reports.BY_REPORT``): its own runs (and
    linux, the baseline), so that a report of several such policies does not print the tables
    twice."""

    def own(runs: list[Run]) -> list[Run]:
        return [r for r in runs if r.policy in (policy, "linux")]

    return PolicyReporter(tables=lambda runs: _tables(own(runs), policy), plots=lambda runs, out: _plots(own(runs), out))



def demo(config: Path, out_dir: Path, quiet: bool = False) -> dict[str, Any]:
    """The ROCS part of ``cachecolor demo``: run the art-shaped config under linux and rocs,
    print the comparison and ROCS tables, write the report into ``out_dir``."""
    global best_offline_points
    import sys

    from .base import run_matrix

    say = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    saved, best_offline_points = best_offline_points, 0  # the demo stays fast
    try:
        # The demo's two runs: the baseline and ROCS itself.
        runs = run_matrix([config], policies=["linux", "rocs"], progress=lambda m: say(f"simulate {m}"))  # chosen policies
        text, written = write_report(runs, out_dir)
    finally:
        best_offline_points = saved
    procs = {r.policy: r.result.to_dict()["processes"][0] for r in runs}
    l, r = procs["linux"], procs["rocs"]
    print("ROCS (Soares, Tam, Stumm, MICRO 2008) on an art-shaped program, PowerPC 970FX L2:")
    print(f"  linux: IPC {l['ipc']:.4f}  LLC MPKI {l['llc_mpki']:.1f}")
    print(f"  rocs:  IPC {r['ipc']:.4f}  LLC MPKI {r['llc_mpki']:.1f}  "
          f"({100 * (r['ipc'] / l['ipc'] - 1):+.1f}% IPC, {100 * (r['llc_mpki'] / l['llc_mpki'] - 1):+.1f}% MPKI)")
    print()
    print(text)
    print(f"wrote the ROCS report to {out_dir}/report.md ({len(written)} files)")
    return {"linux": l, "rocs": r}  # chosen policies
