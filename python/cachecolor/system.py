"""Whole-system runs: cores with TLBs and caches, physical memory and a page allocator, processes
under an OS cache-management policy (crates/sim/src/system).

A system config (TOML) has ``[machine]`` (``preset``, ``chips``, ``[machine.hierarchy]`` with
its ``cores`` per chip and levels, ``[machine.tlb]``, ``[machine.mmu]``, ``[machine.timing]``),
``[memory]`` (``ram``, ``allocator``), ``[policy]`` (``name``), ``[scheduler]`` (``time_slice``,
``tick``, ``balance``), ``[pmu]`` (``counters``, ``events``, ``[pmu.sampling]``) and
``[[processes]]`` (``name``, ``colors``, ``pin``, ``huge_pages``, ``start``, ``[[processes.threads]]`` with
a ``workload`` or a ``trace``). See ``examples/os/`` and docs/system.md.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Union

from . import _core
from .results import format_modes

if TYPE_CHECKING:
    from .policy import PolicySpec

SystemSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]


def load_system_config(source: SystemSource) -> dict[str, Any]:
    """Read a system config (a ``.toml``/``.json`` path or a dict) into a dict, unchecked. Relative
    trace paths of a config read from a file become relative to the file's directory.

    The Rust core checks it when it runs (``simulate_system``)."""
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source))
    from .config import parse_toml, read_config_text

    path = Path(source)
    text = read_config_text(path)
    if path.suffix.lower() != ".json":
        doc = parse_toml(text, str(path))
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise _core.ConfigError(f"{path}: {e}") from None
        except RecursionError:
            raise _core.ConfigError(f"{path}: nested too deeply to read") from None
    if not isinstance(doc, dict):
        raise _core.ConfigError(f"{path}: a config is a table (a JSON object), not {type(doc).__name__}")
    return _traces_relative_to(doc, path.parent)


def _traces_relative_to(doc: Any, base: Path) -> Any:
    """A thread's relative ``trace`` path names a file relative to the config's own directory
    (so a config and its traces move together and run from any working directory)."""
    for _, thread in config_threads(doc):
        trace = thread.get("trace")
        if isinstance(trace, str) and trace and not os.path.isabs(trace):
            thread["trace"] = os.path.join(base, trace)
    return doc


def config_threads(cfg: Any) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (process, thread) table pair of an unchecked system config, in config order.
    What is not a list of tables where one belongs (``threads = 1.5``, ``processes = true``)
    is skipped here: the Rust core's check names the field (it was a TypeError, exit 1)."""
    processes = cfg.get("processes") if isinstance(cfg, dict) else None
    for proc in processes if isinstance(processes, list) else []:
        threads = proc.get("threads") if isinstance(proc, dict) else None
        for thread in threads if isinstance(threads, list) else []:
            if isinstance(thread, dict):
                yield proc, thread


