"""Typed stub of the compiled module ``cachecolor._core`` (crates/py).

The extension is thin glue: configs and results cross as JSON text, record columns as buffers
(NumPy arrays) in and little-endian ``bytes`` out. Use the public API in ``cachecolor`` instead
of calling these directly. ``tests/test_api.py`` checks that this stub and the compiled module
name the same functions and exceptions.

The TypedDicts at the end (``RocsReport``, ``ColorisReport``, ...) are each OS policy's own
report (``policy_report`` in ``simulate_system``'s JSON), generated from the Rust structs of
``crates/sim/src/policy/NAME/report.rs`` (``make docs-tables``); they exist for type checkers only (import them under
``typing.TYPE_CHECKING``). ``tests/test_policy_reports.py`` runs every policy and checks that
its report has exactly these keys, recursively.
"""

from os import PathLike
from typing import Any, Callable, Literal, Optional, Sequence, TypedDict, Union

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

def simulate_system(text: str, format: str = "toml", progress: Optional[Callable[..., None]] = None) -> str:
    """Run a whole system (machine, memory, policy, processes; ``[machine] preset`` resolved); the report as JSON.

    Its ``levels`` (summed over the chips' hierarchies) carry the ``user`` / ``privileged`` split
    as ``simulate``'s do; page-walk reads and the kernel's own copies are privileged records.
    """

def simulate_system_page_llc(text: str, format: str = "toml", progress: Optional[Callable[..., None]] = None) -> tuple[str, bytes]:
    """``simulate_system`` keeping the exact per-page LLC profile: every data reference reaching the LLC counted by process and page, at no simulated cost.

    Returns the report (JSON) and the profile as little-endian uint64 rows ``[pid, vpn, LLC
    accesses, LLC misses]`` sorted by pid then page (``numpy.frombuffer(b, "<u8").reshape(-1, 4)``);
    a miss is a reference memory or another chip's cache served.
    """

# Policies written in Python (crates/py/src/policy.rs; the API is cachecolor.Policy).

class KernelError(CachecolorError):
    """A kernel action a policy asked for was refused (no such process, page, thread or core; no free frame)."""

class Machine:
    """The machine a policy runs on, given to ``Policy.setup``."""

    cores: int
    chips: int
    colors: int
    llc_size: int
    llc_ways: int
    line_size: int
    page_size: int

class ProcessInfo:
    """A new process: ``colors`` and ``pinned`` as its config gives them (None if not), and
    its number of ``threads``."""

    pid: int
    name: str
    colors: Optional[list[int]]
    pinned: Optional[list[int]]
    threads: int

class Thread:
    tid: int
    pid: int
    core: int
    """The core whose run queue holds it."""
    done: bool

class Page:
    """One mapped page of a process (``marked``: awaiting a lazy recolor)."""

    vpn: int
    pfn: int
    color: int
    accessed: bool
    dirty: bool
    marked: bool
    huge: bool

class Sample:
    """A PMU sample: ``source`` is "cache" (``level`` the index of the level), "remote" or "memory"."""

    core: int
    thread: int
    pid: int
    write: bool
    vaddr: int
    paddr: int
    source: str
    level: Optional[int]
    cycle: int

class SchedEvent:
    """``kind`` "switch" (``tid`` starts on ``core`` after thread ``previous``), "migrated"
    (``tid`` moved to ``core`` from core ``previous``) or "exited" (``core`` None)."""

    kind: str
    core: Optional[int]
    tid: int
    previous: Optional[int]

class Reading:
    """A programmable counter as software reads it (``scaled`` = raw * enabled / running)."""

    event: str
    raw: int
    time_enabled: int
    time_running: int
    scaled: float

class ProcessCounts:
    """A process's event counts (event name -> count), in total and since the last tick: exact
    under the ideal PMU, scaled estimates under the realistic one (``readings`` then holds the
    raw counts with their time enabled and running, summed over the process's threads)."""

    pid: int
    alive: bool
    total: dict[str, int]
    interval: dict[str, int]
    readings: list[Reading]

class Tick:
    now: int
    interval: int
    cores: list[list[Reading]]
    processes: list[ProcessCounts]

