"""The workload suite (cachecolor.workloads, issue 21): the CI-sized subset is captured twice
and must give the same trace hash (single-threaded programs, ASLR off, fixed environment), and
its characterization must agree with the trace (instructions equal the trace's count, misses
within accesses, a monotone miss-rate curve, no privileged records from a user-mode capture).
The plugin's fast-forward is checked against a full capture of the same program. Skipped when
qemu-user or a program's package is missing (`make workloads` installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecolor import workloads as wl
from cachecolor.traces import read_trace, trace_info

pytestmark = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user not installed")

CI = [wl.by_name(n) for n in wl.CI_SUBSET]


def _installed(w: wl.Workload) -> bool:
    return all(v is not None for v in wl.package_versions(w.packages).values())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each CI program captured twice, into two separate caches."""
    out = {}
    roots = [tmp_path_factory.mktemp("cacheA"), tmp_path_factory.mktemp("cacheB")]
    for w in CI:
        if not _installed(w):
            continue
        skip, recs = wl.CI_SUBSET[w.name]
        out[w.name] = [wl.build(w, skip=skip, records=recs, root=r) for r in roots]
    out["_roots"] = roots
    return out


@pytest.mark.parametrize("name", list(wl.CI_SUBSET))
def test_ci_trace_is_reproducible(built, name):
    if name not in built:
        pytest.skip(f"{name}: package not installed")
    a, b = built[name]
    skip, recs = wl.CI_SUBSET[name]
    assert a["records"] == recs and a["truncated"], a  # the region ended at its record count
    assert a["records_hash"] == b["records_hash"], "same program, input, region: same records"
    assert a["instructions"] == b["instructions"]
    assert a["packages"] == b["packages"] and all(a["packages"].values())


@pytest.mark.parametrize("name", list(wl.CI_SUBSET))
def test_ci_characterization_is_sane(built, name):
    if name not in built:
        pytest.skip(f"{name}: package not installed")
    root = built["_roots"][0]
    w = wl.by_name(name)
    c = wl.characterize(w, root=root)
    meta = wl.info(w, root)
    ti = trace_info(wl.wdir(w, root) / "trace.cctrace")
    assert c["instructions"] == meta["instructions"] == ti["instructions"] > 0
    # The timing model ran every record of the trace and counted exactly its instructions
    # (issue 20 item 3: it used to charge max(icount, 1), so every data record counted one).
    assert c["model_instructions"] == ti["instructions"]
    assert ti["records"] == sum(ti["kinds"].values())
    assert meta["kinds"] == ti["kinds"] and ti["kinds"]["ifetch"] == ti["instructions"]
    assert c["ipc"] == pytest.approx(c["instructions"] / c["cycles"])
    assert 0 < c["ipc"] < 8 and c["llc_mpki"] >= 0
    assert 0 <= c["llc_misses"] <= c["llc_accesses"]
    mr = np.array(c["mrc"]["miss_rate"])
    assert np.all(np.diff(mr) <= 1e-12) and 0 <= mr.min() and mr.max() <= 1
    assert c["footprint_bytes"] > 0
    assert c["privileged_share"] == 0.0  # user-mode capture: no kernel records (issue 27 adds them)
    assert json.loads((wl.wdir(w, root) / "characterization.json").read_text())["ipc"] == c["ipc"]


def test_cached_trace_is_reused_and_rebuilt_when_missing(built, capsys):
    if "sort" not in built:
        pytest.skip("coreutils missing")
    w, root = wl.by_name("sort"), built["_roots"][0]
    skip, recs = wl.CI_SUBSET["sort"]
    first = wl.info(w, root)
    assert wl.build(w, skip=skip, records=recs, root=root) == first  # cached: same metadata
    (wl.wdir(w, root) / "trace.cctrace").unlink()
    again = wl.build(w, skip=skip, records=recs, root=root)
    assert again["records_hash"] == first["records_hash"] and again["capture_seconds"] is not None


def test_skip_fast_forwards_whole_blocks(tmp_path):
    """skip=N drops N instructions give or take one block (<= 512 guest instructions; the
    count is per executed block): checked against a full capture of the same program. The
    two modes agree within a few instructions (ifetch=off credits instructions to data
    records, and the ones after the last data record are not in the trace)."""
    full, _ = wl.capture_clean(["sort", "/etc/passwd"], tmp_path / "full.cctrace", cwd=tmp_path)
    n_full = trace_info(tmp_path / "full.cctrace")["instructions"]
    for ifetch in (True, False):
        out = tmp_path / f"skip{ifetch}.cctrace"
        wl.capture_clean(["sort", "/etc/passwd"], out, cwd=tmp_path, skip=100_000, ifetch=ifetch)
        n = trace_info(out)["instructions"]
        assert abs((n_full - n) - 100_000) <= 512, (n_full, n, ifetch)


