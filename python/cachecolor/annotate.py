"""``cachecolor annotate``: which code misses, per function and per source line (issue 22).

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

Resolving PCs: the binutils ``addr2line`` (``-f -C``, one call for all addresses) reads the
program's DWARF line table; chosen over pyelftools because it is installed wherever a compiler
is, handles every DWARF version the compiler emits, and demangles; a binary without debug
information still gets function names from its symbol table. Without a memory map in the trace
(not captured yet), only the program's own code can be placed, and only when it is linked at a
fixed address (not PIE): every other PC (shared libraries, the dynamic loader, a JIT, a PIE
program) is attributed to ``(outside PROGRAM: no memory map)``, never dropped.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _core
from .config import ConfigSource, load_config
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
        raw = _core.read_trace(os.fspath(trace), "native", 0)
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
    return {"metadata": meta if isinstance(meta, dict) else {}, "version": raw.get("version"),
            "pcs": raw.get("pc") is not None}


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


def _addr2line(binary: Path, pcs: np.ndarray) -> list[tuple[str, str, int]]:
    """(function, file, line) of each PC in ``binary`` (link-time addresses), by addr2line."""
    tool = shutil.which("addr2line")
    if tool is None or len(pcs) == 0:
        return [("??", "??", 0)] * len(pcs)
    text = "\n".join(f"{int(p):#x}" for p in pcs) + "\n"
    out = subprocess.run([tool, "-f", "-C", "-e", os.fspath(binary)], input=text,
                         capture_output=True, text=True, check=False).stdout.splitlines()
    res = []
    for i in range(len(pcs)):
        fn = out[2 * i] if 2 * i < len(out) else "??"
        loc = out[2 * i + 1] if 2 * i + 1 < len(out) else "??:0"
        loc = loc.split(" (discriminator")[0]
        file, _, line = loc.rpartition(":")
        try:
            n = int(line)
        except ValueError:
            n = 0
        res.append((fn, file or "??", n))
    return res


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
    DWARF resolves PCs (default: the ``program`` the trace's metadata names). ``frame.attrs``
    has ``levels``, ``records``, ``binary`` and ``unresolved`` (references outside the binary).
    """
    import pandas as pd

    if by == "object":
        from .objects import object_report  # reuse and the pollute buffer (objects.py)

        return object_report(trace, config, binary=binary, progress=progress)
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
    cfg = load_config(config)
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
    frame = pd.DataFrame(cols)
    frame = frame.groupby("pc", as_index=False, sort=False).sum()

    program = binary or head["metadata"].get("program")
    binpath = Path(program) if program else None
    kind, segs = _elf_text(binpath) if binpath else (None, [])
    label = OUTSIDE.format(binpath.name if binpath else "the program")
    inside = np.zeros(len(frame), dtype=bool)
    if kind == "exec":
        for lo, hi in segs:
            inside |= (frame["pc"].to_numpy() >= lo) & (frame["pc"].to_numpy() < hi)
    where = _addr2line(binpath, frame["pc"].to_numpy()[inside]) if binpath is not None else []
    fn = np.full(len(frame), label, dtype=object)
    fl = np.full(len(frame), "??", dtype=object)
    ln = np.zeros(len(frame), dtype=np.int64)
    for j, (f_, file_, line_) in zip(np.flatnonzero(inside), where):
        fn[j], fl[j], ln[j] = f_, file_, line_
    frame.insert(1, "function", fn)
    frame.insert(2, "file", fl)
    frame.insert(3, "line", ln)
    unresolved = int(frame.loc[~inside, list(ACCESS_COLUMNS)].to_numpy().sum())

    value_cols = [c for c in frame.columns if c not in ("pc", "function", "file", "line")]
    if by == "line":
        frame = frame.groupby(["function", "file", "line"], as_index=False, sort=False)[value_cols].sum()
    elif by == "function":
        frame = frame.groupby(["function", "file"], as_index=False, sort=False)[value_cols].sum()
        # a function's file: the one holding most of its lines is enough for a listing
        frame = frame.groupby("function", as_index=False, sort=False).agg(
            {"file": "first", **{c: "sum" for c in value_cols}})
    if sort is None:
        data_levels = _path(levels, 0)
        sort = [f"{names[i]}_misses" for i in data_levels] + [
            f"{n}_misses" for i, n in enumerate(names) if i not in data_levels]
    unknown = [c for c in sort if c not in frame.columns]
    if unknown:
        raise ValueError(f"sort={list(sort)!r}: no column {unknown[0]!r}; the columns are "
                         f"{', '.join(c for c in frame.columns if c not in ('function', 'file', 'line', 'pc'))}")
    frame = frame.sort_values(list(sort), ascending=False, kind="stable").reset_index(drop=True)
    frame.attrs.update(levels=names, sort=list(sort), records=int(raw["records"]),
                       binary=os.fspath(binpath) if binpath else None,
                       unresolved=unresolved, unknown_pc=int(raw["unknown_pc"]))
    return frame


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


