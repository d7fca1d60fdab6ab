"""The suite's full-system workloads (cachecolor.workloads, issue 21's OS-intensive programs):
`find` built by `workloads.build` with a small record cap boots the packaged kernel (three
boots for this file: the recording, its replay and a rebuild's replay), and its trace must hold kernel code as the capture marks
it: kernel fetches in the upper half, the program's task found, metadata naming the kernel
image by its hash and its record/replay log (the trace is a replay of it, and a rebuild
replays the same trace); the characterization and the
evaluation's prefix keep the kernel's share. Without a kernel image (or qemu-system) the
workload is reported with the missing piece and skipped, and nothing is left in the cache.

The boot test skips, saying why, where qemu-system-x86_64, BusyBox or a kernel image is missing
(`make tools-system` installs them as root), as crates/capture/tests/system.rs does; the
missing-kernel and region checks need no QEMU."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import cachecolor
from cachecolor import fullsys
from cachecolor import workloads as wl
from cachecolor.traces import trace_info

KERNEL_BASE = 0xFFFF_8000_0000_0000
CAP = 3_000_000  # records: the exec, the loader and the start of the walk (~2 s traced)


def _system_can_run() -> str | None:
    why = fullsys.missing_system_tools()
    if why is None and not wl.package_versions(wl.by_name("find").packages)["findutils"]:
        why = "findutils not installed"
    return why


@pytest.fixture(scope="module")
def find_sys(tmp_path_factory):
    """`find` built as the suite builds it: a recording run (its trace kept here to compare)
    then the replay that is the workload's trace. Two boots."""
    why = _system_can_run()
    if why is not None:
        pytest.skip(f"full-system capture cannot run here: {why}")
    root = tmp_path_factory.mktemp("cache")
    # The suite's find over a smaller tree: the recording runs the program to its exit (about
    # 11 M records here, against the suite tree's whole walk).
    w = dataclasses.replace(wl.by_name("find"), make_input=lambda d: wl._tree(d / "tree", 20, 10, 9),
                            input_desc="generated tree, 20 dirs x 10 files")
    recording = root / "recording.cctrace"
    return w, root, wl.build(w, records=CAP, root=root, keep_recording=recording)