def test_failing_program_is_reported_and_skipped(tmp_path, monkeypatch):
    bad_pkg = wl.Workload("nopkg", "test", ("cachecolor-no-such-package",), ("true",), lambda d: None, "", 0, 10)
    crash = wl.Workload("crash", "test", ("coreutils",), ("ls", "/no/such/path"), lambda d: None, "", 0, 10_000_000)
    ok = wl.Workload("ok", "test", ("coreutils",), ("true",), lambda d: None, "", 0, 10_000_000)
    monkeypatch.setattr(wl, "SUITE", (bad_pkg, crash, ok))
    lines: list[str] = []
    res = wl.build_all(root=tmp_path, log=lines.append)
    assert "not installed" in res["nopkg"]["error"]
    assert "status 2" in res["crash"]["error"], res["crash"]
    assert res["ok"]["records"] > 0 and not res["ok"]["truncated"]
    assert any("SKIPPED" in s and "crash" in s for s in lines)


def test_full_disk_while_capturing_is_one_line_and_leaves_no_trace(tmp_path, monkeypatch):
    """The capture child's file size limit stands in for a full disk (its writes fail the
    same way): the program is reported and skipped in one line, and its cache directory holds
    no trace, partial or temporary, and no metadata."""
    import resource
    import signal

    real_popen = subprocess.Popen

    def limited(cmd, *a, **kw):
        if cmd and cmd[0] == "setarch":  # the capture child only
            def cap():
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
                resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
            kw["preexec_fn"] = cap
        return real_popen(cmd, *a, **kw)

    # The capture child is started with Popen (so an interrupt reaches it and it can clean up).
    monkeypatch.setattr(wl.subprocess, "Popen", limited)
    w = wl.by_name("sort")
    lines: list[str] = []
    res = wl.build_all(["sort"], root=tmp_path, log=lines.append, skip=2_000_000, records=3_000_000)
    assert "error" in res["sort"], res
    (line,) = [s for s in lines if "sort" in s]
    assert "SKIPPED" in line and "File too large" in line and "\n" not in line, line
    left = sorted(p.name for p in wl.wdir(w, tmp_path).iterdir())
    assert left == ["input"], left


def test_region_fixed_in_instructions(tmp_path):
    """--instructions N: the capture stops at the record that brings the trace to N
    instructions (with fetches, one instruction per fetch: exactly N), the program killed."""
    out = tmp_path / "i.cctrace"
    s, _ = wl.capture_clean(["sort", "/etc/passwd"], out, cwd=tmp_path, skip=20_000, instructions=50_000)
    assert s["truncated"], s
    assert trace_info(out)["instructions"] == 50_000


def test_capture_of_a_program_writing_binary_to_stdout(tmp_path):
    # Bug: xz's compressed output ("\xfd7zXZ", no newline) on the capture child's stdout made
    # the summary unreadable (UnicodeDecodeError) once a region reached the output: xz SKIPPED.
    s, _ = wl.capture_clean(["/bin/sh", "-c", r"printf '\375\067zXZ\000\001'"], tmp_path / "t.cctrace", cwd=tmp_path)
    assert "error" not in s and s["records"] > 0, s


def test_no_suite_program_writes_its_output_to_a_device_glpsol_unlinked_dev_null():
    # Bug: glpk-mcf ran `glpsol ... -o /dev/null`; glpsol removes its output file before writing
    # it, so every capture as root deleted the host's /dev/null (the next `> /dev/null` made it a
    # regular file). User-mode programs run on the host: their outputs go to the input directory.
    for w in wl.SUITE:
        if w.capture == "user":
            assert not [a for a in w.command if a.startswith("/dev/")], (w.name, w.command)


