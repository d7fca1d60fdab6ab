"""Per data object: reuse, the pollute buffer's candidates and its predicted effect, misses over
time (``cachecolor annotate --objects``, ``annotate(..., by="object")``).

``annotate_objects`` (annotate.py) gives an object's accesses and misses at each data level. This
module adds what ROCS (Soares, Tam and Stumm, MICRO 2008, ``papers/000``) reasons with:

- **Reuse** (ROCS 3.2.1: a page's miss rate is "an inverse measure of the probability of reusing a
  cache block of the page"): measured directly, not inferred from misses. Every reference's exact
  LRU stack distance in lines (fully associative, Mattson et al.; ``_core.object_reuse`` runs
  ``analysis::stack::LruStack`` over the whole stream, instructions included since they share a
  unified last level) is kept per object for its data references that reach the last data level
  ``L`` (ROCS 3.1's population: its samples are L1D misses with the level that served them; the
  hits in an L1 are spatial reuse the LLC never sees). ``L_references`` counts them,
  ``cold_share`` is the share that are first references, ``reuse_within_L`` the share whose
  distance is at most ``L``'s lines (those a fully associative LRU cache of its size would hit)
  and ``median_reuse_lines`` the median distance of the others (the reused ones): a polluter is
  all cold or reused far beyond ``L``; a victim is reused at a distance the polluter inflates.
- **The pollute buffer's candidates** (ROCS 5.2 and Algorithm 1, as ``policy/rocs`` implements
  them): the miss-rate stack is every page whose data references reach the last level, highest
  miss rate there first (ties: more accesses, then address). The search maps ``step`` more pages
  from the top per step (default a sixteenth of the stack), keeps the best step, and stops
  ``min_pages`` from the bottom. ROCS measures each step's IPC on the running program; here each
  step is a re-run of the trace with those pages placed in the buffer's colors by the simulator's
  ``color-pool`` allocator (``_core.placed_page_tallies``), and the measure is the total misses at
  the last level (a cache-only run has no IPC; fewer misses is what the buffer is for). A step is
  the best only if it has strictly fewer misses than the best so far, so ties keep the fewer
  pages. A profile with no hit at the last level is not searched (as in ``rocs``:
  nothing reused to protect).
- **The predicted effect**, per object, from three placements of the same allocator: ``shared``
  (every page may use every color: before), ``reserved`` (the buffer's colors out of use and
  empty: the control, what reserving the buffer alone does) and ``buffered`` (the chosen pages in
  the buffer's colors, the rest in the others: after). The buffer is the last level's last
  ``buffer_colors`` colors (default a sixteenth of its colors, at least one: ROCS 6).
- **Misses over time**: each object's misses at each data level per interval of records.

Where the objects come from: a list of ``(start, end, name, kind)`` address ranges (``end``
exclusive). ``ranges=None`` takes the program's global and static data by symbol
(``symbol_ranges``; a binary linked at a fixed address); a memory map (mappings, libraries, heap
allocation sites) gives the same list. A 4 KiB page belongs to the range covering most of it
(at least half), as in ``annotate_objects``; the rest is one row, ``OTHER``.
"""
from __future__ import annotations

import heapq
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _core
from .annotate import (AnnotateError, _data_symbols, _elf_text, _levels, _map_of, _path, _trace_header, annotate_objects,
                       object_ranges)
from .config import ConfigSource, load_cache_config
from .simulation import Progress, _wrap_progress
from .traces import trace_info

#: An object's address range: (start, end exclusive, name, kind).
ObjectRange = tuple[int, int, str, str]
#: The row of every data page no range covers (``annotate_objects`` uses the same label).
OTHER = "(heap, stack or other: no memory map)"
#: The same row for a trace with a memory map: the pages no mapping covers.
UNMAPPED = "(unmapped)"
PAGE_SHIFT = 12


