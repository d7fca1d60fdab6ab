"""The speed-up of a 40-point sweep on 1 and 2 local workers (docs/PERFORMANCE.md, "Sweeps").

40 points: examples/os/colors-disjoint.toml with 3,000,000 references for the victim (the stream's
600,000 as they are: more would not fit its two colors), L2 128 KiB and
256 KiB, policies linux and static, seeds 1-10. Each timing runs `cachecolor sweep` afresh into an
empty directory (nothing reused), alternating 1 and 2 workers so a change in the machine's other
load hits both alike. Usage: python benches/sweep_speed.py [REPEATS] (default 3).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    work = Path(tempfile.mkdtemp(prefix="sweep-speed-"))
    cfg = work / "disjoint.toml"
    cfg.write_text((ROOT / "examples/os/colors-disjoint.toml").read_text().replace("references = 600000", "references = 3000000", 1))
    spec = work / "spec.toml"
    spec.write_text(
        f'configs = ["{cfg}"]\npolicies = ["linux", "static"]\nseeds = {{ first = 1, count = 10 }}\n'
        '[parameters]\n"machine.hierarchy.levels[1].size" = ["128KiB", "256KiB"]\n'
    )
    times: dict[int, list[float]] = {1: [], 2: []}
    for r in range(repeats):
        for workers in (1, 2):
            out = work / f"out-{workers}-{r}"
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "cachecolor", "sweep", str(spec), "--out", str(out), "--workers", str(workers), "-q"], check=True)
            dt = time.perf_counter() - t0
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
            times[workers].append(dt)
            load = os.getloadavg()[0]
            print(f"repeat {r + 1}: {workers} worker(s): {dt:.1f} s wall, {cpu:.1f} s CPU (load average {load:.1f})", flush=True)
    for w, ts in times.items():
        print(f"{w} worker(s): " + ", ".join(f"{t:.1f}" for t in ts) + f" s (best {min(ts):.1f})")
    pairs = [a / b for a, b in zip(times[1], times[2])]
    print("speed-up per repeat: " + ", ".join(f"{p:.2f}x" for p in pairs) + f"; best-to-best {min(times[1]) / min(times[2]):.2f}x")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
