"""Full-system capture and what a trace says about kernel code (docs/capture.md, "Full-system
capture"; docs/oscache.md).

``capture_system`` boots the packaged kernel under qemu-system-x86_64 with the program in a
minimal initramfs and traces the kernel's and the program's references from the program's start
to its exit (``cachecolor trace capture --system``; Rust: ``cachecolor_capture::capture_system``).

``tasks`` and ``task_summary`` read the guest tasks a full-system trace's metadata lists (issue
27: the trace's ``thread`` is the kernel task; docs/trace-format.md "Full-system traces"), so a
report can tell the traced program from the guest's other processes and its kernel threads.

``kernel_note`` is the honesty line every report prints for a trace that holds no kernel code:
a user-mode capture (QEMU user mode, Valgrind lackey) runs no kernel, so its privileged records
are at most the markers and implied user-buffer copies of ``--syscalls`` (Nellans et al.'s
figures need the kernel's own references: section 3). It reads only the native header (magic,
version, metadata), so it costs nothing on a large trace.
"""

from __future__ import annotations

import json
import os
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
    record: Optional[PathLike] = None,
    replay: Optional[PathLike] = None,
) -> dict[str, Any]:
    """Capture ``[program, arg, ...]`` in a booted guest into the native trace ``out``.
    ``record=LOG`` writes QEMU's record/replay log of the guest's nondeterministic events;
    ``replay=LOG`` replays one, so the guest executes as it did when recorded (docs/capture.md
    "Reproducibility": two replays of one log give the same trace, record for record).
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
        None if record is None else os.fspath(record),
        None if replay is None else os.fspath(replay),
    )
    result: dict[str, Any] = json.loads(doc)
    return result


def native_metadata(path: PathLike) -> Optional[str]:
    """The metadata string of a native trace's header (read by the Rust reader, no record
    decoded), or None if ``path`` is not one."""
    try:
        meta = _core.native_header(os.fspath(path))["metadata"]
    except (_core.TraceError, OSError):
        return None
    return meta if isinstance(meta, str) else None


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


def _metadata_doc(path: PathLike) -> Any:
    meta = native_metadata(path)
    try:
        return json.loads(meta) if meta else None
    except ValueError:
        return None


def tasks(path: PathLike, format: str = "native") -> Optional[list[dict[str, Any]]]:
    """The guest tasks of a full-system trace (one dict per trace thread: ``thread``, ``pid``,
    ``tgid``, ``comm``, ``parent``, ``program``, ``user_instructions``,
    ``kernel_instructions``; the pid fields absent when the capture could not label them), or
    None for a trace without task identity (user mode, or a full-system trace from before it)."""
    if format != "native":
        return None
    doc = _metadata_doc(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("tasks"), list):
        return None
    return [t for t in doc["tasks"] if isinstance(t, dict)]


def task_groups(task_list: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Instructions by who ran them: ``program`` (the traced program and its descendants),
    ``other`` (other guest processes), ``kernel-only`` (tasks that ran no user code in the
    region: kernel threads, the idle task), each as ``{"user": N, "kernel": N, "tasks": N}``."""
    groups = {g: {"user": 0, "kernel": 0, "tasks": 0} for g in ("program", "other", "kernel-only")}
    for t in task_list:
        user, kern = int(t.get("user_instructions", 0)), int(t.get("kernel_instructions", 0))
        g = "program" if t.get("program") else ("kernel-only" if user == 0 else "other")
        groups[g]["user"] += user
        groups[g]["kernel"] += kern
        groups[g]["tasks"] += 1
    return groups


def task_summary(path: PathLike, format: str = "native") -> Optional[str]:
    """One line: who ran the trace's instructions (the program, other processes, kernel-only
    tasks), user and kernel, or None for a trace without task identity."""
    tl = tasks(path, format)
    if not tl:
        return None
    g = task_groups(tl)
    total = sum(v["user"] + v["kernel"] for v in g.values()) or 1
    prog = [t for t in tl if t.get("program")]
    names = ", ".join(f"{t.get('comm', '?')} {t['pid']}" if "pid" in t else f"thread {t['thread']}" for t in prog[:4])
    more = ", ..." if len(prog) > 4 else ""
    parts = []
    for name, label in (("program", f"program ({names}{more})"), ("other", "other processes"), ("kernel-only", "kernel-only tasks")):
        v = g[name]
        parts.append(f"{label} {v['tasks']} task(s) {100 * (v['user'] + v['kernel']) / total:.1f}% (user {100 * v['user'] / total:.1f}%, kernel {100 * v['kernel'] / total:.1f}%)")
    return f"{len(tl)} guest tasks; instructions: " + "; ".join(parts)


# ---- what a full-system capture boots (for callers that must know before booting) ----------

def locate_kernel(kernel: Optional[PathLike] = None) -> str:
    """The kernel image a full-system capture boots, found by the capture's own look-up
    (``_core.locate_kernel``: ``kernel``, else ``$CACHECOLOR_KERNEL``, else the newest
    ``/boot/vmlinuz-*``). Raises ``FileNotFoundError`` with the capture's message when there is
    none. The workload suite needs it before the capture, to record the kernel in a trace's
    definition (a new kernel rebuilds the trace)."""
    try:
        return _core.locate_kernel(None if kernel is None else os.fspath(kernel))
    except _core.CaptureError as e:
        raise FileNotFoundError(str(e)) from None


def missing_system_tools() -> Optional[str]:
    """One line naming what full-system capture needs and does not find here (qemu-system,
    BusyBox, a kernel image, the compiled plugin and guest launcher: the capture's own check,
    ``_core.check_system``, with its environment overrides), or None when it can run."""
    try:
        _core.check_system()
    except _core.CaptureError as e:
        return str(e)
    return None


def kernel_identity(path: PathLike) -> dict[str, Any]:
    """What identifies a kernel image: its path, release (from the Debian file name
    ``vmlinuz-RELEASE``), the Debian package that installed it and its version (None for an
    image no package owns) and the SHA-256 of the image."""
    import hashlib
    import subprocess

    p = os.fspath(path)
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    base = os.path.basename(p)
    release = base[len("vmlinuz-"):] if base.startswith("vmlinuz-") else None
    package = version = None
    r = subprocess.run(["dpkg-query", "-S", os.path.realpath(p)], capture_output=True, text=True)
    if r.returncode == 0 and ":" in r.stdout:
        package = r.stdout.split(":", 1)[0].strip()
        v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
        version = (v.stdout.strip() or None) if v.returncode == 0 else None
    return {"path": p, "release": release, "package": package, "package_version": version, "sha256": h.hexdigest()}
