"""What the pollute oracle's co-run page profile costs in host time (docs/PERFORMANCE.md, "The
pollute oracle's page profile").

The exact per-page LLC profile of a config's ``linux`` co-run (seed 1), timed three ways, each the
best host CPU time of RUNS runs in this process:

  linux        the plain linux run (``simulate_system``): what the profile observes
  tally        ``oracles.corun_profile``: the simulator's own per-page tally
               (``_core.simulate_system_page_llc``), the engine stepped record by record
  per-access   ``oracles.per_access_profile``: a Python policy whose ``sample`` hook gets every
               LLC access (the exact PMU at period 1), one Python call each

The two profiles must be equal (pages and every process's counts). Usage:

    .venv/bin/python benches/oracle_profile.py                       # examples/verdicts/sensitive-beside-stream.toml
    RUNS=1 .venv/bin/python benches/oracle_profile.py examples/robustness/stream-beside-320k.toml
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cachecolor import _core
from cachecolor.oracles import corun_profile, per_access_profile
from cachecolor.sweep import grid, prepare

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("RUNS", 3))


def best(f) -> tuple[float, object]:
    times, out = [], None
    for _ in range(RUNS):
        t0 = time.process_time()
        out = f()
        times.append(time.process_time() - t0)
    return min(times), out


def main(argv: list[str]) -> int:
    config = Path(argv[0]) if argv else ROOT / "examples" / "verdicts" / "sensitive-beside-stream.toml"
    [point] = grid([config], None, ["linux"], [1])
    cj = prepare(0, point).config_json
    linux, _ = best(lambda: _core.simulate_system(cj, "json", None))
    tally, prof = best(lambda: corun_profile(cj))
    brute, slow = best(lambda: per_access_profile(cj))
    same = prof["pages"] == slow["pages"] and prof["processes"] == slow["processes"]
    accesses = sum(r[2] for r in prof["pages"])
    print(f"{config}: {len(prof['pages'])} pages, {accesses:,} LLC accesses profiled; best of {RUNS}, host CPU seconds")
    print("| run | CPU s | x linux |")
    print("|---|---|---|")
    for name, t in (("linux", linux), ("tally", tally), ("per-access", brute)):
        print(f"| {name} | {t:.2f} | {t / linux:.2f} |")
    print(f"speed-up of the profile: {brute / tally:.1f}x; profiles equal: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
