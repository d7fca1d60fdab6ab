"""The core of ``cachecolor report`` (``reports/__init__.py`` runs it on ``sweep`` and holds the
registry of policy reporters).

``run_matrix`` runs every (config, policy, seed) through ``cachecolor.sweep`` in this process (the
API for scripts and tests; the CLI's ``report_sweep`` runs the same points on a pool); ``comparison`` is the table
every report has (one row per config, policy, seed and process: IPC, LLC miss rate and MPKI,
page-walk cycles, remote accesses, pages recolored, kernel cycles); ``aggregate`` folds the seeds
of each (config, policy, process) into a mean and a 95% interval (Student's t); a policy adds
tables and plots of its own through a ``PolicyReporter`` in the registry (keyed by the policy
name; it is given every run, so it can set its policy beside the others, e.g. ROCS against
``linux``). ``write_report`` writes the CSVs and ``report.md`` (pipe tables, numbers for people:
``reports/fmt.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence, Union

from ..system import SystemResult, load_system_config
from ..sweep import config_paths
from . import fmt

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Run:
    """One system run of a report: which config, under which policy and seed, and its result."""

    config: str
    policy: str
    seed: Optional[int]
    result: SystemResult


@dataclass
class PolicyReporter:
    """A policy's own part of a report: ``tables(runs)`` returns (title, DataFrame) pairs and
    ``plots(runs, out_dir)`` writes PNG files and returns their paths. Both get every run of the
    matrix (all configs, policies and seeds)."""

    tables: Callable[[list[Run]], list[tuple[str, Any]]] = lambda runs: []
    plots: Callable[[list[Run], Path], list[Path]] = lambda runs, out: []


class MatrixError(Exception):
    """A run of the matrix failed: ``message`` names its config and policy, ``runs`` holds the
    runs finished before it (so a caller can still report them) and ``cause`` the error."""

    def __init__(self, message: str, runs: list[Run], cause: BaseException):
        super().__init__(message)
        self.runs = runs
        self.cause = cause


def run_matrix(
    paths: Iterable[PathLike],
    policies: Optional[Sequence[str]] = None,
    seeds: Sequence[Optional[int]] = (None,),
    progress: Optional[Callable[[str], None]] = None,
    *,
    out_dir: Optional[PathLike] = None,
) -> list[Run]:
    """Run every config under every policy and seed, through ``cachecolor.sweep`` as the CLI's
    report does (one process, ``executor="serial"``): the points are stored in ``out_dir`` and
    taken from there when run again (a temporary directory, emptied afterwards, without it).
    With ``policies`` None, each config runs under ``linux`` and the policy its ``[policy]
    name`` gives (once if that is ``linux``). A failing run raises ``MatrixError`` with the
    runs finished before it."""
    import json
    import tempfile

    from ..sweep import SweepError, grid, read_point, results_of, sweep
    from ..system import policy_label

    wanted = list(dict.fromkeys(policies)) if policies else None
    points = []
    for path in config_paths(paths):
        names = wanted or _default_policies(load_system_config(path))
        points += [p for name in names for p in grid([path], None, [name], list(dict.fromkeys(seeds)))]
    done = 0

    def step(i: int, n: int, label: str) -> None:
        nonlocal done
        if progress and done < len(points):
            pt = points[done]
            progress(f"{Path(pt.config).name}: {pt.policy}" + ("" if pt.seed is None else f", seed {pt.seed}"))
        done += 1

    with tempfile.TemporaryDirectory(prefix="cachecolor-matrix-") as tmp:
        out = Path(out_dir) if out_dir is not None else Path(tmp)
        try:
            res = sweep(points, out, executor="serial", progress=step if progress else False, write_table=False)
        except SweepError as e:
            raise MatrixError(str(e), [], e) from e
        ok = {p.key: (p, r) for p, r in results_of(out, res.points)}
        runs: list[Run] = []
        for p in res.points:
            if p.key not in ok:
                rec = read_point(out, p.key) or {}
                pt = p.point
                cause = RuntimeError(rec.get("error", "unknown error"))
                raise MatrixError(f"{pt.config}: policy {pt.policy}" + ("" if pt.seed is None else f", seed {pt.seed}")
                                  + f": {cause}", runs, cause)
            result = ok[p.key][1]
            runs.append(Run(str(p.point.config), policy_label(json.loads(p.config_json), p.point.policy), p.point.seed,
                            result))
    return runs


def _default_policies(cfg: dict[str, Any]) -> list[str]:
    own = cfg.get("policy", {}).get("name", "linux")
    return ["linux"] if own == "linux" else ["linux", own]


def comparison(runs: Sequence[Run]) -> Any:
    """One row per run and process: ``config`` (the file's stem), ``policy``, ``seed``,
    ``process``, ``ipc``, ``llc_miss_rate``, ``llc_mpki``, ``page_walk_cycles``,
    ``remote_accesses``, ``recolored`` (eager + lazy), ``kernel_cycles`` (all paths),
    ``cycles``, and ``ipc_vs_baseline``: the IPC over that of the same process (by position),
    config and seed under the config's first policy (1.0 for the first policy's own rows)."""
    import pandas as pd

    baseline_policy: dict[str, str] = {}
    for r in runs:
        baseline_policy.setdefault(r.config, r.policy)
    base_ipc: dict[tuple[str, Optional[int], int], float] = {}
    for r in runs:
        if r.policy == baseline_policy[r.config]:
            for i, p in enumerate(r.result.to_dict()["processes"]):
                base_ipc.setdefault((r.config, r.seed, i), p["ipc"])
    rows = []
    for r in runs:
        for i, p in enumerate(r.result.to_dict()["processes"]):
            base = base_ipc.get((r.config, r.seed, i))
            rows.append(
                {
                    "config": Path(r.config).stem,
                    "policy": r.policy,
                    "seed": r.seed,
                    "process": p["name"],
                    "ipc": p["ipc"],
                    "llc_miss_rate": p["llc_miss_rate"],
                    "llc_mpki": p["llc_mpki"],
                    "page_walk_cycles": p["page_walk_cycles"],
                    "remote_accesses": p["remote_accesses"],
                    "recolored": p["recolors"] + p["lazy_recolors"],
                    "kernel_cycles": sum(k["cycles"] for k in p["kernel"].values()),
                    "cycles": p["cycles"],
                    "ipc_vs_baseline": p["ipc"] / base if base else float("nan"),
                }
            )
    return pd.DataFrame(rows)


def write_report(
    runs: Sequence[Run], out_dir: PathLike, plots: bool = True, reporters: Optional[dict[str, PolicyReporter]] = None,
    tables: Optional[list[tuple[str, Any]]] = None, frame: Any = None, verdicts: Optional[tuple[Any, Any, Any]] = None,
) -> tuple[str, list[Path]]:
    """Write ``comparison.csv`` (every run and process; first, so a failing policy table loses
    nothing of it), one CSV per policy table, ``report.md`` (the seeds' means and 95% intervals
    when there are several seeds, then every policy table, as pipe tables) and the policies'
    plots into ``out_dir``; return the report's text and the files written. ``reporters``
    defaults to the registry (``cachecolor.reports.REPORTERS``); ``frame`` and ``tables``, when
    given, are ``comparison``'s and ``report_tables``'s already computed (a table may run
    simulations: ROCS Figure 8's best offline). ``verdicts`` (the verdict, oracle and candidate
    tables of ``report --oracle``) open ``report.md`` and are written as ``verdicts.csv``,
    ``oracles.csv`` and ``oracle-candidates.csv``."""
    if reporters is None:
        from . import REPORTERS as reporters
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if frame is None:
        frame = comparison(runs)
    csv = out / "comparison.csv"
    _atomic_write(csv, frame.to_csv(index=False))
    written.append(csv)
    if tables is None:
        tables = report_tables(runs, frame, reporters)
    if plots:
        for name in _policies_in(runs):
            reporter = reporters.get(name)
            if reporter is not None:
                written.extend(reporter.plots(list(runs), out))
    from . import verdict

    # report.md opens with the headroom verdict table (report --oracle), then one sentence per
    # config on the policy's change with its interval and warnings (verdict.opening, which
    # report.html renders too).
    opening = verdict.opening(runs, frame, verdicts)
    parts = []
    slugs = {"comparison"}
    if verdicts is not None:
        from .verdicts import verdict_markdown

        for name, table in zip(("verdicts", "oracles", "oracle-candidates"), verdicts):
            slugs.add(name)
            csv = out / f"{name}.csv"
            _atomic_write(csv, table.to_csv(index=False))
            written.append(csv)
        parts.append(verdict_markdown(opening.verdicts, opening.oracles))
    if opening.sentences:
        parts.append(verdict.markdown(opening.sentences))
    for i, (title, table) in enumerate(tables):
        if i > 0:
            slug = base = _slug(title)
            k = 2
            while slug in slugs:
                slug, k = f"{base}-{k}", k + 1
            slugs.add(slug)
            csv = out / f"{slug}.csv"
            _atomic_write(csv, table.to_csv(index=False))
            written.append(csv)
        parts.append(f"## {title}\n\n{fmt.markdown_table(table)}\n")
    notes = timing_notes(runs)
    if notes:
        parts.append("## Timing model\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    text = "\n".join(parts)
    md = out / "report.md"
    _atomic_write(md, text)
    written.append(md)
    return text, written


def timing_notes(runs: Sequence[Run]) -> list[str]:
    """Per config of the report, where its machine's timing was validated against hardware, or
    that it was not (``cachecolor.validate.validation_note``; docs/validation.md)."""
    from .. import _core
    from ..system import load_system_config
    from ..validate import validation_note

    notes = []
    for config in dict.fromkeys(str(r.config) for r in runs):
        try:
            text = Path(config).read_text(errors="replace")
            raw = load_system_config(config)
        except (OSError, _core.ConfigError):  # a config given as a dict, or gone since the run: no note
            continue
        notes.append(f"{Path(config).stem}: {validation_note(raw, text)}")
    return notes


def policy_warning_table(runs: Sequence[Run]) -> Any:
    """One row per config, policy and warning (the seeds that gave it): a policy that never
    acted had left the report's numbers to speak alone (an `mrc-partition` column identical to
    linux's, with no word why)."""
    import re

    import pandas as pd

    rows: dict[tuple[str, str, str], list[Any]] = {}
    for r in runs:
        for w in r.result.warnings():
            # The counts in a warning differ from seed to seed; the rows group by its words.
            rows.setdefault((Path(r.config).stem, r.policy, re.sub(r"\d[\d,.]*", "N", w)), []).append((r.seed, w))
    return pd.DataFrame([
        {"config": c, "policy": p, "seeds": ", ".join("-" if s is None else str(s) for s, _ in got), "warning": got[0][1]}
        for (c, p, _), got in rows.items()
    ])


