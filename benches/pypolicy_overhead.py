"""What Python policy hooks cost in host time (docs/PERFORMANCE.md, "Python policy hooks").

One whole-system run (examples/rocs/art.toml, the ROCS scenario, cut to REFS references) with a
data-address sampler at ROCS's rate (section 5.1: at most one interrupt per 5 K cycles; here a
fixed `[pmu.sampling]` period on L1D misses chosen so the run takes about one sample per 5 K
simulated cycles), timed three ways:

  rust       the Rust `linux` policy (its `sample` hook is the trait's no-op default)
  py-none    a Python policy that defines no hook (the adapter answers every hook in Rust)
  py-sample  a Python policy whose `sample` hook does nothing (the GIL taken, a Kernel and a
             Sample object made, the method called, the Kernel invalidated, per sample)

The three reports must be identical (hooks cost no simulated time); host CPU time is the best of
RUNS runs each. `CASE=static` instead times examples/coloris/isolation-light.toml under the Rust
`static` and its Python port (examples/python/static_sections.py), whose hot hook is
`allowed_colors`, called at every page fault. `CASE=pollute` times the full art.toml under
`linux`, the Rust `rocs` and the Python ROCS-like examples/python/pollute_buffer.py (reports
differ: three policies). Usage:

    .venv/bin/python benches/pypolicy_overhead.py            # REFS=2000000 RUNS=3 by default
    CASE=static .venv/bin/python benches/pypolicy_overhead.py
    MODE=py-sample REFS=500000 valgrind --tool=callgrind .venv/bin/python benches/pypolicy_overhead.py
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import cachecolor
from cachecolor.system import load_system_config

ROOT = Path(__file__).resolve().parent.parent
REFS = int(os.environ.get("REFS", 2_000_000))
RUNS = int(os.environ.get("RUNS", 3))
# L1D misses per sample: art's mix misses L1D about once per 100 simulated cycles here, so 40 is
# about one sample per 5 K cycles (printed below: cycles per sample).
PERIOD = int(os.environ.get("PERIOD", 40))


class NoHooks(cachecolor.Policy):
    name = "py-none"


class NoOpSample(cachecolor.Policy):
    name = "py-sample"

    def sample(self, kernel, sample):
        pass


def config() -> dict:
    cfg = load_system_config(ROOT / "examples" / "rocs" / "art.toml")
    for p in cfg["processes"]:
        for t in p["threads"]:
            for phase in t.get("workload", {}).get("phases", []):
                phase["references"] = min(phase["references"], REFS)
    cfg["policy"] = {"name": "linux"}
    cfg["pmu"] = dict(cfg.get("pmu", {}), sampling={"event": "l1d-misses", "period": PERIOD})
    return cfg


def static_port() -> type:
    from cachecolor.policy import _load_class

    return _load_class(f"{ROOT / 'examples' / 'python' / 'static_sections.py'}:StaticSections")


def pollute_port() -> type:
    from cachecolor.policy import _load_class

    return _load_class(f"{ROOT / 'examples' / 'python' / 'pollute_buffer.py'}:PolluteBuffer")


def run(mode: str, cfg: dict) -> tuple[float, dict]:
    policy = {
        "rust": "linux",
        "py-none": NoHooks,
        "py-sample": NoOpSample,
        "rust-static": "static",
        "py-static": static_port(),
        "rocs": "rocs",
        "py-pollute": pollute_port(),
    }[mode]
    # CPU time of this process (the run is one thread): the machine is shared, wall time is not
    # this run's alone.
    t = time.process_time()
    doc = cachecolor.simulate_system(copy.deepcopy(cfg), policy=policy).to_dict()
    return time.process_time() - t, doc


def comparable(doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    doc.pop("policy")
    doc["config"]["policy"].pop("name")
    return doc


def main() -> int:
    static = os.environ.get("CASE") == "static"
    if os.environ.get("CASE") == "pollute":
        cfg = load_system_config(ROOT / "examples" / "rocs" / "art.toml")
        best: dict[str, float] = {}
        what: dict[str, str] = {}
        for _ in range(RUNS):
            for mode in ("rust", "rocs", "py-pollute"):
                secs, doc = run(mode, cfg)
                best[mode] = min(best.get(mode, secs), secs)
                samples = sum(c["samples"] for c in doc["cores"])
                what[mode] = f"{samples:,} samples, LLC miss rate {doc['processes'][0]['llc_miss_rate']:.3f}"
        print("art.toml (8 M references):")
        for mode in ("rust", "rocs", "py-pollute"):
            print(f"  {mode:10} {best[mode]:7.3f} s   {what[mode]}")
        return 0
    cfg = load_system_config(ROOT / "examples" / "coloris" / "isolation-light.toml") if static else config()
    only = os.environ.get("MODE")
    if only:  # one run, for callgrind
        secs, doc = run(only, cfg)
        faults = sum(p["faults"] for p in doc["processes"])
        print(f"{only}: {secs:.3f} s, {sum(c['samples'] for c in doc['cores'])} samples, {faults} faults")
        return 0
    if static:
        best: dict[str, float] = {}
        docs: dict[str, dict] = {}
        for _ in range(RUNS):
            for mode in ("rust-static", "py-static"):
                secs, docs[mode] = run(mode, cfg)
                best[mode] = min(best.get(mode, secs), secs)
        if comparable(docs["py-static"]) != comparable(docs["rust-static"]):
            print("py-static: report differs from the Rust policy's", file=sys.stderr)
            return 1
        faults = sum(p["faults"] for p in docs["rust-static"]["processes"])
        print(f"isolation-light.toml: {faults:,} page faults (one allowed_colors call each)")
        for mode in ("rust-static", "py-static"):
            print(f"  {mode:12} {best[mode]:7.3f} s   x{best[mode] / best['rust-static']:.3f}")
        return 0
    best: dict[str, float] = {}
    docs: dict[str, dict] = {}
    for _ in range(RUNS):
        for mode in ("rust", "py-none", "py-sample"):
            secs, docs[mode] = run(mode, cfg)
            best[mode] = min(best.get(mode, secs), secs)
    ref = comparable(docs["rust"])
    for mode in ("py-none", "py-sample"):
        if comparable(docs[mode]) != ref:
            print(f"{mode}: report differs from the Rust policy's", file=sys.stderr)
            return 1
    samples = sum(c["samples"] for c in docs["rust"]["cores"])
    cycles = max(c["cycles"] for c in docs["rust"]["cores"])
    print(f"art.toml, {REFS:,} references, sampling period {PERIOD} L1D misses: {samples:,} samples, "
          f"{cycles / max(samples, 1):,.0f} simulated cycles per sample per core-run")
    for mode in ("rust", "py-none", "py-sample"):
        print(f"  {mode:10} {best[mode]:7.3f} s   x{best[mode] / best['rust']:.3f}")
    extra = best["py-sample"] - best["rust"]
    print(f"  per sample: {extra / max(samples, 1) * 1e6:.2f} us of host time for the Python hook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
