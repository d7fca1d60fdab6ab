"""Full-system capture and what a trace says about kernel code (docs/capture.md, "Full-system
capture"; docs/oscache.md).

``capture_system`` boots the packaged kernel under qemu-system-x86_64 with the program in a
minimal initramfs and traces the kernel's and the program's references from the program's start
to its exit (``cachecolor trace capture --system``; Rust: ``cachecolor_capture::capture_system``).

``kernel_note`` is the honesty line every report prints for a trace that holds no kernel code:
a user-mode capture (QEMU user mode, Valgrind lackey) runs no kernel, so its privileged records
are at most the markers and implied user-buffer copies of ``--syscalls`` (Nellans et al.'s
figures need the kernel's own references: section 3). It reads only the native header (magic,
version, metadata), so it costs nothing on a large trace.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any, Callable, Optional, Sequence, Union

from . import _core

PathLike = Union[str, "os.PathLike[str]"]


def capture_system(
    program_args: Union[str, Sequence[str]],
    out: PathLike,
    *,
    kernel: Optional[PathLike] = None,
    guest_files: Sequence[PathLike] = (),
    memory_mib: int = 512,
    boot_timeout: float = 600.0,
    max_records: Optional[int] = None,
    progress: Optional[Callable[[Any], Any]] = None,
) -> dict[str, Any]:
    """Capture ``[program, arg, ...]`` in a booted guest into the native trace ``out``.
    Returns ``{"summary": {...as capture()...}, "guest": {"utime", "stime", "hz" (the guest
    kernel's accounting of the program, clock ticks), "boot_seconds", "run_seconds", "output"
    (what the program printed), "kernel"}}``. Raises ``CaptureError`` (one line) on failure."""
    from .traces import _wrap_progress

    argv = [program_args] if isinstance(program_args, str) else list(program_args)
    if not argv:
        raise ValueError("capture_system needs a program to run")
    doc = _core.capture_system(
        argv[0],
        argv[1:],
        os.fspath(out),
        None if kernel is None else os.fspath(kernel),
        [os.fspath(p) for p in guest_files],
        memory_mib,
        boot_timeout,
        max_records,
        _wrap_progress(progress),
    )
    result: dict[str, Any] = json.loads(doc)
    return result


def native_metadata(path: PathLike) -> Optional[str]:
    """The metadata string of a native trace's header, or None if ``path`` is not one."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
            if len(head) < 16 or head[:8] != b"CCTRACE\0":
                return None
            (meta_len,) = struct.unpack("<I", head[12:16])
            if meta_len > 1 << 20:
                return None
            return f.read(meta_len).decode("utf-8", "replace")
    except OSError:
        return None


def kernel_note(path: PathLike, format: str = "native") -> Optional[str]:
    """One line saying that the trace holds no kernel code, or None for a full-system capture."""
    if format != "native":
        return f"note: a {format} trace holds no kernel code (user-level references only), so the OS/user figures cannot show the kernel's cache use"
    meta = native_metadata(path)
    doc: Any = None
    if meta:
        try:
            doc = json.loads(meta)
        except ValueError:
            doc = None
    if isinstance(doc, dict) and doc.get("system") is True:
        return None
    if isinstance(doc, dict) and doc.get("source") == "cachecolor-capture":
        how = "its privileged records are only system-call markers and implied user-buffer copies" if doc.get("syscalls") else "it has no privileged records"
        return (
            f"note: user-mode capture ({doc.get('backend', '?')}): this trace holds no kernel code, {how}; "
            "capture with --system for the kernel's own references"
        )
    return "note: this trace does not say it holds kernel code (not a full-system capture): its privileged records are only what its producer marked"