class Kernel:
    """The kernel actions of the Rust ``Kernel`` trait, valid only during the hook it was passed
    to (``RuntimeError`` after). Each action is charged to the core running the hook."""

    @property
    def valid(self) -> bool:
        """Whether the hook this kernel was passed to is still running."""
    def now(self) -> int:
        """Simulated time (cycles) on the core running the hook."""
    def core(self) -> int:
        """The core running the hook."""
    def cores(self) -> int:
        """The number of cores of the machine."""
    def colors(self) -> int:
        """The colors of the LLC."""
    def threads(self) -> list[Thread]:
        """Every thread."""
    def pages(self, pid: int) -> list[Page]:
        """The mapped pages of ``pid`` in vpn order (empty if it has exited)."""
    def recolor(self, pid: int, vpn: int, colors: Any) -> Optional[int]:
        """Eager move of a page to a frame of one of ``colors``; the new frame, or None if its color is already one of them."""
    def mark_for_recolor(self, pid: int, vpn: int) -> None:
        """Lazy move: the page's next fault asks ``allowed_colors`` again."""
    def scan_accessed(self, pid: int) -> list[int]:
        """Clear every accessed bit of ``pid``; the vpns that had it set."""
    def policy_cycles(self, pid: int) -> int:
        """Cycles the kernel has spent on ``pid`` for policies so far (moves, shootdowns, sample interrupts, scans, migrations; not faults)."""
    def migrate(self, tid: int, core: int) -> None:
        """Move thread ``tid`` to ``core``'s run queue and pin it there."""
    def set_sampling(self, core: Optional[int] = None, sampling: Optional[dict[str, Any]] = None) -> None:
        """Program (a dict of ``[pmu.sampling]``'s keys) or switch off (None) the sampler of ``core`` (all if None)."""
    def set_prefetch(self, on: bool) -> None:
        """Hardware prefetchers on or off."""

def simulate_system_policy(text: str, policy: Any, format: str = "toml", progress: Optional[Callable[..., None]] = None) -> str:
    """``simulate_system`` under a ``cachecolor.Policy`` instance (its hooks called with the GIL,
    the rest of the run without); an exception raised by a hook is raised from here."""
def effective_system_config(text: str, format: str = "toml", check: bool = True) -> str:
    """Check a system config (with ``check``, by building the system, not running it); return it effective (preset expanded, defaults filled) as JSON."""


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

def native_header(path: _Path) -> dict[str, Any]:
    """A native trace's file header, no record read: metadata, version, pcs, header_bytes (where the records start), records (the end marker's count or None)."""

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

def filter_trace(
    src: _Path,
    format: str,
    out: _Path,
    kinds: Optional[list[int]] = None,
    threads: Optional[list[int]] = None,
    ranges: Optional[list[tuple[int, int]]] = None,
    privileged: Optional[bool] = None,
    metadata: Optional[str] = None,
    progress: Optional[_Progress] = None,
) -> tuple[int, int]:
    """Copy the records passing every given criterion to a native trace; returns (read, kept)."""

def window_trace(
    src: _Path,
    format: str,
    out: _Path,
    skip: int,
    records: int,
    metadata: str = "",
    progress: Optional[_Progress] = None,
    instructions: Optional[int] = None,
) -> tuple[int, int, int, int, dict[int, int]]:
    """Copy records ``skip .. skip + records`` (ending early at ``instructions``) to a native
    trace, streaming; returns (read,
    written, instructions, privileged instructions of the written records, records per thread)."""

class TraceChunks:
    """A trace read ``chunk`` records at a time: iterating yields ``read_trace``'s dicts."""
    def __init__(self, path: _Path, format: str = "native", chunk: int = 1 << 20) -> None: ...
    def __iter__(self) -> "TraceChunks": ...
    def __next__(self) -> dict[str, Any]: ...

def trace_info(path: _Path, format: str = "native", progress: Optional[_Progress] = None) -> str:
    """Summarise a trace (records, kinds, threads, address range, metadata) as JSON."""

def capture_system(
    program: str,
    args: Sequence[str],
    out: _Path,
    kernel: Optional[_Path] = None,
    guest_files: Sequence[_Path] = (),
    memory_mib: int = 512,
    boot_timeout: float = 600.0,
    max_records: Optional[int] = None,
    progress: Optional[_Progress] = None,
    record: Optional[_Path] = None,
    replay: Optional[_Path] = None,
) -> str:
    """Full-system capture (``cachecolor.fullsys.capture_system``): boot the packaged kernel under
    qemu-system-x86_64 with ``program`` in a generated initramfs and trace kernel and user
    references from the program's start to its exit into ``out``; the summary as JSON."""
    ...

def locate_kernel(kernel: Optional[_Path] = None) -> str:
    """The kernel image full-system capture boots (``kernel``, else ``$CACHECOLOR_KERNEL``, else
    the newest ``/boot/vmlinuz-*``); raises ``CaptureError`` when there is none."""

def check_system(kernel: Optional[_Path] = None) -> None:
    """Raise ``CaptureError`` naming what full-system capture lacks here (qemu-system, BusyBox, a
    kernel image, the compiled plugin or guest launcher); return None when it can run."""

def capture(
    program: str,
    args: Sequence[str],
    out: _Path,
    backend: str = "auto",
    ifetch: bool = True,
    max_records: Optional[int] = None,
    progress: Optional[_Progress] = None,
    syscalls: bool = False,
    skip_instructions: int = 0,
    pcs: bool = True,
    bbv_interval: int = 0,
    bbv_out: Optional[_Path] = None,
    max_instructions: Optional[int] = None,
) -> str:
    """Run ``program args`` under QEMU or Valgrind lackey and write its references to ``out``; returns the summary JSON."""

