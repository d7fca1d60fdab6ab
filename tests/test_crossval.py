"""Cross-validation: cachecolor's counts against pycachesim, ANCHORS.md's exact counts and
Valgrind's cachegrind, on the same traces (`make test`; each test takes seconds).

Every simulation here goes through ``simulated()``, which runs it twice and checks the
invariants DESIGN.md asks for: the result's ``invariants`` list is empty, hits + misses =
accesses at every level (in total and per kind), and the two runs give identical documents.

cachecolor's semantics (crates/sim/src/cache/hierarchy.rs): each demand access is one *line*
access, counted as a hit or a miss under its kind (load / store / ifetch / modify); a level is
looked up only on a miss above and the line is filled into every level that missed; a store
hit updates LRU like a load hit and dirties the line; a dirty victim is written back to the
next level (``writebacks`` there, ``writebacks_received`` below): dirtied there without an
LRU update if present, or allocated there dirty *without a fetch from below*
(``writeback_fills``) if absent. A write-through level forwards a store's data down the same
way (dirtying, never allocating, never updating LRU).

pycachesim 0.3.1 (cachesim/backend.c; a chain of LRU ``cachesim.Cache`` objects linked by
``load_from``/``store_to``, write-back + write-allocate) differs in three ways:

1. **A store hit does not update LRU** (``Cache__store`` only sets the dirty bit). cachecolor
   moves the line to MRU, as a load hit does.
2. **Counting**: ``HIT``/``MISS`` count only loads, where loads include the write-allocate
   fetch of a store miss; ``STORE`` counts stores; ``LOAD`` counts load requests (one per call
   when a request spans two lines, whose lines are then counted one by one in HIT/MISS).
   cachecolor counts every demand line access under its own kind.
3. **A write-back that misses the next level is fetched there** (write-allocate: a LOAD that
   counts a MISS and reads the line from the level below, changing that level's contents),
   where cachecolor allocates the line dirty without touching the level below.

How the tests handle them, asserting exact equality every time:

- ``test_pycachesim_loads*``: on load-only traces the semantics are identical, so every
  level's LOAD/HIT/MISS equal cachecolor's accesses/hits/misses, on the scaled three-level
  config and on three-level.toml itself. A load that spans two lines is one pycachesim LOAD but
  two line lookups in its HIT + MISS, and two line accesses in cachecolor
  (``test_pycachesim_loads_spanning_two_lines``).
- ``test_pycachesim_equivalent_stores``: pycachesim is driven so that its semantics *are*
  cachecolor's: each store or modify is given as ``load(a)`` then ``store(a)`` (the load updates
  LRU as cachecolor's store does, and fetches on a miss; the store then hits and dirties the
  line), and the levels below the first are write-back **no**-write-allocate, which is exactly
  cachecolor's write-back rule (only write-backs ever reach them: present -> dirty, no LRU
  update; absent -> injected dirty, no fetch). Then on any mixed trace, at every level:
  pycachesim HIT/MISS/LOAD = cachecolor hits/misses/accesses, L1 STORE = stores + modifies,
  lower STORE = writebacks_received, EVICT = writebacks, memory reads/writes equal.
- ``test_pycachesim_native_stores``: pycachesim with its own store semantics (plain stores,
  write-allocate everywhere) on traces where difference 1 cannot show, because every store
  hit is to the most recently used line of its set (read-modify-write ``x[i] += 1`` and
  streaming stores): L1 matches exactly after the counting map of difference 2 (HIT = load
  hits, MISS = load + store misses, LOAD = loads + store misses, STORE = stores). Below L1,
  difference 3 is accounted exactly: a level receiving write-back fills counts them as extra
  LOADs and MISSes and is otherwise identical, and the levels below the first such level see
  extra fetches, so they are compared only when no level above them had write-back fills.
- ``test_pycachesim_native_store_hits_differ`` shows difference 1 on a random mixed trace.

``test_anchors_exact_counts`` checks ANCHORS.md's counts through the Python API and the
built-in generator. The cachegrind comparison (``test_cachegrind``) explains its own semantics
in its docstring.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cachecolor
from conftest import needs_cc, needs_valgrind

REPO = Path(__file__).resolve().parents[1]
CROSSVAL = REPO / "examples" / "crossval"
BASE = 0x2_0000_0000
LINE = 64
KINDS = ("load", "store", "ifetch", "modify")


# ---------------------------------------------------------------------------------------------
# Running cachecolor with the invariant checks


def check_invariants(result: cachecolor.Result) -> None:
    assert result.invariants == []
    doc = result.to_dict()
    for lv in doc["levels"]:
        assert lv["hits"] + lv["misses"] == lv["accesses"], lv["name"]
        assert sum(lv[k]["accesses"] for k in KINDS) == lv["accesses"], lv["name"]
        for k in KINDS:
            c = lv[k]
            assert c["hits"] + c["misses"] == c["accesses"], (lv["name"], k)


def simulated(config: Any, trace: Any = None, **kwargs: Any) -> cachecolor.Result:
    """Simulate twice; check the invariants on the first run and that the second is identical."""
    first = cachecolor.simulate(config, trace=trace, **kwargs)
    check_invariants(first)
    again = cachecolor.simulate(config, trace=trace, **kwargs)
    assert again.to_dict() == first.to_dict(), "two runs of the same simulation differ"
    return first


def levels(result: cachecolor.Result) -> list[dict[str, Any]]:
    return result.to_dict()["levels"]


# ---------------------------------------------------------------------------------------------
# Configs and traces


def one_level() -> dict[str, Any]:
    return cachecolor.load_config(CROSSVAL / "one-level.toml")


def three_level() -> dict[str, Any]:
    return cachecolor.load_config(CROSSVAL / "three-level.toml")


def three_level_small() -> dict[str, Any]:
    """three-level.toml's shape (12/16/16 ways, LRU, non-inclusive) with every level 16x
    smaller (L3 32x), so that short traces exercise capacity misses at all three levels:
    L1D 3 KiB (4 sets), L2 64 KiB (64 sets), L3 1 MiB (1024 sets)."""
    cfg = three_level()
    for lv, size in zip(cfg["hierarchy"]["levels"], (3 << 10, 64 << 10, 1 << 20)):
        lv["size"] = size
    return cachecolor.load_config(cfg)


CONFIGS = {"one-level": one_level, "three-level-small": three_level_small}


def random_addrs(n: int, footprint: int, seed: int, align: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (BASE + align * rng.integers(0, footprint // align, n)).astype(np.uint64)


def sequential_addrs(n: int) -> np.ndarray:
    return (BASE + 8 * np.arange(n, dtype=np.uint64)).astype(np.uint64)


def strided_addrs(n: int, stride: int, footprint: int) -> np.ndarray:
    """``i * stride mod footprint``: with stride 4 KiB + 64 B the walk hits every set in turn
    but comes back to a line only after footprint / stride references."""
    return (BASE + (np.arange(n, dtype=np.uint64) * stride) % footprint).astype(np.uint64)


def rmw(addrs: np.ndarray, store_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Loads, of which ``store_fraction`` are followed by a store to the same address (x += 1)."""
    rng = np.random.default_rng(seed)
    reps = np.where(rng.random(len(addrs)) < store_fraction, 2, 1)
    out = np.repeat(addrs, reps)
    kinds = np.zeros(len(out), np.uint8)
    kinds[(np.cumsum(reps) - 1)[reps == 2]] = 1
    return out, kinds


