"""``cachecolor report``: whole-system runs compared under several policies, in tables shaped like
the papers' and plots, as CSV, Markdown and one self-contained HTML page.

Layout (one package, an explicit registry):
- ``base.py``: ``Run``, ``PolicyReporter``, ``run_matrix`` (in-process runs, for scripts),
  ``comparison`` / ``aggregate`` (seeds as mean and 95% interval), ``write_report`` (CSV and
  ``report.md``).
- ``fmt.py``: numbers for people and pipe tables; ``html.py``: ``report.html``.
- ``azimi.py``, ``coloris.py``, ``rocs.py``: each policy's own tables and plots.
- ``BY_REPORT`` below gives each policy report struct's reporter (``RocsReport`` -> the pollute
  engine's tables, for each policy reporting one); ``REPORTERS``, policy name -> its reporter, is
  made from it and the simulator's registry (``_core.POLICY_REPORTS``), so a new policy sharing a
  struct gets its reporter with no edit here, and one with a new struct gets the generic tables
  until its reporter is added to ``BY_REPORT`` (or, at run time, assigned into ``REPORTERS``).

``report_sweep`` is what the CLI runs: the points go through ``cachecolor.sweep`` (a process pool
or a Dask cluster; each point stored under its content hash in ``OUT/points``, so re-running a
report recomputes nothing finished), then the report is written from the stored results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

from .. import _core
from . import azimi, coloris, rocs
from .base import MatrixError, PolicyReporter, Run, aggregate, comparison, config_paths, report_tables, run_matrix, write_report

#: Report struct (its TypedDict in ``_core.pyi``) -> the reporter of a policy reporting it.
BY_REPORT: dict[str, Callable[[str], PolicyReporter]] = {
    "ColorisReport": lambda policy: coloris.COLORIS,
    "MrcPartitionReport": lambda policy: azimi.MRC_PARTITION,
    "RocsReport": rocs.reporter,
    "ThreadClusterReport": lambda policy: azimi.THREAD_CLUSTER,
}

#: Policy name -> its reporter: every registered policy whose report struct has one.
REPORTERS: dict[str, PolicyReporter] = {
    policy: BY_REPORT[struct](policy) for policy, struct in _core.POLICY_REPORTS.items() if struct in BY_REPORT
}

__all__ = [
    "BY_REPORT",
    "REPORTERS",
    "MatrixError",
    "PolicyReporter",
    "Report",
    "Run",
    "aggregate",
    "comparison",
    "config_paths",
    "report_sweep",
    "run_matrix",
    "write_report",
]


@dataclass
class Report:
    """A written report: the Markdown text, the files written, one line per failed run."""

    markdown: str
    files: list[Path]
    failures: list[str]
    runs: list[Run]


def report_sweep(
    points: Sequence[Any],
    out_dir: Union[str, Path],
    *,
    executor: Any = "pool",
    workers: Optional[int] = None,
    plots: bool = True,
    html: bool = True,
    progress: Any = True,
    oracles: Sequence[str] = (),
    oracle_steps: int = 16,
    strict_oracles: bool = False,
    say: Any = None,
) -> Report:
    """Run ``points`` (``cachecolor.sweep.Point``) through ``sweep`` into ``out_dir`` and write
    the report of every point that finished: ``comparison.csv``, the policy tables' CSVs,
    ``report.md``, the plots and ``report.html``. Failed points are listed in ``failures`` and
    left out of the tables. ``oracles`` (``cachecolor.oracles.ORACLES``) adds their runs beside
    every ``linux`` run, the verdict table first in ``report.md`` / ``report.html``
    (``verdicts.csv``, ``oracles.csv``, ``oracle-candidates.csv``) and the verdict columns to
    ``comparison.csv`` (docs/verdicts.md)."""
    import json

    from ..sweep import read_point, results_of, sweep
    from ..system import policy_label

    res = sweep(list(points), out_dir, executor=executor, workers=workers, progress=progress)
    from . import rocs as report_rocs

    report_rocs.best_offline_dir = Path(out_dir)  # Figure 8's best-offline runs: points beside these
    runs = []
    for p, result in results_of(out_dir, res.points):
        policy = policy_label(json.loads(p.config_json), p.point.policy)
        runs.append(Run(p.point.config, policy, p.point.seed, result))
    failures = []
    for key in res.failed:
        rec = read_point(Path(out_dir), key) or {}
        label = next((p.point.label() for p in res.points if p.key == key), key[:12])
        failures.append(f"run failed ({label}): {rec.get('error', 'unknown error')}")
    files = list(res.files)
    text = ""
    verdict = None
    if oracles and runs:
        from ..oracles import run_oracles
        from . import verdicts as v

        linux_points = [p for p in res.points if policy_label(json.loads(p.config_json), p.point.policy) == "linux"]
        done = run_oracles(linux_points, out_dir, oracles, oracle_steps, executor=executor, workers=workers,
                           progress=progress, say=say or (lambda m: None), strict=strict_oracles)
        runs += v.oracle_as_runs(done)
        verdict = (v.verdict_table(runs, done), v.oracle_table(done), v.candidate_table(done))
    if runs:
        # The comparison and the tables once for report.md and report.html: ROCS Figure 8's
        # best offline runs N + 1 simulations per rocs run, and computing the tables twice had
        # run them twice.
        frame = comparison(runs)
        tables = report_tables(runs, frame, REPORTERS)
        if verdict is not None:
            from .verdicts import with_verdicts

            frame = with_verdicts(frame, verdict[0])
        text, written = write_report(runs, out_dir, plots=plots, tables=tables, frame=frame, verdicts=verdict)
        files += written
        if html:
            from .html import write_html

            files.append(write_html(runs, out_dir, [f for f in written if f.suffix == ".png"], tables=tables, frame=frame, verdicts=verdict))
    return Report(text, files, failures, runs)
