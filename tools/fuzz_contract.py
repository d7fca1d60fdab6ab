#!/usr/bin/env python3
"""The contract fuzz (docs/reliability.md): mutated inputs through every reader, config, output
and signal path of the installed ``cachecolor``, each case's outcome checked against the error,
output and interrupt contracts.

Case families (deterministic for a given ``--seed``):

- ``reader``: a trace (din, lackey, ChampSim, native, gzip/xz-compressed din) with bytes
  flipped, cut, inserted or duplicated, read by ``trace info`` with and without ``--format``;
- ``config``: a cache-only or system config (TOML or JSON) with a value replaced by a hostile
  one (wrong types, huge or negative numbers, 5,000-digit integers, huge sizes, tables as
  arrays), a key dropped or added, or bytes flipped, run by ``simulate``;
- ``output``: ``simulate --json``, ``trace convert`` to a directory, a device, a full device, a
  FIFO, a missing directory, a path under a file, a symlink, the input itself, ``-``;
- ``signal``: SIGINT or SIGTERM at a random moment to a conversion, a cache-only and a
  whole-system run, a QEMU capture of a program with children, and a workload capture child;
- ``api``: the same mutated configs and traces through the Python API in one process per
  chunk (``load_config``, ``simulate``, ``simulate_system``, ``trace_info``, ``read_trace``).

Every case must end in: success; or one line ``cachecolor: error: ...`` with exit 2 (bad input)
or 1 (the machine's fault, naming the path); or 130/143 after a signal, with ``interrupted`` /
``terminated``. Counted as defects: a panic, an abort (death by a signal not sent), a
traceback, a raw exception name, a hang (no exit within the case's bound), an orphan (a process
carrying the case's marker alive after the case), a leftover (a temporary file beside an output,
a ``/tmp/cachecolor-capture.*`` directory the case created), a destroyed input.

    nice python tools/fuzz_contract.py --cases 2000 --seed 1 --out out/fuzz
    python tools/fuzz_contract.py --cases 400 --families signal --seed 2 --out out/fuzz-sig

Writes ``OUT/summary.json`` (totals per family and outcome) and ``OUT/defects.jsonl``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

BIN = Path(sys.executable).parent
CLI = [str(BIN / "cachecolor")] if (BIN / "cachecolor").exists() else [sys.executable, "-m", "cachecolor"]
ENV = dict(os.environ, CACHECOLOR_MEMORY_LIMIT="2GiB")
ENV.pop("CACHECOLOR_DEBUG", None)
CASE_SECONDS = 120  # a case that has not exited by then is a hang

# The tests' one-core machine (tests/conftest.py), with 64 MiB of RAM.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from conftest import ONE_CORE_MACHINE  # noqa: E402

MACHINE = ONE_CORE_MACHINE + """[memory]
ram = "64MiB"
"""
SYSTEM = MACHINE + """[scheduler]
tick = 100000
[[processes]]
name = "a"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "64KiB", references = 2000 }] }
[[processes]]
name = "b"
[[processes.threads]]
trace = "TRACE"
"""
CACHE = """[hierarchy]
cores = 1
[[hierarchy.levels]]
name = "L1"
size = "32KiB"
ways = 8
[[hierarchy.levels]]
name = "L2"
size = "256KiB"
ways = 16
[workload]
seed = 3
[[workload.phases]]
pattern = "uniform"
footprint = "128KiB"
references = 3000
"""
HOSTILE = ["-1", "0", "1.5", "true", '"x"', "[]", "{}", "[[1, 2]]", str(2**64), str(2**63), "9" * 5000,
           '"1TiB"', '"0KiB"', '"64GiB"', '"-4KiB"', '"1e3"', '"' + "A" * 5000 + '"', "nan", "inf", '"\\u001b[2J"',
           "[1.5]", "{ a = 1 }", "4096", "65", "64", "1000000000000"]


def write_base_traces(d: Path) -> dict[str, Path]:
    """One small trace of each format (and compressed din), from the installed package."""
    import numpy as np

    import cachecolor

    rng = np.random.default_rng(5)
    n = 3000
    addrs = rng.integers(0, 1 << 20, size=n, dtype=np.uint64) & ~np.uint64(7)
    out: dict[str, Path] = {}
    din = "".join(f"{k} {a:x}\n" for k, a in zip(rng.choice([0, 1, 2], size=n), addrs))
    (d / "t.din").write_text(din)
    out["din"] = d / "t.din"
    lackey = "".join((f"I  {a:08x},4\n" if i % 3 == 0 else f" L {a:08x},8\n") for i, a in enumerate(addrs))
    (d / "t.lackey").write_text(lackey)
    out["lackey"] = d / "t.lackey"
    cachecolor.write_trace(d / "t.cctrace", {"addr": addrs, "kind": rng.integers(0, 3, size=n, dtype=np.uint8)})
    out["native"] = d / "t.cctrace"
    # ChampSim: 64-byte records (ip, branch flags, registers, 2 destination and 4 source memory
    # addresses); a converted trace is the surest valid one.
    subprocess.run([*CLI, "trace", "convert", str(d / "t.din"), str(d / "t.champsim"), "--to", "champsim", "-q"],
                   capture_output=True, env=ENV, timeout=CASE_SECONDS)
    if (d / "t.champsim").exists():
        out["champsim"] = d / "t.champsim"
    (d / "t.din.gz").write_bytes(gzip.compress(din.encode()))
    out["gz"] = d / "t.din.gz"
    (d / "t.din.xz").write_bytes(lzma.compress(din.encode()))
    out["xz"] = d / "t.din.xz"
    return out


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice(["flip", "cut", "insert", "dup", "zero", "empty", "ctrl"])
        if op == "flip" and b:
            for _ in range(rng.randint(1, 16)):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
        elif op == "cut" and b:
            b = b[: rng.randrange(len(b))]
        elif op == "insert":
            i = rng.randint(0, len(b))
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
        elif op == "dup" and b:
            i = rng.randrange(len(b))
            j = min(len(b), i + rng.randint(1, 512))
            b[j:j] = b[i:j] * rng.randint(1, 4)
        elif op == "zero" and b:
            i = rng.randrange(len(b))
            b[i:i + rng.randint(1, 256)] = bytes(min(256, len(b) - i))
        elif op == "empty" and rng.random() < 0.2:
            b = bytearray()
        elif op == "ctrl":
            i = rng.randint(0, len(b))
            b[i:i] = rng.choice([b"\x1b]0;x\x07", b"\r", b"\x00", b"\xff\xfe", "\u00e9".encode()])
    return bytes(b)


def mutate_toml(rng: random.Random, text: str) -> str:
    lines = text.splitlines()
    op = rng.choice(["value", "value", "value", "drop", "add", "bytes", "dup"])
    idx = [i for i, line in enumerate(lines) if "=" in line and not line.startswith("[")]
    if op == "value" and idx:
        i = rng.choice(idx)
        key = lines[i].split("=", 1)[0]
        lines[i] = f"{key}= {rng.choice(HOSTILE)}"
    elif op == "drop" and idx:
        del lines[rng.choice(idx)]
    elif op == "add":
        tables = [i for i, line in enumerate(lines) if line.startswith("[")] or [0]
        lines.insert(rng.choice(tables) + 1, f"{rng.choice(['bogus', 'ways', 'size', 'cores', 'threads', 'ram'])} = {rng.choice(HOSTILE)}")
    elif op == "dup":
        tables = [i for i, line in enumerate(lines) if line.startswith("[")]
        if tables:
            i = rng.choice(tables)
            lines[i:i] = lines[i:i + 3]
    text = "\n".join(lines) + "\n"
    if op == "bytes":
        return mutate_bytes(rng, text.encode()).decode("utf-8", "surrogateescape")
    return text


def toml_to_json(text: str) -> Optional[str]:
    import tomllib

    try:
        return json.dumps(tomllib.loads(text))
    except Exception:  # noqa: BLE001 - a mutated config need not be TOML
        return None


class Case:
    def __init__(self, family: str, name: str, argv: list[str], cwd: Path, *, sig: Optional[int] = None,
                 delay: float = 0.0, marker: str = "", watch: Optional[list[Path]] = None,
                 inputs: Optional[dict[Path, bytes]] = None, allow_codes: tuple[int, ...] = (0, 1, 2),
                 child_cmd: bool = False, ready: str = ""):
        self.family, self.name, self.argv, self.cwd = family, name, argv, cwd
        self.sig, self.delay, self.marker = sig, delay, marker
        self.watch = watch or []
        self.inputs = inputs or {}
        self.allow_codes = allow_codes
        self.child_cmd = child_cmd
        self.ready = ready  # "cpu": past the imports, working; "marker": the traced program runs


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))


def _procs_with(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _capture_dirs(marker: str) -> set[Path]:
    """The ``/tmp/cachecolor-capture.*`` directories named on the command lines of the
    processes carrying ``marker`` (QEMU's ``-plugin DIR/...``)."""
    dirs = set()
    if not marker:
        return dirs
    for pid in _procs_with(marker):
        try:
            for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                for part in arg.decode(errors="replace").replace(",", "=").split("="):
                    if part.startswith("/tmp/cachecolor-capture."):
                        dirs.add(Path("/".join(part.split("/")[:3])))
        except OSError:
            pass
    return dirs


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _ready(pid: int, case: "Case") -> bool:
    if case.ready == "cpu":
        return _cpu_seconds(pid) >= 2.0  # the imports take about 0.7 s of CPU
    if case.ready == "marker":
        return len(_procs_with(case.marker)) >= 2  # cachecolor (or the capture child) and QEMU
    return True


def _temp_leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".") and (".tmp" in p.name or ".partial" in p.name))


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail): outcome ``ok`` or a defect kind."""
    ours: set[Path] = set()  # the case's own capture directories (others' captures may run)
    proc = subprocess.Popen(case.argv, cwd=case.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, preexec_fn=_sigint_default, errors="replace")
    hung = False
    try:
        if case.sig is not None:
            # Signal the work, not the interpreter's start-up (imports run before the CLI's
            # handlers: docs/reliability.md, known limits): wait until the run is under way.
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline and not _ready(proc.pid, case):
                time.sleep(0.05)
            try:
                proc.wait(timeout=case.delay)
            except subprocess.TimeoutExpired:
                ours.update(_capture_dirs(case.marker))
                proc.send_signal(case.sig)
        out, err = proc.communicate(timeout=CASE_SECONDS)
    except subprocess.TimeoutExpired:
        hung = True
        proc.kill()
        out, err = proc.communicate()
    rc = proc.returncode
    # Orphans and leftovers, after a grace period for SIGKILLed groups to be reaped.
    orphans: list[int] = []
    if case.marker:
        deadline = time.monotonic() + 10
        while (orphans := _procs_with(case.marker)) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    new_caps = [p for p in ours if p.exists()]
    for d in case.watch:
        if d.is_dir() and _temp_leftovers(d):
            return "leftover", f"{d}: {_temp_leftovers(d)}"
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode) or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        return "destroyed", "/dev/null or /dev/full is no longer a device"
    for p, data in case.inputs.items():
        if rc == 0 and case.sig is not None:
            break  # finished before the signal: its output was written as it should be
        if not p.exists() or p.read_bytes() != data:
            return "destroyed", str(p)
    lines = [line for line in err.splitlines() if line.strip()]
    if case.sig is not None and rc in (130, 143):
        word = "interrupted" if rc == 130 else "terminated"
        if not any(word in line for line in lines):
            return "contract", f"exit {rc} without '{word}': {err[-200:]}"
        if rc != (130 if case.sig == signal.SIGINT else 143):
            return "contract", f"exit {rc} for signal {case.sig}"
        return "ok", f"signal {rc}"
    if rc not in case.allow_codes:
        return "contract", f"exit {rc}: {err[-300:]}"
    if rc != 0:
        errors = [line for line in lines if line.startswith("cachecolor: error: ")]
        if len(errors) != 1 or (len(lines) != 1 and not case.child_cmd):
            return "contract", f"exit {rc}, stderr not one error line: {err[-300:]}"
        raw = errors[0].split("cachecolor: error: ", 1)[1].split(":", 1)[0]
        if "set CACHECOLOR_DEBUG=1" in errors[0] or (raw.endswith(("Error", "Exception")) and " " not in raw):
            return "raw-exception", errors[0]
        if "\x1b" in err:
            return "contract", "raw escape byte in stderr"
        return "ok", f"exit {rc}"
    return "ok", "exit 0"


# ---------------------------------------------------------------------------------------------
# case generators


def reader_cases(rng: random.Random, n: int, work: Path, traces: dict[str, Path]) -> list[Case]:
    cases = []
    fmts = {"din": "din", "lackey": "lackey", "native": "native", "champsim": "champsim", "gz": "din", "xz": "din"}
    for i in range(n):
        kind = rng.choice(sorted(traces))
        src = traces[kind]
        data = src.read_bytes()
        if kind in ("gz", "xz") and rng.random() < 0.5:
            # Mutate the text inside, then compress again: reaches the importer, not the codec.
            raw = gzip.decompress(data) if kind == "gz" else lzma.decompress(data)
            raw = mutate_bytes(rng, raw)
            data = gzip.compress(raw) if kind == "gz" else lzma.compress(raw)
        else:
            data = mutate_bytes(rng, data)
        p = work / f"r{i}{''.join(src.suffixes)}"
        p.write_bytes(data)
        argv = [*CLI, "trace", "info", str(p), "-q"]
        if rng.random() < 0.5:
            argv += ["--format", fmts[kind]]
        if rng.random() < 0.3:
            argv += ["--json"]
        cases.append(Case("reader", f"{kind} {' '.join(argv[len(CLI):])}", argv, work, inputs={p: data}))
    return cases


def config_cases(rng: random.Random, n: int, work: Path, traces: dict[str, Path]) -> list[Case]:
    cases = []
    for i in range(n):
        system = rng.random() < 0.5
        base = SYSTEM.replace("TRACE", str(traces["native"])) if system else CACHE
        text = mutate_toml(rng, base)
        as_json = rng.random() < 0.2 and (j := toml_to_json(text)) is not None
        p = work / f"c{i}.{'json' if as_json else 'toml'}"
        data = (j if as_json else text).encode("utf-8", "surrogateescape")
        p.write_bytes(data)
        argv = [*CLI, "simulate", str(p), "-q"]
        if rng.random() < 0.3:
            argv += ["--seed", rng.choice(["1", "0", "-1", str(2**64), "x"])]
        if rng.random() < 0.2:
            argv += ["--set", f"{rng.choice(['memory.ram', 'hierarchy.levels[0].ways', 'processes[0].threads', 'scheduler.tick', 'hierarchy.seed'])}={rng.choice(HOSTILE)}"]
        if rng.random() < 0.3:
            argv += ["--json", str(work / f"c{i}.out.json")]
        cases.append(Case("config", f"{'system' if system else 'cache'} {p.name}", argv, work, watch=[work],
                          inputs={p: data}))
    return cases


def output_cases(rng: random.Random, n: int, work: Path, traces: dict[str, Path]) -> list[Case]:
    cases = []
    cfg = work / "ok.toml"
    cfg.write_text(CACHE)
    for i in range(n):
        d = work / f"o{i}"
        d.mkdir()
        (d / "file").write_text("keep")
        os.symlink(d, d / "link-to-dir")
        os.symlink(d / "file", d / "link-to-file")
        fifo = d / "fifo"
        os.mkfifo(fifo)
        dests = ["-", "/dev/null", "/dev/full", str(d), str(d / "missing" / "x.json"), str(d / "file" / "x"),
                 str(d / "link-to-dir"), str(d / "link-to-file"), str(d / "new.json"), str(cfg), "", str(d / ".hidden")]
        dest = rng.choice(dests)
        if rng.random() < 0.5:
            argv = [*CLI, "simulate", str(cfg), "-q", "--json", dest]
        else:
            src = traces[rng.choice(["din", "native"])]
            dest = str(src) if rng.random() < 0.1 else dest
            argv = [*CLI, "trace", "convert", str(src), dest, "-q"]
        inputs = {cfg: cfg.read_bytes(), traces["din"]: traces["din"].read_bytes(), traces["native"]: traces["native"].read_bytes()}
        if dest != str(d / "link-to-file") and dest != str(d / "file"):
            inputs[d / "file"] = b"keep"
        cases.append(Case("output", f"{argv[len(CLI)]} -> {dest.replace(str(work), 'W')}", argv, work, watch=[work, d],
                          inputs=inputs))
    return cases


def signal_cases(rng: random.Random, n: int, work: Path, traces: dict[str, Path]) -> list[Case]:
    cases = []
    long_cache = work / "long.toml"
    long_cache.write_text(CACHE.replace("references = 3000", "references = 500000000"))
    long_sys = work / "long-sys.toml"
    long_sys.write_text(MACHINE.replace('ram = "64MiB"', 'ram = "256MiB"') + """[scheduler]
