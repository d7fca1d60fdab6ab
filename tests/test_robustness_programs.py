"""Captured real programs in the robustness matrix (issue 19, "what must be shown"; docs/rocs.md
"Robustness matrix: captured real programs").

Four small C programs of examples/robustness/programs/ are compiled here, captured with
``cachecolor trace capture`` (the command line each config's header gives, so the test and the
docs capture the same region) and run alone and in pairs on the PowerPC 970FX, under ``linux``
and the policies, on aged placements (``[memory] aged``, docs/system.md "Placement") over
seeds 1-5. Every comparison is against ``linux`` on the same placement.

- **Nothing to gain** (nothing targeted, nothing shared that costs anything, everything fits):
  a table lookup (at 160 KiB, and at 496 KiB: 97% of the LLC), a pointer chase and a matrix
  multiply alone, the lookup beside the chase,
  and a single process under the policies that divide a cache between processes. The policy's
  IPC is at least ``NO_HARM`` x linux's for every process and in sum, on every seed.
- **A claimed gain** (ROCS 3.2.2: a stream beside a reused table, alone; and the stream beside
  a table lookup of another process, which every policy here claims to help: the pollute
  buffer keeps the stream away from the table, Azimi 5.3 and COLORIS partition the cache
  between programs of different reuse): the summed IPC beats linux's on every seed, and for
  the policies whose mechanism is moving pages (rocs, global-pollute) it beats the policy's
  control run (the same colors, no page moved) too, so the gain is the mechanism's and not
  its placement's.

Where a policy fails its bar the case is an expected failure carrying the measured figures;
the bar is not relaxed. ``mrc-partition`` is judged on its behaviour at the time of writing
(its decision rule is being changed in parallel).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor
from conftest import REPO, needs_cc

PROGRAMS_DIR = REPO / "examples" / "robustness" / "programs"
POLICIES = ("rocs", "global-pollute", "mrc-partition", "coloris")
#: Policies whose mechanism moves pages, so that their control run (colors kept, nothing moved)
#: separates the mechanism from its placement side effects.
MOVERS = ("rocs", "global-pollute")
SEEDS = (1, 2, 3, 4, 5)
#: Issue 19's bar for a policy with nothing to gain.
NO_HARM = 0.99

needs_capture = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None and shutil.which("valgrind") is None,
    reason="no capture back end (apt-get install qemu-user, or valgrind)",
)
pytestmark = [needs_cc, needs_capture]


#: The environment a captured program runs in (see `captured`): the same on every machine but
#: HOME, where the capture keeps its heap shim.
CAPTURE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C", "HOME": os.environ.get("HOME", "/root")}


def capture_command(config: str) -> tuple[str, list[str]] | None:
    """The program and arguments a config's header captures (``-- ./PROGRAM ARGS``), or None
    for a config that reads other configs' traces (the pairs)."""
    text = (PROGRAMS_DIR / f"{config}.toml").read_text()
    found = re.search(r"^#.*trace capture .* -- \./(\w+)( .*)?$", text, re.MULTILINE)
    return (found.group(1), (found.group(2) or "").split()) if found else None


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    """A directory holding every config of examples/robustness/programs/ and, beside them (a
    config's trace path is relative to its own directory), the trace each one-program config
    captures, named after the config."""
    out = tmp_path_factory.mktemp("robustness-programs")
    cli = [str(Path(sys.executable).parent / "cachecolor")]
    if not Path(cli[0]).exists():  # pragma: no cover - outside a venv
        cli = [sys.executable, "-m", "cachecolor"]
    for source in PROGRAMS_DIR.glob("*.c"):
        subprocess.run(["cc", "-O2", "-o", str(out / source.stem), str(source)], check=True)
    for config in sorted(PROGRAMS_DIR.glob("*.toml")):
        shutil.copy(config, out / config.name)
        command = capture_command(config.stem)
        if command is None:
            continue
        program, args = command
        # The program's stack holds its argv and environment, so their lengths move its stack
        # addresses and the pages and colors they fall on: capture it as the config's header
        # does (./PROGRAM from its directory) under a fixed environment, so that the trace, and
        # every result on it, is the same in any checkout, temporary directory and shell.
        run = subprocess.run(
            [*cli, "trace", "capture", "--no-ifetch", "-q", "-o", f"{config.stem}.cctrace", "--", f"./{program}", *args],
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=out, env=CAPTURE_ENV,
        )
        assert run.returncode == 0, run.stderr
    return out


_RUNS: dict[tuple[str, str, str, int], tuple[float, ...]] = {}