def report_tables(runs: Sequence[Run], frame: Any, reporters: dict[str, PolicyReporter]) -> list[tuple[str, Any]]:
    """The report's tables in order: the comparison (seeds aggregated when there are several),
    then each policy reporter's."""
    several = frame["seed"].nunique(dropna=False) > 1 if len(frame) else False
    if several:
        first = ("comparison: mean and 95% interval over seeds (ipc_vs_baseline: IPC over the config's first policy)", aggregate(frame))
    else:
        first = ("comparison (ipc_vs_baseline: IPC over the config's first policy)", frame.drop(columns=["seed"]) if frame["seed"].isna().all() else frame)
    tables = [first]
    from . import robustness  # a table per policy against the baseline

    tables.extend(robustness.tables(frame))
    warned = policy_warning_table(runs)
    if len(warned):
        tables.append(("policy warnings: what a policy skipped or never did (the first seed's words; `cachecolor simulate` prints them on stderr)", warned))
    for name in _policies_in(runs):
        reporter = reporters.get(name)
        if reporter is not None:
            tables.extend(reporter.tables(list(runs)))
    return tables


METRICS = ("ipc", "ipc_vs_baseline", "llc_miss_rate", "llc_mpki", "cycles", "page_walk_cycles", "remote_accesses", "recolored", "kernel_cycles")


