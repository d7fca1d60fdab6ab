"""Sweeps: many whole-system runs (configs x field-path overrides x policies x seeds) on a local
process pool or a Dask cluster, stored point by point and gathered into one tidy table
(``cachecolor sweep SPEC.toml``, ``cachecolor.sweep(...)``; docs/sweep.md).

Design and contract:
- A *point* is (config file, overrides by field path, policy, seed). Its *key* is the SHA-256 of
  the canonical JSON of (the effective config the Rust core returns for it -- preset expanded,
  defaults filled, overrides, policy and seed applied --, the content hash of every trace file
  it reads, the policy, the seed, the cachecolor version and the build: a hash of the compiled
  simulator). Two points that would compute the same thing share a key, whatever the spelling of
  their configs; a rebuilt simulator (a checkout's code changed, the version string did not)
  never reuses points computed by another build.
- Every finished point is written at once, atomically, to ``OUT/points/KEY.json`` (its point,
  status ``ok`` with the run's full JSON, or ``error`` with the error text). A sweep first reads
  what is there: points already ``ok`` are never recomputed, so an interrupted, re-run or
  extended sweep computes only what is missing. A failed point is recorded and the others go
  on; it is tried again on the next run (a failure is not a result).
- Bad input (an unknown field path, an override the config check rejects, a missing config or
  trace) is found before anything runs: ``SweepError`` naming the point and the field.
- Executors: ``"serial"`` (in this process), ``"pool"`` (the default: a ``multiprocessing``
  pool of ``workers`` processes, all cores by default) and Dask (a ``distributed.Client`` or a
  scheduler address ``tcp://HOST:PORT``); dask/distributed are imported only then. Results do not
  depend on the executor: every run is deterministic for its point, and the table is built in
  point order, never in completion order.
- Ctrl-C (or SIGTERM, which the CLI turns into the same) stops the sweep: pool workers are
  terminated, Dask futures cancelled, the points finished so far stay on disk and no table is
  written (a partial table would look whole). ``KeyboardInterrupt`` is re-raised.
- The table (``results.parquet`` when pyarrow is installed, said on stderr when it is not, and
  ``results.csv``) has a row per point and process: ``key``, ``config``, ``policy``, ``seed``,
  one column per swept field path (a path swept over text values such as ``"1MiB"`` also has
  ``PATH_value``, the number the effective config holds, sizes in bytes),
  ``status``, ``error``, ``process`` and the process's results (IPC, cycles, per-level
  accesses / misses / miss rate / MPKI, stalls, kernel paths; lists stay in the JSON).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import sys
import time
from ._compat import tomllib
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import _core
from .config import max_int_digits, parse_toml, read_config_text
from ._output import open_output, write_text
from .system import SystemResult, apply_policy_seed, config_threads, load_system_config, policy_label

PathLike = Union[str, "os.PathLike[str]"]


class SweepError(ValueError):
    """Bad sweep input (a spec, a field path, an override): found before anything runs."""


# ---------------------------------------------------------------------------------------------
# field paths: hierarchy.levels[1].size, processes[0].threads[0].trace

_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)")


def parse_path(path: str) -> list[Union[str, int]]:
    """``machine.hierarchy.levels[1].size`` -> ``["machine", "hierarchy", "levels", 1, "size"]``
    (the spelling the config errors use for a field)."""
    steps: list[Union[str, int]] = []
    for part in path.split("."):
        m = _STEP.fullmatch(part)
        if not m:
            raise SweepError(f"field path {path!r}: {part!r} is not NAME or NAME[INDEX] (e.g. machine.hierarchy.levels[1].size)")
        steps.append(m.group(1))
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return steps


def set_path(cfg: dict[str, Any], path: str, value: Any) -> None:
    """Set the field ``path`` of ``cfg`` to ``value`` in place. Tables on the way are created
    when missing (a default the config left out); a list index must exist."""
    steps = parse_path(path)
    node: Any = cfg
    for i, (step, nxt) in enumerate(zip(steps, steps[1:] + [None])):
        where = _spell(steps[: i + 1])
        last = nxt is None
        if isinstance(step, int):
            if not isinstance(node, list):
                raise SweepError(f"{_spell(steps[:i])}: not a list, so {where} names nothing")
            if not 0 <= step < len(node):
                raise SweepError(f"{where}: index out of range (the list has {len(node)} entries)")
            if last:
                node[step] = value
            else:
                node = node[step]
        else:
            if not isinstance(node, dict):
                raise SweepError(f"{_spell(steps[:i])}: not a table, so {where} names nothing")
            if last:
                node[step] = value
            else:
                if step not in node:
                    if isinstance(nxt, int):
                        raise SweepError(f"{where}: the config has no such list")
                    node[step] = {}
                node = node[step]


def _spell(steps: Sequence[Union[str, int]]) -> str:
    out = ""
    for s in steps:
        out += f"[{s}]" if isinstance(s, int) else (f".{s}" if out else s)
    return out


def parse_set(text: str) -> tuple[str, Any]:
    """``PATH=VALUE`` of ``--set``: VALUE is read as a TOML value (``4``, ``"8MiB"``, ``true``,
    ``[1, 2]``, ``{ pattern = "uniform" }``), and as a bare string when it is not one
    (``--set machine.hierarchy.levels[2].size=8MiB``)."""
    if "=" not in text:
        raise SweepError(f"--set {text!r}: expected PATH=VALUE (e.g. machine.hierarchy.levels[2].size=8MiB)")
    path, raw = (x.strip() for x in text.split("=", 1))
    parse_path(path)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    except ValueError as e:  # an integer longer than Python converts (4,300 digits)
        raise SweepError(f"--set {path}=...: {e}: a number has at most {max_int_digits()} digits") from None
    return path, value


# ---------------------------------------------------------------------------------------------
# points


@dataclass
class Point:
    """One run of a sweep. ``params`` are the field-path overrides in spec order."""

    config: str
    policy: Optional[str] = None
    seed: Optional[int] = None
    params: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        bits = [Path(self.config).stem]
        if self.policy:
            bits.append(self.policy)
        bits += [f"{k}={v}" for k, v in self.params.items()]
        if self.seed is not None:
            bits.append(f"seed {self.seed}")
        return ", ".join(bits)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "policy": self.policy, "seed": self.seed, "params": dict(self.params)}


def config_paths(paths: Iterable[PathLike]) -> list[Path]:
    """Expand directories into their ``*.toml`` configs (sorted); keep files as given; each
    config once."""
    out: list[Path] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.glob("*.toml") if q.is_file())
            if not found:
                raise FileNotFoundError(f"{p}: no *.toml configs in this directory")
        elif p.is_file():
            found = [p]
        else:
            raise FileNotFoundError(f"{p}: no such config file or directory")
        for q in found:
            if q.resolve() not in seen:
                seen.add(q.resolve())
                out.append(q)
    return out


def grid(
    configs: Iterable[PathLike],
    parameters: Optional[Mapping[str, Sequence[Any]]] = None,
    policies: Optional[Sequence[Optional[str]]] = None,
    seeds: Sequence[Optional[int]] = (None,),
) -> list[Point]:
    """Every combination, in the order config, parameters (first path outermost), policy, seed.
    ``policies`` None runs each config's own ``[policy] name``."""
    params = dict(parameters or {})
    for path, values in params.items():
        parse_path(path)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise SweepError(f"parameters.{path!r}: a non-empty list of values")
    points = []
    for c in config_paths(configs):
        for combo in product(*params.values()):
            for pol in list(dict.fromkeys(policies)) if policies else [None]:
                for s in dict.fromkeys(seeds):
                    points.append(Point(str(c), pol, s, dict(zip(params, combo))))
    return points


