"""``cachecolor calibrate``: measure this host with Cachetest and write a calibrated machine config.

The machine's geometry is ``machine --detect``'s (sysfs); its timing is measured here with the
thesis's pointer chase (004 sections 4.2.1-4.2.3, ``cachecolor.bench``), on-CPU time per access
(the thread's CPU clock: on a shared machine the wall clock also counts other tasks' slices):

- the latency of each cache level: a uniform chase at a working set inside the level (the
  geometric middle between the level below and the level's own size; L1 at half its size);
- the DRAM latency: a chase at twice the last level's size (capped by ``--dram-bytes`` and by
  the memory available), in 2 MiB pages (THP) so that page walks are not counted in it;
- the page-walk cost: the same working set in 4 KiB pages minus 2 MiB pages, per access;
- the page-fault cost: first touch of fresh 4 KiB pages minus a second touch of the same pages;
- memory bandwidth with 1..N cores: synchronised co-runs (thesis Figure 2.5) of a sequential
  chase (one load per line, which the prefetchers follow) over a DRAM-sized buffer each;
- the loaded-latency curve: the DRAM chase on one core while 0..N-1 other cores stream.

Every number of the written config says where it comes from: ``measured`` (here, with the
command), ``sysfs``/``cpuinfo`` (read), or ``default`` (the simulator's or a typical x86 core's,
not measured). Cycles are nanoseconds times the clock read from ``/proc/cpuinfo``.

``calibrate()`` returns the document (JSON-serialisable); ``calibrated_toml(doc)`` the config.
"""

from __future__ import annotations

import copy
import ctypes
import math
import mmap
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from . import _core
from . import bench as cbench
from . import presets

#: The first line of a calibrated config; ``calibrated_host`` reads the host back from it.
HEADER = "# cachecolor calibrate:"
DEFAULT_GHZ = 2.5
FAULT_BYTES = 32 << 20
#: Lines ahead the L2 stream prefetcher runs (Intel's L2 streamer keeps up to 20 lines ahead,
#: Optimization Reference Manual 2.x "Data Prefetching"; the simulator allows at most 16).
PREFETCH_DEGREE_L2 = 8
#: References of the synthetic uniform walk the model's own page-walk cost is measured on.
WALK_REFERENCES = 400_000


def host_cpu() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE) or re.search(r"^Hardware\s*:\s*(.+)$", text, re.MULTILINE)
    return m.group(1).strip() if m else (platform.processor() or "unknown")


