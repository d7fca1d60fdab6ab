"""The one way the Python side writes an output file (docs/reliability.md, "Output contract"); the
Rust twin is ``cachecolor_sim::output``, which native traces go through.

What the destination is decides how it is written, so an output never destroys what it should not:

- a regular file, or a path that does not exist yet: the data goes to a unique temporary file
  (``.NAME.XXXXXX.tmp``, ``mkstemp``) in the destination's own directory and is renamed over the
  path only when complete. Any failure, an interrupt (KeyboardInterrupt, SIGTERM) included,
  removes the temporary file: an existing file is untouched and nothing is left behind;
- a symbolic link: followed; its final target is written as above (the link stays a link);
- ``-``: standard output;
- a character device (``/dev/null``, a terminal) or a FIFO: written in place, never replaced;
- a directory, a block device, a socket: refused (:class:`OutputError`, saying what the path is);
- the same file as one of the command's inputs: refused.

I/O errors are ``OSError`` whose message names the path (``writing OUT: No space left on
device``); ``errno`` is kept, so the CLI can tell a full disk (exit 1) from bad input (exit 2).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]


class OutputError(ValueError):
    """An output path that cannot be written without destroying something (exit 2 in the CLI)."""


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def check_output(path: PathLike, inputs: Sequence[PathLike] = ()) -> str:
    """Classify ``path`` without writing: ``"stdout"``, ``"in-place"`` or ``"replace"``. Raises
    :class:`OutputError` for a path that would be refused, so a command can check its outputs
    before a long run."""
    p = os.fspath(path)
    if p == "-":
        return "stdout"
    if p == "":
        raise OutputError("the output path is empty")
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        parent = os.path.dirname(os.path.abspath(p))
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise OutputError(f"cannot write {p}: {parent} is not a directory") from None
        if not os.path.isdir(parent):
            up = parent
            while up and not os.path.exists(up):
                up = os.path.dirname(up)
            if up and not os.path.isdir(up):
                raise OutputError(f"cannot write {p}: {up} is not a directory") from None
        if p.endswith(os.sep):
            raise OutputError(f"cannot write {p}: it names a directory; give a file path")
        return "replace"
    for i in inputs:
        try:
            ist = os.stat(os.fspath(i))
        except OSError:
            continue
        if _same_file(st, ist) and not stat.S_ISCHR(st.st_mode):
            raise OutputError(
                f"the output {p} is the input {os.fspath(i)}: writing it would destroy the input; give another output path"
            )
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise OutputError(f"cannot write {p}: it is a directory; give a file path")
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "in-place"
    if not stat.S_ISREG(mode):
        what = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise OutputError(f"refusing to write {p}: it is {what}; give a regular file path")
    return "replace"


def _named(e: OSError, doing: str, path: str) -> OSError:
    """``e`` with a message that names the path (errno kept)."""
    if e.errno is None:
        return e
    return type(e)(e.errno, f"{doing} {path}: {e.strerror or e}")


@contextlib.contextmanager
def open_output(
    path: PathLike, inputs: Sequence[PathLike] = (), *, binary: bool = False, make_parents: bool = True
) -> Iterator[IO[Any]]:
    """A file object for ``path`` under the contract; the output is final when the ``with``
    block ends without an exception, and untouched (no temporary left) if it raises."""
    p = os.fspath(path)
    how = check_output(p, inputs)
    if how == "stdout":
        if binary:
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
        else:
            yield sys.stdout
            sys.stdout.flush()
        return
    if how == "in-place":
        try:
            f = open(p, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"}))
        except OSError as e:
            raise _named(e, "cannot open", p) from None
        try:
            with f:
                yield f
                f.flush()
        except OSError as e:
            # A failed flush fails again in close(): report it once, naming the path.
            raise (e if p in str(e) else _named(e, "writing", p)) from None
        return
    dest = Path(os.path.realpath(p)) if os.path.lexists(p) else Path(p)
    if make_parents:
        dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        old_mode = os.stat(dest).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        old_mode = 0o666 & ~umask
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent or ".")
    except OSError as e:
        raise _named(e, "cannot create a temporary file in", str(dest.parent)) from None
    try:
        os.chmod(tmp, old_mode)  # mkstemp makes 0600; keep the old file's mode or the usual one
        f: IO[Any] = os.fdopen(fd, "wb") if binary else io.open(fd, "w", encoding="utf-8")
        with f:
            yield f
            try:
                f.flush()
                os.fsync(f.fileno())
            except OSError as e:
                raise _named(e, "writing", p) from None
        try:
            os.replace(tmp, dest)
        except OSError as e:
            raise _named(e, "cannot rename into", p) from None
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and e.errno is not None and p not in str(e):
            raise _named(e, "writing", p) from None
        raise


def write_text(path: PathLike, text: str, inputs: Sequence[PathLike] = ()) -> None:
    """Write ``text`` to ``path`` under the contract."""
    with open_output(path, inputs) as f:
        f.write(text)


def write_bytes(path: PathLike, data: bytes, inputs: Sequence[PathLike] = ()) -> None:
    """Write ``data`` to ``path`` under the contract."""
    with open_output(path, inputs, binary=True) as f:
        f.write(data)


def write_json(path: PathLike, obj: Any, inputs: Sequence[PathLike] = ()) -> None:
    """Write ``obj`` as indented JSON (and a newline) to ``path`` under the contract."""
    write_text(path, json.dumps(obj, indent=2) + "\n", inputs)


def save_figure(fig: Any, path: PathLike, **kwargs: Any) -> None:
    """``fig.savefig`` under the contract (the format from the path's suffix, PNG by default)."""
    suffix = Path(os.fspath(path)).suffix.lstrip(".").lower()
    fmt = kwargs.pop("format", None) or suffix or "png"
    with open_output(path, binary=True) as f:
        fig.savefig(f, format=fmt, **kwargs)