def load_spec(path: PathLike) -> list[Point]:
    """Read a sweep spec (TOML; docs/sweep.md): ``configs``, ``[parameters]`` (field path -> list
    of values), ``policies``, ``seeds`` (a list, or ``{ first = S, count = N }``), and/or
    ``[[points]]`` (``config``, ``policy``, ``seed``, ``set = { PATH = VALUE }``) for a list.
    Relative config paths are relative to the spec's directory."""
    path = Path(path)
    try:
        spec = parse_toml(read_config_text(path, "sweep spec"), str(path))
    except _core.ConfigError as e:
        raise SweepError(str(e)) from None
    allowed = {"configs", "parameters", "policies", "seeds", "points"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise SweepError(f"{path}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    base = path.parent

    def where(p: str) -> str:
        q = Path(p)
        return str(q if q.is_absolute() else base / q)

    seeds = spec.get("seeds", [None])
    if isinstance(seeds, dict):
        if set(seeds) - {"first", "count"} or not isinstance(seeds.get("count"), int) or seeds["count"] < 1:
            raise SweepError(f"{path}: seeds: a list of integers or {{ first = S, count = N }} with N >= 1")
        seeds = [int(seeds.get("first", 1)) + k for k in range(seeds["count"])]
    if not isinstance(seeds, list) or not all(s is None or (isinstance(s, int) and s >= 0) for s in seeds):
        raise SweepError(f"{path}: seeds: a list of non-negative integers or {{ first = S, count = N }}")
    policies = spec.get("policies")
    if policies is not None and (not isinstance(policies, list) or not all(isinstance(p, str) for p in policies)):
        raise SweepError(f"{path}: policies: a list of policy names")
    points: list[Point] = []
    if "configs" in spec:
        configs = spec["configs"]
        if isinstance(configs, str):
            configs = [configs]
        points += grid([where(c) for c in configs], spec.get("parameters"), policies, seeds or [None])
    elif "parameters" in spec:
        raise SweepError(f"{path}: [parameters] needs configs = [...] to apply to")
    for i, p in enumerate(spec.get("points", [])):
        extra = set(p) - {"config", "policy", "seed", "set"}
        if extra or "config" not in p:
            raise SweepError(f"{path}: points[{i}]: keys config (required), policy, seed, set")
        for k in p.get("set", {}):
            parse_path(k)
        points.append(Point(where(p["config"]), p.get("policy"), p.get("seed"), dict(p.get("set", {}))))
    if not points:
        raise SweepError(f"{path}: no points: give configs = [...] (a grid) or [[points]] (a list)")
    return points


# ---------------------------------------------------------------------------------------------
# keys


_TRACE_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def trace_file_hash(path: PathLike) -> str:
    """``traces.file_hash`` (SHA-256 of the trace file's whole content, metadata included: any
    format, everything the simulator reads), remembered per path, size and mtime: part of a
    sweep point's key."""
    st = os.stat(path)
    memo = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _TRACE_FILE_HASHES:
        from .traces import file_hash

        _TRACE_FILE_HASHES[memo] = file_hash(path)
    return _TRACE_FILE_HASHES[memo]


@dataclass
class Prepared:
    """A point made ready to run: its effective config (JSON text) and key."""

    index: int
    point: Point
    key: str
    config_json: str


def prepare(index: int, point: Point) -> Prepared:
    """Load the point's config, apply its overrides, policy and seed, have the Rust core check
    it, and key it. Trace paths become absolute (relative ones as the config means them: from
    the working directory if the file is there, else from the config's directory), so a worker
    in another directory reads the same file."""
    try:
        cfg = load_system_config(point.config)
    except OSError as e:
        raise SweepError(f"{point.config}: cannot read: {e.strerror or e}") from e
    except _core.ConfigError as e:
        raise SweepError(f"{e}") from e
    for path, value in point.params.items():
        try:
            set_path(cfg, path, value)
        except SweepError as e:
            raise SweepError(f"{point.label()}: {e}") from None
    apply_policy_seed(cfg, point.policy, point.seed)
    traces: dict[str, str] = {}
    for _, t in config_threads(cfg):
        tr = t.get("trace")
        if isinstance(tr, str):
            q = Path(tr)
            if not q.is_absolute() and not q.exists():
                q = Path(point.config).parent / q
            if not q.is_file():
                raise SweepError(f"{point.label()}: trace {tr}: no such file")
            t["trace"] = str(q.resolve())
            traces[t["trace"]] = trace_file_hash(q)
    try:
        effective = json.loads(_core.effective_system_config(json.dumps(cfg), "json"))
    except (_core.ConfigError, _core.TraceError) as e:
        raise SweepError(f"{point.label()}: {e} (config {point.config})") from e
    except OSError as e:
        raise SweepError(f"{point.label()}: {e.filename or ''}: {e.strerror or e}") from e
    doc = {
        "config": effective,
        "traces": traces,
        "policy": effective.get("policy", {}).get("name", point.policy),
        "seed": point.seed,
        "version": _core.__version__,
        "build": simulator_build(),
    }
    key = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Prepared(index, point, key, json.dumps(effective))


@functools.lru_cache(maxsize=None)
def simulator_build() -> str:
    """SHA-256 of the compiled simulator (the ``_core`` extension file). The version string alone
    does not change while a checkout's code does, so a key on it alone would hand back points a
    different simulator computed (bug: ``test_a_rebuilt_simulator_recomputes_every_point``)."""
    h = hashlib.sha256()
    with open(_core.__file__, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# running one point (in a worker: a pool process, a Dask worker, or this process)


def run_point(key: str, config_json: str) -> dict[str, Any]:
    """Run one prepared point; never raises for a failing run: returns ``{"status": "error",
    "error": ...}`` instead, so the sweep records it and goes on. ``KeyboardInterrupt`` is
    re-raised (it is the sweep being stopped, not the point failing)."""
    t0 = time.perf_counter()
    try:
        doc = json.loads(_core.simulate_system(config_json, "json"))
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - the point's failure is its result
        return {"key": key, "status": "error", "error": f"{type(e).__name__}: {' '.join(str(e).split())}", "elapsed": time.perf_counter() - t0}
    status = "ok" if not doc.get("invariants") else "error"
    out = {"key": key, "status": status, "result": doc, "elapsed": time.perf_counter() - t0}
    if status == "error":
        out["error"] = "invariant violated: " + "; ".join(doc["invariants"])
    return out


def _pool_worker_init() -> None:
    # Ctrl-C at a terminal reaches the whole process group: the parent alone decides (it
    # terminates the pool), so a worker never dies half-way through writing a reply.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _pool_task(args: tuple[int, str, str]) -> tuple[int, dict[str, Any]]:
    index, key, config_json = args
    return index, run_point(key, config_json)


# ---------------------------------------------------------------------------------------------
# the sweep


@dataclass
class SweepResult:
    """What a sweep gives back: the table (a DataFrame), the points in order with their keys,
    how many ran now and how many were already stored, and where they are."""

    table: Any
    points: list[Prepared]
    ran: list[str]
    reused: list[str]
    failed: list[str]
    out_dir: Path
    files: list[Path]

    def results(self) -> list[Optional[dict[str, Any]]]:
        """Each point's full JSON record (None for a failed point), in point order."""
        out = []
        for p in self.points:
            rec = read_point(self.out_dir, p.key)
            out.append(rec.get("result") if rec and rec.get("status") == "ok" else None)
        return out


def point_file(out_dir: Path, key: str) -> Path:
    return Path(out_dir) / "points" / f"{key}.json"


def read_point(out_dir: Path, key: str) -> Optional[dict[str, Any]]:
    f = point_file(out_dir, key)
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def sweep(
    points: Union[PathLike, Sequence[Point]],
    out_dir: PathLike = "cachecolor-sweep",
    *,
    executor: Any = "pool",
    workers: Optional[int] = None,
    progress: Union[bool, Callable[[int, int, str], None]] = True,
    write_table: bool = True,
) -> SweepResult:
    """Run every point not already stored in ``out_dir`` and gather the table.

    ``points``: a spec file (``load_spec``) or a list of ``Point`` (``grid`` makes one).
    ``executor``: ``"serial"``, ``"pool"`` (``workers`` processes; default all cores),
    a ``dask.distributed.Client``, or a scheduler address ``"tcp://HOST:PORT"``.
    ``progress``: True for a tqdm bar with ETA on stderr, False for none, or a callable
    ``(done, total, label)``. Returns a ``SweepResult``; its ``table`` is also written as
    ``results.parquet`` (with pyarrow) and ``results.csv`` unless ``write_table`` is False.
    """
    if isinstance(points, (str, os.PathLike)):
        points = load_spec(points)
    out = Path(out_dir)
    prepared = [prepare(i, p) for i, p in enumerate(points)]
    # The same point twice (e.g. a spelling that changes nothing) runs once.
    todo: dict[str, Prepared] = {}
    reused: list[str] = []
    for p in prepared:
        rec = read_point(out, p.key)
        if rec is not None and rec.get("status") == "ok":
            if p.key not in reused:
                reused.append(p.key)
        else:
            todo.setdefault(p.key, p)
    ran: list[str] = []
    failed: list[str] = []
    bar = _Bar(progress, len(todo))

    def finish(p: Prepared, reply: dict[str, Any]) -> None:
        rec = {"key": p.key, "point": p.point.to_dict(), "version": _core.__version__, **reply}
        write_text(point_file(out, p.key), json.dumps(rec))
        ran.append(p.key)
        if reply["status"] != "ok":
            failed.append(p.key)
        bar.step(p.point.label())

    try:
        _execute(list(todo.values()), executor, workers, finish)
    finally:
        bar.close()
    table = build_table(out, prepared)
    files: list[Path] = []
    if write_table:
        files = write_results(table, out)
    return SweepResult(table, prepared, ran, reused, failed, out, files)


def _execute(todo: list[Prepared], executor: Any, workers: Optional[int], finish: Callable[[Prepared, dict[str, Any]], None]) -> None:
    if not todo:
        return
    if isinstance(executor, str) and executor.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
        _run_dask(todo, executor, finish)
    elif executor == "serial" or (executor == "pool" and (workers == 1 or len(todo) == 1)):
        for p in todo:
            finish(p, run_point(p.key, p.config_json))
    elif executor == "pool":
        _run_pool(todo, workers, finish)
    elif hasattr(executor, "submit") and hasattr(executor, "scheduler_info"):
        _run_dask(todo, executor, finish)
    else:
        raise SweepError(f"executor {executor!r}: 'serial', 'pool', a dask.distributed.Client or a scheduler address tcp://HOST:PORT")


def _run_pool(todo: list[Prepared], workers: Optional[int], finish: Callable[[Prepared, dict[str, Any]], None]) -> None:
    import multiprocessing as mp

    n = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    n = max(1, min(n, len(todo)))
    # spawn: a fresh interpreter per worker, not a fork of one that may hold threads (tqdm's
    # monitor, a Dask client) mid-lock.
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(n, initializer=_pool_worker_init)
    by_index = {p.index: p for p in todo}
    ok = False
    try:
        for index, reply in pool.imap_unordered(_pool_task, [(p.index, p.key, p.config_json) for p in todo]):
            finish(by_index[index], reply)
        ok = True
    finally:
        if ok:
            pool.close()
        else:
            pool.terminate()
        pool.join()


def _run_dask(todo: list[Prepared], executor: Any, finish: Callable[[Prepared, dict[str, Any]], None]) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError as e:
        raise SweepError("a Dask scheduler needs the optional dependencies: pip install 'cachecolor[dask]'") from e
    own = isinstance(executor, str)
    client = Client(executor, timeout="30s") if own else executor
    by_key = {}
    futures = []
    try:
        for p in todo:
            # pure=False: the key is ours; Dask must not merge or cache tasks itself.
            f = client.submit(run_point, p.key, p.config_json, key=f"cachecolor-point-{p.key}", pure=False)
            by_key[f.key] = p
            futures.append(f)
        for f in as_completed(futures):
            finish(by_key[f.key], f.result())
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        if own:
            client.close()


class _Bar:
    """The progress over points: a tqdm bar with ETA (a callable or nothing when asked)."""

    def __init__(self, progress: Union[bool, Callable[[int, int, str], None]], total: int):
        self.fn = progress if callable(progress) else None
        self.done, self.total = 0, total
        self.tqdm = None
        if progress is True and total:
            from tqdm import tqdm

            tty = sys.stderr.isatty()
            # On a file or pipe (CI logs) a line every 10 s, not a carriage-return stream.
            self.tqdm = tqdm(total=total, unit="point", desc="sweep", file=sys.stderr, mininterval=0.1 if tty else 10.0, dynamic_ncols=tty, ascii=not tty)

    def step(self, label: str) -> None:
        self.done += 1
        if self.fn:
            self.fn(self.done, self.total, label)
        if self.tqdm is not None:
            self.tqdm.set_postfix_str(label[:40], refresh=False)
            self.tqdm.update(1)

    def close(self) -> None:
        if self.tqdm is not None:
            self.tqdm.close()


# ---------------------------------------------------------------------------------------------
# the table


_META = ("key", "config", "policy", "seed")


def build_table(out_dir: PathLike, prepared: Sequence[Prepared]) -> Any:
    """The tidy table of ``prepared`` from what ``out_dir`` holds: a row per point and process,
    in point order (a failed point: one row with its error; a point never run: none)."""
    import pandas as pd

    from .system import _flat

    paths: list[str] = []
    for p in prepared:
        for k in p.point.params:
            if k not in paths:
                paths.append(k)
    # A path swept over text values ("1MiB", "2MiB") gets a numeric column beside it, the value
    # as the effective config has it (sizes in bytes), so the table sorts and plots by it.
    textual = {k for p in prepared for k, v in p.point.params.items() if isinstance(v, str)}
    rows = []
    seen: set[str] = set()
    for p in prepared:
        if p.key in seen:
            continue
        seen.add(p.key)
        rec = read_point(Path(out_dir), p.key)
        if rec is None:
            continue
        head: dict[str, Any] = {
            "key": p.key,
            "config": Path(p.point.config).stem,
            "policy": policy_label(json.loads(p.config_json), p.point.policy),
            "seed": p.point.seed,
        }
        effective = json.loads(p.config_json)
        for k in paths:
            head[k] = _cell(p.point.params.get(k))
            if k in textual:
                head[f"{k}_value"] = _effective_number(effective, k)
        head["status"] = rec.get("status")
        head["error"] = rec.get("error", "")
        if rec.get("status") == "ok":
            for proc in rec["result"]["processes"]:
                row = dict(head)
                row["process"] = proc["name"]
                row.update({k: v for k, v in _flat(proc).items() if k != "name" and not isinstance(v, (list, dict))})
                rows.append(row)
        else:
            rows.append(dict(head, process=None))
    frame = pd.DataFrame(rows)
    if "seed" in frame:
        frame["seed"] = frame["seed"].astype("Int64")
    return frame


def _effective_number(cfg: Any, path: str) -> Any:
    """The number at field ``path`` of an effective config (None if it is not a number there)."""
    node = cfg
    for step in parse_path(path):
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            return None
    return node if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def _cell(v: Any) -> Any:
    # Lists and tables (a swept workload) go in as their JSON, so the column has one type.
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def write_results(table: Any, out_dir: PathLike) -> list[Path]:
    """``results.csv`` and (with pyarrow) ``results.parquet``, each replaced only once complete."""
    out = Path(out_dir)
    files = []
    csv = out / "results.csv"
    write_text(csv, table.to_csv(index=False))
    files.append(csv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        # Said, not skipped in silence: the CSV has the same table.
        print(f"cachecolor: note: pyarrow is not installed, so {out / 'results.parquet'} was not written "
              f"({csv} has the same table); pip install pyarrow", file=sys.stderr)
        return files
    pq = out / "results.parquet"
    frame = table.copy()
    for c in frame.columns:
        if frame[c].dtype == object:
            # A column of mixed scalars (a swept value given as 4 and "8MiB") as text.
            kinds = {type(v) for v in frame[c] if v is not None and v == v}
            if len(kinds) > 1:
                frame[c] = frame[c].map(lambda v: None if v is None else str(v))
    with open_output(pq, binary=True) as f:
        frame.to_parquet(f, index=False)
    files.append(pq)
    return files


def results_of(out_dir: PathLike, prepared: Sequence[Prepared]) -> list[tuple[Prepared, SystemResult]]:
    """The finished points of ``prepared`` with their results (for reports)."""
    out = []
    for p in prepared:
        rec = read_point(Path(out_dir), p.key)
        if rec is not None and rec.get("status") == "ok":
            out.append((p, SystemResult(rec["result"])))
    return out
