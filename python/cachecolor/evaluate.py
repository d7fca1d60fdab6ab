"""``cachecolor evaluate``: every policy on the real-program suite, alone and in 2- and
4-program mixes on the papers' machines, over several placements, with each policy's control
run (its colors, no page or thread moved).

What one evaluation is:

- **Programs**: the suite's cached traces (``cachecolor workloads build``; missing ones are
  captured, failures reported and skipped). Each run reads the first ``records`` records of a
  trace (a prefix written once beside the results), so the evaluation's size is one number.
- **Groups** (who runs together) on **machines** (the papers'): each program alone on
  ``ppc970fx`` (ROCS section 6, one core) and ``xeon-e5506`` (COLORIS section 4); pairs on
  ``power5`` (Azimi section 5.3: the two cores of chip 0 share its L2 and L3) and
  ``xeon-e5506``; quads on ``xeon-e5506`` (its four cores share the LLC). One process per core,
  pinned, all starting at cycle 0.
- **Placements**: ``fresh`` (a freshly booted system: the buddy allocator hands out consecutive
  frames) and ``aged`` with seeds 1..N (a long-running system: a quarter of RAM held at random,
  the rest freed in random order; ``[memory] aged``, docs/system.md "Placement"). The sweep's
  seed is the placement seed: ``[memory] seed`` (it also seeds random replacement; the traces
  themselves do not depend on it).
- **Policies**: each with its control (``P+control``: its colors as it decides them, no page or
  thread moved). Speedups are against ``linux`` on the *same* placement (same aged flag and
  seed), per process, then averaged over the group's processes (the papers' weighted speedup).

Output in ``--out``: the sweep's points and tables (``results.csv``), ``evaluation.csv`` (one row
per group, machine, placement, policy and process) and ``evaluation.md`` (the tables); with
``--markdown FILE`` the tables replace the block between ``<!-- evaluation -->`` and
``<!-- /evaluation -->`` in FILE.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from . import _core, _output

#: The papers' machines for each group size.
MACHINES = {1: ("ppc970fx", "xeon-e5506"), 2: ("power5", "xeon-e5506"), 4: ("xeon-e5506",)}
#: The baseline every policy is compared with (the config's default ``[policy] name``).
BASELINE = "linux"
#: The policies evaluated by default (each also as its control): every registered one.
POLICIES = tuple(p for p in _core.POLICIES if p != BASELINE)
#: Default mixes: a cache-sensitive program beside a streaming or sparse one, and two that fit.
PAIRS = ("zstd+stream", "bzip2+spmv", "cc1+stencil", "sqlite+xz")
QUADS = ("zstd+bzip2+stream+xz", "sqlite+cc1+spmv+stencil")
RECORDS = 2_000_000
SEEDS = 3
#: A window without a record limit (``--instructions`` ends it).
UNLIMITED = (1 << 63) - 1


class EvaluationError(ValueError):
    """Bad input to the evaluation (one line naming the field)."""


@dataclass(frozen=True)
class Group:
    programs: tuple[str, ...]
    machine: str

    @property
    def name(self) -> str:
        return "+".join(self.programs)


def groups(programs: Sequence[str], pairs: Sequence[str], quads: Sequence[str]) -> list[Group]:
    out = [Group((p,), m) for p in programs for m in MACHINES[1]]
    for mixes, size in ((pairs, 2), (quads, 4)):
        for mix in mixes:
            names = tuple(mix.split("+"))
            if len(names) != size:
                raise EvaluationError(f"mix {mix!r}: expected {size} programs joined by '+'")
            out += [Group(names, m) for m in MACHINES[size]]
    return out


def prefix_trace(src: Path, dest: Path, records: int, skip: int = 0, instructions: Optional[int] = None) -> Path:
    """``records`` records of ``src`` after its first ``skip`` (with ``instructions``: up to the
    record that brings the window to that many instructions) as a native trace at ``dest``
    (once), written by streaming (``_core.window_trace``): memory is one block whatever the
    window's length, and reading stops at its end. The window keeps every column the simulator
    reads and no PCs (it reads none). A window cut from another file than ``src`` is now (the
    program re-captured since: its size or modification time differ) is cut again."""
    from . import _core

    st = src.stat()
    source = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    counts = window_counts_path(dest)
    if not (dest.exists() and counts.exists() and json.loads(counts.read_text()).get("source") == source):
        dest.parent.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"prefix_of": str(src), "skipped_records": int(skip)}
        # A full-system trace's prefix still holds kernel code: keep what says so (the
        # simulator's and oscache's "no kernel code" line reads it; fullsys.kernel_note), and the
        # kernel's share of the prefix's instructions (the evaluation's `kernel share` column).
        from .fullsys import _metadata_doc

        src_meta = _metadata_doc(src)
        if isinstance(src_meta, dict):
            meta.update({k: src_meta[k] for k in ("source", "backend", "system", "kernel_code", "syscalls") if k in src_meta})
        _, written, insns, priv, threads = _core.window_trace(str(src), "native", str(dest), skip, records, json.dumps(meta),
                                                              None, instructions)
        # What the window holds, known once it is written: beside it (the header comes first).
        from ._output import write_text

        write_text(window_counts_path(dest), json.dumps({
            "records": int(written), "instructions": int(insns),
            "privileged_instruction_share": priv / insns if insns else 0.0,
            "thread_records": {str(t): int(n) for t, n in threads.items()}, "source": source}) + "\n")
    return dest


def short_window(name: str, trace: Path, records: int, instructions: Optional[int] = None) -> Optional[str]:
    """One line when a window holds fewer records (or, fixed in instructions, fewer instructions)
    than the evaluation asked for: its program's cached region ended first, so the run reads the
    whole region, not the size the tables are labelled with. None when the window is full."""
    p = window_counts_path(trace)
    if not p.exists():
        return None
    doc = json.loads(p.read_text())
    got_records, got_insns = int(doc["records"]), int(doc["instructions"])
    if instructions is not None:
        if got_insns >= instructions:
            return None
        asked = f"{instructions:,} instructions"
    else:
        if got_records >= records:
            return None
        asked = f"{records:,} records"
    return (f"{name}: its cached region holds {got_records:,} records ({got_insns:,} instructions), fewer than the "
            f"{asked} asked: the runs read all of it (`cachecolor workloads build {name} --instructions N` "
            "captures a longer region)")


def system_skip(w: Any, records: int, instructions: Optional[int] = None) -> int:
    """Records of a full-system workload's region the evaluation reads past: the region's last
    ``records`` records. Its capture cannot fast-forward, so the region starts at the exec and
    its first 2 M records were 98.0% kernel (find) and 87.7% (httpd: the shell and ifconfig
    before the first request); its end is the program at work. 0 for a user-mode capture,
    whose region already skipped the initialisation."""
    if getattr(w, "capture", "user") != "system":
        return 0
    from . import workloads

    meta = workloads.info(w) or {}
    total = int(meta.get("records", 0))
    if instructions is not None:  # the records that hold about that many instructions, at the end
        per = total / max(1, int(meta.get("instructions") or 0) or total)
        records = int(instructions * per)
    return max(0, total - records)


def window_counts_path(trace: Path) -> Path:
    """Where ``prefix_trace`` keeps a window's records, instructions and privileged share."""
    return trace.with_name(trace.name + ".json")


