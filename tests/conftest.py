"""Shared fixtures for the Python tests (run by `make test` inside .venv).

- ``repo``: the repository root; ``examples``: examples/.
- ``run_cli(*args)``: runs the installed console script (``.venv/bin/cachecolor``, the file
  beside the interpreter running pytest) as a subprocess and returns the CompletedProcess, so
  the CLI is tested exactly as a user runs it: exit codes, stdout, stderr.
- ``din_trace`` / ``native_trace``: small traces written into the test's tmp_path.
- ``needs_qemu`` / ``needs_valgrind`` / ``needs_cc``: skip markers that fire only when the tool
  is truly absent from PATH, saying which tool and how to install it.
- ``interruptible(cmd, **popen_kwargs)``: start a child a test will send SIGINT, with SIGINT at
  its default disposition (``sigint_default``): a shell that runs ``make test &`` (non-interactive,
  nohup, a CI runner) starts every child with SIGINT ignored, and a child started so would never
  see the test's Ctrl-C.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _script() -> list[str]:
    script = BIN / "cachecolor"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "cachecolor"]  # pragma: no cover - outside a venv


def sigint_default() -> None:
    """``preexec_fn``: SIGINT back to its default disposition in the child (see the module doc)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(cmd: list[str], **kwargs: Any) -> "subprocess.Popen[Any]":
    """``subprocess.Popen(cmd, **kwargs)`` for a child the test will interrupt."""
    return subprocess.Popen(cmd, preexec_fn=sigint_default, **kwargs)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def examples() -> Path:
    return REPO / "examples"


@pytest.fixture
def run_cli(tmp_path):
    # The timeout only guards against a hang: on a shared, loaded machine (or with `make test` as a
    # niced background job) a run of seconds can take minutes, and that is not a failure.
    def run(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("CACHECOLOR_DEBUG", None)
        return subprocess.run(
            [*_script(), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd or tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    return run


def write_din(path: Path, rng_seed: int = 7, n: int = 20_000) -> Path:
    """A Dinero din trace: label 0 read, 1 write, 2 instruction fetch; hex addresses."""
    rng = np.random.default_rng(rng_seed)
    labels = rng.choice([0, 0, 0, 1, 2], size=n)
    addrs = rng.integers(0, 256 << 10, size=n) & ~np.int64(7)
    path.write_text("".join(f"{lab} {addr:x}\n" for lab, addr in zip(labels, addrs)))
    return path


def assert_one_line_error(out, code: int = 2) -> str:
    """Exit ``code`` and exactly one stderr line ``cachecolor: error: ...`` (no traceback)."""
    assert out.returncode == code, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("cachecolor: error: "), lines[0]
    return lines[0]


def two_level_machine(cores: object = 1, l1: str = "32KiB", l1_ways: int = 8, llc: str = "256KiB",
                      llc_ways: int = 16) -> str:
    """The ``[machine]`` tables of the tests' small machines: an L1D and an LLC of the given sizes
    and ways, 4 and 40 cycles, DRAM at 200, the timing table left open for more keys (``cores``
    may be a ``{cores}`` placeholder for a later ``str.format``)."""
    return f"""
[machine.hierarchy]
cores = {cores}
[[machine.hierarchy.levels]]
name = "L1D"
size = "{l1}"
ways = {l1_ways}
[[machine.hierarchy.levels]]
name = "LLC"
size = "{llc}"
ways = {llc_ways}

[machine.timing]
level_latency = [4, 40]
dram_latency = 200
"""


# A one-core machine (32 KiB L1D, 256 KiB LLC) running one process "p" whose one thread is fed by
# a trace (test_package: paths relative to the config; test_reliability: hostile traces).
ONE_CORE_MACHINE = two_level_machine()
SYSTEM_WITH_TRACE = ONE_CORE_MACHINE + """
[memory]
ram = "64MiB"

[[processes]]
name = "p"
[[processes.threads]]
trace = "{trace}"
"""


def system_with_trace(trace: object) -> str:
    """SYSTEM_WITH_TRACE reading ``trace`` (a path, as the config should spell it)."""
    return SYSTEM_WITH_TRACE.format(trace=trace)


@pytest.fixture
def din_trace(tmp_path) -> Path:
    return write_din(tmp_path / "small.din")


@pytest.fixture
def native_trace(tmp_path) -> Path:
    import cachecolor

    rng = np.random.default_rng(3)
    n = 150_000  # three blocks of 65,536 records: corruption tests can hit a middle block
    path = tmp_path / "small.cctrace"
    cachecolor.write_trace(
        path,
        {
            "addr": rng.integers(0, 1 << 22, size=n, dtype=np.uint64),
            "kind": rng.integers(0, 4, size=n, dtype=np.uint8),
            "size": rng.choice(np.array([1, 2, 4, 8], dtype=np.uint16), size=n),
            "thread": rng.integers(0, 3, size=n, dtype=np.uint32),
        },
        metadata='{"made_by": "tests/conftest.py"}',
    )
    return path


def _skip_unless(tool: str, package: str):
    return pytest.mark.skipif(
        shutil.which(tool) is None,
        reason=f"{tool} is not installed (apt-get install {package}; `make test` installs it when run as root)",
    )


needs_qemu = _skip_unless("qemu-x86_64", "qemu-user")
needs_valgrind = _skip_unless("valgrind", "valgrind")
needs_cc = pytest.mark.skipif(
    not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler (apt-get install gcc)"
)


def load_tool(name: str):
    """``tools/NAME.py`` as a module (the tools are scripts, not a package; they import each
    other from their folder)."""
    path = Path(__file__).resolve().parent.parent / "tools" / f"{name}.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module
