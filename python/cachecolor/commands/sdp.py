"""`cachecolor sdp`: physically aware per-set stack distance profiles (thesis 5.3.1)."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .. import _core
from ._common import EXIT_OK, EXIT_BAD_INPUT, FORMATS, CliError, _size_arg, _quiet, _status, _write_json_first, _source_name, _save_plot, os_error_line


def add_parser(sub: Any) -> None:
    q = sub.add_parser(
        "sdp",
        help="physically aware per-set stack distance profiles: a trace's sets through a page placement vs naive (thesis 5.3.1)",
        description="Profile a trace's per-set LRU stack distances for a cache twice: naively (virtual addresses "
        "index the sets, as if pages were physically contiguous) and through a page placement (a simulated "
        "allocator's frames given at first touch, or a page map from /proc/PID/pagemap as CSV with vpn,pfn "
        "columns); print the miss rate at every associativity and their ratio. --sweep runs the thesis's "
        "Figure 5.5 experiment instead: uniform workloads of several sizes, several seeds, the ratio's median "
        "and maximum per working set.",
    )
    q.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (or --workload, or --sweep)")
    q.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    q.add_argument("--workload", metavar="SPEC", help="a synthetic workload file instead of a trace")
    q.add_argument("--sweep", action="store_true", help="the Figure 5.5 sweep over working-set sizes (uniform workloads)")
    q.add_argument("--cache-size", type=_size_arg, required=True, metavar="B", help="cache size, e.g. 8MiB")
    q.add_argument("--ways", type=int, required=True, metavar="A", help="associativity")
    q.add_argument("--line-size", type=int, default=64, metavar="B", help="line size (default 64)")
    q.add_argument("--page-size", type=int, default=4096, metavar="B", help="page size (default 4096)")
    q.add_argument("--placement", default="random", metavar="ALLOCATOR", help="simulated allocator giving frames at first touch: random (default), buddy, bin-hopping, sequential, contiguous, color-pool")
    q.add_argument("--pagemap", metavar="CSV", help="a fixed page map instead (columns vpn,pfn; e.g. from cachecolor.read_pagemap)")
    q.add_argument("--seed", type=int, default=1, metavar="N", help="allocator seed (with --sweep: the first seed; default 1)")
    q.add_argument("--seeds", type=int, default=5, metavar="N", help="--sweep: seeds per working set (default 5)")
    q.add_argument("--working-sets", type=lambda t: [_size_arg(v) for v in t.split(",")], metavar="B,B,...", help="--sweep: working-set sizes (default 0.25x to 4x the cache)")
    q.add_argument("--refs-per-line", type=int, default=20, metavar="N", help="--sweep: references per line of the working set (default 20)")
    q.add_argument("--json", metavar="OUT", help="write the miss rates (and placement) as JSON")
    q.add_argument("--plot", metavar="OUT.png", help="plot them (matplotlib)")
    _quiet(q)
    q.set_defaults(func=cmd_sdp)


def cmd_sdp(args: argparse.Namespace) -> int:
    from .. import analysis, placement

    if args.sweep:
        if args.trace is not None or args.workload is not None or args.pagemap is not None:
            raise CliError("--sweep generates its own uniform workloads: give no TRACE, --workload or --pagemap", EXIT_BAD_INPUT)
    elif (args.trace is None) == (args.workload is None):
        raise CliError("give a TRACE file or --workload SPEC (one of them), or --sweep", EXIT_BAD_INPUT)
    if args.seeds < 1:
        raise CliError(f"--seeds {args.seeds}: give at least 1", EXIT_BAD_INPUT)
    memory = {"seed": args.seed}
    try:
        if args.sweep:
            sizes = args.working_sets or [int(args.cache_size * f) for f in (0.25, 0.5, 0.75, 0.875, 1.0, 1.25, 1.5, 2.0, 4.0)]
            frame = placement.placement_sweep(
                cache_size=args.cache_size, ways=args.ways, working_sets=sizes,
                seeds=range(args.seed, args.seed + args.seeds), line_size=args.line_size,
                page_size=args.page_size, placement=args.placement, refs_per_line=args.refs_per_line,
                progress=lambda m: _status(args, m),
            )
            summary = placement.summarise_sweep(frame)
            print(f"physically aware / naive miss rate, {args.placement} placement, "
                  f"{args.cache_size:,} B {args.ways}-way cache, {args.seeds} seed(s) (thesis Figure 5.5)")
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            doc: dict[str, Any] = {"cache_size": args.cache_size, "ways": args.ways, "placement": args.placement,
                                   "rows": frame.to_dict(orient="records"), "summary": summary.to_dict(orient="records")}
            _write_json_first(args, doc)
            if args.plot:
                _save_plot(lambda ax: placement.plot_sweep(frame, cache_size=args.cache_size, ax=ax), args.plot)
        else:
            where: Any = args.placement
            if args.pagemap is not None:
                import pandas as pd

                try:
                    where = pd.read_csv(args.pagemap)
                except (OSError, ValueError) as e:  # pandas' parser errors are ValueErrors
                    raise CliError(f"--pagemap {args.pagemap}: {e}", EXIT_BAD_INPUT) from e
                missing = [c for c in ("vpn", "pfn") if c not in where.columns]
                bad = [c for c in ("vpn", "pfn") if c in where.columns and where[c].dtype.kind not in "iu"]
                if missing or bad or (len(where) and (where[["vpn", "pfn"]] < 0).any().any()):
                    raise CliError(f"--pagemap {args.pagemap}: expected columns vpn,pfn of whole numbers >= 0 "
                                   f"(columns: {', '.join(map(str, where.columns)) or 'none'})", EXIT_BAD_INPUT)
            source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
            r = placement.physical_sdp(
                source, cache_size=args.cache_size, ways=args.ways, line_size=args.line_size,
                placement=where, page_size=args.page_size, memory=memory, format=args.format,
            )
            ways = np.arange(1, args.ways + 1)
            naive, aware = r.naive.miss_rate(ways), r.aware.miss_rate(ways)
            print(f"per-set stack distance profile of a {args.cache_size:,} B cache, {r.naive.sets:,} sets, "
                  f"{r.naive.references:,} references; placement {r.aware.placement['source']}, "
                  f"{r.aware.placement['pages']:,} pages")
            print(f"{'ways':>5} {'naive miss':>11} {'aware miss':>11} {'ratio':>8}")
            for w, a, b in zip(ways, naive, aware):
                print(f"{w:>5} {a:>11.4f} {b:>11.4f} {(b / a if a else float('inf')):>8.3f}")
            doc = {"cache_size": args.cache_size, "ways": ways.tolist(), "naive_miss_rate": naive.tolist(),
                   "aware_miss_rate": aware.tolist(), "placement": r.aware.placement,
                   "eq_5_2_miss_rate": r.predicted_miss_rate}
            _write_json_first(args, doc)
            if args.plot:
                def draw(ax: Any) -> None:
                    ax.plot(ways, naive, "o-", label="naive (virtual = physical)")
                    ax.plot(ways, aware, "s-", label=f"physically aware ({r.aware.placement['source']})")
                    ax.set_xlabel("associativity")
                    ax.set_ylabel("miss rate")
                    ax.legend()
                _save_plot(draw, args.plot)
    except _core.ConfigError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(os_error_line(e), EXIT_BAD_INPUT) from e
    if args.plot:
        _status(args, f"wrote {args.plot}")
    return EXIT_OK
