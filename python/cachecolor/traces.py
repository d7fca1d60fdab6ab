"""Trace files: read, write, convert, summarise, and capture a program's references.

Formats: ``native`` (cachecolor's own: versioned header, zstd blocks with checksums; see
docs/trace-format.md), ``lackey`` (Valgrind ``--tool=lackey --trace-mem=yes`` output), ``din``
(Dinero text) and ``champsim`` (ChampSim binary records); text and ChampSim files may be
``.gz``/``.xz``/``.zst`` compressed.

Contract:
- ``read_trace`` loads a whole trace into memory (about 20 bytes per record): use it for small
  traces and tests. To analyse a large trace, simulate or convert it (both stream), pass
  ``limit=`` to read only the first records, or ``chunksize=N`` for an iterator of DataFrames
  (arrays) of at most N records each, read as it is consumed (bounded memory).
- ``filter_trace`` copies the records that pass every given criterion (kinds, threads, address
  ranges, mode) to a native trace, streaming.
- ``detect_format`` tells a trace's format from its content (what the CLI does when ``--format``
  is not given).
- ``write_trace`` and ``convert_trace`` write atomically: the file appears only when complete.
- Errors: ``TraceError`` (with ``.offset``) for an unreadable trace, ``ConfigError`` for an
  unknown format name, ``OSError`` for a missing file, ``CaptureError`` for a failed capture.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Callable, Iterator, Optional, Sequence, Union

from . import _core
from .records import KIND_NAMES, from_columns, to_columns
from .simulation import Progress, _wrap_progress

PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "KIND_NAMES",
    "capture",
    "convert_trace",
    "detect_format",
    "filter_trace",
    "read_trace",
    "trace_formats",
    "trace_info",
    "write_trace",
]


def trace_formats() -> list[str]:
    """The trace format names cachecolor reads: native, lackey, din, champsim."""
    return list(_core.trace_formats())


def read_trace(
    path: PathLike,
    format: str = "native",
    *,
    limit: Optional[int] = None,
    as_: str = "frame",
    chunksize: Optional[int] = None,
) -> Any:
    """Read a trace into memory: a pandas DataFrame (``as_="frame"``, ``kind`` categorical) or a
    NumPy structured array (``as_="array"``, ``kind`` as codes 0-3).

    For small traces only (the whole trace is held in memory); ``limit`` reads the first
    ``limit`` records. The frame's ``attrs`` hold ``metadata`` (the native header's string),
    ``version`` and ``truncated``.

    ``chunksize=N`` returns an iterator instead, of frames (arrays) of at most N records each
    (the last may be shorter), in trace order; the file is read as the iterator is consumed, so
    memory is bounded by the chunk, whatever the trace's length. ``limit`` then stops after that
    many records in all.
    """
    if chunksize is not None:
        if chunksize < 1:
            raise ValueError(f"chunksize {chunksize}: at least 1 record")
        return _chunks(path, format, limit, as_, int(chunksize))
    raw = _core.read_trace(os.fspath(path), format, limit)
    out = from_columns(raw, as_=as_)
    if as_ == "frame":
        out.attrs.update(metadata=raw["metadata"], version=raw["version"], truncated=raw["truncated"])
    return out


def _chunks(path: PathLike, format: str, limit: Optional[int], as_: str, chunksize: int) -> Iterator[Any]:
    # The reader opens the file now, so a missing file or a bad header fails at the call, not at
    # the first next().
    reader = _core.TraceChunks(os.fspath(path), format, chunksize if limit is None else min(chunksize, max(limit, 1)))

    def gen() -> Iterator[Any]:
        left = limit
        for raw in reader:
            out = from_columns(raw, as_=as_)
            if left is not None:
                if len(out) > left:
                    out = out.iloc[:left] if as_ == "frame" else out[:left]
                left -= len(out)
            if as_ == "frame":
                out.attrs.update(metadata=raw["metadata"], version=raw["version"], truncated=False)
            yield out
            if left is not None and left <= 0:
                return

    return gen()


def write_trace(path: PathLike, records: Any, *, metadata: str = "", **columns: Any) -> int:
    """Write records as a native trace at ``path``; returns the number written.

    ``records`` is an address array, a DataFrame / dict of columns / structured array with
    columns ``addr``, ``kind``, ``size``, ``thread``, ``icount``, ``privileged``, ``syscall`` (see
    ``cachecolor.records``); extra columns may also be passed as ``kinds=``, ``sizes=``, ...
    """
    cols = to_columns(records, **columns)
    return _core.write_trace(
        os.fspath(path),
        cols["addr"],
        cols.get("kind"),
        cols.get("size"),
        cols.get("thread"),
        cols.get("icount"),
        cols.get("privileged"),
        metadata,
        cols.get("syscall"),
    )


def convert_trace(
    src: PathLike,
    fmt: str,
    out: PathLike,
    progress: Optional[Callable[[Progress], Any]] = None,
    *,
    metadata: Optional[str] = None,
) -> int:
    """Convert the trace ``src`` in format ``fmt`` to a native trace ``out`` (streaming);
    returns the number of records. ``metadata`` defaults to a JSON note of the source."""
    return _core.convert_trace(os.fspath(src), fmt, os.fspath(out), metadata, _wrap_progress(progress))


def trace_info(path: PathLike, format: str = "native", progress: Optional[Callable[[Progress], Any]] = None) -> dict[str, Any]:
    """Summarise a trace (streaming): records, per-kind counts, threads, address range, bytes,
    instructions, and for native traces the format version and header metadata."""
    return json.loads(_core.trace_info(os.fspath(path), format, _wrap_progress(progress)))


def native_header(path: PathLike) -> dict[str, Any]:
    """A native trace's file header, read by the Rust reader without decoding a record:
    ``metadata`` (str), ``version``, ``pcs`` (whether the records carry PCs), ``header_bytes``
    (where the records start) and ``records`` (the end marker's count, None when it is missing
    or damaged). Raises ``TraceError`` for a file that is not a native trace."""
    return dict(_core.native_header(os.fspath(path)))


def _sha256(path: PathLike, start: int = 0) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def records_hash(path: PathLike) -> str:
    """SHA-256 of a native trace's records: its bytes after the file header (the compressed
    blocks and the end marker), so two captures of the same references hash alike whatever
    their metadata (dates, paths). Raises ``TraceError`` for a file that is not a native trace."""
    return _sha256(path, native_header(path)["header_bytes"])


def file_hash(path: PathLike) -> str:
    """SHA-256 of a trace file's whole content (any format; metadata included)."""
    return _sha256(path)