def core_ghz() -> tuple[float, str]:
    """The cores' clock in GHz and its source: cpuinfo's ``cpu MHz``, else sysfs's
    ``cpufreq/cpuinfo_max_freq``, else the default 2.5 GHz."""
    try:
        mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", Path("/proc/cpuinfo").read_text(), re.MULTILINE)]
        if mhz:
            return round(max(mhz) / 1000.0, 3), "cpuinfo"
    except OSError:
        pass
    try:
        khz = float(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        return round(khz / 1e6, 3), "sysfs"
    except (OSError, ValueError):
        return DEFAULT_GHZ, "default"


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ")[0:3].__str__()
    except OSError:
        return "unknown"


def _geo_mid(a: int, b: int) -> int:
    """A working set well inside (a, b]: the geometric middle, rounded to whole KiB."""
    return max(4096, int(math.sqrt(a * b)) >> 10 << 10)


def _chase(level: str, size: int, buffer: str, trials: int, duration_ms: float, core: Optional[int],
           log: Callable[[str], None]) -> dict[str, Any]:
    s = cbench.bench(level, buffer=buffer, sizes=[size], trials=trials, duration_ms=duration_ms, core=core, counters=False)
    p = s.doc["points"][0]
    out = {"working_set_bytes": size, "buffer": buffer, "ns": p["cpu_ns_per_access"], "ci95": p["cpu_ci95"],
           "wall_ns": p["ns_per_access"], "trials": trials, "duration_ms": duration_ms}
    log(f"  {level:4} {size >> 10:>9,} KiB {buffer:6} {out['ns']:7.2f} ns on-CPU (95% CI ± {out['ci95'] or 0:.2f}), wall {out['wall_ns']:.2f} ns")
    return out


def fault_cost_ns(nbytes: int = FAULT_BYTES) -> dict[str, Any]:
    """On-CPU ns per first touch of a fresh 4 KiB page (fault, zeroing) beyond a touch of a
    mapped one: memset of a fresh ``MADV_NOHUGEPAGE`` mapping, then memset of it again."""
    page = mmap.PAGESIZE
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if hasattr(m, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
            m.madvise(mmap.MADV_NOHUGEPAGE)
        buf = (ctypes.c_char * nbytes).from_buffer(m)
        addr = ctypes.addressof(buf)
        t0 = time.thread_time_ns()
        ctypes.memset(addr, 1, nbytes)
        first = time.thread_time_ns() - t0
        t0 = time.thread_time_ns()
        ctypes.memset(addr, 2, nbytes)
        second = time.thread_time_ns() - t0
        del buf
    finally:
        m.close()
    pages = nbytes // page
    return {"pages": pages, "ns_per_fault": max(0.0, (first - second) / pages), "first_ns": first, "second_ns": second}


def _streamers(n: int, cores: list[int], nbytes: int) -> list[subprocess.Popen]:
    """``n`` processes streaming through ``nbytes`` each (Python's bytes copy, memmove), each
    pinned to one of ``cores``; stopped by the caller."""
    code = ("import os,sys; os.sched_setaffinity(0,{%d}); a=bytearray(%d); b=bytearray(%d)\n"
            "while True: b[:]=a")
    procs = []
    for i in range(n):
        procs.append(subprocess.Popen([sys.executable, "-c", code % (cores[i % len(cores)], nbytes // 2, nbytes // 2)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
    time.sleep(0.3)  # allocated and streaming
    return procs


def calibrate(
    *,
    trials: int = 3,
    duration_ms: float = 10.0,
    dram_bytes: int = 128 << 20,
    core: Optional[int] = None,
    bandwidth: bool = True,
    loaded: bool = True,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Measure this host (see the module's doc); returns the calibration document."""
    env = cbench.environment()
    machine = presets.machine("detect")
    levels = machine["hierarchy"]["levels"]
    ghz, ghz_source = core_ghz()
    pmu = [e for e in env.get("pmu", []) if e.get("status") == "ok" and e.get("kind", "hardware") != "software"]
    hardware_events = [e["name"] for e in env.get("pmu", []) if e.get("status") == "ok" and e["name"] not in ("task-clock", "page-faults")]
    doc: dict[str, Any] = {
        "version": 1,
        "host": {"cpu": host_cpu(), "kernel": platform.release(), "machine": platform.machine(),
                 "cpus": os.cpu_count(), "loadavg_before": loadavg()},
        "ghz": ghz, "ghz_source": ghz_source,
        "pmu": "hardware events: " + (", ".join(hardware_events) if hardware_events else
                                      "none (perf_event_open fails for every hardware event): time only"),
        "settings": {"trials": trials, "duration_ms": duration_ms, "dram_bytes": dram_bytes},
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    del pmu
    data_levels = [lv for lv in levels if lv.get("serves", "unified") != "instruction"]
    log(f"calibrate: {doc['host']['cpu']}, {ghz} GHz ({ghz_source}), load {doc['host']['loadavg_before']}")
    # Each private level's latency at a working set inside it; the last level's at twice the
    # level below it, then a scan of its capacity (the share this host gives us may be smaller
    # than sysfs says: a VM's last level is shared with other guests).
    lat: dict[str, Any] = {}
    below = 0
    for i, lv in enumerate(data_levels):
        size = _parse_size(lv["size"])
        last = i == len(data_levels) - 1 and i > 0
        ws = size // 2 if below == 0 else (min(2 * below, size // 2) if last else _geo_mid(below, size))
        lat[lv["name"]] = _chase(f"L{min(i + 1, 3)}", ws, "naive", trials, duration_ms, core, log)
        below = size
    llc_name = data_levels[-1]["name"]
    llc = _parse_size(data_levels[-1]["size"])
    avail = _mem_available()
    big = min(2 * llc, dram_bytes, max(64 << 20, avail // 4))
    doc["dram_working_set_bytes"] = big
    doc["dram_working_set_note"] = (f"2 x the last level ({llc >> 20} MiB)" if big == 2 * llc else
                                    f"{big >> 20} MiB: 2 x the last level ({llc >> 20} MiB) capped by --dram-bytes / memory available")
    thp = _chase("L3", big, "thp", trials, duration_ms, core, log)
    small = _chase("L3", big, "naive", trials, duration_ms, core, log)
    doc["latency"] = lat
    doc["dram"] = thp
    doc["dram_4k"] = small
    doc["page_walk_ns"] = small["ns"] - thp["ns"]
    log(f"  page walk: {doc['page_walk_ns']:.1f} ns per access with 4 KiB pages beyond 2 MiB pages at {big >> 20} MiB")
    # Each level's capacity beyond L1 (a VM shares the last level with other guests, and a core's
    # L2 with the host's other hardware thread): 2 MiB pages (no walks), working sets doubling
    # from the one its latency was measured at, up to its sysfs size (the last level: up to the
    # DRAM working set); the effective size is the largest whose latency stays below the middle
    # of the level's latency and the next one's (DRAM's for the last level).
    doc["capacity"] = {}
    names = [lv["name"] for lv in data_levels]
    for i, name in enumerate(names[1:], start=1):
        size = _parse_size(data_levels[i]["size"])
        last = i == len(names) - 1
        nxt = thp["ns"] if last else lat[names[i + 1]]["ns"]
        mid = (lat[name]["ns"] + nxt) / 2
        scan = []
        ws = lat[name]["working_set_bytes"]
        while (ws < big) if last else (ws <= size):
            scan.append(_chase(f"L{min(i + 1, 3)}", ws, "thp", max(2, trials // 2), duration_ms, core, log))
            ws *= 2
        inside = [p["working_set_bytes"] for p in scan if p["ns"] < mid]
        eff = min(size, max(inside)) if inside and scan and scan[0]["ns"] < mid else None
        doc["capacity"][name] = {"points": scan, "threshold_ns": mid, "effective_bytes": eff, "sysfs_bytes": size}
        log(f"  {name} capacity: " + (f"{eff >> 10:,} KiB behave as {name} (latency below {mid:.1f} ns), sysfs says {size >> 10:,} KiB"
                                      if eff else "no working set of the scan stays below the threshold: sysfs size kept"))
    fault = fault_cost_ns()
    doc["fault"] = fault
    log(f"  page fault {fault['ns_per_fault']:.0f} ns per 4 KiB page (first touch beyond a second one, {fault['pages']} pages)")
    doc["walk_model"] = model_walk(doc, machine, big)
    log(f"  page walk in the model: {doc['walk_model']['model_cycles']:.0f} cycles per access, measured "
        f"{doc['walk_model']['measured_cycles']:.0f}: walk_factor {doc['walk_model']['walk_factor']}")
    ncpu = len(os.sched_getaffinity(0))
    if bandwidth and ncpu >= 1:
        co = cbench.corun(level="L3", buffer="thp", pattern="sequential", working_set_bytes=min(big, 256 << 20),
                          trials=trials, duration_ms=duration_ms)
        doc["bandwidth"] = [{"cores": p["cores"], "gbps": p["total_accesses_per_second"] * 64 / 1e9,
                             "ns_per_access": p["ns_per_access"], "ci95": p["ci95"]} for p in co["points"]]
        for p in doc["bandwidth"]:
            log(f"  bandwidth {p['cores']} core(s): {p['gbps']:.2f} GB/s (sequential chase, one load per 64 B line)")
    if loaded and ncpu >= 2:
        mine = core if core is not None else max(os.sched_getaffinity(0))
        others = sorted(c for c in os.sched_getaffinity(0) if c != mine)
        curve = []
        for k in range(0, len(others) + 1):
            procs = _streamers(k, others, min(big, 256 << 20)) if k else []
            try:
                p = _chase("L3", big, "thp", trials, duration_ms, mine, log)
            finally:
                for pr in procs:
                    pr.kill()
                    pr.wait()
            curve.append({"streams": k, **p})
        doc["loaded_latency"] = curve
    doc["host"]["loadavg_after"] = loadavg()
    doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    doc["machine"] = calibrated_machine(doc, machine)
    return doc


def model_walk(doc: dict[str, Any], detected: dict[str, Any], working_set: int) -> dict[str, Any]:
    """The model's own page-walk cycles per access of a uniform walk over ``working_set`` in 4 KiB
    pages on the machine measured so far (walk_factor 1), against the measured walk cost; the
    factor that makes them agree (1 to 64)."""
    from .system import simulate_system

    m = calibrated_machine({**doc, "walk_model": None}, detected)["table"]
    cfg = {"machine": m, "memory": {"ram": f"{max(1024, 4 * (working_set >> 20))}MiB"}, "policy": {"name": "linux"},
           "processes": [{"name": "walk", "pin": [0], "threads": [{"workload": {"seed": 1, "phases": [
               {"pattern": "uniform", "footprint": f"{working_set >> 20}MiB", "references": WALK_REFERENCES}]}}]}]}
    p = simulate_system(cfg).process("walk")
    model = float(p["page_walk_cycles"]) / WALK_REFERENCES
    measured = max(0.0, doc["page_walk_ns"]) * doc["ghz"]
    factor = 1.0 if model <= 0 else round(min(64.0, max(1.0, measured / model)), 2)
    return {"model_cycles": model, "measured_cycles": measured, "walk_factor": factor, "references": WALK_REFERENCES}


def _mem_available() -> int:
    try:
        m = re.search(r"^MemAvailable:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
        return int(m.group(1)) << 10 if m else 1 << 30
    except OSError:
        return 1 << 30


def _parse_size(v: Any) -> int:
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]i?B)?\s*", str(v))
    if not m:
        raise _core.ConfigError(f"cache size {v!r}: expected bytes or NKiB/MiB/GiB")
    mult = {"KiB": 1 << 10, "KB": 1 << 10, "MiB": 1 << 20, "MB": 1 << 20, "GiB": 1 << 30, "GB": 1 << 30}.get(m.group(2) or "", 1)
    return int(m.group(1)) * mult


def calibrated_machine(doc: dict[str, Any], detected: dict[str, Any]) -> dict[str, Any]:
    """The ``[machine]`` table: the detected geometry with the measured timing, and
    ``sources``: field path -> (value, where it comes from)."""
    ghz = doc["ghz"]
    levels = detected["hierarchy"]["levels"]
    src: dict[str, tuple[Any, str]] = {}
    cyc = {name: max(1, round(p["ns"] * ghz)) for name, p in doc["latency"].items()}
    lat = []
    for lv in levels:
        if lv["name"] in cyc:
            lat.append(cyc[lv["name"]])
        else:  # an instruction cache: not chased (the chase is a data walk); the L1D's latency
            lat.append(min(cyc.values()))
    # Latencies must not decrease (the model's rule): a level measured faster than the one
    # above it (noise on a loaded machine) takes the one above's.
    for i in range(1, len(lat)):
        lat[i] = max(lat[i], lat[i - 1])
    dram = max(round(doc["dram"]["ns"] * ghz), lat[-1])
    timing = dict(detected.get("timing", {}))
    timing["level_latency"] = lat
    timing["dram_latency"] = dram
    timing["fault_cycles"] = round(doc["fault"]["ns_per_fault"] * ghz)
    src["timing.level_latency"] = (lat, "measured: " + ", ".join(
        f"{n} {p['ns']:.2f} ns at {p['working_set_bytes'] >> 10} KiB" for n, p in doc["latency"].items()) + f" x {ghz} GHz")
    src["timing.dram_latency"] = (dram, f"measured: {doc['dram']['ns']:.1f} ns at {doc['dram']['working_set_bytes'] >> 20} MiB in 2 MiB pages x {ghz} GHz")
    src["timing.fault_cycles"] = (timing["fault_cycles"], f"measured: {doc['fault']['ns_per_fault']:.0f} ns per first touch of a 4 KiB page")
    # The measured first touch holds the kernel's zeroing of the page (clear_page): the model
    # clears it through the caches too, without charging its time again.
    timing["fault_cycles_include_clear"] = True
    src["timing.fault_cycles_include_clear"] = (True, "measured: the first touch above includes the kernel's clear of the page")
    timing.setdefault("base_cpi", 1.0)
    timing.setdefault("mlp", 1.0)
    src["timing.base_cpi"] = (timing["base_cpi"], "default (a model parameter: `cachecolor validate` chooses one on its training programs)")
    src["timing.mlp"] = (timing["mlp"], "default (a model parameter: `cachecolor validate` chooses one on its training programs)")
    walk = doc.get("walk_model")
    if walk:
        timing["walk_factor"] = walk["walk_factor"]
        src["timing.walk_factor"] = (walk["walk_factor"], f"measured: page walks cost {walk['measured_cycles']:.0f} cycles per access "
                                     f"(4 KiB over 2 MiB pages at {doc['dram']['working_set_bytes'] >> 20} MiB), the model's own walk "
                                     f"{walk['model_cycles']:.0f} (a nested walk when above 1)")
    memory = dict(detected.get("memory", {}) or {})
    memory["model"] = "queued"
    memory["core_ghz"] = ghz
    src["memory.core_ghz"] = (ghz, doc["ghz_source"])
    bw = doc.get("bandwidth") or []
    peak = max((p["gbps"] for p in bw), default=0.0)
    memory.setdefault("channels", 2)
    default_peak = 21.333
    if peak > default_peak:
        memory["channel_gbps"] = round(peak / memory["channels"], 3)
        src["memory.channel_gbps"] = (memory["channel_gbps"], f"measured: the most any co-run moved, {peak:.2f} GB/s over {memory['channels']} channels (a lower bound of the peak)")
    else:
        memory["channel_gbps"] = round(default_peak / memory["channels"], 3)
        src["memory.channel_gbps"] = (memory["channel_gbps"], f"default (two DDR3-1333 channels); the co-runs moved at most {peak:.2f} GB/s, below it" if bw else "default (two DDR3-1333 channels): bandwidth not measured")
    src["memory.channels"] = (memory["channels"], "default")
    out = {k: v for k, v in detected.items() if k not in ("timing", "memory")}
    # Hardware prefetchers: every current x86 core has them (Intel's L1 "DCU" next-line and L2
    # streamer, AMD's L1 and L2 stream prefetchers; the vendors' optimization manuals); without
    # them the model charges a sequential stream the DRAM latency per line. Not measured here.
    out["hierarchy"] = copy.deepcopy(detected["hierarchy"])
    for lv in out["hierarchy"]["levels"]:
        if lv.get("serves") == "data" or (lv["name"] == "L2" and lv.get("serves", "unified") == "unified"):
            kind, degree = ("next-line", 1) if lv.get("serves") == "data" else ("stride", PREFETCH_DEGREE_L2)
            lv["prefetcher"], lv["prefetch_degree"] = kind, degree
            src[f"hierarchy.{lv['name']}.prefetcher"] = (kind, "default (vendor: every current x86 core prefetches streams; not measured)")
    # Each level's measured capacity, where smaller than sysfs's (the share this host gives us),
    # rounded down to whole sets of whole pages (ways x page size): a knee at a power of two on
    # a 20-way cache (a KVM guest's 300 MiB L3 scanned at 32 MiB) is no whole number of sets,
    # and a set count below a page's lines no whole number of colors.
    page = _parse_size(out["hierarchy"].get("page_size", 4096))
    for lv in out["hierarchy"]["levels"]:
        scan = (doc.get("capacity") or {}).get(lv["name"]) or {}
        eff = scan.get("effective_bytes")
        if eff and eff < scan["sysfs_bytes"]:
            unit = int(lv["ways"]) * page
            whole = eff // unit * unit
            if whole == 0:
                continue
            lv["size"] = (f"{whole >> 20}MiB" if whole % (1 << 20) == 0 else f"{whole >> 10}KiB") if isinstance(lv["size"], str) else whole
            rounded = "" if whole == eff else f", {eff >> 10:,} KiB rounded down to whole sets of whole pages"
            src[f"hierarchy.{lv['name']}.size"] = (lv["size"], f"measured: the latency knee of a capacity scan{rounded} "
                                                   f"(sysfs says {scan['sysfs_bytes'] >> 10:,} KiB)")
    out["timing"] = timing
    out["memory"] = memory
    return {"table": out, "sources": {k: v[1] for k, v in src.items()}}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def calibrated_toml(doc: dict[str, Any]) -> str:
    """The calibrated ``[machine]`` table as TOML, every measured or defaulted number's source in
    a comment; the first lines name the host (``calibrated_host`` reads it back)."""
    table = doc["machine"]["table"]
    src = doc["machine"]["sources"]
    lines = [f"{HEADER} {doc['host']['cpu']}",
             f"# measured {doc['started']} - {doc['finished']}, {doc['ghz']} GHz ({doc['ghz_source']}), "
             f"load average before {doc['host']['loadavg_before']}, after {doc['host']['loadavg_after']}",
             f"# PMU: {doc['pmu']}",
             "# Geometry from sysfs (cachecolor machine --detect); timing measured with Cachetest's pointer chase",
             "# (on-CPU ns per access) where a comment says `measured`. Validation: docs/validation.md.",
             "[machine]"]
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    for k, v in scalars.items():
        lines.append(f"{k} = {_toml_value(v)}")
    for name, sub in table.items():
        if not isinstance(sub, dict):
            continue
        lines.append("")
        lines.append(f"[machine.{name}]")
        arrays = {k: v for k, v in sub.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)}
        for k, v in sub.items():
            if k in arrays:
                continue
            note = src.get(f"{name}.{k}")
            if note is None and name in ("timing", "memory"):
                note = "default"
            elif note is None and name == "hierarchy" or name in ("tlb", "mmu"):
                note = note or ("sysfs" if name == "hierarchy" else "default (not in sysfs)")
            lines.append(f"{k} = {_toml_value(v)}" + (f"  # {note}" if note else ""))
        for k, v in arrays.items():
            for item in v:
                lines.append("")
                lines.append(f"[[machine.{name}.{k}]]  # sysfs")
                for kk, vv in item.items():
                    note = src.get(f"{name}.{item.get('name')}.{kk}")
                    lines.append(f"{kk} = {_toml_value(vv)}" + (f"  # {note}" if note else ""))
    return "\n".join(lines) + "\n"


def calibrated_host(text: str) -> Optional[str]:
    """The host CPU a calibrated config was measured on (its first line), else None."""
    first = text.split("\n", 1)[0]
    return first[len(HEADER):].strip() if first.startswith(HEADER) else None
