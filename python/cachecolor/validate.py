"""``cachecolor validate``: the timing model's error against this host, measured.

For each program of a set (the kernels of ``examples/validation/programs/kernels.c`` on
generated inputs, Cachetest's pointer chase among them at working sets inside each level):

1. run it natively ``runs`` times under ``nice``: on-CPU time (user + system, ``wait4``'s
   rusage, so time slices taken by other tasks on a shared machine are not counted), its mean
   and 95% confidence interval (Student t);
2. capture the same run (``cachecolor trace``: QEMU user mode, data references, no fetches);
3. simulate the capture alone on core 0 of the calibrated machine (``cachecolor calibrate``),
   policy ``linux``, 4 KiB pages: predicted time = cycles / the clock;
4. report predicted against measured: per-program error, mean absolute error, worst case, rank
   correlation (Spearman).

The model's two free parameters (``timing.base_cpi``, ``timing.mlp``) are chosen on half the
programs (the training half: every other program of the list) by the least mean absolute error
over a grid, and the error is reported on the other half (held out); no parameter is chosen per
program. Relative effects are measured natively and predicted: a cache-sensitive program's
slowdown beside a stream on another core, huge pages against 4 KiB pages, and same-color
against spread pages only where ``cachecolor probe`` finds page color effective on this host.

A program that fails natively or in capture is reported and skipped. The host has no PMU when
every hardware perf event fails: then time only is compared, and the result says so.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from . import _core
from ._compat import tomllib
from .calibrate import calibrated_host, host_cpu, loadavg

PROGRAM_SOURCE = "validation/programs/kernels.c"
MIB = 1 << 20


@dataclass(frozen=True)
class Program:
    """One validation program: ``kernels KERNEL BYTES STEPS PAGES``."""

    name: str
    kernel: str
    bytes: int
    steps: int
    pages: str = "4k"
    note: str = ""

    def argv(self, binary: str) -> list[str]:
        return [binary, self.kernel, str(self.bytes), str(self.steps), self.pages]


def _chase(ws: int, steps: int) -> Program:
    label = f"{ws >> 20}m" if ws >= MIB else f"{ws >> 10}k"
    return Program(f"chase-{label}", "chase", ws, steps, note="Cachetest's uniform pointer chase")


#: The default set. Training = even positions, held out = odd: the order puts half the chases
#: and half the other kernels in each.
PROGRAMS: tuple[Program, ...] = (
    _chase(16 << 10, 20_000_000),
    _chase(256 << 10, 10_000_000),
    Program("lookup-1m", "lookup", 1 * MIB, 10_000_000, note="independent random reads, L2-sized table"),
    Program("stream-8m", "stream", 8 * MIB, 8, note="sequential sum of doubles"),
    _chase(1 * MIB, 6_000_000),
    _chase(4 * MIB, 4_000_000),
    Program("matmul", "matmul", 300_000, 3, note="i-k-j matrix product, n = 104"),
    Program("lookup-32m", "lookup", 32 * MIB, 2_000_000, note="independent random reads, 32 MiB table"),
    _chase(16 * MIB, 2_000_000),
    _chase(64 * MIB, 2_000_000),
    Program("lines-64m", "lines", 64 * MIB, 6, note="one load per 64 B line, in order"),
    Program("copy-8m", "copy", 8 * MIB, 8, note="b[i] = a[i] + 1"),
    Program("transpose", "transpose", 2 * MIB, 6, note="naive transpose, 512 x 512 floats"),
    Program("sort", "sort", 512 << 10, 1, note="qsort of 128 Ki random keys"),
    Program("bsearch", "bsearch", 16 * MIB, 300_000, note="binary searches in 4 Mi sorted keys"),
    Program("sieve", "sieve", 4 * MIB, 1, note="Eratosthenes over 4 Mi flags"),
    Program("compute", "compute", 0, 40_000_000, note="integer hash loop, no memory traffic"),
)

#: A tiny set for tests of the plumbing.
TINY: tuple[Program, ...] = (
    _chase(16 << 10, 200_000),
    Program("lookup-256k", "lookup", 256 << 10, 100_000),
    Program("compute", "compute", 0, 200_000),
    Program("stream-1m", "stream", MIB, 1),
)

#: The chase programs, whose per-step time draws the latency curve.
GRID_CPI = [round(0.10 + 0.05 * i, 2) for i in range(39)]  # 0.10 .. 2.00
GRID_MLP = [round(1.0 + 0.5 * i, 2) for i in range(31)]  # 1 .. 16 (16 L1D fill buffers on recent x86 cores)
GRID_WALK = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0]


def program_source() -> Path:
    from .data import examples_dir

    return Path(examples_dir()) / PROGRAM_SOURCE


def build_programs(work: Path) -> Path:
    """Compile kernels.c into ``work`` (cached by the source's hash); the binary's path."""
    src = program_source()
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    out = work / f"kernels-{digest}"
    if not out.exists():
        cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if cc is None:
            raise _core.CachecolorError("validate needs a C compiler (cc, gcc or clang) to build its programs")
        work.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        r = subprocess.run([cc, "-O2", "-o", str(tmp), str(src)], capture_output=True, text=True)
        if r.returncode != 0:
            raise _core.CachecolorError(f"cc {src} failed: {r.stderr.strip()[:400]}")
        tmp.replace(out)
    return out


def t95(n: int) -> float:
    """Student t quantile 0.975 with n-1 degrees of freedom (n >= 2)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
             10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}
    df = n - 1
    if df in table:
        return table[df]
    return table[max(k for k in table if k <= df)] if df < 30 else 1.96


