"""Memory bandwidth and loaded latency of every machine preset under the queued memory model
(crates/sim/src/dram, docs/system.md "Memory bandwidth and queueing").

Two sweeps per preset, on one chip (`chips = 1`):

- cores: a read stream (one 8-byte load per line, sequential over 64 MiB per stream, far
  beyond every LLC) on 1, 2, ... all cores at once: the achieved bandwidth against the peak;
- injection delay: a stream on every core with `delay` instructions of work between its
  loads (`icount`), from 0 up: the loaded-latency curve, latency against achieved bandwidth,
  as Intel MLC's `--loaded_latency` draws it (MLC injects delays into its bandwidth threads and
  measures latency meanwhile).

`mlp = 10` for both: the ten line-fill buffers of a Nehalem/Sandy Bridge core (Intel
Optimization Reference Manual), so that a few cores can saturate the channels as real cores
with their hardware prefetchers do; the presets' own `mlp = 1` leaves one outstanding miss per
core, which no machine's controller notices.

    .venv/bin/python benches/dram_sweep.py [--out docs/dram] [--lines N] [--preset NAME]...

writes `sweep.csv` and `bandwidth.png` / `loaded-latency.png` into `--out`.
"""

import argparse
import csv
import sys
from pathlib import Path

import cachecolor
from cachecolor import presets

MLP = 10.0
DELAYS = [0, 10, 20, 40, 80, 160, 320, 640]


def config(name: str, streams: int, lines: int, delay: int, model: str) -> dict:
    machine = presets.machine(name)
    machine["chips"] = 1
    machine["timing"]["mlp"] = MLP
    machine.setdefault("memory", {})["model"] = model
    line = int(machine["hierarchy"].get("line_size", 64))
    processes = []
    for i in range(streams):
        phase = {
            "pattern": "sequential",
            "footprint": "64MiB",
            "references": lines,
            "size": line,
            "base": 0x1_0000_0000 * (i + 1),
            "icount": delay,
        }
        processes.append(
            {"name": f"stream{i}", "pin": [i], "threads": [{"workload": {"seed": i + 1, "phases": [phase]}}]}
        )
    return {
        "machine": machine,
        "memory": {"ram": "4GiB", "allocator": "sequential"},
        "policy": {"name": "linux"},
        "scheduler": {"tick": 10_000_000, "time_slice": 10_000_000},
        "processes": processes,
    }


def measure(name: str, streams: int, lines: int, delay: int, model: str = "queued") -> dict:
    r = cachecolor.simulate_system(config(name, streams, lines, delay, model))
    m = r.to_dict()["memory"][0]
    return {
        "preset": name,
        "model": model,
        "streams": streams,
        "delay": delay,
        "peak_gbps": m["peak_gbps"],
        "achieved_gbps": m["achieved_gbps"],
        "loaded_latency_ns": m["loaded_latency_ns"],
        "mean_queue_cycles": m["mean_queue_cycles"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/dram"))
    ap.add_argument("--lines", type=int, default=200_000, help="lines each stream reads")
    ap.add_argument("--preset", action="append", help="default: every preset")
    a = ap.parse_args()
    names = a.preset or [n for n in presets.machine_names() if n != "detect"]
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        cores = int(presets.machine(name)["hierarchy"]["cores"])
        for n in range(1, cores + 1):
            rows.append(measure(name, n, a.lines, 0))
            print(rows[-1], file=sys.stderr, flush=True)
        for d in DELAYS:
            rows.append(measure(name, cores, a.lines, d))
            print(rows[-1], file=sys.stderr, flush=True)
    with open(a.out / "sweep.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, names, a.out)


def plot(rows: list, names: list, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, name in enumerate(names):
        pts = [r for r in rows if r["preset"] == name and r["delay"] == 0]
        pts = sorted({r["streams"]: r for r in pts}.values(), key=lambda r: r["streams"])
        color = f"C{i}"
        ax.plot([r["streams"] for r in pts], [r["achieved_gbps"] for r in pts], "o-", color=color, label=name)
        ax.axhline(pts[0]["peak_gbps"], color=color, ls=":", lw=1)
    ax.set_xlabel("cores streaming")
    ax.set_ylabel("achieved bandwidth (GB/s); dotted: peak")
    ax.set_title("Read streams on 1..all cores, queued memory model (mlp 10)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "bandwidth.png", dpi=110)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, name in enumerate(names):
        cores = max(r["streams"] for r in rows if r["preset"] == name)
        pts = sorted(
            (r for r in rows if r["preset"] == name and r["streams"] == cores and r["delay"] in DELAYS),
            key=lambda r: -r["delay"],
        )
        peak = pts[0]["peak_gbps"]
        ax.plot(
            [r["achieved_gbps"] / peak for r in pts],
            [r["loaded_latency_ns"] for r in pts],
            "o-",
            color=f"C{i}",
            label=name,
        )
    ax.set_xlabel("achieved bandwidth / peak")
    ax.set_ylabel("loaded latency (ns)")
    ax.set_yscale("log")
    ax.set_title("Loaded latency, all cores, injection delay 640..0 instructions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "loaded-latency.png", dpi=110)


if __name__ == "__main__":
    main()