def capture_backends() -> list[str]:
    """The backend names ``capture`` accepts."""

def host_caches() -> list[tuple[int, str, int, int, int, int]]:
    """The host's caches as (level, type, size, ways, line_size, shared_by), from sysfs."""

POLICIES: list[str]
"""The OS policies a system config's ``[policy] name`` may give, in registry order."""
POLICY_REPORTS: dict[str, Optional[str]]
"""Each policy's report TypedDict below (None: it reports null), from its registry line."""

def policy_report_schemas() -> str:
    """Every policy's report schema as JSON, ``{policy: schema or null}`` in registry order (JSON
    Schema 2020-12 of its report struct, as serialized); ``tools/report_stubs.py`` writes the
    report TypedDicts below from it."""
ALLOCATORS: list[str]
"""The page allocators ``[memory] allocator`` may give."""
REPLACEMENT_POLICIES: list[str]
"""The replacement policies a cache level's ``policy`` may give (aliases not listed)."""
TRACE_FORMATS: list[str]
"""The trace formats (``--format``, a thread's ``format``)."""
PREFETCHERS: list[str]
"""The prefetchers a cache level's ``prefetcher`` may give."""
EVENTS: list[str]
"""Every PMU event (``Tick`` counts, ``[pmu] events``, a policy's ``counter_events``)."""

def parse_size(text: str) -> int:
    """A byte size as configs write it (``48KiB``, ``1 MiB``, ``32M``, ``4096``, ``0x1000``; K, M,
    G, T binary); ValueError naming the text and the allowed units."""

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

def lookahead_allocation(misses: list[list[float]], total: int, min: int) -> list[int]:
    """Azimi et al. 3.2's lookahead allocation (``MrcPartition::lookahead``): colors per process."""

def page_profile(
    config_json: str,
    options_json: str,
    trace: Optional[_Path] = None,
    trace_format: str = "native",
    progress: Optional[Callable[..., Any]] = None,
) -> str:
    """A page-level profile (ROCS 3) as JSON."""

def attribute_trace(
    config_json: str,
    trace: _Path,
    progress: Optional[Callable[..., Any]] = None,
) -> dict[str, Any]:
    """Where each reference of a trace with PCs was served, tallied per (PC, class) and
    per (4 KiB data page, class): ``pc``, ``pc_class``, ``pc_counts``, ``page``, ``page_class``,
    ``page_counts`` (little-endian bytes; counts are rows of ``levels + 1``), ``levels``,
    ``records``, ``unknown_pc``."""

def symbolize(
    path: _Path,
    addresses: Sequence[int],
) -> list[tuple[Optional[str], Optional[str], int, Optional[str]]]:
    """For each link-time address of the ELF file ``path``: ``(function, file, line, nearest)``
    (function and source line from the debug information, found apart by build ID or debug
    link too, else the symbol containing the address; line 0 where unknown; ``nearest``, only
    where the function is unknown, the nearest text symbol at or below)."""

def object_reuse(
    config_json: str,
    trace: _Path,
    owner_vpns: bytes,
    owner_ids: bytes,
    span_first: bytes,
    span_last: bytes,
    span_ids: bytes,
    objects: int,
    interval_records: int,
    reuse_level: int,
    progress: Optional[Callable[..., Any]] = None,
) -> dict[str, Any]:
    """For ``cachecolor.objects``: per object (pages ``owner_vpns`` -> ``owner_ids``, then
    the disjoint sorted spans ``span_first..=span_last`` -> ``span_ids``, the rest object
    ``objects``), exact LRU stack distances of its data references reaching level
    ``reuse_level`` (``dist_object``, ``dist_value`` with 0 for a first reference,
    ``dist_count``) and where its data references were served per ``interval_records`` records
    (``series_object``, ``series_interval``, ``series_counts`` rows of ``levels + 1``);
    ``levels``, ``level_lines``, ``records``, ``intervals``."""

def placed_page_tallies(
    config_json: str,
    trace: _Path,
    pollute_vpns: bytes,
    buffer_colors: int,
    mode: str,
    ram: int = ...,
    progress: Optional[Callable[..., Any]] = None,
    owner_vpns: bytes = b"",
    owner_ids: bytes = b"",
    span_first: bytes = b"",
    span_last: bytes = b"",
    span_ids: bytes = b"",
    objects: int = 0,
    interval_records: int = 0,
) -> dict[str, Any]:
    """For ``cachecolor.objects``: the trace with its 4 KiB pages placed by the color-pool
    allocator under a pollute buffer of the last level's last ``buffer_colors`` colors (``mode``
    ``"shared"``, ``"reserved"`` or ``"confined"`` for ``pollute_vpns``); per data page where it
    was served: ``page``, ``page_counts`` (rows of ``levels + 1``), ``levels``, ``records``,
    ``colors``, ``pages_per_color``; with ``interval_records`` > 0 also the series per object
    (the owners as ``object_reuse`` takes them): ``series_object``, ``series_interval``,
    ``series_counts``."""


