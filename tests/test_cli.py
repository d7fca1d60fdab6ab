"""The `cachecolor` command line end to end, run as a user runs it (the installed console script
in a subprocess): simulate with --json, trace convert / info, capture with each backend that is
installed, the demo, --version and --help.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cachecolor
from conftest import needs_cc, needs_qemu, needs_valgrind

LEVEL_FIELDS = ("name", "accesses", "hits", "misses", "miss_rate", "evictions", "writebacks", "load", "store", "ifetch", "modify")


def test_version_and_help(run_cli):
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"cachecolor {cachecolor.__version__}"
    out = run_cli("--help")
    assert out.returncode == 0
    for command in ("simulate", "trace", "demo"):
        assert command in out.stdout
    out = run_cli("trace", "--help")
    assert out.returncode == 0 and "convert" in out.stdout and "capture" in out.stdout


def test_every_command_module_is_wired_into_the_parser():
    # python/cachecolor/commands/: one module a command, each with add_parser(sub) and the command's
    # function; a module that build_parser forgets, or a command run by another module's function,
    # fails here.
    import argparse
    import pkgutil

    from cachecolor import cli, commands

    modules = sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(modules) <= set(sub.choices), set(modules) - set(sub.choices)
    for name in modules:
        func = sub.choices[name].get_default("func")
        nested = [a for a in sub.choices[name]._actions if isinstance(a, argparse._SubParsersAction)]
        funcs = [func] if func is not None else [p.get_default("func") for a in nested for p in a.choices.values()]
        assert funcs and all(f.__module__ == f"cachecolor.commands.{name}" for f in funcs), name


def test_simulate_json_on_a_converted_din_trace(run_cli, tmp_path, din_trace, examples):
    native = tmp_path / "t.cctrace"
    out = run_cli("trace", "convert", "--from", "din", din_trace, native)
    assert out.returncode == 0, out.stderr
    assert "wrote 20,000 records" in out.stderr

    result = tmp_path / "res" / "result.json"
    out = run_cli("simulate", examples / "crossval" / "three-level.toml", "--trace", native, "--json", result)
    assert out.returncode == 0, out.stderr
    assert "L1D" in out.stdout and "miss rate" in out.stdout
    doc = json.loads(result.read_text())
    assert doc["version"] == cachecolor.__version__
    assert [lv["name"] for lv in doc["levels"]] == ["L1D", "L2", "L3"]
    for lv in doc["levels"]:
        for field in LEVEL_FIELDS:
            assert field in lv, field
        assert lv["hits"] + lv["misses"] == lv["accesses"]
    assert doc["levels"][1]["accesses"] == doc["levels"][0]["misses"]
    assert doc["records"] == 20_000
    assert doc["invariants"] == []
    assert set(doc["memory"]) == {"reads", "writes"}
    assert doc["config"] == cachecolor.load_config(examples / "crossval" / "three-level.toml")
    assert doc["source"]["format"] == "native"
    # The same trace through the API gives the same document's statistics.
    api = cachecolor.simulate(examples / "crossval" / "three-level.toml", native).to_dict()
    assert api["levels"] == doc["levels"]
    # No temporary file is left beside the JSON.
    assert [p.name for p in result.parent.iterdir()] == ["result.json"]


def test_simulate_din_directly_equals_converted(run_cli, tmp_path, din_trace, examples):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    native = tmp_path / "t.cctrace"
    assert run_cli("trace", "convert", "--from", "din", din_trace, native).returncode == 0
    assert run_cli("simulate", examples / "crossval" / "one-level.toml", "--trace", din_trace, "--format", "din", "--json", a, "-q").returncode == 0
    assert run_cli("simulate", examples / "crossval" / "one-level.toml", "--trace", native, "--json", b, "-q").returncode == 0
    assert json.loads(a.read_text())["levels"] == json.loads(b.read_text())["levels"]


def test_trace_info(run_cli, tmp_path, din_trace):
    native = tmp_path / "t.cctrace"
    assert run_cli("trace", "convert", "--from", "din", din_trace, native).returncode == 0
    out = run_cli("trace", "info", native)
    assert out.returncode == 0, out.stderr
    labels = [line.split()[0] for line in din_trace.read_text().splitlines()]
    text = out.stdout
    assert "native trace, version 2" in text
    assert f"records         {len(labels):,}" in text
    assert f"  load          {labels.count('0'):,}" in text
    assert f"  store         {labels.count('1'):,}" in text
    assert f"  ifetch        {labels.count('2'):,}" in text
    assert "threads         1 (0)" in text
    assert "addresses" in text and "metadata" in text and '"from": "din"' in text
    out = run_cli("trace", "info", "--json", native)
    info = json.loads(out.stdout)
    assert info["records"] == len(labels) and info["format"] == "native"
    # info reads other formats too
    out = run_cli("trace", "info", "--format", "din", din_trace, "--json")
    assert json.loads(out.stdout)["kinds"] == info["kinds"]


def test_simulate_workload_with_seed(run_cli, tmp_path, examples):
    config = tmp_path / "wl.toml"
    config.write_text(
        (examples / "crossval" / "one-level.toml").read_text()
        + '\n[workload]\nseed = 1\n[[workload.phases]]\npattern = "uniform"\nfootprint = "256KiB"\nreferences = 100000\n'
    )
    runs = {}
    for name, seed in (("a", "5"), ("b", "5"), ("c", "6")):
        path = tmp_path / f"{name}.json"
        out = run_cli("simulate", config, "--seed", seed, "--json", path, "--quiet")
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        runs[name] = json.loads(path.read_text())
    assert runs["a"]["levels"] == runs["b"]["levels"]
    assert runs["a"]["levels"] != runs["c"]["levels"]
    assert runs["a"]["config"]["workload"]["seed"] == 5


def _capture_and_check(run_cli, tmp_path, args):
    out_path = tmp_path / "true.cctrace"
    out = run_cli(*args, "-o", out_path, "--", shutil.which("true"))
    assert out.returncode == 0, out.stderr
    assert "captured" in out.stderr
    info = cachecolor.trace_info(out_path)
    assert info["records"] > 1000
    assert info["kinds"]["ifetch"] > 0 and info["kinds"]["load"] > 0
    assert info["metadata"]["source"] == "cachecolor-capture"
    return info


@needs_qemu
def test_capture_with_qemu(run_cli, tmp_path):
    info = _capture_and_check(run_cli, tmp_path, ["trace", "capture", "--backend", "qemu"])
    assert info["metadata"]["backend"] == "qemu"


@needs_valgrind
def test_capture_with_lackey(run_cli, tmp_path):
    info = _capture_and_check(run_cli, tmp_path, ["trace", "capture", "--backend", "lackey"])
    assert info["metadata"]["backend"] == "lackey"


@pytest.mark.skipif(not (shutil.which("qemu-x86_64") or shutil.which("valgrind")), reason="neither qemu-user nor valgrind is installed")
def test_capture_short_form_and_no_ifetch(run_cli, tmp_path):
    out_path = tmp_path / "echo.cctrace"
    out = run_cli("trace", "--no-ifetch", "-o", out_path, "--", shutil.which("echo"), "-n", "hello")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "hello"  # the program's own output passes through, options and all
    info = cachecolor.trace_info(out_path)
    assert info["records"] > 100 and info["kinds"]["ifetch"] == 0


@pytest.mark.skipif(not (shutil.which("qemu-x86_64") or shutil.which("valgrind")), reason="neither qemu-user nor valgrind is installed")
def test_capture_of_a_failing_program_keeps_its_trace(run_cli, tmp_path):
    out_path = tmp_path / "false.cctrace"
    out = run_cli("trace", "-o", out_path, "--", shutil.which("false"))
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "cachecolor: error: capture:" in out.stderr
    assert "status 1" in out.stderr
    assert out_path.exists()


@needs_cc
@pytest.mark.skipif(not (shutil.which("qemu-x86_64") or shutil.which("valgrind")), reason="neither qemu-user nor valgrind is installed")
def test_demo(run_cli, tmp_path, repo):
    out = run_cli("demo", "--out", tmp_path / "demo", "--quiet", cwd=repo, timeout=300)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert "naive transpose" in out.stdout and "blocked transpose" in out.stdout
    doc = json.loads((tmp_path / "demo" / "results.json").read_text())
    naive, blocked = doc["runs"]["naive"], doc["runs"]["blocked"]
    assert naive["invariants"] == [] and blocked["invariants"] == []
    l1d = next(lv["name"] for lv in naive["levels"] if lv["name"].startswith("L1") and not lv["name"].endswith("I"))
    cmp = doc["comparison"][l1d]
    # The point of the demo: blocking cuts the L1 data misses of the transpose several times.
    assert cmp["naive_data_misses"] > 2 * cmp["blocked_data_misses"], cmp


def test_module_entry_point(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "cachecolor", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and cachecolor.__version__ in out.stdout


def test_arrays_written_then_simulated_by_cli(run_cli, tmp_path, examples):
    path = tmp_path / "arr.cctrace"
    cachecolor.write_trace(path, np.arange(0, 64 * 5000, 64, dtype=np.uint64))
    out = run_cli("simulate", examples / "crossval" / "one-level.toml", "--trace", path, "--json", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(Path(tmp_path / "r.json").read_text())
    assert doc["levels"][0]["misses"] == 5000


def _threads_and_variable(script: Path, env: dict) -> tuple[int, str]:
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, env=env).stdout
    threads, value = out.split()
    return int(threads), value


def _numpy_uses_openblas() -> bool:
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:  # an older NumPy without the dicts mode
        return False
    return "openblas" in str(blas).lower()


@pytest.mark.parametrize("argv, command", [
    (["python", "-m", "cachecolor", "annotate"], True),
    (["python", "-X", "importtime", "-m", "cachecolor"], True),
    (["python", "-mcachecolor"], True),
    (["python", "-sm", "cachecolor"], True),
    (["/usr/bin/python3", "-sP", "/venv/bin/cachecolor", "simulate"], True),  # a shebang's flags
    (["python", "-W", "ignore", "/venv/bin/cachecolor"], True),
    (["python", "--check-hash-based-pycs", "never", "/venv/bin/cachecolor"], True),
    (["/usr/bin/python", "/venv/bin/pytest", "-m", "cachecolor"], False),  # a marker, not a module
    (["python", "prog.py", "-m", "cachecolor"], False),
    (["python", "-c", "import cachecolor"], False),
    (["python", "-c", "x", "-m", "cachecolor"], False),
    (["python", "-m", "cachecolor.cli"], False),
    (["python", "-W", "cachecolor", "prog.py"], False),
    (["python"], False),
    (["python", "-m"], False),
])
def test_the_command_is_told_from_the_interpreters_command_line(argv, command):
    assert cachecolor._started_as_cli(argv) is command


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through /proc")
@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.orig_argv tells the command from a library use")
@pytest.mark.skipif(not _numpy_uses_openblas(), reason="NumPy's BLAS is not OpenBLAS")
def test_the_command_loads_numpy_with_one_blas_thread_and_leaves_the_environment_as_given(tmp_path):
    """Started as the ``cachecolor`` command (a script of that name, as the console script is),
    the package loads NumPy with OpenBLAS on one thread, and removes the variable again for
    the programs the command starts; imported as a library, or with the variable set by the
    user, NumPy is loaded as it would be anyway."""
    body = ("import os, cachecolor\n"
            "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS', '-'))\n")
    command = tmp_path / "cachecolor"
    library = tmp_path / "user_program.py"
    command.write_text(body)
    library.write_text(body)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the package, as this test sees it
    assert _threads_and_variable(command, env) == (1, "-")
    if len(os.sched_getaffinity(0)) > 1:
        # The control: the same program under another name gets OpenBLAS's usual thread pool,
        # so the count above is the variable's doing.
        threads, value = _threads_and_variable(library, env)
        assert threads > 1 and value == "-"
        threads, value = _threads_and_variable(command, dict(env, OPENBLAS_NUM_THREADS="2"))
        assert threads == 2 and value == "2"
        # OMP_NUM_THREADS, which OpenBLAS reads too, is left to the user as well.
        threads, value = _threads_and_variable(command, dict(env, OMP_NUM_THREADS="2"))
        assert threads == 2 and value == "-"