def trace_threads(w: Any, trace: Path) -> list[int]:
    """The thread ids of a multithreaded program's window (each runs as a thread on its own
    core); [] for a single-threaded program, or a full-system capture (its threads are guest
    tasks, not the program's threads)."""
    if getattr(w, "threads", 1) <= 1 or getattr(w, "capture", "user") != "user":
        return []
    p = window_counts_path(trace)
    doc = json.loads(p.read_text()) if p.exists() else {}
    return sorted(int(t) for t in doc.get("thread_records", {}))


def kernel_share(trace: Path) -> float:
    """The share of a window's instructions its privileged records carry (the kernel's in a
    full-system trace, Nellans et al. Figure 1; 0 in a user-mode capture), as ``prefix_trace``
    counted it; 0 when absent."""
    p = window_counts_path(trace)
    return float(json.loads(p.read_text()).get("privileged_instruction_share", 0.0)) if p.exists() else 0.0


def group_config(g: Group, traces: dict[str, Path], threads: Optional[dict[str, list[int]]] = None,
                 base: Optional[Path] = None) -> dict[str, Any]:
    """One process per program, its threads on consecutive cores from 0 (one chip's cores share
    its LLC; past the machine's last core they wrap around): a multithreaded capture's threads (``threads[name]``: the trace's thread ids) run
    as threads of one process, each reading its own records of the shared trace
    (``trace_threads``), one per core. Trace paths are written relative to ``base`` (the config
    file's directory, which the simulator resolves them against)."""
    threads = threads or {}
    from .presets import machine_summaries

    m = machine_summaries(g.machine)[0]
    cores = int(m["chips"]) * int(m["cores"])  # more threads than cores share them in turn
    procs, core = [], 0
    for p in g.programs:
        path = str(traces[p]) if base is None else os.path.relpath(traces[p], base)
        ids = threads.get(p) or []
        if len(ids) > 1:
            ts = [{"trace": path, "format": "native", "trace_threads": [t]} for t in ids]
        else:
            ts = [{"trace": path, "format": "native"}]
        procs.append({"name": p, "pin": [(core + i) % cores for i in range(len(ts))], "threads": ts})
        core += len(ts)
    return {
        "machine": {"preset": g.machine},
        # color-pool: the colored policies need a color-aware allocator; an uncolored request
        # (linux) takes its buddy/per-CPU path (docs/system.md "Placement").
        "memory": {"ram": "2GiB", "allocator": "color-pool"},
        "policy": {"name": "linux"},
        "processes": procs,
    }


