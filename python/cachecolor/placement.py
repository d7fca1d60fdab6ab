"""Page placement and the per-set stack distance profile (thesis section 5.3.1).

A naive stack distance profile indexes cache sets with virtual addresses, as if every page sat
in physically contiguous memory; a real physically indexed cache sees the frames the OS chose.
``physical_sdp`` profiles one trace both ways (the physical side through a page map or a
simulated allocator), ``placement_sweep`` repeats that over working-set sizes and seeds for the
thesis's Figure 5.5 (the ratio PhysicallyAwareMissRate / NaiveMissRate per working set) beside
eq. 5.2's prediction, and ``read_pagemap`` snapshots a live process's mapping from
``/proc/PID/pagemap`` so a captured trace can be profiled with the frames it really had.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np

from . import _core
from .reports.fmt import bytes_
from .analysis import SetProfile, _config_error, set_profile

ALLOCATORS = tuple(_core.ALLOCATORS)  # the page-allocator registry (crates/sim/src/registry.rs)


def placement_spec(placement: Any, *, page_size: int = 4096, memory: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The ``placement`` option of a set profile: an allocator name, or a page map."""
    if isinstance(placement, str):
        if placement not in ALLOCATORS:
            raise _config_error("placement", f"{placement!r}: give an allocator ({', '.join(ALLOCATORS)}) or a page map")
        mem = dict(memory or {})
        mem.setdefault("ram", "1GiB")
        mem["allocator"] = placement
        return {"kind": "allocator", "page_size": int(page_size), "memory": mem}
    pairs = _pairs(placement)
    return {"kind": "mapping", "page_size": int(page_size), "pages": pairs.tolist()}


def _pairs(mapping: Any) -> np.ndarray:
    if isinstance(mapping, dict):
        return np.array(sorted(mapping.items()), dtype=np.uint64).reshape(-1, 2)
    if hasattr(mapping, "columns"):
        if not {"vpn", "pfn"} <= set(mapping.columns):
            raise _config_error("placement", "a page-map frame needs vpn and pfn columns")
        return mapping[["vpn", "pfn"]].to_numpy(dtype=np.uint64)
    arr = np.asarray(mapping)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise _config_error("placement", f"a page map is {{vpn: pfn}}, an N x 2 array or a vpn/pfn frame (got shape {arr.shape})")
    return arr.astype(np.uint64)


@dataclass(frozen=True)
class PhysicalSdp:
    """One trace profiled naively (virtual addresses index the sets) and physically aware."""

    naive: SetProfile
    aware: SetProfile
    ways: int

    @property
    def naive_miss_rate(self) -> float:
        return float(self.naive.miss_rate(self.ways)[0])

    @property
    def aware_miss_rate(self) -> float:
        return float(self.aware.miss_rate(self.ways)[0])

    @property
    def ratio(self) -> float:
        """PhysicallyAwareMissRate / NaiveMissRate at the cache's associativity (Figure 5.5)."""
        return self.aware_miss_rate / self.naive_miss_rate if self.naive_miss_rate > 0 else float("inf")

    @property
    def pages_per_color(self) -> np.ndarray:
        assert self.aware.placement is not None
        return np.asarray(self.aware.placement["pages_per_color"], dtype=np.int64)

    @property
    def predicted_miss_rate(self) -> float:
        """Eq. 5.2 from the placement's pages per bin (for a uniform workload). A bin holds
        ``ways`` pages; with pages larger than one way of the cache (one bin) it holds
        ``ways * way / page`` of them (a page fills several ways of every set)."""
        assert self.aware.placement is not None
        way = self.aware.sets * self.aware.line_size
        page = self.aware.placement["page_size"]
        capacity = self.ways if page <= way else self.ways * way // page
        if capacity == 0:
            return 1.0  # the cache holds less than one page per bin: (almost) every line misses
        return float(sum(_core.placement_miss_probability(self.pages_per_color.tolist(), capacity)))


def physical_sdp(
    trace: Any,
    *,
    cache_size: int,
    ways: int,
    line_size: int = 64,
    placement: Any = "random",
    page_size: Optional[int] = None,
    memory: Optional[dict[str, Any]] = None,
    format: str = "native",
) -> PhysicalSdp:
    """Profile ``trace`` for a ``cache_size``-byte ``ways``-way cache twice: naive, and through
    ``placement`` (an allocator name or a page map; see ``set_profile``). ``page_size``
    defaults to a ``read_pagemap`` frame's own (``frame.attrs["page_size"]``), else 4096."""
    if page_size is None:
        page_size = int(getattr(placement, "attrs", {}).get("page_size", 4096))
    naive = set_profile(trace, cache_size=cache_size, ways=ways, line_size=line_size, format=format)
    aware = set_profile(
        trace, cache_size=cache_size, ways=ways, line_size=line_size, format=format,
        placement=placement, page_size=page_size, memory=memory,
    )
    return PhysicalSdp(naive=naive, aware=aware, ways=ways)


