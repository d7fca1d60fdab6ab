"""Regression tests for issue 25 (docs/reliability.md): one test per defect, named after it.

- outputs: ``--json``, ``trace convert``, ``write_trace``, system ``--json`` and report files go
  through one helper per language (``cachecolor._output``, ``cachecolor_sim::output``): a device
  node or FIFO is written in place, a directory refused, an input never overwritten, no temporary
  file left after any failure;
- interrupts: SIGINT / SIGTERM stop a conversion, leave OUT untouched and nothing behind, exit
  130 / 143;
- resources: a config whose caches would not fit in memory is a config error naming the field;
- the error contract: every case below is one line ``cachecolor: error: ...``, exit 2 for bad
  input, exit 1 naming the path for a full disk;
- strictness and terminal injection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import cachecolor
from cachecolor import _output
from cachecolor.system import load_system_config, simulate_system
from conftest import ONE_CORE_MACHINE, assert_one_line_error, interruptible, system_with_trace

ONE_LEVEL = '[hierarchy]\n[[hierarchy.levels]]\nname = "L1"\nsize = "32KiB"\nways = 8\n'
WITH_WORKLOAD = ONE_LEVEL + '[workload]\n[[workload.phases]]\npattern = "uniform"\nfootprint = "64KiB"\nreferences = 1000\n'


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".") and (".tmp" in p.name or ".partial" in p.name))


@pytest.fixture
def workload_config(tmp_path) -> Path:
    p = tmp_path / "w.toml"
    p.write_text(WITH_WORKLOAD)
    return p


# ---------------------------------------------------------------------------------------------
# 1. outputs


def test_defect1_json_to_device_node_is_written_in_place(run_cli, workload_config, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    node = tmp_path / "n"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    out = run_cli("simulate", workload_config, "--json", node, "-q")
    assert out.returncode == 0, out.stderr
    assert stat.S_ISCHR(os.lstat(node).st_mode), "the device node was replaced"
    assert leftovers(tmp_path) == []


def test_defect1_json_to_dev_null_stays_a_device(run_cli, workload_config):
    out = run_cli("simulate", workload_config, "--json", "/dev/null", "-q")
    assert out.returncode == 0, out.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_defect1_json_to_fifo_is_written_in_place(run_cli, workload_config, tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    out = run_cli("simulate", workload_config, "--json", fifo, "-q")
    got = reader.communicate(timeout=60)[0]
    assert out.returncode == 0, out.stderr
    assert json.loads(got)["records"] == 1000
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_defect1_json_to_directory_is_refused_before_the_run(run_cli, workload_config, tmp_path):
    d = tmp_path / "outdir"
    d.mkdir()
    line = assert_one_line_error(run_cli("simulate", workload_config, "--json", d))
    assert "is a directory" in line
    assert list(d.iterdir()) == [] and leftovers(tmp_path) == []


def test_defect1_json_through_symlink_keeps_the_link(run_cli, workload_config, tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    out = run_cli("simulate", workload_config, "--json", link, "-q")
    assert out.returncode == 0, out.stderr
    assert link.is_symlink() and json.loads(target.read_text())["records"] == 1000


def test_defect1_json_dash_is_stdout(run_cli, workload_config):
    out = run_cli("simulate", workload_config, "--json", "-", "-q")
    assert out.returncode == 0, out.stderr
    start = out.stdout.index("{")
    assert json.loads(out.stdout[start:])["records"] == 1000


def test_defect1_convert_refuses_to_overwrite_its_input(run_cli, din_trace):
    before = din_trace.read_bytes()
    line = assert_one_line_error(run_cli("trace", "convert", "--from", "din", din_trace, din_trace))
    assert "is the input" in line
    assert din_trace.read_bytes() == before


def test_defect1_convert_to_directory_leaves_nothing(run_cli, din_trace, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    line = assert_one_line_error(run_cli("trace", "convert", "--from", "din", din_trace, d))
    assert "is a directory" in line
    assert list(d.iterdir()) == [] and leftovers(tmp_path) == []


def test_defect1_write_trace_to_directory_is_refused(tmp_path):
    with pytest.raises(OSError, match="is a directory"):
        cachecolor.write_trace(tmp_path, {"addr": np.arange(10, dtype=np.uint64)})
    assert leftovers(tmp_path) == [] and leftovers(tmp_path.parent) == []


def test_defect1_system_json_leaves_no_temp_on_failure(tmp_path, monkeypatch):
    # A failure while writing (here: a JSON encoder error) leaves the old file and no temporary.
    out = tmp_path / "r.json"
    out.write_text("old")
    with pytest.raises(TypeError):
        _output.write_json(out, {"x": object()})
    assert out.read_text() == "old" and leftovers(tmp_path) == []

    def fail_replace(a, b):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail_replace)
    with pytest.raises(OSError) as info:
        _output.write_json(out, {"x": 1})
    assert str(out) in str(info.value) and info.value.errno == 28
    assert out.read_text() == "old" and leftovers(tmp_path) == []


def test_defect1_output_helper_unique_temp_in_own_directory(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def spy(a, b):
        seen.append(Path(a))
        real(a, b)

    monkeypatch.setattr(os, "replace", spy)
    for _ in range(2):
        _output.write_text(tmp_path / "x.md", "text")
    assert len(set(seen)) == 2 and all(p.parent == tmp_path for p in seen)


# ---------------------------------------------------------------------------------------------
# 2. interrupts


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_defect2_convert_from_fifo_interrupt_keeps_out_and_leaves_nothing(tmp_path, sig, code):
    # A FIFO fed slowly, forever: convert must stop on the signal, keep the old OUT, exit 130/143.
    fifo = tmp_path / "in.din"
    os.mkfifo(fifo)
    out = tmp_path / "out.cctrace"
    out.write_bytes(b"old trace")
    script = Path(sys.executable).parent / "cachecolor"
    proc = interruptible([str(script), "trace", "convert", "--from", "din", str(fifo), str(out), "-q"],
                         stderr=subprocess.PIPE, text=True)
    with open(fifo, "w") as w:
        # 300,000 lines: several blocks, so the conversion is running when the signal comes.
        w.write("".join(f"0 {a:x}\n" for a in range(0, 300_000 * 64, 64)))
        w.flush()
        time.sleep(1.0)
        proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert rc == code, proc.stderr.read()
    assert out.read_bytes() == b"old trace"
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# 3. resources


def test_defect3_huge_cache_is_a_config_error_not_an_abort(run_cli, tmp_path):
    p = tmp_path / "big.toml"
    p.write_text(WITH_WORKLOAD.replace('"32KiB"', '"1TiB"'))
    line = assert_one_line_error(run_cli("simulate", p))
    assert "hierarchy.levels[0].size" in line and "needs" in line and "GiB" in line


def test_defect3_memory_limit_is_configurable(tmp_path, monkeypatch):
    monkeypatch.setenv("CACHECOLOR_MEMORY_LIMIT", "1MiB")
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.load_config({"hierarchy": {"levels": [{"name": "L1", "size": "16MiB", "ways": 8}]}})
    assert info.value.field == "hierarchy.levels[0].size"


# ---------------------------------------------------------------------------------------------
# 5. the error contract


def test_defect5_malformed_json_config_is_one_line(run_cli, tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"hierarchy": ')
    assert_one_line_error(run_cli("simulate", p))


def test_defect5_non_utf8_config_is_one_line(run_cli, tmp_path):
    p = tmp_path / "c.toml"
    p.write_bytes(b"[hierarchy]\n\xff\xfe\n")
    line = assert_one_line_error(run_cli("simulate", p))
    assert "UTF-8" in line


def test_defect5_binary_workload_and_replot_are_one_line(run_cli, tmp_path):
    b = tmp_path / "bin"
    b.write_bytes(bytes(range(256)) * 4)
    assert_one_line_error(run_cli("mrc", "--workload", b))
    assert_one_line_error(run_cli("bench", "--replot", b, "--plot", tmp_path / "x.png"))


def test_defect5_deeply_nested_toml_is_one_line(run_cli, tmp_path):
    p = tmp_path / "deep.toml"
    p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    assert_one_line_error(run_cli("simulate", p))


@pytest.mark.parametrize("seed", ["-1", str(2**70)])
def test_defect5_seed_out_of_range_is_one_line(run_cli, workload_config, seed):
    line = assert_one_line_error(run_cli("simulate", workload_config, "--seed", seed))
    assert "--seed" in line


def test_defect5_capture_negative_max_records_is_one_line(run_cli):
    line = assert_one_line_error(run_cli("trace", "capture", "--max-records", "-5", "-o", "x.cctrace", "--", "true"))
    assert "--max-records" in line


def test_defect5_seed_with_malformed_system_config_is_one_line(run_cli, examples, tmp_path):
    cfg = load_system_config(examples / "os" / "colors-disjoint.toml")
    cfg["memory"] = []
    p = tmp_path / "s.json"
    p.write_text(json.dumps(cfg))
    out = run_cli("simulate", p, "--seed", "3")
    line = assert_one_line_error(out)
    assert "memory" in line
    assert "AttributeError" not in out.stderr and "TypeError" not in out.stderr


def test_defect5_enospc_exits_1_naming_the_path(run_cli, workload_config):
    # /dev/full is a device (written in place) whose every write fails with ENOSPC.
    out = run_cli("simulate", workload_config, "--json", "/dev/full", "-q")
    line = assert_one_line_error(out, code=1)
    assert "/dev/full" in line and "No space left" in line


def test_defect5_convert_enospc_names_the_path(run_cli, din_trace):
    line = assert_one_line_error(run_cli("trace", "convert", "--from", "din", din_trace, "/dev/full"), code=1)
    assert "/dev/full" in line


def test_defect5_native_trace_from_a_pipe(run_cli, native_trace, tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    feeder = subprocess.Popen(["cp", str(native_trace), str(fifo)])
    out = run_cli("trace", "info", fifo, "--json", "-q")
    feeder.wait(timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] == 150_000


# ---------------------------------------------------------------------------------------------
# 6. strictness


def test_defect6_tables_as_arrays_are_rejected():
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.load_config({"hierarchy": {"levels": [["L1", "32KiB", 8]]}})
    assert info.value.field == "hierarchy.levels[0]"


def test_defect6_load_config_rejects_what_simulate_rejects():
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.load_config({"hierarchy": {"levels": [{"name": "L1", "size": "32MiB", "ways": 512}]}})
    assert info.value.field == "hierarchy.levels[0].ways"


def test_defect6_duplicate_process_names_are_rejected(run_cli, examples, tmp_path):
    src = examples / "os" / "colors-disjoint.toml"
    cfg = load_system_config(src)
    assert len(cfg["processes"]) >= 2
    cfg["processes"][1]["name"] = cfg["processes"][0]["name"]
    with pytest.raises(cachecolor.ConfigError, match="every process needs its own name"):
        simulate_system(cfg)


@pytest.mark.parametrize("args", [["mrc", "--max-ways", "0", "--sets", "64"], ["sdp", "--sweep", "--refs-per-line", "0", "--cache-size", "1MiB", "--ways", "8"]])
def test_defect6_zero_counts_are_rejected(run_cli, args, din_trace):
    if args[0] == "mrc":
        args = [*args, str(din_trace)]
    line = assert_one_line_error(run_cli(*args))
    assert ("--max-ways" if args[0] == "mrc" else "--refs-per-line") in line


def test_defect6_report_validates_every_config_first(run_cli, examples, tmp_path):
    good = examples / "os" / "colors-disjoint.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text(good.read_text() + "\n[scheduler]\ntick = 0\n")
    out_dir = tmp_path / "out"
    out = run_cli("report", good, bad, "--out", out_dir, "--no-plots")
    line = assert_one_line_error(out)
    assert "bad.toml" in line and "no config was run" in line
    assert not out_dir.exists() or list(out_dir.iterdir()) == []


def test_defect6_json_path_checked_before_the_run(run_cli, workload_config, tmp_path):
    # The parent is a regular file: refused at once, before the simulation runs.
    (tmp_path / "file").write_text("x")
    out = run_cli("simulate", workload_config, "--json", tmp_path / "file" / "x.json")
    line = assert_one_line_error(out)
    assert "is not a directory" in line and out.stdout == ""


# ---------------------------------------------------------------------------------------------
# 7. terminal injection


def test_defect7_trace_info_escapes_metadata(run_cli, tmp_path):
    p = tmp_path / "t.cctrace"
    cachecolor.write_trace(p, {"addr": np.arange(4, dtype=np.uint64) * 64}, metadata="evil\x1b[2J\rover\x00")
    out = run_cli("trace", "info", p, "-q")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\r" not in out.stdout and "\x00" not in out.stdout
    assert "\\x1b[2J" in out.stdout


@pytest.mark.parametrize("fmt", ["din", "lackey"])
def test_defect7_importer_errors_escape_bytes(run_cli, tmp_path, fmt):
    p = tmp_path / f"t.{fmt}"
    p.write_bytes(b"\x1b]0;pwned\x07\r\x00 nonsense\n")
    out = run_cli("trace", "info", p, "--format", fmt, "-q")
    line = assert_one_line_error(out)
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr and "\r" not in out.stderr and "\x00" not in out.stderr
    assert "\\x1b" in line


# ---------------------------------------------------------------------------------------------
# 3 and 4: whole-system runs fed hostile traces

def _system(tmp_path: Path, addrs, icounts=None, extra: str = "") -> Path:
    trace = tmp_path / "t.cctrace"
    cols = {"addr": np.asarray(addrs, dtype=np.uint64)}
    if icounts is not None:
        cols["icount"] = np.asarray(icounts, dtype=np.uint32)
    cachecolor.write_trace(trace, cols)
    cfg = tmp_path / "s.toml"
    cfg.write_text(system_with_trace(trace) + extra)
    return cfg


def test_defect3_huge_icount_series_is_bounded(tmp_path):
    # 1,000 records of icount 0xFFFFFFFF: ~4.3e12 cycles, 4.3 million ticks; the series used to
    # grow to one point per tick (abort at 1,000 records). Now at most MAX_INTERVALS points.
    cfg = _system(tmp_path, np.arange(1000) * 64, icounts=np.full(1000, 0xFFFFFFFF))
    r = simulate_system(cfg)
    doc = r.to_dict()
    assert 0 < len(doc["intervals"]) <= 4096
    times = [iv["time"] for iv in doc["intervals"]]
    assert times == sorted(times) and times[-1] >= 1000 * 0xFFFFFFFF
    assert sum(iv["processes"][0]["instructions"] for iv in doc["intervals"]) == doc["processes"][0]["instructions"]


def test_defect3_tick_one_is_bounded(tmp_path):
    cfg = _system(tmp_path, np.arange(2000) * 64, extra="\n[scheduler]\ntick = 1\n")
    doc = simulate_system(cfg).to_dict()
    assert 0 < len(doc["intervals"]) <= 4096


def test_defect4_address_beyond_page_tables_is_rejected_with_position(run_cli, tmp_path):
    addrs = [0x1000, 0x2000, 1 << 48, 0x3000]
    cfg = _system(tmp_path, addrs)
    out_json = tmp_path / "r.json"
    line = assert_one_line_error(run_cli("simulate", cfg, "--json", out_json))
    assert "record 2" in line and "0x1000000000000" in line and "2^48" in line
    assert not out_json.exists()
    # Just below the limit is fine.
    cfg = _system(tmp_path, [0x1000, (1 << 48) - 64])
    assert simulate_system(cfg).to_dict()["invariants"] == []


def test_defect4_invariant_failure_writes_no_json(monkeypatch, tmp_path, capsys):
    # The CLI's _report: a result with invariant failures prints them and does not write --json.
    from cachecolor.commands import simulate

    class Broken:
        invariants = ["page 0x1 lost its contents"]

        def table(self):
            return "table"

        def to_json(self, path):
            raise AssertionError("--json written after an invariant failure")

    import argparse

    args = argparse.Namespace(json=str(tmp_path / "r.json"), quiet=True)
    with pytest.raises(simulate.CliError, match="--json not written"):
        simulate._report(args, Broken())


# ---------------------------------------------------------------------------------------------
# 2. interrupts during a capture (qemu): the signal goes to cachecolor alone


@pytest.mark.parametrize("program", [["sleep", "30"], ["sh", "-c", "while :; do :; done"]], ids=["quiet", "busy"])
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_defect2_capture_interrupt_stops_and_cleans_up(tmp_path, program, sig, code):
    import shutil

    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-x86_64 is not installed (apt-get install qemu-user)")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.cctrace"
    out.write_bytes(b"old trace")
    script = Path(sys.executable).parent / "cachecolor"
    env = dict(os.environ, TMPDIR=str(tmp))
    proc = interruptible([str(script), "trace", "capture", "--backend", "qemu", "-o", str(out), "-q", "--", *program],
                         stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        time.sleep(2.0)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)  # to cachecolor only, not its process group
        rc = proc.wait(timeout=30)  # a hang check, not a timing (docs/reliability.md has timings)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = proc.stderr.read()
    assert rc == code, err
    assert out.read_bytes() == b"old trace"
    assert leftovers(tmp_path) == []
    assert list(tmp.iterdir()) == [], "capture's temporary directory left behind"


# ---------------------------------------------------------------------------------------------
# The second fuzz's defects (docs/reliability.md, "Second fuzz"): interrupts that reach every
# process, bounded config reads, a memory budget for RAM and processes, one-line errors.

MACHINE = ONE_CORE_MACHINE


def _processes(n: int, references: int = 200) -> str:
    return "".join(
        f'\n[[processes]]\nname = "p{i}"\n[[processes.threads]]\n'
        f'workload = {{ seed = {i}, phases = [{{ pattern = "uniform", footprint = "16KiB", references = {references} }}] }}\n'
        for i in range(n))


def _procs_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                continue
    return found


def _wait_gone(marker: str, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := _procs_with(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_capture_interrupt_kills_the_traced_programs_children(tmp_path, sig, code):
    # `trace capture -- bash -c 'yes > /dev/null'` (or `sleep 100`): cachecolor stopped, but the
    # shell's child kept running, re-parented to init. The capture now kills its process group.
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-x86_64 is not installed (apt-get install qemu-user)")
    marker = f"{3000 + sig}.{os.getpid()}"  # a sleep of a duration no one else uses
    script = Path(sys.executable).parent / "cachecolor"
    proc = interruptible([str(script), "trace", "capture", "--backend", "qemu", "-o", str(tmp_path / "o.cctrace"), "-q",
                          "--", "sh", "-c", f"sleep {marker}; true"],
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        # cachecolor, QEMU (running the shell) and `sleep` all carry the marker.
        while len(_procs_with(marker)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)  # a hang check, not a timing
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    left = _wait_gone(marker)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert rc == code, proc.stderr.read()
    assert left == [], "the traced program's children outlived the capture"


_CAPTURE_PARENT = """
import signal, sys
from pathlib import Path
from cachecolor.cli import _on_sigterm
from cachecolor.workloads import capture_clean
signal.signal(signal.SIGTERM, _on_sigterm)  # as the CLI (workloads build, evaluate) does
try:
    capture_clean(["/bin/sleep", "300"], Path(sys.argv[1]), cwd=Path(sys.argv[2]))
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_workload_capture_leaves_no_capture_directory(tmp_path, sig):
    # `workloads build` / `evaluate` capture in a child Python; subprocess.run SIGKILLed it on
    # Ctrl-C, leaving /tmp/cachecolor-capture.* (the FIFO, the plugin, maps.log) behind.
    if shutil.which("qemu-x86_64") is None or shutil.which("setarch") is None:
        pytest.skip("qemu-x86_64 and setarch are needed (apt-get install qemu-user util-linux)")
    tmp = Path("/tmp")  # the capture child's environment is fixed (no TMPDIR)
    before = set(tmp.glob("cachecolor-capture.*"))
    proc = interruptible([sys.executable, "-c", _CAPTURE_PARENT, str(tmp_path / "w.cctrace"), str(tmp_path)],
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (new := set(tmp.glob("cachecolor-capture.*")) - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert new, "the capture never started"
        time.sleep(1.0)  # QEMU and the program are running
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)  # a hang check, not a timing
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, proc.stderr.read()
    assert [d for d in new if d.exists()] == [], "the capture's temporary directory was left behind"
    assert not list(tmp_path.glob("*.cctrace")) and leftovers(tmp_path) == []


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_config_from_an_endless_device_is_refused(run_cli, din_trace, device):
    # `simulate /dev/zero` read the whole "file": 7.5 GB, then MemoryError; /dev/urandom never
    # ended. Every file read as a config is read up to a bound.
    line = assert_one_line_error(run_cli("simulate", device, "--trace", din_trace, timeout=60))
    assert device in line and "MiB" in line
    with pytest.raises(cachecolor.ConfigError, match="more than 16 MiB"):
        cachecolor.load_config(device)
    with pytest.raises(cachecolor.ConfigError, match="more than 16 MiB"):
        load_system_config(device)


@pytest.mark.parametrize("args", [["sweep", "{dev}", "--out", "o"], ["bench", "--replot", "{dev}", "--plot", "p.png"],
                                  ["mrc", "--workload", "{dev}"]], ids=["sweep-spec", "replot", "mrc-workload"])
def test_every_config_reader_is_bounded(run_cli, args):
    out = run_cli(*[a.format(dev="/dev/zero") for a in args], timeout=60)
    line = assert_one_line_error(out)
    assert "/dev/zero" in line and "16 MiB" in line


@pytest.mark.parametrize("allocator", ["buddy", "color-pool", "random", "sequential"])
def test_ram_beyond_the_memory_budget_is_refused_before_allocation(tmp_path, allocator):
    # `memory.ram = "1TiB"` took 4.4 GB on a small run and aborted (exit 134) when memory was
    # short, even with CACHECOLOR_MEMORY_LIMIT=1GiB.
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + f'[memory]\nram = "64GiB"\nallocator = "{allocator}"\n' + _processes(1))
    env_limit = dict(os.environ, CACHECOLOR_MEMORY_LIMIT="256MiB")
    out = subprocess.run([*_cli(), "simulate", str(cfg), "-q"], capture_output=True, text=True, env=env_limit, timeout=120)
    line = assert_one_line_error(out)
    assert "memory.ram" in line and "256.0 MiB allowed" in line and allocator in line
    # What fits runs as before.
    cfg.write_text(MACHINE + f'[memory]\nram = "64MiB"\nallocator = "{allocator}"\n' + _processes(1))
    out = subprocess.run([*_cli(), "simulate", str(cfg), "-q"], capture_output=True, text=True, env=env_limit, timeout=120)
    assert out.returncode == 0, out.stderr


