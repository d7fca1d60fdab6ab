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
from conftest import assert_one_line_error, system_with_trace

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
    proc = subprocess.Popen([str(script), "trace", "convert", "--from", "din", str(fifo), str(out), "-q"],
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
    proc = subprocess.Popen([str(script), "trace", "capture", "--backend", "qemu", "-o", str(out), "-q", "--", *program],
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