def symbol_ranges(binary: os.PathLike | str) -> list[ObjectRange]:
    """The global and static data objects of ``binary`` (``nm -S``) as ranges of kind ``symbol``
    (``annotate.object_ranges``' kind for them);
    none unless it is linked at a fixed address (its symbols' addresses are then its run-time
    ones)."""
    path = Path(binary)
    kind, _ = _elf_text(path)
    if kind != "exec":
        return []
    return [(lo, hi, name, "symbol") for lo, hi, name in _data_symbols(path)]


def other_label(trace: os.PathLike | str) -> str:
    """The catch-all row's name for ``trace`` (``annotate_objects``' own): ``UNMAPPED`` with a
    memory map, else ``OTHER``."""
    return UNMAPPED if _map_of(_trace_header(trace)) is not None else OTHER


def default_ranges(trace: os.PathLike | str, binary: Optional[os.PathLike | str] = None) -> list[ObjectRange]:
    """The objects of ``trace`` when none are given: with the capture's memory map, its mappings
    and every mapped file's globals (``annotate.object_ranges``), widest first so that a page
    covered equally goes to the innermost range (``page_owners``); without one, the symbols of
    ``binary`` or of the program its metadata names."""
    head = _trace_header(trace)
    if _map_of(head) is not None:
        return sorted(object_ranges(trace, binary), key=lambda r: (-(r[1] - r[0]), r[0], r[2]))
    program = binary or head["metadata"].get("program")
    return symbol_ranges(program) if program else []


@dataclass
class PageOwners:
    """Which object each 4 KiB page belongs to, without listing every page of a large range (a
    memory map's reservations can span terabytes): the first and last page of each range
    explicitly (``vpns`` -> ``ids``, -1 for a page no range covers at least half), every page
    between them as disjoint spans ``[first, last]`` -> ``span_ids``."""

    vpns: np.ndarray
    ids: np.ndarray
    span_first: np.ndarray
    span_last: np.ndarray
    span_ids: np.ndarray

    def lookup(self, pages: np.ndarray, other: int) -> np.ndarray:
        """The object index of each page of ``pages`` (``other`` where none)."""
        pages = np.asarray(pages, dtype=np.uint64)
        out = np.full(len(pages), other, dtype=np.int64)
        if len(self.span_first):
            k = np.searchsorted(self.span_first, pages, side="right") - 1
            ok = (k >= 0) & (pages <= self.span_last[np.maximum(k, 0)])
            out[ok] = self.span_ids[k[ok]]
        if len(self.vpns):
            order = np.argsort(self.vpns)
            v = self.vpns[order]
            j = np.clip(np.searchsorted(v, pages), 0, len(v) - 1)
            hit = v[j] == pages
            ids = self.ids[order][j[hit]]
            out[np.flatnonzero(hit)] = np.where(ids < 0, other, ids)
        return out


FINE_KINDS = ("symbol", "heap site")


def range_rank(kind: str) -> int:
    """How fine a range of ``kind`` names the bytes it covers, of ranges covering a page
    alike: a global or heap block (2) before a mapping with a name of its own (a file, the
    heap, a stack: 1) before an anonymous mapping (0), which names nothing but its addresses."""
    return 2 if kind in FINE_KINDS else 0 if kind == "anon" else 1