def ipcs(captured: Path, config: str, policy: str, seed: int) -> tuple[float, ...]:
    """Each process's IPC of ``config`` under ``policy`` on the aged placement of ``seed`` (runs
    are shared between the tests of this module)."""
    key = (str(captured), config, policy, seed)
    if key not in _RUNS:
        cfg = cachecolor.system.load_system_config(captured / f"{config}.toml")
        cfg = copy.deepcopy(cfg)
        cfg["memory"]["aged"] = True
        result = cachecolor.simulate_system(cfg, policy=policy, seed=seed).to_dict()
        assert result["invariants"] == [], (config, policy, seed, result["invariants"])
        _RUNS[key] = tuple(p["ipc"] for p in result["processes"])
    return _RUNS[key]


def against_linux(captured: Path, config: str, policy: str, seed: int) -> tuple[list[float], float]:
    """(each process's IPC over linux's, the summed IPC over linux's) on one placement."""
    mine, linux = ipcs(captured, config, policy, seed), ipcs(captured, config, "linux", seed)
    return [m / l for m, l in zip(mine, linux)], sum(mine) / sum(linux)


def fmt(each: list[float], total: float) -> str:
    return f"each {', '.join(f'{x:.4f}' for x in each)}; sum {total:.4f}"


def xfail(reason: str, strict: bool = True):
    return pytest.mark.xfail(reason=reason, strict=strict)


# Measured 2026-11-24 (aged placement, seeds 1-5; the ratios are policy / linux).
NOTHING_TO_GAIN = [
    *[(config, policy)
      for config in ("lookup_fits", "lookup_just_fits", "list_walk", "matmul", "pair-lookup-list")
      for policy in POLICIES],
    # One process: nothing for a policy that divides the cache between processes.
    ("stream_table", "mrc-partition"),
    ("stream_table", "coloris"),
]


@pytest.mark.parametrize("config,policy", NOTHING_TO_GAIN)
def test_captured_program_no_harm_where_nothing_to_gain(captured, config, policy):
    harmed = []
    for seed in SEEDS:
        each, total = against_linux(captured, config, policy, seed)
        if min(each) < NO_HARM or total < NO_HARM:
            harmed.append(f"seed {seed}: {fmt(each, total)}")
    assert not harmed, f"{config} under {policy} below {NO_HARM} x linux: {harmed}"


CLAIMED_GAIN = [
    # ROCS 3.2.2 alone: the stream's pages into the pollute buffer, the table keeps the rest.
    ("stream_table", "rocs"),
    ("stream_table", "global-pollute"),
    *[
        pytest.param(config, policy, marks=mark)
        for config in ("pair-stream-lookup", "pair-lookup-stream")
        for policy, mark in (
            ("rocs", xfail(
                "rocs gains on the stream but costs the lookup more in the summed IPC (the "
                "lookup's IPC is 0.5, the stream's 0.03). After the search's fixes (significance, "
                "budget, colors taken when a search begins; docs/rocs.md), seed 1: stream first "
                "1.0632 / 0.9692 (sum 0.9756), lookup first 0.9560 / 1.0716 (sum 0.9638). Before "
                "them the lookup-first run fell to 0.455 x linux (its table searched into the "
                "buffer). The lookup is not targeted when it runs second; it waits behind the "
                "stream's page copies for memory bandwidth")),
            ("global-pollute", []),
            ("mrc-partition", xfail(
                "mrc-partition as of 2026-11-24 affords no profiling window in a run this short "
                "(docs/azimi.md 'Doing no harm'), so it never partitions: 1.0000 x linux on "
                "every seed; the net-gain rule (always_partition = false, docs/azimi.md) would "
                "only decide after a window",
                strict=False)),
            # Was an expected failure until coloris gave an exited process's colors to the next
            # hot process (issue 19; COLORIS 3.2 "isCold is set when extra page colors are
            # available"): the stream then ran its other ~380 M cycles in half the cache.
            ("coloris", []),
        )
    ],
]


@pytest.mark.parametrize("config,policy", CLAIMED_GAIN)
def test_captured_program_claimed_gain_holds_on_every_seed(captured, config, policy):
    # The gain must hold on every seed, so the first seed where it does not decides (and spares
    # the remaining runs: the CI budget).
    for seed in SEEDS:
        each, total = against_linux(captured, config, policy, seed)
        assert total > 1.0, f"{config} under {policy}, seed {seed}: no gain over linux: {fmt(each, total)}"
        if policy in MOVERS:
            _, control = against_linux(captured, config, f"{policy}+control", seed)
            assert total > control, (
                f"{config} under {policy}, seed {seed}: the gain is not the mechanism's: "
                f"{fmt(each, total)}; {policy}+control sum {control:.4f}"
            )
