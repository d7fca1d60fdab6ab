#!/usr/bin/env python3
"""linux's placement spread on the captured programs of the robustness matrix (docs/rocs.md
"Robustness matrix: captured real programs"). Compiles and captures
examples/robustness/programs/*.c as their configs' headers say (the traces are written beside
the configs, not checked in), then runs every config there under linux on fresh memory and on
aged memory ([memory] aged), seeds 1-5 each, and prints a Markdown table of each process's
IPC: mean, min, max. From the repository root after `make build`:
    .venv/bin/python benches/robustness_programs_spread.py
"""
import copy
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import cachecolor

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "examples" / "robustness" / "programs"
SEEDS = (1, 2, 3, 4, 5)


def capture(config: Path, build: Path) -> None:
    """Capture the trace a one-program config reads, as its header says (pairs read theirs)."""
    found = re.search(r"^#.*trace capture .* -- \./(\w+)( .*)?$", config.read_text(), re.MULTILINE)
    if found:
        program, args = found.group(1), (found.group(2) or "").split()
        subprocess.run([str(Path(sys.executable).parent / "cachecolor"), "trace", "capture", "--no-ifetch",
                        "-q", "-o", str(PROGRAMS / f"{config.stem}.cctrace"), "--", str(build / program),
                        *args], check=True, stdout=subprocess.DEVNULL)  # the program's own output


def main() -> None:
    with tempfile.TemporaryDirectory() as build:
        for c in sorted(PROGRAMS.glob("*.c")):
            subprocess.run(["cc", "-O2", "-o", str(Path(build) / c.stem), str(c)], check=True)
        for config in sorted(PROGRAMS.glob("*.toml")):
            capture(config, Path(build))
    print("| config | process | fresh IPC mean (min-max) | aged IPC mean (min-max) | aged / fresh |")
    print("|---|---|---|---|---|")
    for config in sorted(PROGRAMS.glob("*.toml")):
        base = cachecolor.system.load_system_config(config)
        ipcs = {}
        for aged in (False, True):
            for seed in SEEDS:
                cfg = copy.deepcopy(base)
                cfg["memory"]["aged"] = aged
                r = cachecolor.simulate_system(cfg, policy="linux", seed=seed).to_dict()
                for p in r["processes"]:
                    ipcs.setdefault((p["name"], aged), []).append(p["ipc"])
        for name in [p["name"] for p in base["processes"]]:
            fresh, old = ipcs[(name, False)], ipcs[(name, True)]
            cell = lambda v: f"{statistics.mean(v):.4f} ({min(v):.4f}-{max(v):.4f})"
            print(f"| {config.stem} | {name} | {cell(fresh)} | {cell(old)} | "
                  f"{statistics.mean(old) / statistics.mean(fresh):.3f} |", flush=True)


if __name__ == "__main__":
    main()
