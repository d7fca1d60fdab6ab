#!/usr/bin/env python3
"""Miss-rate curves: cachecolor against libCacheSim and a numba Fenwick kernel, side by side
in one run (`make bench-mrc`; results appended to docs/PERFORMANCE.md).

What it measures:
- Trace: ANCHORS.md's MRC trace, 10 M references over 1 M lines (``--refs``; lines = refs / 10),
  each reference a zipf(0.9) draw or the next line of a cyclic scan (``cachecolor.zipf_scan_trace``,
  seed 1), so every tool profiles exactly the same line numbers.
- Tools, each measurement in a fresh process, taking turns within each repeat:
  - cachecolor exact (``cachecolor.mrc(addrs)``, from a NumPy array), SHARDS at R = 0.01 and
    0.001, fixed-size SHARDS (8,192 lines), AET at 1% reference sampling, and per-set stack
    distance profiles of 32,768 sets (a 32 MiB 16-way cache's sets);
  - libCacheSim's ``mrcProfiler`` (the C tool in the libcachesim PyPI sdist, built by
    benches/build_libcachesim.sh): SHARDS at rate 1, which is its exact splay-tree profiler,
    and at R = 0.01, on the same lines as an oracleGeneral binary trace (object size 1, so its
    byte sizes are line counts). Its time includes reading the 240 MB trace file (it has no
    in-memory input); the file is read once before, so it comes from the page cache;
  - a numba Fenwick-tree kernel (the classic Olken/Bennett-Kruskal form: a tree over all N
    time steps, dense ids from ``np.unique``), timed with and without the remap; skipped when
    numba is not installed (``make bench-mrc`` installs it).
- Time: the profiling call (trace already in memory or on disk in the tool's input form);
  rate = references / second; peak RSS = the measuring process's VmHWM (GNU time's %M for
  mrcProfiler).
- Accuracy: every curve at 120 log-spaced sizes against cachecolor's exact one; and, for
  cachecolor's estimates, the mean absolute error over *every* size from the method's reliable
  size (50 / R for SHARDS) to the distinct lines, the figure the issue's target is stated in.
  libCacheSim's exact curve is checked against cachecolor's (same semantics up to its distance
  convention, see the notes).

Usage: benches/mrc.py [--refs N] [--repeats R] [--lcs PATH] [--out docs/PERFORMANCE.md] [--no-write]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from run import GNU_TIME, loadavg, machine, peak_rss_kib  # noqa: E402

LINE = 64

# tool: (label, cachecolor mrc keyword arguments or None)
TOOLS: dict[str, tuple[str, Optional[dict[str, Any]]]] = {
    "cc-exact": ("cachecolor exact", {}),
    "cc-shards-0.01": ("cachecolor SHARDS R=0.01", {"rate": 0.01}),
    "cc-shards-0.001": ("cachecolor SHARDS R=0.001", {"rate": 0.001}),
    "cc-shards-8192": ("cachecolor SHARDS fixed size 8192", {"max_lines": 8192}),
    "cc-aet-0.01": ("cachecolor AET 1% references", {"method": "aet", "rate": 0.01}),
    "cc-sets": ("cachecolor per-set profiles, 32,768 sets x 16 ways (not a fully associative curve)", None),
    "numba": ("numba Fenwick kernel (remap + kernel)", None),
    "lcs-exact": ("libCacheSim mrcProfiler exact (SHARDS rate 1, splay tree)", None),
    "lcs-shards-0.01": ("libCacheSim mrcProfiler SHARDS R=0.01", None),
}


def grid(lines: int, n: int = 120) -> list[int]:  # mrcProfiler takes at most 128 sizes
    return sorted({int(round(x)) for x in np.geomspace(1, lines, n)})


# ---------------------------------------------------------------------------------------------
# Workers (fresh processes): print {"seconds", "sizes", "miss_rate", ...} as JSON.


def worker(tool: str, work: Path, lines: int) -> dict[str, Any]:
    sizes = grid(lines)
    addrs = np.load(work / "trace.npy")
    if tool == "cc-sets":
        import pandas  # noqa: F401

        import cachecolor

        t0 = time.perf_counter()
        p = cachecolor.set_profile(addrs, sets=32768, max_ways=16)
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "sizes": sizes, "miss_rate": None, "set_miss_rate": p.miss_rate().tolist()}
    if tool.startswith("cc-"):
        import pandas  # noqa: F401  (imported by cachecolor's first in-memory call: not profiling time)

        import cachecolor

        kw = TOOLS[tool][1] or {}
        t0 = time.perf_counter()
        c = cachecolor.mrc(addrs, **kw)
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "sizes": sizes, "miss_rate": c.at(sizes).tolist(),
                "state_mib": c.state_bytes / (1 << 20), "reliable_from": c.reliable_from}
    if tool == "numba":
        return numba_worker(addrs, sizes)
    raise SystemExit(f"unknown worker {tool}")


def numba_worker(addrs: np.ndarray, sizes: list[int]) -> dict[str, Any]:
    import numba

    @numba.njit(cache=False)
    def kernel(ids: np.ndarray, distinct: int) -> np.ndarray:
        n = len(ids)
        tree = np.zeros(n + 1, np.int64)  # Fenwick tree over time: 1 at each line's latest use
        last = np.full(distinct, -1, np.int64)
        hist = np.zeros(distinct + 1, np.int64)  # hist[d]: stack distance d; hist[0]: cold
        for t in range(n):
            x = ids[t]
            p = last[x]
            if p < 0:
                hist[0] += 1
            else:
                # marks in (p, t): prefix(t) - prefix(p + 1)
                s = 0
                i = t
                while i > 0:
                    s += tree[i]
                    i -= i & -i
                i = p + 1
                while i > 0:
                    s -= tree[i]
                    i -= i & -i
                hist[s + 1] += 1
                i = p + 1
                while i <= n:
                    tree[i] -= 1
                    i += i & -i
            i = t + 1
            while i <= n:
                tree[i] += 1
                i += i & -i
            last[x] = t
        return hist

    lines = addrs >> np.uint64(6)
    kernel(np.zeros(4, np.int64), 1)  # compile outside the timing
    t0 = time.perf_counter()
    uniq, ids = np.unique(lines, return_inverse=True)
    t1 = time.perf_counter()
    hist = kernel(ids.astype(np.int64), len(uniq))
    t2 = time.perf_counter()
    n = len(lines)
    tail = np.concatenate([np.cumsum(hist[:0:-1])[::-1], [0]])
    s = np.minimum(np.asarray(sizes), len(hist) - 1)
    mr = (hist[0] + tail[s]) / n
    return {"seconds": t2 - t0, "kernel_seconds": t2 - t1, "remap_seconds": t1 - t0, "sizes": sizes,
            "miss_rate": mr.tolist(), "numba": numba.__version__}


def run_worker(tool: str, work: Path, lines: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--worker", tool, "--work", str(work), "--lines", str(lines)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{tool} failed: {out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def run_lcs(tool: str, exe: Path, work: Path, lines: int) -> dict[str, Any]:
    sizes = grid(lines)
    rate = "1" if tool == "lcs-exact" else "0.01"
    argv = [str(exe), str(work / "trace.oracleGeneral"), "oracleGeneral", "--algo=LRU", "--profiler=SHARDS",
            f"--profiler-params=FIX_RATE,{rate},42", "--size=" + ",".join(f"{s}B" for s in sizes)]
    timed = [GNU_TIME, "-f", "%e %M", *argv] if os.access(GNU_TIME, os.X_OK) else argv
    t0 = time.perf_counter()
    out = subprocess.run(timed, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{tool} failed: {out.stderr[-2000:]}")
    rss = None
    if timed is not argv:
        wall, kib = out.stderr.strip().splitlines()[-1].split()
        rss = int(kib)
    got_sizes, mr = [], []
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].endswith("B") and parts[0][:-1].isdigit():
            got_sizes.append(int(parts[0][:-1]))
            mr.append(float(parts[1]))
    if got_sizes != sizes:
        raise RuntimeError(f"{tool}: unexpected sizes in its output ({len(got_sizes)} of {len(sizes)})")
    return {"seconds": seconds, "sizes": sizes, "miss_rate": mr, "rss": rss}


def accuracy(work: Path, lines: int) -> dict[str, Any]:
    """MAE of cachecolor's estimates over every size from the reliable size to the distinct lines."""
    import cachecolor

    addrs = np.load(work / "trace.npy")
    every = np.arange(1, lines + 1)
    exact = cachecolor.mrc(addrs, all_sizes=True)
    assert exact.distinct == lines
    out: dict[str, Any] = {}
    for tool in ("cc-shards-0.01", "cc-shards-0.001", "cc-shards-8192", "cc-aet-0.01"):
        kw = TOOLS[tool][1] or {}
        salts_mae = []
        for salt in range(3):
            est = cachecolor.mrc(addrs, sizes=every, seed=salt, **kw)
            ok = est.reliable
            salts_mae.append(float(np.abs(est.miss_rate[ok] - exact.miss_rate[ok]).mean()))
        out[tool] = {"mae": salts_mae, "from": int(est.reliable_from)}
    if "shards" in out.get("cc-shards-0.01", {}):  # pragma: no cover
        pass
    # RapidMRC: an L2 curve from a window of L1 misses (32 KiB 8-way LRU L1), from the middle
    # of the stream, half of the window warm-up, against the curve of every L1 miss.
    whole = cachecolor.rapid_mrc(addrs, window=10**15, points=1000)
    for frac in (0.1, 0.01):
        w = int(whole.l1_misses * frac)
        r = cachecolor.rapid_mrc(addrs, window=w, warmup=w // 2, start=whole.l1_misses // 2, points=1000)
        out[f"rapidmrc-{frac}"] = {"mae": [r.mae], "from": 1, "window": w, "l1_misses": whole.l1_misses}
    unadj = cachecolor.mrc(addrs, sizes=every, rate=0.01, adjust=False)
    ok = unadj.reliable
    out["cc-shards-0.01-noadj"] = {"mae": [float(np.abs(unadj.miss_rate[ok] - exact.miss_rate[ok]).mean())],
                                   "from": int(unadj.reliable_from)}
    return out


# ---------------------------------------------------------------------------------------------
# Orchestration


def prepare(work: Path, refs: int, lines: int) -> None:
    import cachecolor

    work.mkdir(parents=True, exist_ok=True)
    addrs = cachecolor.zipf_scan_trace(refs, lines)
    np.save(work / "trace.npy", addrs)
    rec = np.zeros(refs, dtype=np.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")]))
    rec["t"] = np.arange(refs, dtype=np.uint32)
    rec["id"] = addrs >> np.uint64(6)
    rec["size"] = 1
    rec["next"] = -1
    (work / "trace.oracleGeneral").write_bytes(rec.tobytes())


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {}
    for pkg in ("cachecolor", "numpy", "numba", "libcachesim"):
        try:
            out[pkg] = version(pkg)
        except Exception:
            out[pkg] = "not installed"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--refs", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lcs", default=str(REPO / "bench-out" / "libcachesim" / "mrcProfiler"),
                    help="libCacheSim's mrcProfiler binary (benches/build_libcachesim.sh builds it)")
    ap.add_argument("--out", default=str(REPO / "docs" / "PERFORMANCE.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--work", default=str(REPO / "bench-out" / "mrc"))
    ap.add_argument("--no-accuracy", action="store_true", help="skip the accuracy pass (speed only)")
    ap.add_argument("--tools", help="comma-separated subset of: " + ", ".join(TOOLS))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--lines", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work)
    if args.worker:
        res = accuracy(work, args.lines) if args.worker == "accuracy" else worker(args.worker, work, args.lines)
        res.setdefault("rss", peak_rss_kib())
        print(json.dumps(res))
        return 0

    refs, lines = args.refs, args.refs // 10
    start, load_start = time.time(), loadavg()
    prepare(work, refs, lines)
    skipped: dict[str, str] = {}
    tools = args.tools.split(",") if args.tools else list(TOOLS)
    if "cc-exact" not in tools:
        tools.insert(0, "cc-exact")  # the reference of every comparison
    exe = Path(args.lcs)
    if not os.access(exe, os.X_OK):
        skipped["libCacheSim"] = f"{exe} not built (run benches/build_libcachesim.sh)"
        tools = [t for t in tools if not t.startswith("lcs-")]
    else:
        (work / "trace.oracleGeneral").read_bytes()  # into the page cache
    try:
        import numba  # noqa: F401
    except ImportError:
        skipped["numba"] = "not installed (pip install numba; make bench-mrc installs it)"
        tools = [t for t in tools if t != "numba"]
    results: dict[str, list[dict[str, Any]]] = {}
    for rep in range(args.repeats):
        for tool in tools:
            res = run_lcs(tool, exe, work, lines) if tool.startswith("lcs-") else run_worker(tool, work, lines)
            results.setdefault(tool, []).append(res)
            print(f"repeat {rep + 1}: {tool:18} {refs / res['seconds'] / 1e6:8.2f} M refs/s", file=sys.stderr)
    acc = run_worker("accuracy", work, lines) if not args.no_accuracy else {}
    doc = report(refs, lines, args.repeats, results, acc, load_start, loadavg(), time.time() - start, skipped)
    print(doc)
    if not args.no_write:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n" + doc)
        print(f"appended to {args.out}", file=sys.stderr)
    return 0


def report(refs, lines, repeats, results, acc, load_start, load_end, elapsed, skipped) -> str:
    mach, vers = machine(), versions()
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    exact_ref = np.asarray(results["cc-exact"][0]["miss_rate"])
    med = {t: statistics.median(refs / r["seconds"] for r in rs) for t, rs in results.items()}
    L = [f"## Miss-rate curves, run of {now}: `make bench-mrc`", ""]
    L.append(f"- Command: `make bench-mrc` (`.venv/bin/python benches/mrc.py --repeats {repeats}`): "
             f"{refs:,} references over {lines:,} lines (half zipf(0.9), half cyclic scan; ANCHORS.md), "
             f"{repeats} repeat(s) per tool, tools taking turns, each in a fresh process.")
    L.append(f"- Machine: {mach.get('Model name', '?')}, {mach.get('CPU(s)', '?')} CPUs, "
             f"{mach.get('Hypervisor vendor', 'no')} hypervisor, {mach.get('memory', '?')} RAM, kernel {mach['kernel']}, "
             f"Python {mach['python']}.")
    L.append(f"- Load average (1, 5, 15 min): {load_start} at start, {load_end} at end. Elapsed {elapsed:.0f} s.")
    L.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()) + ".")
    if skipped:
        L.append("- Not run: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()) + ".")
    L.append("")
    L.append("| tool | M refs/s (median) | min - max | peak RSS MiB (profiler state) | max abs. diff. from exact (120 sizes) | x cachecolor exact |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for tool, rs in results.items():
        rates = [refs / r["seconds"] / 1e6 for r in rs]
        rss = max((r.get("rss") or 0) for r in rs) / 1024
        state = f" ({rs[0]['state_mib']:.1f})" if "state_mib" in rs[0] else ""
        diff = "-" if rs[0]["miss_rate"] is None else f"{float(np.abs(np.asarray(rs[0]['miss_rate']) - exact_ref).max()):.4f}"
        L.append(f"| {TOOLS[tool][0]} | {statistics.median(rates):.2f} | {min(rates):.2f} - {max(rates):.2f} | "
                 f"{rss:.0f}{state} | {diff} | {med[tool] / med['cc-exact']:.2f} |")
    if "numba" in results:
        k = statistics.median(refs / r["kernel_seconds"] / 1e6 for r in results["numba"])
        L.append(f"| numba Fenwick kernel alone (ids remapped beforehand, not timed) | {k:.2f} | | | | "
                 f"{k * 1e6 / med['cc-exact']:.2f} |")
    L.append("")
    if acc:
        L.append("Accuracy of cachecolor's estimates: mean absolute error against the exact curve over every size "
                 "from the reliable size (50 / R lines for SHARDS) to the distinct lines, salts 0, 1, 2:")
        L.append("")
        L.append("| method | MAE per salt | from size (lines) |")
        L.append("|---|---|---:|")
        names = {"cc-shards-0.01-noadj": "cachecolor SHARDS R=0.01 without SHARDS_adj (salt 0)"}
        for tool, a in acc.items():
            if tool == "rss":
                continue
            label = names.get(tool, TOOLS.get(tool, (tool,))[0])
            if tool.startswith("rapidmrc"):
                label = (f"RapidMRC: L2 curve from {a['window']:,} of the {a['l1_misses']:,} L1 misses "
                         f"(32 KiB 8-way), half warm-up, vs. every L1 miss (1,000 log-spaced sizes)")
            L.append(f"| {label} | {', '.join(f'{m:.4f}' for m in a['mae'])} | {a['from']:,} |")
        L.append("")
    targets = []
    if "lcs-exact" in med:
        x = med["cc-exact"] / med["lcs-exact"]
        targets.append(f"exact >= 10x libCacheSim's exact profiler: **{x:.1f}x, {'met' if x >= 10 else 'NOT met'}**")
    if "numba" in med:
        x = med["cc-exact"] / med["numba"]
        k = statistics.median(refs / r["kernel_seconds"] for r in results["numba"])
        targets.append(f"exact faster than the numba Fenwick kernel: **{x:.1f}x with its remap, "
                       f"{med['cc-exact'] / k:.1f}x against the kernel alone, {'met' if med['cc-exact'] > k else 'NOT met'}**")
    if "cc-shards-0.01" in med:
        x = med["cc-shards-0.01"] / med["cc-exact"]
        targets.append(f"SHARDS at R = 0.01 >= 20x faster than exact: **{x:.1f}x, {'met' if x >= 20 else 'NOT met'}**")
    if "cc-shards-0.01" in acc:
        worst = max(acc["cc-shards-0.01"]["mae"])
        targets.append(f"SHARDS at R = 0.01 MAE <= 0.005: **worst salt {worst:.4f}, {'met' if worst <= 0.005 else 'NOT met'}**")
    L.append("Targets (issue): " + "; ".join(targets) + ".")
    L.append("")
    L.append("Notes: a cachecolor process's peak RSS includes the interpreter with NumPy and pandas and the "
             "trace as a NumPy array (80 MB); the profiler's own state is in parentheses. The numba process "
             "also holds the remapped ids and a Fenwick tree over all references (O(N) memory). "
             "cachecolor profiles the NumPy array in memory; libCacheSim's times include reading its "
             "binary trace (24 bytes per reference) from the page cache, as it has no in-memory input. The "
             "difference column compares each curve with cachecolor's exact one at the 120 sizes both report "
             "(libCacheSim prints 6 decimals); for the estimates it includes sizes below their reliable size.")
    L.append("")
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
