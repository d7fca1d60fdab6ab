"""`cachecolor workloads ...`: the real-program suite (cachecolor.workloads)."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import EXIT_BAD_INPUT, CliError, _Parser


def add_parser(sub: Any) -> None:
    wl = sub.add_parser("workloads", help="the suite of real programs: list, install, build (capture), info, characterize")
    wlsub = wl.add_subparsers(dest="workloads_cmd", metavar="SUBCOMMAND", parser_class=_Parser, required=True)
    for wname, whelp in (("list", "the programs, their packages, inputs and regions"),
                         ("install", "apt-get install the packages the programs need (root)"),
                         ("build", "capture each program's region into the cache (rebuilt when missing)"),
                         ("info", "the cached trace's metadata: command, versions, region, records, hash"),
                         ("characterize", "IPC, LLC MPKI, MRC, page profile, privileged share of each built trace")):
        wc = wlsub.add_parser(wname, help=whelp)
        wc.add_argument("names", nargs="*", metavar="NAME", help="programs (default: all)")
        wc.add_argument("--cache", metavar="DIR", help="cache root (default: $CACHECOLOR_CACHE or ~/.cache/cachecolor)")
        if wname == "build":
            wc.add_argument("--ci", action="store_true", help="the CI subset's short regions")
            wc.add_argument("--force", action="store_true", help="capture again even if cached")
            wc.add_argument("--skip", type=int, metavar="N",
                            help="instructions to fast-forward (default: chosen by phase, or the program's fixed skip)")
            size = wc.add_mutually_exclusive_group()
            size.add_argument("--records", type=int, metavar="N",
                              help="capture a region of N records (default: the program's length: 1 B instructions in user mode, "
                              "a record cap in full system)")
            size.add_argument("--instructions", type=int, metavar="N", help="capture a region of N instructions (user mode only)")
        if wname == "characterize":
            wc.add_argument("--plots", metavar="DIR", help="write one plot per program (NAME.png) here")
            wc.add_argument("--markdown", metavar="DOC", help="rewrite the suite table between <!-- suite-table --> markers in DOC")
        wc.set_defaults(func=cmd_workloads)


def cmd_workloads(args: argparse.Namespace) -> int:
    """`cachecolor workloads ...`: the real-program suite (cachecolor.workloads)."""
    from .. import workloads

    return workloads.cli(args, lambda msg: CliError(msg, EXIT_BAD_INPUT))