def capture(
    program_args: Union[str, Sequence[str]],
    out: PathLike,
    backend: str = "auto",
    *,
    ifetch: bool = True,
    max_records: Optional[int] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
    syscalls: bool = False,
    skip_instructions: int = 0,
    pcs: bool = True,
    bbv_interval: int = 0,
    bbv_out: Optional[PathLike] = None,
    max_instructions: Optional[int] = None,
) -> dict[str, Any]:
    """Run an unmodified program and write its memory references to the native trace ``out``.

    ``program_args`` is ``[program, arg, ...]`` (or just a program). ``backend`` is ``auto``
    (QEMU user mode with cachecolor's plugin when ``qemu-<arch>`` is installed, else Valgrind
    lackey), ``qemu`` or ``lackey``. Returns the summary (backend, records, per-kind counts,
    threads, exit_code, seconds, ...). If the program exits non-zero its trace is still written
    and ``CaptureError`` is raised with the summary in ``.summary``. ``syscalls=True`` (qemu
    only) turns every system call into privileged records: a kernel-stack marker carrying the
    call's identity, then the user-buffer accesses the call implies (docs/oscache.md).
    ``skip_instructions=N`` (qemu only) fast-forwards: nothing is recorded until the program
    has executed N instructions (all threads, counted per executed block: within one block).
    ``pcs=True`` (default, with ``ifetch``) keeps the PC of every record (native version 3), which
    ``cachecolor annotate`` needs; ``pcs=False`` writes a version 2 trace without them.
    ``bbv_interval=N, bbv_out=PATH`` (qemu only) also writes basic-block vectors: one line per N
    instructions (skipped ones included) in SimPoint's ``.bb`` format (``cachecolor.regions``).
    ``max_instructions=N`` stops once the trace holds N instructions (its last record is the one
    that reaches them), like ``max_records``; either limit stops the capture.
    """
    argv = [program_args] if isinstance(program_args, str) else list(program_args)
    if not argv:
        raise ValueError("capture needs a program to run")
    doc = _core.capture(
        argv[0], argv[1:], os.fspath(out), backend, ifetch, max_records, _wrap_progress(progress), syscalls,
        skip_instructions, pcs, bbv_interval, None if bbv_out is None else os.fspath(bbv_out), max_instructions,
    )
    return json.loads(doc)


