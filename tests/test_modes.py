"""Statistics split by privileged mode (Nellans et al. sections 3 and 5) as the Python API and
`cachecolor simulate` show them: per level ``user`` / ``privileged`` {accesses, hits, misses,
miss_rate, evictions}, the mode lines of the text output only when privileged records occurred.
The counting itself is tested in Rust (crates/sim/tests/hierarchy_modes.rs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import cachecolor

ROOT = Path(__file__).resolve().parent.parent
OS = ROOT / "examples" / "os"

CONFIG = {
    "hierarchy": {
        "levels": [
            {"name": "L1D", "size": "1KiB", "ways": 2},
            {"name": "L2", "size": "4KiB", "ways": 4},
        ]
    }
}


def _arrays(privileged: bool):
    rng = np.random.default_rng(5)
    n = 20_000
    addrs = (rng.integers(0, 512, n) * 64).astype(np.uint64)
    kinds = rng.integers(0, 2, n).astype(np.uint8)  # loads and stores
    priv = ((np.arange(n) // 100) % 3 == 0).astype(np.uint8) if privileged else np.zeros(n, np.uint8)
    return addrs, kinds, priv


def _plain_lru_one_level(addrs, priv, sets: int, ways: int):
    """Accesses, misses, evictions by mode ([user, privileged]) of one plain LRU cache."""
    cache = [[] for _ in range(sets)]
    acc, miss, ev = [0, 0], [0, 0], [0, 0]
    for a, p in zip(addrs.tolist(), priv.tolist()):
        line = a // 64
        s = cache[line % sets]
        acc[p] += 1
        if line in s:
            s.remove(line)
        else:
            miss[p] += 1
            if len(s) == ways:
                s.pop()
                ev[p] += 1
        s.insert(0, line)
    return acc, miss, ev


def test_arrays_with_a_privileged_column_split_every_level_by_mode():
    addrs, kinds, priv = _arrays(True)
    r = cachecolor.simulate(CONFIG, trace={"addr": addrs, "kind": kinds, "privileged": priv})
    assert r.invariants == []
    for name in r.level_names:
        lv = r.level(name)
        u, p = lv["user"], lv["privileged"]
        assert u["accesses"] + p["accesses"] == lv["accesses"]
        assert u["misses"] + p["misses"] == lv["misses"]
        assert u["evictions"] + p["evictions"] == lv["evictions"]
        assert p["hits"] == p["accesses"] - p["misses"]
        assert p["accesses"] > 0 and p["evictions"] > 0
    # The first level against a plain LRU cache (8 sets x 2 ways).
    acc, miss, _ = _plain_lru_one_level(addrs, priv, 8, 2)
    l1 = r.level("L1D")
    assert [l1["user"]["accesses"], l1["privileged"]["accesses"]] == acc
    assert [l1["user"]["misses"], l1["privileged"]["misses"]] == miss
    frame = r.levels
    for col in ("user_accesses", "user_evictions", "privileged_misses", "privileged_miss_rate"):
        assert col in frame.columns, col
    text = r.table()
    assert "by mode" in text and "privileged" in text


def test_one_level_evictions_by_mode_match_a_plain_cache():
    addrs, _, priv = _arrays(True)
    cfg = {"hierarchy": {"levels": [{"name": "L1", "size": "1KiB", "ways": 2}]}}
    r = cachecolor.simulate(cfg, trace={"addr": addrs, "privileged": priv})
    acc, miss, ev = _plain_lru_one_level(addrs, priv, 8, 2)
    lv = r.level("L1")
    assert [lv["user"]["accesses"], lv["privileged"]["accesses"]] == acc
    assert [lv["user"]["misses"], lv["privileged"]["misses"]] == miss
    assert [lv["user"]["evictions"], lv["privileged"]["evictions"]] == ev


def test_user_only_output_has_no_mode_lines():
    addrs, kinds, _ = _arrays(False)
    r = cachecolor.simulate(CONFIG, trace=addrs, kinds=kinds)
    assert all(r.level(n)["privileged"]["accesses"] == 0 for n in r.level_names)
    assert r.level("L1D")["user"]["accesses"] == r.level("L1D")["accesses"]
    assert "by mode" not in r.table()


def test_cli_simulate_prints_and_writes_the_split(tmp_path):
    addrs, kinds, priv = _arrays(True)
    trace = tmp_path / "t.cctrace"
    cachecolor.write_trace(trace, {"addr": addrs, "kind": kinds, "privileged": priv})
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[hierarchy]\n[[hierarchy.levels]]\nname = "L1D"\nsize = "1KiB"\nways = 2\n'
        '[[hierarchy.levels]]\nname = "L2"\nsize = "4KiB"\nways = 4\n'
    )
    out = tmp_path / "r.json"
    run = subprocess.run(
        [sys.executable, "-m", "cachecolor", "simulate", str(cfg), "--trace", str(trace), "--json", str(out), "-q"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "by mode" in run.stdout
    doc = json.loads(out.read_text())
    l2 = doc["levels"][1]
    assert l2["privileged"]["accesses"] > 0
    assert l2["user"]["evictions"] + l2["privileged"]["evictions"] == l2["evictions"]


def test_whole_system_page_walks_show_as_privileged_traffic():
    # A TLB-heavy run: a 64 MiB uniform footprint walks the page tables through the caches.
    r = cachecolor.simulate_system(OS / "pagewalk-stream.toml")
    assert r.invariants == []
    doc = r.to_dict()
    llc = doc["levels"][-1]
    assert llc["privileged"]["accesses"] > 0
    assert llc["privileged"]["evictions"] > 0
    for lv in doc["levels"]:
        assert lv["user"]["accesses"] + lv["privileged"]["accesses"] == lv["accesses"]
    assert "by mode" in r.table()
