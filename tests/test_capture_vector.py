"""Captured vector code against cachegrind (issue 20 item 4): one record per guest memory
operation, with its real size.

QEMU 7.2's x86 translator has no memory operation wider than 8 bytes: the plugin sees a 16-byte
SSE load as two 8-byte loads and a 32-byte AVX one as four. Before the decoder merged them
(crates/capture/src/stream.rs), a small matrix multiply captured 12.0 M loads where cachegrind
counted 8.0 M. Here a matrix multiply compiled with -O3 (SSE2, and AVX2 where the host has
it) is captured by QEMU and by lackey and run under cachegrind with the same geometry; the
data accesses and L1D misses must agree within 1% (exactly, in practice: see below).

Why they can agree exactly: the program is freestanding and static, non-PIE (no C library, no
loader: the same instructions run under QEMU and valgrind, whatever CPU features either
reports), its arrays are static and 64-byte aligned (the same addresses in both, so the same
sets; no access spans two lines: asserted, since cachegrind counts a two-line access once and
cachecolor once per line), and its vector code has no read-modify-write instruction (cachegrind
counts those as one read, QEMU as a load and a store; lackey's ``M`` records are counted as
cachegrind does). The stack (a few accesses) is where the two differ: QEMU places it elsewhere.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import cachecolor
from conftest import needs_cc, needs_qemu, needs_valgrind

PROGRAM = r"""
#define N 96                         /* three 36 KiB matrices: 3.4x the L1D below */
#define REPS 3
static float A[N][N] __attribute__((aligned(64)));
static float B[N][N] __attribute__((aligned(64)));
static float C[N][N] __attribute__((aligned(64)));
static void __attribute__((noinline)) init(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (float)(i + j);
            B[i][j] = (float)(i - j);
        }
}
static void __attribute__((noinline)) multiply(void) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            float a = A[i][k];
            for (int j = 0; j < N; j++)
                C[i][j] += a * B[k][j];
        }
}
void __attribute__((noreturn)) _start(void) {
    init();
    for (int r = 0; r < REPS; r++)
        multiply();
    int s = (int)C[5][7];
    __asm__ volatile("" :: "r"(s));
    __asm__ volatile("syscall" :: "a"(60), "D"(0) : "rcx", "r11", "memory");
    __builtin_unreachable();
}
"""

LINE = 64
# cachegrind needs power-of-two sets: I1 32 KiB 8-way, D1 32 KiB 8-way (64 sets), LL 256 KiB.
CACHES = {"I1": (32768, 8), "D1": (32768, 8), "LL": (262144, 8)}
CONFIG = {"hierarchy": {"line_size": LINE, "levels": [
    {"name": "L1I", "size": CACHES["I1"][0], "ways": CACHES["I1"][1], "serves": "instruction"},
    {"name": "L1D", "size": CACHES["D1"][0], "ways": CACHES["D1"][1], "serves": "data"},
    {"name": "LL", "size": CACHES["LL"][0], "ways": CACHES["LL"][1]},
]}}


def _host_has_avx2() -> bool:
    try:
        return " avx2 " in f" {Path('/proc/cpuinfo').read_text().replace(chr(10), ' ')} "
    except OSError:
        return False


ISAS = [
    pytest.param("sse2", ["-msse2"], 16, id="sse2"),
    pytest.param("avx2", ["-mavx2"], 32, id="avx2", marks=pytest.mark.skipif(
        not _host_has_avx2(), reason="the host CPU has no AVX2 (cachegrind runs the program natively)")),
]


def _cachegrind(exe: Path, tmp: Path) -> dict[str, int]:
    out = tmp / "cg.out"
    geometry = [f"--{name}={size},{ways},{LINE}" for name, (size, ways) in CACHES.items()]
    run = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *geometry,
                          f"--cachegrind-out-file={out}", str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    events = summary = None
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
    assert events and summary, f"no events:/summary: lines in {out}"
    return dict(zip(events, summary))


def _data_counts(trace: Path) -> tuple[np.ndarray, dict[str, int]]:
    """The data records of a trace and, with cachegrind's conventions, their accesses and
    L1D misses under CONFIG (a modify is one read, as cachegrind's ``Dm``)."""
    t = cachecolor.read_trace(trace, as_="array")
    data = t[t["kind"] != 2]
    spans = (data["addr"] >> np.uint64(6)) != ((data["addr"] + data["size"].astype(np.uint64) - np.uint64(1)) >> np.uint64(6))
    result = cachecolor.simulate(CONFIG, trace=trace)
    assert result.invariants == []
    l1d = result.to_dict()["levels"][1]
    assert l1d["name"] == "L1D"
    return data, {"accesses": len(data), "misses": l1d["misses"], "spans": int(np.count_nonzero(spans))}


@needs_cc
@needs_valgrind
@needs_qemu
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the traced program is x86-64 (syscall asm)")
@pytest.mark.parametrize("isa,flags,width", ISAS)
def test_vector_accesses_match_cachegrind(tmp_path, isa, flags, width):
    src = tmp_path / "mm.c"
    src.write_text(PROGRAM)
    exe = tmp_path / f"mm-{isa}"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O3", *flags, "-nostdlib", "-static", "-fno-pie", "-no-pie", "-fno-stack-protector",
                    "-o", str(exe), str(src)], check=True, capture_output=True, timeout=60)
    cg = _cachegrind(exe, tmp_path)

    qemu = tmp_path / "qemu.cctrace"
    cachecolor.capture([str(exe)], qemu, backend="qemu")
    q_data, q = _data_counts(qemu)
    lackey = tmp_path / "lackey.cctrace"
    cachecolor.capture([str(exe)], lackey, backend="lackey")
    l_data, lk = _data_counts(lackey)
    cg_acc, cg_miss = cg["Dr"] + cg["Dw"], cg["D1mr"] + cg["D1mw"]
    print(f"{isa}: cachegrind D {cg_acc} D1 misses {cg_miss}; qemu {q}; lackey {lk}")

    # The vector accesses keep their width (QEMU's plugin saw them as 8-byte pieces).
    for data in (q_data, l_data):
        sizes = np.bincount(data["size"], minlength=width + 1)
        assert sizes[width] > 0.5 * len(data), f"{width}-byte accesses: {sizes[width]} of {len(data)}"
        assert data["size"].max() == width
    # Preconditions of exact agreement: no data access spans two lines; QEMU sees no
    # read-modify-write in this code (a load and a store of one address by one instruction
    # would be two records where cachegrind counts one).
    assert q["spans"] == 0 and lk["spans"] == 0
    for name, got in (("qemu", q), ("lackey", lk)):
        assert abs(got["accesses"] - cg_acc) <= 0.01 * cg_acc, (name, got, cg)
        assert abs(got["misses"] - cg_miss) <= 0.01 * cg_miss, (name, got, cg)
    assert cg_miss > 0.05 * cg_acc, "the L1D must miss for the comparison to mean anything"
