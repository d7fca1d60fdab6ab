"""``cachecolor annotate``: which code misses, per function and per source line.

A trace captured by this cachecolor with instruction fetches (the default) carries the PC of
every reference (native version 3, docs/trace-format.md). ``annotate`` runs it through the
config's hierarchy once (``_core.attribute_trace``: for each (PC, class) and each data page, how
many references each level, or memory, served), turns that into accesses and misses at every
level along each reference's path, and resolves PCs to function, file and line.

What a reference misses: every level of its path above the one that served it. The path of a
class (data read, data write, ifetch) is the config's levels that serve it, in order (``serves``:
``unified``, ``data``, ``instruction``), so a split L1I/L1D with a unified last level is
counted as cachegrind counts it: ``D1`` misses are the data references L1D did not serve,
``LL`` data misses those no level served.

Resolving PCs: ``_core.symbolize`` (the ``addr2line`` crate, gimli's DWARF reader, in process)
reads each file's DWARF line tables once for all its addresses, as binutils' ``addr2line -f -C``
would: the function (demangled; the innermost where inlined) and source line, from debug
information in the file or installed apart (found by build ID or debug link, as GDB finds it);
a file without debug information still gets function names from its symbol table. With the
memory map a capture records (``memory_map`` in the trace's metadata, docs/trace-format.md),
every PC is placed by its mapping: in a file (the program, PIE or not, a shared library, the
loader) it becomes the file's link-time address (``pc - mapping start + file offset``, then the
``PT_LOAD`` segment's ``p_vaddr``) and that file is read; a PC no symbol contains gets the
nearest text symbol below it, else the mapping; anonymous code (a JIT) is attributed to its
mapping. Without a map (older traces), only the program's own code can be placed, and only
when it is linked at a fixed address (not PIE): every other PC is attributed to
``(outside PROGRAM: no memory map)``, never dropped.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _core
from .config import ConfigSource, load_cache_config
from .simulation import Progress, _wrap_progress

#: Reference classes of the tallies (``_core.attribute_trace``), as cachegrind splits them.
CLASSES = ("read", "write", "ifetch")
#: Access columns, per class (cg_annotate's Dr, Dw, Ir).
ACCESS_COLUMNS = ("reads", "writes", "ifetches")
OUTSIDE = "(outside {}: no memory map)"


class AnnotateError(ValueError):
    """The trace cannot be annotated (no PCs); the message says what is needed."""


def _levels(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    return list(cfg["hierarchy"]["levels"])


def _path(levels: Sequence[dict[str, Any]], cls: int) -> list[int]:
    """Indices of the levels a reference of class ``cls`` goes through, in order."""
    want = "instruction" if cls == 2 else "data"
    return [i for i, lv in enumerate(levels) if lv.get("serves", "unified") in ("unified", want)]


def _trace_header(trace: os.PathLike | str) -> dict[str, Any]:
    """The header of a native trace (metadata, version, whether it has PCs), reading no records."""
    try:
        raw = _core.native_header(os.fspath(trace))
    except _core.TraceError as e:
        raise AnnotateError(
            f"{trace}: {e}; annotate needs a native trace with PCs (cachecolor trace capture, "
            "instruction fetches on)"
        ) from e
    meta: Any = raw.get("metadata") or ""
    try:
        meta = json.loads(meta)
    except ValueError:
        pass
    return {"metadata": meta if isinstance(meta, dict) else {}, "version": raw["version"], "pcs": raw["pcs"]}


def _elf_text(binary: Path) -> tuple[Optional[str], list[tuple[int, int]]]:
    """(``"exec"``, ``"dyn"`` or None, executable load segments as ``[start, end)``) of an
    ELF file, read from its header: enough to know whether its link-time addresses are its
    run-time ones (``exec``) and which PCs are its code."""
    try:
        with open(binary, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return None, []
            end = "<" if head[5] == 1 else ">"
            e_type, = struct.unpack_from(end + "H", head, 16)
            e_phoff, = struct.unpack_from(end + "Q", head, 32)
            e_phentsize, e_phnum = struct.unpack_from(end + "HH", head, 54)
            f.seek(e_phoff)
            table = f.read(e_phentsize * e_phnum)
    except OSError:
        return None, []
    segs = []
    for i in range(e_phnum):
        p_type, p_flags, _off, p_vaddr, _pa, _fs, p_memsz, _al = struct.unpack_from(
            end + "IIQQQQQQ", table, i * e_phentsize)
        if p_type == 1 and p_flags & 1:  # PT_LOAD, PF_X
            segs.append((p_vaddr, p_vaddr + p_memsz))
    return {2: "exec", 3: "dyn"}.get(e_type), segs


def _elf_loads(path: os.PathLike | str) -> list[tuple[int, int, int, int, int]]:
    """``(p_offset, p_vaddr, p_filesz, p_memsz, p_flags)`` of each ``PT_LOAD`` segment of a
    64-bit ELF file (empty if it is not one or cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
                return []
            end = "<" if head[5] == 1 else ">"
            e_phoff, = struct.unpack_from(end + "Q", head, 32)
            e_phentsize, e_phnum = struct.unpack_from(end + "HH", head, 54)
            f.seek(e_phoff)
            table = f.read(e_phentsize * e_phnum)
    except OSError:
        return []
    out = []
    for i in range(e_phnum):
        if (i + 1) * e_phentsize > len(table):
            break
        p_type, p_flags, p_off, p_vaddr, _pa, p_filesz, p_memsz, _al = struct.unpack_from(
            end + "IIQQQQQQ", table, i * e_phentsize)
        if p_type == 1:
            out.append((p_off, p_vaddr, p_filesz, p_memsz, p_flags))
    return out


def memory_map(trace: os.PathLike | str) -> Optional[dict[str, Any]]:
    """The memory map a capture recorded in ``trace``'s metadata (``memory_map``, version 1,
    docs/trace-format.md), or None for a trace without one (older captures, other tools)."""
    return _map_of(_trace_header(trace))


def heap_objects(trace: os.PathLike | str) -> Optional[dict[str, Any]]:
    """The heap objects by allocation site a capture recorded in ``trace``'s metadata
    (``heap_objects``, version 1, docs/trace-format.md): ``sites``, each with its ``caller``
    (return address into the code that called the allocator), ``blocks``, ``bytes`` and
    ``ranges`` (``[start, end, from, to]``), and ``note`` saying why there are none. None for a
    trace without it (older captures, lackey, ``--no-ifetch``)."""
    return _heap_of(_trace_header(trace))


def _heap_of(head: dict[str, Any]) -> Optional[dict[str, Any]]:
    h = head["metadata"].get("heap_objects")
    if isinstance(h, dict) and h.get("version") == 1 and isinstance(h.get("sites"), list):
        return h
    return None


def _heap_site_ranges(head: dict[str, Any], mmap: dict[str, Any]) -> list[tuple[int, int, str, str]]:
    """The heap blocks of ``head``'s ``heap_objects`` as ``(start, end, name, "heap site")``,
    each named by its allocation site: the call instruction just before the return address the
    shim reported, resolved through the memory map like any PC (``[heap site FUNCTION
    FILE:LINE]``). Blocks are listed over the whole trace (their live spans are in the
    metadata; the tallies are not timed)."""
    heap = _heap_of(head)
    if heap is None or not heap["sites"]:
        return []
    callers = np.array([max(int(s["caller"]), 1) - 1 for s in heap["sites"]], dtype=np.uint64)
    fn, fl, ln = _resolve_by_map(mmap, callers)
    out = []
    for s, f_, file_, line_ in zip(heap["sites"], fn, fl, ln):
        where = f" {os.path.basename(file_)}:{line_}" if line_ > 0 else ""
        name = f"[heap site {f_}{where}]"
        for r in s["ranges"]:
            if int(r[1]) > int(r[0]):
                out.append((int(r[0]), int(r[1]), name, "heap site"))
    return out


def _map_of(head: dict[str, Any]) -> Optional[dict[str, Any]]:
    m = head["metadata"].get("memory_map")
    if isinstance(m, dict) and m.get("version") == 1 and isinstance(m.get("mappings"), list):
        return m
    return None


def _mapping_name(m: dict[str, Any]) -> str:
    """A short name for a mapping: the file's name with the segment, or what it holds."""
    kind = m.get("kind", "anon")
    if kind == "file":
        return os.path.basename(m["path"])
    if kind == "heap":
        return "[heap]"
    if kind == "stack":
        return "[stack]"
    if kind == "thread stack":
        return f"[thread stack {m['start']:#x}]"
    if kind == "special":
        return m["path"]
    return f"[anon {m['start']:#x}-{m['end']:#x}]"


def _link_address(m: dict[str, Any], loads: list[tuple[int, int, int, int, int]], addr: int) -> Optional[int]:
    """The link-time address in ``m``'s file of the run-time address ``addr`` (None if no
    segment holds it): its file offset, ``addr - start + offset``, in the ``PT_LOAD`` that maps it."""
    off = addr - m["start"] + m["offset"]
    for p_off, p_vaddr, p_filesz, p_memsz, _fl in loads:
        if p_off <= off < p_off + max(p_filesz, 1):
            return off - p_off + p_vaddr
    return None


def _code_rank(m: dict[str, Any], elf: dict[str, bool]) -> int:
    """How likely a mapping holds code: an ELF file's (2), anonymous memory (1: a JIT), another
    file's (0: data mapped from a file)."""
    if m.get("kind") == "file":
        path = m["path"]
        if path not in elf:
            elf[path] = bool(_elf_loads(path))
        return 2 if elf[path] else 0
    return 1


def _covering(maps: Sequence[dict[str, Any]], addrs: np.ndarray) -> list[Optional[dict[str, Any]]]:
    """For each code address, the mapping holding it. The tallies are over the whole trace, so
    when several mappings held the address over time, the likeliest to hold code wins
    (``_code_rank``)."""
    order = sorted(maps, key=lambda m: m["start"])
    starts = np.array([m["start"] for m in order], dtype=np.uint64)
    # the furthest end of the mappings starting at or below each one
    reach = list(itertools.accumulate((m["end"] for m in order), max))
    addrs = np.asarray(addrs, dtype=np.uint64)
    below = (np.searchsorted(starts, addrs, side="right") - 1).tolist()
    elf: dict[str, bool] = {}
    res: list[Optional[dict[str, Any]]] = []
    for a, i in zip(addrs.tolist(), below):
        best, best_rank = None, -1
        # every mapping starting at or below `a` whose end may still reach it
        while i >= 0 and reach[i] > a:
            m = order[i]
            if a < m["end"]:
                r = _code_rank(m, elf)
                if r > best_rank:
                    best, best_rank = m, r
            i -= 1
        res.append(best)
    return res


def _resolve_by_map(mmap: dict[str, Any], pcs: np.ndarray) -> tuple[list[str], list[str], list[int]]:
    """(function, file, line) of each PC through the trace's memory map (module docstring)."""
    maps = mmap["mappings"]
    owner = _covering(maps, pcs)
    fn: list[str] = ["(unmapped code)"] * len(pcs)
    fl: list[str] = ["??"] * len(pcs)
    ln: list[int] = [0] * len(pcs)
    by_file: dict[str, list[tuple[int, int]]] = {}
    loads_of: dict[str, list[tuple[int, int, int, int, int]]] = {}
    pc_list = np.asarray(pcs, dtype=np.uint64).tolist()
    for j, m in enumerate(owner):
        if m is None:
            continue
        if m.get("kind") != "file":
            fn[j] = f"(code in {_mapping_name(m)})"
            continue
        path = m["path"]
        if path not in loads_of:
            loads_of[path] = _elf_loads(path)
        link = _link_address(m, loads_of[path], pc_list[j]) if loads_of[path] else None
        if link is None:
            fn[j] = f"(code in {os.path.basename(path)})"
            fl[j] = path
            continue
        by_file.setdefault(path, []).append((j, link))
    # One file at a time: each is parsed once for all its addresses (`_core.symbolize` leaves
    # the GIL, so the files are read side by side).
    from concurrent.futures import ThreadPoolExecutor

    links_of = {path: [a for _, a in items] for path, items in by_file.items()}
    with ThreadPoolExecutor(max_workers=max(1, min(len(by_file), os.cpu_count() or 1))) as pool:
        resolved = dict(zip(links_of, pool.map(lambda kv: _core.symbolize(kv[0], kv[1]), links_of.items())))
    for path, items in by_file.items():
        name = os.path.basename(path)
        for (j, _), (f_, file_, line_, near) in zip(items, resolved[path]):
            if f_ is None:
                file_ = path if file_ is None else file_
            fn[j] = _function_name(f_, near, name, f"(code in {name})")
            fl[j], ln[j] = file_ or "??", line_
    return fn, fl, ln


def _function_name(function: Optional[str], nearest: Optional[str], file_name: str, unknown: str) -> str:
    """A PC's function as ``_core.symbolize`` gives it; where it has none, the nearest text
    symbol below it, marked as such, else ``unknown``."""
    if function is not None:
        return function
    return f"{nearest} (nearest symbol, {file_name})" if nearest else unknown


def _symbolize(binary: Path, pcs: np.ndarray) -> list[tuple[str, str, int]]:
    """(function, file, line) of each PC in ``binary`` (link-time addresses; ``??`` and 0 where
    unknown), from its debug information or symbols (``_core.symbolize``); a PC no symbol
    contains is named by the nearest text symbol below it, as ``_resolve_by_map`` names it."""
    if len(pcs) == 0:
        return []
    name = os.path.basename(binary)
    return [(_function_name(f, near, name, "??"), file or "??", line)
            for f, file, line, near in _core.symbolize(binary, [int(p) for p in pcs])]


class Table:
    """Named columns of one length (NumPy arrays) with ``attrs``: ``annotate``'s rows before
    they become a DataFrame. The command's text report works on it directly, so a plain
    ``cachecolor annotate`` never imports pandas (importing it costs more CPU than simulating a
    short trace: docs/PERFORMANCE.md, "annotate against cachegrind")."""

    def __init__(self, cols: dict[str, np.ndarray], attrs: Optional[dict[str, Any]] = None):
        self.cols = cols
        self.attrs: dict[str, Any] = dict(attrs or {})

    @property
    def columns(self) -> list[str]:
        return list(self.cols)

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def take(self, rows: Any) -> "Table":
        """The rows ``rows`` (indices or a mask), in that order."""
        return Table({k: v[rows] for k, v in self.cols.items()}, self.attrs)

    def group_sum(self, keys: Sequence[str], values: Optional[Sequence[str]] = None,
                  first: Sequence[str] = ()) -> "Table":
        """Rows with equal ``keys`` in one row: ``values`` (default: every other column but
        ``first``) summed, ``first`` columns from the group's first row; groups in order of
        first appearance, columns keys, ``first``, values (pandas' ``groupby(keys,
        sort=False)`` summing, ``"first"`` for ``first``)."""
        values = [c for c in self.cols if c not in keys and c not in first] if values is None else list(values)
        n = len(self)
        ids: dict[Any, int] = {}
        tuples = zip(*(self.cols[k].tolist() for k in keys)) if len(keys) > 1 else self.cols[keys[0]].tolist()
        group = np.fromiter((ids.setdefault(k, len(ids)) for k in tuples), dtype=np.int64, count=n)
        head = np.full(len(ids), n, dtype=np.int64)
        np.minimum.at(head, group, np.arange(n, dtype=np.int64))
        out = {k: self.cols[k][head] for k in [*keys, *first]}
        for c in values:
            total = np.zeros(len(ids), dtype=np.int64)
            np.add.at(total, group, self.cols[c])
            out[c] = total
        return Table(out, self.attrs)

    def sorted_by(self, by: Sequence[str], magnitude: bool = False) -> "Table":
        """Rows sorted by the integer columns ``by``, most first (``magnitude``: by absolute
        value), ties in their order (pandas' stable ``sort_values(ascending=False)``)."""
        keys = [np.abs(self.cols[c]) if magnitude else self.cols[c] for c in by]
        # each key as its rank among its distinct values (any dtype: uint64 PCs, names), negated
        ranks = [-np.unique(k, return_inverse=True)[1].reshape(-1) for k in keys]
        return self.take(np.lexsort(ranks[::-1]) if ranks else np.arange(len(self)))

    def to_frame(self) -> Any:
        import pandas as pd

        frame = pd.DataFrame(self.cols)
        frame.attrs.update(self.attrs)
        return frame

    @classmethod
    def from_frame(cls, frame: Any) -> "Table":
        return cls({c: frame[c].to_numpy() for c in frame.columns}, frame.attrs)


def annotate(
    trace: os.PathLike | str,
    config: ConfigSource,
    *,
    binary: Optional[os.PathLike | str] = None,
    by: str = "line",
    sort: Optional[Sequence[str]] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> Any:
    """Accesses and misses at every level of ``config``'s hierarchy, per source line
    (``by="line"``), function (``"function"``) or instruction (``"pc"``) of the native trace
    ``trace`` (which must carry PCs), as a pandas DataFrame sorted by misses at the first
    level, most first.

    Columns: ``function``, ``file``, ``line`` (as ``by`` keeps them; ``pc`` for ``by="pc"``),
    ``reads``, ``writes``, ``ifetches``, then per level ``L``: ``L_misses`` (all classes whose
    path has ``L``), ``L_data_misses``, ``L_ifetch_misses``. ``sort`` names the columns to sort
    by, most first, as cg_annotate's ``--sort`` does (default: the misses at each level that
    serves data, in hierarchy order, then at the others). ``binary`` is the program whose
    DWARF resolves PCs (default: the ``program`` the trace's metadata names; with the trace's
    memory map, every mapped file resolves its own PCs and ``binary`` stands in for the
    program's). ``frame.attrs`` has ``levels``, ``records``, ``binary``, ``memory_map`` (whether
    the trace has one) and ``unresolved`` (references without a source line with a map; outside
    the binary without one).
    """
    if by == "object":
        from .objects import object_report  # reuse and the pollute buffer (objects.py)

        return object_report(trace, config, binary=binary, progress=progress)
    return annotate_table(trace, config, binary=binary, by=by, sort=sort, progress=progress).to_frame()


def annotate_table(
    trace: os.PathLike | str,
    config: ConfigSource,
    *,
    binary: Optional[os.PathLike | str] = None,
    by: str = "line",
    sort: Optional[Sequence[str]] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> Table:
    """``annotate`` (``by`` ``"line"``, ``"function"`` or ``"pc"``) as a ``Table``."""
    if by not in ("line", "function", "pc"):
        raise ValueError(f"by={by!r}: expected 'line', 'function', 'pc' or 'object'")
    head = _trace_header(trace)
    if not head["pcs"]:
        raise AnnotateError(
            f"{trace} has no PCs (native trace version {head['version']}): annotate needs the PC of "
            "every reference, which a capture by this cachecolor with instruction fetches records "
            "(native version 3): capture the program again with `cachecolor trace capture -o OUT -- "
            "PROGRAM ARGS` (without --no-ifetch)"
        )
    cfg = load_cache_config(config)
    levels = _levels(cfg)
    names = [lv["name"] for lv in levels]
    raw = _core.attribute_trace(json.dumps(cfg), os.fspath(trace), _wrap_progress(progress))
    n_slots = len(levels) + 1
    pcs = np.frombuffer(raw["pc"], dtype="<u8")
    cls = np.frombuffer(raw["pc_class"], dtype=np.uint8)
    counts = np.frombuffer(raw["pc_counts"], dtype="<u8").reshape(-1, n_slots).astype(np.int64)

    cols: dict[str, Any] = {"pc": pcs}
    total = counts.sum(axis=1)
    for c, name in enumerate(ACCESS_COLUMNS):
        cols[name] = np.where(cls == c, total, 0)
    for li, lname in enumerate(names):
        data = np.zeros(len(pcs), dtype=np.int64)
        inst = np.zeros(len(pcs), dtype=np.int64)
        for c in range(3):
            path = _path(levels, c)
            if li not in path:
                continue
            served_by_or_above = counts[:, path[: path.index(li) + 1]].sum(axis=1)
            missed = np.where(cls == c, total - served_by_or_above, 0)
            if c == 2:
                inst += missed
            else:
                data += missed
        cols[f"{lname}_misses"] = data + inst
        cols[f"{lname}_data_misses"] = data
        cols[f"{lname}_ifetch_misses"] = inst
    table = Table(cols).group_sum(["pc"])
    pc_col = table["pc"]

    program = binary or head["metadata"].get("program")
    binpath = Path(program) if program else None
    mmap = _map_of(head)
    if mmap is not None:
        fn_, fl_, ln_ = _resolve_by_map(_with_binary(mmap, binary, head), pc_col)
        fn = np.array(fn_, dtype=object)
        fl = np.array(fl_, dtype=object)
        ln = np.array(ln_, dtype=np.int64)
        inside = ln > 0
    else:
        kind, segs = _elf_text(binpath) if binpath else (None, [])
        label = OUTSIDE.format(binpath.name if binpath else "the program")
        inside = np.zeros(len(table), dtype=bool)
        if kind == "exec":
            for lo, hi in segs:
                inside |= (pc_col >= lo) & (pc_col < hi)
        where = _symbolize(binpath, pc_col[inside]) if binpath is not None else []
        fn = np.full(len(table), label, dtype=object)
        fl = np.full(len(table), "??", dtype=object)
        ln = np.zeros(len(table), dtype=np.int64)
        for j, (f_, file_, line_) in zip(np.flatnonzero(inside), where):
            fn[j], fl[j], ln[j] = f_, file_, line_
    value_cols = [c for c in table.columns if c != "pc"]
    table = Table({"pc": pc_col, "function": fn, "file": fl, "line": ln, **{c: table[c] for c in value_cols}})
    unresolved = int(sum(table[c][~inside].sum() for c in ACCESS_COLUMNS))

    if by == "line":
        table = table.group_sum(["function", "file", "line"], value_cols)
    elif by == "function":
        # a function's file: the one holding most of its lines is enough for a listing
        table = table.group_sum(["function", "file"], value_cols).group_sum(["function"], value_cols, first=["file"])
    if sort is None:
        data_levels = _path(levels, 0)
        sort = [f"{names[i]}_misses" for i in data_levels] + [
            f"{n}_misses" for i, n in enumerate(names) if i not in data_levels]
    unknown = [c for c in sort if c not in table.columns]
    if unknown:
        raise ValueError(f"sort={list(sort)!r}: no column {unknown[0]!r}; the columns are "
                         f"{', '.join(c for c in table.columns if c not in ('function', 'file', 'line', 'pc'))}")
    table = table.sorted_by(list(sort))
    table.attrs.update(levels=names, sort=list(sort), records=int(raw["records"]),
                       binary=os.fspath(binpath) if binpath else None,
                       unresolved=unresolved, unknown_pc=int(raw["unknown_pc"]),
                       memory_map=mmap is not None)
    return table


def _with_binary(mmap: dict[str, Any], binary: Optional[os.PathLike | str], head: dict[str, Any]) -> dict[str, Any]:
    """The map with the program's mappings read from ``binary`` instead (``--binary``: e.g. the
    unstripped build of the stripped program that ran)."""
    program = head["metadata"].get("program")
    if binary is None or not program:
        return mmap
    real = os.path.realpath(program)
    maps = [dict(m, path=os.fspath(binary)) if m.get("path") in (real, program) else m
            for m in mmap["mappings"]]
    return dict(mmap, mappings=maps)


def _data_symbols(binary: Path) -> list[tuple[int, int, str]]:
    """``(start, end, name)`` of the global and static data objects of ``binary`` (``nm -S``:
    initialised, zeroed and read-only data with a size), by address."""
    tool = shutil.which("nm")
    if tool is None:
        return []
    out = subprocess.run([tool, "-S", "-C", "--defined-only", os.fspath(binary)], capture_output=True,
                         text=True, check=False).stdout
    syms = []
    for line in out.splitlines():
        f = line.split(maxsplit=3)
        if len(f) == 4 and f[2] in "bBdDrR" and len(f[2]) == 1:
            start, size = int(f[0], 16), int(f[1], 16)
            if size > 0:
                syms.append((start, start + size, f[3]))
    return sorted(syms)


def _global_symbols(path: str) -> list[tuple[int, int, str]]:
    """``(start, end, name)`` at link-time addresses of ``path``'s data objects: ``nm -S`` on
    its symbol table, else on its dynamic symbols (a stripped library still exports some)."""
    syms = _data_symbols(Path(path))
    if syms:
        return syms
    tool = shutil.which("nm")
    if tool is None:
        return []
    out = subprocess.run([tool, "-D", "-S", "-C", "--defined-only", path], capture_output=True,
                         text=True, check=False).stdout
    res = []
    for line in out.splitlines():
        f = line.split(maxsplit=3)
        if len(f) == 4 and f[2] in "bBdDrRvuV" and len(f[2]) == 1:
            start, size = int(f[0], 16), int(f[1], 16)
            if size > 0:
                res.append((start, start + size, f[3].split("@")[0]))
    return sorted(res)


def object_ranges(trace: os.PathLike | str, binary: Optional[os.PathLike | str] = None
                  ) -> list[tuple[int, int, str, str]]:
    """The data objects of ``trace`` as ``(start, end, name, kind)`` run-time address ranges,
    ``end`` exclusive, sorted by start; ranges may nest (a global inside its file's mapping):
    the narrower one is the object.

    With the capture's memory map (docs/trace-format.md): every mapping (kind ``file`` named by
    its file, ``heap``, ``stack``, ``thread stack``, ``anon`` named by its addresses) and the
    global and static data objects of every mapped ELF file (``symbol``: the program's by their
    own names, a library's as ``LIB:NAME``), placed at their load address. A region that several
    mappings held over time is listed once per distinct mapping. Without a map (older traces):
    the global and static data objects of ``binary`` (default: the trace's ``program``) when it
    is linked at a fixed address, else nothing. With the capture's ``heap_objects``: every heap
    block (``heap site``), named by its allocation site (``_heap_site_ranges``); the bytes no
    block covers (allocator headers, untracked allocations) stay with their mapping."""
    head = _trace_header(trace)
    mmap = _map_of(head)
    program = binary or head["metadata"].get("program")
    if mmap is None:
        binpath = Path(program) if program else None
        kind, _ = _elf_text(binpath) if binpath else (None, [])
        syms = _data_symbols(binpath) if binpath is not None and kind == "exec" else []
        return [(lo, hi, name, "symbol") for lo, hi, name in syms]
    mmap = _with_binary(mmap, binary, head)
    prog_paths = {os.fspath(binary)} if binary else set()
    if head["metadata"].get("program"):
        prog_paths |= {head["metadata"]["program"], os.path.realpath(head["metadata"]["program"])}
    out: set[tuple[int, int, str, str]] = set()
    files: dict[str, list[dict[str, Any]]] = {}
    for m in mmap["mappings"]:
        out.add((int(m["start"]), int(m["end"]), _mapping_name(m), m.get("kind", "anon")))
        if m.get("kind") == "file":
            files.setdefault(m["path"], []).append(m)
    for path, maps in files.items():
        loads = _elf_loads(path)
        if not loads:
            continue
        syms = _global_symbols(path)
        lib = None if path in prog_paths else os.path.basename(path)
        # each time the file is loaded, its load bias: the mapping of file offset 0 holds the
        # segment that starts there (other segments may share a file page with their
        # neighbour, so only offset 0 is unambiguous)
        first = [p_vaddr for p_off, p_vaddr, _fs, _ms, _fl in loads if p_off == 0]
        biases = {m["start"] - (first[0] & ~0xFFF) for m in maps if first and m["offset"] == 0}
        for bias in biases:
            for lo, hi, name in syms:
                out.add((lo + bias, hi + bias, name if lib is None else f"{lib}:{name}", "symbol"))
    out.update(_heap_site_ranges(head, mmap))
    return sorted(out)


def name_range(ranges: Sequence[tuple[int, int, str, str]], lo: int, hi: int, top: int = 2) -> str:
    """The objects of ``ranges`` (``object_ranges``) that make up most of the address range
    ``[lo, hi)``, most first, as ``"name, name (+N more)"``: what ``cachecolor profile`` and the
    ``rocs`` report print instead of bare addresses. The narrowest ranges are the objects (a
    symbol within its file's mapping), so bytes a narrower range covers are not counted again
    for the wider one holding it. Empty when none overlaps."""
    overlap: dict[str, int] = {}
    claimed: list[tuple[int, int]] = []
    for a, b, name, _kind in sorted(ranges, key=lambda r: r[1] - r[0]):
        a, b = max(a, lo), min(b, hi)
        if a >= b:
            continue
        own = b - a - sum(max(0, min(b, cb) - max(a, ca)) for ca, cb in claimed)
        if own > 0:
            overlap[name] = overlap.get(name, 0) + own
            claimed.append((a, b))
    names = sorted(overlap, key=lambda n: -overlap[n])
    more = f" (+{len(names) - top} more)" if len(names) > top else ""
    return ", ".join(names[:top]) + more


def annotate_objects(
    trace: os.PathLike | str,
    config: ConfigSource,
    *,
    binary: Optional[os.PathLike | str] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> Any:
    """Data accesses and misses per data object of ``trace`` (``annotate(..., by="object")``):
    the objects of ``object_ranges`` (with the capture's memory map: every mapping, heap and
    stacks, and the global and static data of the program and each library; without it, the
    program's globals when it is linked at a fixed address), everything else in one row
    (``(unmapped)``, or ``(heap, stack or other: no memory map)`` without a map). Tallied per
    4 KiB page and each page given to the object that covers most of it (``objects.page_owners``,
    the rule of every view), so an object's first and last pages may be shared with its neighbours.
    Columns: ``object``, ``start``, ``size``, ``reads``, ``writes``, and per level ``L`` that
    data goes through: ``L_accesses`` (reaching ``L``), ``L_misses``, ``L_miss_rate``; sorted
    like ``annotate``'s default. ``frame.attrs["kinds"]`` maps each object to its kind."""
    import pandas as pd

    head = _trace_header(trace)
    if not head["pcs"]:
        raise AnnotateError(f"{trace} has no PCs (native trace version {head['version']}): capture it "
                            "again with `cachecolor trace capture -o OUT -- PROGRAM ARGS`")
    cfg = load_cache_config(config)
    levels = _levels(cfg)
    names = [lv["name"] for lv in levels]
    raw = _core.attribute_trace(json.dumps(cfg), os.fspath(trace), _wrap_progress(progress))
    n_slots = len(levels) + 1
    pages = np.frombuffer(raw["page"], dtype="<u8")
    cls = np.frombuffer(raw["page_class"], dtype=np.uint8)
    counts = np.frombuffer(raw["page_counts"], dtype="<u8").reshape(-1, n_slots).astype(np.int64)
    program = binary or head["metadata"].get("program")
    binpath = Path(program) if program else None
    ranges = object_ranges(trace, binary)
    has_map = _map_of(head) is not None
    other = "(unmapped)" if has_map else "(heap, stack or other: no memory map)"
    # Each page to its owner by the rule every view of the objects uses (``objects.page_owners``).
    from .objects import page_owners

    names_of = np.array([r[2] for r in ranges] + [other], dtype=object)
    owner = names_of[page_owners(ranges).lookup(pages, len(ranges))]
    total = counts.sum(axis=1)
    path = _path(levels, 0)
    cols: dict[str, Any] = {"object": owner, "reads": np.where(cls == 0, total, 0),
                            "writes": np.where(cls == 1, total, 0)}
    for k, li in enumerate(path):
        above = counts[:, path[:k]].sum(axis=1)
        cols[f"{names[li]}_accesses"] = total - above
        cols[f"{names[li]}_misses"] = total - above - counts[:, li]
    frame = pd.DataFrame(cols).groupby("object", as_index=False, sort=False).sum()
    for li in path:
        acc = frame[f"{names[li]}_accesses"]
        frame[f"{names[li]}_miss_rate"] = np.where(acc > 0, frame[f"{names[li]}_misses"] / acc.where(acc > 0, 1), 0.0)
    where: dict[str, tuple[int, int]] = {}
    kinds: dict[str, str] = {other: "other"}
    for lo, hi, name, kind in ranges:
        where.setdefault(name, (lo, hi - lo))
        kinds.setdefault(name, kind)
    frame.insert(1, "start", [where.get(o, (0, 0))[0] for o in frame["object"]])
    frame.insert(2, "size", [where.get(o, (0, 0))[1] for o in frame["object"]])
    frame = frame.sort_values([f"{names[i]}_misses" for i in path], ascending=False,
                              kind="stable").reset_index(drop=True)
    frame.attrs.update(levels=[names[i] for i in path], records=int(raw["records"]),
                       binary=os.fspath(binpath) if binpath else None, memory_map=has_map,
                       kinds={o: kinds.get(o, "other") for o in frame["object"]})
    return frame


def annotate_diff(
    first: Any,
    second: Any,
) -> Any:
    """The difference of two ``annotate`` frames (``by="line"`` or ``"function"``), second minus
    first, per row key: what cg_diff computes from two cachegrind.out files, which cg_annotate
    then prints. Rows present in one run only count 0 in the other. Both runs must have the
    same levels (cg_diff refuses files with different events). Sorted by the size of the change
    in the default sort columns, largest first; ``attrs`` as the first frame's."""
    import pandas as pd

    if list(first.attrs.get("levels", [])) != list(second.attrs.get("levels", [])):
        raise ValueError(f"--diff: the two runs have different cache levels ({', '.join(first.attrs['levels'])} "
                         f"and {', '.join(second.attrs['levels'])}); give configs with the same level names")
    keys = [k for k in ("function", "file", "line", "pc") if k in first.columns]
    values = [c for c in first.columns if c not in keys]
    a = first.groupby(keys, sort=False)[values].sum()
    b = second.groupby(keys, sort=False)[values].sum()
    out = b.sub(a, fill_value=0).astype(np.int64).reset_index()
    out = out[(out[values] != 0).any(axis=1)]
    sort = list(first.attrs.get("sort") or values)
    order = out[sort].abs().apply(tuple, axis=1)
    out = out.loc[sorted(out.index, key=lambda i: order[i], reverse=True)].reset_index(drop=True)
    out.attrs.update(first.attrs)
    out.attrs.update(records=int(second.attrs.get("records", 0)) - int(first.attrs.get("records", 0)),
                     diff=True, unresolved=int(second.attrs.get("unresolved", 0)) - int(first.attrs.get("unresolved", 0)))
    return out


def _whole_files(table: Table, names: Sequence[str]) -> str:
    """Every line of each readable source file with counts, each line with its accesses and its
    misses per level at its left, blank where it has none (cg_annotate's annotated files)."""
    cols = list(ACCESS_COLUMNS) + [f"{n}_misses" for n in names]
    rows = table.take(table["line"] > 0)
    out = []
    per_file: dict[str, dict[int, list[int]]] = {}
    for file, line, *values in zip(rows["file"].tolist(), rows["line"].tolist(), *(rows[c].tolist() for c in cols)):
        sums = per_file.setdefault(file, {}).setdefault(line, [0] * len(cols))
        for k, v in enumerate(values):
            sums[k] += v
    for file, per in per_file.items():
        try:
            text = Path(file).read_text(errors="replace").splitlines()
        except OSError:
            out.append(f"-- {file}: source not readable here ({len(per)} lines with counts)")
            continue
        widths = [max(len(c), *(len(f"{v[k]:,}") for v in per.values())) for k, c in enumerate(cols)]
        out.append(f"-- {file}")
        out.append("  ".join(c.rjust(w) for c, w in zip(cols, widths)) + "  line |")
        for n, src in enumerate(text, start=1):
            if n in per:
                tag = "  ".join(f"{v:,}".rjust(w) for v, w in zip(per[n], widths))
            else:
                tag = "  ".join("." .rjust(w) for w in widths)
            out.append(f"{tag} {n:5} | {src}")
        beyond = sorted(n for n in per if n > len(text))
        if beyond:
            out.append(f"   (lines {', '.join(map(str, beyond))} have counts but are past the end of the file: "
                       "it changed since the program was built)")
    return "\n".join(out)


# ---- command line -----------------------------------------------------------------------------

def add_parser(sub: Any) -> None:
    """The ``annotate`` subcommand (cli.build_parser calls this)."""
    p = sub.add_parser(
        "annotate",
        help="which functions and source lines miss, at every cache level (needs a trace with PCs)",
        description="Run a trace captured with PCs (cachecolor trace capture, instruction fetches on) "
        "through the config's hierarchy and report accesses and misses at every level per function "
        "and per source line (from the DWARF debug information), most misses first, with the source around the "
        "top lines.",
    )
    p.add_argument("trace", metavar="TRACE", help="native trace with PCs (version 3)")
    p.add_argument("--config", required=True, metavar="CONFIG", help="simulation config with the [hierarchy]")
    p.add_argument("--binary", metavar="FILE", help="program whose debug info resolves PCs "
                   "(default: the program the trace's metadata names; with a memory map, it stands in "
                   "for that program's file, e.g. the unstripped build of a stripped program)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or status messages on stderr")
    p.add_argument("--sort", metavar="COL[,COL...]", help="columns to sort by, most first, as cg_annotate's "
                   "--sort (e.g. LL_misses,D1_misses; default: misses at each data level, then the others)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows per table (default 20)")
    p.add_argument("--context", type=int, default=3, metavar="N",
                   help="source lines shown around each of the top lines (default 3; 0: none)")
    p.add_argument("--whole-files", action="store_true", help="after the tables, every line of each readable "
                   "source file that has counts, each with its accesses and misses per level (cg_annotate's "
                   "annotated source files)")
    p.add_argument("--diff", metavar="TRACE2", nargs="?", const="", default=None,
                   help="the difference of two runs, second minus first, per function and per line (as cg_diff "
                   "then cg_annotate): TRACE2 on --diff-config (default: the same trace on --diff-config)")
    p.add_argument("--diff-config", metavar="CONFIG2", help="with --diff: the second run's config (default: --config)")
    p.add_argument("--objects", action="store_true", help="per data object instead (with the trace's memory "
                   "map: every mapping, heap and stack, and each mapped file's globals by symbol; without it: the "
                   "program's globals, the rest in one row): accesses, misses, miss rate at every data level, reuse, "
                   "and the objects the ROCS search would put in the pollute buffer with the predicted effect")
    p.add_argument("--no-search", action="store_true", help="with --objects: leave out the pollute-buffer "
                   "search (it re-runs the trace about 18 times)")
    p.add_argument("--plot", metavar="PATH", help="with --objects: a plot of misses per object over time (PNG)")
    p.add_argument("--json", metavar="OUT", help="write the table (per line, or per object with --objects) as "
                   "JSON records to OUT ('-': stdout), as every command's --json OUT")
    p.add_argument("--csv", metavar="OUT", help="write the same table as CSV to OUT ('-': stdout)")
    p.set_defaults(func=run)


def _table(table: Table, keys: Sequence[str], names: Sequence[str], top: int) -> str:
    """The first ``top`` rows, every column right-aligned to its widest cell, one space apart,
    counts with thousands separators, other numbers after a space kept for a sign (the layout of
    pandas' ``to_string(index=False)``)."""
    cols = list(keys) + list(ACCESS_COLUMNS) + [f"{n}_misses" for n in names]
    if len(table) == 0:
        return f"Empty DataFrame\nColumns: [{', '.join(cols)}]\nIndex: []"
    shown = table.take(slice(0, top))
    cells = []
    for c in cols:
        text = [f"{int(v):,}" if c not in keys else str(v) for v in shown[c].tolist()]
        sign = c in keys and np.issubdtype(shown[c].dtype, np.number)
        width = max(len(c), *(len(t) for t in text)) + sign
        cells.append([c.rjust(width)] + [t.rjust(width) for t in text])
    return "\n".join(" ".join(row) for row in zip(*cells))


def _source(table: Table, names: Sequence[str], top: int, context: int) -> str:
    """The source around the top lines, each annotated with its misses at every level."""
    out = []
    miss_cols = [f"{n}_misses" for n in names]
    missed = sum((table[c] for c in miss_cols), np.zeros(len(table), dtype=np.int64))
    rows = table.take(np.flatnonzero((table["line"] > 0) & (missed != 0))[:top])
    by_file: dict[str, dict[int, list[int]]] = {}
    for file, line, *m in zip(rows["file"].tolist(), rows["line"].tolist(), *(rows[c].tolist() for c in miss_cols)):
        by_file.setdefault(file, {})[int(line)] = m
    for file, lines in by_file.items():
        try:
            text = Path(file).read_text(errors="replace").splitlines()
        except OSError:
            out.append(f"-- {file}: source not readable here")
            continue
        want = sorted({n for ln in lines for n in range(max(1, ln - context), min(len(text), ln + context) + 1)})
        out.append(f"-- {file}")
        prev = None
        for n in want:
            if prev is not None and n != prev + 1:
                out.append("   ...")
            r = lines.get(n)
            tag = "  ".join(f"{n_}={v:,}" for n_, v in zip(names, r)) if r else ""
            out.append(f"{tag:>40} {n:5} | {text[n - 1]}")
            prev = n
    return "\n".join(out)


def run(args: Any) -> int:
    from . import objects
    from ._output import check_output, write_text
    from .cli import EXIT_BAD_INPUT, CliError
    from .commands._common import os_error_line
    from .progress import ProgressLine

    if args.diff_config and args.diff is None:
        raise CliError("--diff-config: gives the second run of a diff; add --diff (TRACE2 optional)", EXIT_BAD_INPUT)
    if args.diff == "" and not args.diff_config:
        raise CliError("--diff without TRACE2 compares the trace on two configs: add --diff-config CONFIG2",
                       EXIT_BAD_INPUT)
    if (args.plot or args.no_search) and not args.objects:
        raise CliError(f"{'--plot' if args.plot else '--no-search'}: applies to data objects; add --objects",
                       EXIT_BAD_INPUT)
    progress = ProgressLine("annotate", quiet=getattr(args, "quiet", False))
    try:
        sort = args.sort.split(",") if args.sort else None
        for out in (args.plot, args.json, args.csv):
            if out:
                check_output(out, [args.trace])
        if args.diff is not None:
            if args.objects:
                raise CliError("--diff compares code (per function and line); it does not apply with --objects",
                               EXIT_BAD_INPUT)
            first = annotate(args.trace, args.config, binary=args.binary, sort=sort, progress=progress)
            other = args.diff or args.trace
            second = annotate(other, args.diff_config or args.config, binary=args.binary, sort=sort, progress=progress)
            lines = annotate_diff(first, second)
        elif args.objects:
            lines = objects.object_report(args.trace, args.config, binary=args.binary, search=not args.no_search,
                                          progress=progress)
        else:
            lines = annotate_table(args.trace, args.config, binary=args.binary, sort=sort, progress=progress)
    except (AnnotateError, ValueError) as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{args.trace}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(os_error_line(e), EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    if args.plot:
        objects.plot_misses_over_time(lines, args.plot)
    to_stdout = "-" in (args.json, args.csv)
    if args.json or args.csv:
        frame = lines.to_frame() if isinstance(lines, Table) else lines
        if args.json:
            write_text(args.json, frame.to_json(orient="records") + "\n", [args.trace])
        if args.csv:
            write_text(args.csv, frame.to_csv(index=False), [args.trace])
    if to_stdout:
        return 0  # the data is stdout: no text report beside it
    for out in (args.json, args.csv):
        if out and not args.quiet:
            print(f"wrote {out}", file=sys.stderr)
    if args.objects:
        what = "the trace's memory map" if lines.attrs.get("memory_map") else lines.attrs["binary"]
        print(f"{lines.attrs['records']:,} records; data objects of {what} (per 4 KiB page)")
        heap = heap_objects(args.trace)
        if heap is not None:
            if heap.get("note"):
                print(f"no heap objects by allocation site: {heap['note']}")
            else:
                print(f"heap objects by allocation site: {len(heap['sites'])} sites, "
                      f"{heap['allocations']:,} allocations")
        print(objects.format_report(lines, args.top))
        return 0
    if not isinstance(lines, Table):
        lines = Table.from_frame(lines)
    names = lines.attrs["levels"]
    value_cols = [c for c in lines.columns if c not in ("function", "file", "line")]
    diff = bool(lines.attrs.get("diff"))
    funcs = lines.group_sum(["function"], value_cols).sorted_by(lines.attrs["sort"], magnitude=diff)
    tot = {c: int(lines[c].sum()) for c in value_cols}
    if diff:
        second = f"{args.diff or args.trace} on {args.diff_config or args.config}"
        print(f"difference: {second} minus {args.trace} on {args.config} (as cg_diff; negative: fewer in the "
              f"second run); {lines.attrs['records']:+,} records")
    elif lines.attrs.get("memory_map"):
        print(f"{lines.attrs['records']:,} records; code resolved through the trace's memory map; "
              f"{lines.attrs['unresolved']:,} references without a source line (by mapping or symbol)")
    else:
        print(f"{lines.attrs['records']:,} records; binary {lines.attrs['binary']}; "
              f"{lines.attrs['unresolved']:,} references outside it (no memory map)")
    print("totals: " + "  ".join(f"{c}={int(tot[c]):,}" for c in list(ACCESS_COLUMNS) + [f"{n}_misses" for n in names]))
    print(f"\nper function (sorted by {', '.join(lines.attrs['sort'])}):")
    print(_table(funcs, ["function"], names, args.top))
    print("\nper source line:")
    print(_table(lines, ["function", "file", "line"], names, args.top))
    if args.context > 0 and not args.whole_files:
        print("\nsource around the top lines (misses per level):")
        print(_source(lines, names, args.top, args.context))
    if args.whole_files:
        print("\nannotated source files (accesses and misses per line; '.': none):")
        print(_whole_files(lines, names))
    return 0
