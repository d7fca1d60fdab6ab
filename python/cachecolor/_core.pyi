"""Typed stub of the compiled module ``cachecolor._core`` (crates/py).

The extension is thin glue: configs and results cross as JSON text, record columns as buffers
(NumPy arrays) in and little-endian ``bytes`` out. Use the public API in ``cachecolor`` instead
of calling these directly. ``tests/test_api.py`` checks that this stub and the compiled module
name the same functions and exceptions.
"""

from os import PathLike
from typing import Any, Callable, Optional, Sequence, Union

__version__: str

_Path = Union[str, PathLike[str]]
# (records, bytes, total_bytes, total_records), called once per block of records.
_Progress = Callable[[int, int, Optional[int], Optional[int]], Any]

class CachecolorError(ValueError):
    """Base class of every error cachecolor raises for bad input or a failed run."""

class ConfigError(CachecolorError):
    """An invalid configuration; ``field`` is the dotted path of the field ("" if none)."""

    field: str

class TraceError(CachecolorError):
    """A trace that cannot be read; ``offset`` is the byte offset of the problem, if known."""

    offset: Optional[int]

class SimulationError(CachecolorError):
    """A run that failed for a reason other than its config or trace (an internal error)."""

class CaptureError(CachecolorError):
    """A failed capture; ``summary`` is set (and the trace kept) when the program itself failed."""

    summary: Optional[dict[str, Any]]
    exit_code: Optional[int]

def effective_config(text: str, format: str = "toml") -> str:
    """Parse a config (``format`` "toml" or "json"), check it, return it as JSON with defaults filled in."""

def simulate(
    config_json: str,
    trace: Optional[_Path] = None,
    trace_format: str = "native",
    progress: Optional[_Progress] = None,
) -> str:
    """Simulate a trace file, or the config's workload when ``trace`` is None; returns the result JSON.

    Each entry of its ``levels`` carries ``user`` and ``privileged``: {accesses, hits, misses,
    miss_rate, evictions}, the demand traffic by the mode of the record that made it and the
    evictions by the mode of the access that caused them (results.py documents the document).
    """

def simulate_arrays(
    config_json: str,
    addresses: Any,
    kinds: Any = None,
    sizes: Any = None,
    threads: Any = None,
    icounts: Any = None,
    privileged: Any = None,
    progress: Optional[_Progress] = None,
) -> str:
    """Simulate in-memory columns (uint64 addresses; uint8 kinds, uint16 sizes, uint32 threads/icounts, uint8 privileged).

    The result JSON is ``simulate``'s; a nonzero ``privileged`` entry makes that record count on
    the ``privileged`` side of each level's split by mode.
    """

def simulate_system(text: str, format: str = "toml") -> str:
    """Run a whole system (machine, memory, policy, processes; ``[machine] preset`` resolved); the report as JSON.

    Its ``levels`` (summed over the chips' hierarchies) carry the ``user`` / ``privileged`` split
    as ``simulate``'s do; page-walk reads and the kernel's own copies are privileged records.
    """

def simulate_offload(text: str, format: str = "toml") -> str:
    """Run an OS off-load config (``[offload]`` + ``[workload]``, Nellans et al. section 4); the report as JSON."""

def oscache_model(
    machine_text: str,
    machine_format: str = "toml",
    workload_json: str | None = None,
    trace: _Path | None = None,
    trace_format: str = "native",
    progress: _Progress | None = None,
) -> str:
    """Run one split-L2 uniprocessor machine (Nellans et al. sections 3, 5) on a workload or a trace; the ModelReport as JSON."""

def bench_sweep(config: str, progress: _Progress | None = None) -> str:
    """Cachetest working-set sweep on this machine (``sweep::BenchConfig`` as JSON); the result as JSON."""

def bench_corun(config: str, progress: _Progress | None = None) -> str:
    """Cachetest synchronised co-run over 1..N cores (``sweep::CorunConfig`` as JSON); the result as JSON."""

def bench_probe(config: str) -> str:
    """The page-color probe (``probe::ProbeConfig`` as JSON); the verdict and levels as JSON."""

def bench_environment() -> str:
    """Each PMU event probed on its own, and the machine facts, as JSON."""

def machine_names() -> list[str]:
    """Every name ``[machine] preset`` accepts: the presets, then "detect"."""

