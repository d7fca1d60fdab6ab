"""The ``cachecolor`` command line: a thin layer over the Python API.

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

import numpy as np

from . import _core
from .config import load_config, with_seed
from ._output import OutputError, check_output, save_figure
from .progress import ProgressLine

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
    """A byte size: 1048576, 1MiB, 32KiB, 0x1000 (K/M/G are binary)."""
    t = text.strip().lower().replace(" ", "")
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
             "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
    try:
        if t.startswith("0x"):
            return int(t, 16)
        digits = len(t) - len(t.lstrip("0123456789"))
        return int(t[:digits]) * units[t[digits:]]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: use bytes (e.g. 1048576) or KiB/MiB/GiB (e.g. 1MiB)") from None


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
    if result.invariants:
        # Results that broke an invariant are not results: --json is not written (defect 4).
        for problem in result.invariants:
            print(f"{PROG}: invariant violated: {_safe(problem)}", file=sys.stderr)
        raise CliError(f"{len(result.invariants)} invariant(s) violated (a simulator bug: please report it); --json not written")
    if args.json:
        result.to_json(args.json)
        _status(args, f"wrote {args.json}")
    return EXIT_OK


def cmd_simulate_system(args: argparse.Namespace, config: dict[str, Any]) -> int:
    from .system import simulate_system

    if args.trace:
        raise CliError("--trace is for cache-only configs; a system config names each thread's trace", EXIT_BAD_INPUT)
    progress = ProgressLine("simulate", quiet=args.quiet)
    try:
        result = simulate_system(config, policy=args.policy, seed=args.seed, progress=progress)
    except _core.ConfigError as e:
        raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    _policy_warnings(result)
    code = _report(args, result)
    _kernel_notes(args.config, config)
    return code


def _kernel_notes(config_path: str, config: dict[str, Any]) -> None:
    """The one-line honesty note for each trace-fed thread whose trace holds no kernel code."""
    from .fullsys import kernel_note

    base = Path(config_path).parent
    for p in config.get("processes", []):
        for t in p.get("threads", []):
            if "trace" in t:
                path = base / t["trace"] if (base / t["trace"]).exists() else Path(t["trace"])
                note = kernel_note(path, t.get("format", "native"))
                if note:
                    print(f"{p.get('name', '?')}: {note}")


def _policy_warnings(result: Any) -> None:
    """Print the policy's own warnings (`policy_report.warnings`: a setting overridden, a
    policy that never acted) on stderr, so nothing it changed or skipped is silent (issue 19)."""
    report = result.policy_report
    if isinstance(report, dict):
        for w in report.get("warnings") or []:
            print(f"{PROG}: warning: {w}", file=sys.stderr)


def cmd_simulate(args: argparse.Namespace) -> int:
    from .simulation import simulate
    from .system import is_system_config, load_system_config

    try:
        raw = load_system_config(args.config)
    except OSError as e:
        raise CliError(f"cannot read config {args.config}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    except _core.ConfigError as e:
        raise CliError(f"config {e}", EXIT_BAD_INPUT) from e
    _apply_sets(raw, getattr(args, "set", None))
    machine = None
    on_machine = False  # a [machine] and --trace: config is the machine's hierarchy
    if is_system_config(raw):
        if not (args.trace and not raw.get("processes")):
            return cmd_simulate_system(args, raw)
        # A machine (a preset, `preset = "detect"`, or `cachecolor machine --detect`'s table) and
        # a trace: the trace on the machine's caches, cache-only.
        if args.policy is not None:
            raise CliError("--policy applies to whole-system runs ([[processes]]); a --trace on a machine runs its caches only", EXIT_BAD_INPUT)
        from . import presets

        try:
            config = presets.machine_hierarchy(raw["machine"])
        except _core.ConfigError as e:
            raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
        on_machine = True
        machine = raw["machine"].get("preset", "the [machine] table") if isinstance(raw["machine"], dict) else None
    if args.policy is not None:
        raise CliError("--policy applies to system configs (with [machine] and [[processes]])", EXIT_BAD_INPUT)
    if on_machine:
        pass
    elif getattr(args, "set", None):
        try:
            config = load_config(raw)
        except _core.ConfigError as e:
            raise CliError(f"config {args.config}: {e}", EXIT_BAD_INPUT) from e
    else:
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
    if machine is not None:
        source += f" on the caches of {machine}"
    print(f"cachecolor {result.version}: {result.records:,} records from {source}")
    return _report(args, result)


# ---------------------------------------------------------------------------------------------
# trace


def _mib(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / (1 << 20):.1f} MiB"


def _address_range(text: str) -> tuple[int, int]:
    """``START:END`` (hex with 0x, or decimal), half-open."""
    try:
        a, b = text.split(":")
        lo, hi = int(a, 0), int(b, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:END, e.g. 0x400000:0x500000") from None
    if not 0 <= lo < hi < 2**64:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 0 <= START < END < 2**64")
    return lo, hi


def cmd_trace_filter(args: argparse.Namespace) -> int:
    from .records import KIND_NAMES, kind_codes
    from .traces import filter_trace

    kinds: Optional[list[int]] = None
    if args.kinds is not None:
        try:
            kinds = [int(c) for c in kind_codes([k for k in args.kinds.split(",") if k])]
        except ValueError as e:
            raise CliError(f"--kinds: {e}", EXIT_BAD_INPUT) from e
        if not kinds:
            raise CliError(f"--kinds: name at least one of {', '.join(KIND_NAMES)}", EXIT_BAD_INPUT)
    if args.no_ifetch:
        kinds = [k for k in (kinds if kinds is not None else range(4)) if k != 2]
    threads = None
    if args.threads is not None:
        try:
            threads = [int(t) for t in args.threads.split(",") if t]
        except ValueError:
            raise CliError(f"--threads {args.threads}: expected thread ids like 0,1,3", EXIT_BAD_INPUT) from None
    privileged = True if args.privileged else False if args.user else None
    progress = ProgressLine("filter", quiet=args.quiet)
    try:
        read, kept = filter_trace(
            args.input, args.output, format=args.format, kinds=kinds, threads=threads,
            ranges=args.range, privileged=privileged, progress=progress,
        )
    except _core.TraceError as e:
        raise CliError(f"{args.input}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    print(f"kept {kept:,} of {read:,} records ({kept / read if read else 0:.1%}) in {args.output}")
    return EXIT_OK


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
    print(f"{_safe(info['path'])}: {info['format']} trace{version}, {_mib(info.get('file_bytes'))}")
    rows: list[tuple[str, str]] = [("records", f"{info['records']:,}")]
    for kind in ("load", "store", "ifetch", "modify"):
        rows.append((f"  {kind}", f"{info['kinds'].get(kind, 0):,}"))
    ids = ", ".join(str(t) for t in info["thread_ids"][:16])
    more = ", ..." if info["threads"] > 16 else ""
    rows.append(("threads", f"{info['threads']} ({ids}{more})"))
    if info["address_min"] is not None:
        rows.append(("addresses", f"{info['address_min']:#x} .. {info['address_max']:#x}"))
    rows.append(("privileged", f"{info['privileged']:,}"))
    from .fullsys import kernel_note

    note = kernel_note(args.file, args.format)
    rows.append(("kernel code", note if note else "yes: full-system capture (kernel and user references)"))
    rows.append(("bytes accessed", f"{info['bytes_accessed']:,}"))
    rows.append(("instructions", f"{info['instructions']:,}"))
    if info.get("metadata") not in (None, ""):
        meta = info["metadata"]
        rows.append(("metadata", _safe(meta if isinstance(meta, str) else json.dumps(meta, sort_keys=True))))
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
    if args.system:
        return _trace_capture_system(args, command)
    if args.kernel or args.guest_file:
        raise CliError("--kernel and --guest-file apply to --system captures", EXIT_BAD_INPUT)
    progress = ProgressLine("capture", quiet=args.quiet)
    try:
        summary = capture(
            command,
            args.output,
            args.backend,
            ifetch=not args.no_ifetch,
            max_records=args.max_records,
            progress=progress,
            syscalls=args.syscalls,
        )
    except _core.CaptureError as e:
        raise CliError(f"capture: {e}", EXIT_FAILURE) from e
    finally:
        progress.close()
    _status(args, _capture_line(summary))
    return EXIT_OK


def _trace_capture_system(args: argparse.Namespace, command: list[str]) -> int:
    from .fullsys import capture_system

    if args.backend != "auto" or args.no_ifetch or args.syscalls:
        raise CliError("--system records every instruction of the guest: --backend, --no-ifetch and --syscalls do not apply", EXIT_BAD_INPUT)
    if not 64 <= args.guest_memory <= 16384:
        raise CliError(f"--guest-memory {args.guest_memory}: allowed 64 to 16384 (MiB)", EXIT_BAD_INPUT)
    if not args.boot_timeout > 0:
        raise CliError(f"--boot-timeout {args.boot_timeout}: a positive number of seconds", EXIT_BAD_INPUT)
    if args.max_records is not None and args.max_records < 1:
        raise CliError("--max-records: at least 1", EXIT_BAD_INPUT)
    progress = ProgressLine("capture", quiet=args.quiet)
    try:
        res = capture_system(
            command,
            args.output,
            kernel=args.kernel,
            guest_files=args.guest_file,
            memory_mib=args.guest_memory,
            boot_timeout=args.boot_timeout,
            max_records=args.max_records,
            progress=progress,
        )
    except _core.CaptureError as e:
        raise CliError(f"capture: {e}", EXIT_FAILURE) from e
    finally:
        progress.close()
    g = res["guest"]
    sys.stdout.write(g["output"])
    _status(args, _capture_line(res["summary"]).replace(" with qemu ", " with qemu-system (kernel and user) "))
    if g["run_seconds"] > 0:
        rate = res["summary"]["records"] / g["run_seconds"] / 1e6
        _status(args, f"guest: boot {g['boot_seconds']:.1f} s (not traced), then {g['run_seconds']:.1f} s for the traced run and power-off ({rate:.1f} M records/s)")
    if g["utime"] is not None:
        _status(
            args,
            f"guest: booted {g['kernel']} in {g['boot_seconds']:.1f} s; the program's CPU time as the guest accounted it: "
            f"utime {g['utime']}, stime {g['stime']} ticks of 1/{g['hz']} s",
        )
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
# mrc

# Option of `cachecolor mrc` behind each field of the Rust core's MRC / set-profile options.
_MRC_FIELDS = {
    "max_lines": "--shards-size",
    "salts": "--salts",
    "points": "--points",
    "sizes": "--points",
    "all_sizes": "--all-sizes",
    "sets": "--sets",
    "max_ways": "--max-ways",
    "line_size": "--line-size",
    "trace": "TRACE",
}


def _mrc_option(args: argparse.Namespace, field: str) -> str:
    if field == "rate":
        return "--aet" if args.aet is not None else "--shards"
    if field == "unit_bytes":
        return "--page-size" if args.granularity == "page" else "--line-size"
    if field.startswith("workload"):
        return "--workload " + field
    return _MRC_FIELDS.get(field, field)


def _mrc_table(curve: Any, prof: Any) -> str:
    """Miss rates at about a dozen sizes (powers of two of units), and the set profile's."""
    lines = [
        f"{curve.method} miss-rate curve: {curve.references:,} references to "
        f"{'' if curve.distinct_exact else '~'}{curve.distinct:,.0f} distinct {curve.unit_bytes}-byte units"
        + (f", sampling rate {curve.rate:.4g}" if curve.rate is not None else "")
        + (f", reliable from {curve.reliable_from:,} units" if curve.reliable_from > 1 else "")
    ]
    top = int(max(curve.sizes.max(), 1))
    picks = sorted({1 << k for k in range(0, top.bit_length(), max(1, top.bit_length() // 12))} | {top})
    rates = curve.at(picks)
    lines.append(f"{'size (units)':>14}  {'bytes':>10}  miss rate")
    for size, m in zip(picks, rates):
        flag = "  (unreliable)" if size < curve.reliable_from else ""
        lines.append(f"{size:>14,}  {_bytes(size * curve.unit_bytes):>10}  {m:9.4f}{flag}")
    if prof is not None:
        lines.append(f"set-associative LRU with {prof.sets:,} sets of {prof.line_size}-byte lines (per-set profiles):")
        lines.append(f"{'ways':>14}  {'bytes':>10}  miss rate")
        for w, m in zip(range(1, prof.max_ways + 1), prof.miss_rate()):
            lines.append(f"{w:>14}  {_bytes(w * prof.sets * prof.line_size):>10}  {m:9.4f}")
    return "\n".join(lines)


def _bytes(n: int) -> str:
    for unit, b in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= b:
            v = n / b
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n} B"


def cmd_mrc(args: argparse.Namespace) -> int:
    from . import analysis

    if (args.trace is None) == (args.workload is None):
        raise CliError("give a TRACE file or --workload SPEC (one of them)", EXIT_BAD_INPUT)
    if args.rapid is not None:
        return _rapid_mrc(args)
    chosen = [o for o, v in (("--shards", args.shards), ("--shards-size", args.shards_size), ("--aet", args.aet)) if v is not None]
    if len(chosen) > 1:
        raise CliError(f"{' and '.join(chosen)} exclude each other: choose one method", EXIT_BAD_INPUT)
    if args.sets is not None and (args.cache_size is not None or args.ways is not None):
        raise CliError("give --sets, or --cache-size with --ways, not both", EXIT_BAD_INPUT)
    if (args.cache_size is None) != (args.ways is None):
        raise CliError("--cache-size and --ways go together (the sets are cache size / (ways x line size))", EXIT_BAD_INPUT)
    if args.max_ways is not None and args.sets is None and args.ways is None:
        raise CliError("--max-ways needs a set geometry: --sets N, or --cache-size B --ways A", EXIT_BAD_INPUT)
    method = "aet" if args.aet is not None else ("shards" if chosen else "exact")
    try:
        options = analysis.mrc_options(
            granularity=args.granularity,
            line_size=args.line_size,
            page_size=args.page_size,
            method=method,
            rate=args.aet if args.aet is not None else args.shards,
            max_lines=args.shards_size,
            salts=args.salts,
            adjust=not args.no_adjust,
            seed=args.seed,
            points=args.points,
            all_sizes=args.all_sizes,
        )
        sets = None
        if args.sets is not None or args.ways is not None:
            n_sets = args.sets
            if n_sets is None:
                way_bytes = args.ways * args.line_size
                if args.ways <= 0 or args.cache_size <= 0 or args.cache_size % way_bytes:
                    raise CliError(
                        f"--cache-size: {args.cache_size} B is not a positive multiple of --ways x --line-size = {way_bytes} B",
                        EXIT_BAD_INPUT,
                    )
                n_sets = args.cache_size // way_bytes
            max_ways = args.max_ways or args.ways or 16
            sets = {"line_size": args.line_size, "sets": n_sets, "max_ways": max_ways}
        source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
        progress = ProgressLine("mrc", quiet=args.quiet)
        try:
            curve, prof = analysis.profile(source, mrc=options, sets=sets, format=args.format, progress=progress)
        finally:
            progress.close()
    except _core.ConfigError as e:
        field = getattr(e, "field", "") or ""
        message = str(e)
        if field and message.startswith(field + ": "):
            message = message[len(field) + 2 :]
        where = f"{_mrc_option(args, field)}: " if field else ""
        raise CliError(f"{where}{message}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"trace {args.trace}: {e}", EXIT_BAD_INPUT) from e
    assert curve is not None
    print(_mrc_table(curve, prof))
    if args.json:
        doc = curve.to_dict()
        if prof is not None:
            doc["set_profile"] = prof.to_dict()
        from .results import write_json_atomic

        write_json_atomic(args.json, doc)
        _status(args, f"wrote {args.json}")
    if args.plot:
        _plot_mrc(curve, prof, args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def _rapid_mrc(args: argparse.Namespace) -> int:
    """``cachecolor mrc --rapid WINDOW``: RapidMRC (Azimi et al. 3.2.2) beside the exact curve."""
    from . import analysis
    from .results import write_json_atomic

    others = [o for o, v in (("--shards", args.shards), ("--shards-size", args.shards_size), ("--aet", args.aet),
                             ("--sets", args.sets), ("--cache-size", args.cache_size)) if v is not None]
    if others or args.granularity != "line":
        raise CliError(f"--rapid makes its own L2 curve from L1 misses: drop {', '.join(others) or '--granularity'}", EXIT_BAD_INPUT)
    source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
    progress = ProgressLine("mrc", quiet=args.quiet)
    try:
        r = analysis.rapid_mrc(
            source, l1_size=args.l1_size, l1_ways=args.l1_ways, window=args.rapid, warmup=args.warmup,
            start=args.start, line_size=args.line_size, points=args.points, format=args.format, progress=progress,
        )
    except _core.ConfigError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    print(f"RapidMRC: {r.window_counted:,} L1 misses in the window (of {r.l1_misses:,}, {r.references:,} references; "
          f"L1 {args.l1_size:,} B {args.l1_ways}-way); mean absolute error against the exact curve {r.mae:.4f}")
    print(f"{'L2 lines':>10} {'RapidMRC':>9} {'exact':>9}")
    step = max(1, len(r.sizes) // 12)
    for i in list(range(0, len(r.sizes), step))[:12] + [len(r.sizes) - 1]:
        print(f"{r.sizes[i]:>10,} {r.miss_rate[i]:>9.4f} {r.exact_miss_rate[i]:>9.4f}")
    if args.json:
        write_json_atomic(args.json, {"method": "rapidmrc", "sizes": r.sizes.tolist(), "miss_rate": r.miss_rate.tolist(),
                                      "exact_miss_rate": r.exact_miss_rate.tolist(), "mae": r.mae,
                                      "references": r.references, "l1_misses": r.l1_misses,
                                      "window_counted": r.window_counted, "options": r.options})
        _status(args, f"wrote {args.json}")
    if args.plot:
        def draw(ax: Any) -> None:
            ax.plot(r.sizes, r.exact_miss_rate, label="exact (every L1 miss)")
            ax.plot(r.sizes, r.miss_rate, "--", label=f"RapidMRC ({r.window_counted:,} misses)")
            ax.set_xscale("log")
            ax.set_xlabel("L2 size (lines, fully associative LRU)")
            ax.set_ylabel("L2 miss rate")
            ax.legend()
        _save_plot(draw, args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def _plot_mrc(curve: Any, prof: Any, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    curve.plot(ax=ax, unit="units")
    if prof is not None:
        ways = np.arange(1, prof.max_ways + 1)
        ax.plot(ways * prof.sets * prof.line_size / curve.unit_bytes, prof.miss_rate(), "o", ms=3,
                label=f"set-associative LRU, {prof.sets:,} sets")
        ax.legend()
    ax.set_title(f"{curve.method} miss-rate curve, {curve.references:,} references")
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# profile


def cmd_profile(args: argparse.Namespace) -> int:
    from .pages import page_profile

    progress = ProgressLine("profile", quiet=args.quiet)
    try:
        prof = page_profile(
            args.config, args.trace, level=args.level, page_size=args.page_size,
            sample_period=args.sample_period, trace_format=args.format,
            region_tolerance=args.region_tolerance, region_gap=args.region_gap,
            min_accesses=args.min_accesses, progress=progress,
        )
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"{e.filename}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    finally:
        progress.close()
    pages = prof.pages
    print(f"{prof.level} page profile: {len(pages):,} pages, {prof.references:,} data references, "
          f"{prof.accesses:,} {prof.level} accesses, miss rate {prof.miss_rate:.4f}")
    if prof.sample_period:
        print(f"sampled 1 L1D miss in {prof.sample_period:,}: {prof.samples:,} samples; mean error of the "
              f"per-page estimate (pages with >= 10 samples) {prof.estimate_error():.4f}")
    print("\nregions (neighbouring pages with similar miss rates, ROCS 3.2.2):")
    regions = prof.regions
    regions = regions[regions["access_share"] >= args.min_share]
    print(regions.to_string(index=False, float_format=lambda v: f"{v:.4f}",
                            formatters={"first_vpn": hex, "last_vpn": hex}))
    print("\npages per miss rate (ROCS Figure 2):")
    print(prof.histogram().to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.json:
        prof.to_json(args.json)
        _status(args, f"wrote {args.json}")
    if args.csv:
        from .reports.base import _atomic_write
        from pathlib import Path

        _atomic_write(Path(args.csv), pages.to_csv(index=False))
        _status(args, f"wrote {args.csv}")
    if args.plot:
        _save_plot(lambda ax: prof.plot_histogram(ax=ax), f"{args.plot}-histogram.png")
        _save_plot(lambda ax: prof.plot_address_space(ax=ax), f"{args.plot}-address-space.png")
        _status(args, f"wrote {args.plot}-histogram.png and {args.plot}-address-space.png")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# sdp


def cmd_sdp(args: argparse.Namespace) -> int:
    from . import analysis, placement

    if args.sweep:
        if args.trace is not None or args.workload is not None or args.pagemap is not None:
            raise CliError("--sweep generates its own uniform workloads: give no TRACE, --workload or --pagemap", EXIT_BAD_INPUT)
    elif (args.trace is None) == (args.workload is None):
        raise CliError("give a TRACE file or --workload SPEC (one of them), or --sweep", EXIT_BAD_INPUT)
    if args.seeds < 1:
        raise CliError(f"--seeds {args.seeds}: give at least 1", EXIT_BAD_INPUT)
    memory = {"seed": args.seed}
    try:
        if args.sweep:
            sizes = args.working_sets or [int(args.cache_size * f) for f in (0.25, 0.5, 0.75, 0.875, 1.0, 1.25, 1.5, 2.0, 4.0)]
            frame = placement.placement_sweep(
                cache_size=args.cache_size, ways=args.ways, working_sets=sizes,
                seeds=range(args.seed, args.seed + args.seeds), line_size=args.line_size,
                page_size=args.page_size, placement=args.placement, refs_per_line=args.refs_per_line,
                progress=lambda m: _status(args, m),
            )
            summary = placement.summarise_sweep(frame)
            print(f"physically aware / naive miss rate, {args.placement} placement, "
                  f"{args.cache_size:,} B {args.ways}-way cache, {args.seeds} seed(s) (thesis Figure 5.5)")
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
            doc: dict[str, Any] = {"cache_size": args.cache_size, "ways": args.ways, "placement": args.placement,
                                   "rows": frame.to_dict(orient="records"), "summary": summary.to_dict(orient="records")}
            _write_json_first(args, doc)
            if args.plot:
                _save_plot(lambda ax: placement.plot_sweep(frame, cache_size=args.cache_size, ax=ax), args.plot)
        else:
            where: Any = args.placement
            if args.pagemap is not None:
                import pandas as pd

                where = pd.read_csv(args.pagemap)
            source: Any = args.trace if args.trace is not None else analysis.WorkloadFile(args.workload)
            r = placement.physical_sdp(
                source, cache_size=args.cache_size, ways=args.ways, line_size=args.line_size,
                placement=where, page_size=args.page_size, memory=memory, format=args.format,
            )
            ways = np.arange(1, args.ways + 1)
            naive, aware = r.naive.miss_rate(ways), r.aware.miss_rate(ways)
            print(f"per-set stack distance profile of a {args.cache_size:,} B cache, {r.naive.sets:,} sets, "
                  f"{r.naive.references:,} references; placement {r.aware.placement['source']}, "
                  f"{r.aware.placement['pages']:,} pages")
            print(f"{'ways':>5} {'naive miss':>11} {'aware miss':>11} {'ratio':>8}")
            for w, a, b in zip(ways, naive, aware):
                print(f"{w:>5} {a:>11.4f} {b:>11.4f} {(b / a if a else float('inf')):>8.3f}")
            doc = {"cache_size": args.cache_size, "ways": ways.tolist(), "naive_miss_rate": naive.tolist(),
                   "aware_miss_rate": aware.tolist(), "placement": r.aware.placement,
                   "eq_5_2_miss_rate": r.predicted_miss_rate}
            _write_json_first(args, doc)
            if args.plot:
                def draw(ax: Any) -> None:
                    ax.plot(ways, naive, "o-", label="naive (virtual = physical)")
                    ax.plot(ways, aware, "s-", label=f"physically aware ({r.aware.placement['source']})")
                    ax.set_xlabel("associativity")
                    ax.set_ylabel("miss rate")
                    ax.legend()
                _save_plot(draw, args.plot)
    except _core.ConfigError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except _core.TraceError as e:
        raise CliError(f"{_source_name(args)}: {e}", EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"{e.filename}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    if args.plot:
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def _bench_progress(args: argparse.Namespace) -> Any:
    """One stderr line per trial (``--quiet``: none)."""
    if args.quiet:
        return None

    def show(done: int, total: int, line: str) -> None:
        print(f"[{done}/{total}] {line}", file=sys.stderr, flush=True)

    return show


def cmd_bench(args: argparse.Namespace) -> int:
    """Cachetest on this machine (thesis chapter 4): a working-set sweep, or --corun."""
    from . import bench as b

    if args.replot:
        if not args.plot:
            raise CliError("--replot needs --plot OUT.png", EXIT_BAD_INPUT)
        sweeps = [b.load(p) for p in args.replot]
        b.plot_sweeps(sweeps, args.plot)
        for s in sweeps:
            print(f"{s.buffer:>20}  {s.knee()['text']}")
        _status(args, f"wrote {args.plot}")
        return EXIT_OK
    if not args.level:
        raise CliError("bench: --level L1|L2|L3 is required (or --replot JSON...)", EXIT_BAD_INPUT)
    try:
        if args.corun:
            doc = b.corun(level=args.level, buffer=args.buffer, pattern=args.pattern, working_set_bytes=args.working_set,
                          max_cores=args.cores, trials=args.trials, duration_ms=args.duration_ms, seed=args.seed,
                          reserve_hugepages=args.reserve_hugepages, progress=_bench_progress(args))
            _write_json_first(args, doc)
            for p in doc["points"]:
                ci = p["ci95"] if p["ci95"] is not None else float("nan")
                print(f"{p['cores']} cores: {p['ns_per_access']:.2f} ns/access +- {ci:.2f} per thread, "
                      f"{p['total_accesses_per_second'] / 1e6:.1f} M accesses/s in total")
            if args.plot:
                b.plot_corun(doc, args.plot)
                _status(args, f"wrote {args.plot}")
            return EXIT_OK
        s = b.bench(args.level, buffer=args.buffer, pattern=args.pattern, trials=args.trials, duration_ms=args.duration_ms,
                    points=args.points, sizes=args.sizes, core=args.core, seed=args.seed, alpha=args.alpha,
                    reserve_hugepages=args.reserve_hugepages, counters=not args.no_counters, progress=_bench_progress(args))
    except _core.CachecolorError as e:
        if isinstance(e, (_core.ConfigError, _core.TraceError)):
            raise
        raise CliError(str(e), EXIT_FAILURE) from e
    _write_json_first(args, s.doc)
    f = s.frame
    if args.csv:
        from .reports.base import _atomic_write
        from pathlib import Path

        _atomic_write(Path(args.csv), f.to_csv(index=False))
        _status(args, f"wrote {args.csv}")
    lv = s.level
    print(f"{lv['name']} ({lv['size'] >> 10} KiB, {lv['ways']}-way), buffer {s.buffer}, pattern {args.pattern}, "
          f"{args.trials} trials of {args.duration_ms:g} ms, core {s.doc['core']}, engine {s.doc['engine']}")
    for p in s.doc["points"]:
        ci = p["ci95"] if p["ci95"] is not None else float("nan")
        extra = "".join(f"  {k}/access={c['per_access']:.3g}" for k, c in p["counters"].items())
        cpu = p.get("cpu_ns_per_access")
        cpu_txt = f"  (on-CPU {cpu:.2f} +- {p['cpu_ci95'] or 0:.2f})" if cpu is not None else ""
        print(f"{p['working_set_bytes'] >> 10:>8} KiB  {p['ns_per_access']:8.2f} ns/access +- {ci:.2f}{cpu_txt}{extra}")
    print(s.knee()["text"])
    for n in s.doc["notes"]:
        print(f"note: {n}")
    if args.plot:
        b.plot_sweeps([s], args.plot)
        _status(args, f"wrote {args.plot}")
    return EXIT_OK


def cmd_probe(args: argparse.Namespace) -> int:
    """Which address bits index each level, and does page color matter here?"""
    from . import bench as b

    try:
        doc = b.probe(reps=args.reps, duration_ms=args.duration_ms, core=args.core, huge=not args.no_huge,
                      reserve_hugepages=args.reserve_hugepages)
    except _core.CachecolorError as e:
        if isinstance(e, (_core.ConfigError, _core.TraceError)):
            raise
        raise CliError(str(e), EXIT_FAILURE) from e
    _write_json_first(args, doc)
    c = doc["control"]
    if c is not None:
        print(f"L1 positive control: same set {sorted(c['same'])[len(c['same']) // 2]:.2f} ns vs spread "
              f"{sorted(c['spread'])[len(c['spread']) // 2]:.2f} ns (ratio {c['ratio']:.2f}): "
              f"{'conflict seen' if c['effect'] else 'NO clear conflict'}")
    for lv in doc["levels"]:
        def fmt(t: Any) -> str:
            if t is None:
                return "not run"
            if "ci" not in t:
                return f"ratio {t['ratio']:.2f} -> {t['effect']}"
            word = {True: "effective", False: "no effect", None: "undecided"}[t["effect"]]
            return f"ratio {t['ratio']:.2f} (95% CI {t['ci'][0]:.2f}-{t['ci'][1]:.2f}) -> {word}"
        print(f"{lv['name']:>4}: {lv['size'] >> 10} KiB {lv['ways']}-way, index bits {lv['index_bits'][0]}..{lv['index_bits'][1]}, "
              f"{lv['colors']} colors; 4 KiB pages: {fmt(lv['test_4k'])}; 2 MiB pages: {fmt(lv['test_2m'])}")
        scan = lv.get("bit_scan")
        if scan is not None:
            steps = ", ".join(f"{b}:{sorted(v)[len(v) // 2]:.1f}" for b, v in zip(scan["bits"], scan["ns"]))
            found = "no clean step" if scan["top_bit"] is None else (
                f"index bits {lv['index_bits'][0]}..{scan['top_bit']} "
                f"({'as sysfs says' if scan['agrees_with_sysfs'] else 'NOT as sysfs says'})")
            print(f"      stride scan, {scan['lines']} lines, ns per access by stride bit: {steps} -> {found}")
        for n in lv["notes"]:
            print(f"      note: {n}")
    answer = f"answer: {doc['answer']}; " if 'answer' in doc else ""
    print(f"verdict: {answer}{doc['verdict']}  ({doc['seconds']:.1f} s)")
    return EXIT_OK


def _write_json_first(args: argparse.Namespace, doc: Any) -> None:
    """Write --json (if asked) before any plot, so a failing plot loses no results."""
    from .results import write_json_atomic

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


# ---------------------------------------------------------------------------------------------
# demo


def cmd_report(args: argparse.Namespace) -> int:
    from .reports import report_sweep
    from .sweep import SweepError, config_paths, grid

    if args.seeds is not None and args.seeds < 1:
        raise CliError(f"--seeds {args.seeds}: give at least 1 seed", EXIT_BAD_INPUT)
    seeds = [None] if args.seeds is None else [args.seed + k for k in range(args.seeds)]
    sets = dict(_parse_sets(args.set))
    try:
        configs = config_paths(args.paths)
        points = []
        for c in configs:
            names = args.policy or _default_policies(c)
            points += grid([c], {k: [v] for k, v in sets.items()}, names, seeds)
    except FileNotFoundError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except (SweepError, _core.ConfigError) as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    try:
        rep = report_sweep(points, args.out, executor=_executor(args), workers=args.workers,
                           plots=not args.no_plots, html=not args.no_html, progress=not args.quiet)
    except SweepError as e:
        # Every point is checked before the first runs (issue 25 defect 6), so nothing ran.
        raise CliError(f"{e} (no config was run)", EXIT_BAD_INPUT) from e
    print(rep.markdown)
    _status(args, f"wrote {len(rep.files)} files to {args.out}")
    for line in rep.failures:
        print(f"{PROG}: {line}", file=sys.stderr)
    if rep.failures:
        raise CliError(f"{len(rep.failures)} run(s) failed (recorded in {args.out}/points; the report has the others)")
    return EXIT_OK


def _default_policies(path: Any) -> list[str]:
    from .system import load_system_config

    own = load_system_config(path).get("policy", {}).get("name", "linux")
    return ["linux"] if own == "linux" else ["linux", own]


# ---------------------------------------------------------------------------------------------
# sweep (and what simulate / report share with it: --set, executors)


def _parse_sets(items: Optional[list[str]]) -> list[tuple[str, Any]]:
    from .sweep import SweepError, parse_set

    try:
        return [parse_set(t) for t in items or []]
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e


def _apply_sets(raw: dict[str, Any], items: Optional[list[str]]) -> None:
    from .sweep import SweepError, set_path

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


def cmd_sweep(args: argparse.Namespace) -> int:
    from .sweep import SweepError, load_spec, sweep

    try:
        points = load_spec(args.spec)
    except FileNotFoundError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    except OSError as e:
        raise CliError(f"cannot read {args.spec}: {e.strerror or e}", EXIT_BAD_INPUT) from e
    out = args.out or str(Path(args.spec).with_suffix("")) + "-sweep"
    try:
        res = sweep(points, out, executor=_executor(args), workers=args.workers, progress=not args.quiet)
    except SweepError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    _status(args, f"{len(res.points)} points: {len(res.ran)} run now, {len(res.reused)} already done, {len(res.failed)} failed")
    for key in res.failed:
        rec = json.loads((Path(out) / "points" / f"{key}.json").read_text())
        print(f"{PROG}: point failed ({key[:12]}): {rec.get('error')}", file=sys.stderr)
    _status(args, "wrote " + ", ".join(str(f) for f in res.files))
    return EXIT_FAILURE if res.failed else EXIT_OK


def cmd_offload(args: argparse.Namespace) -> int:
    from .offload import run_report

    def ints(v: str, what: str) -> list[int]:
        try:
            out = [int(x) for x in v.split(",") if x.strip()]
        except ValueError:
            out = []
        if not out or any(x < 0 for x in out):
            raise CliError(f"{what} {v!r}: a comma-separated list of non-negative integers", EXIT_BAD_INPUT)
        return out

    triggers = ints(args.triggers, "--triggers")
    migration = ints(args.migration, "--migration")
    cores = ints(args.cores, "--cores")
    if 0 in cores:
        raise CliError("--cores: at least 1 user core", EXIT_BAD_INPUT)
    try:
        text, written = run_report(args.configs, args.out, triggers, migration, cores, not args.no_plots, progress=lambda m: _status(args, m))
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    print(text)
    _status(args, f"wrote {len(written)} files to {args.out}")
    return EXIT_OK


def cmd_oscache_report(args: argparse.Namespace) -> int:
    from . import oscache
    from .progress import ProgressLine

    if args.references is not None and args.references < 1:
        raise CliError("--references: at least 1", EXIT_BAD_INPUT)
    if args.references is not None and args.trace:
        raise CliError("--references applies to workloads; a --trace runs whole", EXIT_BAD_INPUT)
    machines = args.machines
    if not machines:
        d = oscache.examples_dir()
        if d is None:
            raise CliError("examples/oscache not found: name the machine files", EXIT_BAD_INPUT)
        machines = [str(d)]
    sources: list = []
    for w in args.workload or []:
        sources.append((Path(w).stem, oscache.load_workload(w, args.references), None))
    for t in args.trace or []:
        if not Path(t).is_file():
            raise CliError(f"{t}: no such trace file", EXIT_BAD_INPUT)
        sources.append((Path(t).name, None, Path(t)))
    if not sources:
        sources = [(f.stem, oscache.load_workload(f, args.references), None) for f in oscache.preset_workloads()]
    try:
        res = oscache.run_report(
            machines,
            sources,
            args.trace_format,
            progress=lambda m: _status(args, m),
            record_progress=lambda label: ProgressLine(label, quiet=args.quiet),
        )
    except _core.ConfigError as e:
        raise CliError(f"{e}", EXIT_BAD_INPUT) from e
    text, written = oscache.write_report(res, args.out, not args.no_plots)
    print(text)
    _status(args, f"wrote {len(written)} files to {args.out}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(out_dir=args.out, backend=args.backend, source_dir=args.source, quiet=args.quiet)


def cmd_examples(args: argparse.Namespace) -> int:
    """Where the bundled examples are (data.py): the directory, or the file NAME inside it."""
    from .data import example, examples_dir

    root = examples_dir()
    if root is None:
        raise CliError("the bundled examples are missing from this installation (reinstall cachecolor)", EXIT_FAILURE)
    if args.name is None:
        print(root)
        return EXIT_OK
    path = example(*Path(args.name).parts)
    if not path.exists():
        names = ", ".join(sorted(d.name for d in root.iterdir() if d.is_dir()))
        raise CliError(f"{args.name}: no such bundled example (directories: {names})", EXIT_BAD_INPUT)
    print(path)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# parser and main


def cmd_workloads(args: argparse.Namespace) -> int:
    """`cachecolor workloads ...`: the real-program suite (cachecolor.workloads, issue 21)."""
    from . import workloads

    return workloads.cli(args, lambda msg: CliError(msg, EXIT_BAD_INPUT))


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
    s.add_argument("--format", choices=FORMATS, help="format of --trace (default: told from its content)")
    s.add_argument("--json", metavar="OUT", help="write the results (per-level stats, effective config, version) as JSON")
    s.add_argument("--seed", type=int, metavar="N", help="seed for the workload and random replacement (overrides the config)")
    s.add_argument("--policy", metavar="NAME", help=f"system configs: the OS policy to run: a built-in one ({', '.join(POLICIES)}), "
        "or one written in Python as module:Class or path/file.py:Class (docs/policies.md)")
    s.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a config field by its path, e.g. machine.hierarchy.levels[2].size=8MiB (repeatable)")
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
    i.add_argument("--format", choices=FORMATS, help="format of FILE (default: told from its content)")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    _quiet(i)
    i.set_defaults(func=cmd_trace_info)

    fl = tsub.add_parser(
        "filter",
        help="copy the records passing every given criterion (kinds, threads, address ranges, mode) to a native trace",
    )
    fl.add_argument("input", metavar="IN")
    fl.add_argument("output", metavar="OUT", help="native trace to write")
    fl.add_argument("--format", choices=FORMATS, help="format of IN (default: told from its content)")
    fl.add_argument("--kinds", metavar="K,K", help="keep these kinds only: load, store, ifetch, modify (or L, S, I, M)")
    fl.add_argument("--no-ifetch", action="store_true", help="drop instruction fetches")
    fl.add_argument("--threads", metavar="T,T", help="keep these thread ids only")
    fl.add_argument("--range", type=_address_range, action="append", metavar="START:END", help="keep addresses in [START, END) (repeat: any of them)")
    mode = fl.add_mutually_exclusive_group()
    mode.add_argument("--privileged", action="store_true", help="keep kernel-mode records only")
    mode.add_argument("--user", action="store_true", help="keep user-mode records only")
    _quiet(fl)
    fl.set_defaults(func=cmd_trace_filter)

    k = tsub.add_parser("capture", help="run a program and capture its memory references into a native trace")
    k.add_argument("-o", "--output", required=True, metavar="OUT", help="native trace to write")
    k.add_argument("--backend", choices=BACKENDS, default="auto", help="auto (qemu if installed, else lackey), qemu or lackey")
    k.add_argument("--no-ifetch", action="store_true", help="do not record instruction fetches")
    k.add_argument("--max-records", type=int, metavar="N", help="stop the program after N records")
    k.add_argument(
        "--syscalls",
        action="store_true",
        help="qemu only: turn each system call into privileged records (a marker with its identity, the user buffers it "
        "reads or writes) for 'cachecolor oscache'",
    )
    # Full-system capture (fullsys.py, docs/capture.md "Full-system capture").
    k.add_argument("--system", action="store_true", help="boot a Linux guest (qemu-system-x86_64) and trace the kernel's and the program's references")
    k.add_argument("--kernel", metavar="VMLINUZ", help="with --system: kernel image to boot (default: the newest /boot/vmlinuz-*)")
    k.add_argument("--guest-file", action="append", default=[], metavar="PATH", help="with --system: copy this host file or tree into the guest at the same path (repeatable)")
    k.add_argument("--guest-memory", type=int, default=512, metavar="MIB", help="with --system: guest memory in MiB, 64-16384 (default 512)")
    k.add_argument("--boot-timeout", type=float, default=600.0, metavar="S", help="with --system: seconds the guest may take to boot (default 600)")
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

    m = sub.add_parser(
        "mrc",
        help="miss-rate curve of a trace or workload (exact, SHARDS or AET), and per-set stack distance profiles",
        description="The fully associative LRU miss rate at every cache size: exact (Mattson's stack algorithm), "
        "or estimated by SHARDS (--shards RATE, --shards-size N) or AET (--aet RATE). With --sets or "
        "--cache-size/--ways, also the per-set stack distance profiles of that geometry (thesis 5.3): the "
        "set-associative LRU miss rate at every associativity. Sizes are in lines (or pages with --granularity page).",
    )
    m.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (or give --workload)")
    m.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    m.add_argument("--workload", metavar="SPEC", help="a synthetic workload instead of a trace: a TOML/JSON file with seed and [[phases]], or a config with a [workload] table")
    m.add_argument("--json", metavar="OUT", help="write the curve (sizes, miss_rate, metadata) as JSON")
    m.add_argument("--plot", metavar="OUT.png", help="plot the curve (matplotlib) to a PNG file")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--shards", type=float, metavar="RATE", help="SHARDS at a fixed sampling rate in (0, 1], e.g. 0.01")
    g.add_argument("--shards-size", type=int, metavar="N", help="fixed-size SHARDS tracking at most N sampled lines")
    g.add_argument("--aet", type=float, metavar="RATE", help="AET model from references sampled at RATE in (0, 1]")
    m.add_argument("--salts", type=int, default=1, metavar="K", help="SHARDS: K independent samples (salts), min/max band (default 1)")
    m.add_argument("--seed", type=int, default=0, metavar="N", help="first SHARDS salt / AET sampling seed (default 0)")
    m.add_argument("--no-adjust", action="store_true", help="SHARDS: do not apply SHARDS_adj")
    m.add_argument("--granularity", choices=("line", "page"), default="line", help="count lines or pages (default: line)")
    m.add_argument("--line-size", type=int, default=64, metavar="B", help="line size in bytes (default 64)")
    m.add_argument("--page-size", type=int, default=4096, metavar="B", help="page size in bytes for --granularity page (default 4096)")
    size_group = m.add_mutually_exclusive_group()
    size_group.add_argument("--points", type=int, metavar="N", help="report N log-spaced sizes (default 1000)")
    size_group.add_argument("--all-sizes", action="store_true", help="report every size (exact only)")
    m.add_argument("--sets", type=int, metavar="N", help="also profile every set of a cache with N sets (set = line mod N)")
    m.add_argument("--cache-size", type=_size_arg, metavar="B", help="also profile the sets of this cache (with --ways), e.g. 1MiB")
    m.add_argument("--ways", type=int, metavar="A", help="associativity of --cache-size")
    m.add_argument("--max-ways", type=int, metavar="A", help="largest associativity in the per-set profiles (default --ways, else 16)")
    m.add_argument("--rapid", type=int, metavar="WINDOW", help="RapidMRC (Azimi et al. 3.2.2): the L2 curve from a window of WINDOW L1 misses, beside the exact one")
    m.add_argument("--l1-size", type=_size_arg, default=32 << 10, metavar="B", help="--rapid: the L1 whose misses feed it (default 32KiB)")
    m.add_argument("--l1-ways", type=int, default=8, metavar="A", help="--rapid: its associativity (default 8)")
    m.add_argument("--warmup", type=int, default=0, metavar="N", help="--rapid: the window's first N misses only fill the stack (default 0)")
    m.add_argument("--start", type=int, default=0, metavar="N", help="--rapid: skip the first N L1 misses (default 0)")
    _quiet(m)
    m.set_defaults(func=cmd_mrc)

    pp = sub.add_parser(
        "profile",
        help="page-level cache profile of a trace (ROCS 3): per page accesses, misses and miss rate at a level, "
        "the PMU sampler's estimate, regions",
        description="Run a trace (or the config's [workload]) through the config's hierarchy and count, per "
        "virtual page, the data accesses reaching --level and the misses there. With --sample-period N, also "
        "the estimate a PMU sampler would build from one L1D miss in N with its data source (ROCS 3.1).",
    )
    pp.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (default: the config's [workload])")
    pp.add_argument("--config", required=True, metavar="CONFIG", help="simulation config with the [hierarchy] (cache-only)")
    pp.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    pp.add_argument("--level", metavar="NAME", help="the level profiled, by name (default: the hierarchy's last level)")
    pp.add_argument("--page-size", type=int, default=4096, metavar="B", help="page size (default 4096)")
    pp.add_argument("--sample-period", type=int, metavar="N", help="also estimate from one L1D miss in N (ROCS 3.1)")
    pp.add_argument("--region-tolerance", type=float, default=0.15, metavar="D", help="miss-rate difference within a region (default 0.15)")
    pp.add_argument("--region-gap", type=int, default=1, metavar="P", help="pages a region may skip between members (default 1: adjacent)")
    pp.add_argument("--min-accesses", type=int, default=1, metavar="N", help="pages with fewer accesses stay out of regions (default 1)")
    pp.add_argument("--min-share", type=float, default=0.01, metavar="F", help="list regions with at least this share of the accesses (default 0.01)")
    pp.add_argument("--json", metavar="OUT", help="write every page and region as JSON")
    pp.add_argument("--csv", metavar="OUT", help="write the per-page table as CSV")
    pp.add_argument("--plot", metavar="PREFIX", help="write PREFIX-histogram.png (Figure 2) and PREFIX-address-space.png (Figure 3)")
    _quiet(pp)
    pp.set_defaults(func=cmd_profile)

    q = sub.add_parser(
        "sdp",
        help="physically aware per-set stack distance profiles: a trace's sets through a page placement vs naive (thesis 5.3.1)",
        description="Profile a trace's per-set LRU stack distances for a cache twice: naively (virtual addresses "
        "index the sets, as if pages were physically contiguous) and through a page placement (a simulated "
        "allocator's frames given at first touch, or a page map from /proc/PID/pagemap as CSV with vpn,pfn "
        "columns); print the miss rate at every associativity and their ratio. --sweep runs the thesis's "
        "Figure 5.5 experiment instead: uniform workloads of several sizes, several seeds, the ratio's median "
        "and maximum per working set.",
    )
    q.add_argument("trace", nargs="?", metavar="TRACE", help="trace file (or --workload, or --sweep)")
    q.add_argument("--format", choices=FORMATS, help="format of TRACE (default: told from its content)")
    q.add_argument("--workload", metavar="SPEC", help="a synthetic workload file instead of a trace")
    q.add_argument("--sweep", action="store_true", help="the Figure 5.5 sweep over working-set sizes (uniform workloads)")
    q.add_argument("--cache-size", type=_size_arg, required=True, metavar="B", help="cache size, e.g. 8MiB")
    q.add_argument("--ways", type=int, required=True, metavar="A", help="associativity")
    q.add_argument("--line-size", type=int, default=64, metavar="B", help="line size (default 64)")
    q.add_argument("--page-size", type=int, default=4096, metavar="B", help="page size (default 4096)")
    q.add_argument("--placement", default="random", metavar="ALLOCATOR", help="simulated allocator giving frames at first touch: random (default), buddy, bin-hopping, sequential, contiguous, color-pool")
    q.add_argument("--pagemap", metavar="CSV", help="a fixed page map instead (columns vpn,pfn; e.g. from cachecolor.read_pagemap)")
    q.add_argument("--seed", type=int, default=1, metavar="N", help="allocator seed (with --sweep: the first seed; default 1)")
    q.add_argument("--seeds", type=int, default=5, metavar="N", help="--sweep: seeds per working set (default 5)")
    q.add_argument("--working-sets", type=lambda t: [_size_arg(v) for v in t.split(",")], metavar="B,B,...", help="--sweep: working-set sizes (default 0.25x to 4x the cache)")
    q.add_argument("--refs-per-line", type=int, default=20, metavar="N", help="--sweep: references per line of the working set (default 20)")
    q.add_argument("--json", metavar="OUT", help="write the miss rates (and placement) as JSON")
    q.add_argument("--plot", metavar="OUT.png", help="plot them (matplotlib)")
    _quiet(q)
    q.set_defaults(func=cmd_sdp)

    r = sub.add_parser(
        "report",
        help="run system configs under several policies and seeds and compare them in tables and plots",
        description="Run every system config (a directory stands for its *.toml files) under every --policy "
        "(default: linux and the config's own [policy] name) and seed, then print and write the comparison "
        "table and each policy's own tables (CSV, report.md) and plots (PNG) into --out.",
    )
    r.add_argument("paths", nargs="+", metavar="CONFIG|DIR", help="system configs, or directories of them")
    r.add_argument("--policy", action="append", metavar="NAME", help=f"a policy to run (repeat for several): {', '.join(POLICIES)}")
    r.add_argument("--seeds", type=int, metavar="N", help="run N seeds each: --seed, --seed + 1, ... (default: the configs' own)")
    r.add_argument("--seed", type=int, default=1, metavar="S", help="first seed with --seeds (default 1)")
    r.add_argument("--out", default="cachecolor-report", metavar="DIR", help="directory for the CSV, report.md and plots (default: cachecolor-report)")
    r.add_argument("--no-plots", action="store_true", help="tables only")
    r.add_argument("--no-html", action="store_true", help="no report.html")
    r.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a field of every config by its path (repeatable)")
    _sweep_options(r)
    _quiet(r)
    r.set_defaults(func=cmd_report)

    sw = sub.add_parser(
        "sweep",
        help="run a grid or list of whole-system runs (configs x field-path overrides x policies x seeds) in parallel into one table",
        description="Run every point of SPEC.toml (docs/sweep.md) that OUT does not hold yet, on a local process pool "
        "or a Dask cluster, and write OUT/results.parquet, OUT/results.csv and each point's JSON in OUT/points.",
    )
    sw.add_argument("spec", metavar="SPEC.toml", help="the sweep: configs, [parameters], policies, seeds, [[points]]")
    sw.add_argument("--out", metavar="DIR", help="results directory (default: SPEC-sweep beside the spec)")
    _sweep_options(sw)
    _quiet(sw)
    sw.set_defaults(func=cmd_sweep)

    o = sub.add_parser(
        "offload",
        help="OS off-load to an OS core (Nellans et al. section 4): predictor accuracy, IPC vs trigger N and migration cost",
    )
    o.add_argument("configs", nargs="+", metavar="CONFIG", help="off-load configs ([offload] + [workload], examples/oscache/offload-*.toml)")
    o.add_argument("--triggers", default="0,100,500,1000,5000,10000", metavar="N,N,...", help="fixed triggers N to sweep")
    o.add_argument("--migration", default="100,1000,5000,10000", metavar="C,C,...", help="migration costs (cycles each way) to sweep")
    o.add_argument("--cores", default="1,2,4", metavar="K,K,...", help="user cores sharing the OS core (scalability runs)")
    o.add_argument("--out", default="cachecolor-offload", metavar="DIR", help="directory for offload.json, offload.md and plots")
    o.add_argument("--no-plots", action="store_true", help="tables only")
    _quiet(o)
    o.set_defaults(func=cmd_offload)
    os_ = sub.add_parser(
        "oscache",
        help="OS/user cache interference on the paper's uniprocessor (Nellans et al. sections 3, 5): characterisation, split L2",
    )
    ossub = os_.add_subparsers(dest="oscache_cmd", metavar="SUBCOMMAND", parser_class=_Parser)
    ossub.required = True
    osr = ossub.add_parser(
        "report",
        help="run machines x workloads (or traces): Figures 1-3 and the IPC table relative to the baseline",
        description="Run every machine (examples/oscache/*.toml: the 1 MB baseline and the split OS/user L2s) on the "
        "synthetic presets (web-server, jvm, compute), --workload files or --trace files (they must carry privileged "
        "records); print the characterisation (privileged share, run lengths, OS-caused evictions by run length) and "
        "the IPC relative to the baseline; write oscache.json, oscache.csv, oscache.md and the plots to --out.",
    )
    osr.add_argument("machines", nargs="*", metavar="MACHINE", help="machine files or directories (default: examples/oscache)")
    osr.add_argument("--workload", action="append", metavar="TOML", help="a workload file to run (repeat; default: the presets)")
    osr.add_argument("--trace", action="append", metavar="FILE", help="a trace with privileged records to run (repeat)")
    osr.add_argument("--trace-format", choices=FORMATS, default="native", help="format of the --trace files (default: native)")
    osr.add_argument("--references", type=int, metavar="N", help="records per workload run (default: the workload's own)")
    osr.add_argument("-o", "--out", default="cachecolor-oscache", metavar="DIR", help="directory for oscache.json/.csv/.md and plots")
    osr.add_argument("--no-plots", action="store_true", help="tables only")
    _quiet(osr)
    osr.set_defaults(func=cmd_oscache_report)
    bn = sub.add_parser(
        "bench",
        help="Cachetest on this machine: pointer-chase sweeps over a cache level, co-runs (thesis chapter 4)",
        description="Measure ns per access of a one-load-per-iteration pointer chase over 16 working sets spread over "
        "0.5-1.5x a cache level's sysfs size, --trials fresh buffers each, pinned to one core, with the hardware "
        "counters that exist here (each probed; unsupported ones are reported, never 0). --corun runs 1..N cores "
        "together over the shared level instead. --replot plots earlier --json results.",
    )
    bn.add_argument("--level", choices=["L1", "L2", "L3"], help="the cache level to sweep")
    bn.add_argument("--buffer", choices=["naive", "contiguous", "thp", "hugetlb", "hugetlb-contiguous"], default="naive", help="buffer allocator (default naive)")
    bn.add_argument("--pattern", choices=["uniform", "sequential", "strided", "zipf", "harmonic"], default="uniform", help="access distribution (default uniform)")
    bn.add_argument("--trials", type=int, default=20, metavar="N", help="trials per working set (default 20)")
    bn.add_argument("--duration-ms", type=float, default=25.0, metavar="MS", help="time per trial (default 25)")
    bn.add_argument("--points", type=int, default=16, metavar="N", help="working sets over 0.5-1.5x the level (default 16)")
    bn.add_argument("--sizes", type=lambda t: [_size_arg(v) for v in t.split(",")], metavar="B,B,...", help="explicit working sets instead")
    bn.add_argument("--core", type=int, metavar="CPU", help="CPU to pin to (default: the last available)")
    bn.add_argument("--seed", type=int, default=1, metavar="S", help="chain seed (default 1)")
    bn.add_argument("--alpha", type=float, default=1.0, metavar="A", help="zipf exponent (default 1)")
    bn.add_argument("--reserve-hugepages", action="store_true", help="hugetlb buffers: raise nr_hugepages as needed (root) and restore it afterwards")
    bn.add_argument("--no-counters", action="store_true", help="timing only, no perf_event counters")
    bn.add_argument("--corun", action="store_true", help="synchronised co-runs of 1..N cores over --level instead of a sweep")
    bn.add_argument("--cores", type=int, metavar="N", help="--corun: up to N cores (default: all available)")
    bn.add_argument("--working-set", type=_size_arg, metavar="B", help="--corun: per-thread working set (default: half the level)")
    bn.add_argument("--json", metavar="OUT", help="write the result as JSON (points: working_set_bytes, ns_per_access, ci95, counters)")
    bn.add_argument("--csv", metavar="OUT", help="write one row per point as CSV")
    bn.add_argument("--plot", metavar="OUT.png", help="plot ns per access with 95%% CI bands")
    bn.add_argument("--replot", nargs="+", metavar="JSON", help="plot earlier --json results (any levels and buffers) into --plot")
    _quiet(bn)
    bn.set_defaults(func=cmd_bench)

    pr = sub.add_parser(
        "probe",
        help="does page color matter here? which address bits index each cache level (a few seconds)",
        description="Chase 4 x ways lines at one page offset in pages of one color versus spread colors, for 4 KiB "
        "pages (colors from /proc/self/pagemap, root) and 2 MiB pages (THP or hugetlb), with the L1 data cache as "
        "positive control, and print a verdict.",
    )
    pr.add_argument("--reps", type=int, default=15, metavar="N", help="alternating repetitions per arm (default 15; the verdict uses the 95%% interval of the paired ratios)")
    pr.add_argument("--duration-ms", type=float, default=3.0, metavar="MS", help="time per repetition (default 3)")
    pr.add_argument("--core", type=int, metavar="CPU", help="CPU to pin to (default: the last available)")
    pr.add_argument("--no-huge", action="store_true", help="skip the 2 MiB page test")
    pr.add_argument("--reserve-hugepages", action="store_true", help="let the 2 MiB test reserve hugetlb pages if THP gives none (restored afterwards)")
    pr.add_argument("--json", metavar="OUT", help="write the result as JSON (verdict, levels: name, color_effective)")
    _quiet(pr)
    pr.set_defaults(func=cmd_probe)

    wl = sub.add_parser("workloads", help="the suite of real programs: list, install, build (capture), info, characterize")
    wlsub = wl.add_subparsers(dest="workloads_cmd", metavar="SUBCOMMAND", parser_class=_Parser, required=True)
    for wname, whelp in (("list", "the programs, their packages, inputs and regions"),
                         ("install", "apt-get install the packages the programs need (root)"),
                         ("build", "capture each program's region into the cache (rebuilt when missing)"),
                         ("info", "the cached trace's metadata: command, versions, region, records, hash"),
                         ("characterize", "IPC, LLC MPKI, MRC, page profile, privileged share of each built trace")):
        wc = wlsub.add_parser(wname, help=whelp)
        wc.add_argument("names", nargs="*", metavar="NAME", help="programs (default: all)")
        wc.add_argument("--cache", metavar="DIR", help="cache root (default: $CACHECOLOR_CACHE or ~/.cache/cachecolor)")
        if wname == "build":
            wc.add_argument("--ci", action="store_true", help="the CI subset's short regions")
            wc.add_argument("--force", action="store_true", help="capture again even if cached")
            wc.add_argument("--skip", type=int, metavar="N", help="instructions to fast-forward (default: the program's)")
            wc.add_argument("--records", type=int, metavar="N", help="records to capture (default: the program's)")
        if wname == "characterize":
            wc.add_argument("--plots", metavar="DIR", help="write one plot per program (NAME.png) here")
            wc.add_argument("--markdown", metavar="DOC", help="rewrite the suite table between <!-- suite-table --> markers in DOC")
        wc.set_defaults(func=cmd_workloads)

    d = sub.add_parser("demo", help="trace a small program and simulate it on this machine's caches")
    d.add_argument("--out", default=os.path.join("out", "demo"), metavar="DIR", help="output directory (default: out/demo)")
    d.add_argument("--backend", choices=BACKENDS, default="auto", help="capture backend (default: auto)")
    d.add_argument("--source", metavar="DIR", help="directory with the demo's C program (default: examples/demo)")
    _quiet(d)
    d.set_defaults(func=cmd_demo)

    ex = sub.add_parser(
        "examples",
        help="print where the bundled example configs are (e.g. cachecolor simulate --policy rocs \"$(cachecolor examples rocs/art.toml)\")",
    )
    ex.add_argument("name", nargs="?", metavar="NAME", help="a file or directory inside them (rocs/art.toml, oscache, ...)")
    ex.set_defaults(func=cmd_examples)

    from .annotate import add_parser as add_annotate_parser  # issue 22: the command's own module

    add_annotate_parser(sub)
    return p


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


def _normalise_argv(argv: list[str]) -> tuple[list[str], Optional[list[str]]]:
    """Insert the implicit ``capture`` of ``cachecolor trace -o OUT -- PROG`` and split off the
    traced command after ``--`` (so its own options never reach argparse)."""
    if not argv or argv[0] != "trace":
        return argv, None
    if len(argv) > 1 and argv[1] not in ("convert", "info", "filter", "capture", "-h", "--help"):
        argv = ["trace", "capture", *argv[1:]]
    if len(argv) > 1 and argv[1] == "capture" and "--" in argv:
        k = argv.index("--")
        return argv[:k], argv[k + 1 :]
    return argv, None


# ---------------------------------------------------------------------------------------------
# reliability (docs/reliability.md): the error contract, checks made before any run, signals


EXIT_TERMINATED = 143  # 128 + SIGTERM
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EFBIG}
_ENVIRONMENT_TEXT = ("No space left on device", "Read-only file system", "Disk quota exceeded", "File too large")


def _environment_error(e: OSError) -> bool:
    """An OSError raised from Rust carries its kind only in the text."""
    return any(t in str(e) for t in _ENVIRONMENT_TEXT)


def _safe(text: Any) -> str:
    """``text`` with control characters (ESC, CR, NUL, C1, DEL, ...) escaped, so bytes from an
    input file cannot drive the terminal (defect 7)."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] if c not in "\n\t" else " " for c in s)


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


_POSITIVE_OPTIONS = (("max_ways", "--max-ways"), ("refs_per_line", "--refs-per-line"), ("max_records", "--max-records"))


def _check_args(args: argparse.Namespace) -> None:
    """Checks made before any work, so a bad option or output path costs no run (defects 5, 6)."""
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
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        print(f"{PROG}: error: {_safe(where + _one_line(e.strerror or e))}", file=sys.stderr)
        # A full disk, a read-only or failing filesystem is not bad input (defect 5).
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
