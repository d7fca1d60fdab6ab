"""`cachecolor sweep`: a grid of whole-system runs into one table (docs/sweep.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ._common import PROG, EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, CliError, _quiet, _status, _executor, _sweep_options


def add_parser(sub: Any) -> None:
    sw = sub.add_parser(
        "sweep",
        help="run a grid or list of whole-system runs (configs x field-path overrides x policies x seeds) in parallel into one table",
        description="Run every point of SPEC.toml (docs/sweep.md) that OUT does not hold yet, on a local process pool "
        "or a Dask cluster, and write OUT/results.parquet, OUT/results.csv and each point's JSON in OUT/points.",
    )
    sw.add_argument("spec", metavar="SPEC.toml", help="the sweep: configs, [parameters], policies, seeds, [[points]]")
    sw.add_argument("--out", metavar="DIR", help="results directory (default: SPEC-sweep beside the spec)")
    _sweep_options(sw)
    _quiet(sw)
    sw.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..sweep import SweepError, load_spec, sweep

    try:
        points = load_spec(args.spec)
    except FileNotFoundError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"cannot read {args.spec}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    out = args.out or str(Path(args.spec).with_suffix("")) + "-sweep"
    try:
        res = sweep(points, out, executor=_executor(args), workers=args.workers, progress=not args.quiet)
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    # Distinct points: a spec may name one point twice (repeated values), and it runs once.
    _status(args, f"{len({p.key for p in res.points})} points: {len(res.ran)} run now, {len(res.reused)} already done, "
                  f"{len(res.failed)} failed")
    labels = {p.key: p.point.label() for p in res.points}
    for key in res.failed:
        rec = json.loads((Path(out) / "points" / f"{key}.json").read_text())
        # The point by its config, policy, parameters and seed (the key alone named nothing a
        # user could find); the record stays in points/KEY.json.
        print(f"{PROG}: point failed ({labels.get(key, key[:12])}; points/{key}.json): {rec.get('error')}", file=sys.stderr)
    _status(args, "wrote " + ", ".join(str(f) for f in res.files))
    return EXIT_FAILURE if res.failed else EXIT_OK
