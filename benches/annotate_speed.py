"""`cachecolor annotate` against cachegrind on the same program (docs/PERFORMANCE.md, "annotate").

The program is benches/annotate_pattern.c (built with ``cc -g -O1``), run for ROUNDS rounds. One
side is cachegrind as a user runs it (``valgrind --tool=cachegrind --cache-sim=yes`` with
examples/annotate/cachegrind-like.toml's geometry, then ``cg_annotate``); the other is
``cachecolor annotate --config examples/annotate/cachegrind-like.toml TRACE`` on the program's
trace captured once beforehand (``cachecolor trace capture``, timed apart: a trace is captured
once and annotated, simulated and swept many times). The sides alternate, REPEATS times each, so a
change in the machine's other load hits both alike. Times are CPU seconds (user + system of the
process and its children: addr2line is part of annotate's work) and wall seconds; the ratio is
cachecolor over cachegrind. The main loop's D1 and LL misses are checked to agree within 1% (the
two tools see the same program; start-up code differs: QEMU's loader against valgrind's).
``--old DIR`` adds a third side in the same alternation: annotate run from the cachecolor package
in DIR (e.g. ``git archive OLD python | tar -x -C DIR`` with that commit's built ``_core`` copied
in), so a change is measured against the build before it in the same run; its per-line counts
must equal the current build's (the whole report, byte for byte).

Usage: python benches/annotate_speed.py [--rounds 20] [--repeats 5] [--work DIR] [--old DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "annotate" / "cachegrind-like.toml"
#: cachegrind-like.toml's geometry in cachegrind's flags (tests/test_annotate.py checks the two agree).
CG_GEOMETRY = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=262144,8,64"]
CLI = [sys.executable, "-m", "cachecolor"]


def timed(argv: list[str], **kw) -> tuple[float, float, subprocess.CompletedProcess]:
    """(CPU seconds of the child and its children, wall seconds, the finished process)."""
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, check=True, **kw)
    wall = time.perf_counter() - t0
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime), wall, p


def main_loop_misses_cg(text: str) -> tuple[int, int]:
    """cg_annotate's D1mr + D1mw and DLmr + DLmw summed over the main loop's two lines (its
    annotated source: nine counts, ``.`` for zero, then the line)."""
    d1 = ll = 0
    for line in text.splitlines():
        if "s += scan[i]" in line or "t->value" in line:
            cells = line.split()[:9]
            try:
                ir, i1, il, dr, d1r, dlr, dw, d1w, dlw = (0 if c == "." else int(c.replace(",", "")) for c in cells)
            except ValueError:
                continue  # a source line shown without counts
            d1 += d1r + d1w
            ll += dlr + dlw
    return d1, ll


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="rounds of the program (default 20: 123 M records)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--work", default=str(ROOT / "bench-out" / "annotate"))
    ap.add_argument("--old", metavar="DIR", help="also time annotate with the cachecolor package in DIR "
                    "(an older build: DIR/cachecolor), alternating with the others")
    args = ap.parse_args()
    for tool in ("valgrind", "cg_annotate", "cc"):
        if shutil.which(tool) is None:
            print(f"annotate speed: not measured ({tool} is not installed)")
            return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    exe = work / "annotate_pattern"
    subprocess.run(["cc", "-g", "-O1", "-o", str(exe), str(ROOT / "benches" / "annotate_pattern.c")], check=True)
    trace = work / "annotate_pattern.cctrace"
    cap_cpu, cap_wall, _ = timed(CLI + ["trace", "capture", "-o", str(trace), "--", str(exe), str(args.rounds)])
    cg_out = work / "cachegrind.out"
    names = ("cachegrind", "cachecolor") + (("old",) if args.old else ())
    sides: dict[str, dict[str, list[float]]] = {s: {"cpu": [], "wall": []} for s in names}
    cg_text = cc_text = old_text = ""
    old_env = dict(os.environ, PYTHONPATH=str(Path(args.old).resolve())) if args.old else None
    # Each side's package byte-compiled first, as `pip install` leaves it: with
    # PYTHONDONTWRITEBYTECODE set, a checkout's stale .pyc files would be recompiled on every run.
    for pkg in [ROOT / "python" / "cachecolor"] + ([Path(args.old) / "cachecolor"] if args.old else []):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True)
    for _ in range(args.repeats):
        c1, w1, _ = timed(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CG_GEOMETRY,
                           f"--cachegrind-out-file={cg_out}", str(exe), str(args.rounds)])
        c2, w2, p = timed(["cg_annotate", "--show-percs=no", str(cg_out)])
        cg_text = p.stdout
        sides["cachegrind"]["cpu"].append(c1 + c2)
        sides["cachegrind"]["wall"].append(w1 + w2)
        c, w, p = timed(CLI + ["annotate", "--config", str(CONFIG), str(trace)])
        cc_text = p.stdout
        sides["cachecolor"]["cpu"].append(c)
        sides["cachecolor"]["wall"].append(w)
        if old_env is not None:
            c, w, p = timed(CLI + ["annotate", "--config", str(CONFIG), str(trace)], env=old_env)
            old_text = p.stdout
            sides["old"]["cpu"].append(c)
            sides["old"]["wall"].append(w)
    med = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in sides.items()}
    cg_d1, cg_ll = main_loop_misses_cg(cg_text)
    ours = {}
    for line in cc_text.splitlines():
        m = re.match(r"^\s*main\s+\S*annotate_pattern\.c\s+(\d+)\s+(.*)$", line)
        if m:
            nums = [int(x.replace(",", "")) for x in m.group(2).split()]
            ours[int(m.group(1))] = nums
    src = (ROOT / "benches" / "annotate_pattern.c").read_text().splitlines()
    keep = [i + 1 for i, l in enumerate(src) if "s += scan[i]" in l or "t->value" in l]
    # annotate's columns: reads writes ifetches I1_misses D1_misses LL_misses
    cc_d1 = sum(ours[k][4] for k in keep if k in ours)
    cc_ll = sum(ours[k][5] for k in keep if k in ours)
    agree = cg_d1 > 0 and abs(cc_d1 - cg_d1) <= 0.01 * cg_d1 and abs(cc_ll - cg_ll) <= 0.01 * max(cg_ll, 1)
    rounds, reps = args.rounds, args.repeats
    print(f"**annotate against cachegrind** (`python benches/annotate_speed.py --rounds {rounds} --repeats {reps}`; "
          f"benches/annotate_pattern.c, {rounds} rounds; medians of {reps} alternating runs; CPU = user + system "
          "of the process and its children)\n")
    print("| side | CPU s | wall s | CPU ratio | wall ratio |")
    print("|---|---:|---:|---:|---:|")
    labels = [("cachegrind", "cachegrind + cg_annotate"), ("cachecolor", "cachecolor annotate (trace captured)")]
    if args.old:
        labels.append(("old", f"cachecolor annotate, the build in {args.old}"))
    for s, label in labels:
        print(f"| {label} | {med[s]['cpu']:.2f} | {med[s]['wall']:.2f} | {med[s]['cpu'] / med['cachegrind']['cpu']:.1f} | "
              f"{med[s]['wall'] / med['cachegrind']['wall']:.1f} |")
    print(f"| cachecolor trace capture (once) | {cap_cpu:.2f} | {cap_wall:.2f} | "
          f"{cap_cpu / med['cachegrind']['cpu']:.1f} | {cap_wall / med['cachegrind']['wall']:.1f} |")
    print(f"\nThe main loop's lines: D1 misses {cc_d1:,} (cachecolor) / {cg_d1:,} (cachegrind), LL misses "
          f"{cc_ll:,} / {cg_ll:,}: {'agree within 1%' if agree else 'DIFFER by more than 1%'}.")
    same = True
    if args.old:
        same = old_text == cc_text
        print(f"The old build's report: {'the same, byte for byte' if same else 'DIFFERENT'}.")
    return 0 if agree and same else 1


if __name__ == "__main__":
    sys.exit(main())
