"""The Python API end to end: configs, simulate on NumPy arrays against a brute-force LRU model
written here, results, trace round trips, progress, the GIL, and the typed stub.

The brute-force model is the textbook definition (one ordered dict per set, modulo set index,
write-back + write-allocate, a miss in level k goes to level k+1 and the line is filled into
every level that missed), so any difference is a bug in the simulator or its bindings.
"""

from __future__ import annotations

import ast
import json
import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cachecolor
from cachecolor import _core


class BruteLRU:
    """One set-associative LRU cache level, counted like cachecolor counts it."""

    def __init__(self, size: int, ways: int, line: int = 64):
        self.sets = size // (ways * line)
        self.ways = ways
        self.data = [OrderedDict() for _ in range(self.sets)]
        self.accesses = self.hits = self.misses = self.evictions = self.writebacks = 0

    def lookup(self, line: int) -> bool:
        s = self.data[line % self.sets]
        self.accesses += 1
        if line in s:
            s.move_to_end(line)
            self.hits += 1
            return True
        self.misses += 1
        return False

    def fill(self, line: int) -> None:
        s = self.data[line % self.sets]
        if len(s) == self.ways:
            _, dirty = s.popitem(last=False)
            self.evictions += 1
            self.writebacks += dirty
        s[line] = False

    def dirty(self, line: int) -> None:
        self.data[line % self.sets][line] = True


def brute_force(levels: list[BruteLRU], addrs, kinds=None, sizes=None, line_size: int = 64):
    """Run records through a chain of non-inclusive LRU levels (loads only when len > 1)."""
    for i, a in enumerate(addrs):
        a = int(a)
        size = 1 if sizes is None else int(sizes[i])
        write = kinds is not None and int(kinds[i]) in (1, 3)
        for line in range(a // line_size, (a + size - 1) // line_size + 1):
            missed = []
            for lv in levels:
                if lv.lookup(line):
                    break
                missed.append(lv)
            for lv in reversed(missed):
                lv.fill(line)
            if write:
                levels[0].dirty(line)
    return levels


def one_level(size: int, ways: int) -> dict:
    return {"hierarchy": {"line_size": 64, "levels": [{"name": "L1", "size": size, "ways": ways}]}}


def assert_level(result: cachecolor.Result, name: str, brute: BruteLRU) -> None:
    got = result.level(name)
    want = {k: getattr(brute, k) for k in ("accesses", "hits", "misses", "evictions", "writebacks")}
    assert {k: got[k] for k in want} == want, name


@pytest.mark.parametrize(
    "size, ways",
    [(1024, 4), (768, 4), (4096, 1), (2048, 32)],
    ids=["4-sets-4-way", "3-sets-non-power-of-two", "direct-mapped", "fully-associative"],
)
def test_one_level_lru_matches_brute_force(size, ways):
    rng = np.random.default_rng(size + ways)
    addrs = rng.integers(0, 16 << 10, size=30_000, dtype=np.uint64)
    kinds = rng.integers(0, 4, size=addrs.size, dtype=np.uint8)
    result = cachecolor.simulate(one_level(size, ways), addrs, kinds=kinds)
    assert_level(result, "L1", brute_force([BruteLRU(size, ways)], addrs, kinds)[0])
    assert result.invariants == []


def test_regression_unified_l1_repeated_line_keeps_lru_order():
    """A repeated access to the line a path used last must still make it most recent when the
    other path (data vs instruction) touched the same set in between: a first-level fast path
    that skipped the LRU update broke this for unified first levels (found by the brute-force
    comparison above, 32-way case)."""
    a, b, c = 0, 64, 128
    addrs = np.array([a, a, b, a, c, a], dtype=np.uint64)
    kinds = ["ifetch", "ifetch", "load", "ifetch", "load", "ifetch"]
    result = cachecolor.simulate(one_level(128, 2), addrs, kinds=kinds)  # one set, two ways
    # True LRU: a misses, a hits, b misses, a hits (a is now most recent), c misses and evicts
    # b, a hits.
    lv = result.level("L1")
    assert (lv["hits"], lv["misses"], lv["evictions"]) == (3, 3, 1)


def test_accesses_spanning_two_lines_are_two_line_accesses():
    rng = np.random.default_rng(11)
    addrs = rng.integers(0, 8 << 10, size=10_000, dtype=np.uint64)
    sizes = rng.choice(np.array([1, 4, 8, 16, 64], dtype=np.uint16), size=addrs.size)
    result = cachecolor.simulate(one_level(1024, 2), addrs, sizes=sizes)
    (brute,) = brute_force([BruteLRU(1024, 2)], addrs, sizes=sizes)
    assert_level(result, "L1", brute)
    assert result.to_dict()["line_accesses"] == brute.accesses > result.records == addrs.size


def test_two_level_non_inclusive_matches_brute_force():
    config = {
        "hierarchy": {
            "line_size": 64,
            "inclusion": "non-inclusive",
            "levels": [{"name": "L1", "size": 1024, "ways": 2}, {"name": "L2", "size": 4096, "ways": 4}],
        }
    }
    rng = np.random.default_rng(5)
    # A mix of a hot region and a cold sweep, so both levels hit and miss.
    hot = rng.integers(0, 6 << 10, size=20_000)
    cold = np.arange(0, 64 << 10, 64)
    addrs = np.concatenate([hot, cold, hot[:5000]]).astype(np.uint64)
    result = cachecolor.simulate(config, addrs)
    l1, l2 = brute_force([BruteLRU(1024, 2), BruteLRU(4096, 4)], addrs)
    assert_level(result, "L1", l1)
    assert_level(result, "L2", l2)
    assert result.level("L2")["accesses"] == result.level("L1")["misses"]
    assert result.memory["reads"] == l2.misses


def test_result_shapes(examples):
    addrs = np.arange(0, 1 << 20, 8, dtype=np.uint64)
    result = cachecolor.simulate(examples / "crossval" / "three-level.toml", addrs)
    frame = result.levels
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.index) == ["L1D", "L2", "L3"]
    for column in ("accesses", "hits", "misses", "miss_rate", "evictions", "writebacks", "load_misses", "store_hits"):
        assert column in frame.columns
    assert (frame["hits"] + frame["misses"] == frame["accesses"]).all()
    doc = result.to_dict()
    assert doc["version"] == cachecolor.__version__ == result.version
    assert [lv["name"] for lv in doc["levels"]] == ["L1D", "L2", "L3"]
    assert doc["records"] == addrs.size
    assert doc["source"] == {"kind": "arrays", "records": addrs.size}
    assert result.effective_config == cachecolor.load_config(examples / "crossval" / "three-level.toml")
    # Sequential 8-byte steps: one miss per 64-byte line at every level.
    assert result.level("L1D")["misses"] == addrs.size // 8
    json.dumps(doc)  # the document is plain JSON
    doc["levels"].clear()
    assert result.level_names == ["L1D", "L2", "L3"], "to_dict returns a copy"