tick = 1000000000000
[[processes]]
name = "a"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "16MiB", references = 500000000 }] }
""")
    big_din = work / "big.din"
    with open(big_din, "w") as f:
        for k in range(60):
            f.write("".join(f"0 {a:x}\n" for a in range(k << 26, (k << 26) + 50_000 * 64, 64)))
    capture_parent = (
        "import signal, sys\nfrom pathlib import Path\nfrom cachecolor.cli import _on_sigterm\n"
        "from cachecolor.workloads import capture_clean\nsignal.signal(signal.SIGTERM, _on_sigterm)\n"
        "try:\n    capture_clean(['/bin/sh', '-c', sys.argv[3]], Path(sys.argv[1]), cwd=Path(sys.argv[2]))\n"
        "except KeyboardInterrupt as e:\n    term = type(e).__name__ == '_Terminated'\n"
        "    print('cachecolor: ' + ('terminated' if term else 'interrupted'), file=sys.stderr)\n"
        "    sys.exit(143 if term else 130)\n"
    )
    have_qemu = shutil.which("qemu-x86_64") is not None
    kinds = ["convert", "cache", "system"] + (["capture", "capture", "workload"] if have_qemu else [])
    for i in range(n):
        kind = rng.choice(kinds)
        sig = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0.0, 2.0)
        marker = f"{7000 + i}.{os.getpid()}"  # a sleep duration and yes argument no one else uses
        d = work / f"s{i}"
        d.mkdir()
        out = d / "out"
        out.write_bytes(b"old")
        inputs = {out: b"old"}
        child = False
        if kind == "convert":
            argv = [*CLI, "trace", "convert", "--from", "din", str(big_din), str(out), "-q"]
        elif kind == "cache":
            argv = [*CLI, "simulate", str(long_cache), "--json", str(out), "-q"]
        elif kind == "system":
            argv = [*CLI, "simulate", str(long_sys), "--json", str(out), "-q"]
        elif kind == "capture":
            prog = rng.choice([f"yes {marker} > /dev/null", f"sleep {marker}; true", f"(sleep {marker} &); sleep {marker}"])
            argv = [*CLI, "trace", "capture", "--backend", "qemu", "-o", str(out), "-q", "--", "sh", "-c", prog]
        else:
            prog = rng.choice([f"sleep {marker}; true", f"yes {marker} > /dev/null"])
            argv = [sys.executable, "-c", capture_parent, str(d / "w.cctrace"), str(d), prog]
            inputs = {}
            child = True
        allow = (0, 130, 143)
        cases.append(Case("signal", f"{kind} {signal.Signals(sig).name} {delay:.1f} s into the work", argv, work, sig=sig,
                          delay=delay, marker=marker if kind in ("capture", "workload") else "", watch=[d],
                          inputs=inputs, allow_codes=allow, child_cmd=child,
                          ready="marker" if kind in ("capture", "workload") else "cpu"))
    return cases


API_CHUNK = r"""
import json, sys, traceback
import cachecolor
from cachecolor.system import simulate_system, load_system_config
cases = json.load(open(sys.argv[1]))
ok = (cachecolor.ConfigError, cachecolor.TraceError)
out = []
for c in cases:
    try:
        if c["op"] == "load_config":
            cachecolor.load_config(c["path"])
        elif c["op"] == "simulate":
            r = cachecolor.simulate(c["path"])
        elif c["op"] == "simulate_system":
            r = simulate_system(c["path"])
            assert not r.to_dict()["invariants"], r.to_dict()["invariants"]
        elif c["op"] == "trace_info":
            cachecolor.trace_info(c["path"], c["format"])
        elif c["op"] == "read_trace":
            cachecolor.read_trace(c["path"], format=c["format"], limit=5000)
        elif c["op"] == "detect_format":
            cachecolor.detect_format(c["path"])
        out.append(["ok", ""])
    except ok as e:
        out.append(["ok", type(e).__name__])
    except OSError as e:
        named = bool(e.filename) or "/" in str(e)  # the Rust openers name the path in the message
        out.append(["ok" if named else "contract", "OSError" if named else f"OSError without a path: {e}"])
    except BaseException as e:
        kind = "panic" if "Panic" in type(e).__name__ else "raw-exception"
        out.append([kind, f"{type(e).__name__}: {str(e)[:200]}"])