def annotate_objects(
    trace: os.PathLike | str,
    config: ConfigSource,
    *,
    binary: Optional[os.PathLike | str] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> Any:
    """Data accesses and misses per data object of ``trace`` (``annotate(..., by="object")``): the
    program's global and static arrays by their symbols (``nm``; a binary linked at a fixed
    address, as for code), everything else (heap, stacks, libraries' data, mappings) in one row
    ``(heap, stack or other: no memory map)``. Tallied per 4 KiB page and each page given to the
    object that covers most of it, so an object's first and last pages may be shared with its
    neighbours. Columns: ``object``, ``start``, ``size``, ``reads``, ``writes``, and per level
    ``L`` that data goes through: ``L_accesses`` (reaching ``L``), ``L_misses``, ``L_miss_rate``;
    sorted like ``annotate``'s default."""
    import pandas as pd

    head = _trace_header(trace)
    if not head["pcs"]:
        raise AnnotateError(f"{trace} has no PCs (native trace version {head['version']}): capture it "
                            "again with `cachecolor trace capture -o OUT -- PROGRAM ARGS`")
    cfg = load_config(config)
    levels = _levels(cfg)
    names = [lv["name"] for lv in levels]
    raw = _core.attribute_trace(json.dumps(cfg), os.fspath(trace), _wrap_progress(progress))
    n_slots = len(levels) + 1
    pages = np.frombuffer(raw["page"], dtype="<u8")
    cls = np.frombuffer(raw["page_class"], dtype=np.uint8)
    counts = np.frombuffer(raw["page_counts"], dtype="<u8").reshape(-1, n_slots).astype(np.int64)
    program = binary or head["metadata"].get("program")
    binpath = Path(program) if program else None
    kind, _ = _elf_text(binpath) if binpath else (None, [])
    syms = _data_symbols(binpath) if binpath is not None and kind == "exec" else []
    other = "(heap, stack or other: no memory map)"
    owner = np.full(len(pages), other, dtype=object)
    for lo, hi, name in syms:
        p_lo, p_hi = lo >> 12, (hi - 1) >> 12
        for pg in range(p_lo, p_hi + 1):
            cover = min(hi, (pg + 1) << 12) - max(lo, pg << 12)
            sel = pages == pg
            if sel.any() and cover >= 2048:
                owner[sel] = name
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
    where = {name: (lo, hi - lo) for lo, hi, name in syms}
    frame.insert(1, "start", [where.get(o, (0, 0))[0] for o in frame["object"]])
    frame.insert(2, "size", [where.get(o, (0, 0))[1] for o in frame["object"]])
    frame = frame.sort_values([f"{names[i]}_misses" for i in path], ascending=False,
                              kind="stable").reset_index(drop=True)
    frame.attrs.update(levels=[names[i] for i in path], records=int(raw["records"]),
                       binary=os.fspath(binpath) if binpath else None)
    return frame


# ---- command line -----------------------------------------------------------------------------

def add_parser(sub: Any) -> None:
    """The ``annotate`` subcommand (cli.build_parser calls this)."""
    p = sub.add_parser(
        "annotate",
        help="which functions and source lines miss, at every cache level (needs a trace with PCs)",
        description="Run a trace captured with PCs (cachecolor trace capture, instruction fetches on) "
        "through the config's hierarchy and report accesses and misses at every level per function "
        "and per source line (DWARF via addr2line), most misses first, with the source around the "
        "top lines.",
    )
    p.add_argument("trace", metavar="TRACE", help="native trace with PCs (version 3)")
    p.add_argument("--config", required=True, metavar="CONFIG", help="simulation config with the [hierarchy]")
    p.add_argument("--binary", metavar="FILE", help="program whose debug info resolves PCs "
                   "(default: the program the trace's metadata names)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or status messages on stderr")
    p.add_argument("--sort", metavar="COL[,COL...]", help="columns to sort by, most first, as cg_annotate's "
                   "--sort (e.g. LL_misses,D1_misses; default: misses at each data level, then the others)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows per table (default 20)")
    p.add_argument("--context", type=int, default=3, metavar="N",
                   help="source lines shown around each of the top lines (default 3; 0: none)")
    p.add_argument("--objects", action="store_true", help="per data object instead (global and static arrays "
                   "by symbol, the rest in one row): accesses, misses and miss rate at every data level")
    p.add_argument("--no-search", action="store_true", help="with --objects: leave out the pollute-buffer "
                   "search (it re-runs the trace about 18 times)")
    p.add_argument("--plot", metavar="PATH", help="with --objects: a plot of misses per object over time (PNG)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the per-line table as JSON records on stdout")
    fmt.add_argument("--csv", action="store_true", help="the per-line table as CSV on stdout")
    p.set_defaults(func=run)


def _table(frame: Any, keys: Sequence[str], names: Sequence[str], top: int) -> str:
    shown = frame.head(top)
    cols = list(keys) + list(ACCESS_COLUMNS) + [f"{n}_misses" for n in names]
    return shown[cols].to_string(index=False, formatters={
        c: (lambda v: f"{int(v):,}") for c in cols if c not in keys})


def _source(frame: Any, names: Sequence[str], top: int, context: int) -> str:
    """The source around the top lines, each annotated with its misses at every level."""
    out = []
    missed = frame[[f"{n}_misses" for n in names]].sum(axis=1)
    rows = frame[(frame["line"] > 0) & (missed > 0)].head(top)
    by_file: dict[str, dict[int, Any]] = {}
    for r in rows.itertuples(index=False):
        by_file.setdefault(r.file, {})[int(r.line)] = r
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
            tag = "  ".join(f"{n_}={getattr(r, f'{n_}_misses'):,}" for n_ in names) if r else ""
            out.append(f"{tag:>40} {n:5} | {text[n - 1]}")
            prev = n
    return "\n".join(out)


def run(args: Any) -> int:
    from . import objects
    from ._output import check_output
    from .cli import EXIT_BAD_INPUT, CliError
    from .progress import ProgressLine

    if (args.plot or args.no_search) and not args.objects:
        raise CliError(f"{'--plot' if args.plot else '--no-search'}: applies to data objects; add --objects",
                       EXIT_BAD_INPUT)
    progress = ProgressLine("annotate", quiet=getattr(args, "quiet", False))
    try:
        sort = args.sort.split(",") if args.sort else None
        if args.plot:
            check_output(args.plot, [args.trace])
        if args.objects:
            lines = objects.object_report(args.trace, args.config, binary=args.binary, search=not args.no_search,
                                          progress=progress)
        else:
            lines = annotate(args.trace, args.config, binary=args.binary, sort=sort, progress=progress)
    except (AnnotateError, ValueError) as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{args.trace}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"{e.filename}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    if args.plot:
        objects.plot_misses_over_time(lines, args.plot)
    if args.json:
        print(lines.to_json(orient="records"))
        return 0
    if args.csv:
        print(lines.to_csv(index=False), end="")
        return 0
    if args.objects:
        print(f"{lines.attrs['records']:,} records; data objects of {lines.attrs['binary']} (per 4 KiB page)")
        print(objects.format_report(lines, args.top))
        return 0
    names = lines.attrs["levels"]
    value_cols = [c for c in lines.columns if c not in ("function", "file", "line")]
    funcs = lines.groupby("function", as_index=False, sort=False)[value_cols].sum()
    funcs = funcs.sort_values(lines.attrs["sort"], ascending=False, kind="stable")
    tot = lines[value_cols].sum()
    print(f"{lines.attrs['records']:,} records; binary {lines.attrs['binary']}; "
          f"{lines.attrs['unresolved']:,} references outside it (no memory map)")
    print("totals: " + "  ".join(f"{c}={int(tot[c]):,}" for c in list(ACCESS_COLUMNS) + [f"{n}_misses" for n in names]))
    print(f"\nper function (sorted by {', '.join(lines.attrs['sort'])}):")
    print(_table(funcs, ["function"], names, args.top))
    print("\nper source line:")
    print(_table(lines, ["function", "file", "line"], names, args.top))
    if args.context > 0:
        print("\nsource around the top lines (misses per level):")
        print(_source(lines, names, args.top, args.context))
    return 0
