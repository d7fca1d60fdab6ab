"""`cachecolor calibrate` (measure this host, write a calibrated machine config) and `cachecolor
validate` (the timing model's error against this host)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import _core
from ._common import EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, CliError, _quiet, _size_arg, _status, _write_json_first


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least 1")
    return v


def _duration(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of milliseconds") from None
    if not 0.1 <= v <= 10_000:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed 0.1 to 10000 ms")
    return v


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "calibrate",
        help="measure this host with Cachetest (latencies, page walks, faults, bandwidth) and write a calibrated machine config",
        description="Measure the latency of each cache level and of DRAM, the page-walk cost of 4 KiB against 2 MiB "
        "pages, the page-fault cost, the bandwidth with 1..N cores and the loaded latency with Cachetest's pointer "
        "chase (on-CPU time), and write the host's [machine] table (geometry from sysfs) with the measured timing; "
        "every number's source is in a comment. Default: 3 trials of 10 ms per point (about 1.5 min of wall time on a loaded 2-vCPU VM); --trials and --duration-ms measure longer.",
    )
    c.add_argument("-o", "--out", metavar="MACHINE.toml", help="write the config here (default: print it)")
    c.add_argument("--json", metavar="OUT", help="write every measurement (per level, trials, intervals) as JSON")
    c.add_argument("--trials", type=_positive, default=3, metavar="N", help="fresh buffers per measurement (default 3; the thesis uses 20)")
    c.add_argument("--duration-ms", type=_duration, default=10.0, metavar="MS", help="chase time per trial (default 10)")
    c.add_argument("--dram-bytes", type=_size_arg, default=128 << 20, metavar="SIZE",
                   help="largest working set for the DRAM latency (default 128MiB; 2 x the last level when smaller)")
    c.add_argument("--core", type=int, metavar="CPU", help="CPU to measure on (default: the last available)")
    c.add_argument("--no-bandwidth", action="store_true", help="skip the co-run bandwidth and loaded-latency measurements")
    _quiet(c)
    c.set_defaults(func=cmd_calibrate)

    v = sub.add_parser(
        "validate",
        help="run programs natively and simulated on a calibrated machine: the timing model's error on this host",
        description="Run each validation program natively (on-CPU time, --runs times, 95%% CI), capture it "
        "(QEMU user mode), simulate it on the calibrated MACHINE.toml and report predicted against measured time: "
        "per-program error, mean absolute error, worst case, rank correlation; base_cpi and mlp chosen on half the "
        "programs, the error reported on the other half; relative effects (co-run beside a stream, huge pages, page "
        "color where `probe` finds it effective) measured and predicted.",
    )
    v.add_argument("machine", metavar="MACHINE.toml", help="a calibrated machine config (cachecolor calibrate -o MACHINE.toml)")
    v.add_argument("--programs", metavar="NAMES", help="comma-separated program names (default: all; see --list)")
    v.add_argument("--tiny", action="store_true", help="a tiny set of four short programs (checks the plumbing, says nothing of the error)")
    v.add_argument("--list", action="store_true", help="list the programs and exit")
    v.add_argument("--runs", type=_positive, default=5, metavar="N", help="native runs per program (default 5)")
    v.add_argument("--work", metavar="DIR", default=None,
                   help="where the programs are built and captured (default $CACHECOLOR_CACHE/validate or out/validate)")
    v.add_argument("--no-effects", action="store_true", help="skip the relative effects")
    v.add_argument("--no-fit", action="store_true", help="do not choose base_cpi and mlp on the training half")
    v.add_argument("--json", metavar="OUT", help="write the whole result as JSON")
    v.add_argument("--plot", metavar="OUT.png", help="predicted against measured time, and the chase latency curve")
    v.add_argument("--write-config", metavar="MACHINE.toml", help="write the machine config with the chosen base_cpi and mlp")
    _quiet(v)
    v.set_defaults(func=cmd_validate)


def _log(args: argparse.Namespace):
    return (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .. import calibrate as cal
    from .._output import check_output, write_text

    for out in (args.out, args.json):
        if out:
            check_output(out)
    try:
        doc = cal.calibrate(trials=args.trials, duration_ms=args.duration_ms, dram_bytes=args.dram_bytes, core=args.core,
                            bandwidth=not args.no_bandwidth, loaded=not args.no_bandwidth, log=_log(args))
    except _core.CachecolorError as e:
        if isinstance(e, _core.ConfigError):
            raise
        raise CliError(str(e), EXIT_FAILURE) from e
    _write_json_first(args, doc)
    text = cal.calibrated_toml(doc)
    if args.out:
        write_text(args.out, text)
        _status(args, f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _select(args: argparse.Namespace) -> Any:
    from .. import validate as val

    if args.tiny and args.programs:
        raise CliError("give --tiny or --programs, not both", EXIT_BAD_INPUT)
    if args.tiny:
        return val.TINY
    if not args.programs:
        return val.PROGRAMS
    by_name = {p.name: p for p in (*val.PROGRAMS, *val.TINY)}
    names = [n.strip() for n in args.programs.split(",") if n.strip()]
    bad = [n for n in names if n not in by_name]
    if bad or not names:
        raise CliError(f"--programs: unknown {', '.join(bad) or '(none given)'}; allowed: {', '.join(by_name)}", EXIT_BAD_INPUT)
    return tuple(by_name[n] for n in names)


def cmd_validate(args: argparse.Namespace) -> int:
    import os

    from .. import validate as val
    from .._output import check_output, write_text

    progs = _select(args)
    if args.list:
        for p in progs:
            print(f"{p.name:14} kernels {p.kernel} {p.bytes} {p.steps} {p.pages}   {p.note}")
        return EXIT_OK
    for out in (args.json, args.plot, args.write_config):
        if out:
            check_output(out, [args.machine])
    work = Path(args.work) if args.work else Path(os.environ.get("CACHECOLOR_CACHE", "out")) / "validate"
    try:
        doc = val.validate(args.machine, programs=progs, runs=args.runs, work=work, effects=not args.no_effects,
                           fit=not args.no_fit, log=_log(args))
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    except _core.CachecolorError as e:
        raise CliError(str(e), EXIT_FAILURE) from e
    if doc["warning"]:
        print(f"cachecolor: warning: {doc['warning']}", file=sys.stderr)
    _write_json_first(args, doc)
    print(val.summary_text(doc))
    if args.plot:
        val.plot(doc, args.plot)
        _status(args, f"wrote {args.plot}")
    if args.write_config and "tuned_machine" in doc:
        write_text(args.write_config, val.tuned_toml(doc, Path(args.machine).read_text()))
        _status(args, f"wrote {args.write_config}")
    return EXIT_OK if doc["programs"] else EXIT_FAILURE
