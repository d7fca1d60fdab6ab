"""Miss-rate curves and per-set stack distance profiles of traces (docs/analysis.md).

``mrc`` gives the fully associative LRU miss rate at every cache size: exact (Mattson's stack
algorithm in O(log M) per reference), or estimated by SHARDS (spatial sampling at a fixed rate
or a fixed number of sampled lines, with SHARDS_adj, several salts for a band) or by AET (the
kinetic model fed by sampled reuse times). ``set_profile`` gives the stack distance profile of
every set of a set-associative cache and their access-weighted average (thesis section 5.3):
the LRU miss rate of every associativity for that number of sets, in one pass.

Sources (``trace``): a path (read in ``format``, streamed), a synthetic workload (a dict with
``phases``, as in a config's ``[workload]``, or a ``WorkloadFile``), or records in memory (an address array, a
DataFrame, a structured array or a dict of columns; see ``cachecolor.records``: ``size``
splits a record spanning lines into one reference per line and ``icount`` gives MPKI).

Contract:
- Sizes are in units of the granularity: lines (``line_size`` bytes) or pages (``page_size``).
- Same inputs, salt and seed give identical results; the work runs in Rust with the GIL released
  and ``progress`` (if given) is called once per block of 65,536 records.
- Bad options raise ``cachecolor.ConfigError`` naming the option and what is allowed (e.g. a
  sampling rate outside (0, 1]); an empty trace raises ``ConfigError`` (field ``trace``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from . import _core
from .config import read_config_text
from .records import to_columns
from .results import write_json_atomic
from .simulation import Progress, _wrap_progress

GRANULARITIES = ("line", "page")
METHODS = ("exact", "shards", "aet")

__all__ = ["MissRateCurve", "RapidMrc", "SetProfile", "WorkloadFile", "rapid_mrc", "mrc", "mrc_options", "profile", "set_profile", "zipf_scan_trace"]


def _config_error(field_name: str, message: str) -> Exception:
    """A ``ConfigError`` raised on the Python side, shaped like the Rust core's."""
    e = _core.ConfigError(f"{field_name}: {message}")
    e.field = field_name
    return e


@dataclass(frozen=True)
class WorkloadFile:
    """A source that is a synthetic workload spec file (``.toml`` or ``.json``): either the
    workload table itself (``seed``, ``[[phases]]``, ...) or a simulation config whose
    ``[workload]`` is used. ``cachecolor mrc --workload FILE`` profiles one."""

    path: Union[str, "os.PathLike[str]"]


def _source_kwargs(trace: Any, format: str, icounts: bool) -> dict[str, Any]:
    """The ``_core.profile`` keyword arguments that name the source."""
    if isinstance(trace, WorkloadFile):
        path = os.fspath(trace.path)
        text = read_config_text(path, "workload file")
        return {"workload": text, "workload_format": "json" if path.lower().endswith(".json") else "toml"}
    if isinstance(trace, (str, os.PathLike)):
        return {"path": os.fspath(trace), "format": format}
    if isinstance(trace, dict) and "phases" in trace:
        return {"workload": json.dumps(trace), "workload_format": "json"}
    cols = to_columns(trace)
    kw: dict[str, Any] = {"addresses": cols["addr"]}
    if "size" in cols:
        kw["sizes"] = cols["size"]
    if icounts and "icount" in cols:
        kw["icounts"] = cols["icount"]
    return kw