def test_effective_config_fills_defaults_and_round_trips(examples):
    eff = cachecolor.load_config(examples / "crossval" / "one-level.toml")
    level = eff["hierarchy"]["levels"][0]
    assert level["size"] == 32 << 10 and level["ways"] == 8 and level["policy"] == "lru"
    assert eff["hierarchy"]["page_size"] == 4096 and eff["hierarchy"]["inclusion"] == "non-inclusive"
    assert cachecolor.load_config(eff) == eff


def test_workload_runs_are_deterministic_and_seeded(examples):
    config = cachecolor.load_config(examples / "crossval" / "one-level.toml")
    config["workload"] = {
        "seed": 1,
        "phases": [{"pattern": "zipf", "alpha": 0.9, "footprint": "1MiB", "references": 200_000, "store_fraction": 0.2}],
    }
    a = cachecolor.simulate(config).to_dict()
    b = cachecolor.simulate(config).to_dict()
    c = cachecolor.simulate(config, seed=2).to_dict()
    assert a == b
    assert a["levels"] != c["levels"]
    assert c["config"]["workload"]["seed"] == 2 and c["config"]["hierarchy"]["seed"] == 2
    assert a["source"] == {"kind": "workload"}
    assert a["records"] == 200_000


def test_trace_round_trip_frame_and_array(tmp_path, examples):
    rng = np.random.default_rng(9)
    n = 100_000
    cols = {
        "addr": rng.integers(0, 1 << 40, size=n, dtype=np.uint64),
        "kind": rng.integers(0, 4, size=n, dtype=np.uint8),
        "size": rng.integers(1, 65, size=n, dtype=np.uint16),
        "thread": rng.integers(0, 4, size=n, dtype=np.uint32),
        "icount": rng.integers(0, 1000, size=n, dtype=np.uint32),
        "privileged": rng.random(n) < 0.1,
        "syscall": np.where(rng.random(n) < 0.05, rng.integers(1, 1 << 32, size=n), 0).astype(np.uint32),
    }
    path = tmp_path / "rt.cctrace"
    assert cachecolor.write_trace(path, cols, metadata="hello") == n
    frame = cachecolor.read_trace(path)
    assert frame.attrs["metadata"] == "hello" and frame.attrs["version"] == 2
    assert list(frame.columns) == ["addr", "kind", "size", "thread", "icount", "privileged", "syscall"]
    assert list(frame["kind"].cat.categories) == ["load", "store", "ifetch", "modify"]
    for name, values in cols.items():
        got = frame[name].cat.codes.to_numpy() if name == "kind" else frame[name].to_numpy()
        np.testing.assert_array_equal(got, values, err_msg=name)
    arr = cachecolor.read_trace(path, as_="array")
    assert arr.dtype.names == ("addr", "kind", "size", "thread", "icount", "privileged", "syscall")
    np.testing.assert_array_equal(arr["addr"], cols["addr"])
    head = cachecolor.read_trace(path, limit=10)
    assert len(head) == 10 and head.attrs["truncated"]
    # The frame read back simulates exactly like the file.
    config = examples / "crossval" / "three-level.toml"
    from_file = cachecolor.simulate(config, path).to_dict()
    from_frame = cachecolor.simulate(config, frame).to_dict()
    assert from_file["levels"] == from_frame["levels"]
    assert from_file["source"] == {"kind": "trace", "path": str(path), "format": "native"}