def filter_trace(
    src: PathLike,
    out: PathLike,
    *,
    format: str = "native",
    kinds: Optional[Sequence[Union[int, str]]] = None,
    threads: Optional[Sequence[int]] = None,
    ranges: Optional[Sequence[tuple[int, int]]] = None,
    privileged: Optional[bool] = None,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> tuple[int, int]:
    """Copy the records of ``src`` that pass every given criterion to the native trace ``out``
    (streaming, written atomically); returns ``(records read, records kept)``.

    ``kinds``: kinds to keep (names "load", "store", "ifetch", "modify", letters or codes 0-3),
    e.g. drop instruction fetches with ``kinds=["load", "store", "modify"]``; ``threads``: thread
    ids to keep; ``ranges``: half-open address ranges ``(start, end)``, a record is kept if its
    address is in any; ``privileged``: keep only kernel-mode (True) or user-mode (False) records.
    """
    from .records import kind_codes

    codes = None if kinds is None else [int(c) for c in kind_codes(list(kinds))]
    return tuple(
        _core.filter_trace(
            os.fspath(src),
            format,
            os.fspath(out),
            codes,
            None if threads is None else [int(t) for t in threads],
            None if ranges is None else [(int(a), int(b)) for a, b in ranges],
            privileged,
            None,
            _wrap_progress(progress),
        )
    )


_TEXT_BYTES = bytes(range(32, 127)) + b"\t\n\r"


def _head(path: PathLike, n: int = 4096) -> Optional[bytes]:
    """The first ``n`` bytes of the file, decompressed as its extension says (``.gz``, ``.xz``);
    None for ``.zst``/``.zstd``, which the standard library cannot read. A corrupt compressed
    file is a ``TraceError`` naming it (as with ``--format``); a failing read (``EIO`` from
    ``/proc/self/mem``) an ``OSError`` naming it."""
    import gzip
    import lzma
    import zlib

    name = os.fspath(path).lower()
    if name.endswith((".zst", ".zstd")):
        return None
    opener = gzip.open if name.endswith(".gz") else lzma.open if name.endswith(".xz") else open
    try:
        with opener(path, "rb") as f:
            return f.read(n)
    except (lzma.LZMAError, zlib.error, gzip.BadGzipFile, EOFError) as e:
        kind = "gzip" if opener is gzip.open else "xz"
        raise _core.TraceError(f"{os.fspath(path)}: not a valid {kind} file ({e or 'truncated'})") from None
    except OSError as e:
        if e.filename is None:
            raise OSError(e.errno, e.strerror, os.fspath(path)) from None
        raise


def detect_format(path: PathLike) -> str:
    """The format of the trace at ``path``, from its content: ``native`` (the magic
    ``CCTRACE\\0``), ``lackey`` or ``din`` (text whose first records one of the two readers
    accepts), ``champsim`` (binary that is not a native trace). Raises ``TraceError`` when the
    content fits none, ``OSError`` when the file cannot be read."""
    head = _head(path)
    if head is not None and head.startswith(b"CCTRACE\0"):
        return "native"
    if head is not None and not head:
        return "native"  # whose reader says "byte offset 0: empty file" (the expected magic)
    text = head is not None and all(b in _TEXT_BYTES for b in head[:1024])
    candidates = ("lackey", "din") if text else ("native", "lackey", "din", "champsim") if head is None else ("champsim",)
    for fmt in candidates:
        try:
            if _core.read_trace(os.fspath(path), fmt, 64)["kind"]:
                return fmt
        except _core.TraceError:
            continue
    kind = "text" if text else "binary data"
    raise _core.TraceError(
        f"{os.fspath(path)}: cannot tell the trace format from its content ({kind} that no reader of "
        f"{', '.join(candidates)} accepts); give --format (native, lackey, din or champsim)"
    )