def test_cli_rejects_unknown_program():
    r = subprocess.run([sys.executable, "-m", "cachecolor", "workloads", "build", "nosuch"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("cachecolor: error: unknown workload 'nosuch'"), r.stderr
    assert r.stderr.count("\n") == 1


def test_default_region_of_a_user_mode_program_is_a_billion_instructions(tmp_path, monkeypatch):
    """The suite's default region is the papers' scale: every user-mode program is captured for
    REGION_INSTRUCTIONS (1 B) instructions from its start, not a record count; a full-system
    program keeps its record cap. ``build`` with neither ``records`` nor ``instructions`` asks
    the capture for the program's own length in the right unit."""
    assert wl.REGION_INSTRUCTIONS >= 1_000_000_000
    user = [w for w in wl.SUITE if w.capture == "user"]
    assert len(user) >= 23 and all(w.length == wl.REGION_INSTRUCTIONS for w in user), [(w.name, w.length) for w in user]
    assert all(w.length < wl.REGION_INSTRUCTIONS for w in wl.SUITE if w.capture == "system")  # record caps of their own
    asked: dict = {}

    def fake_capture(argv, out, **kw):
        asked.update(kw)
        raise RuntimeError("stop before capturing")

    monkeypatch.setattr(wl, "capture_clean", fake_capture)
    w = wl.Workload("ok", "test", ("coreutils",), ("true",), lambda d: None, "", 0, wl.REGION_INSTRUCTIONS)
    with pytest.raises(RuntimeError, match="stop before"):
        wl.build(w, skip=0, root=tmp_path)
    assert asked["instructions"] == wl.REGION_INSTRUCTIONS and asked["records"] is None, asked
    asked.clear()
    with pytest.raises(RuntimeError, match="stop before"):
        wl.build(w, skip=0, records=5000, root=tmp_path)  # a region asked in records stays one
    assert asked["records"] == 5000 and asked["instructions"] is None, asked
    listed = subprocess.run([sys.executable, "-m", "cachecolor", "workloads", "list", "xz", "find"],
                            capture_output=True, text=True, check=True).stdout
    assert "1,000,000,000 instructions" in listed and "40,000,000 records" in listed, listed


def test_suite_table_does_not_show_a_stale_characterization_as_the_new_traces(tmp_path, monkeypatch):
    """A re-captured region (a new records hash) leaves the old characterization's IPC and MPKI
    out of the suite table instead of printing them beside the new trace's record counts."""
    w = wl.Workload("ok", "test", ("coreutils",), ("true",), lambda d: None, "", 0, wl.REGION_INSTRUCTIONS)
    monkeypatch.setattr(wl, "SUITE", (w,))
    d = wl.wdir(w, tmp_path)
    d.mkdir(parents=True)
    meta = {"name": "ok", "packages": {"coreutils": "9"}, "records": 10, "instructions": 8, "records_hash": "a" * 64,
            "capture_seconds": 1.0, "reproducible": True, "skip": 0, "instructions_requested": 8}
    (d / "meta.json").write_text(json.dumps(meta))
    char = {"ipc": 1.234, "llc_mpki": 5.678, "footprint_bytes": 1 << 20, "records_hash": "b" * 64}
    (d / "characterization.json").write_text(json.dumps(char))
    assert "1.234" not in wl.suite_table(tmp_path) and "not characterized" in wl.suite_table(tmp_path)
    (d / "characterization.json").write_text(json.dumps(dict(char, records_hash="a" * 64)))
    assert "1.234" in wl.suite_table(tmp_path) and "5.68" in wl.suite_table(tmp_path)


def test_cli_list_names_every_program():
    r = subprocess.run([sys.executable, "-m", "cachecolor", "workloads", "list"], capture_output=True, text=True, check=True)
    for w in wl.SUITE:
        assert f"\n{w.name} " in r.stdout
    assert len(wl.SUITE) >= 12


@pytest.mark.parametrize("name", ["stencil-mt", "pipeline-mt"])
def test_shared_data_programs_write_lines_that_other_threads_read(tmp_path, name):
    """The shared-data threads are what their names say: in a short window of each (past its
    threads' start), a cache line one thread stores to is loaded by another thread, and no
    single thread makes all the references. (pigz's and xz -T4's threads work on blocks of
    their own.) Counted from the records against the programs' sources: the stencil shares its
    band's boundary rows with the neighbouring bands, the pipeline its ring's blocks with the
    consumer."""
    w = wl.by_name(name)
    if not _installed(w):
        pytest.skip(f"{', '.join(w.packages)} not installed (make workloads installs them)")
    m = wl.build(w, skip=20 * wl.M, records=8_000_000, root=tmp_path)
    f = read_trace(wl.wdir(w, tmp_path) / "trace.cctrace")
    f = f[f.kind != "ifetch"]
    line = f.addr.to_numpy() // 64
    threads = f.thread.to_numpy()
    share = np.bincount(np.unique(threads, return_inverse=True)[1]) / len(threads)
    assert len(share) >= 4 and share.max() < 0.5, share  # four workers, none dominant
    stores = f.kind.isin(["store", "modify"]).to_numpy()
    writers = pd.DataFrame({"line": line[stores], "w": threads[stores]}).drop_duplicates()
    readers = pd.DataFrame({"line": line[~stores], "r": threads[~stores]}).drop_duplicates()
    both = writers.merge(readers, on="line")
    shared = both[both.w != both.r].line.nunique()
    assert shared >= 64, (shared, m["records"])  # at least a 4 KiB page's worth of lines