# Each OS policy's report (`Policy::report`, `policy_report` in the system report): one
# TypedDict per struct its registry line names, written from the structs' JSON schemas by
# tools/report_stubs.py. A policy whose line names none reports null (`linux`, `static`).
# Numbers are `int` where Rust has an integer, `float` where it has an f64 (serde writes `0.0`,
# never `0`, for an f64); a Rust tuple is a JSON array: a `tuple[...]` here, a list at run time.

# <generated: policy reports (tools/report_stubs.py)>
# Generated from each policy's report struct (its registry line in crates/sim/src/policy/mod.rs,
# `report: Struct`): do not edit here; `make docs-tables` rewrites it and
# tests/test_policy_reports.py fails while it differs.

# --- rocs, global-pollute: RocsReport ---

class RocsConfig(TypedDict):
    """`[policy.rocs]` and `[policy.global-pollute]`: defaults are the papers' values, scaled (1 M
    simulated cycles stand for the paper's billion).
    """

    # Cycles the baseline (nothing mapped) is measured over, and at least 3 ticks: their
    # tick-to-tick spread of IPC is the search's noise (one tick's IPC swings +-50% on a phased
    # program), and three is the fewest ticks whose spread has more than one degree of freedom.
    # Default three ticks of 2 M.
    baseline_cycles: int
    # Size of the pollute buffer, a whole number of LLC colors below the LLC's size (default: 1/16
    # of the LLC, ROCS section 6; Azimi 4.2.2).
    buffer_size: Optional[int]
    # Measure the walk's kept pages again around a fresh baseline before keeping them (kept, nothing
    # mapped, kept; each over `baseline_cycles`), and keep them only when the mean of the two kept
    # measurements beats the baseline between them by `significance` standard errors. Algorithm 1
    # judges every step against one baseline measured before the walk (ROCS 5.2), which holds on
    # programs whose IPC is "stable after initialization" (ROCS 6.1); a phase or a co-runner that
    # moves during the walk makes a step beat it for no cause of the buffer's. Off by default:
    # Algorithm 1's best step is kept as measured. On the fresh configs, whose runs are 0.1-0.5
    # billion cycles, the confirmation's moves (the kept set out and back in) cost more than the
    # drift-made buffers it drops (docs/rocs.md, "Confirming the kept pages").
    confirm: bool
    # L1 lines the sample handler touches (ROCS 3.1's handler pollution).
    handler_lines: int
    # Most the search's page moves (into the buffer and, reserved in advance, back out) may cost, as
    # a fraction of the unit's cycles so far, while no step has shown a significant gain. The search
    # buys its next pages the way ski rental is played: only once the unit has run long enough that
    # they cost at most this share (the moves' cost is the kernel's own accounting,
    # `Kernel::policy_cycles`). Default 0.01, the do-no-harm bar (1%), the same as `mrc-partition`'s
    # window budget; fitted to no config. Once a step gains significantly the gain pays for the rest
    # of the walk and the moves' budget no longer binds. The same share bounds what the steps lose
    # net against the baseline: past it, a step significantly below the baseline ends the walk (the
    # best step kept).
    max_search_overhead: float
    # Cycles each step's IPC is measured over (one tick of 2 M); also the window of the targeting
    # test.
    measure_cycles: int
    # ... and its LLC misses per kilo-instruction over the same window reach this: what can pay for
    # sampling. ROCS Table 2's targeted programs have an L2 MPKI of 3.0 (mgrid) to 69; "all other
    # benchmarks ... displayed far lower" MPKI (section 6). A program that fits the LLC can still
    # show a high miss rate on few accesses; COLORIS's Cache Utilization Monitor reads such a miss
    # rate as zero for the same reason (section 3.3, its minimum references). 0 targets on the miss
    # rate alone.
    min_llc_mpki: float
    # Pages at the bottom of the stack the search never maps (Algorithm 1's `minPages`).
    min_pages: int
    # Best-offline runs: map exactly the top N pages of the stack, no search.
    offline_pages: Optional[int]
    # Phase-detection window in cycles (ROCS 5.1 computes the IPC every 1 billion cycles; the
    # examples' window was 10 ticks of 2 M).
    phase_cycles: int
    phase_metric: Literal["ipc", "llc-mpki"]
    # Relative change of the metric that counts as a new phase.
    phase_threshold: float
    # Cycles a profile lasts (the examples' 4 ticks of 2 M cycles). Like every duration below it is
    # counted in simulated cycles, as the paper counts (ROCS 5.1, 6.2), never in policy ticks: a
    # stage ends at the first tick at which it has run this long, so its length does not move with
    # `[scheduler] tick`.
    profile_cycles: int
    # Profile with the prefetcher on (ROCS Figure 8's third bar).
    profile_prefetch: bool
    # Cycles one sample interrupt costs (ROCS Figure 6's overheads of 15-65% at one per 5-10 K
    # cycles put it at about 1-3 K).
    sample_cost_cycles: int
    # Cycles left out after each step before measuring (the examples' one tick of 2 M).
    settle_cycles: int
    # A step counts as a gain only when its IPC exceeds the baseline's by this many standard errors
    # of the difference (`noise x sqrt(1/step ticks + 1/baseline ticks)`); the best of those is
    # kept. Default 2, the usual ~95% bar; with no step above it Algorithm 1 keeps no page (its
    # minimal set).
    significance: float
    # Pages mapped per search step (0: a sixteenth of the stack, at least 1).
    step_pages: int
    # A unit is profiled once its LLC miss rate over a `measure_cycles` window exceeds this (ROCS
    # Table 2: 25%) ...
    target_miss_rate: float
    # At most one sample interrupt per this many cycles (ROCS 3.1, 5.1: 5 K).
    throttle_cycles: int
    # Cycles of a second profile after the search, with the buffer in place (0: none).
    verify_cycles: int
    # Cycles before the first profile (ROCS 6.2: "after the first 4 billion cycles", at the configs'
    # scale of 1 M simulated cycles per billion).
    warmup_cycles: int

