"""`cachecolor oscache report`: OS/user cache interference (Nellans et al. sections 3, 5)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import _core
from ..progress import ProgressLine
from ._common import EXIT_OK, EXIT_BAD_INPUT, FORMATS, CliError, _Parser, _quiet, _status, distinct_names


def add_parser(sub: Any) -> None:
    os_ = sub.add_parser(
        "oscache",
        help="OS/user cache interference on the paper's uniprocessor (Nellans et al. sections 3, 5): characterisation, split L2",
    )
    ossub = os_.add_subparsers(dest="oscache_cmd", metavar="SUBCOMMAND", parser_class=_Parser)
    ossub.required = True
    osr = ossub.add_parser(
        "report",
        help="run machines x workloads (or traces): Figures 1-3 and the IPC table relative to the baseline",
        description="Run every machine (examples/oscache/*.toml: the 1 MB baseline and the split OS/user L2s) on the "
        "synthetic presets (web-server, jvm, compute), --workload files or --trace files (they must carry privileged "
        "records); print the characterisation (privileged share, run lengths, OS-caused evictions by run length) and "
        "the IPC relative to the baseline; write oscache.json, oscache.csv, oscache.md and the plots to --out.",
    )
    osr.add_argument("machines", nargs="*", metavar="MACHINE", help="machine files or directories (default: examples/oscache)")
    osr.add_argument("--workload", action="append", metavar="TOML", help="a workload file to run (repeat; default: the presets)")
    osr.add_argument("--trace", action="append", metavar="FILE", help="a trace with privileged records to run (repeat)")
    osr.add_argument("--trace-format", choices=FORMATS, default="native", help="format of the --trace files (default: native)")
    osr.add_argument("--references", type=int, metavar="N", help="records per workload run (default: the workload's own)")
    osr.add_argument("-o", "--out", default="cachecolor-oscache", metavar="DIR", help="directory for oscache.json/.csv/.md and plots")
    osr.add_argument("--no-plots", action="store_true", help="tables only")
    _quiet(osr)
    osr.set_defaults(func=cmd_oscache_report)


def cmd_oscache_report(args: argparse.Namespace) -> int:
    from .. import oscache

    if args.references is not None and args.references < 1:
        raise CliError("--references: at least 1", EXIT_BAD_INPUT)
    if args.references is not None and args.trace:
        raise CliError("--references applies to workloads; a --trace runs whole", EXIT_BAD_INPUT)
    machines = args.machines
    if not machines:
        d = oscache.examples_dir()
        if d is None:
            raise CliError("examples/oscache not found: name the machine files", EXIT_BAD_INPUT)
        machines = [str(d)]
    try:
        files = oscache.machine_files(machines)
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    if args.machines and not files:
        raise CliError(f"no machine file (a .toml with [model] and no [offload]) in {', '.join(args.machines)}", EXIT_BAD_INPUT)
    distinct_names(files, "machine files")
    files = list(dict.fromkeys(files))  # one file named twice is one machine
    distinct_names(args.workload or [], "--workload files")
    sources: list = []
    for w in dict.fromkeys(args.workload or []):
        sources.append((Path(w).stem, oscache.load_workload(w, args.references), None))
    for t in args.trace or []:
        if not Path(t).is_file():
            raise CliError(f"{t}: no such trace file", EXIT_BAD_INPUT)
        sources.append((Path(t).name, None, Path(t)))
    # Traces of one file name (every suite trace is NAME/trace.cctrace) are told apart by their
    # directory; a bare name would merge their rows (bug: three suite traces reported as one).
    names = [s[0] for s in sources]
    sources = [(f"{s[2].parent.name}/{s[0]}" if s[2] is not None and names.count(s[0]) > 1 else s[0], *s[1:])
               for s in sources]
    if not sources:
        sources = [(f.stem, oscache.load_workload(f, args.references), None) for f in oscache.preset_workloads()]
    try:
        res = oscache.run_report(
            files,  # the directories expanded once, above
            sources,
            args.trace_format,
            progress=lambda m: _status(args, m),
            record_progress=lambda label: ProgressLine(label, quiet=args.quiet),
        )
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    text, written = oscache.write_report(res, args.out, not args.no_plots)
    print(text)
    _status(args, f"wrote {len(written)} files to {args.out}")
    return EXIT_OK
