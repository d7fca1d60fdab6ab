"""`cachecolor simulate`: a trace or workload on a cache hierarchy, or a whole system."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import _core
from ..config import load_config, with_seed
from ..progress import ProgressLine
from ._common import PROG, EXIT_OK, EXIT_BAD_INPUT, FORMATS, POLICIES, CliError, _quiet, _status, _safe, _load_config, _apply_sets


def add_parser(sub: Any) -> None:
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


def _report(args: argparse.Namespace, result: Any) -> int:
    """Print a result's table, write --json, and fail if an invariant was violated."""
    print(result.table())
    if result.invariants:
        # Results that broke an invariant are not results: --json is not written.
        for problem in result.invariants:
            print(f"{PROG}: invariant violated: {_safe(problem)}", file=sys.stderr)
        raise CliError(f"{len(result.invariants)} invariant(s) violated (a simulator bug: please report it); --json not written")
    if args.json:
        result.to_json(args.json)
        _status(args, f"wrote {args.json}")
    return EXIT_OK


def cmd_simulate_system(args: argparse.Namespace, config: dict[str, Any]) -> int:
    from ..system import simulate_system

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
    _validation_note(args.config, config)
    return code


def _validation_note(config_path: str, config: dict[str, Any]) -> None:
    """Where the machine's timing was validated against hardware, or that it was not."""
    from ..validate import validation_note

    try:
        text = Path(config_path).read_text(errors="replace")
    except OSError:
        text = ""
    print(validation_note(config, text))


def _kernel_notes(config_path: str, config: dict[str, Any]) -> None:
    """The one-line honesty note for each trace-fed thread whose trace holds no kernel code,
    and for a full-system trace with task identity, who ran its instructions."""
    from ..fullsys import kernel_note, task_summary
    from ..system import config_threads

    base = Path(config_path).parent
    for p, t in config_threads(config):
        if "trace" in t:
            path = base / t["trace"] if (base / t["trace"]).exists() else Path(t["trace"])
            note = kernel_note(path, t.get("format", "native"))
            if note:
                print(f"{p.get('name', '?')}: {note}")
            tasks_line = task_summary(path, t.get("format", "native"))
            if tasks_line:
                print(f"{p.get('name', '?')}: {tasks_line}")


def _policy_warnings(result: Any) -> None:
    """Print the policy's own warnings (`policy_report.warnings`: a setting overridden, a
    policy that never acted) on stderr, so nothing it changed or skipped is silent."""
    for w in result.warnings():
        print(f"{PROG}: warning: {w}", file=sys.stderr)


def cmd_simulate(args: argparse.Namespace) -> int:
    from ..simulation import simulate
    from ..system import is_system_config, load_system_config

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
        from .. import presets

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