json.dump(out, open(sys.argv[2], "w"))
"""


def api_cases(rng: random.Random, n: int, work: Path, traces: dict[str, Path]) -> list[dict[str, Any]]:
    cases = []
    fmts = {"din": "din", "lackey": "lackey", "native": "native", "champsim": "champsim", "gz": "din", "xz": "din"}
    for i in range(n):
        if rng.random() < 0.5:
            system = rng.random() < 0.5
            base = SYSTEM.replace("TRACE", str(traces["native"])) if system else CACHE
            p = work / f"a{i}.toml"
            p.write_bytes(mutate_toml(rng, base).encode("utf-8", "surrogateescape"))
            op = "simulate_system" if system else rng.choice(["load_config", "simulate"])
            cases.append({"op": op, "path": str(p), "format": ""})
        else:
            kind = rng.choice(sorted(traces))
            src = traces[kind]
            p = work / f"a{i}{''.join(src.suffixes)}"
            p.write_bytes(mutate_bytes(rng, src.read_bytes()))
            cases.append({"op": rng.choice(["trace_info", "read_trace", "detect_format"]), "path": str(p), "format": fmts[kind]})
    return cases


def run_api(cases: list[dict[str, Any]], work: Path, chunk: int = 100) -> list[tuple[str, str, str]]:
    """(outcome, detail, name) per case; a chunk that dies (abort) or hangs marks its cases."""
    results = []
    for k in range(0, len(cases), chunk):
        part = cases[k:k + chunk]
        inp, outp = work / f"api{k}.json", work / f"api{k}.out.json"
        inp.write_text(json.dumps(part))
        proc = subprocess.run([sys.executable, "-c", API_CHUNK, str(inp), str(outp)], capture_output=True, text=True,
                              env=ENV, timeout=CASE_SECONDS * 10, preexec_fn=_sigint_default)
        if proc.returncode != 0 or not outp.exists():
            kind = "abort" if proc.returncode < 0 or proc.returncode >= 128 else "traceback"
            results += [(kind, f"chunk exit {proc.returncode}: {proc.stderr[-300:]}", c["op"]) for c in part]
            continue
        for c, (o, detail) in zip(part, json.loads(outp.read_text())):
            results.append((o, detail, f"{c['op']} {Path(c['path']).name}"))
    return results


FAMILIES: dict[str, Callable[..., list[Case]]] = {
    "reader": reader_cases, "config": config_cases, "output": output_cases, "signal": signal_cases,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000, help="total cases (split over the families by --share)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="out/fuzz")
    ap.add_argument("--families", default="api,reader,config,output,signal")
    ap.add_argument("--share", default="api=0.88,reader=0.03,config=0.03,output=0.03,signal=0.03",
                    help="fraction of the cases per family")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    share = {k: float(v) for k, v in (x.split("=") for x in args.share.split(","))}
    families = args.families.split(",")
    total_share = sum(share[f] for f in families)
    rng = random.Random(args.seed)
    counts: Counter[tuple[str, str]] = Counter()
    defects = open(out / "defects.jsonl", "w")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ccfuzz.") as tmp:
        work = Path(tmp)
        traces = write_base_traces(work)
        for fam in families:
            n = round(args.cases * share[fam] / total_share)
            fam_dir = work / fam
            fam_dir.mkdir()
            if fam == "api":
                results = run_api(api_cases(rng, n, fam_dir, traces), fam_dir)
            else:
                results = []
                for case in FAMILIES[fam](rng, n, fam_dir, traces):
                    outcome, detail = run_case(case)
                    results.append((outcome, detail, case.name))
            for outcome, detail, name in results:
                counts[(fam, outcome)] += 1
                if outcome != "ok":
                    defects.write(json.dumps({"family": fam, "case": name, "outcome": outcome, "detail": detail}) + "\n")
                    defects.flush()
            print(f"{fam}: {n} cases, {dict((o, c) for (f, o), c in counts.items() if f == fam)} "
                  f"({time.monotonic() - t0:.0f} s)", flush=True)
            # After every family, so that a run cut short still says what it covered.
            summary = {
                "seed": args.seed, "cases": sum(counts.values()), "seconds": round(time.monotonic() - t0),
                "by_family": {f: {o: c for (g, o), c in counts.items() if g == f} for f in families},
                "defects": sum(c for (f, o), c in counts.items() if o != "ok"),
            }
            (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return 0 if summary["defects"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