def placements(seeds: int, which: str = "all") -> list[tuple[str, int]]:
    """``(placement, seed)``: fresh once (its frames do not depend on the seed), aged per seed
    1..``seeds``; ``which`` keeps ``fresh``, ``aged`` or ``all`` of them."""
    out = []
    if which in ("fresh", "all"):
        out.append(("fresh", 0))
    if which in ("aged", "all"):
        out += [("aged", s) for s in range(1, seeds + 1)]
    return out


def _partition(policy_report: Any) -> Optional[str]:
    """The last color ranges a partitioning policy gave (``name:colors`` each)."""
    found: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if isinstance(v.get("colors"), dict) and "time" in v:
                found.append(v["colors"])
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(policy_report)
    if not found:
        return None
    last = found[-1]
    return " ".join(f"{k}:{r[1] - r[0]}" for k, r in last.items() if isinstance(r, list) and len(r) == 2)


def rows_of(result: Any, group: Group, placement: str, seed: int, policy: str,
            kernel_shares: Optional[dict[str, float]] = None) -> list[dict[str, Any]]:
    doc = result.to_dict()
    pr = doc.get("policy_report") or {}
    control = doc.get("control") or {}
    rows = []
    for p in doc["processes"]:
        kernel = sum(v.get("cycles", 0.0) for v in p.get("kernel", {}).values() if isinstance(v, dict))
        rows.append({
            "group": group.name,
            "size": len(group.programs),
            "machine": group.machine,
            "placement": placement,
            "seed": seed,
            "policy": policy,
            "process": p["name"],
            "ipc": p["ipc"],
            "llc_mpki": p["llc_mpki"],
            "llc_miss_rate": p["llc_miss_rate"],
            "recolored": p["recolors"] + p["lazy_recolors"],
            "os_share": kernel / p["cycles"] if p["cycles"] else 0.0,
            # The trace's own kernel code (full-system captures), as a share of its instructions.
            "kernel_share": (kernel_shares or {}).get(p["name"], 0.0),
            "pollute_pages": pr.get("pages_to_buffer") if isinstance(pr, dict) else None,
            "partition": _partition(pr),
            "refused_moves": sum(control.values()) if control else None,
        })
    return rows


def speedups(frame: Any) -> Any:
    """Per row: IPC over linux's for the same process, group, machine and placement."""
    key = ["group", "machine", "placement", "seed", "process"]
    base = frame[frame.policy == "linux"].set_index(key)["ipc"].rename("linux_ipc")
    out = frame.join(base, on=key)
    out["speedup"] = out["ipc"] / out["linux_ipc"]
    return out


