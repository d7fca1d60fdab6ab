"""The ``cachecolor`` command line: a thin layer over the Python API.

Each command is a module of ``cachecolor.commands`` (its parser setup ``add_parser(sub)`` and its
function); this module builds the parser from them and keeps ``main()``, the error contract
and the signal handling. ``commands/_common.py`` holds what the commands share.

Commands::

    cachecolor simulate CONFIG.toml [--trace FILE] [--format F] [--json OUT] [--seed N] [--set PATH=VALUE]... [-q]
    cachecolor trace convert --from lackey|din|champsim IN OUT
    cachecolor trace info FILE [--format F] [--json]
    cachecolor trace capture [--backend auto|qemu|lackey] [--no-ifetch] [--max-records N] -o OUT -- PROGRAM ARGS
    cachecolor trace [--backend ...] -o OUT -- PROGRAM ARGS           (short form of capture)
    cachecolor machine NAME | --detect [--sysfs DIR] | --list
    cachecolor mrc TRACE | --workload SPEC [--json OUT] [--plot OUT.png] [--shards RATE | --shards-size N | --aet RATE]
                   [--salts K] [--granularity line|page] [--line-size B] [--sets N | --cache-size B --ways A] [-q]
    cachecolor mrc TRACE | --workload SPEC --rapid WINDOW [--l1-size B] [--l1-ways A] [--warmup N] [--start N]
    cachecolor profile [TRACE] --config CFG [--level LLC] [--sample-period N] [--json OUT] [--csv OUT] [--plot PREFIX]
    cachecolor sdp TRACE | --workload SPEC | --sweep --cache-size B --ways A [--placement ALLOC | --pagemap CSV] [--json OUT] [--plot OUT.png]
    cachecolor simulate SYSTEM.toml --policy module:Class|path/file.py:Class   (a policy written in Python)
    cachecolor report CONFIG|DIR... [--policy NAME]... [--seeds N [--seed S]] [--set PATH=VALUE]... [--out DIR] [--no-plots] [--no-html]
                      [--workers N | --scheduler tcp://HOST:PORT] [-q]
    cachecolor sweep SPEC.toml [--out DIR] [--workers N | --scheduler tcp://HOST:PORT] [-q]
    cachecolor demo [--out DIR] [--backend B]
    cachecolor --version

Contract (tests/test_cli.py and tests/test_errors.py pin it):
- Results go to stdout (tables) or to files (``--json``, written atomically); progress and
  messages go to stderr. Progress is one updating line on a terminal, a line every 10 s
  otherwise, nothing with ``--quiet``.
- Exit codes: 0 success; 2 bad input (an invalid config, an unreadable trace, a missing file,
  a bad command line); 1 any other failure (a failed capture, the traced program failing, a
  violated invariant, an internal error); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM,
  whole-system simulate, report and sweep).
- An error is reported as one line, ``cachecolor: error: ...``, never a Python traceback
  (set ``CACHECOLOR_DEBUG=1`` to get the traceback).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from . import _core
from ._output import OutputError, check_output

# The shared names first (a command module may import them from here), then the commands.
from .commands._common import (  # noqa: F401 - re-exported: cli.FORMATS, cli.POLICIES, cli.CliError, ...
    EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, FORMATS, POLICIES, PROG, CliError, _one_line, _Parser, _safe,
    os_error_line,
)
from .commands import (
    bench, calibrate, demo, examples, machine, mrc, offload, oscache, probe, profile, report, sdp, simulate, sweep, trace, workloads,
)
from .commands.trace import _normalise_argv, cmd_trace_info
from .annotate import add_parser as _add_annotate_parser  # the module: cachecolor.annotate is its function
from .evaluate import add_parser as _add_evaluate_parser


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="cachecolor: cache simulation, traces and cache-aware page management.")
    p.add_argument("--version", action="version", version=f"{PROG} {_core.__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    # One line a command, in the order `cachecolor --help` lists them (python/cachecolor/commands/).
    simulate.add_parser(sub)
    trace.add_parser(sub)
    machine.add_parser(sub)
    mrc.add_parser(sub)
    profile.add_parser(sub)
    sdp.add_parser(sub)
    report.add_parser(sub)
    sweep.add_parser(sub)
    offload.add_parser(sub)
    oscache.add_parser(sub)
    bench.add_parser(sub)
    probe.add_parser(sub)
    calibrate.add_parser(sub)
    workloads.add_parser(sub)
    demo.add_parser(sub)
    examples.add_parser(sub)
    _add_evaluate_parser(sub)  # python/cachecolor/evaluate.py: the library and its command
    _add_annotate_parser(sub)  # python/cachecolor/annotate.py: the library and its command
    return p


# ---------------------------------------------------------------------------------------------
# reliability (docs/reliability.md): the error contract, checks made before any run, signals


EXIT_TERMINATED = 143  # 128 + SIGTERM


_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EFBIG}


_ENVIRONMENT_TEXT = ("No space left on device", "Read-only file system", "Disk quota exceeded", "File too large")


def _environment_error(e: OSError) -> bool:
    """An OSError raised from Rust carries its kind only in the text."""
    return any(t in str(e) for t in _ENVIRONMENT_TEXT)


def _bad_input_message(e: BaseException) -> Optional[str]:
    """The one-line message for an exception that means the input was bad, else None."""
    if isinstance(e, UnicodeDecodeError):
        return f"input is not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r}); give a text file"
    if isinstance(e, RecursionError):
        return "input is nested too deeply to read (a config or JSON file with runaway nesting)"
    if isinstance(e, json.JSONDecodeError):
        return f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
    return None


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that every cleanup that
    runs on Ctrl-C (temporary files, nr_hugepages, a capture's child) runs on SIGTERM too."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def _install_sigterm() -> Any:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def _restore_sigterm(previous: Any) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _resolve_trace_format(args: argparse.Namespace) -> None:
    """``--format`` not given: tell the trace's format from its content (traces.detect_format);
    a file that does not exist keeps ``native`` so the command reports it as before."""
    if not hasattr(args, "format") or args.format is not None:
        return
    path = next((getattr(args, a) for a in ("trace", "file", "input") if getattr(args, a, None) is not None), None)
    args.format = "native"
    if isinstance(path, str) and Path(path).is_file():
        from .traces import detect_format

        args.format = detect_format(path)


_POSITIVE_OPTIONS = (("max_ways", "--max-ways"), ("refs_per_line", "--refs-per-line"), ("max_records", "--max-records"))


def _check_args(args: argparse.Namespace) -> None:
    """Checks made before any work, so a bad option or output path costs no run."""
    for name in ("seed",):
        v = getattr(args, name, None)
        if isinstance(v, int) and not 0 <= v < 2**63:
            raise CliError(f"--seed {v}: give a seed in 0 .. 2**63 - 1", EXIT_BAD_INPUT)
    for name, option in _POSITIVE_OPTIONS:
        v = getattr(args, name, None)
        if isinstance(v, int) and not 1 <= v < 2**63:
            raise CliError(f"{option} {v}: give a whole number of at least 1", EXIT_BAD_INPUT)
    inputs = [p for p in (getattr(args, k, None) for k in ("input", "trace", "config", "workload", "file")) if isinstance(p, str)]
    outputs = [getattr(args, k, None) for k in ("json", "csv", "output")]
    if getattr(args, "func", None) is cmd_trace_info:
        outputs = []  # trace info --json is a flag (print JSON)
    for out in outputs:
        if isinstance(out, str):
            check_output(out, inputs)
    plot = getattr(args, "plot", None)  # a figure file (profile's prefix is `plot_prefix`)
    if isinstance(plot, str):
        _check_figure_path(plot, inputs)


def _check_figure_path(path: str, inputs: Sequence[str]) -> None:
    """A ``--plot`` file's format (from its suffix) must be one matplotlib writes: it was found
    out only after the whole computation, as a traceback and exit 1 (the JSON already written)."""
    from matplotlib.backend_bases import FigureCanvasBase

    # The output contract first (a --plot naming the input is refused as such), then the format.
    check_output(path, inputs)
    suffix = Path(path).suffix.lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise CliError(f"--plot {path}: unknown figure format .{suffix} (allowed: {', '.join('.' + f for f in sorted(formats))})",
                       EXIT_BAD_INPUT)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args_list, command = _normalise_argv(args_list)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if command is not None:
        args.command = command
    debug = os.environ.get("CACHECOLOR_DEBUG", "") not in ("", "0")
    previous = _install_sigterm()
    try:
        _resolve_trace_format(args)
        _check_args(args)
        return int(args.func(args) or 0)
    except _Terminated:
        print(f"\n{PROG}: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except CliError as e:
        if debug:
            raise
        print(f"{PROG}: error: {_safe(_one_line(e))}", file=sys.stderr)
        return e.code
    except (_core.ConfigError, _core.TraceError) as e:
        if debug:
            raise
        print(f"{PROG}: error: {_safe(_one_line(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OutputError as e:
        if debug:
            raise
        print(f"{PROG}: error: {_safe(_one_line(e))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        if debug:
            raise
        if isinstance(e, BrokenPipeError):
            return EXIT_OK
        print(f"{PROG}: error: {_safe(os_error_line(e))}", file=sys.stderr)
        # A full disk, a read-only or failing filesystem is not bad input.
        return EXIT_FAILURE if e.errno in _ENVIRONMENT_ERRNOS or _environment_error(e) else EXIT_BAD_INPUT
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        if debug:
            raise
        bad = _bad_input_message(e)
        if bad is None:
            kind = type(e).__name__
            print(f"{PROG}: error: {kind}: {_safe(_one_line(e))} (set CACHECOLOR_DEBUG=1 for a traceback)", file=sys.stderr)
            return EXIT_FAILURE
        print(f"{PROG}: error: {_safe(bad)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            raise
        kind = type(e).__name__
        print(f"{PROG}: error: {kind}: {_safe(_one_line(e))} (set CACHECOLOR_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        _restore_sigterm(previous)


if __name__ == "__main__":
    sys.exit(main())