def _cli() -> list[str]:
    return [str(Path(sys.executable).parent / "cachecolor")]


def test_per_process_memory_is_linear_in_the_process_count(tmp_path):
    # The time series kept a row per process per point (up to 4,096 points): memory grew with
    # the square of the process count (1,600 processes 2.4 GB). Points x processes is bounded.
    n = 300
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + '[memory]\nram = "256MiB"\n[scheduler]\ntick = 2000\ntime_slice = 20000\n' + _processes(n, 400))
    doc = simulate_system(cfg).to_dict()
    points = len(doc["intervals"])
    assert all(len(iv["processes"]) == n for iv in doc["intervals"])
    assert 16 <= points < 4096 and points * n <= 65536, points
    total = sum(p["instructions"] for p in doc["processes"])
    assert sum(q["instructions"] for iv in doc["intervals"] for q in iv["processes"]) == total


def test_processes_beyond_the_memory_budget_are_refused_before_allocation(tmp_path):
    # 10^6 processes aborted; the per-process and per-thread structures are in the budget
    # (10^5 here, against a 1 GiB budget: the test's own config must stay small).
    code = (
        "import json, sys, cachecolor\n"
        "from cachecolor.system import simulate_system\n"
        "cfg = {'machine': {'hierarchy': {'cores': 1, 'levels': [{'name': 'L1', 'size': '32KiB', 'ways': 8}]},\n"
        "       'timing': {'level_latency': [4], 'dram_latency': 200}}, 'memory': {'ram': '1GiB'},\n"
        "       'processes': [{'name': f'p{i}', 'threads': [{'workload': {'phases': [{'pattern': 'uniform', 'footprint': '4KiB', 'references': 1}]}}]}\n"
        "                     for i in range(100_000)]}\n"
        "try:\n    simulate_system(cfg)\nexcept cachecolor.ConfigError as e:\n    print(e)\n    sys.exit(2)\n"
    )
    env = dict(os.environ, CACHECOLOR_MEMORY_LIMIT="1GiB")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stdout.startswith("processes:") and "100000 processes" in out.stdout, out.stdout