def _table(cfg: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``cfg[key]`` (created empty if absent) when it is a table; a ``ConfigError`` naming the
    field otherwise (``--seed`` with ``memory = []`` used to end in an AttributeError)."""
    v = cfg.setdefault(key, {})
    if not isinstance(v, dict):
        raise _core.ConfigError(f"{where}{key}: expected a table, found {type(v).__name__}")
    return v


def is_system_config(config: Mapping[str, Any]) -> bool:
    """A system config has a ``[machine]`` table and no top-level ``[hierarchy]`` (which makes
    it a cache-only config, where ``[machine]`` is then an unknown table)."""
    return "machine" in config and "hierarchy" not in config


def simulate_system(
    config: SystemSource,
    *,
    policy: "Optional[PolicySpec]" = None,
    seed: Optional[int] = None,
    progress: Optional[Callable[..., None]] = None,
) -> "SystemResult":
    """Run a whole system to the end of every thread; return a ``SystemResult``.

    ``policy`` replaces ``[policy] name``: a built-in policy's name, or a policy written in
    Python (``cachecolor.Policy``): a subclass, an instance, a name given with
    ``register_policy``, ``module:Class`` or ``path/file.py:Class`` (``[policy] name`` may be
    any of these strings too). ``seed`` seeds the page allocator and the hierarchy and gives the
    k-th generated thread (in config order) seed ``seed + k``. ``progress`` is called once per
    scheduler tick with ``(records, bytes, total_bytes, total_records)`` summed over the threads
    (a ``cachecolor.progress.ProgressLine`` fits); the run checks for Ctrl-C there and once per
    block of at most 65,536 records, so ``KeyboardInterrupt`` arrives within a block however long
    a tick is, and nothing is returned of a run cut short.
    """
    cfg = load_system_config(config)
    python_policy = apply_policy_seed(cfg, policy, seed)
    if python_policy is not None:
        doc = _core.simulate_system_policy(json.dumps(cfg), python_policy, "json", progress)
    else:
        doc = _core.simulate_system(json.dumps(cfg), "json", progress)
    return SystemResult(json.loads(doc))


#: A policy name with this suffix runs the policy's control (``rocs+control``).
CONTROL_SUFFIX = "+control"


def policy_label(effective: dict[str, Any], requested: Optional[str] = None) -> str:
    """The policy a run ran, as tables and files name it: the effective config's ``[policy]
    name``, with ``+control`` for the policy's control run (``[policy] control``). The name
    alone had folded a policy's control runs into the policy's own rows (``report --control``
    counted 10 seeds of one policy for 5 asked, and each control's search plot overwrote the
    policy's)."""
    table = effective.get("policy", {})
    name = table.get("name") or (requested or "linux")
    if table.get("control") and not name.endswith(CONTROL_SUFFIX):
        name += CONTROL_SUFFIX
    return name


def policy_warnings(doc: Mapping[str, Any]) -> list[str]:
    """What a run's policy changed or skipped that its numbers alone do not say: the system
    report's ``policy_warnings`` (Rust ``SystemReport::policy_warnings``): the policy report's own
    ``warnings``, then, for a policy that never acted (``Policy::never_acted``: nothing
    partitioned, moved or migrated, so the run is linux's with the policy's costs), a line saying
    so; a control run (``P+control``) is left to its own ``control`` counts. A report stored
    before the field existed gives its policy report's ``warnings``."""
    if "policy_warnings" in doc:
        return [str(w) for w in doc["policy_warnings"] or []]
    report = doc.get("policy_report")
    return [str(w) for w in report.get("warnings") or []] if isinstance(report, dict) else []


def apply_policy_seed(cfg: dict[str, Any], policy: "Optional[PolicySpec]", seed: Optional[int]) -> Any:
    """Apply ``policy`` and ``seed`` to ``cfg`` (changed in place) as ``simulate_system`` does;
    return the policy written in Python that the run needs (None for a built-in one)."""
    from .policy import resolve_policy

    python_policy = None
    if isinstance(policy, str) and policy.endswith(CONTROL_SUFFIX):
        # ``P+control``: the policy's control run (``[policy] control``):
        # its colors as decided, no page or thread moved.
        policy = policy[: -len(CONTROL_SUFFIX)]
        _table(cfg, "policy", "")["control"] = True
    if policy is not None:
        python_policy = resolve_policy(policy)
        if python_policy is None:
            _table(cfg, "policy", "")["name"] = policy
    else:
        table = cfg.get("policy", {})
        name = table.get("name") if isinstance(table, dict) else None
        if isinstance(name, str):
            python_policy = resolve_policy(name)
    if python_policy is not None:
        # The effective config names the Python policy as the report does.
        _table(cfg, "policy", "")["name"] = python_policy.policy_name
    if seed is not None:
        if not 0 <= int(seed) < 2**63:
            raise ValueError(f"seed {seed}: expected 0 <= seed < 2**63")
        _table(cfg, "memory", "")["seed"] = int(seed)
        _table(_table(cfg, "machine", ""), "hierarchy", "machine.")["seed"] = int(seed)
        k = 0
        for _, t in config_threads(cfg):
            if isinstance(t.get("workload"), dict):
                t["workload"]["seed"] = int(seed) + k
                k += 1
    return python_policy


class SystemResult:
    """The report of one system run."""

    def __init__(self, doc: dict[str, Any]):
        self._doc = doc

    @property
    def processes(self) -> "Any":
        """Per-process results as a pandas DataFrame (one row per process)."""
        import pandas as pd

        return pd.DataFrame([_flat(p) for p in self._doc["processes"]])

    @property
    def cores(self) -> "Any":
        """Per-core results as a pandas DataFrame (one row per core; counters left out)."""
        import pandas as pd

        return pd.DataFrame([_flat(c) for c in self._doc["cores"]])

    @property
    def intervals(self) -> "Any":
        """The time series, one row per tick and process: ``time`` (cycles at the interval's
        end), ``process``, ``instructions``, ``cycles``, ``ipc``, ``llc_misses``, ``llc_mpki``,
        ``frames``."""
        import pandas as pd

        rows = []
        for iv in self._doc["intervals"]:
            for p in iv["processes"]:
                row = {"time": iv["time"], "process": p["name"]}
                row.update({k: v for k, v in p.items() if k != "name"})
                rows.append(row)
        return pd.DataFrame(rows)

    def plot_intervals(self, metric: str = "ipc", ax: Any = None) -> Any:
        """Plot one column of the time series (``ipc``, ``llc_mpki``, ``llc_misses``,
        ``instructions``, ``cycles`` or ``frames``) against time, one line per process
        (matplotlib; returns the axes)."""
        import matplotlib.pyplot as plt

        frame = self.intervals
        allowed = ("ipc", "llc_mpki", "llc_misses", "instructions", "cycles", "frames")
        if metric not in allowed:
            raise ValueError(f"metric {metric!r}: allowed {', '.join(allowed)}")
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4.5))
        for name, rows in frame.groupby("process", sort=False):
            ax.plot(rows["time"], rows[metric], label=name, marker=".")
        ax.set_xlabel("cycles")
        ax.set_ylabel(metric.replace("_", " "))
        ax.grid(True, alpha=0.3)
        ax.legend()
        return ax

    @property
    def invariants(self) -> list[str]:
        return list(self._doc["invariants"])

    @property
    def policy_report(self) -> Any:
        """What the policy reported of itself (its own JSON shape; None if it reports nothing)."""
        return self._doc.get("policy_report")

    def warnings(self) -> list[str]:
        """``policy_warnings`` of this run (read in place: ``to_dict`` copies the whole report,
        time series included)."""
        return policy_warnings(self._doc)

    def process(self, name: str) -> dict[str, Any]:
        for p in self._doc["processes"]:
            if p["name"] == name:
                return copy.deepcopy(p)
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._doc)

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the report; the file is replaced only once it is complete."""
        from ._output import write_json

        write_json(path, self._doc)

    def table(self) -> str:
        chips = self._doc.get("chips", 1)
        head = (
            # `LLC MR` a miss rate; `recolored` eager and lazy recolors together (the JSON's
            # `recolors` is the eager ones alone).
            f"{'process':12} {'instructions':>12} {'cycles':>14} {'IPC':>6} {'LLC MR':>9} {'LLC MPKI':>9} "
            f"{'TLB miss':>9} {'walk cyc':>12} {'faults':>7} {'recolored':>9}"
        )
        if chips > 1:
            head += f" {'remote':>9}"
        cores = len(self._doc["cores"])
        lines = [
            # A control run says so (`P+control`; it had read as the policy itself).
            f"policy {policy_label(self._doc.get('config') or {}, self._doc['policy'])}, allocator {self._doc['allocator']}, "
            f"{chips} chip(s), {cores} core(s), {len(self._doc['intervals'])} intervals",
            head,
        ]
        for p in self._doc["processes"]:
            line = (
                f"{p['name'][:12]:12} {p['instructions']:>12,} {p['cycles']:>14,.0f} {p['ipc']:>6.3f} "
                f"{p['llc_miss_rate']:>9.3f} {p['llc_mpki']:>9.2f} {p['tlb_misses']:>9,} "
                f"{p['page_walk_cycles']:>12,.0f} {p['faults']:>7,} {p['recolors'] + p['lazy_recolors']:>9,}"
            )
            if chips > 1:
                line += f" {p['remote_accesses']:>9,}"
            lines.append(line)
        # The chips' cache levels by mode, when privileged records (page-walk reads, kernel
        # copies) reached them.
        lines.extend(format_modes(self._doc.get("levels", [])))
        return "\n".join(lines)


def _flat(entry: Mapping[str, Any]) -> dict[str, Any]:
    """One process or core of the report as a flat row: ``stall_<cause>``,
    ``<level>_accesses/_misses/_miss_rate/_mpki`` per level, ``kernel_<path>_count/_cycles``;
    lists (``pages_per_color``) stay as they are, the counters' readings are left out."""
    row: dict[str, Any] = {}
    for k, v in entry.items():
        if k == "stalls":
            row.update({f"stall_{c}": x for c, x in v.items()})
        elif k == "levels":
            for level in v:
                for field in ("accesses", "misses", "miss_rate", "mpki"):
                    row[f"{level['name']}_{field}"] = level[field]
        elif k == "kernel":
            for path, t in v.items():
                row[f"kernel_{path}_count"] = t["count"]
                row[f"kernel_{path}_cycles"] = t["cycles"]
        elif k != "counters":
            row[k] = v
    return row
