"""Trace files: read, write, convert, summarise, and capture a program's references.

Formats: ``native`` (cachecolor's own: versioned header, zstd blocks with checksums; see
docs/trace-format.md), ``lackey`` (Valgrind ``--tool=lackey --trace-mem=yes`` output), ``din``
(Dinero text) and ``champsim`` (ChampSim binary records); text and ChampSim files may be
``.gz``/``.xz``/``.zst`` compressed.

Contract:
- ``read_trace`` loads a whole trace into memory (about 20 bytes per record): use it for small
  traces and tests. To analyse a large trace, simulate or convert it (both stream) or pass
  ``limit=`` to read only the first records.
- ``write_trace`` and ``convert_trace`` write atomically: the file appears only when complete.
- Errors: ``TraceError`` (with ``.offset``) for an unreadable trace, ``ConfigError`` for an
  unknown format name, ``OSError`` for a missing file, ``CaptureError`` for a failed capture.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional, Sequence, Union

from . import _core
from .records import KIND_NAMES, from_columns, to_columns
from .simulation import Progress, _wrap_progress

PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "KIND_NAMES",
    "capture",
    "convert_trace",
    "read_trace",
    "trace_formats",
    "trace_info",
    "write_trace",
]


def trace_formats() -> list[str]:
    """The trace format names cachecolor reads: native, lackey, din, champsim."""
    return list(_core.trace_formats())


def read_trace(path: PathLike, format: str = "native", *, limit: Optional[int] = None, as_: str = "frame") -> Any:
    """Read a trace into memory: a pandas DataFrame (``as_="frame"``, ``kind`` categorical) or a
    NumPy structured array (``as_="array"``, ``kind`` as codes 0-3).

    For small traces only (the whole trace is held in memory); ``limit`` reads the first
    ``limit`` records. The frame's ``attrs`` hold ``metadata`` (the native header's string),
    ``version`` and ``truncated``.
    """
    raw = _core.read_trace(os.fspath(path), format, limit)
    out = from_columns(raw, as_=as_)
    if as_ == "frame":
        out.attrs.update(metadata=raw["metadata"], version=raw["version"], truncated=raw["truncated"])
    return out


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
    """
    argv = [program_args] if isinstance(program_args, str) else list(program_args)
    if not argv:
        raise ValueError("capture needs a program to run")
    doc = _core.capture(
        argv[0], argv[1:], os.fspath(out), backend, ifetch, max_records, _wrap_progress(progress), syscalls,
        skip_instructions,
    )
    return json.loads(doc)
