"""The docs' headline tables (each paper's main figure as the simulator gives it), made by
running the examples under the current defaults.

Each table sits between ``<!-- headline-table: NAME -->`` and ``<!-- /headline-table -->`` in a
docs page and is rewritten whole: the rows, the figures and the line saying which command
reproduces them. A change to a default, a workload or a mechanism that moves a figure moves the
doc the next time this runs, instead of leaving a stale number in the prose.

The runs go through ``cachecolor.sweep`` into ``out/headlines`` (cached by content hash and the
simulator build, so a second run with nothing changed recomputes nothing; a rebuilt simulator
runs them all again). They take a few minutes of CPU (COLORIS C1's three runs are most of it),
so the test suite does not run this; ``--check`` exits 1 naming each block that differs.

    python tools/headline_tables.py          # rewrite the blocks in place (make docs-headlines)
    python tools/headline_tables.py --check  # exit 1 naming each block that differs
    python tools/headline_tables.py --workers 1 --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_tables import marked_block  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
END = "<!-- /headline-table -->"


@dataclass(frozen=True)
class Run:
    """One run a table needs: config (from the repository root), policy, field-path overrides."""

    config: str
    policy: str
    params: tuple[tuple[str, Any], ...] = ()


@dataclass
class Headline:
    name: str
    page: str
    runs: list[Run]
    render: Callable[[dict[Run, dict[str, Any]]], str]


def _pct(new: float, old: float) -> str:
    return f"{100.0 * (new / old - 1.0):+.1f}%" if old else "n/a"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _proc(doc: dict[str, Any], name: Optional[str] = None) -> dict[str, Any]:
    procs = doc["processes"]
    return procs[0] if name is None else next(p for p in procs if p["name"] == name)


# ---------------------------------------------------------------------------------------------
# ROCS: the pollute buffer on the art, swim and mcf shapes, and Azimi's machine-wide buffer

ROCS_CONFIGS = [
    ("art", "examples/rocs/art.toml", "rocs", ()),
    ("art, ideal PMU", "examples/rocs/art.toml", "rocs", (("pmu.ideal", True),)),
    ("swim", "examples/rocs/swim.toml", "rocs", ()),
    ("mcf", "examples/rocs/mcf.toml", "rocs", ()),
    ("global-pollute", "examples/azimi/global-pollute.toml", "global-pollute", ()),
]


def _rocs_runs() -> list[Run]:
    out = []
    for _, cfg, pol, params in ROCS_CONFIGS:
        # linux reads no counter and takes no sample: the PMU does not change its run
        out += [Run(cfg, "linux"), Run(cfg, pol, params)]
    return list(dict.fromkeys(out))


def _rocs(res: dict[Run, dict[str, Any]]) -> str:
    from cachecolor.reports.base import Run as ReportRun
    from cachecolor.reports.rocs import figure7, table3
    from cachecolor.system import SystemResult

    lines = [
        "| config | policy | IPC linux -> policy | LLC MPKI linux -> policy | LLC miss rate | pollute pages / stack (% from streams) | monitoring / remapping |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, cfg, pol, params in ROCS_CONFIGS:
        base, doc = _proc(res[Run(cfg, "linux")]), res[Run(cfg, pol, params)]
        p = _proc(doc)
        run = ReportRun(cfg, pol, None, SystemResult(doc))
        t3, f7 = table3([run]), figure7([run])
        picked = "no search"
        if len(t3):
            # ROCS Table 3 is the first search's; a phase change may start more
            s = t3.iloc[0]
            share = "" if s["from_streaming"] != s["from_streaming"] else f" ({100 * s['from_streaming']:.0f}%)"
            picked = "none (the run ended mid-search)" if s["pollute_pages"] != s["pollute_pages"] else f"{int(s['pollute_pages']):,} / {int(s['stack_pages']):,}{share}"
            if len(t3) > 1:
                picked += f"; {len(t3) - 1} more search(es)"
        mon = f"{f7['monitoring_pct'].sum():.2f}% / {f7['remapping_pct'].sum():.2f}%" if len(f7) else ""
        lines.append(
            f"| {label} | `{pol}` | {base['ipc']:.4f} -> {p['ipc']:.4f} (**{_pct(p['ipc'], base['ipc'])}**) "
            f"| {base['llc_mpki']:.1f} -> {p['llc_mpki']:.1f} ({_pct(p['llc_mpki'], base['llc_mpki'])}) "
            f"| {base['llc_miss_rate']:.3f} -> {p['llc_miss_rate']:.3f} | {picked} | {mon} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Azimi et al. case study 3: thread clustering on the sharing workload

SHARING = "examples/azimi/sharing.toml"
TC = [
    ("linux", Run(SHARING, "linux")),
    ("thread-cluster (default PMU: realistic)", Run(SHARING, "thread-cluster")),
    ("thread-cluster (ideal PMU)", Run(SHARING, "thread-cluster", (("pmu.ideal", True),))),
]


def _tc(res: dict[Run, dict[str, Any]]) -> str:
    base = _proc(res[TC[0][1]])
    lines = ["| | " + " | ".join(label for label, _ in TC) + " |", "| --- |" + " --- |" * len(TC)]
    cells: dict[str, list[str]] = {"remote accesses (server)": [], "remote stall cycles": [], "IPC": [],
                                   "detection (time, remote share of stalls)": [], "clustering (time, groups)": []}
    for i, (_, run) in enumerate(TC):
        doc = res[run]
        p = _proc(doc)
        change = "" if i == 0 else f" (**{_pct(p['remote_accesses'], base['remote_accesses'])}**)"
        cells["remote accesses (server)"].append(f"{_n(p['remote_accesses'])}{change}")
        cells["remote stall cycles"].append(f"{p['stalls']['remote'] / 1e6:.1f} M")
        cells["IPC"].append(f"{p['ipc']:.4f}" + ("" if i == 0 else f" ({_pct(p['ipc'], base['ipc'])})"))
        rep = doc.get("policy_report") or {}
        det = rep.get("detections") or []
        clu = rep.get("clusterings") or []
        cells["detection (time, remote share of stalls)"].append(
            f"{det[0]['time'] / 1e6:.1f} M cycles ({100 * det[0]['remote_stall_share']:.1f}%)" if det else "-")
        cells["clustering (time, groups)"].append(
            f"{clu[0]['time'] / 1e6:.1f} M cycles, `{json.dumps(clu[0]['clusters'], separators=(',', ':'))}`" if clu else "-")
    lines += [f"| {k} | " + " | ".join(v) + " |" for k, v in cells.items()]
    return "\n".join(lines)


def _tc_estimates(res: dict[Run, dict[str, Any]]) -> str:
    """Azimi section 2's multiplexing error: the realistic run's estimate of each event
    against the exact count."""
    doc = res[TC[1][1]]
    lines = ["| event | exact | estimated | on a counter | error |", "| --- | --- | --- | --- | --- |"]
    for e in doc["pmu"]["estimates"]:
        if e["exact"] == 0 and e["estimated"] == 0:
            continue  # an event this machine never counts here (no L2 of its own)
        lines.append(f"| {e['event']} | {_n(e['exact'])} | {_n(e['estimated'])} | {100 * e['running']:.0f}% | {100 * e['error']:+.1f}% |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# COLORIS section 4.3, C1: recoloring gives the cache-hungry program colors

C1 = "examples/coloris/recolor-c1.toml"
C1_SELECTIVE = "examples/coloris/recolor-c1-selective.toml"
C1_RUNS = [
    ("static (C3: no recoloring)", Run(C1, "static")),
    ("coloris, Redistribution", Run(C1, "coloris")),
    ("coloris, Selective Moving", Run(C1_SELECTIVE, "coloris")),
]


def _c1(res: dict[Run, dict[str, Any]]) -> str:
    base = _proc(res[C1_RUNS[0][1]], "hungry")
    total0 = sum(p["ipc"] for p in res[C1_RUNS[0][1]]["processes"])
    lines = ["| run | `hungry` IPC | `hungry` LLC miss rate | the four programs' summed IPC | pages recolored (eager + lazy) |",
             "| --- | --- | --- | --- | --- |"]
    for i, (label, run) in enumerate(C1_RUNS):
        doc = res[run]
        h = _proc(doc, "hungry")
        total = sum(p["ipc"] for p in doc["processes"])
        moved = sum(p["recolors"] + p["lazy_recolors"] for p in doc["processes"])
        ipc = f"{h['ipc']:.4f}" + ("" if i == 0 else f" (**{_pct(h['ipc'], base['ipc'])}**)")
        tot = f"{total:.3f}" + ("" if i == 0 else f" ({_pct(total, total0)})")
        lines.append(f"| {label} | {ipc} | {h['llc_miss_rate']:.3f} | {tot} | {_n(moved)} |")
    return "\n".join(lines)


HEADLINES = [
    Headline("rocs", "docs/rocs.md", _rocs_runs(), _rocs),
    Headline("thread-cluster", "docs/azimi.md", [r for _, r in TC], _tc),
    Headline("thread-cluster-estimates", "docs/azimi.md", [TC[1][1]], _tc_estimates),
    Headline("coloris-c1", "docs/coloris.md", [r for _, r in C1_RUNS], _c1),
]


def _command(h: Headline) -> str:
    runs = f"{len(h.runs)} run" + ("s" if len(h.runs) > 1 else "")
    return (f"Generated by `make docs-headlines` (tools/headline_tables.py) from {runs} of the configs named, "
            "each with its own seeds and the current defaults.")


def run_all(headlines: list[Headline], out: Path, workers: Optional[int], progress: bool) -> dict[Run, dict[str, Any]]:
    from cachecolor.sweep import Point, sweep

    runs = list(dict.fromkeys(r for h in headlines for r in h.runs))
    points = [Point(str(ROOT / r.config), r.policy, None, dict(r.params)) for r in runs]
    res = sweep(points, out, workers=workers, progress=progress, write_table=False)
    docs = res.results()
    bad = [r for r, d in zip(runs, docs) if d is None]
    if bad:
        raise SystemExit(f"headline runs failed: {', '.join(f'{r.config} {r.policy}' for r in bad)} (see {out}/points)")
    return dict(zip(runs, docs))


def splice(text: str, name: str, page: str, body: str) -> str:
    """``text`` with the block ``name`` (between ``<!-- headline-table: NAME -->`` and ``END``)
    replaced by ``body``."""
    a, b = marked_block(text, f"<!-- headline-table: {name} -->", END, page)
    return text[:a] + "\n" + body + "\n" + text[b:]


def updated(text: str, h: Headline, res: dict[Run, dict[str, Any]]) -> str:
    return splice(text, h.name, h.page, h.render(res) + "\n\n" + _command(h))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python tools/headline_tables.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 naming each block that differs; write nothing")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "headlines", help="where the runs are kept (default out/headlines)")
    ap.add_argument("--workers", type=int, default=None, help="processes for the runs (default: all cores)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers {args.workers}: expected 1 or more")
    res = run_all(HEADLINES, args.out, args.workers, not args.quiet)
    differ = []
    for h in HEADLINES:
        path = ROOT / h.page
        text = path.read_text()
        new = updated(text, h, res)
        if new != text:
            differ.append(h)
            if not args.check:
                path.write_text(new)
                print(f"updated the {h.name} headline table in {h.page}")
    if args.check:
        for h in differ:
            print(f"{h.page}: the {h.name} headline table differs from the current defaults (run make docs-headlines)", file=sys.stderr)
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
