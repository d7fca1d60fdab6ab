"""The memory map in captured traces and `cachecolor annotate` resolving code and data through it
(issue 22): PIE programs and shared libraries, a stripped binary, JIT-like anonymous code made by
python3 -c, and a program that maps and unmaps memory repeatedly; an older trace without a map
still annotates as before.

Independent checks: cachegrind/cg_annotate on the same PIE binary and geometry (lackey capture:
the same client layout and instruction stream), closed-form access counts of the test
programs, and the addresses the programs print themselves.
"""
from __future__ import annotations

import json
import os
import shutil
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor
from cachecolor.cli import main

annotate_mod = importlib.import_module("cachecolor.annotate")  # the module, not the function
sys.path.insert(0, os.path.dirname(__file__))
from test_annotate import CG_GEOMETRY, CONFIG, PROG, assert_lines_match_cachegrind  # noqa: E402

have_cc = shutil.which("cc") is not None and shutil.which("nm") is not None
needs_qemu = pytest.mark.skipif(not have_cc or shutil.which("qemu-x86_64") is None,
                                reason="qemu-x86_64, cc and nm are needed (make tools)")
needs_valgrind = pytest.mark.skipif(not have_cc or shutil.which("valgrind") is None,
                                    reason="valgrind, cc and nm are needed (make tools)")
PYTHON3 = "/usr/bin/python3"


def compile_c(d: Path, name: str, src: str, *flags: str) -> Path:
    c = d / f"{name}.c"
    c.write_text(src)
    exe = d / name
    subprocess.run(["cc", "-g", "-O1", *flags, "-o", str(exe), str(c)], check=True)
    return exe


@pytest.fixture(scope="module")
def pie(tmp_path_factory):
    """The pollute program of test_annotate built as PIE, captured under QEMU and lackey."""
    d = tmp_path_factory.mktemp("pie")
    exe = compile_c(d, "pollute", PROG, "-fPIE", "-pie")
    qemu_trace, lackey_trace = d / "q.cctrace", d / "l.cctrace"
    out = {"dir": d, "exe": exe, "src": d / "pollute.c", "qemu": None, "lackey": None}
    if shutil.which("qemu-x86_64"):
        cachecolor.capture([str(exe)], qemu_trace, "qemu")
        out["qemu"] = qemu_trace
    if shutil.which("valgrind"):
        cachecolor.capture([str(exe)], lackey_trace, "lackey")
        out["lackey"] = lackey_trace
    return out


@needs_valgrind
def test_pie_per_line_misses_equal_cg_annotate_within_1_percent(pie):
    """As test_annotate's check, for a PIE program resolved through lackey's memory map."""
    cg_out = pie["dir"] / "cachegrind.out"
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *CG_GEOMETRY,
                    f"--cachegrind-out-file={cg_out}", str(pie["exe"])], check=True, capture_output=True)
    ours = cachecolor.annotate(pie["lackey"], CONFIG)
    assert ours.attrs["memory_map"]
    assert_lines_match_cachegrind(ours, cg_out, pie["src"].name)
    # The PIE's globals are placed at its load address.
    objs = cachecolor.annotate(pie["lackey"], CONFIG, by="object").set_index("object")
    assert objs.loc["reused", "size"] == 16 * 1024 * 8 and objs.loc["stream", "LL_miss_rate"] > 0.99