@pytest.mark.parametrize("suffix, kind", [(".xz", "xz"), (".gz", "gzip")])
def test_corrupt_compressed_text_trace_autodetected_is_one_line(run_cli, tmp_path, suffix, kind):
    # Auto-detection read the head with lzma/gzip and let their exceptions out (exit 1,
    # `LZMAError: Corrupt input data`); with --format it was already exit 2.
    import gzip
    import lzma

    good = (b"0 1000\n" * 2000)
    data = lzma.compress(good) if kind == "xz" else gzip.compress(good)
    bad = tmp_path / f"t.din{suffix}"
    bad.write_bytes(data[:12] + bytes(b ^ 0x5A for b in data[12:200]) + data[200:])
    line = assert_one_line_error(run_cli("trace", "info", bad, "-q"))
    assert str(bad) in line and kind in line


@pytest.mark.parametrize("threads", ["1.5", "5", "true", '"x"'])
def test_threads_of_the_wrong_type_is_one_line(run_cli, tmp_path, threads):
    # `threads = 1.5` in a system config: TypeError: 'float' object is not iterable, exit 1.
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + f'[[processes]]\nname = "p"\nthreads = {threads}\n')
    line = assert_one_line_error(run_cli("simulate", cfg, "--seed", "1", "-q"))
    assert "threads" in line


