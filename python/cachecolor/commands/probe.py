"""`cachecolor probe`: does page color matter on this machine?"""

from __future__ import annotations

import argparse
from typing import Any

from .. import _core
from ._common import EXIT_OK, EXIT_FAILURE, CliError, _quiet, _write_json_first


def add_parser(sub: Any) -> None:
    pr = sub.add_parser(
        "probe",
        help="does page color matter here? which address bits index each cache level (a few seconds)",
        description="Chase 4 x ways lines at one page offset in pages of one color versus spread colors, for 4 KiB "
        "pages (colors from /proc/self/pagemap, root) and 2 MiB pages (THP or hugetlb), with the L1 data cache as "
        "positive control, and print a verdict.",
    )
    pr.add_argument("--reps", type=int, default=15, metavar="N", help="alternating repetitions per arm (default 15; the verdict uses the 95%% interval of the paired ratios)")
    pr.add_argument("--duration-ms", type=float, default=3.0, metavar="MS", help="time per repetition (default 3)")
    pr.add_argument("--core", type=int, metavar="CPU", help="CPU to pin to (default: the last available)")
    pr.add_argument("--no-huge", action="store_true", help="skip the 2 MiB page test")
    pr.add_argument("--reserve-hugepages", action="store_true", help="let the 2 MiB test reserve hugetlb pages if THP gives none (restored afterwards)")
    pr.add_argument("--json", metavar="OUT", help="write the result as JSON (verdict, levels: name, color_effective)")
    _quiet(pr)
    pr.set_defaults(func=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    """Which address bits index each level, and does page color matter here?"""
    from .. import bench as b

    try:
        doc = b.probe(reps=args.reps, duration_ms=args.duration_ms, core=args.core, huge=not args.no_huge,
                      reserve_hugepages=args.reserve_hugepages)
    except _core.CachecolorError as e:
        if isinstance(e, (_core.ConfigError, _core.TraceError)):
            raise
        raise CliError(str(e), EXIT_FAILURE) from e
    _write_json_first(args, doc)
    c = doc["control"]
    if c is not None:
        print(f"L1 positive control: same set {sorted(c['same'])[len(c['same']) // 2]:.2f} ns vs spread "
              f"{sorted(c['spread'])[len(c['spread']) // 2]:.2f} ns (ratio {c['ratio']:.2f}): "
              f"{'conflict seen' if c['effect'] else 'NO clear conflict'}")
    for lv in doc["levels"]:
        def fmt(t: Any) -> str:
            if t is None:
                return "not run"
            if "ci" not in t:
                return f"ratio {t['ratio']:.2f} -> {t['effect']}"
            word = {True: "effective", False: "no effect", None: "undecided"}[t["effect"]]
            return f"ratio {t['ratio']:.2f} (95% CI {t['ci'][0]:.2f}-{t['ci'][1]:.2f}) -> {word}"
        print(f"{lv['name']:>4}: {lv['size'] >> 10} KiB {lv['ways']}-way, index bits {lv['index_bits'][0]}..{lv['index_bits'][1]}, "
              f"{lv['colors']} colors; 4 KiB pages: {fmt(lv['test_4k'])}; 2 MiB pages: {fmt(lv['test_2m'])}")
        scan = lv.get("bit_scan")
        if scan is not None:
            steps = ", ".join(f"{b}:{sorted(v)[len(v) // 2]:.1f}" for b, v in zip(scan["bits"], scan["ns"]))
            found = "no clean step" if scan["top_bit"] is None else (
                f"index bits {lv['index_bits'][0]}..{scan['top_bit']} "
                f"({'as sysfs says' if scan['agrees_with_sysfs'] else 'NOT as sysfs says'})")
            print(f"      stride scan, {scan['lines']} lines, ns per access by stride bit: {steps} -> {found}")
        for n in lv["notes"]:
            print(f"      note: {n}")
    answer = f"answer: {doc['answer']}; " if 'answer' in doc else ""
    print(f"verdict: {answer}{doc['verdict']}  ({doc['seconds']:.1f} s)")
    return EXIT_OK
