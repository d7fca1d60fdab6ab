"""`cachecolor trace convert|info|filter|capture` (and the short form `trace -o OUT -- PROGRAM`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Optional

from .. import _core
from ..progress import ProgressLine
from ._common import EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, FORMATS, BACKENDS, CliError, _Parser, _quiet, _status, _safe


def add_parser(sub: Any) -> None:
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
    rr = k.add_mutually_exclusive_group()
    rr.add_argument("--record", metavar="LOG", help="with --system: write QEMU's record/replay log of the guest's nondeterministic events to LOG")
    rr.add_argument("--replay", metavar="LOG", help="with --system: replay LOG (written by --record with the same program and files): the same trace every time")
    k.add_argument("command", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS")
    _quiet(k)
    k.set_defaults(func=cmd_trace_capture)


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
    from ..records import KIND_NAMES, kind_codes
    from ..traces import filter_trace

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
    from ..traces import convert_trace

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
    from ..traces import trace_info

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
    from ..fullsys import kernel_note

    note = kernel_note(args.file, args.format)
    rows.append(("kernel code", note if note else "yes: full-system capture (kernel and user references)"))
    from ..fullsys import task_summary

    tasks_line = task_summary(args.file, args.format)
    if tasks_line:
        rows.append(("guest tasks", tasks_line))
    rows.append(("bytes accessed", f"{info['bytes_accessed']:,}"))
    rows.append(("instructions", f"{info['instructions']:,}"))
    if info.get("metadata") not in (None, ""):
        meta = info["metadata"]
        mmap = None
        if isinstance(meta, str) and '"memory_map"' in meta:
            try:
                parsed = json.loads(meta)
                mmap = parsed.pop("memory_map", None) if isinstance(parsed, dict) else None
                meta = parsed
            except ValueError:
                pass
        elif isinstance(meta, dict) and "memory_map" in meta:
            meta = dict(meta)
            mmap = meta.pop("memory_map")
        rows.append(("metadata", _safe(meta if isinstance(meta, str) else json.dumps(meta, sort_keys=True))))
        if isinstance(mmap, dict) and isinstance(mmap.get("mappings"), list):
            # the map in one line (cachecolor.memory_map(trace) has it all)
            from collections import Counter

            kinds = Counter(m.get("kind", "?") for m in mmap["mappings"])
            rows.append(("memory map", f"version {mmap.get('version')}: {len(mmap['mappings'])} mappings ("
                         + ", ".join(f"{n} {k}" for k, n in kinds.most_common())
                         + f"), {mmap.get('events', 0)} changes" + (", spans only" if mmap.get("spans_only") else "")
                         + (", truncated" if mmap.get("truncated") else "")))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")
    return EXIT_OK


def cmd_trace_capture(args: argparse.Namespace) -> int:
    from ..traces import capture

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError("give the program to trace after '--', e.g. cachecolor trace -o out.cctrace -- ./prog args", EXIT_BAD_INPUT)
    if args.system:
        return _trace_capture_system(args, command)
    if args.kernel or args.guest_file or args.record or args.replay:
        raise CliError("--kernel, --guest-file, --record and --replay apply to --system captures", EXIT_BAD_INPUT)
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
    from ..fullsys import capture_system

    if args.backend != "auto" or args.no_ifetch or args.syscalls:
        raise CliError("--system records every instruction of the guest: --backend, --no-ifetch and --syscalls do not apply", EXIT_BAD_INPUT)
    if not 64 <= args.guest_memory <= 16384:
        raise CliError(f"--guest-memory {args.guest_memory}: allowed 64 to 16384 (MiB)", EXIT_BAD_INPUT)
    if not args.boot_timeout > 0:
        raise CliError(f"--boot-timeout {args.boot_timeout}: a positive number of seconds", EXIT_BAD_INPUT)
    if args.max_records is not None and args.max_records < 1:
        raise CliError("--max-records: at least 1", EXIT_BAD_INPUT)
    if args.replay and not os.path.isfile(args.replay):
        raise CliError(f"--replay {args.replay}: no such log (write one with --record and the same program and files)", EXIT_BAD_INPUT)
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
            record=args.record,
            replay=args.replay,
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
