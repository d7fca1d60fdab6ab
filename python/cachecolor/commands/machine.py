"""`cachecolor machine`: a preset's [machine] table, --detect this host, or --list them."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .. import _core
from ..results import text_table
from ._common import EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT, CliError, _quiet, _status


def add_parser(sub: Any) -> None:
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


def _size(n: int) -> str:
    """A cache's size, exactly (``reports.fmt.bytes_``: 1.5 MiB, 1920 KiB)."""
    from ..reports.fmt import bytes_

    return bytes_(n, exact=True)


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
    from .. import presets

    if args.list:
        if args.name or args.detect or args.sysfs:
            raise CliError("--list takes no NAME, --detect or --sysfs", EXIT_BAD_INPUT)
        header, *rows = _machine_rows(presets.machine_summaries())
        print("\n".join(text_table(header, rows, left=len(header), rule=False)))
        width = max(len(r[0]) for r in [header, *rows])
        print(f"{'detect'.ljust(width)}  this host, from sysfs (cachecolor machine --detect)")
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
            # A --sysfs directory that holds no CPU description is bad input (exit 2); this
            # host's own /sys failing is a failure (exit 1).
            if args.sysfs:
                raise CliError(f"--sysfs {args.sysfs}: {str(e).removeprefix('detect: ')}", EXIT_BAD_INPUT) from e
            raise CliError(f"cannot describe this host: {str(e).removeprefix('detect: ')}", EXIT_FAILURE) from e
        raise CliError(str(e), EXIT_BAD_INPUT) from e
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK
