"""`cachecolor bench`: Cachetest on this machine (thesis chapter 4)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import _core
from ._common import EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, CliError, _size_arg, _quiet, _status, _write_json_first, os_error_line


def add_parser(sub: Any) -> None:
    bn = sub.add_parser(
        "bench",
        help="Cachetest on this machine: pointer-chase sweeps over a cache level, co-runs (thesis chapter 4)",
        description="Measure ns per access of a one-load-per-iteration pointer chase over 16 working sets spread over "
        "0.5-1.5x a cache level's sysfs size, --trials fresh buffers each, pinned to one core, with the hardware "
        "counters that exist here (each probed; unsupported ones are reported, never 0). --corun runs 1..N cores "
        "together over the shared level instead. --replot plots earlier --json results.",
    )
    bn.add_argument("--level", choices=["L1", "L2", "L3"], help="the cache level to sweep")
    bn.add_argument("--buffer", choices=["naive", "contiguous", "thp", "hugetlb", "hugetlb-contiguous"], default="naive", help="buffer allocator (default naive)")
    bn.add_argument("--pattern", choices=["uniform", "sequential", "strided", "zipf", "harmonic"], default="uniform", help="access distribution (default uniform)")
    bn.add_argument("--trials", type=int, default=20, metavar="N", help="trials per working set (default 20)")
    bn.add_argument("--duration-ms", type=float, default=25.0, metavar="MS", help="time per trial (default 25)")
    bn.add_argument("--points", type=int, default=16, metavar="N", help="working sets over 0.5-1.5x the level (default 16)")
    bn.add_argument("--sizes", type=lambda t: [_size_arg(v) for v in t.split(",")], metavar="B,B,...", help="explicit working sets instead")
    bn.add_argument("--core", type=int, metavar="CPU", help="CPU to pin to (default: the last available)")
    bn.add_argument("--seed", type=int, default=1, metavar="S", help="chain seed (default 1)")
    bn.add_argument("--alpha", type=float, default=1.0, metavar="A", help="zipf exponent (default 1)")
    bn.add_argument("--reserve-hugepages", action="store_true", help="hugetlb buffers: raise nr_hugepages as needed (root) and restore it afterwards")
    bn.add_argument("--no-counters", action="store_true", help="timing only, no perf_event counters")
    bn.add_argument("--corun", action="store_true", help="synchronised co-runs of 1..N cores over --level instead of a sweep")
    bn.add_argument("--cores", type=int, metavar="N", help="--corun: up to N cores (default: all available)")
    bn.add_argument("--working-set", type=_size_arg, metavar="B", help="--corun: per-thread working set (default: half the level)")
    bn.add_argument("--json", metavar="OUT", help="write the result as JSON (points: working_set_bytes, ns_per_access, ci95, counters)")
    bn.add_argument("--csv", metavar="OUT", help="write one row per point as CSV")
    bn.add_argument("--plot", metavar="OUT.png", help="plot ns per access with 95%% CI bands")
    bn.add_argument("--replot", nargs="+", metavar="JSON", help="plot earlier --json results (any levels and buffers) into --plot")
    _quiet(bn)
    bn.set_defaults(func=cmd_bench)


def _bench_progress(args: argparse.Namespace) -> Any:
    """One stderr line per trial (``--quiet``: none)."""
    if args.quiet:
        return None

    def show(done: int, total: int, line: str) -> None:
        print(f"[{done}/{total}] {line}", file=sys.stderr, flush=True)

    return show


def cmd_bench(args: argparse.Namespace) -> int:
    """Cachetest on this machine (thesis chapter 4): a working-set sweep, or --corun."""
    from .. import bench as b

    if args.replot:
        if not args.plot:
            raise CliError("--replot needs --plot OUT.png", EXIT_BAD_INPUT)
        try:
            sweeps = [b.load(p) for p in args.replot]
        except OSError as e:
            raise CliError(f"--replot {os_error_line(e)}", EXIT_BAD_INPUT) from e
        except ValueError as e:
            raise CliError(f"--replot {e}", EXIT_BAD_INPUT) from e
        b.plot_sweeps(sweeps, args.plot)
        for s in sweeps:
            print(f"{s.buffer:>20}  {s.knee()['text']}")
        _status(args, f"wrote {args.plot}")
        return EXIT_OK
    if not args.level:
        raise CliError("bench: --level L1|L2|L3 is required (or --replot JSON...)", EXIT_BAD_INPUT)
    try:
        if args.corun:
            doc = b.corun(level=args.level, buffer=args.buffer, pattern=args.pattern, working_set_bytes=args.working_set,
                          max_cores=args.cores, trials=args.trials, duration_ms=args.duration_ms, seed=args.seed,
                          reserve_hugepages=args.reserve_hugepages, progress=_bench_progress(args))
            _write_json_first(args, doc)
            for p in doc["points"]:
                ci = p["ci95"] if p["ci95"] is not None else float("nan")
                print(f"{p['cores']} cores: {p['ns_per_access']:.2f} ns/access +- {ci:.2f} per thread, "
                      f"{p['total_accesses_per_second'] / 1e6:.1f} M accesses/s in total")
            if args.plot:
                b.plot_corun(doc, args.plot)
                _status(args, f"wrote {args.plot}")
            return EXIT_OK
        s = b.bench(args.level, buffer=args.buffer, pattern=args.pattern, trials=args.trials, duration_ms=args.duration_ms,
                    points=args.points, sizes=args.sizes, core=args.core, seed=args.seed, alpha=args.alpha,
                    reserve_hugepages=args.reserve_hugepages, counters=not args.no_counters, progress=_bench_progress(args))
    except _core.CachecolorError as e:
        if isinstance(e, (_core.ConfigError, _core.TraceError)):
            raise
        raise CliError(str(e), EXIT_FAILURE) from e
    _write_json_first(args, s.doc)
    f = s.frame
    if args.csv:
        from ..reports.base import _atomic_write

        _atomic_write(Path(args.csv), f.to_csv(index=False))
        _status(args, f"wrote {args.csv}")
    lv = s.level
    print(f"{lv['name']} ({lv['size'] >> 10} KiB, {lv['ways']}-way), buffer {s.buffer}, pattern {args.pattern}, "
          f"{args.trials} trials of {args.duration_ms:g} ms, core {s.doc['core']}, engine {s.doc['engine']}")
    for p in s.doc["points"]:
        ci = p["ci95"] if p["ci95"] is not None else float("nan")
        extra = "".join(f"  {k}/access={c['per_access']:.3g}" for k, c in p["counters"].items())
        cpu = p.get("cpu_ns_per_access")
        # One trial has no interval: nan, as the wall-clock one (not a made-up 0).
        cpu_ci = p["cpu_ci95"] if p.get("cpu_ci95") is not None else float("nan")
        cpu_txt = f"  (on-CPU {cpu:.2f} +- {cpu_ci:.2f})" if cpu is not None else ""
        print(f"{p['working_set_bytes'] >> 10:>8} KiB  {p['ns_per_access']:8.2f} ns/access +- {ci:.2f}{cpu_txt}{extra}")
    print(s.knee()["text"])
    for n in s.doc["notes"]:
        print(f"note: {n}")
    if args.plot:
        b.plot_sweeps([s], args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK
