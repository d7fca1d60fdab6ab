"""The kernel-code honesty line (cachecolor.fullsys.kernel_note) in trace info, the oscache
report and the --system option checks of `cachecolor trace capture`. The full-system capture
itself is tested in crates/capture/tests/system.rs (it boots a guest); these tests need no QEMU.
"""

import json
from pathlib import Path

import numpy as np

from cachecolor import write_trace
from cachecolor.fullsys import kernel_note, native_metadata


def _trace(path: Path, meta: str, privileged: bool = False, some: bool = False) -> Path:
    """1000 loads; all privileged (kernel addresses), or every tenth (``some``: markers), or none."""
    addr = np.arange(0, 64 * 1000, 64, dtype=np.uint64)
    if privileged:
        addr = addr + np.uint64(0xFFFF_FFFF_8100_0000)
    priv = np.full(len(addr), privileged) | (some & (np.arange(len(addr)) % 10 == 0))
    write_trace(path, addr, metadata=meta, privileged=priv)
    return path


def test_full_system_trace_has_no_note(tmp_path):
    t = _trace(tmp_path / "sys.cctrace", json.dumps({"source": "cachecolor-capture", "system": True}), True)
    assert json.loads(native_metadata(t) or "")["system"] is True
    assert kernel_note(t) is None


def test_user_mode_capture_says_it_holds_no_kernel_code(tmp_path):
    t = _trace(tmp_path / "u.cctrace", json.dumps({"source": "cachecolor-capture", "backend": "qemu", "syscalls": True}))
    note = kernel_note(t)
    assert note is not None and "holds no kernel code" in note and "system-call markers" in note
    assert "\n" not in note
    bare = kernel_note(_trace(tmp_path / "b.cctrace", json.dumps({"source": "cachecolor-capture", "backend": "lackey"})))
    assert bare is not None and "no privileged records" in bare
    other = kernel_note(_trace(tmp_path / "o.cctrace", "written by hand"))
    assert other is not None and "not a full-system capture" in other
    assert "holds no kernel code" in (kernel_note(tmp_path / "x.din", "din") or "")


def test_trace_info_and_oscache_report_print_the_note(tmp_path, run_cli, examples):
    t = _trace(tmp_path / "u.cctrace", json.dumps({"source": "cachecolor-capture", "backend": "qemu", "syscalls": True}), some=True)
    r = run_cli("trace", "info", t)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("kernel code")]
    assert len(line) == 1 and "holds no kernel code" in line[0], r.stdout
    s = _trace(tmp_path / "s.cctrace", json.dumps({"system": True}), True)
    r = run_cli("trace", "info", s)
    assert "kernel code     yes: full-system capture" in r.stdout or "yes: full-system capture" in r.stdout, r.stdout
    r = run_cli(
        "oscache", "report", "--trace", t, "--trace", s, "--out", tmp_path / "rep", "--no-plots",
        examples / "oscache" / "baseline.toml",
    )
    assert r.returncode == 0, r.stderr
    notes = [x for x in r.stdout.splitlines() if "kernel code" in x]
    assert len(notes) == 1 and notes[0].startswith("u.cctrace: note: user-mode capture"), r.stdout


def test_system_option_misuse_is_one_line(tmp_path, run_cli):
    for args, what in (
        (["--system", "--no-ifetch"], "do not apply"),
        (["--system", "--guest-memory", "8"], "allowed 64 to 16384"),
        (["--kernel", "/boot/x"], "apply to --system"),
        (["--record", str(tmp_path / "g.rr")], "apply to --system"),
        (["--system", "--replay", str(tmp_path / "none.rr")], "no such log"),
    ):
        r = run_cli("trace", "capture", *args, "-o", tmp_path / "o.cctrace", "--", "true")
        assert r.returncode == 2, r.stderr
        assert what in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "o.cctrace").exists()