def test_a_number_of_ten_thousand_digits_is_one_line(run_cli, workload_config, tmp_path):
    # `--set` with 10,000 digits: ValueError: Exceeds the limit (4300 digits), exit 1.
    line = assert_one_line_error(run_cli("simulate", workload_config, "--set", "hierarchy.seed=" + "9" * 10_000, "-q"))
    assert "--set hierarchy.seed" in line and "4300 digits" in line
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + '[memory]\nram = "64MiB"\nseed = ' + "9" * 10_000 + "\n" + _processes(1))
    line = assert_one_line_error(run_cli("simulate", cfg, "-q"))
    assert str(cfg) in line and "4300 digits" in line


def test_unreadable_trace_names_its_path(run_cli):
    # `trace info /proc/self/mem` (auto-detect): "Input/output error", exit 1, no path named.
    out = run_cli("trace", "info", "/proc/self/mem", "-q")
    assert out.returncode in (1, 2) and "Traceback" not in out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cachecolor: error: ") and "/proc/self/mem" in lines[0], out.stderr


_SLOW_GENERATOR_POLICY = """
import time
import cachecolor


class SlowColors(cachecolor.Policy):
    name = "slow-colors"

    def allowed_colors(self, pid, vpn):
        # A generator, slow enough that a signal lands while the simulator iterates it.
        for c in range(self.machine.colors):
            time.sleep(0.0005)
            yield c
"""


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_interrupt_inside_a_policy_generator_is_an_interrupt(tmp_path, sig, code, word):
    # A signal while the simulator iterated a generator from allowed_colors: TypeError: ...
    # KeyboardInterrupt, exit 1 instead of 130/143.
    pol = tmp_path / "slow.py"
    pol.write_text(_SLOW_GENERATOR_POLICY)
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + '[memory]\nram = "256MiB"\n' + _processes(1, 2_000_000).replace('"16KiB"', '"64MiB"'))
    proc = interruptible([*_cli(), "simulate", str(cfg), "--policy", f"{pol}:SlowColors", "-q"],
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4.0)  # past the imports, faulting pages through the generator
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)  # a hang check on a run of minutes
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()
    assert rc == code, err
    assert word in err and "Traceback" not in err and "TypeError" not in err


