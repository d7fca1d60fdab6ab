"""The split OS/user L2 uniprocessor (Nellans et al. sections 3 and 5) through the Python path:
``cachecolor.oscache`` and ``cachecolor oscache report``. Small reference counts (a few seconds
in all); the assertions are the paper's qualitative results, not just that it runs."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cachecolor import _core
from cachecolor.oscache import load_workload, run_model, run_report, write_report
from cachecolor.traces import write_trace

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "oscache"
REFS = 200_000
MACHINES = [
    EX / "baseline.toml",
    EX / "split-2mb-data-parallel.toml",
    EX / "split-2mb-data-sequential.toml",
    EX / "split-2mb-instructions-sequential.toml",
    EX / "split-1mb-data-sequential.toml",
    EX / "split-1mb-adaptive.toml",
]


@pytest.fixture(scope="module")
def report():
    sources = [(n, load_workload(EX / "workloads" / f"{n}.toml", REFS), None) for n in ("web-server", "jvm", "compute")]
    return run_report(MACHINES, sources)


def rel(report, source, machine):
    reps = report["sources"][source]["reports"]
    return reps[machine]["ipc"] / reps["baseline"]["ipc"]


def test_every_run_keeps_the_banks_exclusive(report):
    for s in report["sources"].values():
        for name, r in s["reports"].items():
            assert r["invariants"] == [], name
            assert r["records"] == REFS


def test_figure1_os_intensive_workloads_spend_their_time_in_the_kernel(report):
    share = {n: s["characterisation"]["privileged_share"] for n, s in report["sources"].items()}
    assert share["web-server"] > 0.5 > share["jvm"] > 0.15
    assert share["compute"] < 0.01


def test_figure2_short_runs_are_many_and_long_runs_exist(report):
    for n in ("web-server", "jvm"):
        c = report["sources"][n]["characterisation"]
        runs = c["runs_by_length"]
        assert runs[0] >= 0.3 * sum(runs), (n, runs)  # < 25 instructions: a large group
        assert sum(runs[3:]) > 0, (n, runs)  # a tail of runs of 1000+ instructions


def test_figure3_long_runs_cause_most_os_evictions(report):
    for n in ("web-server", "jvm"):
        for level in ("L1", "L2"):
            e = report["sources"][n]["characterisation"][level]
            by = e["os_caused_by_run"]
            assert sum(by[3:]) > sum(by[:3]), (n, level, by)
            assert e["os_caused"] > 0.3, (n, level)
    assert report["sources"]["compute"]["characterisation"]["L1"]["os_caused"] < 0.01


def test_table2_orderings(report):
    for n in ("web-server", "jvm"):
        data_seq = rel(report, n, "split-2mb-data-sequential")
        assert data_seq > 1.1, n  # the OS bank helps the OS-intensive workloads
        assert data_seq > rel(report, n, "split-2mb-instructions-sequential"), n  # data routing beats instructions
        assert data_seq >= rel(report, n, "split-2mb-data-parallel"), n  # sequential >= parallel
    assert rel(report, "compute", "split-2mb-data-sequential") <= 1.0  # and not the compute-bound one


def test_table3_equal_budget_starves_compute_and_the_fallback_recovers_it(report):
    static = rel(report, "compute", "split-1mb-data-sequential")
    adaptive = rel(report, "compute", "split-1mb-adaptive")
    assert static < 0.8
    assert adaptive > 0.97
    assert report["sources"]["compute"]["reports"]["split-1mb-adaptive"]["bank_predictions"][1] > 0


def test_same_input_same_report():
    w = load_workload(EX / "workloads" / "jvm.toml", 50_000)
    a = run_model(EX / "split-1mb-data-sequential.toml", w)
    b = run_model(EX / "split-1mb-data-sequential.toml", w)
    assert a == b


def test_report_files(report, tmp_path):
    text, written = write_report(report, tmp_path)
    names = {p.name for p in written}
    assert {"oscache.json", "oscache.csv", "oscache.md", "fig1_privileged.png", "fig2_run_lengths.png", "fig3_os_evictions.png", "ipc.png"} <= names
    assert "| web-server | sequential |" in text
    rows = list(csv.DictReader((tmp_path / "oscache.csv").open()))
    assert len(rows) == 3 * len(MACHINES)
    r = next(r for r in rows if r["source"] == "web-server" and r["machine"] == "split-2mb-data-sequential")
    assert float(r["relative_ipc"]) == pytest.approx(rel(report, "web-server", "split-2mb-data-sequential"))
    assert json.loads((tmp_path / "oscache.json").read_text())["baseline"] == "baseline"


def test_a_trace_with_privileged_records_runs(tmp_path):
    n = 20_000
    rng = np.random.default_rng(1)
    priv = (np.arange(n) // 100) % 2 == 1
    addr = np.where(priv, 0x6000_0000_0000 + rng.integers(0, 1 << 16, n) * 64, 0x20_0000 + rng.integers(0, 1 << 12, n) * 64)
    syscall = np.zeros(n, dtype=np.uint32)
    syscall[100::200] = (3 << 22) | 5
    path = tmp_path / "t.cctrace"
    write_trace(path, {"addr": addr.astype(np.uint64), "icount": np.ones(n, dtype=np.uint8), "privileged": priv, "syscall": syscall})
    r = run_model(EX / "baseline.toml", trace=path)
    assert r["privileged_share"] == pytest.approx(0.5, abs=0.01)
    assert sum(r["runs_by_length"]) == 100 and r["runs_with_identity"] == 100
    assert r["source"]["kind"] == "trace"


def test_a_budget_the_banks_exceed_is_rejected():
    m = {"model": {"split": {"user_size": "1MiB", "os_size": "1MiB", "budget": "1MiB", "placement": "data", "lookup": "parallel"}}}
    with pytest.raises(_core.ConfigError) as e:
        run_model(m, load_workload(EX / "workloads" / "compute.toml", 1000))
    assert "model.split.budget" in str(e.value)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "cachecolor", "oscache", *args], capture_output=True, text=True)


def test_cli_rejects_a_trace_without_privileged_records(tmp_path):
    path = tmp_path / "user.cctrace"
    write_trace(path, np.arange(5000, dtype=np.uint64) * 64)
    r = cli("report", str(EX / "baseline.toml"), "--trace", str(path), "-o", str(tmp_path / "o"), "--no-plots")
    assert r.returncode == 2, r.stderr
    assert "none is privileged" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_cli_report(tmp_path):
    r = cli(
        "report",
        str(EX / "baseline.toml"),
        str(EX / "split-2mb-data-sequential.toml"),
        "--workload",
        str(EX / "workloads" / "web-server.toml"),
        "--references",
        "50000",
        "-o",
        str(tmp_path),
        "--no-plots",
    )
    assert r.returncode == 0, r.stderr
    assert "| web-server | sequential |" in r.stdout
    assert (tmp_path / "oscache.csv").is_file() and not (tmp_path / "ipc.png").exists()
    bad = cli("report", "--references", "0", "-o", str(tmp_path))
    assert bad.returncode == 2 and "--references" in bad.stderr


SYSCALL_PROG = r"""
#include <fcntl.h>
#include <unistd.h>
static char buf[65536];
int main(int argc, char **argv) {
    (void)argc;
    for (int i = 0; i < 20; i++) {
        int fd = open(argv[1], O_RDONLY);
        long n = (long)read(fd, buf, sizeof buf);
        close(fd);
        for (long k = 0; k < n; k += 64) buf[k] ^= 1;
        write(1, buf, 10);
    }
    return 0;
}
"""


@pytest.mark.skipif(not __import__("shutil").which("qemu-x86_64") or not __import__("shutil").which("cc"), reason="needs qemu-user and cc")
def test_capture_with_syscalls_feeds_the_os_report(tmp_path):
    """A program reading a 32 KiB file 20 times, captured with --syscalls, is an OS workload:
    its reads are privileged runs with identities, and cachecolor oscache reports them."""
    src = tmp_path / "p.c"
    src.write_text(SYSCALL_PROG)
    exe = tmp_path / "p"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
    data = tmp_path / "data"
    data.write_bytes(b"y" * 32768)
    trace = tmp_path / "p.cctrace"
    r = subprocess.run(
        [sys.executable, "-m", "cachecolor", "trace", "capture", "--backend", "qemu", "--syscalls", "-o", str(trace), "--", str(exe), str(data)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    from cachecolor import trace_info

    assert trace_info(trace)["metadata"]["syscalls"] is True
    rep = run_model(EX / "baseline.toml", trace=trace)
    assert rep["invariants"] == []
    runs = sum(rep["runs_by_length"])
    assert runs == rep["runs_with_identity"] and runs >= 80  # 20 x (open, read, close, write) + the loader's
    # Each 32 KiB read is one run of 1 + 512 records (one per line, icount 1 each): 500-999.
    assert rep["runs_by_length"][2] >= 20
    assert rep["privileged_share"] > 0.01
    # Without --syscalls the same capture has no OS information: a clear CLI error.
    plain = tmp_path / "plain.cctrace"
    r = subprocess.run(
        [sys.executable, "-m", "cachecolor", "trace", "capture", "--backend", "qemu", "-o", str(plain), "--", str(exe), str(data)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    r = cli("report", str(EX / "baseline.toml"), "--trace", str(plain), "-o", str(tmp_path / "o"), "--no-plots")
    assert r.returncode == 2 and "none is privileged" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(not __import__("shutil").which("valgrind"), reason="needs valgrind")
def test_capture_with_syscalls_is_refused_by_lackey(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "cachecolor", "trace", "capture", "--backend", "lackey", "--syscalls", "-o", str(tmp_path / "t"), "--", "/bin/true"],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0 and "--syscalls" in r.stderr and "lackey" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