def test_records_hash_ignores_metadata_and_reads_the_header_through_rust(tmp_path):
    """``traces.records_hash`` hashes the records (the bytes after the header the Rust reader
    reports), ``traces.file_hash`` the whole file; checked against the format's own layout
    (docs/trace-format.md: 16 fixed bytes, the metadata, an 8-byte checksum)."""
    import hashlib

    from cachecolor.traces import file_hash, native_header, records_hash

    addrs = np.arange(0, 64 * 5000, 64, dtype=np.uint64)
    a, b, c = tmp_path / "a.cctrace", tmp_path / "b.cctrace", tmp_path / "c.cctrace"
    cachecolor.write_trace(a, {"addr": addrs}, metadata="captured monday")
    cachecolor.write_trace(b, {"addr": addrs}, metadata='{"captured": "tuesday, elsewhere"}')
    cachecolor.write_trace(c, {"addr": addrs + 64}, metadata="captured monday")
    head = native_header(b)
    meta = '{"captured": "tuesday, elsewhere"}'
    assert head["metadata"] == meta and head["version"] == 2 and not head["pcs"] and head["records"] == 5000
    assert head["header_bytes"] == 16 + len(meta) + 8
    raw = b.read_bytes()
    assert records_hash(b) == hashlib.sha256(raw[16 + len(meta) + 8:]).hexdigest()
    assert records_hash(a) == records_hash(b), "same records, other metadata: same records hash"
    assert file_hash(a) != file_hash(b) and file_hash(b) == hashlib.sha256(raw).hexdigest()
    assert records_hash(c) != records_hash(a)
    text = tmp_path / "din.txt"
    text.write_text("1 0x40\n")
    with pytest.raises(cachecolor.TraceError):
        records_hash(text)


def test_kinds_by_name_and_letter():
    addrs = np.array([0, 64, 0, 64], dtype=np.uint64)
    by_name = cachecolor.simulate(one_level(1024, 2), addrs, kinds=["load", "store", "ifetch", "modify"])
    by_letter = cachecolor.simulate(one_level(1024, 2), addrs, kinds=np.array(["L", "S", "I", "M"]))
    assert by_name.to_dict()["levels"] == by_letter.to_dict()["levels"]
    lv = by_name.level("L1")
    assert (lv["load"]["accesses"], lv["store"]["accesses"], lv["ifetch"]["accesses"], lv["modify"]["accesses"]) == (1, 1, 1, 1)
    with pytest.raises(ValueError, match="unknown kind 'jump'"):
        cachecolor.simulate(one_level(1024, 2), addrs, kinds=["load", "jump", "load", "load"])
    with pytest.raises(ValueError, match="kind code 7"):
        cachecolor.simulate(one_level(1024, 2), addrs, kinds=np.array([0, 7, 0, 0]))
    with pytest.raises(ValueError, match="3 elements but addr has 4"):
        cachecolor.simulate(one_level(1024, 2), addrs, sizes=[1, 2, 3])


