"""What the command modules share: exit codes, the registries' names, the one-line error type,
argparse helpers and the small output helpers. (Split out of cli.py; names unchanged.)"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .. import _core
from .._output import save_figure
from ..config import load_config

PROG = "cachecolor"
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
FORMATS = tuple(_core.TRACE_FORMATS)  # the trace-format registry (crates/sim/src/registry.rs)
POLICIES = tuple(_core.POLICIES)  # the OS-policy registry
BACKENDS = ("auto", "qemu", "lackey")


class CliError(Exception):
    """A failure to report as one line with a given exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE):
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit code 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _size_arg(text: str) -> int:
    """A byte size flag, read by the one size parser configs use (``_core.parse_size``: 1048576,
    1MiB, 32KiB, 0x1000, 2TiB; K/M/G/T are binary)."""
    try:
        return _core.parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _whole(text: str) -> int:
    """A whole number >= 0 for a count or size flag (a negative one had reached the Rust side
    and come back as serde's "invalid value: integer `-64`, expected u64 at line 1 column 18")."""
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 0 to 2**63 - 1")
    return v


def _finite(text: str) -> float:
    """A finite number (``nan`` and ``inf`` had reached the Rust side as malformed JSON)."""
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number")
    return v


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or status messages on stderr")


def _status(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


def _safe(text: Any) -> str:
    """``text`` with control characters (ESC, CR, NUL, C1, DEL, ...) escaped, so bytes from an
    input file cannot drive the terminal."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] if c not in "\n\t" else " " for c in s)


def _load_config(path: str) -> dict[str, Any]:
    try:
        return load_config(path)
    except _core.ConfigError as e:
        raise CliError(f"config {path}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"cannot read config {path}: {e.strerror or e}", EXIT_BAD_INPUT) from e


def _write_json_first(args: argparse.Namespace, doc: Any) -> None:
    """Write --json (if asked) before any plot, so a failing plot loses no results."""
    from ..results import write_json_atomic

    if args.json:
        write_json_atomic(args.json, doc)
        _status(args, f"wrote {args.json}")


def _source_name(args: argparse.Namespace) -> str:
    if getattr(args, "trace", None) is not None:
        return f"trace {args.trace}"
    if getattr(args, "workload", None) is not None:
        return f"workload {args.workload}"
    return "the config's workload"


def _save_plot(draw: Any, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw(ax)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


def _parse_sets(items: Optional[list[str]]) -> list[tuple[str, Any]]:
    from ..sweep import SweepError, parse_set

    try:
        return [parse_set(t) for t in items or []]
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e


def _apply_sets(raw: dict[str, Any], items: Optional[list[str]]) -> None:
    from ..sweep import SweepError, set_path

    for path, value in _parse_sets(items):
        try:
            set_path(raw, path, value)
        except SweepError as e:
            raise CliError(f"--set {path}: {e}", EXIT_BAD_INPUT) from e


def _executor(args: argparse.Namespace) -> Any:
    if args.scheduler:
        return args.scheduler
    if args.workers is not None and args.workers < 1:
        raise CliError(f"--workers {args.workers}: at least 1", EXIT_BAD_INPUT)
    return "serial" if args.workers == 1 else "pool"


def _sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, metavar="N", help="local worker processes (default: all cores; 1 runs in this process)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask scheduler instead (needs cachecolor[dask] on every worker)")


def os_error_line(e: OSError) -> str:
    """An OSError as one line naming the path: ``PATH: reason``, or the reason alone when it has
    no filename (the Rust readers put the path in their message; it had read "None: ..."). The
    CLI's own OSError handler (``cli.main``) prints the same line."""
    where = f"{e.filename}: " if getattr(e, "filename", None) else ""
    return where + _one_line(str(e.strerror or e))


def distinct_names(paths: Any, what: str) -> None:
    """Refuse two different inputs of one file name: the reports name their rows, sections and
    files by it, and the second had silently replaced (or merged into) the first."""
    import os
    from pathlib import Path

    seen: dict[str, tuple[str, str]] = {}
    for p in paths:
        stem, real = Path(p).stem, os.path.realpath(p)
        if stem in seen and seen[stem][1] != real:
            raise CliError(f"{what} {seen[stem][0]} and {p} have the same name {stem!r}, which names their results: "
                           "rename or copy one", EXIT_BAD_INPUT)
        seen.setdefault(stem, (str(p), real))