def machine_toml(name: str, cpu_dir: Optional[_Path] = None) -> str:
    """A preset's ``[machine]`` TOML (comments included), or the host's for "detect" (from ``cpu_dir``)."""

def machine_json(name: str, cpu_dir: Optional[_Path] = None) -> str:
    """A preset's (or the detected host's) ``[machine]`` table as JSON."""

def machine_summaries(name: Optional[str] = None, cpu_dir: Optional[_Path] = None) -> str:
    """JSON list of machine summaries (chips, cores, levels with colors, llc_colors): every preset, or ``name``."""

def read_trace(path: _Path, format: str = "native", limit: Optional[int] = None) -> dict[str, Any]:
    """Read up to ``limit`` records into ``bytes`` columns addr, thread, icount, size, kind, privileged, syscall (+ metadata, version, truncated)."""

def write_trace(
    path: _Path,
    addresses: Any,
    kinds: Any = None,
    sizes: Any = None,
    threads: Any = None,
    icounts: Any = None,
    privileged: Any = None,
    metadata: str = "",
    syscalls: Any = None,
) -> int:
    """Write columns as a native trace (atomically); returns the number of records."""

def convert_trace(
    src: _Path,
    format: str,
    out: _Path,
    metadata: Optional[str] = None,
    progress: Optional[_Progress] = None,
) -> int:
    """Convert a trace of ``format`` to a native trace at ``out``; returns the number of records."""

def trace_info(path: _Path, format: str = "native", progress: Optional[_Progress] = None) -> str:
    """Summarise a trace (records, kinds, threads, address range, metadata) as JSON."""

def capture(
    program: str,
    args: Sequence[str],
    out: _Path,
    backend: str = "auto",
    ifetch: bool = True,
    max_records: Optional[int] = None,
    progress: Optional[_Progress] = None,
    syscalls: bool = False,
) -> str:
    """Run ``program args`` under QEMU or Valgrind lackey and write its references to ``out``; returns the summary JSON."""

def capture_backends() -> list[str]:
    """The backend names ``capture`` accepts."""

def host_caches() -> list[tuple[int, str, int, int, int, int]]:
    """The host's caches as (level, type, size, ways, line_size, shared_by), from sysfs."""

def trace_formats() -> list[str]:
    """The trace format names the readers accept."""

def profile(
    mrc_options: Optional[str] = None,
    set_options: Optional[str] = None,
    rapid_options: Optional[str] = None,
    path: Optional[_Path] = None,
    format: str = "native",
    workload: Optional[str] = None,
    workload_format: str = "toml",
    addresses: Any = None,
    sizes: Any = None,
    icounts: Any = None,
    progress: Optional[_Progress] = None,
) -> dict[str, Any]:
    """A miss-rate curve, per-set stack distance profile and/or RapidMRC window of one source (a trace path, a
    workload as TOML/JSON text, or address columns); returns ``mrc`` / ``set_profile`` / ``rapid_mrc`` JSON and
    ``histogram`` / ``per_set`` / ``pooled`` little-endian u64 bytes."""

def zipf_scan_trace(refs: int, lines: int, alpha: float = 0.9, seed: int = 1, line_size: int = 64) -> bytes:
    """ANCHORS.md's MRC reference trace (half zipf, half cyclic scan) as little-endian u64 addresses."""

def placement_miss_probability(pages_per_bin: list[int], ways: int) -> list[float]:
    """Eq. 5.2's per-bin miss probability terms (thesis 5.2)."""

def uniform_hit_rates(xs: list[float], sizes: list[float]) -> list[list[float]]:
    """Section 2.3.2's per-level hit probabilities (and memory, last) per working-set size."""

def expected_conflicts(pages: int, bins: int, ways: int, frames_per_bin: Optional[int] = None) -> tuple[float, float, float]:
    """Eq. 3.2: (k_avg, k_min, k_sd) binomial, or (k_avg, k_min, nan) hypergeometric."""

def page_profile(
    config_json: str,
    options_json: str,
    trace: Optional[_Path] = None,
    trace_format: str = "native",
    progress: Optional[Callable[..., Any]] = None,
) -> str:
    """A page-level profile (ROCS 3) as JSON."""
def check_system_config(text: str, format: str = "toml") -> str:
    """Check a system config without running it; the effective config as JSON (``report`` checks every config first)."""
    ...