class RocsConfirmation(TypedDict):
    """The confirmation of a search's kept pages (`confirm`): kept, nothing mapped, kept again, each
    over `baseline_cycles`.
    """

    # The unit's IPC with nothing mapped, between them.
    baseline_ipc: float
    # The mean kept IPC beat the baseline by `significance` standard errors: the pages stay; else
    # they all leave the buffer.
    confirmed: bool
    # The unit's IPC with the kept pages in the buffer, before and after the baseline.
    kept_ipc: list[float]
    # Standard error of `mean(kept_ipc) - baseline_ipc` from the search's pooled noise.
    standard_error: float

class RocsStep(TypedDict):
    """One step of a search (Algorithm 1, ROCS 5.2): pages mapped and the IPC measured."""

    # Data references (L1D accesses) per kilo-instruction over the measurement: the program's phase,
    # which no placement moves (set against the baseline's `baseline_data_apki`); `None` (null) when
    # the multiplexed event was never on a counter during it.
    data_apki: Optional[float]
    ipc: float
    # Stack pages in the buffer during the measurement.
    pages: int
    # Whether it beat the baseline by `significance` standard errors (a gain, not noise).
    significant: bool
    # Ticks the IPC was measured over.
    ticks: int
    # Ticks it waited for the budget to buy its pages.
    waited_ticks: int

class RocsSearch(TypedDict):
    """One search (ROCS 5.2, Algorithm 1 FindPollutePages), kept as it runs."""

    # Data references per kilo-instruction with nothing mapped (the baseline's phase); `None` (null)
    # until measured, or when the multiplexed event was never on a counter during it.
    baseline_data_apki: Optional[float]
    # IPC with nothing mapped.
    baseline_ipc: float
    # Pages left in the buffer (Algorithm 1's return value); `None` (null) until it returns (a
    # search the run ended in the middle of chose nothing).
    chosen: Optional[int]
    # The kept pages measured again around a fresh baseline (`confirm`); `None` (null) when the walk
    # kept nothing, `confirm` is off, or the run ended first.
    confirmation: Optional[RocsConfirmation]
    # Cycles the search's steps lost against the baseline (each step's settling and measuring cycles
    # times `1 - IPC / baseline IPC`; a step above the baseline gives back), floored at 0: the
    # search's cost beside its page moves.
    loss_cycles: float
    # Cycles the unit's page moves had cost when the search ended (all searches so far), and the
    # unit's cycles by then: the budget's two sides.
    move_cycles: int
    # IPC standard deviation of a window of `measure_cycles` over the baseline's windows (pooled
    # with every step's own when a step spans more than one), relative to the baseline IPC.
    noise: float
    # `(pid, vpn)` of the chosen pages, top of the stack first; `None` as `chosen`.
    pages: Optional[list[tuple[int, int]]]
    # The per-page profile the stack came from: `(pid, vpn, samples, misses)`.
    profile: list[tuple[int, int, int, int]]
    # Why the stack was not walked: no sampled reference hit (no baseline taken), or the baseline's
    # noise hides any gain the buffer could give (`null`: it was walked).
    skipped: Optional[str]
    # Pages in the miss-rate stack, and pages mapped per step.
    stack_pages: int
    step_pages: int
    steps: list[RocsStep]
    # Why the walk stopped before the end of the stack (`null`: it walked it all, or the run ended
    # first).
    stopped: Optional[str]
    # Tick time the profile ended.
    time: int
    unit_cycles: int
    # The after-search profile (`verify_cycles`), same shape.
    verify_profile: list[tuple[int, int, int, int]]