def uniform_trace(working_set: int, references: int, *, line_size: int = 64, seed: int = 1, base: int = 0x2_0000_0000) -> np.ndarray:
    """Byte addresses of ``references`` uniformly random lines over ``working_set`` bytes
    (Cachetest's uniform distribution, thesis 4.2.3), after one pass over every line so each
    page is touched (placed) in address order, as a program initialising its buffer would."""
    lines = working_set // line_size
    if lines < 1:
        raise _config_error("working_set", f"{working_set} B: at least one {line_size} B line")
    if references < 0:
        raise _config_error("references", f"{references}: at least 0")
    rng = np.random.default_rng(seed)
    order = np.concatenate([np.arange(lines, dtype=np.uint64), rng.integers(0, lines, size=references, dtype=np.uint64)])
    return base + order * np.uint64(line_size)


def placement_sweep(
    *,
    cache_size: int,
    ways: int,
    working_sets: Sequence[int],
    seeds: Iterable[int] = range(1, 6),
    refs_per_line: int = 20,
    line_size: int = 64,
    page_size: int = 4096,
    placement: str = "random",
    memory: Optional[dict[str, Any]] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> Any:
    """Thesis Figure 5.5: for each working-set size and seed, a uniform workload profiled
    naively and through ``placement`` (the seed seeds both the workload and the allocator).
    One row per (working_set, seed): ``naive_miss_rate``, ``aware_miss_rate``, ``ratio`` and
    ``predicted_miss_rate`` (eq. 5.2 from the placement). ``summarise_sweep`` gives the
    figure's median and maximum per working set."""
    import pandas as pd

    rows = []
    seeds = list(seeds)
    for ws in working_sets:
        for seed in seeds:
            if progress:
                progress(f"working set {ws:,} B, seed {seed}")
            lines = max(1, int(ws) // line_size)
            trace = uniform_trace(int(ws), refs_per_line * lines, line_size=line_size, seed=seed)
            mem = dict(memory or {})
            mem["seed"] = int(seed)
            r = physical_sdp(
                trace, cache_size=cache_size, ways=ways, line_size=line_size,
                placement=placement, page_size=page_size, memory=mem,
            )
            rows.append(
                {
                    "working_set": int(ws),
                    "seed": int(seed),
                    "naive_miss_rate": r.naive_miss_rate,
                    "aware_miss_rate": r.aware_miss_rate,
                    "ratio": r.ratio,
                    "predicted_miss_rate": r.predicted_miss_rate,
                }
            )
    return pd.DataFrame(rows)


def summarise_sweep(frame: Any) -> Any:
    """Per working set: the median and maximum ratio (Figure 5.5's bars and error bars) and the
    mean miss rates."""
    g = frame.groupby("working_set")
    return g.agg(
        median_ratio=("ratio", "median"),
        max_ratio=("ratio", "max"),
        naive_miss_rate=("naive_miss_rate", "mean"),
        aware_miss_rate=("aware_miss_rate", "mean"),
        predicted_miss_rate=("predicted_miss_rate", "mean"),
    ).reset_index()


def plot_sweep(frame: Any, *, cache_size: Optional[int] = None, ax: Any = None) -> Any:
    """Figure 5.5's shape: median ratio per working set with the maximum as an error bar (log
    y axis), and the cache size marked."""
    import matplotlib.pyplot as plt

    s = summarise_sweep(frame)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    x = np.arange(len(s))
    ax.bar(x, s["median_ratio"], color="#4477aa", label="median of seeds")
    ax.errorbar(x, s["median_ratio"], yerr=[np.zeros(len(s)), s["max_ratio"] - s["median_ratio"]], fmt="none", ecolor="black", capsize=3, label="maximum")
    ax.set_xticks(x, [bytes_(v) for v in s["working_set"]], rotation=45)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("working set" + (f" (cache {bytes_(cache_size)})" if cache_size else ""))
    ax.set_ylabel("physically aware / naive miss rate")
    ax.legend()
    return ax


def read_pagemap(start: int, end: int, pid: Union[int, str] = "self") -> Any:
    """The present pages of ``[start, end)`` in process ``pid``'s address space with their
    frames, from ``/proc/PID/pagemap`` (a frame with ``vpn`` and ``pfn`` columns, in units of
    the kernel's page size, which ``frame.attrs["page_size"]`` records and ``physical_sdp``
    uses).

    Frame numbers are shown only to root (CAP_SYS_ADMIN); otherwise the kernel reports 0 and
    this raises ``PermissionError`` rather than returning a map of zeros."""
    import pandas as pd

    # pagemap has one 8-byte entry per page of the kernel's own size.
    page = os.sysconf("SC_PAGE_SIZE")
    first, last = start // page, (end + page - 1) // page
    path = f"/proc/{pid}/pagemap"
    with open(path, "rb") as f:
        f.seek(first * 8)
        raw = f.read((last - first) * 8)
    entries = np.frombuffer(raw, dtype="<u8")
    vpns = np.arange(first, first + len(entries), dtype=np.uint64)
    present = (entries >> np.uint64(63)) & np.uint64(1) == 1
    pfns = entries & np.uint64((1 << 55) - 1)
    if present.any() and not pfns[present].any():
        raise PermissionError(f"{path}: frame numbers read as 0: reading them needs root (CAP_SYS_ADMIN)")
    frame = pd.DataFrame({"vpn": vpns[present], "pfn": pfns[present]})
    frame.attrs["page_size"] = page
    return frame
