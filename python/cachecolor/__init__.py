"""cachecolor: cache-aware page management you can run.

The Python front of cachecolor's Rust simulator. Rust (``cachecolor._core``) owns the models and
the hot loop and releases the GIL while it simulates; this package owns the API, tables, the CLI
(``cachecolor.cli``) and, later, plots, sweeps and reports.

Public API (everything here is re-exported from submodules; see each for details)::

    load_config(path_or_dict) -> dict            # effective config, every default filled in
    simulate(config, trace=None, trace_format="native", progress=None, ...) -> Result
    simulate_system(config, policy=None, seed=None, progress=None) -> SystemResult   # whole OS simulation
    sweep(spec_or_points, out_dir, executor="pool"|"serial"|Client|"tcp://..", workers=None) -> SweepResult
    grid(configs, parameters={path: [values]}, policies=None, seeds=(None,)) -> list[Point]
    read_trace(path, format="native", limit=None, as_="frame", chunksize=None) -> DataFrame | ndarray
                                           (chunksize=N: an iterator of them, N records each)
    write_trace(path, records, metadata="") -> int
    convert_trace(src, fmt, out, progress=None) -> int
    filter_trace(src, out, format=, kinds=, threads=, ranges=, privileged=) -> (read, kept)
    detect_format(path) -> "native" | "lackey" | "din" | "champsim"
    trace_info(path, format="native") -> dict
    capture(program_args, out, backend="auto", ...) -> dict
    presets.detect() -> dict                      # this machine's hierarchy as a config
    presets.machine(name) -> dict                 # a paper's machine ([machine] table), or "detect"
    presets.machine_names() -> list[str]
    mrc(trace, method="exact"|"shards"|"aet", ...) -> MissRateCurve   # LRU miss rate at every size
    set_profile(trace, sets=... | cache_size=, ways=) -> SetProfile    # per-set stack distances
    rapid_mrc(trace, l1_size=, l1_ways=, window=, warmup=) -> RapidMrc  # L2 curve from L1 misses
    set_profile(trace, ..., placement="random" | page map)                # physically aware (5.3.1)
    physical_sdp(trace, cache_size=, ways=, placement=) -> PhysicalSdp   # naive vs physically aware
    placement_sweep(cache_size=, ways=, working_sets=, seeds=) -> DataFrame  # thesis Figure 5.5
    read_pagemap(start, end, pid="self") -> DataFrame                    # vpn/pfn from /proc (root)
    models.uniform_hit_rates / conflict_curve / placement_miss_rate      # thesis 2.3.2, 3.1-3.2, 5.2
    page_profile(config, trace=None, level="LLC", sample_period=N) -> PageProfile  # ROCS 3
    class MyPolicy(Policy): ...                   # an OS policy written in Python (policy.py)
    register_policy(name, cls)                    # simulate_system(cfg, policy=name)

Errors: ``CachecolorError`` (a ``ValueError``) and its subclasses ``ConfigError`` (``.field``),
``TraceError`` (``.offset``), ``SimulationError`` and ``CaptureError``, all raised by the Rust
core from one mapping (crates/py/src/errors.rs).
"""

import os as _os
import sys as _sys


def _started_as_cli(argv: "list[str] | None" = None) -> bool:
    """Whether this process was started as the ``cachecolor`` command: the interpreter's own
    command line (``sys.orig_argv``, Python 3.10+), past the interpreter's options, runs a
    script named ``cachecolor`` (the console script) or ``-m cachecolor``."""
    argv = list(getattr(_sys, "orig_argv", None) or []) if argv is None else argv
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break  # the script (or stdin)
        if a.startswith("--"):
            i += 2 if a == "--check-hash-based-pycs" else 1
            continue
        # A cluster of one-letter options (``-sP``), up to one that takes an argument: the
        # rest of the word, else the next word.
        for j, opt in enumerate(a[1:], 1):
            if opt in "cmWX":
                rest = a[j + 1:]
                if opt == "m":
                    return (rest or (argv[i + 1] if i + 1 < len(argv) else "")) == "cachecolor"
                if opt == "c":
                    return False
                if not rest:
                    i += 1  # the option's value is the next word
                break
        i += 1
    else:
        return False
    return i < len(argv) and _os.path.basename(argv[i]) == "cachecolor"


#: The variables OpenBLAS takes its thread count from, first to last.
_BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")

if ("numpy" not in _sys.modules and not any(v in _os.environ for v in _BLAS_THREAD_VARIABLES)
        and _started_as_cli()):
    # The command does no BLAS work worth a thread pool, but OpenBLAS starts one thread per core
    # when NumPy loads and they spin before sleeping: about 0.1 CPU s on every command. One
    # thread for this process's NumPy; the variable is removed again, so the programs and worker
    # processes the command starts see the environment the user gave. Set any of the variables
    # to choose otherwise (for a Python policy that does BLAS work, say).
    _os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401  (loaded here so OpenBLAS reads the variable now)
    finally:
        del _os.environ["OPENBLAS_NUM_THREADS"]

from . import _core
from ._core import EVENTS, parse_size
from ._core import (
    CachecolorError,
    CaptureError,
    ConfigError,
    SimulationError,
    TraceError,
)
from . import presets
from .analysis import MissRateCurve, RapidMrc, SetProfile, mrc, rapid_mrc, set_profile, zipf_scan_trace
from . import models
from .placement import PhysicalSdp, physical_sdp, placement_sweep, read_pagemap
from .pages import PageProfile, page_profile
from .annotate import AnnotateError, annotate, memory_map, object_ranges
from . import objects
from .config import load_config
from .results import Result
from .simulation import Progress, simulate
from .system import SystemResult, simulate_system
from ._core import (
    Kernel,
    KernelError,
    Machine,
    Page,
    ProcessCounts,
    ProcessInfo,
    Reading,
    Sample,
    SchedEvent,
    Thread,
    Tick,
)
from .policy import Policy, register_policy, registered_policies
from .sweep import Point, SweepError, SweepResult, grid, sweep
from .traces import (
    KIND_NAMES,
    capture,
    convert_trace,
    detect_format,
    filter_trace,
    read_trace,
    trace_formats,
    trace_info,
    write_trace,
)

__version__: str = _core.__version__

__all__ = [
    "EVENTS",
    "parse_size",
    "AnnotateError",
    "annotate",
    "memory_map",
    "object_ranges",
    "CachecolorError",
    "CaptureError",
    "ConfigError",
    "KIND_NAMES",
    "Kernel",
    "KernelError",
    "Machine",
    "Page",
    "Policy",
    "ProcessCounts",
    "ProcessInfo",
    "Reading",
    "Sample",
    "SchedEvent",
    "Thread",
    "Tick",
    "register_policy",
    "registered_policies",
    "MissRateCurve",
    "PageProfile",
    "PhysicalSdp",
    "Progress",
    "RapidMrc",
    "Result",
    "SystemResult",
    "Point",
    "SweepError",
    "SweepResult",
    "grid",
    "sweep",
    "SetProfile",
    "SimulationError",
    "TraceError",
    "__version__",
    "capture",
    "convert_trace",
    "detect_format",
    "filter_trace",
    "load_config",
    "models",
    "mrc",
    "page_profile",
    "physical_sdp",
    "placement_sweep",
    "read_pagemap",
    "simulate_system",
    "presets",
    "rapid_mrc",
    "read_trace",
    "set_profile",
    "simulate",
    "trace_formats",
    "trace_info",
    "write_trace",
    "zipf_scan_trace",
]
