"""The everyday conveniences of issue 24 ("A real package"), each checked against something
independent of the code path it exercises:

- ``simulate MACHINE.toml --trace T``: a preset's (or ``machine NAME``'s printed table's) caches
  give exactly the counts of a hand-written cache-only config with the preset's levels;
- a system config's relative trace paths name files beside the config, from any directory (the
  same result as the absolute path);
- ``--format`` omitted: the format is told from the content (same counts as naming it), and
  ``--format`` still overrides;
- ``profile`` profiles the hierarchy's last level whatever its name (L3 here, not LLC);
- ``trace filter``: the kept records are those a NumPy mask over ``read_trace`` selects;
- ``read_trace(chunksize=N)``: chunks of N records whose concatenation is the whole trace;
- ``cachecolor examples``: the bundled examples are found, wherever the command runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cachecolor
from cachecolor import presets
from conftest import system_with_trace


def _levels_of(doc: dict) -> list[tuple]:
    return [(lv["name"], lv["accesses"], lv["hits"], lv["misses"], lv["evictions"]) for lv in doc["levels"]]


# ------------------------------------------------------------------------------------------
# simulate --trace on a machine


def test_simulate_trace_on_a_preset_machine_equals_its_hierarchy_by_hand(run_cli, tmp_path, native_trace):
    machine = tmp_path / "xeon.toml"
    out = run_cli("machine", "xeon-e5506")
    assert out.returncode == 0, out.stderr
    machine.write_text(out.stdout)  # the whole [machine] table, as a user saves it
    ref = tmp_path / "preset.toml"
    ref.write_text('[machine]\npreset = "xeon-e5506"\n')
    # The same caches written by hand from the preset's summary (crates/sim/presets/xeon-e5506.toml).
    summary = presets.machine_summaries("xeon-e5506")[0]
    hand = tmp_path / "hand.toml"
    lines = ["[hierarchy]", f"cores = {summary['cores']}", 'inclusion = "inclusive"', f"line_size = {summary['line_size']}"]
    for lv in summary["levels"]:
        lines += ["[[hierarchy.levels]]", f'name = "{lv["name"]}"', f"size = {lv['size']}", f"ways = {lv['ways']}",
                  f'serves = "{lv["serves"]}"']
    hand.write_text("\n".join(lines) + "\n")
    docs = {}
    for name, cfg in (("table", machine), ("preset", ref), ("hand", hand)):
        out = run_cli("simulate", cfg, "--trace", native_trace, "--json", f"{name}.json", "-q")
        assert out.returncode == 0, (name, out.stderr)
        docs[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert "on the caches of" in run_cli("simulate", ref, "--trace", native_trace, "-q").stdout
    assert _levels_of(docs["table"]) == _levels_of(docs["hand"])
    assert _levels_of(docs["preset"]) == _levels_of(docs["hand"])
    assert [lv[0] for lv in _levels_of(docs["hand"])] == ["L1I", "L1D", "L2", "L3"]


def test_simulate_trace_on_the_detected_machine(run_cli, tmp_path, native_trace):
    cfg = tmp_path / "host.toml"
    cfg.write_text('[machine]\npreset = "detect"\n')
    out = run_cli("simulate", cfg, "--trace", native_trace, "-q")
    if "cannot" in out.stderr and "sysfs" in out.stderr:  # pragma: no cover - no sysfs caches here
        pytest.skip(f"this host's caches cannot be read: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    assert "150,000 records" in out.stdout


def test_simulate_trace_on_a_machine_rejects_policy_and_processes(run_cli, tmp_path, native_trace, examples):
    cfg = tmp_path / "m.toml"
    cfg.write_text('[machine]\npreset = "power5"\n')
    out = run_cli("simulate", cfg, "--trace", native_trace, "--policy", "rocs")
    assert out.returncode == 2 and "--policy" in out.stderr
    out = run_cli("simulate", examples / "os" / "colors-disjoint.toml", "--trace", native_trace)
    assert out.returncode == 2 and "--trace is for cache-only configs" in out.stderr


# ------------------------------------------------------------------------------------------
# system configs: trace paths relative to the config


def test_system_trace_paths_are_relative_to_the_config(run_cli, tmp_path, native_trace):
    cfg_dir = tmp_path / "configs"
    cfg_dir.mkdir()
    (cfg_dir / "t.cctrace").write_bytes(native_trace.read_bytes())
    rel = cfg_dir / "rel.toml"
    rel.write_text(system_with_trace("t.cctrace"))
    absolute = cfg_dir / "abs.toml"
    absolute.write_text(system_with_trace(str(cfg_dir / "t.cctrace")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # From a directory that has no t.cctrace: found beside the config.
    a = run_cli("simulate", rel, "--json", "rel.json", "-q", cwd=elsewhere)
    assert a.returncode == 0, a.stderr
    b = run_cli("simulate", absolute, "--json", "abs.json", "-q", cwd=elsewhere)
    assert b.returncode == 0, b.stderr
    ra, rb = (json.loads((elsewhere / f).read_text()) for f in ("rel.json", "abs.json"))
    assert ra["processes"] == rb["processes"] and ra["processes"][0]["ipc"] > 0
    # A config in another directory than the trace: the relative path does not reach it.
    moved = tmp_path / "moved.toml"
    moved.write_text(system_with_trace("t.cctrace"))
    c = run_cli("simulate", moved, "-q", cwd=cfg_dir)
    assert c.returncode == 2 and "t.cctrace" in c.stderr


# ------------------------------------------------------------------------------------------
# format auto-detection


def test_trace_format_is_told_from_content(run_cli, tmp_path, din_trace, native_trace, examples):
    cfg = examples / "crossval" / "one-level.toml"
    # A din trace under a name that says nothing of its format.
    anon = tmp_path / "trace.data"
    anon.write_bytes(din_trace.read_bytes())
    auto = run_cli("simulate", cfg, "--trace", anon, "--json", "auto.json", "-q")
    assert auto.returncode == 0, auto.stderr
    assert "(din)" in auto.stdout
    named = run_cli("simulate", cfg, "--trace", anon, "--format", "din", "--json", "named.json", "-q")
    assert named.returncode == 0, named.stderr
    a, n = (json.loads((tmp_path / f).read_text()) for f in ("auto.json", "named.json"))
    assert _levels_of(a) == _levels_of(n) and a["records"] == 20_000
    # --format overrides: a din file read as native is refused.
    forced = run_cli("simulate", cfg, "--trace", anon, "--format", "native")
    assert forced.returncode == 2 and "not a cachecolor trace" in forced.stderr
    assert cachecolor.detect_format(native_trace) == "native"
    assert cachecolor.detect_format(din_trace) == "din"
    info = run_cli("trace", "info", anon, "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["records"] == 20_000
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\nthis is not a trace\n")
    bad = run_cli("simulate", cfg, "--trace", junk)
    assert bad.returncode == 2 and "give --format" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_lackey_is_told_from_content(tmp_path):
    lackey = tmp_path / "ls.out"
    lackey.write_text("==123== Lackey, an example Valgrind tool\nI  04001000,3\n L 1ffefffd40,8\n S 1ffefffd48,8\n M 0421f000,4\n")
    assert cachecolor.detect_format(lackey) == "lackey"


# ------------------------------------------------------------------------------------------
# profile on the last level


def test_profile_defaults_to_the_last_level_whatever_its_name(run_cli, tmp_path, native_trace):
    cfg = tmp_path / "l3.toml"
    cfg.write_text(
        "[hierarchy]\nline_size = 64\n"
        '[[hierarchy.levels]]\nname = "L1D"\nsize = "32KiB"\nways = 8\n'
        '[[hierarchy.levels]]\nname = "L2"\nsize = "256KiB"\nways = 8\n'
        '[[hierarchy.levels]]\nname = "L3"\nsize = "2MiB"\nways = 16\n'
    )
    out = run_cli("profile", native_trace, "--config", cfg, "--json", "p.json", "-q")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("L3 page profile")
    by_name = run_cli("profile", native_trace, "--config", cfg, "--level", "L3", "--json", "q.json", "-q")
    assert by_name.returncode == 0, by_name.stderr
    p, q = (json.loads((tmp_path / f).read_text()) for f in ("p.json", "q.json"))
    assert p["level"] == "L3" and p["misses"] == q["misses"] and p["accesses"] == q["accesses"] > 0


# ------------------------------------------------------------------------------------------
# trace filter


def test_trace_filter_keeps_what_a_numpy_mask_keeps(run_cli, tmp_path):
    rng = np.random.default_rng(11)
    n = 200_000
    cols = {
        "addr": rng.integers(0, 1 << 24, size=n, dtype=np.uint64),
        "kind": rng.integers(0, 4, size=n, dtype=np.uint8),
        "size": rng.choice(np.array([1, 4, 8], dtype=np.uint16), size=n),
        "thread": rng.integers(0, 4, size=n, dtype=np.uint32),
        "privileged": (rng.random(n) < 0.3).astype(np.uint8),
        "icount": rng.integers(0, 4, size=n, dtype=np.uint32),
    }
    src = tmp_path / "all.cctrace"
    cachecolor.write_trace(src, cols)
    full = cachecolor.read_trace(src, as_="array")
    cases = [
        (["--no-ifetch"], full["kind"] != 2),
        (["--kinds", "load,S"], (full["kind"] == 0) | (full["kind"] == 1)),
        (["--threads", "1,3"], (full["thread"] == 1) | (full["thread"] == 3)),
        (["--range", "0x100000:0x200000", "--range", "0xf00000:0x1000000"],
         ((full["addr"] >= 0x100000) & (full["addr"] < 0x200000)) | ((full["addr"] >= 0xF00000) & (full["addr"] < 0x1000000))),
        (["--privileged"], full["privileged"]),
        (["--user", "--no-ifetch", "--threads", "0"], ~full["privileged"] & (full["kind"] != 2) & (full["thread"] == 0)),
    ]
    for k, (opts, mask) in enumerate(cases):
        out_path = tmp_path / f"f{k}.cctrace"
        out = run_cli("trace", "filter", src, out_path, *opts)
        assert out.returncode == 0, (opts, out.stderr)
        kept = cachecolor.read_trace(out_path, as_="array")
        want = full[mask]
        assert 0 < len(kept) < n, opts
        assert f"kept {len(want):,} of {n:,}" in out.stdout, (opts, out.stdout)
        for col in ("addr", "kind", "size", "thread", "privileged"):
            assert np.array_equal(kept[col], want[col]), (opts, col)
        # Regression: a dropped record's instructions go to its thread's next kept record in
        # the same mode (they were lost: `--no-ifetch` left 0 instructions). Brute force:
        icounts, carry = [], {}
        for i in range(n):
            key = (int(full["thread"][i]), bool(full["privileged"][i]))
            if mask[i]:
                icounts.append(int(full["icount"][i]) + carry.pop(key, 0))
            else:
                carry[key] = carry.get(key, 0) + int(full["icount"][i])
        assert np.array_equal(kept["icount"], np.array(icounts)), opts
    # The same through the API, with a din input (format told from content by the CLI, given here).
    read, kept_n = cachecolor.filter_trace(src, tmp_path / "api.cctrace", kinds=["ifetch"])
    assert (read, kept_n) == (n, int((full["kind"] == 2).sum()))


def test_trace_filter_bad_input(run_cli, tmp_path, native_trace):
    for opts, says in (
        (["--range", "0x20:0x10"], "START < END"),
        (["--range", "zz"], "START:END"),
        (["--kinds", "loads"], "unknown kind"),
        (["--threads", "a"], "thread ids"),
        (["--privileged", "--user"], "not allowed with"),
    ):
        out = run_cli("trace", "filter", native_trace, tmp_path / "o.cctrace", *opts)
        assert out.returncode == 2 and says in out.stderr, (opts, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (tmp_path / "o.cctrace").exists()
    same = run_cli("trace", "filter", native_trace, native_trace)
    assert same.returncode == 2 and "is the input" in same.stderr  # the one output contract (_output.py)


# ------------------------------------------------------------------------------------------
# chunked read_trace


def test_read_trace_in_chunks_is_the_whole_trace(native_trace, din_trace):
    full = cachecolor.read_trace(native_trace)
    chunks = list(cachecolor.read_trace(native_trace, chunksize=40_000))
    assert [len(c) for c in chunks] == [40_000, 40_000, 40_000, 30_000]
    assert all(isinstance(c, pd.DataFrame) for c in chunks)
    assert pd.concat(chunks, ignore_index=True).equals(full)
    assert chunks[0].attrs["metadata"] == full.attrs["metadata"]
    arrays = list(cachecolor.read_trace(native_trace, chunksize=65_536, as_="array"))
    assert [len(a) for a in arrays] == [65_536, 65_536, 18_928]
    assert np.array_equal(np.concatenate(arrays), cachecolor.read_trace(native_trace, as_="array"))
    limited = list(cachecolor.read_trace(native_trace, chunksize=40_000, limit=90_001))
    assert [len(c) for c in limited] == [40_000, 40_000, 10_001]
    assert pd.concat(limited, ignore_index=True).equals(full.iloc[:90_001])
    din = list(cachecolor.read_trace(din_trace, "din", chunksize=7_000))
    assert [len(c) for c in din] == [7_000, 7_000, 6_000]
    with pytest.raises(ValueError, match="chunksize"):
        cachecolor.read_trace(native_trace, chunksize=0)
    with pytest.raises(OSError):
        cachecolor.read_trace(native_trace.with_name("missing.cctrace"), chunksize=10)


# ------------------------------------------------------------------------------------------
# bundled examples


def test_bundled_examples_are_found_from_any_directory(run_cli, tmp_path):
    out = run_cli("examples", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    root = Path(out.stdout.strip())
    for rel in ("demo/transpose.c", "rocs/art.toml", "oscache/baseline.toml", "oscache/workloads"):
        assert (root / rel).exists(), rel
    art = run_cli("examples", "rocs/art.toml", cwd=tmp_path)
    assert art.returncode == 0 and Path(art.stdout.strip()).read_text() == (root / "rocs" / "art.toml").read_text()
    missing = run_cli("examples", "nope.toml", cwd=tmp_path)
    assert missing.returncode == 2 and "no such bundled example" in missing.stderr
    from cachecolor import oscache

    assert oscache.examples_dir() is not None


# ------------------------------------------------------------------------------------------
# baseline x86-64: the extension runs on a CPU without AVX2


_ON_A_CPU = """
import json, sys
import numpy as np
import cachecolor
rng = np.random.default_rng(5)
addr = rng.integers(0, 8 << 20, 200_000, dtype=np.uint64)
r = cachecolor.simulate(cachecolor.load_config(sys.argv[1]), addr)
print(json.dumps([(lv["name"], lv["hits"], lv["misses"], lv["evictions"]) for lv in r.to_dict()["levels"]]))
"""


@pytest.mark.skipif(
    __import__("platform").machine() != "x86_64" or __import__("shutil").which("qemu-x86_64") is None,
    reason="needs an x86-64 host and qemu-x86_64 (apt-get install qemu-user)",
)
def test_the_extension_runs_on_a_cpu_without_avx2(tmp_path, examples):
    """The extension under qemu-x86_64 emulating a Nehalem (SSE4.2, no AVX): it runs (no illegal
    instruction: the build is baseline x86-64 and the AVX2 copy is only taken where the CPU has
    it, crates/sim/src/isa.rs) and counts exactly what this host's (dispatched) run counts, on a
    non-inclusive hierarchy the lean engine runs."""
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(_ON_A_CPU)
    cfg = examples / "crossval" / "three-level.toml"
    here = subprocess.run([sys.executable, script, cfg], capture_output=True, text=True, timeout=300)
    assert here.returncode == 0, here.stderr
    old = subprocess.run(
        ["qemu-x86_64", "-cpu", "Nehalem", sys.executable, script, cfg], capture_output=True, text=True, timeout=600
    )
    assert old.returncode == 0, old.stderr[-2000:]
    assert json.loads(old.stdout) == json.loads(here.stdout)
    assert json.loads(here.stdout)[0][1] > 0