def test_full_system_workload_holds_the_kernels_records(find_sys):
    w, root, meta = find_sys
    assert w.capture == "system" and w.os_intensive
    trace = wl.wdir(w, root) / "trace.cctrace"
    ti = trace_info(trace)
    assert meta["records"] == ti["records"] == CAP and meta["truncated"]  # the region ended at its cap
    assert meta["capture"] == "system" and meta["kernel_code"] is True and meta["skip"] == 0
    assert "cannot fast-forward" in meta["region"]
    assert meta["reproducible"] is True and "record/replay" in meta["note"]
    rr = meta["record_replay"]
    log = wl.wdir(w, root) / wl.REPLAY_LOG
    assert rr["log"] == wl.REPLAY_LOG and rr["log_bytes"] == log.stat().st_size > 0
    assert rr["log_sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
    # The recording ran find to its exit (QEMU writes the log's header at exit), past the cap.
    assert rr["recording_exit_code"] == 0 and rr["recorded_records"] > CAP
    # The kernel booted, named by path and content.
    k = meta["kernel"]
    assert k["path"] == fullsys.locate_kernel()
    assert k["sha256"] == hashlib.sha256(open(k["path"], "rb").read()).hexdigest()
    assert all(meta["system_packages"].values()) and all(meta["packages"].values())
    # Kernel records, counted independently from the records themselves: privileged fetches are
    # exactly the fetches at kernel addresses, and their instructions are the metadata's share.
    df = cachecolor.read_trace(trace)
    fetch = df["kind"] == "ifetch"
    kernel_fetch = fetch & (df["addr"].to_numpy() >= KERNEL_BASE)
    assert (df["privileged"][fetch] == kernel_fetch[fetch]).all()
    assert meta["privileged_records"] == int(df["privileged"].sum()) > 0
    insns = int(df["icount"].sum())
    kern = int(df["icount"][df["privileged"]].sum())
    assert meta["instructions"] == insns
    assert meta["privileged_instructions"] == kern
    assert meta["privileged_instruction_share"] == pytest.approx(kern / insns)
    assert 0.3 < kern / insns < 1  # a file-system walk runs mostly in the kernel (docs/oscache.md: 84%)
    # The program's task: thread 0 (the launcher's child that execs find), with user code of its
    # own; the other tasks run kernel code only (kernel threads, the idle task) in this region.
    prog = meta["program_tasks"]
    assert [t["thread"] for t in prog] == [0] and prog[0]["user_instructions"] > 0
    assert prog[0]["user_instructions"] == int(df["icount"][(df["thread"] == 0) & ~df["privileged"]].sum())
    assert meta["guest_tasks"] == ti["threads"] == df["thread"].nunique()
    assert meta["task_summary"].startswith(f"{meta['guest_tasks']} guest tasks")
    assert fullsys.kernel_note(trace) is None  # no "holds no kernel code" line for it


def test_capped_capture_task_counts_only_the_records_it_kept(find_sys):
    # Bug: the capture's reader thread counted each task's instructions ahead of the sink's
    # record cap, so a capped trace's `tasks` held up to a block of records it did not keep
    # (find's 40 M-record region: 20,113,820 kernel instructions for thread 0, 20,037,028 in
    # the records). Every task's counts must be the trace's own.
    w, root, meta = find_sys
    trace = wl.wdir(w, root) / "trace.cctrace"
    df = cachecolor.read_trace(trace)
    tl = fullsys.tasks(trace)
    assert tl is not None and len(tl) == df["thread"].nunique()
    for t in tl:
        mine = df[df["thread"] == t["thread"]]
        assert t["kernel_instructions"] == int(mine["icount"][mine["privileged"]].sum()), t
        assert t["user_instructions"] == int(mine["icount"][~mine["privileged"]].sum()), t


def test_full_system_workload_characterization_and_prefix_keep_the_kernel(find_sys, tmp_path):
    from cachecolor.evaluate import kernel_share, prefix_trace

    w, root, meta = find_sys
    c = wl.characterize(w, root=root)
    assert c["kernel_code"] and c["instructions"] == meta["instructions"]
    assert c["privileged_instruction_share"] == meta["privileged_instruction_share"]
    assert c["privileged_share"] == pytest.approx(meta["privileged_records"] / meta["records"])
    assert 0 < c["ipc"] < 8 and 0 <= c["llc_misses"] <= c["llc_accesses"]
    mr = np.array(c["mrc"]["miss_rate"])
    assert np.all(np.diff(mr) <= 1e-12)
    # The evaluation reads a prefix: it still says it holds kernel code, with the kernel's
    # share of its own instructions.
    n = 200_000
    p = prefix_trace(wl.wdir(w, root) / "trace.cctrace", tmp_path / "prefix.cctrace", n)
    assert fullsys.kernel_note(p) is None
    df = cachecolor.read_trace(p)
    assert len(df) == n
    assert kernel_share(p) == pytest.approx(df["icount"][df["privileged"]].sum() / df["icount"].sum())
    row = wl.suite_table(root).splitlines()
    line = next(x for x in row if x.startswith("| find |"))
    assert "exec (full system) / 3,000,000 records" in line and f"{100 * meta['privileged_instruction_share']:.1f}%" in line


def test_missing_kernel_is_reported_and_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("CACHECOLOR_KERNEL", str(tmp_path / "no-such-vmlinuz"))
    lines: list[str] = []
    res = wl.build_all(["find"], root=tmp_path / "cache", log=lines.append, records=10_000)
    err = res["find"]["error"]
    assert err.startswith("find cannot be captured here: full-system capture: kernel image ") and "does not exist" in err, err
    assert any(s.startswith("find") and "SKIPPED" in s for s in lines), lines
    assert not (tmp_path / "cache").exists()  # refused before its input was generated


def test_missing_qemu_system_is_reported_and_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("CACHECOLOR_QEMU_SYSTEM", str(tmp_path / "no-qemu"))
    res = wl.build_all(["httpd"], root=tmp_path, log=lambda s: None)
    err = res["httpd"]["error"]
    assert "no-qemu is not installed" in err and "apt-get install qemu-system-x86" in err, err


def test_full_system_workload_refuses_a_fast_forward(tmp_path):
    with pytest.raises(RuntimeError, match="cannot fast-forward"):
        wl.build(wl.by_name("tar"), skip=1000, root=tmp_path)
    assert not any(tmp_path.iterdir())


def test_os_intensive_programs_are_the_full_system_ones():
    system = {w.name for w in wl.SUITE if w.capture == "system"}
    assert system == {w.name for w in wl.SUITE if w.os_intensive} == {"find", "tar", "httpd"}
    for w in wl.SUITE:
        if w.capture == "system":
            assert w.skip == 0 and w.guest_files and not w.threads > 1


def test_info_of_a_system_workload_is_json(tmp_path, run_cli):
    # `workloads list` shows the region of a full-system workload as starting at the exec.
    r = run_cli("workloads", "list", "httpd")
    assert r.returncode == 0 and "exec (system)" in r.stdout, r.stdout
    r = run_cli("workloads", "info", "httpd", "--cache", tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["built"] is False


def test_replay_of_a_recorded_guest_repeats_its_references(find_sys):
    """QEMU record/replay (docs/capture.md "Reproducibility"): the workload's trace, a replay of
    the log its recording run wrote, makes exactly the recorded run's loads and stores, in
    order, with their tasks and privilege, up to the replay's cap; instruction fetches differ
    only by the few the recorded run reports for instructions an interrupt or an I/O access
    made QEMU execute again (measured: 250 of 7.0 M). Without record/replay two captures differ
    from their first records on (the guest's address-space randomisation and its timer
    interrupts)."""
    w, root, meta = find_sys
    a = cachecolor.read_trace(root / "recording.cctrace", as_="array")  # the whole run
    b = cachecolor.read_trace(wl.wdir(w, root) / "trace.cctrace", as_="array")
    da, db = a[a["kind"] != 2], b[b["kind"] != 2]
    assert len(da) > len(db) > 100_000
    da = da[: len(db)]
    for col in ("addr", "kind", "size", "thread", "privileged"):
        assert (da[col] == db[col]).all(), col
    # The fetches over the same stretch of the run: the replay's CAP records against the
    # recording's records up to its len(db)-th data record.
    fb = int((b["kind"] == 2).sum())
    upto = int(np.flatnonzero(a["kind"] != 2)[len(db) - 1])
    fa = int((a["kind"][: upto + 1] == 2).sum())
    assert abs(fa - fb) <= fa // 1000, (fa, fb)
    native = json.loads(fullsys.native_metadata(wl.wdir(w, root) / "trace.cctrace") or "{}")
    assert native["record_replay"] == {"mode": "replay", "log": str(wl.wdir(w, root) / wl.REPLAY_LOG)}


def test_rebuild_of_a_full_system_workload_replays_the_same_trace(find_sys):
    """A `--force` rebuild replays the kept log (no new recording) and gives the same trace,
    record for record (the records hash). One boot."""
    w, root, meta = find_sys
    doc = (wl.wdir(w, root) / "replay.json").read_text()
    lines: list[str] = []
    again = wl.build(w, records=CAP, root=root, force=True, log=lines.append)
    assert not any("recorded" in s for s in lines), lines
    assert (wl.wdir(w, root) / "replay.json").read_text() == doc
    assert again["records"] == meta["records"] and again["records_hash"] == meta["records_hash"]
    assert again["record_replay"] == meta["record_replay"]


def _fake_recording(calls):
    """A stand-in for the recording child: writes a log (or half of one, then fails)."""
    def capture(argv, out, *, cwd, guest_files, records, record=None, replay=None):
        calls.append(records)
        Path(record).write_bytes(b"log %d" % len(calls))
        if len(calls) == 4:
            return {"error": "full-system capture: the guest did not boot"}, 0.1
        return {"summary": {"records": 11_000_000, "truncated": False, "exit_code": 0}}, 0.1
    return capture


def test_record_replay_log_is_kept_keyed_and_recorded_again_only_when_it_does_not_fit(tmp_path, monkeypatch):
    """`workloads.recorded_log` without QEMU: a log is recorded once per definition, of the whole
    run (no record cap: a recording QEMU is killed in has no header), and reused by later
    replays whatever their cap (so a rebuild replays the same run); a changed definition (here a
    new kernel) records anew; a failed recording leaves neither a log nor its key."""
    calls: list = []
    monkeypatch.setattr(wl, "capture_system_clean", _fake_recording(calls))
    w = wl.by_name("find")
    inp = tmp_path / "find" / "input"
    inp.mkdir(parents=True)
    spec = {"name": "find", "command": list(w.command), "records_requested": 1_000_000, "kernel": {"sha256": "a"}}
    first = wl.recorded_log(w, spec, inp, log=lambda s: None)
    assert calls == [None]  # the whole run
    assert first["recorded_records"] == 11_000_000 and first["recording_exit_code"] == 0
    assert (tmp_path / "find" / wl.REPLAY_LOG).read_bytes() == b"log 1"
    assert first["log_sha256"] == hashlib.sha256(b"log 1").hexdigest()
    assert not list((tmp_path / "find").glob("*.tmp"))
    # The same definition, any region length: the kept log.
    assert wl.recorded_log(w, spec, inp) == first
    assert wl.recorded_log(w, dict(spec, records_requested=60_000_000), inp) == first
    assert len(calls) == 1
    # A new kernel: recorded again; and again when the log is gone.
    second = wl.recorded_log(w, dict(spec, kernel={"sha256": "b"}), inp, log=lambda s: None)
    assert len(calls) == 2 and second["log_sha256"] != first["log_sha256"]
    (tmp_path / "find" / wl.REPLAY_LOG).unlink()
    wl.recorded_log(w, dict(spec, kernel={"sha256": "b"}), inp, log=lambda s: None)
    assert len(calls) == 3
    # A failed recording: an error, and no log or key left to replay.
    with pytest.raises(RuntimeError, match="recording failed: full-system capture: the guest did not boot"):
        wl.recorded_log(w, dict(spec, kernel={"sha256": "c"}), inp)
    assert sorted(p.name for p in (tmp_path / "find").iterdir()) == ["input"]
