"""Heap objects by allocation site (issue 22): the QEMU capture preloads the heap shim into the
guest, and `cachecolor annotate --objects` names each heap block by the source line that
allocated it. A program without the shim working (statically linked) still captures, and the
trace says why it has no heap sites.

Independent checks: the addresses the program prints itself, the allocation lines of its source
(found by text, not by our resolver), closed-form access counts (brute force over the trace's
records within each block, and annotate's per-object rows)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import cachecolor
from cachecolor.annotate import heap_objects
from cachecolor.cli import main

have_tools = all(shutil.which(t) for t in ("cc", "nm", "qemu-x86_64"))
pytestmark = pytest.mark.skipif(not have_tools, reason="qemu-x86_64, cc and nm are needed (make tools)")

# Two arrays from two call sites: one streamed (written once, read once), one reused (written
# once, read PASSES times). Sizes above glibc's mmap threshold, 16 bytes short of whole pages, so
# each block is its own mapping, starts 16 bytes into it and ends on a page boundary: every page
# is the block's (annotate tallies by 4 KiB page).
NS = (1 << 20) // 8 - 2
NR = (256 << 10) // 8 - 2
PASSES = 4
PROG = f"""
#include <stdio.h>
#include <stdlib.h>

#define NS {NS}L
#define NR {NR}L
#define PASSES {PASSES}

int main(void)
{{
    double *stream = malloc(NS * sizeof *stream); /* site: stream */
    double *reused = malloc(NR * sizeof *reused); /* site: reused */
    if (!stream || !reused)
        return 1;
    for (long i = 0; i < NR; i++)
        reused[i] = 1.0;
    for (long i = 0; i < NS; i++)
        stream[i] = (double)i;
    double sum = 0;
    for (int p = 0; p < PASSES; p++)
        for (long i = 0; i < NR; i++)
            sum += reused[i];
    for (long i = 0; i < NS; i++)
        sum += stream[i];
    fprintf(stderr, "%lx %lx %f\\n", (unsigned long)stream, (unsigned long)reused, sum);
    free(stream);
    free(reused);
    return 0;
}}
"""
CONFIG = """
[hierarchy]
line_size = 64
inclusion = "non-inclusive"
levels = [
  { name = "I1", size = "32KiB", ways = 8, policy = "lru", serves = "instruction" },
  { name = "D1", size = "32KiB", ways = 8, policy = "lru", serves = "data" },
  { name = "LL", size = "1MiB", ways = 16, policy = "lru" },
]
"""


def _line_of(src: str, marker: str) -> int:
    return next(i for i, text in enumerate(src.splitlines(), 1) if marker in text)


@pytest.fixture(scope="module")
def heapprog(tmp_path_factory):
    d = tmp_path_factory.mktemp("heap")
    (d / "heapprog.c").write_text(PROG)
    exe = d / "heapprog"
    # -O1: no vectorisation, so each element is one 8-byte access
    subprocess.run(["cc", "-g", "-O1", "-o", str(exe), str(d / "heapprog.c")], check=True)
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stderr.split()
    trace = d / "h.cctrace"
    cachecolor.capture([str(exe)], trace, "qemu")
    cfg = d / "c.toml"
    cfg.write_text(CONFIG)
    return {"dir": d, "exe": exe, "trace": trace, "config": cfg, "native_addrs": printed[:2]}


def test_two_allocation_sites_are_two_named_heap_objects_with_closed_form_accesses(heapprog, capsys):
    heap = heap_objects(heapprog["trace"])
    assert heap is not None and heap["shim_loaded"] and heap["note"] is None
    # brute force: the trace's data records inside each block of each site
    recs = cachecolor.read_trace(heapprog["trace"], as_="array")
    addr, kind = recs["addr"].astype(np.uint64), recs["kind"]
    by_size = {}
    for s in heap["sites"]:
        for lo, hi, _f, _t in s["ranges"]:
            if hi - lo in (NS * 8, NR * 8):
                inside = (addr >= lo) & (addr < hi)
                by_size[hi - lo] = (int((inside & (kind == 0)).sum()), int((inside & (kind == 1)).sum()))
    # (kind codes: 0 load, 1 store: cachecolor.records.KIND_NAMES)
    assert by_size[NS * 8] == (NS, NS)
    assert by_size[NR * 8] == (PASSES * NR, NR)

    assert main(["annotate", str(heapprog["trace"]), "--config", str(heapprog["config"]), "--objects",
                 "--no-search", "--json", "-", "-q"]) == 0
    rows = {r["object"]: r for r in json.loads(capsys.readouterr().out)}
    src = PROG
    stream_name = f"[heap site main heapprog.c:{_line_of(src, 'site: stream')}]"
    reused_name = f"[heap site main heapprog.c:{_line_of(src, 'site: reused')}]"
    assert stream_name in rows and reused_name in rows, sorted(rows)
    # annotate tallies by page: the first page also holds the allocator's 16-byte chunk header,
    # which malloc writes and free reads (a few accesses, glibc's own)
    for name, reads, writes in ((stream_name, NS, NS), (reused_name, PASSES * NR, NR)):
        r = rows[name]
        assert reads <= r["reads"] <= reads + 8, (name, r["reads"], reads)
        assert writes <= r["writes"] <= writes + 8, (name, r["writes"], writes)
    # the streamed array misses every line when written and when read; the reused one misses
    # when written and on its first pass (the stream's writes, 1 MiB, evicted it from the 1 MiB
    # LL), then fits: its other PASSES - 1 passes hit
    lines_s, lines_r = NS * 8 // 64, NR * 8 // 64
    assert rows[stream_name]["LL_misses"] >= 2 * lines_s
    assert 2 * lines_r <= rows[reused_name]["LL_misses"] <= 2 * lines_r + 8


def test_a_static_program_captures_and_says_why_it_has_no_heap_sites(heapprog, capsys):
    d = heapprog["dir"]
    exe = d / "heapprog-static"
    subprocess.run(["cc", "-g", "-O1", "-static", "-o", str(exe), str(d / "heapprog.c")], check=True)
    trace = d / "s.cctrace"
    summary = cachecolor.capture([str(exe)], trace, "qemu")
    assert summary["records"] > 2 * NS
    heap = heap_objects(trace)
    assert heap is not None and heap["sites"] == [] and not heap["shim_loaded"]
    assert "statically linked" in heap["note"]
    assert main(["annotate", str(trace), "--config", str(heapprog["config"]), "--objects",
                 "--no-search", "-q"]) == 0
    assert "no heap objects by allocation site: " in capsys.readouterr().out


def test_two_captures_with_the_shim_are_identical_shim_path_not_random(heapprog):
    """Regression: the shim was first written into the capture's random temporary directory;
    the guest's loader reads LD_PRELOAD byte by byte, so two captures of one program differed.
    Its path is now the same in every capture (the user's cache)."""
    # both here: the guest's environment (PYTEST_CURRENT_TEST) differs from the fixture's
    one, two = heapprog["dir"] / "h1.cctrace", heapprog["dir"] / "h2.cctrace"
    cachecolor.capture([str(heapprog["exe"])], one, "qemu")
    cachecolor.capture([str(heapprog["exe"])], two, "qemu")
    a = cachecolor.read_trace(one, as_="array")
    b = cachecolor.read_trace(two, as_="array")
    assert len(a) == len(b) and (a == b).all()
    assert heap_objects(one)["sites"] == heap_objects(two)["sites"]
