"""`cachecolor offload`: OS off-load to an OS core (Nellans et al. section 4)."""

from __future__ import annotations

import argparse
from typing import Any

from .. import _core
from ._common import EXIT_OK, EXIT_BAD_INPUT, CliError, _quiet, _status, distinct_names


def add_parser(sub: Any) -> None:
    o = sub.add_parser(
        "offload",
        help="OS off-load to an OS core (Nellans et al. section 4): predictor accuracy, IPC vs trigger N and migration cost",
    )
    o.add_argument("configs", nargs="+", metavar="CONFIG", help="off-load configs ([offload] + [workload], examples/oscache/offload-*.toml)")
    o.add_argument("--triggers", default="0,100,500,1000,5000,10000", metavar="N,N,...", help="fixed triggers N to sweep")
    o.add_argument("--migration", default="100,1000,5000,10000", metavar="C,C,...", help="migration costs (cycles each way) to sweep")
    o.add_argument("--cores", default="1,2,4", metavar="K,K,...", help="user cores sharing the OS core (scalability runs)")
    o.add_argument("--out", default="cachecolor-offload", metavar="DIR", help="directory for offload.json, offload.md and plots")
    o.add_argument("--no-plots", action="store_true", help="tables only")
    _quiet(o)
    o.set_defaults(func=cmd_offload)


def cmd_offload(args: argparse.Namespace) -> int:
    from ..offload import run_report

    def ints(v: str, what: str) -> list[int]:
        try:
            out = [int(x) for x in v.split(",") if x.strip()]
        except ValueError:
            out = []
        if not out or any(x < 0 for x in out):
            raise CliError(f"{what} {v!r}: a comma-separated list of non-negative integers", EXIT_BAD_INPUT)
        return out

    triggers = ints(args.triggers, "--triggers")
    migration = ints(args.migration, "--migration")
    cores = ints(args.cores, "--cores")
    if 0 in cores:
        raise CliError("--cores: at least 1 user core", EXIT_BAD_INPUT)
    distinct_names(args.configs, "configs")
    configs = list(dict.fromkeys(args.configs))  # one file named twice is one result
    try:
        text, written = run_report(configs, args.out, triggers, migration, cores, not args.no_plots, progress=lambda m: _status(args, m))
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    print(text)
    _status(args, f"wrote {len(written)} files to {args.out}")
    return EXIT_OK
