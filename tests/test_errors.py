"""Bad input, as a table: each case gives the documented exit code (2 = bad input) and ONE line
on stderr, `cachecolor: error: ...`, that names the field or the byte offset, and never a
Python traceback (DESIGN.md principle 6). The same errors through the API carry `.field` and
`.offset`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cachecolor
from conftest import assert_one_line_error

GOOD_LEVEL = 'name = "L1"\nsize = "32KiB"\nways = 8\n'


def config_with(level: str = GOOD_LEVEL, top: str = "") -> str:
    return f"[hierarchy]\n{top}[[hierarchy.levels]]\n{level}"


# (id, config text, strings the message must contain)
CONFIG_CASES = [
    ("unknown-key", config_with(GOOD_LEVEL + "colour = 3\n"), ["hierarchy.levels[0].colour", "unknown field `colour`"]),
    ("unknown-top-key", "[hierarchy]\nlevelz = []\n", ["levelz"]),
    ("unknown-table", config_with() + "[machine]\ncores = 2\n", ["machine"]),
    ("ways-zero", config_with('name = "L1"\nsize = "32KiB"\nways = 0\n'), ["hierarchy.levels[0].ways", "at least 1"]),
    ("size-not-multiple", config_with('name = "L1"\nsize = 32832\nways = 8\n'), ["hierarchy.levels[0].size", "not a multiple of ways x line size"]),
    ("line-not-power-of-two", config_with(top="line_size = 48\n"), ["hierarchy.line_size", "power of two"]),
    ("line-larger-than-page", config_with('name = "L1"\nsize = "256KiB"\nways = 4\n', top="line_size = 8192\n"), ["hierarchy.line_size", "larger than a page"]),
    ("unknown-policy", config_with(GOOD_LEVEL + 'policy = "belady"\n'), ["hierarchy.levels[0].policy", "belady", "lru", "srrip", "fifo"]),
    ("bad-size-unit", config_with('name = "L1"\nsize = "32 furlongs"\nways = 8\n'), ["hierarchy.levels[0].size", "furlongs"]),
    ("no-levels", "[hierarchy]\nlevels = []\n", ["hierarchy.levels", "at least one level"]),
    ("missing-ways", config_with('name = "L1"\nsize = "32KiB"\n'), ["ways"]),
    ("bad-workload", config_with() + '[workload]\n[[workload.phases]]\npattern = "uniform"\nfootprint = "1MiB"\nreferences = 0\n', ["workload.phases[0].references"]),
    ("no-trace-no-workload", config_with(), ["workload", "--trace"]),
]


@pytest.mark.parametrize("case_id, text, expected", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_configs(run_cli, tmp_path, case_id, text, expected):
    path = tmp_path / f"{case_id}.toml"
    path.write_text(text)
    line = assert_one_line_error(run_cli("simulate", path))
    for s in expected:
        assert s in line, (s, line)


def test_bad_config_through_the_api_names_the_field():
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.load_config({"hierarchy": {"levels": [{"name": "L1", "size": 32768, "ways": 0}]}})
    assert info.value.field == "hierarchy.levels[0].ways"
    assert str(info.value).startswith("hierarchy.levels[0].ways: ")
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.load_config({"hierarchy": {"levels": [{"name": "L1", "size": 32768, "ways": 8, "policy": "mru"}]}})
    assert "line 1 column" not in str(info.value), "no JSON positions for a dict config"


def _corrupt(native_trace: Path, tmp_path: Path, how: str) -> Path:
    data = native_trace.read_bytes()
    out = tmp_path / f"{how}.cctrace"
    if how == "empty":
        data = b""
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "truncated-end":
        data = data[:-5]
    elif how == "bit-flipped":
        b = bytearray(data)
        b[len(b) // 2] ^= 0x04
        data = bytes(b)
    elif how == "wrong-version":
        b = bytearray(data)
        b[8] = 99  # the u16 version follows the 8-byte magic
        data = bytes(b)
    elif how == "not-a-trace":
        data = b"0 1000\n1 2000\n"
    out.write_bytes(data)
    return out


TRACE_CASES = [
    ("empty", ["byte offset 0", "empty file"]),
    ("truncated", ["byte offset", "truncated"]),
    ("truncated-end", ["byte offset", "truncated", "end marker"]),
    ("bit-flipped", ["byte offset", "checksum", "corrupt"]),
    ("wrong-version", ["byte offset 8", "version 99"]),
    ("not-a-trace", ["byte offset 0", "not a cachecolor trace", "din"]),
]


@pytest.mark.parametrize("how, expected", TRACE_CASES, ids=[c[0] for c in TRACE_CASES])
def test_bad_traces(run_cli, tmp_path, native_trace, examples, how, expected):
    bad = _corrupt(native_trace, tmp_path, how)
    # --format native: the subject is the native reader's errors ("0 1000\n1 2000\n" is a din
    # trace, which the format detection would otherwise recognise; tests/test_package.py).
    for args in (
        ["simulate", examples / "crossval" / "one-level.toml", "--trace", bad, "--format", "native"],
        ["trace", "info", bad, "--format", "native"],
    ):
        line = assert_one_line_error(run_cli(*args))
        assert str(bad) in line
        for s in expected:
            assert s in line, (s, line)
    with pytest.raises(cachecolor.TraceError) as info:
        cachecolor.trace_info(bad)
    assert isinstance(info.value.offset, int)


def test_bad_trace_leaves_no_json(run_cli, tmp_path, native_trace, examples):
    bad = _corrupt(native_trace, tmp_path, "bit-flipped")
    result = tmp_path / "r.json"
    assert_one_line_error(run_cli("simulate", examples / "crossval" / "one-level.toml", "--trace", bad, "--json", result))
    assert not result.exists()


def test_bad_text_traces(run_cli, tmp_path, examples):
    din = tmp_path / "bad.din"
    din.write_text("0 1000\n1 2000\n7 zzzz\n")
    line = assert_one_line_error(run_cli("simulate", examples / "crossval" / "one-level.toml", "--trace", din, "--format", "din"))
    assert "line 3" in line
    out = tmp_path / "x.cctrace"
    line = assert_one_line_error(run_cli("trace", "convert", "--from", "din", din, out))
    assert "line 3" in line
    assert not out.exists(), "a failed conversion leaves no output"


@pytest.mark.parametrize(
    "args, expected",
    [
        (["simulate", "missing.toml"], ["missing.toml", "No such file"]),
        (["simulate", "{one}", "--trace", "missing.cctrace"], ["missing.cctrace", "No such file"]),
        (["trace", "info", "missing.cctrace"], ["missing.cctrace", "No such file"]),
        (["trace", "convert", "--from", "lackey", "missing.txt", "out.cctrace"], ["missing.txt", "No such file"]),
        (["simulate", "{one}", "--trace", "x", "--format", "pin"], ["--format", "invalid choice: 'pin'"]),
        (["trace", "convert", "--from", "pin", "a", "b"], ["--from", "invalid choice: 'pin'"]),
        (["simulate", "{one}", "--seed", "many"], ["--seed", "invalid int value"]),
        (["frobnicate"], ["invalid choice: 'frobnicate'"]),
        (["trace", "capture", "-o", "x.cctrace"], ["give the program to trace after '--'"]),
        # Regressions: the Rust reader's OSError has no filename ("None: cannot open ...").
        (["profile", "missing.cctrace", "--config", "{one}"], ["cannot open missing.cctrace", "No such file"]),
        (["sdp", "missing.cctrace", "--cache-size", "64KiB", "--ways", "4"], ["cannot open missing.cctrace"]),
        # Regression: a --plot format matplotlib cannot write was a traceback and exit 1 after
        # the whole computation.
        (["mrc", "--workload", "{one}", "--plot", "curve.xyz"], ["--plot curve.xyz", "unknown figure format .xyz", ".png"]),
        # Regressions: a negative count or a NaN rate reached the Rust side as JSON and came
        # back as serde's "invalid value: integer `-64`, expected u64 at line 1 column 18".
        (["mrc", "--workload", "{one}", "--line-size", "-64"], ["--line-size", "'-64'", "whole number"]),
        (["mrc", "--workload", "{one}", "--shards", "nan"], ["--shards", "'nan'", "finite"]),
        # Regressions: the bench's field named twice ("trials: trials: ..."), the probe blaming a
        # valid --reps for a bad --duration-ms, and an empty --sysfs directory exiting 1.
        (["bench", "--level", "L1", "--trials", "0"], ["error: trials: must be at least 1"]),
        (["probe", "--duration-ms", "0"], ["error: duration_ms: a positive number"]),
        (["machine", "--detect", "--sysfs", "."], ["--sysfs .", "no cpuN directories"]),
    ],
    ids=["missing-config", "missing-trace", "info-missing", "convert-missing", "unknown-format", "unknown-from", "bad-seed",
         "unknown-command", "capture-no-program", "profile-missing", "sdp-missing", "plot-format", "negative-count", "nan-rate",
         "bench-field-once", "probe-duration", "sysfs-empty"],
)
def test_bad_command_lines(run_cli, examples, args, expected):
    args = [str(examples / "crossval" / "one-level.toml") if a == "{one}" else a for a in args]
    line = assert_one_line_error(run_cli(*args))
    for s in expected:
        assert s in line, (s, line)


def test_sdp_pagemap_that_is_not_vpn_pfn_numbers_is_bad_input(run_cli, tmp_path, native_trace):
    """Regression: a page map CSV with text in it was a ValueError traceback and exit 1."""
    for name, text in (("text.csv", "vpn,pfn\nx,y\n"), ("columns.csv", "a,b\n1,2\n"), ("negative.csv", "vpn,pfn\n1,-2\n")):
        (tmp_path / name).write_text(text)
        line = assert_one_line_error(run_cli("sdp", native_trace, "--cache-size", "64KiB", "--ways", "4", "--pagemap", tmp_path / name))
        assert f"--pagemap {tmp_path / name}" in line and "vpn,pfn" in line, line


def test_missing_program_is_a_capture_failure(run_cli, tmp_path):
    line = assert_one_line_error(run_cli("trace", "-o", tmp_path / "x.cctrace", "--", "/no/such/program"), code=1)
    assert "/no/such/program" in line


def test_inputs_of_one_file_name_are_refused_before_any_run(run_cli, tmp_path):
    """Regression: `report`, `offload` and `oscache report` name a config's (machine's,
    workload's) rows, sections and files by its file name; a second input of the same name from
    another directory silently replaced the first (offload, oscache: one result of two) or was
    merged with it (report). A directory holding no machine file ran the built-in baseline alone."""
    import shutil

    ex = Path(__file__).resolve().parent.parent / "examples"
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        for f in ("robustness/fits-half.toml", "oscache/offload-compute.toml", "oscache/baseline.toml", "oscache/workloads/jvm.toml"):
            shutil.copy(ex / f, tmp_path / d)
    a, b = tmp_path / "a", tmp_path / "b"
    cases = [
        (["report", a / "fits-half.toml", b, "--out", tmp_path / "r"], "'fits-half'"),
        (["offload", a / "offload-compute.toml", b / "offload-compute.toml", "--out", tmp_path / "o"], "'offload-compute'"),
        (["oscache", "report", a / "baseline.toml", b / "baseline.toml", "-o", tmp_path / "s"], "'baseline'"),
        (["oscache", "report", ex / "oscache" / "baseline.toml", "--workload", a / "jvm.toml", "--workload", b / "jvm.toml",
          "-o", tmp_path / "s"], "'jvm'"),
    ]
    for args, name in cases:
        line = assert_one_line_error(run_cli(*args))
        assert f"have the same name {name}" in line, line
    for out in ("r", "o", "s"):
        assert not (tmp_path / out).exists(), "nothing ran, nothing was written"
    (tmp_path / "none").mkdir()
    shutil.copy(ex / "oscache" / "offload-compute.toml", tmp_path / "none")
    line = assert_one_line_error(run_cli("oscache", "report", tmp_path / "none", "-o", tmp_path / "s"))
    assert "no machine file" in line, line
