"""Miss-rate curves and per-set stack distance profiles through the Python API and the CLI.

Cross-checks: the exact curve against a brute-force LRU written here and against
``cachecolor.simulate`` of a fully associative cache; the per-set profile against ``simulate``
of the same set-associative geometry at every associativity; SHARDS at rate 1 against exact,
and at lower rates within its error bound; MPKI from instruction counts; bad inputs as a table of
one-line errors (exit code 2) naming what is allowed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import cachecolor
from conftest import assert_one_line_error


def lru_misses(lines: np.ndarray, size: int) -> int:
    """Brute-force fully associative LRU: a recency list."""
    stack: list[int] = []
    misses = 0
    for x in lines.tolist():
        if x in stack:
            stack.remove(x)
        else:
            misses += 1
            if len(stack) == size:
                stack.pop()
        stack.insert(0, x)
    return misses


@pytest.fixture(scope="module")
def small_trace() -> np.ndarray:
    rng = np.random.default_rng(5)
    hot = rng.integers(0, 40, size=3000)
    scan = np.arange(3000) % 150 + 1000
    pick = rng.random(3000) < 0.6
    return (np.where(pick, hot, scan) * 64 + rng.integers(0, 64, size=3000)).astype(np.uint64)


def test_exact_curve_equals_brute_force_lru_at_every_size(small_trace):
    c = cachecolor.mrc(small_trace, all_sizes=True)
    lines = small_trace >> np.uint64(6)
    assert c.distinct == len(np.unique(lines)) and c.distinct_exact
    assert list(c.sizes) == list(range(1, int(c.distinct) + 1))
    for size in list(range(1, 60)) + list(range(60, int(c.distinct) + 1, 13)):
        assert c.miss_rate[size - 1] == lru_misses(lines, size) / len(lines), size
    # `at` answers any size from the histogram, including past the distinct lines.
    assert c.at([0])[0] == 1.0
    assert c.at([10_000])[0] == c.distinct / len(lines)
    assert np.array_equal(c.at(c.sizes), c.miss_rate)
    assert int(c.histogram.sum()) == len(lines) and int(c.histogram[0]) == c.distinct


def test_exact_curve_matches_the_simulator_fully_associative(small_trace):
    c = cachecolor.mrc(small_trace, sizes=[8, 16, 48, 64])  # the simulator holds at most 64 ways
    for size, rate in zip(c.sizes, c.miss_rate):
        cfg = {"hierarchy": {"levels": [{"name": "FA", "size": int(size) * 64, "ways": int(size)}]}}
        r = cachecolor.simulate(cfg, trace=small_trace)
        assert r.level("FA")["misses"] / r.level("FA")["accesses"] == pytest.approx(rate, abs=0, rel=1e-12)


def test_per_set_profile_equals_set_associative_simulation(small_trace):
    prof = cachecolor.set_profile(small_trace, cache_size=8 * 64 * 8, ways=8)
    assert prof.sets == 8 and prof.counts.shape == (8, 9)
    assert int(prof.counts.sum()) == len(small_trace)
    for ways in range(1, 9):
        cfg = {"hierarchy": {"levels": [{"name": "L1", "size": 8 * 64 * ways, "ways": ways}]}}
        r = cachecolor.simulate(cfg, trace=small_trace).level("L1")
        assert prof.miss_rate(ways)[0] == r["misses"] / r["accesses"], ways
    # The weighted average profile sums to 1 and gives the same curve.
    w = prof.weighted
    assert w.sum() == pytest.approx(1.0)
    assert np.allclose(1 - np.cumsum(w[:-1]), prof.miss_rate())
    assert prof.unweighted.sum() == pytest.approx(1.0)
    # Beyond max_ways the pooled distances still answer, and a huge associativity is the
    # cold-miss floor.
    assert prof.miss_rate([10_000])[0] == pytest.approx(prof.distinct / len(small_trace))
    per_set = prof.per_set_miss_rate(4)
    assert per_set.shape == (8,) and np.nanmax(per_set) <= 1.0


def test_records_spanning_lines_count_once_per_line():
    addrs = np.array([60, 0, 64], dtype=np.uint64)
    c = cachecolor.mrc({"addr": addrs, "size": np.array([8, 1, 1], dtype=np.uint16)}, all_sizes=True)
    # Lines 0, 1 (the spanning record), then 0 (distance 2), then 1 (distance 2).
    assert c.references == 4 and c.distinct == 2
    assert list(c.miss_rate) == [1.0, 0.5]


def test_page_granularity_counts_pages(small_trace):
    pages = cachecolor.mrc(small_trace, granularity="page", page_size=1024, all_sizes=True)
    lines = cachecolor.mrc(small_trace >> np.uint64(4), all_sizes=True)  # 64-byte units of addr/16 = 1 KiB of addr
    assert pages.unit_bytes == 1024
    assert np.array_equal(pages.miss_rate, lines.miss_rate)


def test_shards_at_rate_one_is_exact_and_deterministic(small_trace):
    exact = cachecolor.mrc(small_trace, sizes=range(1, 200))
    s = cachecolor.mrc(small_trace, rate=1.0, sizes=range(1, 200))
    assert s.method == "shards" and s.rate == 1.0 and s.reliable_from == 1  # every line sampled: exact
    assert np.allclose(s.miss_rate, exact.miss_rate, atol=1e-12)
    a = cachecolor.mrc(small_trace, rate=0.3, seed=4)
    b = cachecolor.mrc(small_trace, rate=0.3, seed=4)
    assert np.array_equal(a.miss_rate, b.miss_rate)
    assert not np.array_equal(a.miss_rate, cachecolor.mrc(small_trace, rate=0.3, seed=5, sizes=a.sizes).miss_rate)


def test_shards_and_aet_are_close_to_exact_on_the_reference_trace():
    t = cachecolor.zipf_scan_trace(400_000, 40_000)
    assert len(t) == 400_000 and t.dtype == np.uint64
    exact = cachecolor.mrc(t, all_sizes=True)
    assert exact.distinct == 40_000
    for kw, bound in (({"rate": 0.1}, 0.01), ({"max_lines": 4000}, 0.015), ({"method": "aet", "rate": 0.05}, 0.01)):
        est = cachecolor.mrc(t, sizes=exact.sizes, **kw)
        ok = est.reliable
        mae = np.abs(est.miss_rate[ok] - exact.miss_rate[ok]).mean()
        assert mae < bound, (kw, mae)
    band = cachecolor.mrc(t, rate=0.1, salts=4)
    assert band.salts == 4 and (band.band_low <= band.miss_rate + 1e-12).all() and (band.miss_rate <= band.band_high + 1e-12).all()
    assert (band.band_high - band.band_low).max() > 0  # independent salts disagree somewhere
    assert band.reliable_from == 500 and not band.reliable[0] and band.reliable[-1]


def test_mpki_from_instruction_counts():
    addrs = (np.arange(1000) % 100 * 64).astype(np.uint64)
    c = cachecolor.mrc({"addr": addrs, "icount": np.full(1000, 4, dtype=np.uint32)}, sizes=[50, 100])
    assert c.instructions == 4000
    assert np.allclose(c.mpki, c.miss_rate * 1000 * 1000 / 4000)
    assert c.to_dict()["mpki"] == c.mpki.tolist()
    assert cachecolor.mrc(addrs).mpki is None


def test_workload_spec_as_dict_file_or_config_gives_the_same_curve(tmp_path):
    spec = {"seed": 3, "phases": [{"pattern": "zipf", "alpha": 0.8, "footprint": "256KiB", "references": 50_000, "size": 64}]}
    from_dict = cachecolor.mrc(spec)
    assert from_dict.references == 50_000 and from_dict.source["kind"] == "workload"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"hierarchy": {"levels": [{"name": "L1", "size": 32768, "ways": 8}]}, "workload": spec}))
    from_config = cachecolor.mrc(cachecolor.analysis.WorkloadFile(path))
    assert np.array_equal(from_config.miss_rate, from_dict.miss_rate)
    toml = tmp_path / "w.toml"
    toml.write_text('seed = 3\n[[phases]]\npattern = "zipf"\nalpha = 0.8\nfootprint = "256KiB"\nreferences = 50000\nsize = 64\n')
    assert np.array_equal(cachecolor.mrc(cachecolor.analysis.WorkloadFile(toml)).miss_rate, from_dict.miss_rate)


def test_rapid_mrc_window_against_the_whole_l1_miss_stream():
    t = cachecolor.zipf_scan_trace(300_000, 30_000, seed=4)
    whole = cachecolor.rapid_mrc(t, l1_size=32 << 10, l1_ways=8, window=10**12, points=100)
    # Its L1 is the simulator's: the same misses as cachecolor.simulate of that L1.
    l1 = cachecolor.simulate({"hierarchy": {"levels": [{"name": "L1", "size": 32 << 10, "ways": 8}]}}, trace=t).level("L1")
    assert whole.l1_misses == l1["misses"] and whole.references == len(t)
    assert whole.mae == 0.0 and np.array_equal(whole.miss_rate, whole.exact_miss_rate)
    # The L2 curve of the L1 misses is the exact curve of those addresses.
    w = whole.l1_misses // 5
    part = cachecolor.rapid_mrc(t, window=w, warmup=w // 2, start=whole.l1_misses // 2, points=100)
    assert part.window_counted == w - w // 2
    assert 0 < part.mae < 0.1, part.mae
    for kwargs, field in (({"window": 0}, "window"), ({"window": 10, "warmup": 10}, "warmup"),
                          ({"window": 10, "l1_ways": 0}, "l1_ways"), ({"window": 10, "start": 10**9}, "window")):
        with pytest.raises(cachecolor.ConfigError) as info:
            cachecolor.rapid_mrc(t[:1000], **kwargs)
        assert info.value.field == field, str(info.value)


# ---------------------------------------------------------------------------------------------
# Errors: the API


@pytest.mark.parametrize(
    "kwargs, field, text",
    [
        ({"rate": 0.0}, "rate", "(0, 1]"),
        ({"rate": -0.5}, "rate", "(0, 1]"),
        ({"rate": 1.5}, "rate", "(0, 1]"),
        ({"max_lines": 0}, "max_lines", "1 to 2^32"),
        ({"rate": 0.1, "max_lines": 10}, "max_lines", "not both"),
        ({"method": "exact", "rate": 0.1}, "rate", "exact method takes no rate"),
        ({"method": "aet"}, "rate", "AET needs"),
        ({"method": "lfu"}, "method", "exact, shards, aet"),
        ({"granularity": "word"}, "granularity", "line, page"),
        ({"line_size": 48}, "unit_bytes", "power of two"),
        ({"salts": 0, "rate": 0.1}, "salts", "1 to 64"),
        ({"salts": 2}, "salts", "SHARDS only"),
        ({"all_sizes": True, "rate": 0.1}, "all_sizes", "estimate"),
        ({"points": 0}, "points", "at least 1"),
    ],
)
def test_bad_options_name_the_option(kwargs, field, text):
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.mrc(np.arange(10, dtype=np.uint64), **kwargs)
    assert info.value.field == field, str(info.value)
    assert text in str(info.value), str(info.value)


def test_bad_sources_and_set_geometries():
    with pytest.raises(cachecolor.ConfigError, match="no references"):
        cachecolor.mrc(np.zeros(0, dtype=np.uint64))
    with pytest.raises(ValueError, match="size"):
        cachecolor.mrc({"addr": np.arange(2, dtype=np.uint64), "size": np.array([1, 0], dtype=np.uint16)})
    with pytest.raises(cachecolor.ConfigError, match="phases"):
        cachecolor.mrc({"phases": []})
    with pytest.raises(FileNotFoundError):
        cachecolor.mrc("/nonexistent/trace.cctrace")
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.set_profile(np.arange(10, dtype=np.uint64), cache_size=1000, ways=3)
    assert info.value.field == "cache_size"
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.set_profile(np.arange(10, dtype=np.uint64), sets=0)
    assert info.value.field == "sets"
    with pytest.raises(cachecolor.ConfigError, match="give sets="):
        cachecolor.set_profile(np.arange(10, dtype=np.uint64))


# ---------------------------------------------------------------------------------------------
# The CLI


@pytest.fixture
def mrc_trace(tmp_path):
    path = tmp_path / "zs.cctrace"
    cachecolor.write_trace(path, cachecolor.zipf_scan_trace(200_000, 20_000))
    return path


def test_cli_writes_the_curve_and_plot(run_cli, tmp_path, mrc_trace):
    out, png = tmp_path / "mrc.json", tmp_path / "mrc.png"
    r = run_cli("mrc", mrc_trace, "--json", out, "--plot", png, "--cache-size", "256KiB", "--ways", "8")
    assert r.returncode == 0, r.stderr
    assert "exact miss-rate curve: 200,000 references to 20,000 distinct" in r.stdout
    assert f"wrote {out}" in r.stderr and png.stat().st_size > 1000
    doc = json.loads(out.read_text())
    for key in ("sizes", "miss_rate", "references", "distinct", "method", "rate", "reliable_from", "version", "source"):
        assert key in doc, key
    assert doc["method"] == "exact" and doc["references"] == 200_000 and doc["distinct"] == 20_000
    assert doc["sizes"][0] == 1 and doc["sizes"][-1] == 20_000 and len(doc["sizes"]) == len(doc["miss_rate"])
    api = cachecolor.mrc(mrc_trace)
    assert doc["miss_rate"] == api.miss_rate.tolist()
    sp = doc["set_profile"]
    assert sp["sets"] == 512 and sp["ways"] == list(range(1, 9)) and len(sp["miss_rate"]) == 8


def test_cli_shards_workload_and_quiet(run_cli, tmp_path, mrc_trace):
    out = tmp_path / "s.json"
    r = run_cli("mrc", mrc_trace, "--shards", "0.05", "--salts", "3", "--json", out, "-q")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    doc = json.loads(out.read_text())
    assert doc["method"] == "shards" and doc["rate"] == 0.05 and doc["salts"] == 3
    assert doc["reliable_from"] == 1000 and "band_low" in doc and "unreliable" in r.stdout
    spec = tmp_path / "w.toml"
    spec.write_text('seed = 1\n[[phases]]\npattern = "uniform"\nfootprint = "64KiB"\nreferences = 10000\nsize = 64\n')
    r = run_cli("mrc", "--workload", spec, "--granularity", "page", "--all-sizes", "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["unit_bytes"] == 4096 and doc["distinct"] == 16 and doc["sizes"] == list(range(1, 17))
    assert doc["source"]["kind"] == "workload"


def test_cli_profiles_the_example_workload(run_cli, repo, tmp_path):
    out = tmp_path / "w.json"
    r = run_cli("mrc", "--workload", repo / "examples" / "mrc" / "zipf-then-scan.toml", "--points", "50", "--json", out)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["references"] == 4 * (500_000 + 131_072) and len(doc["sizes"]) <= 50
    assert all(a >= b for a, b in zip(doc["miss_rate"], doc["miss_rate"][1:]))  # never rises with size


MRC_CLI_CASES = [
    ("rate-zero", ["--shards", "0"], ["--shards", "0 is not allowed", "(0, 1]"]),
    ("rate-negative", ["--shards", "-0.5"], ["--shards", "(0, 1]"]),
    ("rate-above-one", ["--shards", "2"], ["--shards", "(0, 1]"]),
    ("aet-rate", ["--aet", "0"], ["--aet", "(0, 1]"]),
    ("size-zero", ["--shards-size", "0"], ["--shards-size", "1 to 2^32"]),
    ("two-methods", ["--shards", "0.1", "--aet", "0.1"], ["not allowed with argument --shards"]),
    ("line-size", ["--line-size", "48"], ["--line-size", "power of two"]),
    ("page-size", ["--granularity", "page", "--page-size", "1000"], ["--page-size", "power of two"]),
    ("salts", ["--salts", "2"], ["--salts", "SHARDS only"]),
    ("all-sizes-shards", ["--shards", "0.1", "--all-sizes"], ["--all-sizes", "estimate"]),
    ("granularity", ["--granularity", "word"], ["invalid choice", "line", "page"]),
    ("ways-alone", ["--ways", "8"], ["--cache-size and --ways go together"]),
    ("cache-size-not-multiple", ["--cache-size", "1000", "--ways", "3"], ["--cache-size", "not a positive multiple"]),
    ("bad-size", ["--cache-size", "12 parsecs", "--ways", "8"], ["--cache-size", "unknown unit `parsecs`"]),
]


@pytest.mark.parametrize("case_id, args, expected", MRC_CLI_CASES, ids=[c[0] for c in MRC_CLI_CASES])
def test_cli_bad_options(run_cli, mrc_trace, case_id, args, expected):
    line = assert_one_line_error(run_cli("mrc", mrc_trace, *args))
    for s in expected:
        assert s in line, (s, line)


def test_cli_bad_sources(run_cli, tmp_path):
    line = assert_one_line_error(run_cli("mrc"))
    assert "give a TRACE file or --workload SPEC" in line
    empty = tmp_path / "empty.cctrace"
    cachecolor.write_trace(empty, np.zeros(0, dtype=np.uint64))
    line = assert_one_line_error(run_cli("mrc", empty))
    assert "TRACE: the trace has no references" in line
    line = assert_one_line_error(run_cli("mrc", tmp_path / "missing.cctrace"))
    assert "missing.cctrace" in line
    bad = tmp_path / "bad.toml"
    bad.write_text('[[phases]]\npattern = "uniform"\nfootprint = "1MiB"\nreferences = 0\n')
    line = assert_one_line_error(run_cli("mrc", "--workload", bad))
    assert "phases[0].references" in line


# ---------------------------------------------------------------------------------------------
# Placement-aware profiles and the thesis's models (issue 4 items 3 and 5)


def test_physically_aware_sdp_misjudges_most_near_the_cache_size():
    """Thesis 5.3.1 / Figure 5.5: random frames make the physically aware miss rate exceed the
    naive one most for working sets at the cache size; far beyond it the two agree."""
    from cachecolor.placement import placement_sweep, summarise_sweep

    cache = 256 << 10
    sizes = [cache // 4, cache, 4 * cache]
    s = summarise_sweep(placement_sweep(cache_size=cache, ways=8, working_sets=sizes, seeds=range(1, 4))).set_index("working_set")
    assert s.loc[cache, "median_ratio"] > 2.0
    assert s.loc[cache, "median_ratio"] == s["median_ratio"].max()
    assert abs(s.loc[4 * cache, "max_ratio"] - 1.0) < 0.02
    # A quarter of the cache: random frames rarely overfill a bin of 8 ways.
    assert s.loc[cache // 4, "median_ratio"] < 1.05
    # Eq. 5.2 from the same placements tracks the aware miss rate net of cold misses (1 in 21).
    cold = 1 / 21
    for ws in sizes[1:]:
        assert abs(s.loc[ws, "predicted_miss_rate"] - (s.loc[ws, "aware_miss_rate"] - cold) / (1 - cold)) < 0.03


def test_a_page_map_translates_like_the_allocator_it_came_from():
    import cachecolor as cc
    from cachecolor.placement import physical_sdp, uniform_trace

    trace = uniform_trace(128 << 10, 50_000, seed=3)  # as large as the cache
    by_alloc = physical_sdp(trace, cache_size=128 << 10, ways=4, placement="random", memory={"seed": 7})
    # The contiguous allocator keeps the virtual layout's colors: aware == naive.
    same = physical_sdp(trace, cache_size=128 << 10, ways=4, placement="contiguous")
    assert np.allclose(same.aware.miss_rate(), same.naive.miss_rate())
    assert by_alloc.aware_miss_rate > same.aware_miss_rate
    # The same frames given as a fixed page map (vpn -> pfn) give the same profile.
    vpns = np.unique(trace >> np.uint64(12))
    pfns = (vpns * np.uint64(2654435761)) % np.uint64(1 << 20)
    mapping = dict(zip(vpns.tolist(), pfns.tolist()))
    a = cc.set_profile(trace, cache_size=128 << 10, ways=4, placement=mapping)
    # Pages mapped but never touched do not count as the trace's pages.
    extra = {**mapping, **{int(vpns.max()) + k: k for k in range(1, 50)}}
    assert cc.set_profile(trace, cache_size=128 << 10, ways=4, placement=extra).placement == a.placement
    translated = (pfns[np.searchsorted(vpns, trace >> np.uint64(12))] << np.uint64(12)) | (trace & np.uint64(4095))
    b = cc.set_profile(translated, cache_size=128 << 10, ways=4)
    assert np.array_equal(a.counts, b.counts)
    assert a.placement["pages"] == len(vpns)


def test_placement_bad_input_names_the_problem():
    import cachecolor as cc
    from cachecolor.placement import uniform_trace

    trace = uniform_trace(64 << 10, 1000)
    with pytest.raises(cc.ConfigError, match="does not map"):
        cc.set_profile(trace, cache_size=64 << 10, ways=4, placement={0: 1})
    with pytest.raises(cc.ConfigError, match="power of two"):
        cc.set_profile(trace, cache_size=64 << 10, ways=4, placement="random", page_size=3000)
    with pytest.raises(cc.ConfigError, match="allocator"):
        cc.set_profile(trace, cache_size=64 << 10, ways=4, placement="slab")
    with pytest.raises(cc.ConfigError, match="no consistent color"):
        cc.set_profile(trace, cache_size=96 << 10, ways=4, placement="random", page_size=16384)
    with pytest.raises(cc.ConfigError, match="more pages than the simulated RAM"):
        cc.set_profile(trace, cache_size=64 << 10, ways=4, placement="random", memory={"ram": "32KiB"})


def test_models_follow_the_thesis_closed_forms():
    from cachecolor import models

    f = models.uniform_hit_rates([16 << 10, 64 << 10, 1 << 20], [32 << 10, 256 << 10])
    assert list(f.columns) == ["working_set", "L1", "L2", "memory"]
    assert f.loc[0, "L1"] == 1.0
    assert f.loc[1, "L1"] == 0.5 and f.loc[1, "L2"] == 0.5
    assert np.isclose(f.loc[2, "L2"], (1 - 1 / 32) * 0.25)
    assert np.allclose(f[["L1", "L2", "memory"]].sum(axis=1), 1.0)
    total, terms = models.placement_miss_rate([1, 2, 3, 6], 2)
    assert np.isclose(total, (1 + 4) / 12) and terms[0] == 0
    c = models.conflict_curve([32, 64, 4096], bins=8, ways=8)
    assert c.loc[0, "k_min"] == 0 and 0 < c.loc[1, "excess"] and c.loc[2, "excess"] < 0.01 * c.loc[2, "k_min"]
    h = models.conflict_curve([64], bins=8, ways=8, frames_per_bin=12)
    assert h.loc[0, "k_avg"] < c.loc[1, "k_avg"]
    with pytest.raises(cachecolor.ConfigError):
        models.conflict_curve([200], bins=8, ways=8, frames_per_bin=12)


def test_read_pagemap_of_this_process():
    import os

    from cachecolor import read_pagemap

    buf = np.ones(64 << 10, dtype=np.uint8)  # touched: present
    start = buf.ctypes.data
    if os.geteuid() != 0:
        with pytest.raises(PermissionError, match="root"):
            read_pagemap(start, start + buf.nbytes)
        return
    m = read_pagemap(start, start + buf.nbytes)
    assert len(m) >= 15 and (m["pfn"] > 0).all()
    assert (np.diff(m["vpn"].to_numpy()) > 0).all()


def test_cli_sdp_trace_and_sweep(run_cli, tmp_path):
    from cachecolor.placement import uniform_trace

    trace = tmp_path / "u.cctrace"
    a = uniform_trace(128 << 10, 30_000)
    cachecolor.write_trace(trace, {"addr": a, "size": np.full(len(a), 8, dtype=np.uint16), "kind": np.zeros(len(a), dtype=np.uint8)})
    out = run_cli("sdp", trace, "--cache-size", "128KiB", "--ways", "8", "--json", tmp_path / "s.json", "--plot", tmp_path / "s.png")
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert len(doc["ways"]) == 8 and doc["aware_miss_rate"][-1] > doc["naive_miss_rate"][-1]
    assert (tmp_path / "s.png").stat().st_size > 0
    out = run_cli("sdp", "--sweep", "--cache-size", "64KiB", "--ways", "4", "--seeds", "2", "--working-sets", "16KiB,64KiB", "-q")
    assert out.returncode == 0, out.stderr
    assert "Figure 5.5" in out.stdout and "65536" in out.stdout
    out = run_cli("sdp", "--cache-size", "64KiB", "--ways", "4")
    assert out.returncode == 2 and "TRACE" in out.stderr
    bad = tmp_path / "map.csv"
    bad.write_text("vpn,pfn\n0,5\n")
    out = run_cli("sdp", trace, "--cache-size", "64KiB", "--ways", "4", "--pagemap", bad)
    assert out.returncode == 2 and "does not map" in out.stderr, out.stderr


# ---------------------------------------------------------------------------------------------
# Page-level profiles (issue 4 item 4, ROCS section 3)


def test_page_profile_of_the_art_shaped_example(examples):
    from cachecolor.pages import page_profile

    cfg = examples / "analysis" / "pages-art.toml"
    prof = page_profile(cfg, level="LLC", sample_period=20)
    # The pages' counts are the LLC's own, as a plain simulation of the same workload reports.
    llc = [lv for lv in cachecolor.simulate(cfg).to_dict()["levels"] if lv["name"] == "LLC"][0]
    data = [llc[k] for k in ("load", "store", "modify")]
    assert (prof.accesses, prof.misses) == (sum(d["accesses"] for d in data), sum(d["misses"] for d in data))
    pages = prof.pages
    assert pages["accesses"].sum() == prof.accesses and (pages["misses"] <= pages["accesses"]).all()
    # Two regions, as ROCS Figure 3 shows for art: the reused array and the stream.
    r = prof.regions
    big = r[r["access_share"] > 0.1].reset_index(drop=True)
    assert len(big) == 2
    assert big.loc[0, "pages"] == 256 and big.loc[0, "miss_rate"] < 0.2
    assert big.loc[1, "miss_rate"] == 1.0
    # Figure 2: the pages split into the two ends of the miss-rate histogram.
    h = prof.histogram()
    assert h["pages"].sum() == len(pages) and h.loc[9, "pages"] == big.loc[1, "pages"]
    # The sampler's estimate (1 L1D miss in 20) is close page by page.
    assert prof.samples > 100_000 and prof.estimate_error() < 0.02
    hs = prof.histogram(sampled=True)
    assert abs(hs.loc[9, "page_share"] - h.loc[9, "page_share"]) < 0.02


def test_cli_profile_writes_tables_and_plots(run_cli, tmp_path, examples):
    cfg = examples / "analysis" / "pages-art.toml"
    out = run_cli("profile", "--config", cfg, "--level", "L2", "--sample-period", "50", "--json", tmp_path / "p.json",
                  "--csv", tmp_path / "p.csv", "--plot", tmp_path / "p", "-q")
    assert out.returncode == 0, out.stderr
    assert "regions" in out.stdout and "Figure 2" in out.stdout
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["level"] == "L2" and len(doc["pages"]) == 1819
    assert (tmp_path / "p-histogram.png").stat().st_size > 0 and (tmp_path / "p-address-space.png").stat().st_size > 0
    for argv, message in [
        (("--level", "L3"), "the levels are: L1D, L2, LLC"),
        (("--level", "L1D", "--sample-period", "10"), "L1D misses only"),
        (("--sample-period", "0"), "sample_period"),
    ]:
        out = run_cli("profile", "--config", cfg, *argv)
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert_one_line_error(out)


def test_cli_mrc_rapid_matches_the_api(run_cli, tmp_path, examples):
    spec = examples / "mrc" / "zipf-then-scan.toml"
    out = run_cli("mrc", "--workload", spec, "--rapid", "50000", "--warmup", "10000", "--json", tmp_path / "r.json", "-q")
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    api = cachecolor.rapid_mrc(cachecolor.analysis.WorkloadFile(spec), window=50_000, warmup=10_000)
    assert doc["mae"] == api.mae and doc["miss_rate"] == api.miss_rate.tolist()
    assert doc["window_counted"] == 40_000 and "mean absolute error" in out.stdout
    out = run_cli("mrc", "--workload", spec, "--rapid", "1000", "--shards", "0.1")
    assert_one_line_error(out)
    assert "--shards" in out.stderr