def test_convert_and_info(tmp_path, din_trace):
    out = tmp_path / "small.cctrace"
    n = cachecolor.convert_trace(din_trace, "din", out)
    lines = din_trace.read_text().splitlines()
    assert n == len(lines)
    info = cachecolor.trace_info(out)
    labels = [line.split()[0] for line in lines]
    assert info["records"] == n
    assert info["kinds"] == {
        "load": labels.count("0"),
        "store": labels.count("1"),
        "ifetch": labels.count("2"),
        "modify": 0,
    }
    assert info["metadata"]["from"] == "din"
    assert info["threads"] == 1 and info["thread_ids"] == [0]
    addrs = [int(line.split()[1], 16) for line in lines]
    assert info["address_min"] == min(addrs)
    assert info["address_max"] == max(addrs) + 3  # din's default size is 4 bytes


def test_progress_callback_and_its_exceptions(examples):
    seen: list[cachecolor.Progress] = []
    addrs = np.arange(300_000, dtype=np.uint64)
    cachecolor.simulate(examples / "crossval" / "one-level.toml", addrs, progress=seen.append)
    assert [p.records for p in seen] == [65536, 131072, 196608, 262144, 300000]
    assert seen[-1].total_records == 300_000 and seen[-1].fraction == 1.0

    class Stop(Exception):
        pass

    def stop(p):
        raise Stop(p.records)

    with pytest.raises(Stop):
        cachecolor.simulate(examples / "crossval" / "one-level.toml", addrs, progress=stop)


def test_simulation_releases_the_gil(examples):
    config = cachecolor.load_config(examples / "crossval" / "three-level.toml")
    config["workload"] = {"seed": 3, "phases": [{"pattern": "uniform", "footprint": "64MiB", "references": 3_000_000}]}
    done = threading.Event()
    ticks = 0

    def run():
        cachecolor.simulate(config)
        done.set()

    t = threading.Thread(target=run)
    start = time.monotonic()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.monotonic() - start
    # With the GIL held for the whole run this thread could only tick between blocks.
    assert elapsed < 0.05 or ticks > 20, (ticks, elapsed)


def test_exception_hierarchy():
    for cls in (cachecolor.ConfigError, cachecolor.TraceError, cachecolor.SimulationError, cachecolor.CaptureError):
        assert issubclass(cls, cachecolor.CachecolorError)
        assert cls.__module__ == "cachecolor"
    assert issubclass(cachecolor.CachecolorError, ValueError)


def test_stub_matches_the_compiled_module():
    stub = ast.parse((Path(cachecolor.__file__).parent / "_core.pyi").read_text())
    # The policy reports' TypedDicts are for type checkers only (tests/test_policy_reports.py).
    typed_dicts = {"TypedDict"}
    for node in stub.body:
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in typed_dicts for b in node.bases):
            typed_dicts.add(node.name)
    declared = {
        node.name
        for node in stub.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_") and node.name not in typed_dicts
    }
    declared |= {
        t.id for node in stub.body if isinstance(node, ast.AnnAssign) for t in [node.target] if isinstance(t, ast.Name)
    } - {"_Path", "_Progress"}
    actual = {name for name in dir(_core) if not name.startswith("_")} | {"__version__"}
    assert declared == actual
    # Every stubbed function has the compiled function's parameters, in order, with defaults.
    import inspect

    for node in stub.body:
        if isinstance(node, ast.FunctionDef):
            compiled = inspect.signature(getattr(_core, node.name))
            stub_params = [a.arg for a in node.args.args]
            assert stub_params == list(compiled.parameters), node.name
            n_defaults = len(node.args.defaults)
            with_defaults = [p for p in compiled.parameters.values() if p.default is not inspect.Parameter.empty]
            assert n_defaults == len(with_defaults), node.name


def test_presets():
    builtin = cachecolor.presets.builtin()
    assert [lv["name"] for lv in builtin["hierarchy"]["levels"]] == ["L1I", "L1D", "L2", "L3"]
    detected = cachecolor.presets.detect()
    assert detected["hierarchy"]["levels"], detected
    for lv in detected["hierarchy"]["levels"]:
        assert lv["size"] % (lv["ways"] * detected["hierarchy"]["line_size"]) == 0
