"""A fixed amount of work for instruction counts (docs/PERFORMANCE.md, "Statistics by
privileged mode"): cachecolor's three-level config on 2 M sequential 8-byte loads, given as a
NumPy address array (`array`: the lean engine reads the columns in place) or as records with
kind and thread columns (`records`: converted to records, same-line runs batched). Run it under
callgrind, the package to measure first on PYTHONPATH:

    valgrind --tool=callgrind .venv/bin/python benches/modes_probe.py array
"""

import sys
from pathlib import Path

import numpy as np

import cachecolor

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "array"
    if mode not in ("array", "records"):
        sys.exit("usage: modes_probe.py array|records")
    cfg = cachecolor.load_config(ROOT / "examples" / "crossval" / "three-level.toml")
    n = 2_000_000
    addrs = (0x200000000 + 8 * np.arange(n, dtype=np.uint64)).astype(np.uint64)
    sizes = np.full(n, 8, np.uint16)
    if mode == "array":
        r = cachecolor.simulate(cfg, trace=addrs, sizes=sizes)
    else:
        cols = {"addr": addrs, "size": sizes, "kind": np.zeros(n, np.uint8), "thread": np.zeros(n, np.uint32)}
        r = cachecolor.simulate(cfg, trace=cols)
    print(mode, {name: r.level(name)["misses"] for name in r.level_names})


if __name__ == "__main__":
    main()