class RocsUnit(TypedDict):
    """One unit: a set of address spaces profiled and searched together (`rocs`: a process;
    `global-pollute`: all of them).
    """

    # The run ended with a step waiting for the budget to buy its pages.
    budget_bound: bool
    # Its pages in the buffer at the end.
    in_buffer: int
    # Cycles the kernel spent moving its pages into and out of the buffer, and the cycles its
    # processes ran: the search budget's two sides (`max_search_overhead`).
    move_cycles: int
    phase_changes: int
    # Every process the unit ever had.
    pids: list[int]
    # Profiles taken (the after-search `verify_cycles` profiles included) and phase changes detected
    # (ROCS 5.1).
    profiles: int
    # The run ended, or its processes exited, mid-search: its last search has `chosen` and `pages`
    # null.
    search_unfinished: bool
    searches: list[RocsSearch]
    unit_cycles: int

class RocsReport(TypedDict):
    """The report of the pollute engine, under `rocs` (ROCS, papers/000, sections 3-5) or
    `global-pollute` (Azimi et al. case study 2, section 4.2).
    """

    # The `[policy.rocs]` / `[policy.global-pollute]` settings the run used.
    config: RocsConfig
    # Pages moved off the buffer's colors when they were taken out of normal use.
    pages_moved_off_pollute_color: int
    pages_restored: int
    # Pages moved into the buffer, and back out of it, over every search.
    pages_to_buffer: int
    # `rocs` or `global-pollute`.
    policy: str
    # `[time, in normal use, chips reserved]` at each change: the colors start in normal use and are
    # taken out when a unit is first targeted (ROCS 5.1).
    pollute_color_in_use: list[tuple[int, bool, list[int]]]
    # The buffer's colors are out of normal use on some chip at the end.
    pollute_color_reserved: bool
    # The pollute buffer's LLC colors (ROCS section 4; `PolluteEngine::buffer_colors`).
    pollute_colors: list[int]
    # The sampled event (`rocs`: L1D misses, ROCS 3.1; `global-pollute`: LLC accesses, Azimi 4.2.1).
    sampled_event: str
    # Samples delivered, and those taken while their unit profiled.
    samples: int
    samples_used: int
    units: list[RocsUnit]
    # What `cachecolor simulate` prints on stderr: runs or units that ended mid-search.
    warnings: list[str]

# --- mrc-partition: MrcPartitionReport ---

class _MrcPartitionAllocation(TypedDict):
    # Process -> its units `[start, end)`.
    colors: dict[str, tuple[int, int]]
    # Cycles.
    time: int

class MrcPartitionAllocation(_MrcPartitionAllocation, total=False):
    """The colors per process from a time on (step 4)."""

    # Present (true) when the decision kept the cache shared (every process every unit).
    shared: bool

class MrcPartitionPrediction(TypedDict):
    """One process's prediction behind a `Decision`."""

    horizon_cycles: float
    # Whether `shared_miss_rate` was measured (else predicted from the curves).
    measured: bool
    partitioned_miss_rate: float
    shared_miss_rate: float
    shared_occupancy_units: float

class MrcPartitionDecision(TypedDict):
    """One allocation's decision with what it was made from."""

    # `partition` or `shared` (`always_partition` partitions whatever `partition` says).
    applied: Literal["partition", "shared"]
    # Page moves plus the windows' interrupts.
    cost_cycles: float
    # Predicted cycles saved over the horizon (each process's cycles run so far).
    cycles_saved: float
    # Cycles an LLC miss avoided saves (`MachineInfo::llc_miss_penalty`).
    miss_penalty_cycles: int
    move_cost_cycles: int
    # Two standard errors of `cycles_saved` from the windows' sampling.
    noise_cycles: float
    # Pages outside their process's new colors (lazily: those in use) and what moving them costs
    # (`pages_to_move x MachineInfo::page_move_cycles`).
    pages_to_move: int
    partition: bool
    partitioned_misses_per_kcycle: float
    # Process -> its prediction.
    processes: dict[str, MrcPartitionPrediction]
    reason: str
    # Times the decision was retaken and kept the cache shared since the last one recorded.
    reconsidered_before: int
    # LLC misses per kilo-cycle, summed over the processes: shared (measured where it was) and
    # predicted under the partition.
    shared_misses_per_kcycle: float
    # Cycles.
    time: int
    # The windows' interrupts not yet paid for by a partition.
    window_cost_cycles: int

class MrcPartitionOutOfMemory(TypedDict):
    """A process whose partition had no free frame left (`Policy::out_of_colors`)."""

    process: str
    # Times it happened.
    times: int

class MrcPartitionPhaseChange(TypedDict):
    """A phase change (step 5): a process's L1D MPKI moved beyond `phase_threshold`."""

    # L1D misses per kilo-instruction when its curve was taken, and now.
    l1_mpki_before: float
    l1_mpki_now: float
    process: str
    # Cycles.
    time: int