def _tasks_trace(path: Path) -> Path:
    """A full-system-shaped trace with task identity: thread 0 the program (user and kernel
    references), thread 1 another process, thread 2 a kernel thread; kernel addresses in the
    upper half, as a capture writes them."""
    n = 3000
    thread = np.repeat(np.arange(3, dtype=np.uint32), n // 3)
    priv = (np.arange(n) % 3 == 0) | (thread == 2)
    addr = np.where(priv, np.uint64(0xFFFF_8880_0100_0000), np.uint64(0x40_0000)) + (np.arange(n, dtype=np.uint64) % 256) * np.uint64(64)
    kind = np.full(n, 2, dtype=np.uint8)  # every record an instruction fetch of one instruction
    icount = np.ones(n, dtype=np.uint32)
    users = [int(((thread == t) & ~priv).sum()) for t in range(3)]
    kernels = [int(((thread == t) & priv).sum()) for t in range(3)]
    tasks = [
        {"thread": 0, "pid": 60, "tgid": 60, "comm": "find", "parent": None, "program": True},
        {"thread": 1, "pid": 1, "tgid": 1, "comm": "cc_run", "parent": None, "program": False},
        {"thread": 2, "pid": 14, "tgid": 14, "comm": "ksoftirqd/0", "parent": None, "program": False},
    ]
    for t in tasks:
        t["user_instructions"] = users[t["thread"]]
        t["kernel_instructions"] = kernels[t["thread"]]
    meta = {"source": "cachecolor-capture", "backend": "qemu-system", "system": True, "kernel_code": True,
            "task_identity": {"version": 1, "pids": True}, "tasks": tasks}
    write_trace(path, addr, metadata=json.dumps(meta), privileged=priv, threads=thread, kinds=kind, icounts=icount)
    return path


def test_task_summary_tells_the_program_from_other_processes_and_kernel_threads(tmp_path, run_cli):
    from cachecolor.fullsys import task_groups, task_summary, tasks

    t = _tasks_trace(tmp_path / "t.cctrace")
    tl = tasks(t)
    assert tl is not None and [x["comm"] for x in tl] == ["find", "cc_run", "ksoftirqd/0"]
    g = task_groups(tl)
    # Recount from the records themselves, independently of the metadata.
    import cachecolor

    df = cachecolor.read_trace(t)
    for name, th in (("program", 0), ("other", 1), ("kernel-only", 2)):
        sel = df[df["thread"] == th]
        assert g[name]["user"] == int((~sel["privileged"]).sum())
        assert g[name]["kernel"] == int(sel["privileged"].sum())
    line = task_summary(t)
    assert line is not None and "\n" not in line and line.startswith("3 guest tasks")
    assert "program (find 60) 1 task(s) 33.3% (user 22.2%, kernel 11.1%)" in line, line
    assert "kernel-only tasks 1 task(s) 33.3%" in line, line
    r = run_cli("trace", "info", t)
    assert r.returncode == 0, r.stderr
    assert [x for x in r.stdout.splitlines() if x.startswith("guest tasks")] == [f"guest tasks     {line}"], r.stdout
    # Traces without task identity (user mode, or a full-system trace from before it) have none.
    old = _trace(tmp_path / "old.cctrace", json.dumps({"source": "cachecolor-capture", "system": True}), True)
    assert tasks(old) is None and task_summary(old) is None and task_summary(t, "din") is None


def test_whole_system_runs_a_trace_with_kernel_addresses(tmp_path, run_cli):
    """Issue 27: kernel (canonical upper-half) addresses are translated, not refused; the
    simulate report says who ran the trace's instructions."""
    _tasks_trace(tmp_path / "t.cctrace")
    cfg = tmp_path / "sys.toml"
    cfg.write_text(
        '[machine]\npreset = "xeon-e5506"\n[machine.hierarchy]\ncores = 1\n[memory]\nram = "256MiB"\n'
        '[[processes]]\nname = "guest"\n[[processes.threads]]\ntrace = "t.cctrace"\n'
    )
    r = run_cli("simulate", cfg, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["invariants"] == [] and doc["processes"][0]["instructions"] == 3000
    assert any(x.startswith("guest: 3 guest tasks") for x in r.stdout.splitlines()), r.stdout
    # A non-canonical address is still refused, in one line.
    write_trace(tmp_path / "t.cctrace", np.array([0x1000, 0xFFFE_0000_0000_0000], dtype=np.uint64))
    r = run_cli("simulate", cfg, "--json", tmp_path / "r2.json")
    assert r.returncode == 2 and "record 1" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_trace_threads_run_the_programs_tasks_apart(tmp_path, run_cli):
    """`trace_threads` keeps a trace's chosen threads (a full-system trace's guest tasks): the
    program's task alone retires exactly its records' instructions; the rest of the guest as a
    second process retires the others'. Bad input is one line naming the field."""
    _tasks_trace(tmp_path / "t.cctrace")
    cfg = tmp_path / "sys.toml"
    head = '[machine]\npreset = "xeon-e5506"\n[machine.hierarchy]\ncores = 1\n[memory]\nram = "256MiB"\n'
    cfg.write_text(
        head + '[[processes]]\nname = "program"\n[[processes.threads]]\ntrace = "t.cctrace"\ntrace_threads = [0]\n'
        '[[processes]]\nname = "rest"\n[[processes.threads]]\ntrace = "t.cctrace"\ntrace_threads = [2, 1]\n'
    )
    r = run_cli("simulate", cfg, "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["invariants"] == []
    assert [p["instructions"] for p in doc["processes"]] == [1000, 2000]
    for bad, what in (("trace_threads = []", "trace_threads: an empty list"),):
        cfg.write_text(head + f'[[processes]]\nname = "p"\n[[processes.threads]]\ntrace = "t.cctrace"\n{bad}\n')
        r = run_cli("simulate", cfg)
        assert r.returncode == 2 and what in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    cfg.write_text(head + '[[processes]]\nname = "p"\n[[processes.threads]]\ntrace_threads = [0]\n'
                   'workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "64KiB", references = 1000 }] }\n')
    r = run_cli("simulate", cfg)
    assert r.returncode == 2 and "trace_threads: applies to a thread fed by a `trace`" in r.stderr, r.stderr


def test_whole_system_report_says_a_user_mode_trace_holds_no_kernel_code(tmp_path, run_cli):
    """Issue 27 item 4: the whole-system report (`simulate` on a system config) prints the one
    honesty line for a user-mode capture, and none for a full-system trace."""
    _trace(tmp_path / "u.cctrace", json.dumps({"source": "cachecolor-capture", "backend": "qemu", "syscalls": True}), some=True)
    _tasks_trace(tmp_path / "s.cctrace")
    cfg = tmp_path / "sys.toml"
    cfg.write_text(
        '[machine]\npreset = "xeon-e5506"\n[machine.hierarchy]\ncores = 2\n[memory]\nram = "256MiB"\n'
        '[[processes]]\nname = "user"\n[[processes.threads]]\ntrace = "u.cctrace"\n'
        '[[processes]]\nname = "full"\n[[processes.threads]]\ntrace = "s.cctrace"\n'
    )
    r = run_cli("simulate", cfg)
    assert r.returncode == 0, r.stderr
    notes = [x for x in r.stdout.splitlines() if "kernel code" in x]
    assert len(notes) == 1 and notes[0].startswith("user: note: user-mode capture (qemu): this trace holds no kernel code"), r.stdout


def test_oscache_report_keeps_traces_of_the_same_file_name_apart(tmp_path, run_cli, examples):
    # Bug: the report named a trace by its file name, so the suite's traces (each
    # workloads/NAME/trace.cctrace) were reported as one row. Their directory now tells them apart.
    meta = json.dumps({"source": "cachecolor-capture", "system": True})
    for name in ("find", "tar"):
        (tmp_path / name).mkdir()
        _trace(tmp_path / name / "trace.cctrace", meta, some=True)
    r = run_cli(
        "oscache", "report", "--trace", tmp_path / "find" / "trace.cctrace", "--trace", tmp_path / "tar" / "trace.cctrace",
        "--out", tmp_path / "rep", "--no-plots", "-q", examples / "oscache" / "baseline.toml",
    )
    assert r.returncode == 0, r.stderr
    rows = [x for x in r.stdout.splitlines() if x.startswith("| find/trace.cctrace |") or x.startswith("| tar/trace.cctrace |")]
    assert {x.split("|")[1].strip() for x in rows} == {"find/trace.cctrace", "tar/trace.cctrace"}, r.stdout