def copy_stream(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A line-by-line copy: the 8 words of a source line loaded, then the 8 words of the
    destination line stored (so a store hit is always to the line referenced just before)."""
    lines = np.arange(n // 16, dtype=np.uint64)
    words = np.arange(8, dtype=np.uint64) * np.uint64(8)
    src = BASE + LINE * lines[:, None] + words
    dst = BASE + (64 << 20) + LINE * lines[:, None] + words
    addrs = np.concatenate([src, dst], axis=1).ravel().astype(np.uint64)
    kinds = np.tile(np.repeat(np.array([0, 1], np.uint8), 8), len(lines))
    return addrs, kinds


def hot_cold(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Phases of 4 hot lines, stored to, mixed half and half with loads over 4 MiB. The hot lines
    stay in L1 while their L2 copies age out, so when the next phase evicts them from L1 their
    write-backs miss L2: cachecolor's ``writeback_fills`` (difference 3) happen."""
    rng = np.random.default_rng(seed)
    phase = np.arange(n) * 6 // n
    hot = BASE + (256 << 20) + LINE * (phase * 4 + rng.integers(0, 4, n))
    cold = BASE + 8 * rng.integers(0, (4 << 20) // 8, n)
    is_hot = rng.random(n) < 0.5
    addrs = np.where(is_hot, hot, cold).astype(np.uint64)
    return rmw_hot(addrs, is_hot)


def rmw_hot(addrs: np.ndarray, is_hot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    reps = np.where(is_hot, 2, 1)
    out = np.repeat(addrs, reps)
    kinds = np.zeros(len(out), np.uint8)
    kinds[(np.cumsum(reps) - 1)[is_hot]] = 1
    return out, kinds


def mixed(addrs: np.ndarray, seed: int) -> np.ndarray:
    """Random kinds: 50% loads, 30% stores, 20% modifies."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([0, 1, 3], np.uint8), size=len(addrs), p=[0.5, 0.3, 0.2])


# ---------------------------------------------------------------------------------------------
# pycachesim


def pycachesim():
    cachesim = pytest.importorskip("cachesim", reason="pycachesim is not installed (`make venv` installs it)")
    if not hasattr(cachesim, "CacheSimulator"):  # ANCHORS.md: pyCacheSimulator also installs `cachesim`
        pytest.skip("the installed `cachesim` module is not pycachesim's")
    return cachesim


def pcs_hierarchy(config: dict[str, Any], lower_write_allocate: bool):
    """pycachesim's chain of LRU caches for a cachecolor config: same sets, ways and line size
    (set = line mod sets in both), write-back; L1 write-allocate, the levels below
    write-allocate or not as asked."""
    cachesim = pycachesim()
    h = config["hierarchy"]
    lower = None
    caches = []
    for i, lv in reversed(list(enumerate(h["levels"]))):
        assert lv["policy"] == "lru" and lv["write_policy"] == "write-back" and lv["write_allocate"]
        sets = lv["size"] // (lv["ways"] * h["line_size"])
        cache = cachesim.Cache(
            lv["name"], sets, lv["ways"], h["line_size"], "LRU",
            write_back=True, write_allocate=True if i == 0 else lower_write_allocate,
            load_from=lower, store_to=lower,
        )
        caches.insert(0, cache)
        lower = cache
    mem = cachesim.MainMemory()
    mem.load_to(caches[-1])
    mem.store_from(caches[-1])
    return cachesim.CacheSimulator(caches[0], mem), caches, mem


def pcs_run(sim, addrs: np.ndarray, kinds: np.ndarray, length: int, stores_as_load_store: bool) -> None:
    """Feed the trace in order through ``loadstore`` ([(loads, stores), ...]: each item's loads,
    then its stores), with Python ints (never scalar ``load(addr)``, which truncates to 32 bits).
    A modify (kind 3) is a store. With ``stores_as_load_store`` every store at ``a`` is given as
    load ``a`` then store ``a``."""
    items: list[tuple[list[int], list[int]]] = []
    loads: list[int] = []
    stores: list[int] = []
    for a, k in zip(addrs.tolist(), kinds.tolist()):
        if k == 0:
            if stores:
                items.append((loads, stores))
                loads, stores = [], []
            loads.append(a)
        elif stores_as_load_store:
            loads.append(a)
            items.append((loads, [a]))
            loads, stores = [], []
        else:
            stores.append(a)
    if loads or stores:
        items.append((loads, stores))
    sim.loadstore(items, length=length)


def pcs_stats(caches) -> list[dict[str, int]]:
    return [{k[: -len("_count")]: v for k, v in c.stats().items() if k.endswith("_count")} for c in caches]


def run_both(config, addrs, kinds, *, length=8, stores_as_load_store, lower_write_allocate):
    cc = simulated(config, addrs, kinds=kinds, sizes=np.full(len(addrs), length, np.uint16))
    sim, caches, mem = pcs_hierarchy(config, lower_write_allocate)
    pcs_run(sim, addrs, kinds, length, stores_as_load_store)
    return cc, pcs_stats(caches), mem.stats()


LOAD_TRACES = {
    "random": lambda: random_addrs(60_000, 2 << 20, seed=1),
    "random-small": lambda: random_addrs(60_000, 96 << 10, seed=2),
    "sequential": lambda: sequential_addrs(60_000),
    "strided": lambda: strided_addrs(60_000, 4096 + 64, 24 << 10),
    "strided-conflict": lambda: strided_addrs(60_000, 4096 + 64, 192 << 10),
}


@pytest.mark.parametrize("trace", sorted(LOAD_TRACES))
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_pycachesim_loads(config, trace):
    """Loads only: the semantics are the same, every counter of every level is equal."""
    cfg = CONFIGS[config]()
    addrs = LOAD_TRACES[trace]()
    kinds = np.zeros(len(addrs), np.uint8)
    cc, pcs, mem = run_both(cfg, addrs, kinds, stores_as_load_store=False, lower_write_allocate=True)
    for lv, p in zip(levels(cc), pcs):
        assert (p["HIT"], p["MISS"], p["LOAD"], p["STORE"], p["EVICT"]) == (
            lv["hits"], lv["misses"], lv["accesses"], 0, 0), lv["name"]
    assert (mem["LOAD_count"], mem["STORE_count"]) == (cc.memory["reads"], cc.memory["writes"])
    assert levels(cc)[-1]["misses"] > 0
    assert any(lv["hits"] for lv in levels(cc)) or (config, trace) == ("one-level", "strided-conflict")


def test_pycachesim_loads_three_level_full_size():
    """examples/crossval/three-level.toml itself, on the first 300,000 references of the
    ANCHORS.md uniform 64 MiB trace (splitmix64 seed 1, slot = z >> 41), as 8-byte loads."""
    cfg = three_level()
    addrs = splitmix_uniform(300_000, seed=1, shift=41)
    cc, pcs, mem = run_both(cfg, addrs, np.zeros(len(addrs), np.uint8), stores_as_load_store=False,
                            lower_write_allocate=True)
    for lv, p in zip(levels(cc), pcs):
        assert (p["HIT"], p["MISS"], p["LOAD"]) == (lv["hits"], lv["misses"], lv["accesses"]), lv["name"]
    assert mem["LOAD_count"] == cc.memory["reads"]


def test_pycachesim_loads_spanning_two_lines():
    """8-byte loads at any byte offset: a load that spans two lines is one pycachesim LOAD but
    two line lookups (HIT + MISS) in pycachesim and two line accesses in cachecolor."""
    cfg = three_level_small()
    addrs = random_addrs(60_000, 256 << 10, seed=3, align=1)
    spans = int(np.count_nonzero((addrs % LINE) > LINE - 8))
    cc, pcs, _ = run_both(cfg, addrs, np.zeros(len(addrs), np.uint8), stores_as_load_store=False,
                          lower_write_allocate=True)
    l1 = levels(cc)[0]
    assert spans > 0 and cc.to_dict()["line_accesses"] == len(addrs) + spans
    assert (pcs[0]["LOAD"], l1["accesses"]) == (len(addrs), len(addrs) + spans)
    for lv, p in zip(levels(cc), pcs):
        assert (p["HIT"], p["MISS"]) == (lv["hits"], lv["misses"]), lv["name"]
    for lv, p in zip(levels(cc)[1:], pcs[1:]):
        assert p["LOAD"] == lv["accesses"], lv["name"]


MIXED_TRACES = {
    "random-mixed": lambda: (lambda a: (a, mixed(a, 11)))(random_addrs(60_000, 2 << 20, seed=4)),
    "random-small-mixed": lambda: (lambda a: (a, mixed(a, 12)))(random_addrs(60_000, 96 << 10, seed=5)),
    "strided-mixed": lambda: (lambda a: (a, mixed(a, 13)))(strided_addrs(60_000, 4096 + 64, 4 << 20)),
    "rmw": lambda: rmw(random_addrs(40_000, 1 << 20, seed=6), 0.5, seed=7),
    "copy": lambda: copy_stream(60_000),
    "hot-cold": lambda: hot_cold(40_000, seed=3),
}


@pytest.mark.parametrize("trace", sorted(MIXED_TRACES))
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_pycachesim_equivalent_stores(config, trace):
    """Stores given to pycachesim as load + store, lower levels no-write-allocate: pycachesim then
    has cachecolor's semantics, and every counter at every level is equal (module docstring)."""
    cfg = CONFIGS[config]()
    addrs, kinds = MIXED_TRACES[trace]()
    cc, pcs, mem = run_both(cfg, addrs, kinds, stores_as_load_store=True, lower_write_allocate=False)
    for i, (lv, p) in enumerate(zip(levels(cc), pcs)):
        stores = lv["store"]["accesses"] + lv["modify"]["accesses"] if i == 0 else lv["writebacks_received"]
        assert (p["HIT"], p["MISS"], p["LOAD"], p["STORE"], p["EVICT"]) == (
            lv["hits"], lv["misses"], lv["accesses"], stores, lv["writebacks"]), lv["name"]
    assert (mem["LOAD_count"], mem["STORE_count"]) == (cc.memory["reads"], cc.memory["writes"])
    assert levels(cc)[0]["writebacks"] > 0


@pytest.mark.parametrize("trace", ["rmw", "copy", "hot-cold"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_pycachesim_native_stores(config, trace):
    """pycachesim's own store semantics, on traces whose store hits are all to the MRU line of
    their set (so difference 1 cannot show): L1 equal after the counting map of difference 2;
    write-back fills (difference 3) accounted exactly (module docstring)."""
    cfg = CONFIGS[config]()
    addrs, kinds = MIXED_TRACES[trace]()
    assert not np.any(kinds == 3)
    cc, pcs, _ = run_both(cfg, addrs, kinds, stores_as_load_store=False, lower_write_allocate=True)
    lvs = levels(cc)
    l1, p1 = lvs[0], pcs[0]
    ld, st = l1["load"], l1["store"]
    assert (p1["HIT"], p1["MISS"], p1["LOAD"], p1["STORE"], p1["EVICT"]) == (
        ld["hits"], ld["misses"] + st["misses"], ld["accesses"] + st["misses"], st["accesses"], l1["writebacks"])
    for lv, p in zip(lvs[1:], pcs[1:]):
        fills = lv["writeback_fills"]
        # pycachesim fetches a write-back that misses: one more LOAD and MISS per fill here.
        assert (p["HIT"], p["MISS"], p["LOAD"], p["STORE"]) == (
            lv["hits"], lv["misses"] + fills, lv["accesses"] + fills, lv["writebacks_received"]), lv["name"]
        if fills:
            break  # those fetches reach the level below: from there on the contents differ
    if trace == "hot-cold" and config == "three-level-small":
        assert lvs[1]["writeback_fills"] > 0, "the hot-cold trace is meant to exercise difference 3"


def test_pycachesim_native_store_hits_differ():
    """Difference 1 is real: on a random mixed trace over 3x the cache, pycachesim's L1 with
    plain stores (no LRU update on a store hit) counts other hits than cachecolor, while the
    load + store drive above agrees exactly."""
    cfg = one_level()
    addrs = random_addrs(60_000, 96 << 10, seed=5)
    kinds = mixed(addrs, 12)
    kinds[kinds == 3] = 1
    cc, pcs, _ = run_both(cfg, addrs, kinds, stores_as_load_store=False, lower_write_allocate=True)
    ld, st = levels(cc)[0]["load"], levels(cc)[0]["store"]
    assert pcs[0]["HIT"] != ld["hits"] or pcs[0]["MISS"] != ld["misses"] + st["misses"]


# ---------------------------------------------------------------------------------------------
# ANCHORS.md's exact counts, through the Python API and the built-in generator


def splitmix_uniform(n: int, seed: int, shift: int) -> np.ndarray:
    """ANCHORS.md's uniform trace: output i uses state = seed + (i + 1) * golden gamma, the
    standard finaliser, slot = z >> shift, address = 0x200000000 + 8 * slot."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return np.uint64(BASE) + np.uint64(8) * (z >> np.uint64(shift))


ANCHORS = {
    # trace: (workload phase, [(accesses, hits, misses) for L1D, L2, L3])
    "uniform-64MiB": (
        {"pattern": "uniform", "footprint": "64MiB", "references": 5_000_000},
        [(5_000_000, 3_716, 4_996_284), (4_996_284, 74_384, 4_921_900), (4_921_900, 2_252_592, 2_669_308)],
    ),
    "sequential": (
        {"pattern": "sequential", "footprint": "64MiB", "references": 5_000_000},
        [(5_000_000, 4_375_000, 625_000), (625_000, 0, 625_000), (625_000, 0, 625_000)],
    ),
}


@pytest.mark.parametrize("trace", sorted(ANCHORS))
def test_anchors_exact_counts(trace):
    """ANCHORS.md's counts (agreed by pycachesim, DineroIV, libCacheSim, cachegrind and a C
    loop) on examples/crossval/three-level.toml, from the config's [workload] generator."""
    phase, expected = ANCHORS[trace]
    cfg = dict(three_level(), workload={"seed": 1, "phases": [phase]})
    result = simulated(cfg)
    got = [(lv["accesses"], lv["hits"], lv["misses"]) for lv in levels(result)]
    assert got == expected


def test_generator_matches_anchors_definition():
    """The [workload] uniform pattern is the ANCHORS.md splitmix64 trace, address for address:
    the same 200,000 references from memory give the same result document."""
    n = 200_000
    cfg = three_level()
    from_memory = simulated(cfg, splitmix_uniform(n, seed=1, shift=41), sizes=np.full(n, 8, np.uint16))
    generated = simulated(dict(cfg, workload={"seed": 1, "phases": [
        {"pattern": "uniform", "footprint": "64MiB", "references": n}]}))
    assert levels(from_memory) == levels(generated)


# ---------------------------------------------------------------------------------------------
# cachegrind

# Freestanding (no libc), so the trace holds only these references: no start-up code, no
# unaligned library loads, and code and data in separate lines. 8-byte aligned data accesses
# only (none spans two lines). Loads, stores and read-modify-writes (lackey M, cachegrind Dm).
PROGRAM = r"""
typedef unsigned long u64;
#define N (1ul << 16)               /* 512 KiB: 4x the LL below */
#define M (1ul << 12)               /* 32 KiB: fits the LL, not D1 */
static u64 a[N], b[M];
static u64 __attribute__((noinline)) work(unsigned iters) {
    u64 x = 88172645463325252ul, s = 0;
    for (unsigned i = 0; i < iters; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        u64 j = (x >> 20) & (N - 1);
        switch ((x >> 8) & 3) {
        case 0: s += a[j]; break;           /* load */
        case 1: a[j] = s; break;            /* store */
        case 2: a[j] += i; break;           /* modify */
        default: b[j & (M - 1)] += s;       /* modify, reused */
        }
    }
    for (u64 k = 0; k < N; k += 3) s += a[k];    /* strided sweep */
    return s;
}
void __attribute__((noreturn)) _start(void) {
    u64 s = work(20000);
    __asm__ volatile("" :: "r"(s));
    __asm__ volatile("syscall" :: "a"(60), "D"(0) : "rcx", "r11", "memory");
    __builtin_unreachable();
}
"""

# Power-of-two sets (cachegrind needs them): I1 64 KiB 8-way (the program's few code lines are
# never evicted), D1 8 KiB 4-way (32 sets), LL 128 KiB 8-way (256 sets).
CG_CACHES = {"I1": (65536, 8), "D1": (8192, 4), "LL": (131072, 8)}


def cg_config(l1d_write_policy: str) -> dict[str, Any]:
    (i_size, i_ways), (d_size, d_ways), (l_size, l_ways) = CG_CACHES.values()
    return {"hierarchy": {"line_size": LINE, "levels": [
        {"name": "L1I", "size": i_size, "ways": i_ways, "serves": "instruction"},
        {"name": "L1D", "size": d_size, "ways": d_ways, "serves": "data", "write_policy": l1d_write_policy},
        {"name": "LL", "size": l_size, "ways": l_ways},
    ]}}


def cachegrind_summary(path: Path) -> dict[str, int]:
    events = summary = None
    for line in path.read_text().splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = [int(v) for v in line.split()[1:]]
    assert events and summary, f"no events:/summary: lines in {path}"
    return dict(zip(events, summary))


def straddle_accounting(trace: np.ndarray, ll_sets: int) -> dict[str, int]:
    """From the trace alone, what cachegrind's per-record rule changes for instruction fetches,
    given an I1 that never evicts (so an I1 miss is exactly a first fetch of a line):

    - ``both_new``: fetches spanning two lines both fetched for the first time. cachegrind
      counts one I1 miss and one LL miss for the record, cachecolor two of each.
    - extra LL references: a fetch spanning an old and a new line misses I1 in both tools, but
      cachegrind then references *both* lines in LL, cachecolor only the missing one. The extra
      LL reference (to a line already in LL's recency order) is the only difference between the
      two LL reference streams. Under LRU it can only lengthen the reuse distance, by one, of
      references whose reuse window spans it, in its set; ``bound`` counts, per extra reference,
      the lines of its LL set referenced (as data, or by a first fetch) both before and after
      it: an upper bound on the data LL outcomes it can turn from hit to miss."""
    kind, addr, size = trace["kind"], trace["addr"], trace["size"].astype(np.uint64)
    first, last = addr >> np.uint64(6), (addr + size - np.uint64(1)) >> np.uint64(6)
    is_i = kind == 2
    idx = np.flatnonzero(is_i)
    f, l = first[is_i], last[is_i]
    span = f != l
    # The line references of the fetches in order (first line, then second line if spanning).
    refs = np.stack([f, l], axis=1).ravel()
    valid = np.stack([np.ones_like(span), span], axis=1).ravel()
    pos = np.flatnonzero(valid)
    _, first_pos = np.unique(refs[pos], return_index=True)
    new = np.zeros(len(refs), bool)
    new[pos[first_pos]] = True
    new_f, new_l = new[0::2], new[1::2]
    both_new = span & new_f & new_l
    one_new = span & (new_f != new_l)
    # The stream of candidate LL references: every data line reference, every first fetch.
    data = ~is_i
    cand_t = np.concatenate([np.flatnonzero(data), idx[new_f], idx[new_l]])
    cand_line = np.concatenate([first[data], f[new_f], l[new_l]])
    order = np.argsort(cand_t, kind="stable")
    cand_t, cand_line = cand_t[order], cand_line[order]
    uniq, inv = np.unique(cand_line, return_inverse=True)
    t_first = np.full(len(uniq), np.iinfo(np.int64).max)
    t_last = np.full(len(uniq), -1)
    np.minimum.at(t_first, inv, cand_t)
    np.maximum.at(t_last, inv, cand_t)
    bound = 0
    for t, old in zip(idx[one_new], np.where(new_f[one_new], l[one_new], f[one_new])):
        same_set = (uniq % np.uint64(ll_sets)) == (old % np.uint64(ll_sets))
        bound += int(np.count_nonzero(same_set & (t_first < t) & (t_last > t)))
    return {
        "fetch_spans": int(np.count_nonzero(span)),
        "data_spans": int(np.count_nonzero(first[data] != last[data])),
        "code_lines": int(np.count_nonzero(new)),
        "both_new": int(np.count_nonzero(both_new)),
        "extra_ll_refs": int(np.count_nonzero(one_new)),
        "bound": bound,
        "code_data_shared_lines": len(np.intersect1d(np.unique(refs[pos]), first[data])),
    }


@needs_cc
@needs_valgrind
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the traced program is x86-64 (syscall asm)")
def test_cachegrind(tmp_path):
    """cachegrind --cache-sim=yes and cachecolor on the same program's references.

    Both Valgrind tools run the same core and instrumentation, so lackey's records are the
    references cachegrind simulates, in the same order (an instruction's fetch, then its data
    accesses). cachegrind's model (cachegrind/cg_sim.c, cg_main.c): I1 and D1 feed a unified LL
    looked up only on an L1 miss; true LRU, write-allocate; set = line mod sets. Differences:

    - Writes: cachegrind has no dirty state or write-backs: a write is one more access. In
      cachecolor a write-back that misses the next level allocates there (a change of LL
      contents cachegrind never makes), so L1D is **write-through** here: its stores only mark
      LL's copy dirty, without an LRU update and never allocating, and LL's own dirty
      evictions go to memory. The LL contents then evolve as in cachegrind. (A write-back L1D
      gives the same LL counts whenever LL sees no write-back fills; checked below.)
    - Modify (lackey ``M``, cachegrind ``Dm``, e.g. ``add %rdx, mem``): cachegrind counts it
      once, as a *read* (Dr, D1mr, DLmr); cachecolor counts one access of kind ``modify`` (a
      read and a write of one line). So Dr = load + modify records, Dw = store records.
    - Records spanning two lines: cachegrind counts **one** access, a miss if either line
      misses, and on an L1 miss looks up *both* lines in LL (cg_sim.c,
      ``cachesim_ref_is_miss``); cachecolor makes two line accesses and sends only the missing
      line down. L1 contents evolve identically (both look up both lines, in order), so only
      counts differ at L1; at LL cachegrind makes one extra reference when exactly one line
      missed. This program has no data access spanning two lines (asserted), but x86
      instructions do span lines. Their effect is computed from the trace
      (``straddle_accounting``): I1 misses and LL ifetch misses differ exactly by the fetches
      whose two lines were both new; the data LL misses of cachegrind exceed cachecolor's by at
      least 0 and at most ``bound`` (0 for this program as compiled here, making them equal).
    - Data sizes above 64 (xsave and the like) are cut to 64 by cachegrind and to 512 by
      lackey: none occur here (asserted: no data record spans two lines).
    """
    src = tmp_path / "prog.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "prog"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-O1", "-nostdlib", "-static", "-fno-pie", "-no-pie", "-fno-stack-protector",
                    "-o", str(exe), str(src)], check=True, capture_output=True, timeout=60)
    cg_out = tmp_path / "cg.out"
    geometry = [f"--{name}={size},{ways},{LINE}" for name, (size, ways) in CG_CACHES.items()]
    run = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", *geometry,
                          f"--cachegrind-out-file={cg_out}", str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lackey = tmp_path / "prog.lackey"
    run = subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={lackey}", str(exe)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    native = tmp_path / "prog.cctrace"
    records = cachecolor.convert_trace(lackey, "lackey", native)
    cg = cachegrind_summary(cg_out)

    trace = cachecolor.read_trace(native, as_="array")
    kinds = np.bincount(trace["kind"], minlength=4)
    ll_sets = CG_CACHES["LL"][0] // (CG_CACHES["LL"][1] * LINE)
    acct = straddle_accounting(trace, ll_sets)
    assert len(trace) == records

    result = simulated(cg_config("write-through"), native)
    l1i, l1d, ll = levels(result)
    print("cachegrind:", cg, "\ncachecolor:\n" + result.table(), "\naccounting:", acct)

    # Preconditions of the accounting (facts about this program and these caches).
    assert acct["data_spans"] == 0
    assert acct["code_data_shared_lines"] == 0
    assert l1i["evictions"] == 0 and l1i["misses"] == acct["code_lines"]

    # Records: one cachegrind access per record.
    assert (cg["Ir"], cg["Dr"], cg["Dw"]) == (kinds[2], kinds[0] + kinds[3], kinds[1])
    assert l1i["accesses"] == cg["Ir"] + acct["fetch_spans"]
    # D1: identical contents, no data record spans two lines: equal.
    assert l1d["load"]["accesses"] + l1d["modify"]["accesses"] == cg["Dr"]
    assert l1d["store"]["accesses"] == cg["Dw"]
    assert l1d["load"]["misses"] + l1d["modify"]["misses"] == cg["D1mr"]
    assert l1d["store"]["misses"] == cg["D1mw"]
    # I1 and LL instruction misses: one fewer per fetch whose two lines were both new.
    assert cg["I1mr"] == l1i["misses"] - acct["both_new"]
    assert cg["ILmr"] == ll["ifetch"]["misses"] - acct["both_new"]
    # LL data misses: cachegrind's extra LL references can only add misses, at most `bound`.
    d_read = cg["DLmr"] - (ll["load"]["misses"] + ll["modify"]["misses"])
    d_write = cg["DLmw"] - ll["store"]["misses"]
    assert d_read >= 0 and d_write >= 0 and d_read + d_write <= acct["bound"]
    if acct["bound"] == 0:
        assert (d_read, d_write) == (0, 0)
    assert ll["misses"] > 0 and ll["hits"] > 0 and l1d["hits"] > 0

    # Write-back L1D: same L1D counts always; same LL counts when no write-back allocated in LL.
    wb = simulated(cg_config("write-back"), native)
    wb_l1d, wb_ll = levels(wb)[1:]
    assert {k: wb_l1d[k] for k in KINDS} == {k: l1d[k] for k in KINDS}
    assert wb_l1d["writebacks"] > 0
    if wb_ll["writeback_fills"] == 0:
        assert {k: wb_ll[k] for k in KINDS} == {k: ll[k] for k in KINDS}