class MrcPartitionWindow(TypedDict):
    """One complete window: a miss-rate curve (steps 1 and 2)."""

    # `exact_check`: the exact miss rate of the window's own counted lines at `0..=units` units,
    # their distances in a stack warm since the process started (what the window's curve estimates);
    # `null` without the check.
    exact_window_miss_rate: Optional[list[float]]
    # `exact_check`: mean absolute error against the whole-run curve over `1..=units` units
    # (`analysis::rapidmrc`'s definition); `null` without the check.
    mae_vs_exact: Optional[float]
    # Miss rate of the shared cache at `0..=units` units.
    miss_rate: list[float]
    process: str
    # Why it was taken: `start` or `phase`.
    reason: Literal["start", "phase"]
    # Sampled misses it saw.
    samples: int
    # Cycles, when the window completed.
    time: int

class MrcPartitionWindowIncomplete(TypedDict):
    """A window begun and not complete at the end."""

    process: str
    # Samples it had of the `size` it was begun with (what the budget afforded then).
    samples: int
    size: int

class MrcPartitionWindowWanted(TypedDict):
    """A process that wants a window it has not begun."""

    accesses_run: int
    # Cycles it has run, its shared-cache accesses, and the interrupt cycles of its windows.
    cycles_run: int
    process: str
    # `start` or `phase`.
    reason: Literal["start", "phase"]
    # What it waits for: `co-runner` (it never shared the cache with another live process: nothing
    # to divide), `warm-up` (fewer shared-cache accesses than the LLC has lines), or `budget` (what
    # is left of `max_window_overhead` of its cycles affords fewer than `min_window` sampled
    # misses).
    waiting_for: Literal["co-runner", "warm-up", "budget"]
    window_paid_cycles: int

class MrcPartitionReport(TypedDict):
    """The `mrc-partition` report (Azimi et al. case study 1, section 3)."""

    # The colors per process at every change.
    allocations: list[MrcPartitionAllocation]
    # Colors of the LLC.
    colors: int
    # Partition or keep sharing, per allocation.
    decisions: list[MrcPartitionDecision]
    # `exact_check`: process -> its whole-run miss rate at `0..=units` units (`null` without the
    # check).
    exact_miss_rate: Optional[dict[str, list[float]]]
    # LLC lines per unit (the curve's x step).
    lines_per_unit: int
    llc_colors_per_unit: int
    # Processes whose partition ran out of frames and fell back to every color.
    out_of_memory: list[MrcPartitionOutOfMemory]
    pages_marked: int
    # Pages copied at once (eager moves and the spreading of pages in use) and pages marked for a
    # lazy move.
    pages_recolored: int
    # Phase changes that asked for a new window (step 5).
    phase_changes: list[MrcPartitionPhaseChange]
    # Allocations, curves and `min_colors` are in units of `llc_colors_per_unit` LLC colors (unit u:
    # every LLC color x with x mod units == u), the same share of every partitioned cache; units ==
    # colors on a machine with one colorable shared cache.
    units: int
    warmup: int
    # Sampled misses per window and its warm-up (`[policy.mrc-partition]`, RapidMRC 3.2.2).
    window: int
    # The longest window costs `window x sample_cost_cycles` (a shorter one what the budget
    # afforded: its samples x `sample_cost_cycles`).
    window_cost_cycles: int
    # Each complete window (a curve).
    windows: list[MrcPartitionWindow]
    # Windows begun but not complete when the run (or the process) ended: the run was shorter than
    # the window.
    windows_incomplete: list[MrcPartitionWindowIncomplete]
    # Processes still waiting for a window at the end, and for what (`WindowWanted`).
    windows_not_afforded: list[MrcPartitionWindowWanted]

# --- thread-cluster: ThreadClusterReport ---

# `ThreadClusterMigration` has a key that is a Python keyword: the functional form.
# One thread moved to another core (phase 4).
ThreadClusterMigration = TypedDict("ThreadClusterMigration", {"from": int, "thread": int, "to": int})

class ThreadClusterClustering(TypedDict):
    """Detection ended: clustering (5.2, phase 3) and placement (phase 4)."""

    # Thread ids per cluster (threads with an empty shMap are in none).
    clusters: list[list[int]]
    # Samples not counted because their entry monitors another region.
    collisions: int
    # Filter entries claimed by a region (spatial sampling, 5.2.1).
    filter_regions: int
    # The moves made to co-locate the clusters.
    migrations: list[ThreadClusterMigration]
    # Thread id (as text) -> shMap entries with a nonzero counter.
    shmap_entries_used: dict[str, int]
    # Tick time (cycles).
    time: int

class ThreadClusterDetection(TypedDict):
    """Detection started (5.2, phase 1 -> 2)."""

    # N: one in N remote accesses sampled (5.2.1), as first set.
    period: int
    # The process whose remote stalls crossed `stall_threshold` (`null`: unnamed).
    process: Optional[str]
    # Its remote-access stall cycles over all its stall cycles in the last interval.
    remote_stall_share: float
    # Tick time (cycles).
    time: int