def page_owners(ranges: Sequence[ObjectRange]) -> PageOwners:
    """The owner of every 4 KiB page, the one rule every view of ``annotate --objects`` uses
    (``annotate_objects`` too), so every view names an object alike: a ``symbol`` or ``heap
    site`` range covering at least half of it, else the range covering most of it, at least
    half; of ranges covering it equally, the finer kind (``range_rank``), then the narrower,
    then the first name in sorted order. The list's order does not matter (views list the same
    ranges in different orders: a rule that fell back on it gave a region held by a file and by
    an anonymous mapping of the same extent to the file in one view and to the mapping in
    another)."""
    half = 1 << (PAGE_SHIFT - 1)
    page = 1 << PAGE_SHIFT
    # Priority of a range over another covering the same whole pages: the finer kind, then the
    # narrower, then the first name (sorted by name last first, then stably by kind and width).
    by_name = sorted(range(len(ranges)), key=lambda i: (ranges[i][2], ranges[i][0], ranges[i][1]), reverse=True)
    order = sorted(by_name, key=lambda i: (range_rank(ranges[i][3]), -(ranges[i][1] - ranges[i][0])))
    prio = {i: k for k, i in enumerate(order)}
    edges: dict[int, list[tuple[int, int]]] = {}
    inner = []  # (first, last, index): the pages strictly between a range's first and last
    for i, (lo, hi, _name, _kind) in enumerate(ranges):
        if hi <= lo:
            continue
        first, last = lo >> PAGE_SHIFT, (hi - 1) >> PAGE_SHIFT
        for pg in {first, last}:
            edges.setdefault(pg, []).append((min(hi, (pg + 1) << PAGE_SHIFT) - max(lo, pg << PAGE_SHIFT), i))
        if last - first >= 2:
            inner.append((first + 1, last - 1, i))
    # Paint the inner spans by priority: a sweep over their boundaries keeping the
    # highest-priority range active (lazily deleted from a heap).
    bounds = sorted({f for f, _, _ in inner} | {l + 1 for _, l, _ in inner})
    starts: dict[int, list[int]] = {}
    for f, l, i in inner:
        starts.setdefault(f, []).append(i)
    ends = {i: l for _, l, i in inner}
    heap: list[int] = []
    spans: list[list[int]] = []
    for x, nxt in zip(bounds, bounds[1:] + [None]):
        for i in starts.get(x, []):
            heapq.heappush(heap, -prio[i])
        while heap and ends[order[-heap[0]]] < x:
            heapq.heappop(heap)
        if heap and nxt is not None:
            top = order[-heap[0]]
            if spans and spans[-1][2] == top and spans[-1][1] == x - 1:
                spans[-1][1] = nxt - 1
            else:
                spans.append([x, nxt - 1, top])
    sp = np.array(spans, dtype=np.int64).reshape(-1, 3)
    owners = PageOwners(np.zeros(0, np.uint64), np.zeros(0, np.int64), sp[:, 0].astype(np.uint64),
                        sp[:, 1].astype(np.uint64), sp[:, 2])
    # An edge page: the best of the ranges it is an edge of and the one it is inside of.
    pages = np.fromiter(edges.keys(), dtype=np.uint64, count=len(edges))
    inside = owners.lookup(pages, -1)
    ids = []
    for pg, within in zip(edges, inside.tolist()):
        cands = edges[pg] + ([(page, within)] if within >= 0 else [])
        # A symbol covering at least half the page takes it before any mapping, however much
        # of the page that covers (``annotate_objects``' rule: the symbol is the finer name).
        # (A heap block is as fine as a symbol: annotate_objects ranks them alike.)
        _, cover, _, idx = max((int(ranges[i][3] in FINE_KINDS and c >= half), c, prio[i], i)
                               for c, i in cands)
        ids.append(idx if cover >= half else -1)
    owners.vpns, owners.ids = pages, np.asarray(ids, dtype=np.int64)
    return owners


def _owners_by_name(ranges: Sequence[ObjectRange], other: str) -> tuple[PageOwners, list[str], int]:
    """``page_owners`` with one id per distinct name (a memory map lists a file once per mapped
    segment and a region once per mapping that held it, all under one name), the names (the
    catch-all ``other`` last) and the number of named objects."""
    owners = page_owners(ranges)
    unique = list(dict.fromkeys(r[2] for r in ranges))
    index = {name: i for i, name in enumerate(unique)}
    remap = np.array([index[r[2]] for r in ranges], dtype=np.int64)
    if len(owners.ids):
        owners.ids = np.where(owners.ids >= 0, remap[np.maximum(owners.ids, 0)], -1)
    if len(owners.span_ids):
        owners.span_ids = remap[owners.span_ids]
    return owners, unique + [other], len(unique)


