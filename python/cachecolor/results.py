"""``Result``: what a simulation returns, as a dict (the JSON document the CLI writes) and as
pandas frames for notebooks.

The document (``Result.to_dict()``, ``cachecolor simulate --json``)::

    version      cachecolor version that ran
    config       the effective config (every default filled in)
    source       {"kind": "trace", "path", "format"} | {"kind": "workload"} | {"kind": "arrays"}
    levels       per level, in hierarchy order: name, accesses, hits, misses, miss_rate,
                 load/store/ifetch/modify {accesses, hits, misses}, evictions, writebacks,
                 writebacks_received, writeback_fills, write_throughs, prefetches_issued,
                 prefetches_useful, prefetch_accesses, prefetch_misses, back_invalidations,
                 victim_fills, and user / privileged {accesses, hits, misses, miss_rate,
                 evictions}: the demand traffic split by the mode of the record that made it
                 (``Record.privileged``), evictions by the mode of the demand access whose fill
                 (or the write-back, victim or prefetch fill it set off) caused them; user =
                 total - privileged (Nellans et al. sections 3 and 5; docs/cache.md)
    memory       {"reads", "writes"}: lines read from / written to memory
    records, line_accesses, unserved
    invariants   violated accounting invariants (empty when all hold; DESIGN.md principle 4)

Contract: a ``Result`` never changes after it is made; ``to_dict`` returns a deep copy.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, Union

from .tables import text_table  # noqa: F401  (the CLI's text tables: cachecolor.tables)

KINDS = ("load", "store", "ifetch", "modify")
MODES = ("user", "privileged")


def save_figure(fig: Any, path: Union[str, Path], dpi: int = 120) -> Path:
    """Lay out a matplotlib figure, write it to ``path`` and close it (the report plots)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    from ._output import save_figure as save_under_contract

    save_under_contract(fig, path, dpi=dpi)
    plt.close(fig)
    return Path(path)


class Result:
    """The outcome of one simulation."""

    def __init__(self, doc: dict[str, Any]):
        self._doc = doc

    @property
    def version(self) -> str:
        """The cachecolor version that produced this result."""
        return self._doc["version"]

    @property
    def effective_config(self) -> dict[str, Any]:
        """The config the run used, every default filled in."""
        return copy.deepcopy(self._doc["config"])

    @property
    def records(self) -> int:
        """Records simulated."""
        return self._doc["records"]

    @property
    def memory(self) -> dict[str, int]:
        """Lines read from and written to memory below the last level."""
        return dict(self._doc["memory"])

    @property
    def invariants(self) -> list[str]:
        """Violated invariants (empty when every check held)."""
        return list(self._doc["invariants"])

    @property
    def level_names(self) -> list[str]:
        return [lv["name"] for lv in self._doc["levels"]]

    def level(self, name: str) -> dict[str, Any]:
        """The statistics of the level called ``name``."""
        for lv in self._doc["levels"]:
            if lv["name"] == name:
                return copy.deepcopy(lv)
        raise KeyError(f"no level {name!r}; levels are {', '.join(self.level_names)}")

    @property
    def levels(self):
        """A pandas DataFrame, one row per level in hierarchy order, indexed by level name.

        Columns: accesses, hits, misses, miss_rate, evictions, writebacks, ..., and the per-kind
        counts flattened as ``load_accesses``, ``load_hits``, ``load_misses``, ``store_...``, the
        per-mode ones as ``user_accesses``, ..., ``privileged_evictions``.
        """
        import pandas as pd

        rows = []
        for lv in self._doc["levels"]:
            row = {}
            for key, value in lv.items():
                if key in KINDS or key in MODES:
                    for sub, count in value.items():
                        row[f"{key}_{sub}"] = count
                else:
                    row[key] = value
            rows.append(row)
        frame = pd.DataFrame(rows).set_index("name")
        frame.index.name = "level"
        return frame

    def to_dict(self) -> dict[str, Any]:
        """The whole result document (a deep copy), as ``--json`` writes it."""
        return copy.deepcopy(self._doc)

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the result document to ``path`` atomically (temporary file, then rename)."""
        write_json_atomic(path, self._doc)

    def table(self) -> str:
        """A plain-text table of the per-level statistics."""
        return format_table(self._doc)

    def __repr__(self) -> str:
        levels = ", ".join(f"{lv['name']}: {lv['misses']}/{lv['accesses']} misses" for lv in self._doc["levels"])
        return f"<cachecolor.Result {self.records} records; {levels}>"


def format_table(doc: dict[str, Any]) -> str:
    """Per-level statistics as an aligned text table."""
    header = ["level", "accesses", "hits", "misses", "miss rate", "evictions", "writebacks"]
    rows = [
        [
            lv["name"],
            f"{lv['accesses']:,}",
            f"{lv['hits']:,}",
            f"{lv['misses']:,}",
            f"{100.0 * lv['miss_rate']:.2f}%",
            f"{lv['evictions']:,}",
            f"{lv['writebacks']:,}",
        ]
        for lv in doc["levels"]
    ]
    lines = text_table(header, rows, left=1)
    mem = doc.get("memory", {})
    lines.append(f"memory: {mem.get('reads', 0):,} line reads, {mem.get('writes', 0):,} line writes")
    lines.extend(format_modes(doc["levels"]))
    return "\n".join(lines)


def has_privileged(level: dict[str, Any]) -> bool:
    """Whether privileged records reached a level (accessed it or caused an eviction there)."""
    p = level.get("privileged") or {}
    return bool(p.get("accesses") or p.get("evictions"))


def format_modes(levels: list[dict[str, Any]]) -> list[str]:
    """The per-level split by mode as table lines, or nothing when no privileged record reached
    any level (a user-only trace)."""
    if not any(has_privileged(lv) for lv in levels):
        return []
    header = ["level", "mode", "accesses", "misses", "miss rate", "evictions", "of evictions"]
    rows = []
    for lv in levels:
        for mode in MODES:
            m = lv[mode]
            share = m["evictions"] / lv["evictions"] if lv["evictions"] else 0.0
            rows.append([
                lv["name"] if mode == "user" else "",
                mode,
                f"{m['accesses']:,}",
                f"{m['misses']:,}",
                f"{100.0 * m['miss_rate']:.2f}%",
                f"{m['evictions']:,}",
                f"{100.0 * share:.1f}%",
            ])
    return ["by mode (evictions by the mode of the access that caused them):", *text_table(header, rows, left=2)]


def write_json_atomic(path: Union[str, "os.PathLike[str]"], obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` under the output contract (``cachecolor._output``): a
    regular file is replaced only when complete (unique temporary file, removed on any failure),
    a device or FIFO is written in place, ``-`` is stdout, a directory is refused."""
    from ._output import write_json

    write_json(path, obj)
