"""`cachecolor report`: system configs under several policies and seeds, compared."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import _core
from ._common import PROG, EXIT_OK, EXIT_BAD_INPUT, POLICIES, CliError, _quiet, _status, _parse_sets, _executor, _sweep_options, distinct_names


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "report",
        help="run system configs under several policies and seeds and compare them in tables and plots",
        description="Run every system config (a directory stands for its *.toml files) under every --policy "
        "(default: linux and the config's own [policy] name) and seed, then print and write the comparison "
        "table and each policy's own tables (CSV, report.md) and plots (PNG) into --out.",
    )
    r.add_argument("paths", nargs="+", metavar="CONFIG|DIR", help="system configs, or directories of them")
    r.add_argument("--policy", action="append", metavar="NAME", help=f"a policy to run (repeat for several): {', '.join(POLICIES)}")
    r.add_argument("--seeds", type=int, metavar="N", help="run N seeds each: --seed, --seed + 1, ... (default: the configs' own)")
    r.add_argument("--seed", type=int, default=1, metavar="S", help="first seed with --seeds (default 1)")
    r.add_argument("--control", action="store_true", help="run each policy's control too (NAME+control: its colors, no page or thread moved; docs/system.md \"Placement\")")
    r.add_argument("--out", default="cachecolor-report", metavar="DIR", help="directory for the CSV, report.md and plots (default: cachecolor-report)")
    r.add_argument("--no-plots", action="store_true", help="tables only")
    r.add_argument("--no-html", action="store_true", help="no report.html")
    r.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a field of every config by its path (repeatable)")
    r.add_argument("--best-offline", type=int, default=0, metavar="N",
                   help="ROCS Figure 8's best offline: rerun each rocs run with N page counts mapped, no search "
                   "(N + 1 runs each, one after another; default 0: off)")
    r.add_argument("--oracle", nargs="?", const="all", metavar="NAMES",
                   help="add the oracles' runs (offline bounds: partition, pollute, mrc, comma-separated; default all) beside "
                   "each linux run and open the report with each policy's verdict (docs/verdicts.md); a named oracle that "
                   "cannot apply to a config is an error, 'all' skips it there with a note")
    r.add_argument("--oracle-steps", type=int, default=16, metavar="N",
                   help="oracles' granularity: the LLC's colors in N steps (partition) and N + 1 buffer prefixes (pollute); default 16")
    _sweep_options(r)
    _quiet(r)
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from ..reports import report_sweep
    from ..sweep import SweepError, config_paths, grid

    if args.seeds is not None and args.seeds < 1:
        raise CliError(f"--seeds {args.seeds}: give at least 1 seed", EXIT_BAD_INPUT)
    seeds = [None] if args.seeds is None else [args.seed + k for k in range(args.seeds)]
    if args.best_offline == 1 or args.best_offline < 0:
        raise CliError(f"--best-offline {args.best_offline}: give 0 (off) or at least 2 page counts", EXIT_BAD_INPUT)
    from ..reports import rocs as report_rocs

    report_rocs.best_offline_points = args.best_offline
    report_rocs.best_offline_progress = not args.quiet
    sets = dict(_parse_sets(args.set))
    oracles: tuple[str, ...] = ()
    if args.oracle is not None:
        from ..oracles import OracleError, parse_oracles

        try:
            oracles = parse_oracles(args.oracle)
        except OracleError as e:
            raise CliError(str(e), EXIT_BAD_INPUT) from e
        if args.oracle_steps < 1:
            raise CliError(f"--oracle-steps {args.oracle_steps}: give at least 1", EXIT_BAD_INPUT)
    try:
        configs = config_paths(args.paths)
        distinct_names(configs, "configs")
        points = []
        for c in configs:
            names = args.policy or _default_policies(c)
            if oracles:
                _check_oracle_input(c, names, oracles, args.oracle != "all", args.oracle_steps)
                if "linux" not in names:
                    names = ["linux", *names]  # the oracles' baseline
            if args.control:  # each policy beside its control run
                names = [x for n in names for x in ([n] if n == "linux" or n.endswith("+control") else [n, n + "+control"])]
            points += grid([c], {k: [v] for k, v in sets.items()}, names, seeds)
    except FileNotFoundError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except (SweepError, _core.ConfigError) as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    try:
        rep = report_sweep(points, args.out, executor=_executor(args), workers=args.workers,
                           plots=not args.no_plots, html=not args.no_html, progress=not args.quiet,
                           oracles=oracles, oracle_steps=args.oracle_steps, strict_oracles=args.oracle != "all",
                           say=lambda m: _status(args, m))
    except SweepError as e:
        # Every point is checked before the first runs, so nothing ran.
        raise CliError(f"{e} (no config was run)", EXIT_BAD_INPUT) from e
    print(rep.markdown)
    _status(args, f"wrote {len(rep.files)} files to {args.out}")
    for line in rep.failures:
        print(f"{PROG}: {line}", file=sys.stderr)
    if rep.failures:
        raise CliError(f"{len(rep.failures)} run(s) failed (recorded in {args.out}/points; the report has the others)")
    return EXIT_OK


def _default_policies(path: Any) -> list[str]:
    from ..system import load_system_config

    own = load_system_config(path).get("policy", {}).get("name", "linux")
    return ["linux"] if own == "linux" else ["linux", own]


def _check_oracle_input(path: Any, names: list[str], oracles: tuple[str, ...], strict: bool, steps: int) -> None:
    """``--oracle`` needs a policy to judge; a named ``partition`` or ``mrc`` needs processes
    to divide the cache among (checked on the effective config, before anything runs)."""
    import json

    from ..oracles import OracleError, check_partition
    from ..system import CONTROL_SUFFIX, load_system_config

    judged = [n for n in names if n != "linux" and not n.endswith(CONTROL_SUFFIX)]
    if not judged:
        raise CliError(f"--oracle: {path} runs no policy but linux, so there is nothing to judge: give --policy NAME "
                       "or a config with [policy] name", EXIT_BAD_INPUT)
    if not strict:
        return
    effective = json.loads(_core.effective_system_config(json.dumps(load_system_config(path)), "json"))
    try:
        if "partition" in oracles:
            check_partition(effective, str(path), steps)
        if "mrc" in oracles and len(effective.get("processes", [])) < 2:
            raise OracleError(f"{path}: oracle:mrc divides the cache among processes: this config has 1")
    except OracleError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
