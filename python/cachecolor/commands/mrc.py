"""`cachecolor mrc`: miss-rate curves (exact, SHARDS, AET, RapidMRC) and per-set profiles."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .. import _core
from .._output import save_figure
from ..progress import ProgressLine
from ..reports.fmt import bytes_
from ._common import EXIT_OK, EXIT_BAD_INPUT, FORMATS, CliError, _size_arg, _quiet, _status, _source_name, _save_plot, _whole, _finite


def add_parser(sub: Any) -> None:
    m = sub.add_parser(
        "mrc",
        help="miss-rate curve of a trace or workload (exact, SHARDS or AET), and per-set stack distance profiles",
        description="The fully associative LRU miss rate at every cache size: exact (Mattson's stack algorithm), "
        "or estimated by SHARDS (--shards RATE, --shards-size N) or AET (--aet RATE). With --sets or "
        "--cache-size/--ways, also the per-set stack distance profiles of that geometry (thesis 5.3): the "
        "set-associative LRU miss rate at every associativity. Sizes are in lines (or pages with --granularity page).",
    )
    m.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (or give --workload)")
    m.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    m.add_argument("--workload", metavar="SPEC", help="a synthetic workload instead of a trace: a TOML/JSON file with seed and [[phases]], or a config with a [workload] table")
    m.add_argument("--json", metavar="OUT", help="write the curve (sizes, miss_rate, metadata) as JSON")
    m.add_argument("--plot", metavar="OUT.png", help="plot the curve (matplotlib) to a PNG file")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--shards", type=_finite, metavar="RATE", help="SHARDS at a fixed sampling rate in (0, 1], e.g. 0.01")
    g.add_argument("--shards-size", type=_whole, metavar="N", help="fixed-size SHARDS tracking at most N sampled lines")
    g.add_argument("--aet", type=_finite, metavar="RATE", help="AET model from references sampled at RATE in (0, 1]")
    m.add_argument("--salts", type=_whole, default=1, metavar="K", help="SHARDS: K independent samples (salts), min/max band (default 1)")
    m.add_argument("--seed", type=_whole, default=0, metavar="N", help="first SHARDS salt / AET sampling seed (default 0)")
    m.add_argument("--no-adjust", action="store_true", help="SHARDS: do not apply SHARDS_adj")
    m.add_argument("--granularity", choices=("line", "page"), default="line", help="count lines or pages (default: line)")
    m.add_argument("--line-size", type=_whole, default=64, metavar="B", help="line size in bytes (default 64)")
    m.add_argument("--page-size", type=_whole, default=4096, metavar="B", help="page size in bytes for --granularity page (default 4096)")
    size_group = m.add_mutually_exclusive_group()
    size_group.add_argument("--points", type=_whole, metavar="N", help="report N log-spaced sizes (default 1000)")
    size_group.add_argument("--all-sizes", action="store_true", help="report every size (exact only)")
    m.add_argument("--sets", type=_whole, metavar="N", help="also profile every set of a cache with N sets (set = line mod N)")
    m.add_argument("--cache-size", type=_size_arg, metavar="B", help="also profile the sets of this cache (with --ways), e.g. 1MiB")
    m.add_argument("--ways", type=_whole, metavar="A", help="associativity of --cache-size")
    m.add_argument("--max-ways", type=_whole, metavar="A", help="largest associativity in the per-set profiles (default --ways, else 16)")
    m.add_argument("--rapid", type=_whole, metavar="WINDOW", help="RapidMRC (Azimi et al. 3.2.2): the L2 curve from a window of WINDOW L1 misses, beside the exact one")
    m.add_argument("--l1-size", type=_size_arg, default=32 << 10, metavar="B", help="--rapid: the L1 whose misses feed it (default 32KiB)")
    m.add_argument("--l1-ways", type=_whole, default=8, metavar="A", help="--rapid: its associativity (default 8)")
    m.add_argument("--warmup", type=_whole, default=0, metavar="N", help="--rapid: the window's first N misses only fill the stack (default 0)")
    m.add_argument("--start", type=_whole, default=0, metavar="N", help="--rapid: skip the first N L1 misses (default 0)")
    _quiet(m)
    m.set_defaults(func=cmd_mrc)


# Option of `cachecolor mrc` behind each field of the Rust core's MRC / set-profile options.
_MRC_FIELDS = {
    "max_lines": "--shards-size",
    "salts": "--salts",
    "points": "--points",
    "sizes": "--points",
    "all_sizes": "--all-sizes",
    "sets": "--sets",
    "max_ways": "--max-ways",
    "line_size": "--line-size",
    "trace": "TRACE",
}


def _mrc_option(args: argparse.Namespace, field: str) -> str:
    if field == "rate":
        return "--aet" if args.aet is not None else "--shards"
    if field == "unit_bytes":
        return "--page-size" if args.granularity == "page" else "--line-size"
    if field.startswith("workload"):
        return "--workload " + field
    return _MRC_FIELDS.get(field, field)


def _mrc_table(curve: Any, prof: Any) -> str:
    """Miss rates at about a dozen sizes (powers of two of units), and the set profile's."""
    lines = [
        f"{curve.method} miss-rate curve: {curve.references:,} references to "
        f"{'' if curve.distinct_exact else '~'}{curve.distinct:,.0f} distinct {curve.unit_bytes}-byte units"
        + (f", sampling rate {curve.rate:.4g}" if curve.rate is not None else "")
        + (f", reliable from {curve.reliable_from:,} units" if curve.reliable_from > 1 else "")
    ]
    top = int(max(curve.sizes.max(), 1))
    picks = sorted({1 << k for k in range(0, top.bit_length(), max(1, top.bit_length() // 12))} | {top})
    rates = curve.at(picks)
    lines.append(f"{'size (units)':>14}  {'bytes':>10}  miss rate")
    for size, m in zip(picks, rates):
        flag = "  (unreliable)" if size < curve.reliable_from else ""
        lines.append(f"{size:>14,}  {bytes_(size * curve.unit_bytes):>10}  {m:9.4f}{flag}")
    if prof is not None:
        lines.append(f"set-associative LRU with {prof.sets:,} sets of {prof.line_size}-byte lines (per-set profiles):")
        lines.append(f"{'ways':>14}  {'bytes':>10}  miss rate")
        for w, m in zip(range(1, prof.max_ways + 1), prof.miss_rate()):
            lines.append(f"{w:>14}  {bytes_(w * prof.sets * prof.line_size):>10}  {m:9.4f}")
    return "\n".join(lines)


def cmd_mrc(args: argparse.Namespace) -> int:
    from .. import analysis

    if (args.trace is None) == (args.workload is None):
        raise CliError("give a TRACE file or --workload SPEC (one of them)", EXIT_BAD_INPUT)
    if args.rapid is not None:
        return _rapid_mrc(args)
    chosen = [o for o, v in (("--shards", args.shards), ("--shards-size", args.shards_size), ("--aet", args.aet)) if v is not None]
    if len(chosen) > 1:
        raise CliError(f"{' and '.join(chosen)} exclude each other: choose one method", EXIT_BAD_INPUT)
    if args.sets is not None and (args.cache_size is not None or args.ways is not None):
        raise CliError("give --sets, or --cache-size with --ways, not both", EXIT_BAD_INPUT)
    if (args.cache_size is None) != (args.ways is None):
        raise CliError("--cache-size and --ways go together (the sets are cache size / (ways x line size))", EXIT_BAD_INPUT)
    if args.max_ways is not None and args.sets is None and args.ways is None:
        raise CliError("--max-ways needs a set geometry: --sets N, or --cache-size B --ways A", EXIT_BAD_INPUT)
    method = "aet" if args.aet is not None else ("shards" if chosen else "exact")
    try:
        options = analysis.mrc_options(
            granularity=args.granularity,
            line_size=args.line_size,
            page_size=args.page_size,
            method=method,
            rate=args.aet if args.aet is not None else args.shards,
            max_lines=args.shards_size,
            salts=args.salts,
            adjust=not args.no_adjust,
            seed=args.seed,
            points=args.points,
            all_sizes=args.all_sizes,
        )
        sets = None
        if args.sets is not None or args.ways is not None:
            n_sets = args.sets
            if n_sets is None:
                way_bytes = args.ways * args.line_size
                if args.ways <= 0 or args.cache_size <= 0 or args.cache_size % way_bytes:
                    raise CliError(
                        f"--cache-size: {args.cache_size} B is not a positive multiple of --ways x --line-size = {way_bytes} B",
                        EXIT_BAD_INPUT,
                    )
                n_sets = args.cache_size // way_bytes
            max_ways = args.max_ways or args.ways or 16
            sets = {"line_size": args.line_size, "sets": n_sets, "max_ways": max_ways}
        source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
        progress = ProgressLine("mrc", quiet=args.quiet)
        try:
            curve, prof = analysis.profile(source, mrc=options, sets=sets, format=args.format, progress=progress)
        finally:
            progress.close()
    except _core.ConfigError as e:
        field = getattr(e, "field", "") or ""
        message = str(e)
        if field and message.startswith(field + ": "):
            message = message[len(field) + 2 :]
        where = f"{_mrc_option(args, field)}: " if field else ""
        raise CliError(f"{where}{message}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"trace {args.trace}: {e}", EXIT_BAD_INPUT) from e
    assert curve is not None
    print(_mrc_table(curve, prof))
    if args.json:
        doc = curve.to_dict()
        if prof is not None:
            doc["set_profile"] = prof.to_dict()
        from ..results import write_json_atomic

        write_json_atomic(args.json, doc)
        _status(args, f"wrote {args.json}")
    if args.plot:
        _plot_mrc(curve, prof, args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def _rapid_mrc(args: argparse.Namespace) -> int:
    """``cachecolor mrc --rapid WINDOW``: RapidMRC (Azimi et al. 3.2.2) beside the exact curve."""
    from .. import analysis
    from ..results import write_json_atomic

    others = [o for o, v in (("--shards", args.shards), ("--shards-size", args.shards_size), ("--aet", args.aet),
                             ("--sets", args.sets), ("--cache-size", args.cache_size)) if v is not None]
    if others or args.granularity != "line":
        raise CliError(f"--rapid makes its own L2 curve from L1 misses: drop {', '.join(others) or '--granularity'}", EXIT_BAD_INPUT)
    source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
    progress = ProgressLine("mrc", quiet=args.quiet)
    try:
        r = analysis.rapid_mrc(
            source, l1_size=args.l1_size, l1_ways=args.l1_ways, window=args.rapid, warmup=args.warmup,
            start=args.start, line_size=args.line_size, points=args.points, format=args.format, progress=progress,
        )
    except _core.ConfigError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    print(f"RapidMRC: {r.window_counted:,} L1 misses in the window (of {r.l1_misses:,}, {r.references:,} references; "
          f"L1 {args.l1_size:,} B {args.l1_ways}-way); mean absolute error against the exact curve {r.mae:.4f}")
    print(f"{'L2 lines':>10} {'RapidMRC':>9} {'exact':>9}")
    step = max(1, len(r.sizes) // 12)
    for i in list(range(0, len(r.sizes), step))[:12] + [len(r.sizes) - 1]:
        print(f"{r.sizes[i]:>10,} {r.miss_rate[i]:>9.4f} {r.exact_miss_rate[i]:>9.4f}")
    if args.json:
        write_json_atomic(args.json, {"method": "rapidmrc", "sizes": r.sizes.tolist(), "miss_rate": r.miss_rate.tolist(),
                                      "exact_miss_rate": r.exact_miss_rate.tolist(), "mae": r.mae,
                                      "references": r.references, "l1_misses": r.l1_misses,
                                      "window_counted": r.window_counted, "options": r.options})
        _status(args, f"wrote {args.json}")
    if args.plot:
        def draw(ax: Any) -> None:
            ax.plot(r.sizes, r.exact_miss_rate, label="exact (every L1 miss)")
            ax.plot(r.sizes, r.miss_rate, "--", label=f"RapidMRC ({r.window_counted:,} misses)")
            ax.set_xscale("log")
            ax.set_xlabel("L2 size (lines, fully associative LRU)")
            ax.set_ylabel("L2 miss rate")
            ax.legend()
        _save_plot(draw, args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def _plot_mrc(curve: Any, prof: Any, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    curve.plot(ax=ax, unit="units")
    if prof is not None:
        ways = np.arange(1, prof.max_ways + 1)
        ax.plot(ways * prof.sets * prof.line_size / curve.unit_bytes, prof.miss_rate(), "o", ms=3,
                label=f"set-associative LRU, {prof.sets:,} sets")
        ax.legend()
    ax.set_title(f"{curve.method} miss-rate curve, {curve.references:,} references")
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)