def summary(frame: Any) -> Any:
    """Per group, machine, policy: weighted speedup (mean over the group's processes) on fresh
    memory and over the aged seeds (mean, min, max), LLC MPKI, recolored pages, pollute pages,
    the last partition, the OS share of cycles (the simulated kernel's paths), the kernel share of
    the traces' instructions (full-system captures), moves a control refused."""
    import pandas as pd

    per_run = frame.groupby(["group", "machine", "policy", "placement", "seed"], sort=False).agg(
        speedup=("speedup", "mean"), mpki=("llc_mpki", "mean"), recolored=("recolored", "sum"),
        os_share=("os_share", "mean"), kernel_share=("kernel_share", "mean"), pollute=("pollute_pages", "first"), partition=("partition", "first"),
        refused=("refused_moves", "first")).reset_index()
    out = []
    for (g, m, pol), d in per_run.groupby(["group", "machine", "policy"], sort=False):
        fresh, aged = d[d.placement == "fresh"], d[d.placement == "aged"]
        # The per-run figures below are the aged placements'; with only the fresh one
        # (--placements fresh), the fresh one's, and the MPKI column says so.
        where, src = ("aged", aged) if len(aged) else ("fresh", fresh)
        out.append({
            "group": g, "machine": m, "policy": pol,
            "fresh": fresh.speedup.mean() if len(fresh) else float("nan"),
            "aged mean": aged.speedup.mean() if len(aged) else float("nan"),
            "aged min": aged.speedup.min() if len(aged) else float("nan"),
            "aged max": aged.speedup.max() if len(aged) else float("nan"),
            f"LLC MPKI ({where})": src.mpki.mean() if len(src) else float("nan"),
            "recolored": src.recolored.mean() if len(src) else float("nan"),
            "pollute pages": src.pollute.dropna().mean() if src.pollute.notna().any() else None,
            "partition": src.partition.dropna().iloc[-1] if src.partition.notna().any() else None,
            "OS share": src.os_share.mean() if len(src) else float("nan"),
            "kernel share": d.kernel_share.mean(),
            "refused (control)": src.refused.dropna().mean() if src.refused.notna().any() else None,
        })
    return pd.DataFrame(out)


def placement_spread(frame: Any) -> Any:
    """Linux alone, per group and machine: the group's mean IPC on fresh memory and over the
    aged seeds (mean, min, max), and the aged spread as a fraction of the aged mean: how much
    placement alone moves the baseline."""
    import pandas as pd

    lin = frame[frame.policy == "linux"]
    per_run = lin.groupby(["group", "machine", "placement", "seed"], sort=False)["ipc"].mean().reset_index()
    out = []
    for (g, m), d in per_run.groupby(["group", "machine"], sort=False):
        fresh, aged = d[d.placement == "fresh"].ipc, d[d.placement == "aged"].ipc
        out.append({
            "group": g, "machine": m,
            "IPC fresh": fresh.mean() if len(fresh) else float("nan"),
            "IPC aged mean": aged.mean() if len(aged) else float("nan"),
            "aged min": aged.min() if len(aged) else float("nan"),
            "aged max": aged.max() if len(aged) else float("nan"),
            "aged spread": (aged.max() - aged.min()) / aged.mean() if len(aged) and aged.mean() else float("nan"),
            "fresh / aged": fresh.mean() / aged.mean() if len(fresh) and len(aged) and aged.mean() else float("nan"),
        })
    return pd.DataFrame(out)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def markdown(table: Any, header: str) -> str:
    """``header``, then ``table`` as a pipe table (``tables.pipe_table``; ``_fmt``'s cells)."""
    from .tables import pipe_table

    cols = [str(c) for c in table.columns]
    rows = [[_fmt(r[c]) for c in table.columns] for _, r in table.iterrows()]
    return header + "\n\n" + pipe_table(cols, rows, [table[c].dtype.kind in "iuf" for c in table.columns])


def replace_block(doc: Path, text: str) -> None:
    from ._output import write_text

    begin, end = "<!-- evaluation -->", "<!-- /evaluation -->"
    old = doc.read_text()
    if begin not in old or end not in old:
        raise EvaluationError(f"{doc}: no {begin} ... {end} block to replace")
    head, rest = old.split(begin, 1)
    tail = rest.split(end, 1)[1]
    write_text(doc, f"{head}{begin}\n{text}\n{end}{tail}")


