"""Typed stub of the compiled module ``cachecolor._core`` (crates/py).

The extension is thin glue: configs and results cross as JSON text, record columns as buffers
(NumPy arrays) in and little-endian ``bytes`` out. Use the public API in ``cachecolor`` instead
of calling these directly. ``tests/test_api.py`` checks that this stub and the compiled module
name the same functions and exceptions.

The TypedDicts at the end (``RocsReport``, ``ColorisReport``, ...) are each OS policy's own
report (``policy_report`` in ``simulate_system``'s JSON), field for field the Rust structs of
``crates/sim/src/policy/NAME/report.rs``; they exist for type checkers only (import them under
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
# TypedDict per struct of crates/sim/src/policy/NAME/report.rs, named `<Policy>Report` after the
# policy's config name (`mrc-partition` -> `MrcPartitionReport`). A policy without one here
# reports null (`linux`, `static`). Keys are exactly the struct's serialized fields
# (tests/test_policy_reports.py); numbers are `int` where Rust has an integer, `float` where
# it has an f64 (serde writes `0.0`, never `0`, for an f64). A Rust tuple is a JSON array: a
# `tuple[...]` here (its length and each position checked), a list at run time.

# --- rocs and global-pollute (crates/sim/src/policy/rocs/report.rs) ---

class RocsConfig(TypedDict):
    """``[policy.rocs]`` / ``[policy.global-pollute]`` as the run used them (``PolluteConfig``)."""

    buffer_size: Optional[int]
    throttle_cycles: int
    sample_cost_cycles: int
    handler_lines: int
    profile_cycles: int
    warmup_cycles: int
    target_miss_rate: float
    min_llc_mpki: float
    step_pages: int
    min_pages: int
    settle_cycles: int
    measure_cycles: int
    baseline_cycles: int
    significance: float
    max_search_overhead: float
    phase_cycles: int
    phase_metric: Literal["ipc", "llc-mpki"]
    phase_threshold: float
    profile_prefetch: bool
    offline_pages: Optional[int]
    verify_cycles: int

class RocsStep(TypedDict):
    """One step of a search (Algorithm 1, ROCS 5.2): stack pages in the buffer and the IPC measured."""

    pages: int
    ipc: float
    ticks: int
    significant: bool
    waited_ticks: int

class RocsSearch(TypedDict):
    """One search (``SearchLog``). ``chosen`` (Algorithm 1's return value) and ``pages`` are
    None while it has not returned (the run or the unit's processes ended mid-search);
    ``skipped`` says why no search ran on the profile; ``loss_cycles`` is what its steps lost
    net against the baseline, ``stopped`` why the walk ended before the stack did. ``profile`` rows are (pid, vpn, samples,
    misses)."""

    time: int
    stack_pages: int
    step_pages: int
    baseline_ipc: float
    noise: float
    steps: list[RocsStep]
    move_cycles: int
    unit_cycles: int
    chosen: Optional[int]
    skipped: Optional[str]
    loss_cycles: float
    stopped: Optional[str]
    pages: Optional[list[tuple[int, int]]]
    profile: list[tuple[int, int, int, int]]
    verify_profile: list[tuple[int, int, int, int]]

class RocsUnit(TypedDict):
    """A unit profiled and searched together (``rocs``: a process; ``global-pollute``: all)."""

    pids: list[int]
    profiles: int
    phase_changes: int
    in_buffer: int
    move_cycles: int
    unit_cycles: int
    budget_bound: bool
    search_unfinished: bool
    searches: list[RocsSearch]

class RocsReport(TypedDict):
    """The pollute engine's report (ROCS sections 3-5; Azimi et al. 4.2). ``pollute_color_in_use``
    rows are (time, in normal use, chips reserved)."""

    warnings: list[str]
    policy: Literal["rocs", "global-pollute"]
    pollute_colors: list[int]
    pollute_color_in_use: list[tuple[int, bool, list[int]]]
    pollute_color_reserved: bool
    pages_moved_off_pollute_color: int
    sampled_event: str
    samples: int
    samples_used: int
    pages_to_buffer: int
    pages_restored: int
    config: RocsConfig
    units: list[RocsUnit]

GlobalPolluteReport = RocsReport

# --- mrc-partition (crates/sim/src/policy/mrc-partition/report.rs) ---

class MrcPartitionWindow(TypedDict):
    """One complete window: a miss-rate curve at 0..=units units (``mae_vs_exact``: with ``exact_check``)."""

    process: str
    time: int
    reason: Literal["start", "phase"]
    samples: int
    miss_rate: list[float]
    mae_vs_exact: Optional[float]

class _MrcPartitionAllocation(TypedDict):
    time: int
    colors: dict[str, tuple[int, int]]

class MrcPartitionAllocation(_MrcPartitionAllocation, total=False):
    """The units ``[start, end)`` per process from ``time`` on; ``shared`` (true) only when the
    decision kept the cache shared."""

    shared: bool

class MrcPartitionPrediction(TypedDict):
    """One process's prediction behind a decision (``ProcessPrediction``)."""

    shared_occupancy_units: float
    measured: bool
    shared_miss_rate: float
    partitioned_miss_rate: float
    horizon_cycles: float

class MrcPartitionDecision(TypedDict):
    """Partition or keep sharing: ``Decision``'s fields (partition ...
    reason) and what it was made from (``DecisionRecord``)."""

    partition: bool
    shared_misses_per_kcycle: float
    partitioned_misses_per_kcycle: float
    cycles_saved: float
    noise_cycles: float
    cost_cycles: float
    reason: str
    time: int
    processes: dict[str, MrcPartitionPrediction]
    pages_to_move: int
    move_cost_cycles: int
    window_cost_cycles: int
    miss_penalty_cycles: int
    applied: Literal["partition", "shared"]
    reconsidered_before: int

class MrcPartitionPhaseChange(TypedDict):
    time: int
    process: str
    l1_mpki_before: float
    l1_mpki_now: float

class MrcPartitionWindowWanted(TypedDict):
    """A process waiting for a window it cannot afford yet (``max_window_overhead``)."""

    process: str
    reason: Literal["start", "phase"]
    cycles_run: int

class MrcPartitionOutOfMemory(TypedDict):
    process: str
    times: int

class MrcPartitionReport(TypedDict):
    """``mrc-partition``'s report (Azimi et al. case study 1). Allocations, curves and
    ``min_colors`` are in units of ``llc_colors_per_unit`` LLC colors."""

    colors: int
    units: int
    llc_colors_per_unit: int
    lines_per_unit: int
    window: int
    warmup: int
    windows: list[MrcPartitionWindow]
    exact_miss_rate: Optional[dict[str, list[float]]]
    allocations: list[MrcPartitionAllocation]
    decisions: list[MrcPartitionDecision]
    phase_changes: list[MrcPartitionPhaseChange]
    pages_recolored: int
    pages_marked: int
    window_cost_cycles: int
    windows_not_afforded: list[MrcPartitionWindowWanted]
    out_of_memory: list[MrcPartitionOutOfMemory]

# --- thread-cluster (crates/sim/src/policy/thread-cluster/report.rs) ---

class ThreadClusterDetection(TypedDict):
    """Sharing detection started (5.2 phase 1): ``period`` is N, one in N remote accesses sampled."""

    time: int
    process: Optional[str]
    remote_stall_share: float
    period: int

# `from` is a keyword: the functional form.
ThreadClusterMigration = TypedDict("ThreadClusterMigration", {"thread": int, "from": int, "to": int})

class ThreadClusterClustering(TypedDict):
    """Detection ended: the clusters (thread ids), shMap occupancy per thread id, the moves made."""

    time: int
    clusters: list[list[int]]
    shmap_entries_used: dict[str, int]
    filter_regions: int
    collisions: int
    migrations: list[ThreadClusterMigration]

class ThreadClusterReport(TypedDict):
    """``thread-cluster``'s report (Azimi et al. case study 3, 5.2)."""

    shmap_entries: int
    region_bytes: int
    detections: list[ThreadClusterDetection]
    clusterings: list[ThreadClusterClustering]
    migrations: int

# --- coloris (crates/sim/src/policy/coloris/report.rs) ---

class ColorisProcess(TypedDict):
    """A process at the end: its local cores, QoS thresholds (%), colors and page moves."""

    pid: int
    name: str
    core: int
    cores: list[int]
    low: float
    high: float
    colors: list[int]
    shrink_marked: int
    selective_moved: int
    redistribution_marked: int
    out_of_memory_allocs: int

class ColorisColorsAt(TypedDict):
    """A process's colors at a time (``history``, ``returned``, ``released``)."""

    time: int
    process: str
    colors: list[int]

class ColorisMonitorCall(TypedDict):
    """One MONITOR(cmr) call (Algorithm 1); ``colors``: how many it has after."""

    time: int
    process: str
    cmr: float
    accesses: int
    decision: Literal["none", "hot", "expand", "shrink"]
    colors: int

class ColorisRedistribution(TypedDict):
    time: int
    process: str
    marked: int

class ColorisReport(TypedDict):
    """``coloris``'s report (COLORIS sections 3.2-3.3); thresholds in % of LLC miss rate."""

    period: int
    win: int
    warmup: int
    unit: int
    expansion: Literal["selective-moving", "redistribution"]
    high_threshold: float
    low_threshold: float
    processes: list[ColorisProcess]
    history: list[ColorisColorsAt]
    monitor: list[ColorisMonitorCall]
    violations: list[str]
    returned: list[ColorisColorsAt]
    released: list[ColorisColorsAt]
    redistributions: list[ColorisRedistribution]
    colors_from_config: list[str]
    warnings: list[str]

PolicyReport = Union[RocsReport, MrcPartitionReport, ThreadClusterReport, ColorisReport, None]
"""What a Rust OS policy reports (``SystemResult.policy_report``); a policy written in Python
reports whatever its ``report`` returns."""
