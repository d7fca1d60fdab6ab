"""``cachecolor demo``: the first end-to-end run on the defaults (``make demo``).

Steps: first the papers' system at work: examples/rocs/art.toml (an art-shaped program on ROCS's
PowerPC 970FX) simulated under ``linux`` and ``rocs``, the comparison and ROCS tables printed and
the report written to ``OUT/rocs/`` (``reports.rocs.demo``); then compile examples/demo/transpose.c with the system C compiler; capture its memory
references twice (``naive`` and ``blocked`` transpose of a 512 x 512 matrix of doubles) with
``Backend.auto`` (QEMU user mode with cachecolor's plugin when installed, else Valgrind lackey);
simulate both traces on a preset of this machine's cache hierarchy (``presets.detect()``, or
examples/demo/demo.toml when sysfs cannot be read); print a per-level table for each and a
comparison; write everything to ``OUT/results.json`` (atomically).

Contract: finishes in seconds (about 3 M records per variant); needs a C compiler and one of
qemu-user / valgrind, and says so in one line if either is missing (exit code 1). Results are
deterministic for a given binary and machine preset (QEMU's address layout can differ from a
native run; docs/capture.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from . import _core, presets
from .commands._common import CliError, EXIT_BAD_INPUT
from .commands.trace import _capture_line
from .config import load_config
from .data import example
from .progress import ProgressLine
from .reports.fmt import bytes_
from .results import format_table, write_json_atomic
from .simulation import simulate
from .traces import capture

VARIANTS = ("naive", "blocked")
MATRIX = 512


def _find_source(source_dir: Optional[str]) -> Path:
    candidates = [Path(source_dir)] if source_dir else [
        Path.cwd() / "examples" / "demo",
        # The copy inside the package (cachecolor/examples: data.py), from any directory.
        example("demo"),
    ]
    for c in candidates:
        if (c / "transpose.c").is_file():
            return c
    where = " or ".join(str(c) for c in candidates)
    raise CliError(f"demo program not found (looked for transpose.c in {where}); pass --source DIR", EXIT_BAD_INPUT)


def _compile(src: Path, out_dir: Path) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise CliError("no C compiler found (install gcc, or set CC) to build the demo program")
    exe = out_dir / "transpose"
    cmd = [cc, "-O2", "-fno-tree-vectorize", "-o", str(exe), str(src / "transpose.c")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CliError(f"compiling the demo program failed: {' '.join(cmd)}: {done.stderr.strip()}")
    return exe


def _machine(source: Path) -> tuple[dict[str, Any], str]:
    host = presets.host_hierarchy()
    if host is not None:
        return host, presets.describe_source()
    return load_config(source / "demo.toml"), f"built-in preset {source / 'demo.toml'} (this machine's caches could not be read)"


def _say(quiet: bool, msg: str = "") -> None:
    if not quiet:
        print(msg, file=sys.stderr)


def run_demo(out_dir: str = "out/demo", backend: str = "auto", source_dir: Optional[str] = None, quiet: bool = False) -> int:
    started = time.monotonic()
    src = _find_source(source_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    art = src.parent / "rocs" / "art.toml"
    if art.is_file():
        from .reports import rocs as report_rocs

        report_rocs.demo(art, out / "rocs", quiet=quiet)
        print()
    exe = _compile(src, out)
    config, machine = _machine(src)
    names = ", ".join(f"{lv['name']} {bytes_(lv['size'])} {lv['ways']}-way" for lv in config["hierarchy"]["levels"])
    print(f"cachecolor {_core.__version__} demo: transpose a {MATRIX}x{MATRIX} matrix of doubles, naively and in 8x8 tiles")
    print(f"caches: {names} ({machine})")

    runs: dict[str, Any] = {}
    for variant in VARIANTS:
        trace = out / f"{variant}.cctrace"
        progress = ProgressLine(f"capture {variant}", quiet=quiet)
        try:
            summary = capture([str(exe), variant, str(MATRIX)], trace, backend, progress=progress)
        except _core.CaptureError as e:
            raise CliError(f"capture of the demo program failed: {e}") from e
        finally:
            progress.close()
        _say(quiet, _capture_line(summary))
        progress = ProgressLine(f"simulate {variant}", quiet=quiet)
        try:
            result = simulate(config, trace, "native", progress)
        finally:
            progress.close()
        doc = result.to_dict()
        doc["capture"] = summary
        runs[variant] = doc
        print()
        print(f"{variant} transpose: {result.records:,} records ({summary['backend']} capture)")
        print(format_table(doc))
        if result.invariants:
            raise CliError(f"invariants violated in the {variant} run: {'; '.join(result.invariants)}")

    comparison = _compare(runs)
    print()
    for line in comparison["lines"]:
        print(line)
    doc = {
        "version": _core.__version__,
        "program": {"source": str(src / "transpose.c"), "binary": str(exe), "matrix": MATRIX},
        "machine": machine,
        "config": config,
        "runs": runs,
        "comparison": comparison["by_level"],
    }
    results = out / "results.json"
    write_json_atomic(results, doc)
    print(f"\nwrote {results} (traces in {out}/) in {time.monotonic() - started:.1f} s")
    return 0


def _compare(runs: dict[str, Any]) -> dict[str, Any]:
    naive = {lv["name"]: lv for lv in runs["naive"]["levels"]}
    blocked = {lv["name"]: lv for lv in runs["blocked"]["levels"]}
    by_level = {}
    lines = ["naive vs blocked (data-side demand misses; the transpose is the only difference):"]
    for name, lv in naive.items():
        b = blocked[name]
        data_n = lv["load"]["misses"] + lv["store"]["misses"] + lv["modify"]["misses"]
        data_b = b["load"]["misses"] + b["store"]["misses"] + b["modify"]["misses"]
        by_level[name] = {"naive_misses": lv["misses"], "blocked_misses": b["misses"], "naive_data_misses": data_n, "blocked_data_misses": data_b}
        if data_n == 0 and data_b == 0:
            continue
        if data_b and 0.95 <= data_n / data_b <= 1.05:
            ratio = "about the same"
        elif data_b and data_n > data_b:
            ratio = f"{data_n / data_b:.1f}x fewer with blocking"
        elif data_n:
            ratio = f"{data_b / data_n:.1f}x more with blocking"
        else:
            ratio = "only the blocked run misses"
        lines.append(f"  {name:<4} {data_n:>10,} vs {data_b:>10,}  ({ratio})")
    return {"by_level": by_level, "lines": lines}
