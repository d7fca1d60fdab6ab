"""Regions chosen by phase (cachecolor.regions, SimPoint-style): the clustering on vectors whose
phases are known, the plugin's basic-block vectors against the instruction count a capture
measures, and a real program whose start-up is the known bad region (zstd -19 fills its
tables first: 2.000 records per instruction)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from cachecolor import regions


def _phase(rng, blocks, n=60):
    """One interval's vector: ``n`` draws over ``blocks`` (block id -> weight)."""
    ids = list(blocks)
    p = np.array([blocks[b] for b in ids], dtype=float)
    counts = rng.multinomial(100_000, p / p.sum())
    return {b: int(c) for b, c in zip(ids, counts) if c}


def test_choice_is_the_dominant_phase_not_the_start():
    rng = np.random.default_rng(0)
    startup = {1: 5, 2: 5, 3: 1}
    steady = {10: 3, 11: 2, 12: 2, 13: 1}
    other = {20: 4, 21: 1, 22: 1}
    vectors = [_phase(rng, startup) for _ in range(6)]
    vectors += [_phase(rng, steady if i % 5 else other) for i in range(60)]
    c = regions.choose(vectors, 1000)
    labels = [int(ch) for ch in c["labels"]]
    # Three phases found; the dominant one is the steady state (48 of 66 intervals).
    assert c["k"] == 3
    assert c["weights"][c["dominant_cluster"]] == pytest.approx(48 / 66, abs=1e-3)
    assert c["chosen_interval"] >= 6 and (c["chosen_interval"] - 6) % 5 != 0
    assert labels[c["chosen_interval"]] != labels[0] == c["first_interval_cluster"]
    assert len(labels) == 66 and labels[:6] == [labels[0]] * 6
    assert c["skip"] == c["chosen_interval"] * 1000
    # Deterministic for a given vector file.
    assert regions.choose(vectors, 1000) == c


def test_one_phase_gives_one_cluster_and_the_bb_format_round_trips(tmp_path):
    rng = np.random.default_rng(1)
    vectors = [_phase(rng, {1: 1, 2: 1, 3: 2}) for _ in range(20)]
    assert sum(regions.choose(vectors, 10)["weights"]) == pytest.approx(1.0, abs=1e-3)
    vectors = [vectors[0]] * 20  # one behaviour, no noise: one cluster
    p = tmp_path / "x.bb"
    p.write_text("".join("T" + "".join(f":{b}:{c} " for b, c in v.items()) + "\n" for v in vectors))
    assert regions.read_bbv(p) == vectors
    c = regions.choose_file(p, 10)
    assert c["k"] == 1 and c["weights"] == [1.0]
    with pytest.raises(ValueError, match="no basic-block vectors"):
        regions.choose([], 10)


needs_qemu = pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-user not installed")


@needs_qemu
def test_plugin_vectors_count_every_instruction(tmp_path):
    """Each vector holds exactly `interval` instructions (a block is counted whole, so an
    interval may end up to a block late: the next starts that much short), and their sum
    matches the fast-forward the plugin counts the same way."""
    from cachecolor.traces import capture

    interval = 200_000
    bb = tmp_path / "v.bb"
    loop = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done"  # tens of millions of instructions
    s = capture(["/bin/sh", "-c", loop], tmp_path / "t.cctrace", "qemu", max_records=1,
                skip_instructions=3_000_000, bbv_interval=interval, bbv_out=bb)
    vs = regions.read_bbv(bb)
    assert len(vs) >= 10, s
    sums = [sum(v.values()) for v in vs]
    # Within the longest block of the boundary: a few hundred instructions at most.
    assert all(abs(x - interval) < 1000 for x in sums), sums[:5]
    assert abs(sum(sums) - interval * len(vs)) < 1000


@needs_qemu
def test_zstd_region_is_not_its_startup(tmp_path):
    """zstd -19's first ~70 M instructions fill its tables (exactly 2.000 records per
    instruction: a fetch and a store each); the suite's old fixed skip (50 M) landed in them, the
    region chosen by phase is past them. (A profile of 400 M instructions and three short
    captures: about half a minute.)"""
    from cachecolor import workloads as wl

    w = wl.by_name("zstd")
    if any(v is None for v in wl.package_versions(w.packages).values()):
        pytest.skip("zstd not installed")
    root = tmp_path / "cache"
    horizon = 400_000_000
    choice = wl.choose_region(w, root=root, horizon=horizon, log=lambda s: None)
    labels = choice["labels"]
    assert choice["skip"] > 0 and labels[choice["chosen_interval"]] != labels[0], choice
    meta = wl.build(w, root=root, records=200_000, horizon=horizon, log=lambda s: None)
    assert meta["region_choice"]["method"] == "simpoint" and meta["skip"] == choice["skip"]
    per = meta["records"] / meta["instructions"]
    assert abs(per - 2.0) > 0.05, f"{per:.3f} records per instruction: still the table fill"
    # The fixed skip the suite used (50 M instructions), for contrast: the table fill's signature.
    start = wl.build(w, root=tmp_path / "start", skip=50_000_000, records=200_000, log=lambda s: None)
    assert start["records"] / start["instructions"] == pytest.approx(2.0, abs=0.01)
    assert json.loads((wl.wdir(w, root) / "region.json").read_text())["choice"] == choice
