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
    ):
        r = run_cli("trace", "capture", *args, "-o", tmp_path / "o.cctrace", "--", "true")
        assert r.returncode == 2, r.stderr
        assert what in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "o.cctrace").exists()
