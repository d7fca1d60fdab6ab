"""The ``cachecolor`` command line: a thin layer over the Python API.

Commands::

    cachecolor simulate CONFIG.toml [--trace FILE] [--format F] [--json OUT] [--seed N] [-q]
    cachecolor trace convert --from lackey|din|champsim IN OUT
    cachecolor trace info FILE [--format F] [--json]
    cachecolor trace capture [--backend auto|qemu|lackey] [--no-ifetch] [--max-records N] -o OUT -- PROGRAM ARGS
    cachecolor trace [--backend ...] -o OUT -- PROGRAM ARGS           (short form of capture)
    cachecolor machine NAME | --detect [--sysfs DIR] | --list
    cachecolor demo [--out DIR] [--backend B]
    cachecolor --version

Contract (tests/test_cli.py and tests/test_errors.py pin it):
- Results go to stdout (tables) or to files (``--json``, written atomically); progress and
  messages go to stderr. Progress is one updating line on a terminal, a line every 10 s
  otherwise, nothing with ``--quiet``.
- Exit codes: 0 success; 2 bad input (an invalid config, an unreadable trace, a missing file,
  a bad command line); 1 any other failure (a failed capture, the traced program failing, a
  violated invariant, an internal error); 130 interrupted (Ctrl-C).
- An error is reported as one line, ``cachecolor: error: ...``, never a Python traceback
  (set ``CACHECOLOR_DEBUG=1`` to get the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional, Sequence

from . import _core
from .config import load_config, with_seed
from .progress import ProgressLine

PROG = "cachecolor"
EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
FORMATS = ("native", "lackey", "din", "champsim")
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


def _quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or status messages on stderr")


def _status(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# simulate


def _load_config(path: str) -> dict[str, Any]:
    try:
        return load_config(path)
    except _core.ConfigError as e:
        raise CliError(f"config {path}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"cannot read config {path}: {e.strerror or e}", EXIT_BAD_INPUT) from e


def _report(args: argparse.Namespace, result: Any) -> int:
    """Print a result's table, write --json, and fail if an invariant was violated."""
    print(result.table())
    if args.json:
        result.to_json(args.json)
        _status(args, f"wrote {args.json}")
    if result.invariants:
        for problem in result.invariants:
            print(f"{PROG}: invariant violated: {problem}", file=sys.stderr)
        raise CliError(f"{len(result.invariants)} invariant(s) violated (a simulator bug: please report it)")
    return EXIT_OK


