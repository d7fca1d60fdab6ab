"""Per-object reuse, the ROCS search's pollute-buffer candidates and their predicted effect, misses
per object over time (`cachecolor annotate --objects`, `cachecolor.objects`; issue 22 item 2).

Reuse is checked against a brute-force LRU stack (a Python list, O(N x M)) and a brute-force L1
on small synthetic traces; the pollute buffer on the C program of test_annotate.py (a 4 MiB array
streamed through a 256 KiB LL between passes over a reused 128 KiB array) against closed forms.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import cachecolor
from cachecolor import objects
from cachecolor.cli import main

from test_annotate import CONFIG, needs_tools, program  # noqa: F401  (the captured C program)

LOAD = 0
LINE = 64


def brute_distances(lines):
    """LRU stack distance of each reference (1 = the line just used; 0 = first reference)."""
    stack, out = [], []
    for ln in lines:
        if ln in stack:
            i = stack.index(ln)
            out.append(len(stack) - i)
            stack.pop(i)
        else:
            out.append(0)
        stack.append(ln)
    return out


def brute_l1_misses(lines, sets, ways):
    """Whether each reference misses a set-associative LRU cache (loads only: no write policy)."""
    content = [[] for _ in range(sets)]
    out = []
    for ln in lines:
        s = content[ln % sets]
        if ln in s:
            s.remove(ln)
            out.append(False)
        else:
            if len(s) == ways:
                s.pop(0)
            out.append(True)
        s.append(ln)
    return out


def brute_reuse(addrs, owner_of, reaches, llc_lines):
    """Per object: references reaching the LLC, cold, within the LLC's lines, median reuse."""
    dist = brute_distances([a // LINE for a in addrs])
    per: dict[str, list[int]] = {}
    for a, d, r in zip(addrs, dist, reaches):
        if r:
            per.setdefault(owner_of(a), []).append(d)
    out = {}
    for name, ds in per.items():
        reused = sorted(d for d in ds if d > 0)
        out[name] = {"references": len(ds), "cold": ds.count(0) / len(ds),
                     "within": sum(1 for d in ds if 0 < d <= llc_lines) / len(ds),
                     "median": reused[(len(reused) + 1) // 2 - 1] if reused else None}
    return out


RANGES = [(0x10000, 0x10000 + 8192, "hot", "global"), (0x40000, 0x40000 + 64 * 1024, "scan", "global")]


def owner(a):
    for lo, hi, name, _ in RANGES:
        if lo <= a < hi:
            return name
    return objects.OTHER


def mixed_addresses(n=6000, seed=3):
    """Reuses of an 8 KiB array interleaved with a 64 KiB scan and a few stray pages."""
    rng = np.random.default_rng(seed)
    out = []
    scan = 0
    for i in range(n):
        r = rng.random()
        if r < 0.5:
            out.append(0x10000 + int(rng.integers(0, 8192 // 8)) * 8)
        elif r < 0.9:
            out.append(0x40000 + (scan * 8) % (64 * 1024))
            scan += 1
        else:
            out.append(0x90000 + int(rng.integers(0, 4 * 4096 // 8)) * 8)
    return out


def write(tmp_path, addrs, name="t.cctrace"):
    path = tmp_path / name
    cachecolor.write_trace(path, {"addr": np.asarray(addrs, dtype=np.uint64),
                                  "kind": np.full(len(addrs), LOAD, dtype=np.uint8),
                                  "size": np.full(len(addrs), 8, dtype=np.uint8)})
    return path


def test_reuse_equals_brute_force_stack_distances_and_a_fully_associative_llcs_hits(tmp_path):
    # The mix, then a phase of the hot array alone: the others miss nothing in the last interval.
    addrs = mixed_addresses() + [0x10000 + (i * 72) % 8192 for i in range(1000)]
    trace = write(tmp_path, addrs)
    # One fully associative LRU level of 64 lines: every data reference reaches it, and it hits
    # exactly the references of stack distance <= 64 (Mattson's inclusion property).
    cfg = {"hierarchy": {"line_size": LINE, "levels": [{"name": "LL", "size": "4KiB", "ways": 64, "policy": "lru"}]}}
    reuse, series = objects.object_reuse(trace, cfg, RANGES, intervals=7)
    want = brute_reuse(addrs, owner, [True] * len(addrs), 64)
    got = reuse.set_index("object")
    assert set(got.index) == set(want) == {"hot", "scan", objects.OTHER}
    for name, w in want.items():
        assert got.loc[name, "LL_references"] == w["references"]
        assert got.loc[name, "cold_share"] == pytest.approx(w["cold"], abs=1e-12)
        assert got.loc[name, "reuse_within_LL"] == pytest.approx(w["within"], abs=1e-12)
        assert got.loc[name, "median_reuse_lines"] == w["median"]
    # The simulated misses per interval equal the brute-force count (distance 0 or > 64) there.
    dist = brute_distances([a // LINE for a in addrs])
    every = series.attrs["interval_records"]
    for r in series.itertuples(index=False):
        want_m = sum(1 for i in range(r.interval * every, min(len(addrs), (r.interval + 1) * every))
                     if owner(addrs[i]) == r.object and (dist[i] == 0 or dist[i] > 64))
        assert r.LL_misses == want_m, (r.object, r.interval)
    assert len(series) == 3 * 7
    again, series2 = objects.object_reuse(trace, cfg, RANGES, intervals=7)  # deterministic
    assert again.equals(reuse) and series2.equals(series)


def test_series_has_every_interval_of_every_object_so_a_plot_does_not_join_across_gaps(tmp_path):
    # Found while looking at the first plot: an object absent from an interval had no row there,
    # and its line was drawn straight across the gap. Now the gap is a row of zeros.
    addrs = mixed_addresses(n=3000) + [0x10000 + (i * 72) % 8192 for i in range(1000)]
    trace = write(tmp_path, addrs)
    cfg = {"hierarchy": {"line_size": LINE, "levels": [{"name": "LL", "size": "4KiB", "ways": 64, "policy": "lru"}]}}
    _, series = objects.object_reuse(trace, cfg, RANGES, intervals=4)
    assert series.groupby("object").size().to_dict() == {"hot": 4, "scan": 4, objects.OTHER: 4}
    last = series[series["interval"] == 3].set_index("object")["LL_misses"]
    assert last["scan"] == 0 and last[objects.OTHER] == 0 and last["hot"] > 0


def test_reuse_counts_only_the_references_that_reach_the_llc(tmp_path):
    addrs = mixed_addresses(seed=5)
    trace = write(tmp_path, addrs)
    # An L1 of 512 B (4 sets x 2 ways) in front of the LL: the reuse population is its misses.
    cfg = {"hierarchy": {"line_size": LINE, "inclusion": "non-inclusive", "levels": [
        {"name": "L1", "size": "512B", "ways": 2, "policy": "lru", "serves": "data"},
        {"name": "LL", "size": "8KiB", "ways": 8, "policy": "lru"}]}}
    reuse, _ = objects.object_reuse(trace, cfg, RANGES)
    reaches = brute_l1_misses([a // LINE for a in addrs], 4, 2)
    want = brute_reuse(addrs, owner, reaches, 128)
    got = reuse.set_index("object")
    for name, w in want.items():
        assert got.loc[name, "LL_references"] == w["references"]
        assert got.loc[name, "cold_share"] == pytest.approx(w["cold"], abs=1e-12)
        assert got.loc[name, "reuse_within_LL"] == pytest.approx(w["within"], abs=1e-12)
        assert got.loc[name, "median_reuse_lines"] == w["median"]
    assert got["LL_references"].sum() < len(addrs)  # the L1 filtered some: the check is not vacuous


def brute_owner(pg, ranges):
    """The owner of page ``pg`` by definition (the rule of every view): a symbol or heap site
    covering at least half of it, else the range covering most of it, at least half; among
    equal covers the finer kind (symbol or heap site, then a named mapping, then an anonymous
    one), then the narrower, then the first name; -1 for none."""
    rank = {"symbol": 2, "heap site": 2, "anon": 0}
    best = None
    for i, (lo, hi, name, kind) in enumerate(ranges):
        cover = min(hi, (pg + 1) * 4096) - max(lo, pg * 4096)
        fine = kind in ("symbol", "heap site")
        if cover > 0:
            # the first name wins a tie: compare names as descending keys (negated code points)
            key = (int(fine and cover >= 2048), cover, rank.get(kind, 1), -(hi - lo), [-ord(c) for c in name] + [1], i)
            best = key if best is None or key[:5] > best[:5] else best
    return best[-1] if best is not None and best[1] >= 2048 else -1


def test_page_owners_gives_a_page_to_the_range_covering_most_of_it():
    owners = objects.page_owners([(0x1000, 0x1800, "a", "global"), (0x1800, 0x3400, "b", "global")])
    # page 1 half each: the narrower range; page 2 all b; page 3 a quarter covered: nobody (2 = other)
    assert owners.lookup(np.array([0, 1, 2, 3]), 2).tolist() == [2, 0, 1, 2]
    # Random nested and overlapping ranges (mappings, then objects inside them) against the rule.
    rng = np.random.default_rng(7)
    ranges = []
    for i in range(60):
        lo = int(rng.integers(0, 200 * 4096))
        ranges.append((lo, lo + int(rng.integers(1, 40 * 4096)), f"r{i}", "symbol" if i % 3 == 0 else "anon"))
    owners = objects.page_owners(ranges)
    pages = np.arange(0, 250, dtype=np.uint64)
    got = owners.lookup(pages, -1).tolist()
    assert got == [brute_owner(int(p), ranges) for p in pages]
    assert len(set(got)) > 10  # many owners: the check is not vacuous


def test_a_bss_global_inside_an_anonymous_mapping_is_owned_by_the_global():
    """Regression: a .bss table whose first bytes share the program's last file page and whose
    rest fills the anonymous mapping after it, of the same size as that mapping and listed
    before it (widest first, then by start), was `table` in annotate's table and
    `[anon ...]` in the reuse, search and time views (page_owners painted by list order)."""
    table = (0x4000004040, 0x4000044040, "table", "symbol")
    anon = (0x4000005000, 0x4000045000, "[anon 0x4000005000-0x4000045000]", "anon")
    prog = (0x4000000000, 0x4000005000, "myprog", "file")
    ranges = sorted([prog, anon, table], key=lambda r: (-(r[1] - r[0]), r[0], r[2]))  # default_ranges' order
    assert ranges[0] == table  # the tie the old order lost
    owners = objects.page_owners(ranges)
    pages = np.arange(0x4000000, 0x4000046, dtype=np.uint64)
    names = [ranges[i][2] if i >= 0 else "-" for i in owners.lookup(pages, -1).tolist()]
    want = [brute_owner(int(p), ranges) for p in pages]
    assert owners.lookup(pages, -1).tolist() == want
    # pages 0x4000004..0x4000043 (the table's 64) are the table's; 0x4000044 is the anon's tail
    assert names[4:0x44] == ["table"] * 64 and names[0x44] == anon[2] and names[0:4] == ["myprog"] * 4


def test_a_region_held_by_a_file_and_an_anonymous_mapping_goes_to_the_file_in_any_order():
    """Regression: a memory map listing a region under a library's file mapping and under an
    anonymous mapping of the same extent (it held both over time) gave its pages to the
    mapping in the accesses table (first listed) and to the file in the reuse, search and time
    views (last listed): one region, two names. The file names it in every order."""
    libc = (0x4002a64000, 0x4002a71000, "libc.so.6", "file")
    anon = (0x4002a64000, 0x4002a71000, "[anon 0x4002a64000-0x4002a71000]", "anon")
    wider = (0x4002a64000, 0x4002a74000, "[anon 0x4002a64000-0x4002a74000]", "anon")
    pages = np.arange(0x4002a60, 0x4002a76, dtype=np.uint64)
    seen = set()
    for ranges in ([libc, anon, wider], [anon, libc, wider], [wider, anon, libc], [wider, libc, anon]):
        got = objects.page_owners(ranges).lookup(pages, -1).tolist()
        assert got == [brute_owner(int(p), ranges) for p in pages]
        seen.add(tuple(ranges[i][2] if i >= 0 else "-" for i in got))
    assert len(seen) == 1  # the same names whatever the order
    names = seen.pop()
    assert names[4:0x11] == ("libc.so.6",) * 13 and names[0x11:0x14] == (wider[2],) * 3
    # Two objects of the same kind and extent (aliases of one global): the first name.
    alias = [(0x5000, 0x6000, "table", "symbol"), (0x5000, 0x6000, "__table", "symbol")]
    assert objects.page_owners(alias).lookup(np.array([5]), -1).tolist() == [1]
    assert objects.page_owners(alias[::-1]).lookup(np.array([5]), -1).tolist() == [0]


def test_a_huge_range_is_not_listed_page_by_page():
    # A terabyte reservation (as a memory map can hold) with an object inside it: answered
    # without enumerating its 2^28 pages.
    tb = 1 << 40
    owners = objects.page_owners([(0x10_0000_0000, 0x10_0000_0000 + tb, "reserve", "mapping"),
                                  (0x10_0000_8000, 0x10_0000_9000, "obj", "global")])
    assert len(owners.vpns) <= 4 and len(owners.span_first) <= 3
    base = 0x10_0000_0000 >> 12
    assert owners.lookup(np.array([base, base + 8, base + 9, base + (tb >> 12) - 1, base - 1]), 2).tolist() == [
        0, 1, 0, 0, 2]


def test_a_pure_stream_is_not_searched(tmp_path):
    # Every reference is a first reference: no page ever hits, nothing reused to protect (rocs's
    # rule since issue 19), so the search does not run and no object is a candidate.
    addrs = [0x100000 + i * LINE for i in range(4000)]
    trace = write(tmp_path, addrs)
    cfg = {"hierarchy": {"line_size": LINE, "levels": [{"name": "LL", "size": "64KiB", "ways": 4, "policy": "lru"}]}}
    frame, log = objects.pollute_search(trace, cfg, [(0x100000, 0x100000 + 4000 * LINE, "s", "global")])
    assert log["skipped"].startswith("no reference hit in LL") and log["chosen"] == 0 and log["steps"] == []
    assert not frame["pollute"].any()
    assert (frame["LL_misses_buffered"] == frame["LL_misses_reserved"]).all()
    with pytest.raises(ValueError, match="buffer_colors=4: LL has 4 colors"):
        objects.pollute_search(trace, cfg, [], buffer_colors=4)


def test_an_llc_of_one_color_skips_the_search_instead_of_failing_the_report(tmp_path):
    # 32 KiB 8-way: 4 KiB a way, one color. No buffer fits beside the other pages; the objects'
    # other columns must still come out (this failed the whole report on the first try).
    trace = write(tmp_path, mixed_addresses(n=2000))
    cfg = {"hierarchy": {"line_size": LINE, "levels": [{"name": "LL", "size": "32KiB", "ways": 8, "policy": "lru"}]}}
    frame, log = objects.pollute_search(trace, cfg, RANGES)
    assert log["colors"] == 1 and log["buffer_colors"] == 0 and "one color" in log["skipped"]
    assert not frame["pollute"].any()
    assert (frame["LL_misses_buffered"] == frame["LL_misses_shared"]).all()


@needs_tools
def test_the_rocs_search_names_the_streaming_array_and_buffering_it_cuts_the_reused_arrays_misses(program):  # noqa: F811
    frame = cachecolor.annotate(program["trace"], CONFIG, binary=program["exe"], by="object")
    objs = frame.set_index("object")
    log = frame.attrs["pollute_search"]
    # 256 KiB / 8 ways / 4 KiB = 8 colors; ROCS's sixteenth rounds up to one color.
    assert log["colors"] == 8 and log["buffer_colors"] == 1 and log["skipped"] is None
    # The streaming array is the candidate: every one of its pages goes to the buffer, none of
    # the reused array's.
    assert objs.loc["stream", "pollute"] and not objs.loc["reused", "pollute"]
    assert objs.loc["stream", "kind"] == "symbol"
    # The rest: the program's other mappings (stack, libc, loader) by the trace's memory map, or
    # one catch-all row without a map.
    assert objects.other_label(program["trace"]) in objs.index or frame.attrs["memory_map"]
    assert objs.loc["stream", "pollute_pages"] == objs.loc["stream", "profiled_pages"] == 4 * 1024 * 1024 // 4096
    assert objs.loc["reused", "pollute_pages"] == 0
    lines = 16 * 1024 * 8 // 64  # the reused array's 2,048 lines
    # Before (every page any color): init leaves it in the LL, pass 1 hits, each of the other 7
    # passes follows 512 KiB of streaming and misses every line: 8 x 2,048 (closed form).
    assert objs.loc["reused", "LL_misses_shared"] == pytest.approx(8 * lines, rel=0.01)
    # The control: the buffer's color reserved and empty changes nothing for it (128 KiB fits the
    # other 7 colors), so the cut below is the stream's confinement, not the reserved color.
    assert objs.loc["reused", "LL_misses_reserved"] == pytest.approx(objs.loc["reused", "LL_misses_shared"], rel=0.01)
    # After: the stream confined to one color, the reused array stays cached between passes: only
    # its first touch (init) misses.
    assert objs.loc["reused", "LL_misses_buffered"] == pytest.approx(lines, rel=0.01)
    # The stream never reuses a line: its misses stay (one per line it writes).
    assert objs.loc["stream", "LL_misses_buffered"] == pytest.approx(objs.loc["stream", "LL_misses_shared"], rel=0.001)
    # The identity placement of annotate's own tallies agrees with the shared placement here.
    assert objs.loc["reused", "LL_misses"] == objs.loc["reused", "LL_misses_shared"]
    # Reuse: the stream is all first references; the reused array's LL references are init's
    # first touch, pass 1 at ~2,048 lines (within the LL's 4,096) and passes 2-8 at its 2,048
    # lines + the stream's 8,192 between (beyond the LL): median ~10,240 lines.
    assert objs.loc["stream", "cold_share"] > 0.99
    assert objs.loc["reused", "cold_share"] == pytest.approx(1 / 9, rel=0.01)
    assert objs.loc["reused", "reuse_within_LL"] == pytest.approx(1 / 9, rel=0.01)
    assert 10240 <= objs.loc["reused", "median_reuse_lines"] <= 10240 * 1.01
    # Misses over time from Python: the series adds up to each object's misses.
    series = objects.series_frame(frame)
    per = series.groupby("object")["LL_misses"].sum()
    assert per["reused"] == objs.loc["reused", "LL_misses"] and per["stream"] == objs.loc["stream", "LL_misses"]
    # ... and before/after the buffer, to the placements' totals; after it, the reused array
    # misses while init first touches it (the first intervals), not between passes (a line or
    # so later: its edge page holds a neighbour's bytes).
    for which in ("shared", "buffered"):
        s = objects.series_frame(frame, which)
        assert s.groupby("object")["LL_misses"].sum().to_dict() == {
            o: objs.loc[o, f"LL_misses_{which}"] for o in objs.index}
    after = objects.series_frame(frame, "buffered")
    reused = after[after["object"] == "reused"].set_index("interval")["LL_misses"]
    assert reused.loc[:9].sum() >= 0.99 * lines and reused.loc[10:].sum() <= 8
    with pytest.raises(ValueError, match="which='after'"):
        objects.series_frame(frame, "after")


@needs_tools
def test_cli_objects_plot_json_csv_and_bad_plot_paths(program, tmp_path, capsys):  # noqa: F811
    cfg = tmp_path / "cg.json"
    cfg.write_text(json.dumps(CONFIG))
    base = ["annotate", str(program["trace"]), "--config", str(cfg), "--binary", str(program["exe"]), "-q"]
    png = tmp_path / "objs.png"
    assert main(base + ["--objects", "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "pollute buffer candidates: stream" in out and "median_reuse_lines" in out and "LL_misses_buffered" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(base + ["--objects", "--json", "-", "--no-search"]) == 0
    rows = {r["object"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["stream"]["cold_share"] > 0.99 and "pollute" not in rows["stream"]
    assert main(base + ["--objects", "--csv", "-"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split(",")
    for col in ("reuse_within_LL", "median_reuse_lines", "pollute", "LL_misses_shared", "LL_misses_buffered"):
        assert col in head
    # Bad input: one line, exit 2, nothing written or destroyed.
    assert main(base + ["--plot", str(png)]) == 2
    err = capsys.readouterr().err
    assert "--plot" in err and "--objects" in err and len(err.strip().splitlines()) == 1
    before = program["trace"].read_bytes()
    assert main(base + ["--objects", "--plot", str(program["trace"])]) == 2
    assert "would destroy the input" in capsys.readouterr().err
    assert program["trace"].read_bytes() == before
    assert main(base + ["--objects", "--plot", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert not math.isnan(float(rows["reused"]["median_reuse_lines"]))


BSS_PROG = r"""
#include <stdio.h>
#define SLOTS (16 * 1024)
struct slot { unsigned long key, value; };
long small_data[8] = {1, 2, 3, 4, 5, 6, 7, 8};   /* .data: the program's file-backed page */
struct slot table[SLOTS];                         /* .bss, 256 KiB: mostly an anonymous mapping */

int main(void) {
    unsigned long x = 1, s = 0;
    for (int round = 0; round < 6; round++)
        for (long i = 0; i < SLOTS; i++) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            struct slot *t = &table[(x >> 33) % SLOTS];
            t->value += (unsigned long)small_data[i & 7];
            s += t->key;
        }
    printf("%lu\n", s);
    return 0;
}
"""


@pytest.mark.skipif(__import__("shutil").which("qemu-x86_64") is None or __import__("shutil").which("cc") is None,
                    reason="qemu-x86_64 and cc are needed (make tools)")
def test_a_bss_table_in_an_anonymous_mapping_has_one_name_in_every_view(tmp_path):
    """The .bss table of a program run under QEMU lies in the anonymous mapping after the
    program's file (the memory map has it as `[anon ...]`): it is `table` in the accesses table,
    the reuse columns, the pollute search and the misses over time, with the same data
    references in each, and no anonymous mapping keeps its references."""
    import subprocess

    src = tmp_path / "bss.c"
    src.write_text(BSS_PROG)
    exe = tmp_path / "bss"
    subprocess.run(["cc", "-g", "-O1", "-o", str(exe), str(src)], check=True)
    trace = tmp_path / "bss.cctrace"
    cachecolor.capture([str(exe)], trace, "qemu")
    ranges = objects.default_ranges(trace)
    table = [r for r in ranges if r[2] == "table"]
    assert table, "the table is a symbol of the program"
    lo, hi = table[0][0], table[0][1]
    holders = [r for r in ranges if r[3] == "anon" and r[0] < hi and r[1] > lo]
    assert holders, "the table lies (partly) in an anonymous mapping: the case under test"
    frame = objects.object_report(trace, CONFIG, intervals=10).set_index("object")
    row = frame.loc["table"]
    # Six rounds of 16 Ki uniform probes; a probe reaches the LL when its line is not among the
    # 32 KiB that D1 holds of the 256 KiB table: about 6 * 16 Ki * (1 - 32/256) = 86,016.
    expected = 6 * 16 * 1024 * (1 - 32 / 256)
    assert abs(row["LL_accesses"] - expected) < 0.05 * expected, (row["LL_accesses"], expected)
    # The reuse view counts the same references under the same name (a record that straddles
    # two lines is counted once by one and twice by the other: none here, aligned 8-byte fields).
    assert row["LL_references"] == row["LL_accesses"]
    assert row["profiled_pages"] >= 64  # the search profiled the table's pages under its name
    for name, r in frame.iterrows():
        if name.startswith("[anon"):
            assert r["LL_accesses"] < 0.01 * row["LL_accesses"], (name, r["LL_accesses"])
    # The misses over time name every object as the accesses table does, with the same misses
    # at every level (the same hierarchy on the same trace): the table's, its holder's (the
    # mapping's bytes after the table) and every other object's.
    series = objects.series_frame(frame.reset_index()).groupby("object")[["D1_misses", "LL_misses"]].sum()
    assert "table" in series.index
    for name, r in frame.iterrows():
        if r["D1_accesses"] > 0:
            assert name in series.index, name
            assert (series.loc[name, "D1_misses"], series.loc[name, "LL_misses"]) == (r["D1_misses"], r["LL_misses"]), name
            assert r["LL_references"] == r["LL_accesses"], name
    assert set(series.index) <= set(frame.index)
