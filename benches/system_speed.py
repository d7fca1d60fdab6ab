"""Whole-system speed against the cache-only path (issue 3's benchmark, first cut).

Runs examples/os/placement-random.toml (one core, 800,000 references over 1 MiB) as a system
and the same hierarchy and workload cache-only; prints references per second of each and the
ratio. Usage: .venv/bin/python benches/system_speed.py
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import cachecolor

ROOT = Path(__file__).resolve().parent.parent


def best(f, repeats: int = 3) -> float:
    t = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def main() -> None:
    path = ROOT / "examples" / "os" / "placement-random.toml"
    raw = tomllib.loads(path.read_text())
    thread = raw["processes"][0]["threads"][0]["workload"]
    n = sum(p["references"] for p in thread["phases"])
    system = best(lambda: cachecolor.simulate_system(path))
    cache_only = best(lambda: cachecolor.simulate({"hierarchy": raw["machine"]["hierarchy"], "workload": thread}))
    print(
        f"system {n / system / 1e6:.2f} M refs/s, cache-only {n / cache_only / 1e6:.2f} M refs/s: "
        f"the system is {system / cache_only:.1f}x slower"
    )


if __name__ == "__main__":
    main()