def cmd_simulate_system(args: argparse.Namespace, config: dict[str, Any]) -> int:
    from .system import simulate_system

    if args.trace:
        raise CliError("--trace is for cache-only configs; a system config names each thread's trace", EXIT_BAD_INPUT)
    try:
        result = simulate_system(config, policy=args.policy, seed=args.seed)
    except _core.ConfigError as e:
        raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
    return _report(args, result)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .simulation import simulate
    from .system import is_system_config, load_system_config

    try:
        raw = load_system_config(args.config)
    except OSError as e:
        raise CliError(f"cannot read config {args.config}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    except _core.ConfigError as e:
        raise CliError(f"config {e}", EXIT_BAD_INPUT) from e
    if is_system_config(raw):
        return cmd_simulate_system(args, raw)
    if args.policy is not None:
        raise CliError("--policy applies to system configs (with [machine] and [[processes]])", EXIT_BAD_INPUT)
    config = _load_config(args.config)
    if args.seed is not None:
        config = with_seed(config, args.seed)
    progress = ProgressLine("simulate", quiet=args.quiet)
    try:
        result = simulate(config, args.trace, args.format, progress)
    except _core.TraceError as e:
        raise CliError(f"trace {args.trace}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    source = f"{args.trace} ({args.format})" if args.trace else "the config's workload"
    print(f"cachecolor {result.version}: {result.records:,} records from {source}")
    return _report(args, result)


# ---------------------------------------------------------------------------------------------
# trace


def _mib(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / (1 << 20):.1f} MiB"


def cmd_trace_convert(args: argparse.Namespace) -> int:
    from .traces import convert_trace

    progress = ProgressLine("convert", quiet=args.quiet)
    try:
        n = convert_trace(args.input, args.source_format, args.output, progress)
    except _core.TraceError as e:
        raise CliError(f"{args.input}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    size = os.path.getsize(args.output)
    _status(args, f"wrote {n:,} records to {args.output} ({_mib(size)})")
    return EXIT_OK


def cmd_trace_info(args: argparse.Namespace) -> int:
    from .traces import trace_info

    progress = ProgressLine("reading", quiet=args.quiet)
    try:
        info = trace_info(args.file, args.format, progress)
    except _core.TraceError as e:
        raise CliError(f"{args.file}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    if args.json:
        print(json.dumps(info, indent=2))
        return EXIT_OK
    version = f", version {info['version']}" if info.get("version") is not None else ""
    print(f"{info['path']}: {info['format']} trace{version}, {_mib(info.get('file_bytes'))}")
    rows: list[tuple[str, str]] = [("records", f"{info['records']:,}")]
    for kind in ("load", "store", "ifetch", "modify"):
        rows.append((f"  {kind}", f"{info['kinds'].get(kind, 0):,}"))
    ids = ", ".join(str(t) for t in info["thread_ids"][:16])
    more = ", ..." if info["threads"] > 16 else ""
    rows.append(("threads", f"{info['threads']} ({ids}{more})"))
    if info["address_min"] is not None:
        rows.append(("addresses", f"{info['address_min']:#x} .. {info['address_max']:#x}"))
    rows.append(("privileged", f"{info['privileged']:,}"))
    rows.append(("bytes accessed", f"{info['bytes_accessed']:,}"))
    rows.append(("instructions", f"{info['instructions']:,}"))
    if info.get("metadata") not in (None, ""):
        meta = info["metadata"]
        rows.append(("metadata", meta if isinstance(meta, str) else json.dumps(meta, sort_keys=True)))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    return EXIT_OK


def cmd_trace_capture(args: argparse.Namespace) -> int:
    from .traces import capture

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError("give the program to trace after '--', e.g. cachecolor trace -o out.cctrace -- ./prog args", EXIT_BAD_INPUT)
    progress = ProgressLine("capture", quiet=args.quiet)
    try:
        summary = capture(
            command, args.output, args.backend, ifetch=not args.no_ifetch, max_records=args.max_records, progress=progress
        )
    except _core.CaptureError as e:
        raise CliError(f"capture: {e}", EXIT_FAILURE) from e
    finally:
        progress.close()
    _status(args, _capture_line(summary))
    return EXIT_OK


def _capture_line(s: dict[str, Any]) -> str:
    kinds = f"{s['loads']:,} loads, {s['stores']:,} stores, {s['modifies']:,} modifies, {s['ifetches']:,} ifetches"
    rate = s["records_per_second"] / 1e6
    cut = " (stopped at --max-records)" if s.get("truncated") else ""
    return (
        f"captured {s['records']:,} records ({kinds}) from {s['threads']} thread(s) with {s['backend']} "
        f"in {s['seconds']:.1f} s ({rate:.1f} M records/s){cut} -> {s['out']}"
    )


# ---------------------------------------------------------------------------------------------
# machine


def _size(n: int) -> str:
    """Bytes in the largest binary unit that shows them with at most one decimal (1.5 MiB)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and (n * 10) % (1 << shift) == 0:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n:,} B"


def _level_text(level: Optional[dict[str, Any]]) -> str:
    if level is None:
        return "-"
    text = f"{_size(level['size'])} {level['ways']}-way"
    if level["slices"] > 1:
        text += f" ({level['slices']} x {_size(level['size'] // level['slices'])})"
    return text


def _machine_rows(summaries: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["preset", "paper", "chips x cores", "L1D", "L2", "LLC", "LLC colors"]]
    for m in summaries:
        levels = m["levels"]
        l1d = next((lv for lv in levels if lv["serves"] in ("data", "unified")), None)
        l2 = next((lv for lv in levels if lv["name"] == "L2"), None)
        llc = levels[-1]
        colors = f"{m['llc_colors']}" + (" per slice" if llc["slices"] > 1 else "")
        rows.append(
            [m["name"], m["paper"] or "-", f"{m['chips']} x {m['cores']}", _level_text(l1d), _level_text(l2 if l2 is not llc else None), _level_text(llc), colors]
        )
    return rows


def cmd_machine(args: argparse.Namespace) -> int:
    from . import presets

    if args.list:
        if args.name or args.detect or args.sysfs:
            raise CliError("--list takes no NAME, --detect or --sysfs", EXIT_BAD_INPUT)
        rows = _machine_rows(presets.machine_summaries())
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        print(f"{'detect'.ljust(widths[0])}  this host, from sysfs (cachecolor machine --detect)")
        _status(args, "print one with 'cachecolor machine NAME > machine.toml'; use one with [machine] preset = \"NAME\"")
        return EXIT_OK
    if args.detect and args.name not in (None, "detect"):
        raise CliError(f"give a preset NAME or --detect, not both (got {args.name!r} and --detect)", EXIT_BAD_INPUT)
    name = "detect" if args.detect else args.name
    if name is None:
        raise CliError(
            "give a preset NAME, --detect or --list; the presets are: " + ", ".join(presets.machine_names()),
            EXIT_BAD_INPUT,
        )
    if args.sysfs and name != "detect":
        raise CliError("--sysfs applies to --detect only", EXIT_BAD_INPUT)
    try:
        text = presets.machine_toml(name, args.sysfs)
    except _core.ConfigError as e:
        if name == "detect":
            raise CliError(f"cannot describe this host: {str(e).removeprefix('detect: ')}", EXIT_FAILURE) from e
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# demo


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(out_dir=args.out, backend=args.backend, source_dir=args.source, quiet=args.quiet)


# ---------------------------------------------------------------------------------------------
# parser and main


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="cachecolor: cache simulation, traces and cache-aware page management.")
    p.add_argument("--version", action="version", version=f"{PROG} {_core.__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    s = sub.add_parser(
        "simulate",
        help="simulate a trace (or the config's workload) on a cache hierarchy, or a whole system "
        "(a config with [machine] and [[processes]])",
    )
    s.add_argument("config", metavar="CONFIG", help="simulation config (.toml, or .json)")
    s.add_argument("--trace", metavar="FILE", help="trace to simulate (default: the config's [workload])")
    s.add_argument("--format", choices=FORMATS, default="native", help="format of --trace (default: native)")
    s.add_argument("--json", metavar="OUT", help="write the results (per-level stats, effective config, version) as JSON")
    s.add_argument("--seed", type=int, metavar="N", help="seed for the workload and random replacement (overrides the config)")
    s.add_argument("--policy", metavar="NAME", help="system configs: the OS policy to run (linux, static)")
    _quiet(s)
    s.set_defaults(func=cmd_simulate)

    t = sub.add_parser(
        "trace",
        help="convert, inspect or capture traces",
        description="Trace tools. 'cachecolor trace -o OUT -- PROGRAM ARGS' is short for 'trace capture'.",
    )
    tsub = t.add_subparsers(dest="trace_cmd", metavar="SUBCOMMAND", parser_class=_Parser)
    tsub.required = True

    c = tsub.add_parser("convert", help="convert a lackey, din or champsim trace to the native format")
    c.add_argument("--from", dest="source_format", required=True, choices=[f for f in FORMATS if f != "native"] + ["native"], help="format of IN")
    c.add_argument("input", metavar="IN")
    c.add_argument("output", metavar="OUT")
    _quiet(c)
    c.set_defaults(func=cmd_trace_convert)

    i = tsub.add_parser("info", help="summarise a trace: records, kinds, threads, address range, metadata")
    i.add_argument("file", metavar="FILE")
    i.add_argument("--format", choices=FORMATS, default="native", help="format of FILE (default: native)")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    _quiet(i)
    i.set_defaults(func=cmd_trace_info)

    k = tsub.add_parser("capture", help="run a program and capture its memory references into a native trace")
    k.add_argument("-o", "--output", required=True, metavar="OUT", help="native trace to write")
    k.add_argument("--backend", choices=BACKENDS, default="auto", help="auto (qemu if installed, else lackey), qemu or lackey")
    k.add_argument("--no-ifetch", action="store_true", help="do not record instruction fetches")
    k.add_argument("--max-records", type=int, metavar="N", help="stop the program after N records")
    k.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS")
    _quiet(k)
    k.set_defaults(func=cmd_trace_capture)

    m = sub.add_parser(
        "machine",
        help="print a machine preset's [machine] table (the papers' machines, or --detect this host) or --list them",
        description="Print the [machine] TOML of a preset, with the paper section or vendor document behind "
        "each number in comments, as a starting point for a system config (cachecolor machine xeon-e5506 > m.toml), "
        "or name it in a config instead: [machine] preset = \"xeon-e5506\".",
    )
    m.add_argument("name", nargs="?", metavar="NAME", help="preset name (see --list), or 'detect'")
    m.add_argument("--detect", action="store_true", help="this host's machine, from sysfs (timing: a typical x86 core)")
    m.add_argument("--sysfs", metavar="DIR", help="with --detect: read this sysfs CPU directory instead of /sys/devices/system/cpu")
    m.add_argument("--list", action="store_true", help="list the presets: paper, chips x cores, cache geometry, LLC colors")
    _quiet(m)
    m.set_defaults(func=cmd_machine)

    d = sub.add_parser("demo", help="trace a small program and simulate it on this machine's caches")
    d.add_argument("--out", default=os.path.join("out", "demo"), metavar="DIR", help="output directory (default: out/demo)")
    d.add_argument("--backend", choices=BACKENDS, default="auto", help="capture backend (default: auto)")
    d.add_argument("--source", metavar="DIR", help="directory with the demo's C program (default: examples/demo)")
    _quiet(d)
    d.set_defaults(func=cmd_demo)
    return p


def _normalise_argv(argv: list[str]) -> tuple[list[str], Optional[list[str]]]:
    """Insert the implicit ``capture`` of ``cachecolor trace -o OUT -- PROG`` and split off the
    traced command after ``--`` (so its own options never reach argparse)."""
    if not argv or argv[0] != "trace":
        return argv, None
    if len(argv) > 1 and argv[1] not in ("convert", "info", "capture", "-h", "--help"):
        argv = ["trace", "capture", *argv[1:]]
    if len(argv) > 1 and argv[1] == "capture" and "--" in argv:
        k = argv.index("--")
        return argv[:k], argv[k + 1 :]
    return argv, None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args_list, command = _normalise_argv(args_list)
    parser = build_parser()
    args = parser.parse_args(args_list)
    if command is not None:
        args.command = command
    debug = os.environ.get("CACHECOLOR_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return e.code
    except (_core.ConfigError, _core.TraceError) as e:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        if debug:
            raise
        if isinstance(e, BrokenPipeError):
            return EXIT_OK
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{PROG}: error: {where}{_one_line(e.strerror or e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            raise
        kind = type(e).__name__
        print(f"{PROG}: error: {kind}: {_one_line(e)} (set CACHECOLOR_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