@needs_qemu
def test_qemu_pie_program_and_its_libraries_are_resolved(pie):
    m = cachecolor.memory_map(pie["qemu"])
    assert m is not None and m["version"] == 1
    prog = [x for x in m["mappings"] if x["path"] == os.path.realpath(pie["exe"])]
    assert prog and min(x["start"] for x in prog) >= 0x4000000000  # PIE at QEMU's base
    assert {x["kind"] for x in m["mappings"]} >= {"file", "stack", "heap"}
    funcs = cachecolor.annotate(pie["qemu"], CONFIG, by="function").set_index("function")
    # closed form, as test_annotate: 8 passes of 16 Ki longs, and the 8 `ret`s
    assert funcs.loc["sum_reused", "reads"] == 8 * 16 * 1024 + 8
    assert funcs.loc["sum_reused", "LL_data_misses"] == 7 * (16 * 1024 // 8)
    # the loader and libc are named by their own debug information or symbols, nothing is lost
    assert not any(f.startswith("(outside") for f in funcs.index)
    info = cachecolor.trace_info(pie["qemu"])
    assert funcs[["reads", "writes", "ifetches"]].to_numpy().sum() == info["records"]
    objs = cachecolor.annotate(pie["qemu"], CONFIG, by="object").set_index("object")
    # per 4 KiB page: an edge page shared with a neighbour may go to it (annotate_objects)
    assert abs(objs.loc["reused", "reads"] - 8 * 16 * 1024) <= 0.01 * 8 * 16 * 1024
    assert abs(objs.loc["stream", "writes"] - 512 * 1024) <= 0.01 * 512 * 1024
    assert objs.loc["stream", "LL_miss_rate"] > 0.99
    ranges = cachecolor.object_ranges(pie["qemu"])
    assert all(lo < hi for lo, hi, _n, _k in ranges)
    kinds = {k for _lo, _hi, _n, k in ranges}
    assert {"file", "symbol", "stack"} <= kinds


@needs_qemu
def test_stripped_pie_is_attributed_to_its_mapping_and_resolves_with_binary(pie):
    stripped = pie["dir"] / "pollute.stripped"
    shutil.copy(pie["exe"], stripped)
    subprocess.run(["strip", str(stripped)], check=True)
    trace = pie["dir"] / "stripped.cctrace"
    cachecolor.capture([str(stripped)], trace, "qemu")
    bare = cachecolor.annotate(trace, CONFIG, by="function").set_index("function")
    info = cachecolor.trace_info(trace)
    assert bare[["reads", "writes", "ifetches"]].to_numpy().sum() == info["records"]
    assert "sum_reused" not in bare.index
    # no symbol left: the program's code is its mapping's
    own = [f for f in bare.index if "pollute.stripped" in f]
    assert own and bare.loc[own, "reads"].sum() >= 8 * 16 * 1024
    # --binary: the unstripped build resolves the same run's lines again
    full = cachecolor.annotate(trace, CONFIG, binary=pie["exe"], by="function").set_index("function")
    assert full.loc["sum_reused", "reads"] == 8 * 16 * 1024 + 8


# x86-64 machine code: long sum(long *p, long n) { s = 0; do s += *p++; while (--n); return s; }
JIT = ("import mmap, ctypes\n"
       "code = bytes.fromhex('31c0' '480307' '4883c708' '48ffce' '75f4' 'c3')\n"
       "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
       "m.write(code)\n"
       "addr = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
       "f = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_long)(addr)\n"
       "a = (ctypes.c_long * 20000)(*range(20000))\n"
       "print(f(ctypes.addressof(a), 20000), hex(addr))\n")


@needs_qemu
@pytest.mark.skipif(not os.path.exists(PYTHON3), reason="needs /usr/bin/python3")
def test_python3_jit_code_is_attributed_to_its_anonymous_mapping(tmp_path, capfd):
    trace = tmp_path / "jit.cctrace"
    summary = cachecolor.capture([PYTHON3, "-S", "-c", JIT], trace, "qemu")
    out = capfd.readouterr().out.split()
    assert out[0] == str(sum(range(20000)))
    addr = int(out[1], 16)
    m = cachecolor.memory_map(trace)
    # the region the program got (other mappings may have held that address before it):
    # Python's anonymous mmap is MAP_SHARED, which the kernel shows as "/dev/zero (deleted)"
    holder = [x for x in m["mappings"] if x["start"] <= addr < x["end"]]
    assert holder and all(x["kind"] == "anon" for x in holder), holder
    funcs = cachecolor.annotate(trace, CONFIG, by="function").set_index("function")
    jit = [f for f in funcs.index if f.startswith("(code in [anon")]
    # the generated loop's 20000 loads and the `ret`'s pop; its instructions (4 per element,
    # the xor and the ret)
    assert funcs.loc[jit, "reads"].sum() == 20000 + 1
    assert funcs.loc[jit, "ifetches"].sum() == 4 * 20000 + 2
    assert funcs[["reads", "writes", "ifetches"]].to_numpy().sum() == summary["records"]
    # python3 itself (stripped) is named by its dynamic symbols, not dropped
    assert "_PyEval_EvalFrameDefault" in funcs.index


CHURN = r"""
#include <stdio.h>
#include <sys/mman.h>
__attribute__((noinline)) long churn(int rounds) {
    long s = 0;
    for (int r = 0; r < rounds; r++) {
        long *p = mmap(NULL, (size_t)(r % 3 + 1) << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (int i = 0; i < (1 << 13); i += 8)
            p[i] = i + r;
        for (int i = 0; i < (1 << 13); i += 8)
            s += p[i];
        munmap(p, (size_t)(r % 3 + 1) << 16);
    }
    return s;
}
int main(void) { printf("%ld\n", churn(300)); return 0; }
"""


@needs_qemu
def test_mmap_munmap_loop_is_followed_and_every_reference_kept(tmp_path):
    exe = compile_c(tmp_path, "churn", CHURN, "-fPIE", "-pie")
    trace = tmp_path / "churn.cctrace"
    summary = cachecolor.capture([str(exe)], trace, "qemu")
    m = cachecolor.memory_map(trace)
    assert m["events"] >= 2 * 300  # a map and an unmap per round
    assert not m["truncated"]
    funcs = cachecolor.annotate(trace, CONFIG, by="function").set_index("function")
    # each round's 1024 stores and 1024 loads, and a few spills of its own
    assert 300 * 1024 <= funcs.loc["churn", "writes"] <= 1.01 * 300 * 1024
    assert 300 * 1024 <= funcs.loc["churn", "reads"] <= 1.01 * 300 * 1024
    assert funcs[["reads", "writes", "ifetches"]].to_numpy().sum() == summary["records"]
    objs = cachecolor.annotate(trace, CONFIG, by="object")
    assert objs[["reads", "writes"]].to_numpy().sum() == summary["records"] - summary["ifetches"]
    kinds = objs.attrs["kinds"]
    anon = objs[[kinds[o] == "anon" for o in objs["object"]]]
    assert anon["writes"].sum() >= 300 * 1024  # the churned regions are their mappings'
    assert "(unmapped)" not in set(objs["object"]) or objs.set_index("object").loc["(unmapped)", "writes"] == 0


@needs_valgrind
def test_trace_without_a_map_annotates_as_before(pie, monkeypatch, capsys):
    """A trace from before the map (PCs, no ``memory_map``): the non-PIE path, unchanged."""
    d = pie["dir"]
    exe = compile_c(d, "nopie", PROG, "-no-pie", "-fno-pie")
    trace = d / "nopie.cctrace"
    cachecolor.capture([str(exe)], trace, "lackey")
    real = annotate_mod._trace_header

    def without_map(t):
        head = real(t)
        head["metadata"].pop("memory_map", None)
        return head

    monkeypatch.setattr(annotate_mod, "_trace_header", without_map)
    assert cachecolor.memory_map(trace) is None
    funcs = cachecolor.annotate(trace, CONFIG, by="function").set_index("function")
    assert funcs.loc["sum_reused", "reads"] == 8 * 16 * 1024 + 8
    assert any(f.startswith("(outside nopie") for f in funcs.index)
    objs = cachecolor.annotate(trace, CONFIG, by="object")
    assert "(heap, stack or other: no memory map)" in set(objs["object"])
    assert cachecolor.object_ranges(trace) and all(k == "symbol" for *_r, k in cachecolor.object_ranges(trace))
    cfg = d / "cfg.json"
    cfg.write_text(json.dumps(CONFIG))
    assert main(["annotate", str(trace), "--config", str(cfg), "-q", "--top", "3", "--context", "0"]) == 0
    assert "(no memory map)" in capsys.readouterr().out


@needs_qemu
def test_profile_and_rocs_report_name_the_objects(pie, capsys):
    """Issue 22 item 3: with a map, ``cachecolor profile``'s regions and the rocs report's
    arrays are the program's objects, not bare address ranges."""
    from cachecolor.reports.rocs import arrays

    cfg = pie["dir"] / "cg-profile.json"
    cfg.write_text(json.dumps(CONFIG))
    assert main(["profile", "--config", str(cfg), str(pie["qemu"]), "-q", "--min-share", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "objects" in out and "stream" in out and "reused" in out
    arrs = arrays({"processes": [{"name": "p", "threads": [{"trace": str(pie["qemu"])}]}]})
    byname = {a["name"]: a for a in arrs}
    ranges = {n: (lo, hi) for lo, hi, n, _k in cachecolor.object_ranges(pie["qemu"])}
    for name in ("reused", "stream"):
        assert (byname[name]["lo"], byname[name]["hi"]) == ranges[name]
        assert byname[name]["streaming"] is None
    assert not any(n.startswith("libc.so.6:") for n in byname)
    # a config without traces: the mix arrays only, as before
    assert arrays({"processes": [{"name": "p", "threads": [{}]}]}) == []


@needs_qemu
def test_trace_info_summarises_the_map_in_one_line(pie, capsys):
    assert main(["trace", "info", str(pie["qemu"])]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("memory map")]
    assert len(line) == 1 and "version 1:" in line[0] and "file" in line[0]
    assert '"mappings"' not in out  # not dumped whole into the metadata line


@needs_valgrind
def test_program_named_relatively_still_gets_its_memory_map(pie, monkeypatch):
    """Regression: `cachecolor trace capture -- ./prog` recorded no map (the map's absolute path
    of the program was compared as text with the command line's `./prog`)."""
    monkeypatch.chdir(pie["dir"])
    trace = pie["dir"] / "relative.cctrace"
    cachecolor.capture([f"./{pie['exe'].name}"], trace, "lackey")
    mmap = cachecolor.memory_map(trace)
    assert mmap is not None
    assert any(os.path.realpath(m["path"]) == os.path.realpath(pie["exe"])
               for m in mmap["mappings"] if m.get("kind") == "file")
