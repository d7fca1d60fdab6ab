"""`cachecolor profile`: the page-level cache profile of a trace (ROCS 3)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import _core
from ..progress import ProgressLine
from ._common import EXIT_OK, EXIT_BAD_INPUT, FORMATS, CliError, _quiet, _status, _source_name, _save_plot, os_error_line, _whole, _finite


def add_parser(sub: Any) -> None:
    pp = sub.add_parser(
        "profile",
        help="page-level cache profile of a trace (ROCS 3): per page accesses, misses and miss rate at a level, "
        "the PMU sampler's estimate, regions",
        description="Run a trace (or the config's [workload]) through the config's hierarchy and count, per "
        "virtual page, the data accesses reaching --level and the misses there. With --sample-period N, also "
        "the estimate a PMU sampler would build from one L1D miss in N with its data source (ROCS 3.1).",
    )
    pp.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (default: the config's [workload])")
    pp.add_argument("--config", required=True, metavar="CONFIG", help="simulation config with the [hierarchy] (cache-only)")
    pp.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    pp.add_argument("--level", metavar="NAME", help="the level profiled, by name (default: the hierarchy's last level)")
    pp.add_argument("--page-size", type=_whole, default=4096, metavar="B", help="page size (default 4096)")
    pp.add_argument("--sample-period", type=_whole, metavar="N", help="also estimate from one L1D miss in N (ROCS 3.1)")
    pp.add_argument("--region-tolerance", type=_finite, default=0.15, metavar="D", help="miss-rate difference within a region (default 0.15)")
    pp.add_argument("--region-gap", type=_whole, default=1, metavar="P", help="pages a region may skip between members (default 1: adjacent)")
    pp.add_argument("--min-accesses", type=_whole, default=1, metavar="N", help="pages with fewer accesses stay out of regions (default 1)")
    pp.add_argument("--min-share", type=_finite, default=0.01, metavar="F", help="list regions with at least this share of the accesses (default 0.01)")
    pp.add_argument("--json", metavar="OUT", help="write every page and region as JSON")
    pp.add_argument("--csv", metavar="OUT", help="write the per-page table as CSV")
    pp.add_argument("--plot", dest="plot_prefix", metavar="PREFIX", help="write PREFIX-histogram.png (Figure 2) and PREFIX-address-space.png (Figure 3)")
    _quiet(pp)
    pp.set_defaults(func=cmd_profile)


def _object_ranges_of(args: argparse.Namespace) -> list:
    """The data objects of the profiled trace, from its memory map (empty without one)."""
    from ..annotate import memory_map, object_ranges

    if not args.trace or args.format not in (None, "native"):
        return []
    try:
        return object_ranges(args.trace) if memory_map(args.trace) else []
    except (ValueError, OSError):
        return []


def cmd_profile(args: argparse.Namespace) -> int:
    from ..annotate import name_range
    from ..pages import page_profile

    progress = ProgressLine("profile", quiet=args.quiet)
    try:
        prof = page_profile(
            args.config, args.trace, level=args.level, page_size=args.page_size,
            sample_period=args.sample_period, trace_format=args.format,
            region_tolerance=args.region_tolerance, region_gap=args.region_gap,
            min_accesses=args.min_accesses, progress=progress,
        )
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(os_error_line(e), EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    pages = prof.pages
    print(f"{prof.level} page profile: {len(pages):,} pages, {prof.references:,} data references, "
          f"{prof.accesses:,} {prof.level} accesses, miss rate {prof.miss_rate:.4f}")
    if prof.sample_period:
        print(f"sampled 1 L1D miss in {prof.sample_period:,}: {prof.samples:,} samples; mean error of the "
              f"per-page estimate (pages with >= 10 samples) {prof.estimate_error():.4f}")
    print("\nregions (neighbouring pages with similar miss rates, ROCS 3.2.2):")
    regions = prof.regions
    regions = regions[regions["access_share"] >= args.min_share]
    ranges = _object_ranges_of(args)
    if ranges:  # a trace with a memory map names what each region holds
        regions = regions.assign(objects=[
            name_range(ranges, int(r.first_vpn) * prof.page_size, (int(r.last_vpn) + 1) * prof.page_size)
            for r in regions.itertuples(index=False)])
    print(regions.to_string(index=False, float_format=lambda v: f"{v:.4f}",
                            formatters={"first_vpn": hex, "last_vpn": hex}))
    print("\npages per miss rate (ROCS Figure 2):")
    print(prof.histogram().to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.json:
        prof.to_json(args.json)
        _status(args, f"wrote {args.json}")
    if args.csv:
        from ..reports.base import _atomic_write

        _atomic_write(Path(args.csv), pages.to_csv(index=False))
        _status(args, f"wrote {args.csv}")
    if args.plot_prefix:
        _save_plot(lambda ax: prof.plot_histogram(ax=ax), f"{args.plot_prefix}-histogram.png")
        _save_plot(lambda ax: prof.plot_address_space(ax=ax), f"{args.plot_prefix}-address-space.png")
        _status(args, f"wrote {args.plot_prefix}-histogram.png and {args.plot_prefix}-address-space.png")
    return EXIT_OK