@dataclass(frozen=True)
class MissRateCurve:
    """A miss-rate curve: ``miss_rate[i]`` is the fully associative LRU miss rate of a cache of
    ``sizes[i]`` units (lines or pages of ``unit_bytes`` bytes)."""

    sizes: np.ndarray
    miss_rate: np.ndarray
    method: str
    unit_bytes: int
    references: int
    instructions: int
    distinct: float
    distinct_exact: bool
    rate: Optional[float]
    max_lines: Optional[int]
    salts: int
    adjusted: bool
    seed: int
    reliable_from: int
    state_bytes: int
    source: dict[str, Any]
    version: str
    band_low: Optional[np.ndarray] = None
    band_high: Optional[np.ndarray] = None
    #: Exact only: ``histogram[d]`` references at stack distance ``d``; ``histogram[0]`` first
    #: references (= distinct units).
    histogram: Optional[np.ndarray] = field(default=None, repr=False)

    @property
    def reliable(self) -> np.ndarray:
        """Per size: False where the estimate rests on too few samples (SHARDS: below 50 / R)."""
        return self.sizes >= self.reliable_from

    @property
    def mpki(self) -> Optional[np.ndarray]:
        """Misses per 1000 instructions at each size, when the trace has instruction counts."""
        if self.instructions <= 0:
            return None
        return self.miss_rate * (self.references * 1000.0 / self.instructions)

    def at(self, sizes: Union[int, Sequence[int], np.ndarray]) -> np.ndarray:
        """Miss rates at other sizes: exact from the histogram, or for an estimate the value at
        the largest reported size not above each (the curve never rises with size)."""
        s = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
        if (s < 0).any():
            raise ValueError("cache sizes must be >= 0")
        if self.histogram is not None:
            h = self.histogram
            # misses(c) = first references + references at distance > c
            tail = np.concatenate([np.cumsum(h[:0:-1])[::-1], [0]])  # tail[c] = sum h[c+1:]
            idx = np.minimum(s, len(h) - 1)
            return (h[0] + tail[idx]) / self.references
        k = np.searchsorted(self.sizes, s, side="right") - 1
        out = np.where(k >= 0, self.miss_rate[np.maximum(k, 0)], 1.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The curve as the JSON document ``cachecolor mrc --json`` writes (no histogram)."""
        doc: dict[str, Any] = {
            "version": self.version,
            "method": self.method,
            "unit_bytes": self.unit_bytes,
            "references": self.references,
            "instructions": self.instructions,
            "distinct": self.distinct,
            "distinct_exact": self.distinct_exact,
            "rate": self.rate,
            "max_lines": self.max_lines,
            "salts": self.salts,
            "adjusted": self.adjusted,
            "seed": self.seed,
            "reliable_from": self.reliable_from,
            "state_bytes": self.state_bytes,
            "source": self.source,
            "sizes": self.sizes.tolist(),
            "miss_rate": self.miss_rate.tolist(),
        }
        if self.band_low is not None and self.band_high is not None:
            doc["band_low"] = self.band_low.tolist()
            doc["band_high"] = self.band_high.tolist()
        mpki = self.mpki
        if mpki is not None:
            doc["mpki"] = mpki.tolist()
        return doc

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write ``to_dict()`` to ``path`` atomically."""
        write_json_atomic(path, self.to_dict())

    def plot(self, ax: Any = None, *, label: Optional[str] = None, unit: str = "auto", **kwargs: Any) -> Any:
        """Plot the curve on a log-size axis (matplotlib; returns the axes). The unreliable
        region (below ``reliable_from``) is drawn dashed and the salts' band shaded."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4.5))
        scale, unit_name = _size_unit(self.sizes, self.unit_bytes, unit)
        x = self.sizes * scale
        label = label or (self.method if self.rate is None else f"{self.method} R={self.rate:.3g}")
        ok = self.reliable
        (line,) = ax.plot(x[ok], self.miss_rate[ok], label=label, **kwargs)
        if (~ok).any():
            ax.plot(x[~ok], self.miss_rate[~ok], linestyle="--", color=line.get_color(), alpha=0.6)
        if self.band_low is not None and self.band_high is not None:
            ax.fill_between(x, self.band_low, self.band_high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_xscale("log")
        ax.set_xlabel(f"cache size ({unit_name})")
        ax.set_ylabel("miss rate (fully associative LRU)")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        return ax

    def __repr__(self) -> str:
        est = "" if self.distinct_exact else "~"
        return (
            f"<cachecolor.MissRateCurve {self.method}: {self.references:,} references, "
            f"{est}{self.distinct:,.0f} distinct {self.unit_bytes}-byte units, {len(self.sizes)} sizes>"
        )


def _size_unit(sizes: np.ndarray, unit_bytes: int, unit: str) -> tuple[float, str]:
    if unit == "units":
        return 1.0, f"{unit_bytes}-byte units"
    top = float(sizes.max() if len(sizes) else 1) * unit_bytes
    for name, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if unit == name or (unit == "auto" and top >= 4 * b):
            return unit_bytes / b, name
    return float(unit_bytes), "bytes"


def mrc(
    trace: Any,
    *,
    format: str = "native",
    granularity: str = "line",
    line_size: int = 64,
    page_size: int = 4096,
    method: Optional[str] = None,
    rate: Optional[float] = None,
    max_lines: Optional[int] = None,
    salts: int = 1,
    adjust: bool = True,
    seed: int = 0,
    sizes: Optional[Sequence[int]] = None,
    points: Optional[int] = None,
    all_sizes: bool = False,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> MissRateCurve:
    """The miss-rate curve of ``trace`` (see the module docstring for sources).

    ``method`` is ``"exact"`` (default), ``"shards"`` (give ``rate`` in (0, 1] for fixed-rate
    or ``max_lines`` for fixed-size sampling; ``salts`` > 1 adds a min/max band; ``adjust``
    applies SHARDS_adj) or ``"aet"`` (``rate`` = reference sampling rate); when omitted it is
    ``"shards"`` if ``rate`` or ``max_lines`` is given, else ``"exact"``. ``granularity`` is
    ``"line"`` or ``"page"``. The curve is reported at ``sizes``, at ``points`` log-spaced
    sizes (default 1000) up to the distinct units, or at every size (``all_sizes``, exact).
    """
    options = mrc_options(
        granularity=granularity,
        line_size=line_size,
        page_size=page_size,
        method=method,
        rate=rate,
        max_lines=max_lines,
        salts=salts,
        adjust=adjust,
        seed=seed,
        sizes=sizes,
        points=points,
        all_sizes=all_sizes,
    )
    curve, _ = profile(trace, mrc=options, format=format, progress=progress)
    assert curve is not None
    return curve


def mrc_options(
    *,
    granularity: str = "line",
    line_size: int = 64,
    page_size: int = 4096,
    method: Optional[str] = None,
    rate: Optional[float] = None,
    max_lines: Optional[int] = None,
    salts: int = 1,
    adjust: bool = True,
    seed: int = 0,
    sizes: Optional[Sequence[int]] = None,
    points: Optional[int] = None,
    all_sizes: bool = False,
) -> dict[str, Any]:
    """The options dict ``mrc`` passes to the Rust core (checked there)."""
    if granularity not in GRANULARITIES:
        raise _config_error("granularity", f"{granularity!r} is not allowed: use one of {', '.join(GRANULARITIES)}")
    if method is None:
        method = "shards" if (rate is not None or max_lines is not None) else "exact"
    if method not in METHODS:
        raise _config_error("method", f"{method!r} is not allowed: use one of {', '.join(METHODS)}")
    options: dict[str, Any] = {
        "unit_bytes": int(line_size if granularity == "line" else page_size),
        "method": method,
        "salts": int(salts),
        "adjust": bool(adjust),
        "seed": int(seed),
        "all_sizes": bool(all_sizes),
    }
    if rate is not None:
        options["rate"] = float(rate)
    if max_lines is not None:
        options["max_lines"] = int(max_lines)
    if sizes is not None:
        options["sizes"] = [int(s) for s in sizes]
    if points is not None:
        options["points"] = int(points)
    return options


def profile(
    trace: Any,
    *,
    mrc: Optional[dict[str, Any]] = None,
    sets: Optional[dict[str, Any]] = None,
    format: str = "native",
    progress: Optional[Callable[[Progress], Any]] = None,
) -> tuple[Optional["MissRateCurve"], Optional["SetProfile"]]:
    """A miss-rate curve (``mrc``: options from ``mrc_options``) and/or a per-set profile
    (``sets``: ``{"line_size", "sets", "max_ways"}``) in one pass over ``trace``."""
    out = _core.profile(
        mrc_options=None if mrc is None else json.dumps(mrc),
        set_options=None if sets is None else json.dumps(sets),
        progress=_wrap_progress(progress),
        **_source_kwargs(trace, format, mrc is not None),
    )
    return (
        None if mrc is None else _curve(json.loads(out["mrc"]), out.get("histogram")),
        None if sets is None else _set_profile(json.loads(out["set_profile"]), out["per_set"], out["pooled"]),
    )


def _curve(doc: dict[str, Any], hist: Optional[bytes]) -> MissRateCurve:
    def arr(key: str) -> Optional[np.ndarray]:
        v = doc.get(key)
        return None if v is None else np.asarray(v, dtype=np.float64)

    return MissRateCurve(
        sizes=np.asarray(doc["sizes"], dtype=np.int64),
        miss_rate=np.asarray(doc["miss_rate"], dtype=np.float64),
        method=doc["method"],
        unit_bytes=doc["unit_bytes"],
        references=doc["references"],
        instructions=doc["instructions"],
        distinct=doc["distinct"],
        distinct_exact=doc["distinct_exact"],
        rate=doc["rate"],
        max_lines=doc["max_lines"],
        salts=doc["salts"],
        adjusted=doc["adjusted"],
        seed=doc["seed"],
        reliable_from=doc["reliable_from"],
        state_bytes=doc["state_bytes"],
        source=doc["source"],
        version=doc["version"],
        band_low=arr("band_low"),
        band_high=arr("band_high"),
        histogram=None if hist is None else np.frombuffer(hist, dtype="<u8"),
    )


@dataclass(frozen=True)
class SetProfile:
    """Per-set LRU stack distance profiles of a cache with ``sets`` sets of ``line_size``-byte
    lines (set = line mod sets), for associativities ``1..max_ways`` (thesis 2.3.3 and 5.3).

    ``counts[s, d - 1]`` references of set ``s`` at per-set stack distance ``d`` (served from
    LRU position ``d``), ``counts[s, max_ways]`` the rest (deeper, or a line's first reference):
    the thesis's ``A + 1`` counters per set. ``pooled[d]`` all sets' references at distance
    ``d`` with no cap (``pooled[0]`` first references).
    """

    sets: int
    max_ways: int
    line_size: int
    references: int
    distinct: int
    counts: np.ndarray
    pooled: np.ndarray = field(repr=False)
    source: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    #: With a placement (``set_profile(..., placement=...)``): ``source``, ``page_size``,
    #: ``pages`` touched and ``pages_per_color`` (the bins of the profiled cache).
    placement: Optional[dict[str, Any]] = None

    @property
    def references_per_set(self) -> np.ndarray:
        return self.counts.sum(axis=1)

    @property
    def weighted(self) -> np.ndarray:
        """The access-weighted average profile (thesis 5.3: each set weighted by its share of
        the references): fraction of all references at distance ``1..max_ways``, then beyond."""
        return self.counts.sum(axis=0) / self.references

    @property
    def unweighted(self) -> np.ndarray:
        """The plain average over the sets that were referenced, each set's profile normalised
        by its own references (for contrast with ``weighted``)."""
        n = self.references_per_set
        used = n > 0
        return (self.counts[used] / n[used, None]).mean(axis=0)

    def miss_rate(self, ways: Union[int, Sequence[int], None] = None) -> np.ndarray:
        """The miss rate of a set-associative LRU cache with ``sets`` sets and ``ways`` ways
        (default every associativity ``1..max_ways``), from the weighted profile."""
        w = np.arange(1, self.max_ways + 1) if ways is None else np.atleast_1d(np.asarray(ways, dtype=np.int64))
        if (w < 1).any():
            raise ValueError("associativities must be >= 1")
        # Beyond max_ways the pooled (uncapped) distances still answer exactly.
        h = self.pooled
        tail = np.concatenate([np.cumsum(h[:0:-1])[::-1], [0]])
        idx = np.minimum(w, len(h) - 1)
        return (h[0] + tail[idx]) / self.references

    def per_set_miss_rate(self, ways: int) -> np.ndarray:
        """Each set's own LRU miss rate at ``ways`` ways (``ways <= max_ways``; NaN for sets
        never referenced)."""
        if not 1 <= ways <= self.max_ways:
            raise ValueError(f"ways must be in 1..{self.max_ways} (the profile's max_ways)")
        n = self.references_per_set
        misses = self.counts[:, ways:].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, misses / np.maximum(n, 1), np.nan)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "sets": self.sets,
            "max_ways": self.max_ways,
            "line_size": self.line_size,
            "references": self.references,
            "distinct": self.distinct,
            "source": self.source,
            "ways": list(range(1, self.max_ways + 1)),
            "miss_rate": self.miss_rate().tolist(),
            "weighted_profile": self.weighted.tolist(),
        }


def set_profile(
    trace: Any,
    *,
    sets: Optional[int] = None,
    cache_size: Optional[int] = None,
    ways: Optional[int] = None,
    max_ways: Optional[int] = None,
    line_size: int = 64,
    format: str = "native",
    placement: Any = None,
    page_size: int = 4096,
    memory: Optional[dict[str, Any]] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> SetProfile:
    """Per-set stack distance profiles of ``trace`` for ``sets`` sets, or for the sets of a
    ``cache_size``-byte ``ways``-way cache. ``max_ways`` (default ``ways``, else 16) is the
    largest associativity profiled per set; ``SetProfile.miss_rate`` answers any.

    ``placement`` makes it physically aware (thesis 5.3.1): the name of a page allocator of the
    simulator (``"random"``, ``"buddy"``, ``"bin-hopping"``, ...; frames given at each page's
    first touch, ``memory`` as ``[memory]``: ``ram``, ``seed``, ``aged``, ...), or a fixed page
    map (``{vpn: pfn}``, an ``N x 2`` array, or a frame with ``vpn`` and ``pfn`` columns, e.g.
    ``read_pagemap``'s) of ``page_size``-byte pages. Without it, the trace's addresses index
    the sets directly (the naive profile)."""
    if sets is None:
        if cache_size is None or ways is None:
            raise _config_error("sets", "give sets=, or cache_size= and ways=")
        if ways <= 0 or line_size <= 0 or cache_size <= 0 or cache_size % (ways * line_size):
            raise _config_error(
                "cache_size",
                f"{cache_size} B is not a positive multiple of ways x line_size = {ways} x {line_size} B",
            )
        sets = cache_size // (ways * line_size)
    if max_ways is None:
        max_ways = ways if ways is not None else 16
    options: dict[str, Any] = {"line_size": int(line_size), "sets": int(sets), "max_ways": int(max_ways)}
    if placement is not None:
        from .placement import placement_spec

        options["placement"] = placement_spec(placement, page_size=page_size, memory=memory)
    _, prof = profile(trace, sets=options, format=format, progress=progress)
    assert prof is not None
    return prof


def _set_profile(doc: dict[str, Any], per_set: bytes, pooled: bytes) -> SetProfile:
    counts = np.frombuffer(per_set, dtype="<u8").reshape(doc["sets"], doc["max_ways"] + 1)
    return SetProfile(
        sets=doc["sets"],
        max_ways=doc["max_ways"],
        line_size=doc["line_size"],
        references=doc["references"],
        distinct=doc["distinct"],
        counts=counts,
        pooled=np.frombuffer(pooled, dtype="<u8"),
        source=doc["source"],
        version=doc["version"],
        placement=doc.get("placement"),
    )


@dataclass(frozen=True)
class RapidMrc:
    """A RapidMRC window's L2 curve (``miss_rate``) beside the exact curve of the whole L1-miss
    stream (``exact_miss_rate``) at ``sizes`` (fully associative L2 sizes in lines), and their
    mean absolute difference ``mae``."""

    sizes: np.ndarray
    miss_rate: np.ndarray
    exact_miss_rate: np.ndarray
    mae: float
    references: int
    l1_misses: int
    window_counted: int
    options: dict[str, Any]


def rapid_mrc(
    trace: Any,
    *,
    l1_size: int = 32 << 10,
    l1_ways: int = 8,
    window: int,
    warmup: int = 0,
    start: int = 0,
    line_size: int = 64,
    points: Optional[int] = None,
    format: str = "native",
    progress: Optional[Callable[[Progress], Any]] = None,
) -> RapidMrc:
    """RapidMRC (Azimi et al. 2009, section 3.2.2): the L2 miss-rate curve from a window of
    ``window`` L1 misses (after skipping ``start``; the first ``warmup`` only fill the stack),
    with the L1 simulated as an ``l1_size``-byte ``l1_ways``-way LRU cache, and its error against
    the exact curve of every L1 miss."""
    options: dict[str, Any] = {
        "line_size": int(line_size), "l1_size": int(l1_size), "l1_ways": int(l1_ways),
        "window": int(window), "warmup": int(warmup), "start": int(start),
    }
    if points is not None:
        options["points"] = int(points)
    out = _core.profile(
        rapid_options=json.dumps(options), progress=_wrap_progress(progress), **_source_kwargs(trace, format, False)
    )
    doc = json.loads(out["rapid_mrc"])
    return RapidMrc(
        sizes=np.asarray(doc["sizes"], dtype=np.int64),
        miss_rate=np.asarray(doc["miss_rate"], dtype=np.float64),
        exact_miss_rate=np.asarray(doc["exact_miss_rate"], dtype=np.float64),
        mae=doc["mae"],
        references=doc["references"],
        l1_misses=doc["l1_misses"],
        window_counted=doc["window_counted"],
        options=options,
    )


def zipf_scan_trace(refs: int, lines: int, *, alpha: float = 0.9, seed: int = 1, line_size: int = 64) -> np.ndarray:
    """ANCHORS.md's miss-rate-curve reference trace as byte addresses: ``refs`` references over
    ``lines`` lines, each (coin flip) a zipf(``alpha``) draw (hot lines from line 0) or the next
    line of a cyclic scan over all of them. The Rust tests and ``benches/mrc.py`` use it."""
    return np.frombuffer(_core.zipf_scan_trace(refs, lines, alpha, seed, line_size), dtype="<u8")