class ThreadClusterReport(TypedDict):
    """The `thread-cluster` report (Azimi et al. case study 3, section 5.2)."""

    # Each end of detection: the clusters found and the migrations made (phases 3 and 4).
    clusterings: list[ThreadClusterClustering]
    # Each start of sharing detection (phase 1's remote-stall share above the threshold).
    detections: list[ThreadClusterDetection]
    # Threads migrated over the run.
    migrations: int
    # Bytes per monitored region (5.2.1: 128, the coherence unit).
    region_bytes: int
    # Counters per shMap (5.2.1: 256).
    shmap_entries: int

# --- coloris: ColorisReport ---

class ColorisColorsAt(TypedDict):
    """A process's colors at a time (`history`, `returned`, `released`)."""

    colors: list[int]
    process: str
    # Cycles.
    time: int

class ColorisMonitorCall(TypedDict):
    """One MONITOR(cmr) call (Algorithm 1)."""

    # LLC accesses over the PERIOD.
    accesses: int
    # LLC misses / LLC accesses over the PERIOD (0 below `min_references` accesses).
    cmr: float
    # Colors it has after the call.
    colors: int
    # `none`, `hot` (isHot set, waiting for a donor), `expand` or `shrink`.
    decision: Literal["none", "hot", "expand", "shrink"]
    process: str
    # Cycles.
    time: int

class ColorisOverlap(TypedDict):
    """Colors two processes on different cores of one LLC came to share (`overlaps`)."""

    colors: list[int]
    other: str
    # The process ALLOC_COLORS gave the colors to, and their other owner.
    process: str
    # Cycles.
    time: int

class ColorisProcess(TypedDict):
    """One process as the Page Color Manager knows it at the end (section 3.2)."""

    # Its assignment at the end.
    colors: list[int]
    # Its first local core, and all of them (one per thread).
    core: int
    cores: list[int]
    high: float
    # Its QoS thresholds (% of LLC miss rate).
    low: float
    name: str
    # ALLOC_COLORS runs because a fault found it out of memory in its colors.
    out_of_memory_allocs: int
    pid: int
    redistribution_marked: int
    selective_moved: int
    # Pages marked on shrink (lazy recoloring), moved at once by Selective Moving, marked by
    # Redistribution.
    shrink_marked: int

class ColorisRedistribution(TypedDict):
    """One closed Redistribution window (section 3.2, "Recoloring Engine")."""

    # Accessed pages marked for a lazy move.
    marked: int
    process: str
    # Cycles.
    time: int

class ColorisReport(TypedDict):
    """The `coloris` report (COLORIS sections 3.2-3.3, Algorithm 1)."""

    # Processes whose colors came from the config (`[[processes]] colors`).
    colors_from_config: list[str]
    # The Recoloring Engine's expansion (Selective Moving or Redistribution).
    expansion: Literal["selective-moving", "redistribution"]
    # The global HighThreshold and LowThreshold (% of LLC miss rate, Table 2).
    high_threshold: float
    # Each process's assignment at every change (the plot's data).
    history: list[ColorisColorsAt]
    # Colors lent beyond its section to a process created alone on its LLC (4.1's setup).
    lent: list[ColorisColorsAt]
    low_threshold: float
    # Each MONITOR(cmr) call (Algorithm 1).
    monitor: list[ColorisMonitorCall]
    # Colors ALLOC_COLORS gave a process that a process on another core of its LLC owns.
    overlaps: list[ColorisOverlap]
    # PERIOD, WIN and the warm-up, in cycles as resolved (`[policy.coloris]` or the defaults in
    # ticks).
    period: int
    # Every process, in pid order, at the end of the run.
    processes: list[ColorisProcess]
    # Lent colors taken back when another process was created on that LLC.
    reclaimed: list[ColorisColorsAt]
    # Each closed Redistribution window and the pages it marked (Table 4's pages per WIN).
    redistributions: list[ColorisRedistribution]
    # Colors a process left at its exit that no live process owns.
    released: list[ColorisColorsAt]
    # Colors freed while isCold that no requester took, given back to their donor.
    returned: list[ColorisColorsAt]
    # UNIT: colors added or taken at a time.
    unit: int
    # Invariant violations the policy found (a color of a process's pages outside its assignment
    # after a recoloring); empty when correct.
    violations: list[str]
    warmup: int
    # What `cachecolor simulate` prints on stderr: a monitor that never ran, a run in which no color
    # moved, config colors the monitor changed.
    warnings: list[str]
    win: int

# Policies sharing another's report struct.
GlobalPolluteReport = RocsReport

PolicyReport = Union[RocsReport, MrcPartitionReport, ThreadClusterReport, ColorisReport, None]
"""What a Rust OS policy reports (``SystemResult.policy_report``): one of the report TypedDicts
above, or None for a policy whose registry line names no report struct; a policy written in
Python reports whatever its ``report`` returns."""
# </generated: policy reports>