def _machines(arg: Optional[str]) -> Optional[list[str]]:
    """``--machines``: the machines every group runs on instead of its size's papers' machines
    (None keeps those); any preset (``cachecolor machine --list``)."""
    if not arg:
        return None
    from .presets import machine_names

    known = [m for m in machine_names() if m != "detect"]
    chosen = [m.strip() for m in arg.split(",") if m.strip()]
    bad = [m for m in chosen if m not in known]
    if bad or not chosen:
        raise EvaluationError(f"--machines {arg!r}: {', '.join(bad) or 'none given'} is not a machine preset "
                              f"({', '.join(known)})")
    return list(dict.fromkeys(chosen))


def _executor(args: argparse.Namespace) -> Any:
    """Where the runs go: the local pool (``--workers``), or the Dask scheduler ``--scheduler``
    (its workers read the traces at the paths the configs name: a shared file system)."""
    scheduler = getattr(args, "scheduler", None)
    if not scheduler:
        return "pool"
    if not scheduler.startswith(("tcp://", "tls://")) or len(scheduler) <= len("tcp://"):
        raise EvaluationError(f"--scheduler {scheduler!r}: a Dask scheduler address tcp://HOST:PORT (or tls://)")
    return scheduler


def evaluate(args: argparse.Namespace) -> int:
    from . import workloads
    from .sweep import Point, results_of, sweep

    # Absolute: the configs name their traces relative to their own directory, whatever the
    # working directory (a relative --out resolved twice named out/configs/out/traces/...).
    out = Path(args.out).resolve()
    only = getattr(args, "only", None) or "all"
    programs = [] if only == "mixes" else (args.programs.split(",") if args.programs else [w.name for w in workloads.SUITE])
    pairs = [] if only == "alone" else list(args.pairs)
    quads = [] if only == "alone" else list(args.quads)
    known = {w.name for w in workloads.SUITE}
    for p in programs + [x for mix in pairs + quads for x in mix.split("+")]:
        if p not in known:
            raise EvaluationError(f"program {p!r} is not in the suite; the suite: {', '.join(sorted(known))}")
    machines = _machines(getattr(args, "machines", None))
    chosen = groups(programs, pairs, quads)
    if machines is not None:
        chosen = list(dict.fromkeys(Group(g.programs, m) for g in chosen for m in machines))
    if not chosen:  # bad mixes are named before anything runs (groups raises)
        raise EvaluationError("no group to run: --only, --programs/--pairs/--quads and --machines leave none")
    instructions = getattr(args, "instructions", None)
    if instructions is not None:
        if instructions < 1000:
            raise EvaluationError(f"--instructions {instructions}: at least 1000")
        records, size = UNLIMITED, f"i{instructions}"
    else:
        if args.records < 1000:
            raise EvaluationError(f"--records {args.records}: at least 1000")
        records, size = args.records, str(args.records)
    which = getattr(args, "placements", None) or "all"
    if args.seeds < 0:
        raise EvaluationError(f"--seeds {args.seeds}: the number of aged placements, 0 or more")
    if which != "fresh" and args.seeds == 0:
        raise EvaluationError(f"--seeds 0 leaves no aged placement: give --placements fresh, or --seeds 1 or more")
    _check_oracle_args(args, chosen)
    executor = _executor(args)
    wanted = sorted({p for g in chosen for p in g.programs})
    started = time.monotonic()
    traces: dict[str, Path] = {}
    thread_ids: dict[str, list[int]] = {}
    short: dict[str, str] = {}  # programs whose region is shorter than the window asked
    for name in wanted:
        w = workloads.by_name(name)
        try:
            if workloads.info(w) is None or not (workloads.wdir(w) / "trace.cctrace").exists():
                workloads.build(w)
            skip = system_skip(w, records, instructions)
            suffix = f"-from{skip}" if skip else ""
            traces[name] = prefix_trace(workloads.wdir(w) / "trace.cctrace",
                                        out / "traces" / f"{name}-{size}{suffix}.cctrace", records, skip, instructions)
            thread_ids[name] = trace_threads(w, traces[name])
            note = short_window(name, traces[name], records, instructions)
            if note:
                short[name] = note
                print(f"warning: {note}", file=sys.stderr)
        except Exception as e:  # a program that cannot be had is reported and skipped
            print(f"{name}: SKIPPED: {e}", file=sys.stderr)
    gs = [g for g in chosen if all(p in traces for p in g.programs)]
    if not gs:
        raise EvaluationError(
            f"no group can run: no trace of {', '.join(sorted(set(wanted) - set(traces))) or 'any program'} "
            "(each program's error is above)"
        )
    shares = {name: kernel_share(t) for name, t in traces.items()}
    points: list[Point] = []
    where: dict[int, tuple[Group, str, int, str]] = {}
    cfg_dir = out / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    policies = ["linux"] + [x for p in args.policies for x in (p, f"{p}+control")]
    places = placements(args.seeds, which)
    for g in gs:
        path = cfg_dir / f"{g.machine}--{g.name}.json"
        text = json.dumps(group_config(g, traces, thread_ids, base=cfg_dir), indent=1)
        if not path.exists() or path.read_text() != text:
            _output.write_text(path, text)
        for placement, seed in places:
            for pol in policies:
                where[len(points)] = (g, placement, seed, pol)
                points.append(Point(str(path), pol, seed, {"memory.aged": placement == "aged"}))
    print(f"evaluation: {len(gs)} groups x {len(places)} placements x {len(policies)} policies "
          f"= {len(points)} runs of {f'{instructions:,} instructions' if instructions else f'{records:,} records'} per program",
          file=sys.stderr)
    res = sweep(points, out / "sweep", executor=executor, workers=args.workers, progress=not args.quiet)
    import pandas as pd

    rows = []
    for prep, result in results_of(out / "sweep", res.points):
        g, placement, seed, pol = where[prep.index]
        rows += rows_of(result, g, placement, seed, pol, shares)
    if res.failed:
        print(f"evaluation: {len(res.failed)} runs failed (their point files in {out / 'sweep'} say why)", file=sys.stderr)
    frame = speedups(pd.DataFrame(rows))
    verdict_parts: list[str] = []
    if getattr(args, "oracle", None):
        frame, verdict_parts = _with_oracles(args, out, res, where, frame)
    frame.to_csv(out / "evaluation.csv", index=False)
    table = summary(frame)
    elapsed = time.monotonic() - started
    parts = verdict_parts + [markdown(placement_spread(frame), "#### linux: the placement spread (IPC, mean over the group's processes)")]
    for size, title in ((1, "alone"), (2, "2-program mixes"), (4, "4-program mixes")):
        t = table[table.group.map(lambda n: n.count("+") + 1) == size]
        if len(t):
            parts.append(markdown(t, f"#### {title}"))
    text = "\n\n".join(parts)
    _output.write_text(out / "evaluation.md", text + "\n")
    if args.markdown:
        replace_block(Path(args.markdown), text)
    print(f"evaluation: {len(res.ran)} runs, {len(res.reused)} reused, {elapsed:.0f} s; tables in {out / 'evaluation.md'}",
          file=sys.stderr)
    _output.write_json(out / "run.json", {"runs": len(res.ran), "reused": len(res.reused), "failed": len(res.failed),
                                          "seconds": round(elapsed), "records": args.records, "instructions": instructions,
                                          "seeds": args.seeds, "placements": which, "short_windows": short,
                                          "argv": sys.argv[1:]})
    return 1 if res.failed else 0