def test_stop_check_runs_per_block_of_records_not_per_tick(tmp_path):
    # A stop was checked once per scheduler tick: with a tick longer than the run, Ctrl-C waited
    # for the end. It is checked once per block of records (at most 65,536).
    cfg = tmp_path / "s.toml"
    cfg.write_text(MACHINE + '[memory]\nram = "256MiB"\n[scheduler]\ntick = 1000000000000000\n'
                   + _processes(1, 400_000_000).replace('"16KiB"', '"64MiB"'))
    proc = interruptible([*_cli(), "simulate", str(cfg), "-q"], stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3.0)
        assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)  # the run would otherwise go on for minutes
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, proc.stderr.read()


def test_every_interrupt_test_starts_its_child_with_sigint_restored(repo):
    """Bug: two oracle interrupt tests started their child with plain ``subprocess.Popen``; under
    ``make test &`` the child inherited SIGINT ignored, ran to the end and exited 0. Every test
    that sends SIGINT must start the child with ``conftest.interruptible``."""
    import ast

    offenders = []
    for path in sorted((repo / "tests").glob("test_*.py")):
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            signals = any(isinstance(c.func, ast.Attribute) and c.func.attr == "send_signal" for c in calls)
            sigint = any(isinstance(n, ast.Attribute) and n.attr == "SIGINT" for n in ast.walk(node))
            popen = any(isinstance(c.func, ast.Attribute) and c.func.attr == "Popen" for c in calls)
            if signals and sigint and popen:
                offenders.append(f"{path.name}::{node.name}")
    assert not offenders, f"SIGINT sent to a child not started with interruptible(): {offenders}"


def test_interrupt_tests_pass_as_a_background_job_of_a_noninteractive_shell(repo):
    # `make test &` (or nohup, a CI runner): the shell starts its children with SIGINT ignored;
    # the interrupt tests reset it in their children (conftest.interruptible), so they pass.
    code = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    probe = subprocess.run(["bash", "-c", f'{sys.executable} -c "{code}" & wait'], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "True", "this bash does not ignore SIGINT in background jobs: nothing to show"
    tests = ("test_reliability.py::test_defect2_convert_from_fifo_interrupt_keeps_out_and_leaves_nothing "
             "test_reliability.py::test_stop_check_runs_per_block_of_records_not_per_tick "
             "test_sweep.py::test_a_long_system_simulate_stops_on_a_signal")
    # A simple command (bash runs a list such as `cd X && cmd &` in a subshell that keeps SIGINT).
    run = subprocess.run(["bash", "-c", f"{sys.executable} -m pytest -q -p no:cacheprovider {tests} & wait $!"],
                         capture_output=True, text=True, timeout=600, cwd=repo / "tests")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