def mean_ci(xs: Sequence[float]) -> tuple[float, Optional[float]]:
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t95(n) * sd / math.sqrt(n)


def run_native(argv: list[str], runs: int, core: Optional[int] = None) -> dict[str, Any]:
    """``runs`` runs under ``nice``, each timed by its own rusage (user + system seconds)."""
    times, walls = [], []
    for _ in range(runs):
        def pre() -> None:
            os.nice(5)
            if core is not None:
                os.sched_setaffinity(0, {core})

        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        walls.append(time.monotonic() - t0)
        if p.returncode != 0:
            err = p.stderr.read().decode(errors="replace").strip() if p.stderr else ""
            raise _core.CachecolorError(f"exit code {p.returncode}" + (f": {err[:200]}" if err else ""))
        if p.stderr:
            p.stderr.close()
        times.append(ru.ru_utime + ru.ru_stime)
    m, ci = mean_ci(times)
    return {"seconds": m, "ci95": ci, "runs": times, "wall": walls}


def capture_program(argv: list[str], work: Path, name: str) -> tuple[Path, dict[str, Any]]:
    """The program's capture in ``work`` (re-used when the same binary and arguments made it)."""
    from .traces import capture

    key = hashlib.sha256(json.dumps([Path(argv[0]).name, *argv[1:]]).encode()).hexdigest()[:12]
    trace = work / f"{name}-{key}.cctrace"
    meta = trace.with_suffix(".json")
    if trace.exists() and meta.exists():
        return trace, json.loads(meta.read_text())
    # The program's own output is not ours to print (it would interleave with the table).
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        summary = capture(argv, trace, "auto", ifetch=False, pcs=False)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
    meta.write_text(json.dumps(summary))
    return trace, summary


def system_config(machine: dict[str, Any], procs: list[tuple[str, Path, int]], huge: bool = False) -> dict[str, Any]:
    """Each ``(name, trace, core)`` alone on its core of the calibrated machine, policy linux,
    4 KiB pages (``huge``: every address in 2 MiB pages)."""
    processes = []
    for name, trace, core in procs:
        p: dict[str, Any] = {"name": name, "pin": [core], "threads": [{"trace": str(trace), "format": "native"}]}
        if huge:
            p["huge_pages"] = [[0, 1 << 47]]
        processes.append(p)
    return {"machine": copy.deepcopy(machine), "memory": {"ram": "4GiB"}, "policy": {"name": "linux"},
            "processes": processes}


def simulate(machine: dict[str, Any], procs: list[tuple[str, Path, int]], huge: bool = False) -> dict[str, dict[str, Any]]:
    """Per process: cycles, instructions and the stall breakdown from the whole-system model."""
    from .system import simulate_system

    res = simulate_system(system_config(machine, procs, huge))
    out = {}
    for name, _, _ in procs:
        p = res.process(name)
        out[name] = {"cycles": float(p["cycles"]), "instructions": int(p["instructions"]),
                     "stalls": {k: float(v) for k, v in (p.get("stalls") or {}).items()}}
    return out