def _check_oracle_args(args: argparse.Namespace, chosen: list[Group]) -> None:
    """``--oracle``'s bad input, named before any program is built or run: an unknown oracle, a
    granularity below 1, no policy to judge, and oracles that divide the cache among processes
    where every group is one program."""
    from .oracles import OracleError, parse_oracles

    if not getattr(args, "oracle", None):
        return
    try:
        oracles = parse_oracles(args.oracle)
    except OracleError as e:
        raise EvaluationError(str(e)) from e
    if args.oracle_steps < 1:
        raise EvaluationError(f"--oracle-steps {args.oracle_steps}: at least 1")
    if not args.policies:
        raise EvaluationError("--oracle: --policies names no policy, so linux alone runs and there is nothing to judge: "
                              f"give --policies NAME... (the evaluated ones: {', '.join(POLICIES)})")
    dividing = [o for o in oracles if o in ("partition", "mrc")]
    if dividing and len(dividing) == len(oracles) and all(len(g.programs) == 1 for g in chosen):
        raise EvaluationError(f"--oracle {','.join(oracles)}: every group runs one program, and oracle:{dividing[0]} divides "
                              "the cache among processes: give --only mixes, --pairs or --quads (or --oracle pollute)")


def _with_oracles(args: argparse.Namespace, out: Path, res: Any, where: dict[int, Any], frame: Any) -> tuple[Any, list[str]]:
    """``--oracle``: the oracles beside every linux run (docs/verdicts.md), the verdict columns
    (``headroom``, ``achieved``, ``share``, ``control``, ``noise``, ``verdict``) joined to each
    row by group, machine and policy, ``verdicts.csv`` / ``oracles.csv`` written, and the
    verdict table to open ``evaluation.md``. Placements are the verdict's seeds (fresh is seed 0)."""
    from .oracles import OracleError, parse_oracles, run_oracles
    from .reports.base import Run
    from .reports.verdicts import candidate_table, oracle_as_runs, oracle_table, verdict_markdown, verdict_table
    from .sweep import results_of

    try:
        oracles = parse_oracles(args.oracle)
    except OracleError as e:
        raise EvaluationError(str(e)) from e
    linux = [p for p in res.points if where[p.index][3] == "linux"]
    done = run_oracles(linux, out / "sweep", oracles, args.oracle_steps, executor=_executor(args), workers=args.workers,
                       progress=not args.quiet,
                       say=lambda m: None if args.quiet else print(m, file=sys.stderr))
    runs = [Run(p.point.config, where[p.index][3], p.point.seed, r) for p, r in results_of(out / "sweep", res.points)]
    verdicts = verdict_table(runs + oracle_as_runs(done), done)
    oracle_table(done).to_csv(out / "oracles.csv", index=False)
    candidate_table(done).to_csv(out / "oracle-candidates.csv", index=False)
    verdicts.to_csv(out / "verdicts.csv", index=False)
    cols = ["headroom", "achieved", "share", "control", "noise", "verdict"]
    v = verdicts.assign(machine=verdicts.config.str.split("--").str[0], group=verdicts.config.str.split("--").str[1])
    frame = frame.merge(v[["group", "machine", "policy", *cols]], on=["group", "machine", "policy"], how="left")
    frame["verdict"] = frame["verdict"].fillna("")
    return frame, [verdict_markdown(verdicts, oracle_table(done)).replace("## ", "#### ")]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("evaluate", help="every policy and its control on the real-program suite",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", help="comma-separated suite programs run alone (default: the whole suite)")
    p.add_argument("--pairs", nargs="*", default=list(PAIRS), metavar="A+B", help="2-program mixes")
    p.add_argument("--quads", nargs="*", default=list(QUADS), metavar="A+B+C+D", help="4-program mixes")
    p.add_argument("--policies", nargs="*", default=list(POLICIES), help="policies besides linux (each with its control)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--records", type=int, default=RECORDS, help="records of each trace a run reads (its prefix; a shorter region is read whole, with a warning)")
    size.add_argument("--instructions", type=int, help="instructions of each program's region a run reads, instead of --records")
    p.add_argument("--seeds", type=int, default=SEEDS, help="aged placements: seeds 1..N (0 only with --placements fresh)")
    p.add_argument("--placements", choices=("fresh", "aged", "all"), default="all",
                   help="the fresh placement, the aged ones (--seeds), or both (default)")
    p.add_argument("--machines", help="comma-separated machine presets every group runs on (default: each group size's papers' machines)")
    p.add_argument("--only", choices=("alone", "mixes"), help="only the programs alone, or only the mixes")
    p.add_argument("--workers", type=int, default=None, help="parallel runs (default: all cores)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run on this Dask scheduler instead of the local pool (its workers need cachecolor[dask] and the traces at the same paths)")
    p.add_argument("--out", default="cachecolor-evaluation", help="output directory (points are reused)")
    p.add_argument("--markdown", help="replace the <!-- evaluation --> block of this file with the tables")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--oracle", nargs="?", const="all", metavar="NAMES",
                   help="the oracles (partition, pollute, mrc; default all) beside each linux run, and each policy's "
                   "verdict opening evaluation.md (docs/verdicts.md)")
    p.add_argument("--oracle-steps", type=int, default=16, metavar="N", help="the oracles' granularity (default 16)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        return evaluate(args)
    except EvaluationError as e:
        print(f"cachecolor evaluate: {e}", file=sys.stderr)
        return 2