def aggregate(frame: Any, by: Sequence[str] = ("config", "policy", "process")) -> Any:
    """Fold the seeds: one row per ``by`` group with ``seeds`` (how many) and, per metric, the
    mean and the half-width of its 95% confidence interval (``<metric>_ci``; Student's t with
    n - 1 degrees of freedom; NaN with one seed). Rows keep their first appearance's order."""
    import pandas as pd

    rows = []
    for keys, g in frame.groupby(list(by), sort=False, dropna=False):
        row = dict(zip(by, keys if isinstance(keys, tuple) else (keys,)))
        row["seeds"] = len(g)
        for m in METRICS:
            if m in g:
                mean, half = fmt.mean_ci(g[m].to_numpy(dtype=float))
                row[m] = mean
                row[f"{m}_ci"] = half
        rows.append(row)
    return pd.DataFrame(rows)


def _policies_in(runs: Sequence[Run]) -> list[str]:
    seen: list[str] = []
    for r in runs:
        if r.policy not in seen:
            seen.append(r.policy)
    return seen


def _slug(title: str) -> str:
    keep = "".join(c if c.isalnum() else "-" for c in title.lower().split("(")[0].strip())
    return "-".join(filter(None, keep.split("-")))[:60] or "table"


def _atomic_write(path: Path, text: str) -> None:
    # The output contract (cachecolor._output): unique temporary file, removed on any failure.
    from .._output import write_text

    write_text(path, text)