def predicted_cycles(sim: dict[str, Any], base_cpi: float, mlp: float, sim_cpi: float, sim_mlp: float,
                     walk_factor: Optional[float] = None, sim_walk: float = 1.0) -> float:
    """The cycles the model would charge with ``base_cpi``, ``mlp`` and ``walk_factor`` instead of
    the ones it ran with: completion scales with the CPI, the overlapped stalls (levels below L1,
    DRAM, the queue) with 1 / mlp, the walks' reads with the walk factor; kernel work is fixed
    (``timing/mod.rs``)."""
    st = sim["stalls"]
    overlapped = sum(st.get(k, 0.0) for k in ("l2", "llc", "dram", "remote", "bandwidth"))
    walks = st.get("tlb", 0.0)
    kernel = st.get("kernel", 0.0)
    completion = sim["cycles"] - overlapped - walks - kernel
    wf = sim_walk if walk_factor is None else walk_factor
    return completion * base_cpi / sim_cpi + overlapped * sim_mlp / mlp + walks * wf / sim_walk + kernel


def spearman(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Spearman's rank correlation (average ranks for ties); None below 3 points."""
    if len(a) < 3:
        return None

    def ranks(xs: Sequence[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        r = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return None if va == 0 or vb == 0 else cov / (va * vb)


def errors(rows: list[dict[str, Any]], key: str = "predicted_s") -> dict[str, Any]:
    """MAE, worst case and rank correlation of ``key`` against the measured seconds."""
    ok = [r for r in rows if r.get(key) is not None]
    if not ok:
        return {"programs": 0, "mae": None, "worst": None, "worst_program": None, "spearman": None}
    errs = [(r[key] - r["measured_s"]) / r["measured_s"] for r in ok]
    worst = max(range(len(ok)), key=lambda i: abs(errs[i]))
    return {"programs": len(ok), "mae": sum(abs(e) for e in errs) / len(errs), "worst": errs[worst],
            "worst_program": ok[worst]["name"], "spearman": spearman([r[key] for r in ok], [r["measured_s"] for r in ok])}


def choose_parameters(train: list[dict[str, Any]], sim_cpi: float, sim_mlp: float, ghz: float,
                      sim_walk: float = 1.0) -> dict[str, Any]:
    """The (base_cpi, mlp, walk_factor) of the grid with the least mean absolute error on ``train``."""
    best = None
    for cpi in GRID_CPI:
        for mlp in GRID_MLP:
            for wf in GRID_WALK:
                e = 0.0
                for r in train:
                    pred = predicted_cycles(r["sim"], cpi, mlp, sim_cpi, sim_mlp, wf, sim_walk) / (ghz * 1e9)
                    e += abs(pred - r["measured_s"]) / r["measured_s"]
                e /= len(train)
                if best is None or e < best[0] - 1e-12:
                    best = (e, cpi, mlp, wf)
    assert best is not None
    return {"base_cpi": best[1], "mlp": best[2], "walk_factor": best[3], "train_mae_estimate": best[0]}


def load_machine(path: str) -> tuple[dict[str, Any], str]:
    """The ``[machine]`` table of a calibrated config and the file's text."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise _core.ConfigError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _core.ConfigError(f"{path}: {e}") from None
    m = doc.get("machine")
    if not isinstance(m, dict):
        raise _core.ConfigError(f"{path}: no [machine] table (write one with `cachecolor calibrate -o {path}`)")
    if doc.get("processes"):
        raise _core.ConfigError(f"{path}: has [[processes]]; give a machine config (what `cachecolor calibrate` writes)")
    if "preset" in m:
        from .presets import machine as preset

        over = {k: v for k, v in m.items() if k != "preset"}
        from .presets import _merged

        m = _merged(preset(str(m["preset"])), over)
    ghz = (m.get("memory") or {}).get("core_ghz")
    if not isinstance(ghz, (int, float)) or ghz <= 0:
        raise _core.ConfigError(f"{path}: [machine.memory] core_ghz is needed to turn cycles into seconds (a calibrated config has it)")
    return m, text


def host_warning(text: str, path: str) -> Optional[str]:
    """A warning when the config was calibrated on another CPU, or not calibrated at all."""
    cal = calibrated_host(text)
    here = host_cpu()
    if cal is None:
        return f"{path} was not written by `cachecolor calibrate`: its timing was not measured on this host ({here})"
    if cal != here:
        return f"{path} was calibrated on another CPU ({cal}); this host is {here}: its latencies are not this host's"
    return None


def _pmu_line() -> str:
    from .bench import environment

    try:
        env = environment()
    except Exception as e:  # noqa: BLE001 -- the line is informative only
        return f"PMU: not probed ({e})"
    hw = [e["name"] for e in env.get("pmu", []) if e.get("status") == "ok" and e["name"] not in ("task-clock", "page-faults")]
    if hw:
        return "PMU: hardware events available (" + ", ".join(hw) + "); this comparison still uses time only"
    return "PMU: none (every hardware perf event fails to open): time only is compared"


def validate(
    machine_path: str,
    *,
    programs: Sequence[Program] = PROGRAMS,
    runs: int = 5,
    work: Path = Path("out/validate"),
    effects: bool = True,
    fit: bool = True,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Run, capture and simulate every program; the validation document (see the module doc)."""
    if runs < 1:
        raise _core.ConfigError(f"runs: {runs}: allowed at least 1")
    machine, text = load_machine(machine_path)
    warning = host_warning(text, machine_path)
    if warning:
        log(f"warning: {warning}")
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    binary = str(build_programs(work))
    ghz = float(machine["memory"]["core_ghz"])
    timing = machine.get("timing") or {}
    sim_cpi, sim_mlp = float(timing.get("base_cpi", 1.0)), float(timing.get("mlp", 1.0))
    sim_walk = float(timing.get("walk_factor", 1.0))
    doc: dict[str, Any] = {
        "version": 1, "machine_config": machine_path, "host_cpu": host_cpu(), "calibrated_on": calibrated_host(text),
        "warning": warning, "pmu": _pmu_line(), "ghz": ghz, "runs": runs,
        "loadavg_before": loadavg(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "model": {"base_cpi": sim_cpi, "mlp": sim_mlp, "walk_factor": sim_walk}, "programs": [], "skipped": [],
    }
    log(doc["pmu"])
    rows = []
    for i, prog in enumerate(programs):
        argv = prog.argv(binary)
        t0 = time.monotonic()
        try:
            native = run_native(argv, runs)
        except (OSError, _core.CachecolorError) as e:
            doc["skipped"].append({"name": prog.name, "stage": "native", "reason": str(e)})
            log(f"{prog.name:12} SKIPPED (native run failed: {e})")
            continue
        try:
            trace, summary = capture_program(argv, work, prog.name)
        except Exception as e:  # noqa: BLE001 -- one program's failed capture must not stop the set
            doc["skipped"].append({"name": prog.name, "stage": "capture", "reason": str(e)})
            log(f"{prog.name:12} SKIPPED (capture failed: {e})")
            continue
        sim = simulate(machine, [(prog.name, trace, 0)])[prog.name]
        row = {"name": prog.name, "kernel": prog.kernel, "bytes": prog.bytes, "steps": prog.steps, "note": prog.note,
               "argv": argv[1:], "measured_s": native["seconds"], "ci95_s": native["ci95"], "native_runs": native["runs"],
               "records": summary.get("records"), "sim": sim, "predicted_s": sim["cycles"] / (ghz * 1e9),
               "half": "train" if i % 2 == 0 else "held-out"}
        row["error"] = (row["predicted_s"] - row["measured_s"]) / row["measured_s"]
        rows.append(row)
        log(f"{prog.name:12} measured {row['measured_s'] * 1e3:9.2f} ms ± {(row['ci95_s'] or 0) * 1e3:.2f}  "
            f"predicted {row['predicted_s'] * 1e3:9.2f} ms  error {100 * row['error']:+6.1f}%  "
            f"({row['records'] or 0:,} records, {time.monotonic() - t0:.0f} s)")
    doc["programs"] = rows
    doc["errors"] = errors(rows)
    if fit and rows:
        train = [r for r in rows if r["half"] == "train"]
        held = [r for r in rows if r["half"] == "held-out"]
        chosen = choose_parameters(train or rows, sim_cpi, sim_mlp, ghz, sim_walk)
        tuned = copy.deepcopy(machine)
        tuned.setdefault("timing", {}).update(base_cpi=chosen["base_cpi"], mlp=chosen["mlp"], walk_factor=chosen["walk_factor"])
        log(f"parameters chosen on the {len(train)} training programs: base_cpi {chosen['base_cpi']}, mlp {chosen['mlp']}, "
            f"walk_factor {chosen['walk_factor']}")
        for r in rows:  # re-simulated with the chosen parameters (not the linear estimate)
            s = simulate(tuned, [(r["name"], Path(capture_program(r["argv"] and [binary, *r["argv"]], work, r["name"])[0]), 0)])[r["name"]]
            r["predicted_tuned_s"] = s["cycles"] / (ghz * 1e9)
            r["error_tuned"] = (r["predicted_tuned_s"] - r["measured_s"]) / r["measured_s"]
        doc["fit"] = {**chosen, "train": errors(train, "predicted_tuned_s"), "held_out": errors(held, "predicted_tuned_s"),
                      "all": errors(rows, "predicted_tuned_s")}
        doc["tuned_machine"] = tuned
        machine_for_effects = tuned
    else:
        machine_for_effects = machine
    if effects:
        doc["effects"] = relative_effects(machine_for_effects, binary, work, runs, ghz, log)
    doc["loadavg_after"] = loadavg()
    doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return doc


def _with_background(argv: list[str], background: list[str], runs: int, core: int, other: int) -> dict[str, Any]:
    """``argv`` timed on ``core`` while ``background`` loops on ``other``."""
    def pre() -> None:
        os.nice(5)
        os.sched_setaffinity(0, {other})

    loop = ["/bin/sh", "-c", 'while :; do "$@" >/dev/null; done', "sh", *background]
    bg = subprocess.Popen(loop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pre, start_new_session=True)
    try:
        time.sleep(0.2)
        return run_native(argv, runs, core=core)
    finally:
        os.killpg(bg.pid, 9)
        bg.wait()


def relative_effects(machine: dict[str, Any], binary: str, work: Path, runs: int, ghz: float,
                     log: Callable[[str], None]) -> dict[str, Any]:
    """Native and predicted relative effects: co-run slowdown, huge pages, page color."""
    out: dict[str, Any] = {}
    cpus = sorted(os.sched_getaffinity(0))

    def sec(cycles: float) -> float:
        return cycles / (ghz * 1e9)

    # 1. A cache-sensitive program (a chase inside the L2/L3 boundary) beside a stream.
    sens = Program("sensitive", "chase", 4 * MIB, 2_000_000)
    stream = Program("stream", "lines", 64 * MIB, 12)
    if len(cpus) >= 2:
        try:
            alone = run_native(sens.argv(binary), runs, core=cpus[0])
            beside = _with_background(sens.argv(binary), stream.argv(binary), runs, cpus[0], cpus[1])
            ts, _ = capture_program(sens.argv(binary), work, sens.name)
            tb, _ = capture_program(stream.argv(binary), work, stream.name)
            p_alone = simulate(machine, [("sensitive", ts, 0)])["sensitive"]
            p_beside = simulate(machine, [("sensitive", ts, 0), ("stream", tb, 1)])
            # The stream must cover the sensitive run for the prediction to be a co-run.
            covered = p_beside["stream"]["cycles"] >= p_beside["sensitive"]["cycles"]
            out["corun"] = {
                "program": sens.argv(binary)[1:], "background": stream.argv(binary)[1:],
                "measured_alone_s": alone["seconds"], "measured_alone_ci95": alone["ci95"],
                "measured_beside_s": beside["seconds"], "measured_beside_ci95": beside["ci95"],
                "measured_slowdown": beside["seconds"] / alone["seconds"] - 1,
                "predicted_alone_s": sec(p_alone["cycles"]), "predicted_beside_s": sec(p_beside["sensitive"]["cycles"]),
                "predicted_slowdown": p_beside["sensitive"]["cycles"] / p_alone["cycles"] - 1,
                "stream_covers_run": covered,
            }
            c = out["corun"]
            log(f"co-run: sensitive beside a stream: measured {100 * c['measured_slowdown']:+.1f}%, predicted {100 * c['predicted_slowdown']:+.1f}%")
        except (OSError, _core.CachecolorError) as e:
            out["corun"] = {"skipped": str(e)}
    else:
        out["corun"] = {"skipped": "one CPU available: no co-run"}
    # 2. Huge pages against 4 KiB pages: the same chase, both natively, one trace predicted both ways.
    small = Program("walks-4k", "chase", 64 * MIB, 2_000_000, "4k")
    huge = Program("walks-2m", "chase", 64 * MIB, 2_000_000, "huge")
    try:
        m4 = run_native(small.argv(binary), runs)
        m2 = run_native(huge.argv(binary), runs)
        tr, _ = capture_program(small.argv(binary), work, small.name)
        p4 = simulate(machine, [("walks", tr, 0)])["walks"]
        p2 = simulate(machine, [("walks", tr, 0)], huge=True)["walks"]
        out["huge_pages"] = {
            "program": small.argv(binary)[1:3],
            "measured_4k_s": m4["seconds"], "measured_4k_ci95": m4["ci95"], "measured_2m_s": m2["seconds"], "measured_2m_ci95": m2["ci95"],
            "measured_speedup": m4["seconds"] / m2["seconds"] - 1,
            "predicted_4k_s": sec(p4["cycles"]), "predicted_2m_s": sec(p2["cycles"]),
            "predicted_speedup": p4["cycles"] / p2["cycles"] - 1,
        }
        h = out["huge_pages"]
        log(f"huge pages: 4 KiB / 2 MiB - 1: measured {100 * h['measured_speedup']:+.1f}%, predicted {100 * h['predicted_speedup']:+.1f}%")
    except (OSError, _core.CachecolorError) as e:
        out["huge_pages"] = {"skipped": str(e)}
    # 3. Page color: only where the probe finds it effective here.
    try:
        from .bench import probe

        pr = probe()
    except Exception as e:  # noqa: BLE001 -- the probe may be impossible here (no THP, no memory)
        out["color"] = {"skipped": f"probe failed: {e}"}
        return out
    if pr.get("answer") != "yes":
        out["color"] = {"probe": pr.get("verdict"), "answer": pr.get("answer"),
                        "skipped": "page color has no measurable effect on this host (cachecolor probe): effect not compared"}
        log(f"page color: {out['color']['skipped']}")
        return out
    out["color"] = {"probe": pr.get("verdict"), "answer": "yes", "levels": []}
    for lv in pr.get("levels", []):
        for test, page in (("test_4k", 4096), ("test_2m", 2 << 20)):
            t = lv.get(test)
            if not t or "same" not in t or t.get("effect") is not True:
                continue
            pred = predicted_color_ratio(machine, lv, pr, page, work, ghz)
            med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
            row = {"level": lv["name"], "pages": "4 KiB" if page == 4096 else "2 MiB",
                   "measured_same_ns": med(t["same"]), "measured_spread_ns": med(t["spread"]),
                   "measured_ratio": t["ratio"], "measured_ci": t["ci"], **pred}
            out["color"]["levels"].append(row)
            log(f"page color, {row['level']} in {row['pages']} pages: same-color / spread measured {row['measured_ratio']:.2f} "
                f"(95% CI {row['measured_ci'][0]:.2f}-{row['measured_ci'][1]:.2f}), predicted {row['predicted_ratio']:.2f}")
    if not out["color"]["levels"]:
        out["color"]["skipped"] = "the probe's effective comparisons carry no per-arm times: not compared"
    return out


def predicted_color_ratio(machine: dict[str, Any], level: dict[str, Any], probe_doc: dict[str, Any], page: int,
                          work: Path, ghz: float, loops: int = 2000) -> dict[str, Any]:
    """The probe's same-color and spread arms (crates/bench/src/probe.rs: 4 x ways lines, one
    way size apart, in one set; spread: shifted by the lower level's way size, round-robin over
    the level's colors) as traces of a random cyclic chase, simulated in 2 MiB pages (virtual
    offsets inside a huge page are physical) on the machine; predicted ns per access and ratio."""
    import numpy as np

    from .traces import write_trace

    levels = probe_doc["levels"]
    i = next(k for k, lv in enumerate(levels) if lv["name"] == level["name"])
    w = level["size"] // level["ways"]
    lower_w = max(4096, (levels[i - 1]["size"] // levels[i - 1]["ways"]) if i > 0 else 4096)
    n = 4 * level["ways"]
    m = max(1, w // lower_w)
    base = 0x4000_0000
    rng = np.random.default_rng(1)
    order = rng.permutation(n)
    res = {}
    for arm, spread in (("same", False), ("spread", True)):
        addrs = np.array([base + k * w + 256 + ((k % m) * lower_w if spread else 0) for k in range(n)], dtype=np.uint64)
        seq = np.tile(addrs[order], loops)
        path = work / f"color-{level['name']}-{page}-{arm}.cctrace"
        write_trace(path, seq, icounts=np.full(len(seq), 3, dtype=np.uint32))
        cfg = system_config(machine, [(arm, path, 0)], huge=True)
        from .system import simulate_system

        p = simulate_system(cfg).process(arm)
        res[arm] = float(p["cycles"]) / len(seq) / ghz
    return {"predicted_same_ns": res["same"], "predicted_spread_ns": res["spread"], "predicted_ratio": res["same"] / res["spread"]}


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def summary_text(doc: dict[str, Any]) -> str:
    """The per-program table, the error figures and the relative effects, as printed."""
    from .results import text_table

    lines = [f"host: {doc['host_cpu']}; machine config {doc['machine_config']} (calibrated on {doc['calibrated_on'] or 'unknown'})",
             f"{doc['pmu']}",
             f"load average before {doc['loadavg_before']}, after {doc['loadavg_after']} (a shared machine: intervals are over {doc['runs']} runs)"]
    tuned = "fit" in doc
    header = ["program", "half", "measured ms", "95% CI", "predicted ms", "error"] + (["tuned ms", "tuned error"] if tuned else [])
    rows = []
    for r in doc["programs"]:
        row = [r["name"], r["half"], f"{r['measured_s'] * 1e3:.2f}", "-" if r["ci95_s"] is None else f"± {r['ci95_s'] * 1e3:.2f}",
               f"{r['predicted_s'] * 1e3:.2f}", _pct(r["error"])]
        if tuned:
            row += [f"{r['predicted_tuned_s'] * 1e3:.2f}", _pct(r["error_tuned"])]
        rows.append(row)
    lines += text_table(header, rows, left=2)
    e = doc["errors"]
    if e["programs"]:
        lines.append(f"as calibrated (base_cpi {doc['model']['base_cpi']}, mlp {doc['model']['mlp']}, walk_factor {doc['model'].get('walk_factor', 1.0)}): MAE {100 * e['mae']:.1f}%, "
                     f"worst {_pct(e['worst'])} ({e['worst_program']}), Spearman {e['spearman'] if e['spearman'] is None else round(e['spearman'], 3)}")
    if tuned:
        f = doc["fit"]
        for label, key in (("training half", "train"), ("held-out half", "held_out"), ("all", "all")):
            x = f[key]
            if x["programs"]:
                lines.append(f"base_cpi {f['base_cpi']}, mlp {f['mlp']}, walk_factor {f['walk_factor']} (chosen on the training half): {label} ({x['programs']} programs) "
                             f"MAE {100 * x['mae']:.1f}%, worst {_pct(x['worst'])} ({x['worst_program']}), Spearman "
                             f"{'-' if x['spearman'] is None else round(x['spearman'], 3)}")
    for s in doc["skipped"]:
        lines.append(f"skipped {s['name']}: {s['stage']} failed: {s['reason']}")
    eff = doc.get("effects") or {}
    c = eff.get("corun")
    if c:
        lines.append("co-run beside a stream: " + (f"skipped ({c['skipped']})" if "skipped" in c else
                     f"measured slowdown {_pct(c['measured_slowdown'])}, predicted {_pct(c['predicted_slowdown'])}"
                     + ("" if c["stream_covers_run"] else " (the simulated stream ended before the program)")))
    h = eff.get("huge_pages")
    if h:
        lines.append("huge pages (4 KiB time / 2 MiB time - 1): " + (f"skipped ({h['skipped']})" if "skipped" in h else
                     f"measured {_pct(h['measured_speedup'])}, predicted {_pct(h['predicted_speedup'])}"))
    col = eff.get("color")
    if col:
        for r in col.get("levels", []):
            lines.append(f"page color, {r['level']} in {r['pages']} pages (same-color / spread): measured {r['measured_ratio']:.2f} "
                         f"(95% CI {r['measured_ci'][0]:.2f}-{r['measured_ci'][1]:.2f}), predicted {r['predicted_ratio']:.2f}")
        if "skipped" in col:
            lines.append(f"page color: {col['skipped']}" + (f" (probe: {col['probe']})" if col.get("probe") else ""))
    return "\n".join(lines)


def tuned_toml(doc: dict[str, Any], text: str) -> str:
    """The calibrated config's text with the chosen ``base_cpi`` and ``mlp`` (and their source)."""
    import re

    f = doc["fit"]
    note = f"chosen by `cachecolor validate` on its training half (held-out MAE {100 * (f['held_out']['mae'] or 0):.1f}%)"
    out = []
    for line in text.splitlines():
        if re.match(r"^base_cpi\s*=", line):
            line = f"base_cpi = {f['base_cpi']}  # {note}"
        elif re.match(r"^mlp\s*=", line):
            line = f"mlp = {f['mlp']}  # {note}"
            if not re.search(r"^walk_factor\s*=", text, re.MULTILINE):
                line += f"\nwalk_factor = {f['walk_factor']}  # {note}"
        elif re.match(r"^walk_factor\s*=", line):
            line = f"walk_factor = {f['walk_factor']}  # {note}"
        out.append(line)
    return "\n".join(out) + "\n"


def plot(doc: dict[str, Any], out: str) -> None:
    """Left: predicted against measured time per program (log-log, the diagonal and +-15%).
    Right: the pointer chase's time per step against its working set, measured and predicted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._output import save_figure

    rows = doc["programs"]
    key = "predicted_tuned_s" if "fit" in doc else "predicted_s"
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5))
    for half, marker in (("train", "o"), ("held-out", "s")):
        rs = [r for r in rows if r["half"] == half]
        a.errorbar([r["measured_s"] * 1e3 for r in rs], [r[key] * 1e3 for r in rs],
                   xerr=[(r["ci95_s"] or 0) * 1e3 for r in rs], fmt=marker, label=half, capsize=2)
        for r in rs:
            a.annotate(r["name"], (r["measured_s"] * 1e3, r[key] * 1e3), fontsize=7, xytext=(3, 3), textcoords="offset points")
    if rows:
        lo = min(min(r["measured_s"], r[key]) for r in rows) * 1e3 / 1.5
        hi = max(max(r["measured_s"], r[key]) for r in rows) * 1e3 * 1.5
        a.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="predicted = measured")
        a.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="grey", alpha=0.2, label="±15%")
        a.set_xscale("log")
        a.set_yscale("log")
    label = (f"base_cpi {doc['fit']['base_cpi']}, mlp {doc['fit']['mlp']}, walk x{doc['fit']['walk_factor']}"
             if "fit" in doc else "as calibrated")
    a.set_xlabel("measured on-CPU time (ms), 95% CI")
    a.set_ylabel(f"predicted time (ms), {label}")
    a.set_title(f"{doc['host_cpu']}\npredicted vs measured run time", fontsize=10)
    a.legend(fontsize=8)
    chase = sorted((r for r in rows if r["kernel"] == "chase"), key=lambda r: r["bytes"])
    if chase:
        x = [r["bytes"] / 1024 for r in chase]
        b.errorbar(x, [r["measured_s"] / r["steps"] * 1e9 for r in chase], yerr=[(r["ci95_s"] or 0) / r["steps"] * 1e9 for r in chase],
                   marker="o", capsize=2, label="measured (whole run / steps)")
        b.plot(x, [r["predicted_s"] / r["steps"] * 1e9 for r in chase], marker="x", ls="--", label="predicted, as calibrated")
        if "fit" in doc:
            b.plot(x, [r["predicted_tuned_s"] / r["steps"] * 1e9 for r in chase], marker="+", ls=":", label=f"predicted, {label}")
        b.set_xscale("log", base=2)
        b.set_yscale("log")
        b.set_xlabel("working set (KiB)")
        b.set_ylabel("ns per chase step (whole run / steps)")
        b.set_title("Cachetest pointer chase: latency curve", fontsize=10)
        b.legend(fontsize=8)
    for ax in (a, b):
        ax.grid(True, alpha=0.3, which="both")
    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


def validation_note(config: dict[str, Any], text: str = "") -> str:
    """One line for a run's output: where the timing of its machine was validated, or that it
    was not (a paper's preset, ``detect``'s typical latencies, a hand-written table)."""
    cal = calibrated_host(text) if text else None
    if cal is not None:
        here = host_cpu()
        return (f"timing: calibrated on {cal}" + ("" if cal == here else f" (not this host, {here})")
                + "; its measured error against that host: docs/validation.md")
    m = config.get("machine") if isinstance(config, dict) else None
    preset = m.get("preset") if isinstance(m, dict) else None
    if preset == "detect":
        return ("timing: `detect` uses a typical x86 core's latencies, not measured here; `cachecolor calibrate` "
                "measures them and `cachecolor validate` the error (docs/validation.md)")
    if preset is not None:
        return (f"timing: {preset} is a paper's machine (preset); its timing is not validated against hardware here "
                "(docs/validation.md validates a calibrated host)")
    return "timing: not validated against hardware (docs/validation.md: `cachecolor calibrate`, `cachecolor validate`)"


def markdown_table(doc: dict[str, Any]) -> str:
    """The per-program table of docs/validation.md: measured (95% CI), predicted as calibrated
    and with the parameters chosen on the training half, and their errors."""
    from .tables import pipe_table

    tuned = "fit" in doc
    head = ["program", "half", "what", "measured ms (95% CI)", "predicted ms", "error"] + (["tuned ms", "tuned error"] if tuned else [])
    rows = []
    for r in doc["programs"]:
        ci = "-" if r["ci95_s"] is None else f"{r['ci95_s'] * 1e3:.2f}"
        cells = [r["name"], r["half"], r["note"], f"{r['measured_s'] * 1e3:.2f} ± {ci}", f"{r['predicted_s'] * 1e3:.2f}", _pct(r["error"])]
        if tuned:
            cells += [f"{r['predicted_tuned_s'] * 1e3:.2f}", _pct(r["error_tuned"])]
        rows.append(cells)
    return pipe_table(head, rows, [False] * 3 + [True] * (len(head) - 3))