def object_reuse(
    trace: os.PathLike | str,
    config: ConfigSource,
    ranges: Optional[Sequence[ObjectRange]] = None,
    *,
    binary: Optional[os.PathLike | str] = None,
    intervals: int = 50,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> tuple[Any, Any]:
    """(reuse per object, misses per object over time) of ``trace`` on ``config``'s hierarchy.

    The first frame has one row per object whose data references reach the last data level
    ``L``: ``object``, ``L_references`` (those references), ``cold_share`` (first references),
    ``reuse_within_L`` (the share whose LRU stack distance is at most ``L``'s lines) and
    ``median_reuse_lines`` (median stack distance of the reused ones, NaN without any). The
    second has one row per object and
    interval (``intervals`` of equal length): ``object``, ``interval``, ``first_record`` and per
    data level ``L``: ``L_misses``."""
    import pandas as pd

    if intervals < 1:
        raise ValueError(f"intervals={intervals}: give at least 1")
    cfg = load_cache_config(config)
    ranges = list(default_ranges(trace, binary) if ranges is None else ranges)
    owners, names, n_objects = _owners_by_name(ranges, other_label(trace))
    records = int(trace_info(trace)["records"])
    every = max(1, -(-records // intervals))
    levels = _levels(cfg)
    path = _path(levels, 0)
    o = _owner_args(owners, n_objects)
    raw = _core.object_reuse(json.dumps(cfg), os.fspath(trace), o["owner_vpns"], o["owner_ids"], o["span_first"],
                             o["span_last"], o["span_ids"], n_objects, every, path[-1], _wrap_progress(progress))
    level_names = [levels[i]["name"] for i in path]
    llc_lines = int(raw["level_lines"][path[-1]])
    obj = np.frombuffer(raw["dist_object"], dtype="<u8").astype(np.int64)
    dist = np.frombuffer(raw["dist_value"], dtype="<u8").astype(np.int64)
    cnt = np.frombuffer(raw["dist_count"], dtype="<u8").astype(np.int64)
    rows = []
    for o in np.unique(obj):
        sel = obj == o
        d, c = dist[sel], cnt[sel]
        total = int(c.sum())
        reuse = d > 0
        rows.append({
            "object": names[o],
            f"{level_names[-1]}_references": total,
            "cold_share": float(c[~reuse].sum()) / total,
            f"reuse_within_{level_names[-1]}": float(c[reuse & (d <= llc_lines)].sum()) / total,
            "median_reuse_lines": _weighted_median(d[reuse], c[reuse]),
        })
    reuse_frame = pd.DataFrame(rows, columns=["object", f"{level_names[-1]}_references", "cold_share",
                                              f"reuse_within_{level_names[-1]}", "median_reuse_lines"])
    series = _series(raw, names, path, level_names, every, int(raw["intervals"]))
    series.attrs.update(interval_records=every, records=int(raw["records"]), levels=level_names)
    reuse_frame.attrs.update(llc_lines=llc_lines, level=level_names[-1])
    return reuse_frame, series


def _series(raw: dict[str, Any], names: Sequence[str], path: Sequence[int], level_names: Sequence[str],
            every: int, intervals: int) -> Any:
    """Misses per object and interval at each data level from a Rust series tally, every object
    at every interval (0 where it had no reference, so a plot shows the gaps)."""
    import pandas as pd

    n_slots = int(raw["levels"]) + 1
    s_obj = np.frombuffer(raw["series_object"], dtype="<u8").astype(np.int64)
    s_int = np.frombuffer(raw["series_interval"], dtype="<u8").astype(np.int64)
    s_cnt = np.frombuffer(raw["series_counts"], dtype="<u8").reshape(-1, n_slots).astype(np.int64)
    cols: dict[str, Any] = {"object": [names[o] for o in s_obj], "interval": s_int}
    total = s_cnt.sum(axis=1)
    for k, _li in enumerate(path):
        cols[f"{level_names[k]}_misses"] = total - s_cnt[:, list(path[: k + 1])].sum(axis=1)
    series = pd.DataFrame(cols)
    grid = pd.MultiIndex.from_product([pd.unique(series["object"]), range(intervals)], names=["object", "interval"])
    series = series.set_index(["object", "interval"]).reindex(grid, fill_value=0).reset_index()
    series.insert(2, "first_record", series["interval"] * every)
    return series


def _owner_args(owners: PageOwners, other: int) -> dict[str, bytes]:
    return {"owner_vpns": owners.vpns.astype("<u8").tobytes(),
            "owner_ids": np.where(owners.ids < 0, other, owners.ids).astype("<u8").tobytes(),
            "span_first": owners.span_first.astype("<u8").tobytes(),
            "span_last": owners.span_last.astype("<u8").tobytes(),
            "span_ids": owners.span_ids.astype("<u8").tobytes()}


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The lower median of ``values`` each repeated ``weights`` times (NaN when empty)."""
    if len(values) == 0 or weights.sum() == 0:
        return float("nan")
    order = np.argsort(values, kind="stable")
    v, w = values[order], np.cumsum(weights[order])
    return float(v[np.searchsorted(w, (w[-1] + 1) // 2)])


def _page_llc(raw: dict[str, Any], path: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vpns, accesses reaching the last data level, misses there) of a page tally."""
    n_slots = int(raw["levels"]) + 1
    pages = np.frombuffer(raw["page"], dtype="<u8")
    counts = np.frombuffer(raw["page_counts"], dtype="<u8").reshape(-1, n_slots).astype(np.int64)
    total = counts.sum(axis=1)
    reach = total - counts[:, list(path[:-1])].sum(axis=1)
    return pages, reach, reach - counts[:, path[-1]]


def pollute_search(
    trace: os.PathLike | str,
    config: ConfigSource,
    ranges: Optional[Sequence[ObjectRange]] = None,
    *,
    binary: Optional[os.PathLike | str] = None,
    buffer_colors: Optional[int] = None,
    step_pages: int = 0,
    min_pages: int = 0,
    intervals: int = 50,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> tuple[Any, dict[str, Any]]:
    """The pages and objects ROCS's search would put in the pollute buffer, and what that does to
    every object's misses at the last data level ``L`` (see the module's text for the method).

    Returns (per object, search): the frame has ``object``, ``profiled_pages`` (pages reaching
    ``L``), ``pollute_pages`` (of those, chosen for the buffer), ``pollute`` (at least half of its
    profiled pages chosen), ``L_miss_rate_profile`` (in the shared run) and ``L_misses_shared``,
    ``L_misses_reserved``, ``L_misses_buffered``. ``search`` has ``colors``, ``buffer_colors``,
    ``stack_pages``, ``step_pages``, ``steps`` (``pages``, ``misses``), ``chosen``, ``skipped``
    (why no search ran, else None), ``pages`` (the chosen vpns, top of the stack first) and
    ``series_shared``, ``series_buffered``: misses per object over ``intervals`` intervals before
    and after (dicts of lists, as ``object_report``'s ``series``)."""
    import pandas as pd

    cfg = load_cache_config(config)
    ranges = list(default_ranges(trace, binary) if ranges is None else ranges)
    owners, names, n_objects = _owners_by_name(ranges, other_label(trace))
    path = _path(_levels(cfg), 0)
    llc = _levels(cfg)[path[-1]]["name"]
    cfg_json = json.dumps(cfg)
    wrap = _wrap_progress(progress)

    records = int(trace_info(trace)["records"])
    every = max(1, -(-records // max(1, intervals)))
    level_names = [_levels(cfg)[i]["name"] for i in path]
    own = _owner_args(owners, n_objects)

    def run(mode: str, pages: Sequence[int] = (), colors: int = 1) -> dict[str, Any]:
        return _core.placed_page_tallies(cfg_json, os.fspath(trace), np.asarray(pages, dtype="<u8").tobytes(),
                                         colors, mode, progress=wrap, objects=n_objects, interval_records=every,
                                         **own)

    shared = run("shared", colors=0)
    colors = int(shared["colors"])
    if buffer_colors is None:
        buffer_colors = max(1, colors // 16) if colors > 1 else 0
    elif not 1 <= buffer_colors < colors:
        raise ValueError(f"buffer_colors={buffer_colors}: {llc} has {colors} colors of 4 KiB pages (size / ways / "
                         f"4 KiB); the buffer takes 1 to {colors - 1} of them, leaving the others to the other pages")
    pages, reach, miss = _page_llc(shared, path)
    prof = reach > 0
    # ROCS 5.2: the miss-rate stack, highest miss rate first (ties: more accesses, then page).
    rate = np.where(prof, miss / np.where(prof, reach, 1), 0.0)
    order = sorted(np.flatnonzero(prof).tolist(), key=lambda i: (-rate[i], -reach[i], int(pages[i])))
    stack = [int(pages[i]) for i in order]
    step = step_pages if step_pages > 0 else max(1, -(-len(stack) // 16))
    limit = max(0, len(stack) - min_pages)
    search: dict[str, Any] = {"colors": colors, "buffer_colors": buffer_colors, "stack_pages": len(stack),
                              "step_pages": step, "min_pages": min_pages, "steps": [], "chosen": 0,
                              "skipped": None, "pages": [], "level": llc}
    # An LLC of one color has no room for a buffer beside the other pages (ROCS 4: a partition).
    reserved = run("reserved", colors=buffer_colors) if buffer_colors else shared
    best_raw = reserved
    if not buffer_colors:
        search["skipped"] = f"{llc} has one color (size / ways / 4 KiB): no room for a pollute buffer"
    elif len(stack) <= min_pages:
        search["skipped"] = f"the stack has {len(stack)} pages, no more than min_pages"
    elif (miss[prof] == reach[prof]).all():
        search["skipped"] = f"no reference hit in {llc}: nothing reused to protect"
    else:
        base = int(_page_llc(reserved, path)[2].sum())
        search["steps"].append({"pages": 0, "misses": base})
        best, best_n, n = base, 0, 0
        while n < limit:
            n = min(n + step, limit)
            raw = run("confined", stack[:n], buffer_colors)
            m = int(_page_llc(raw, path)[2].sum())
            search["steps"].append({"pages": n, "misses": m})
            if m < best:  # strictly better: ties keep the fewer pages (Algorithm 1's `>`)
                best, best_n, best_raw = m, n, raw
        search["chosen"] = best_n
        search["pages"] = stack[:best_n]

    def per_object(raw: dict[str, Any]) -> dict[str, int]:
        pg, _r, m = _page_llc(raw, path)
        out: dict[str, int] = {}
        for o, v in zip(owners.lookup(pg, n_objects).tolist(), m.tolist()):
            out[names[o]] = out.get(names[o], 0) + int(v)
        return out

    chosen = set(search["pages"])
    prof_pages: dict[str, int] = {}
    buf_pages: dict[str, int] = {}
    reach_by: dict[str, int] = {}
    miss_by: dict[str, int] = {}
    page_owner = owners.lookup(pages, n_objects)
    for i in np.flatnonzero(prof).tolist():
        p = int(pages[i])
        name = names[page_owner[i]]
        prof_pages[name] = prof_pages.get(name, 0) + 1
        buf_pages[name] = buf_pages.get(name, 0) + (p in chosen)
        reach_by[name] = reach_by.get(name, 0) + int(reach[i])
        miss_by[name] = miss_by.get(name, 0) + int(miss[i])
    before, control, after = per_object(shared), per_object(reserved), per_object(best_raw)
    objs = sorted(set(before) | set(prof_pages), key=lambda o: -before.get(o, 0))
    frame = pd.DataFrame({
        "object": objs,
        "profiled_pages": [prof_pages.get(o, 0) for o in objs],
        "pollute_pages": [buf_pages.get(o, 0) for o in objs],
        "pollute": [prof_pages.get(o, 0) > 0 and 2 * buf_pages.get(o, 0) >= prof_pages[o] for o in objs],
        f"{llc}_miss_rate_profile": [miss_by.get(o, 0) / reach_by[o] if reach_by.get(o) else 0.0 for o in objs],
        f"{llc}_misses_shared": [before.get(o, 0) for o in objs],
        f"{llc}_misses_reserved": [control.get(o, 0) for o in objs],
        f"{llc}_misses_buffered": [after.get(o, 0) for o in objs],
    })
    # Misses per object over time before (shared) and after (buffered), as dicts of lists.
    for key, raw in (("series_shared", shared), ("series_buffered", best_raw)):
        series = _series(raw, names, path, level_names, every, -(-records // every))
        search[key] = {**series.to_dict("list"), "interval_records": every}
    return frame, search


def object_report(
    trace: os.PathLike | str,
    config: ConfigSource,
    *,
    binary: Optional[os.PathLike | str] = None,
    ranges: Optional[Sequence[ObjectRange]] = None,
    search: bool = True,
    intervals: int = 50,
    buffer_colors: Optional[int] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> Any:
    """``annotate_objects``' frame with the reuse columns of ``object_reuse`` and (``search``)
    the pollute-buffer columns of ``pollute_search``, one row per object. ``frame.attrs`` adds
    ``series`` (misses per object over time, as a dict of lists: ``series_frame`` makes it a
    DataFrame) and ``pollute_search`` (the search's log)."""
    import pandas as pd

    base = annotate_objects(trace, config, binary=binary, progress=progress)
    if ranges is None:
        ranges = default_ranges(trace, binary)
    reuse, series = object_reuse(trace, config, ranges, intervals=intervals, progress=progress)
    frame = base.merge(reuse, on="object", how="left")
    if "kind" not in frame.columns:  # what each range is (global, mapping, heap site, ...)
        kinds = {name: kind for _lo, _hi, name, kind in ranges}
        frame.insert(1, "kind", [kinds.get(o, "other") for o in frame["object"]])
    attrs = dict(base.attrs)
    if search:
        pollute, log = pollute_search(trace, config, ranges, buffer_colors=buffer_colors, intervals=intervals,
                                      progress=progress)
        frame = frame.merge(pollute, on="object", how="left")
        for c in ("profiled_pages", "pollute_pages") + tuple(c for c in pollute.columns if "_misses_" in c):
            frame[c] = frame[c].fillna(0).astype(np.int64)
        frame["pollute"] = frame["pollute"].astype("boolean").fillna(False).astype(bool)
        attrs["pollute_search"] = log
    attrs["series"] = {**series.to_dict("list"), "interval_records": series.attrs["interval_records"]}
    attrs["reuse_level_lines"] = reuse.attrs["llc_lines"]
    frame.attrs.update(attrs)
    return frame


def series_frame(report: Any, which: str = "trace") -> Any:
    """The misses per object over time of an ``object_report`` frame, as a DataFrame: ``which``
    ``"trace"`` (the trace as annotate runs it), or, after the search, ``"shared"`` and
    ``"buffered"`` (the placements before and after the pollute buffer)."""
    import pandas as pd

    if which == "trace":
        s = dict(report.attrs["series"])
    elif which in ("shared", "buffered") and "pollute_search" in report.attrs:
        s = dict(report.attrs["pollute_search"][f"series_{which}"])
    else:
        raise ValueError(f"which={which!r}: expected 'trace', or 'shared' or 'buffered' after the search")
    every = s.pop("interval_records")
    out = pd.DataFrame(s)
    out.attrs["interval_records"] = every
    return out


def plot_misses_over_time(report: Any, path: os.PathLike | str, *, top: int = 8) -> None:
    """A PNG (or the path's format) of each object's misses per interval at every data level, the
    ``top`` objects with the most misses at the last level, one panel per level; after a search
    that chose pages, one more panel: the last level's misses predicted with the pollute buffer
    (same scale, same colors)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._output import save_figure

    series = series_frame(report)
    levels = [c[: -len("_misses")] for c in series.columns if c.endswith("_misses")]
    last = f"{levels[-1]}_misses"
    order = series.groupby("object")[last].sum().sort_values(ascending=False).index[:top]
    log = report.attrs.get("pollute_search")
    panels = [(lv, series, f"{lv} misses") for lv in levels]
    if log and log.get("chosen"):
        panels.append((levels[-1], series_frame(report, "buffered"),
                       f"{levels[-1]} misses, pollute\nbuffer (predicted)"))
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.4 * len(panels) + 0.8), sharex=True, squeeze=False)
    every = series.attrs["interval_records"]
    for ax, (lv, data, label) in zip(axes[:, 0], panels):
        for k, obj in enumerate(order):
            s = data[data["object"] == obj].sort_values("interval")
            ax.plot(s["first_record"] / 1e6, s[f"{lv}_misses"], marker=".", color=f"C{k % 10}", label=str(obj))
        ax.set_ylabel(f"{label}\nper {every:,} records", fontsize=9)
        ax.grid(True, alpha=0.3)
    if len(panels) > len(levels):  # the prediction on the measured panel's scale
        axes[-1, 0].set_ylim(axes[len(levels) - 1, 0].get_ylim())
    # Outside the axes: the lines of a phase-changing program fill the whole panel.
    axes[0, 0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("records (millions)")
    binary = report.attrs.get("binary")
    axes[0, 0].set_title(f"misses per data object over time{f' ({Path(binary).name})' if binary else ''}")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def format_report(frame: Any, top: int = 20) -> str:
    """The text report of an ``object_report`` frame: accesses and misses, reuse, the pollute
    buffer's candidates and their predicted effect."""
    levels = frame.attrs.get("levels", [])
    last = levels[-1] if levels else "LL"
    rate = {c: (lambda v: f"{v:.4f}") for c in frame.columns if c.endswith(("_miss_rate", "_share", "_profile"))
            or c.startswith("reuse_within_")}
    shown = frame.head(top)
    base = ["object", "kind", "start", "size", "reads", "writes"] + [
        c for lv in levels for c in (f"{lv}_accesses", f"{lv}_misses", f"{lv}_miss_rate")]
    out = [shown[[c for c in base if c in shown.columns]].to_string(
        index=False, formatters={"start": hex, **rate})]
    reuse = ["object", f"{last}_references", "cold_share", f"reuse_within_{last}", "median_reuse_lines"]
    lines = frame.attrs.get("reuse_level_lines")
    out.append(f"\nreuse of the references reaching {last} (exact LRU stack distances in lines; "
               f"{last} holds {lines:,} lines):")
    out.append(shown[[c for c in reuse if c in shown.columns]].to_string(
        index=False, formatters={**rate, "median_reuse_lines": lambda v: "-" if v != v else f"{int(v):,}"}))
    log = frame.attrs.get("pollute_search")
    if log is not None:
        cols = ["object", "profiled_pages", "pollute_pages", "pollute", f"{last}_miss_rate_profile",
                f"{last}_misses_shared", f"{last}_misses_reserved", f"{last}_misses_buffered"]
        out.append(f"\nthe ROCS search (Algorithm 1 on {last}'s miss-rate stack; a pollute buffer of "
                   f"{log['buffer_colors']} of {log['colors']} colors): {log['stack_pages']:,} pages in the stack, "
                   f"step {log['step_pages']:,}, "
                   + (f"not searched: {log['skipped']}" if log["skipped"] else
                      f"{log['chosen']:,} pages chosen ({last} misses {log['steps'][0]['misses']:,} with the buffer "
                      f"reserved and empty -> {min(s['misses'] for s in log['steps']):,})"))
        cand = frame.loc[frame["pollute"], "object"].tolist()
        out.append("pollute buffer candidates: " + (", ".join(map(str, cand)) if cand else "none"))
        out.append(f"predicted {last} misses per object: shared = every page any color (before); reserved = the "
                   "buffer's colors left empty (the control); buffered = the chosen pages in the buffer (after)")
        out.append(shown[[c for c in cols if c in shown.columns]].to_string(index=False, formatters=rate))
    return "\n".join(out)


__all__ = ["OTHER", "UNMAPPED", "other_label", "ObjectRange", "AnnotateError", "default_ranges", "format_report", "object_report", "object_reuse",
           "PageOwners", "page_owners", "plot_misses_over_time", "pollute_search", "series_frame", "symbol_ranges"]
