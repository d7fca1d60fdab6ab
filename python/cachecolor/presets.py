"""Machine presets: the papers' machines and this host, as configs.

Whole-system machines (``[machine]`` tables, crates/sim/presets/ and crates/sim/src/system/presets.rs):

- ``machine_names()``: the presets (``ppc970fx``, ``power5``, ``xeon-e5506``, ``core-i3-2100``,
  ``opteron-2427``, ``power7-740``, ``core-i7-720qm``) and ``detect``.
- ``machine(name)``: a preset's ``[machine]`` table as a dict (``detect``: this host's, built
  from sysfs; ``cpu_dir`` reads another sysfs CPU directory). A system config can name one
  instead: ``[machine] preset = "xeon-e5506"``, its other ``[machine]`` keys overriding the
  preset's (tables merged, arrays replaced).
- ``machine_toml(name)``: the same table as TOML, a preset's file with the paper section or vendor
  document behind every number in comments (what ``cachecolor machine NAME`` prints).
- ``machine_summaries()``: chips, cores, level geometry and LLC colors of every preset.

Cache-only hierarchies (``[hierarchy]`` configs for ``simulate``):

- ``detect()``: this machine's hierarchy, from the caches sysfs lists for CPU 0
  (``/sys/devices/system/cpu/cpu0/cache``, read by the Rust bench crate), modelled as one core:
  L1I/L1D/L2 private, the last level shared, LRU, non-inclusive. Falls back to ``builtin()`` when
  sysfs says nothing usable (containers, non-Linux) or describes a geometry the simulator
  rejects; ``describe_source`` says which happened.
- ``builtin()``: a typical recent x86 core (L1I 32 KiB 8-way, L1D 48 KiB 12-way, L2 2 MiB 16-way,
  L3 32 MiB 16-way, 64 B lines), the same shape as examples/demo/demo.toml.

- ``machine_hierarchy(table)``: a ``[machine]`` table's caches (preset merged) as a cache-only
  config, what ``cachecolor simulate MACHINE.toml --trace T`` runs.

Contract: each returns an effective config dict (checked by the Rust core), ready for
``simulate``. Replacement is LRU everywhere: real caches use undisclosed PLRU variants, so a
preset models geometry, not the exact policy. Unknown machine names raise ``ConfigError``
listing the valid ones; ``detect`` raises ``ConfigError`` saying what sysfs lacked.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional, Union

from . import _core
from .config import load_config

_NAMES = {"Instruction": ("I", "instruction"), "Data": ("D", "data"), "Unified": ("", "unified")}


def _level(name: str, size: int, ways: int, serves: str) -> dict[str, Any]:
    return {"name": name, "size": size, "ways": ways, "policy": "lru", "serves": serves}


def builtin() -> dict[str, Any]:
    """A typical recent x86 core's hierarchy (used when the host's cannot be read)."""
    return load_config(
        {
            "hierarchy": {
                "line_size": 64,
                "inclusion": "non-inclusive",
                "levels": [
                    _level("L1I", 32 << 10, 8, "instruction"),
                    _level("L1D", 48 << 10, 12, "data"),
                    _level("L2", 2 << 20, 16, "unified"),
                    _level("L3", 32 << 20, 16, "unified"),
                ],
            }
        }
    )


def host_hierarchy() -> Optional[dict[str, Any]]:
    """This machine's hierarchy as a config, or None when sysfs does not describe a usable one."""
    caches = _core.host_caches()
    if not caches:
        return None
    line_sizes = {c[4] for c in caches}
    if len(line_sizes) != 1:
        return None
    levels = []
    for level, kind, size, ways, _line, _shared_by in caches:
        suffix, serves = _NAMES.get(kind, ("", "unified"))
        levels.append(_level(f"L{level}{suffix}", size, ways, serves))
    try:
        return load_config(
            {"hierarchy": {"line_size": line_sizes.pop(), "inclusion": "non-inclusive", "levels": levels}}
        )
    except _core.ConfigError:
        return None


def detect() -> dict[str, Any]:
    """This machine's hierarchy if it can be read, else ``builtin()``."""
    return host_hierarchy() or builtin()


def describe_source() -> str:
    """Where ``detect()`` gets its hierarchy from, for reports."""
    if host_hierarchy() is not None:
        return "this machine (sysfs: /sys/devices/system/cpu/cpu0/cache)"
    return "built-in preset (typical x86 core; this machine's caches could not be read)"


# ---------------------------------------------------------------------------------------------
# whole-system machines

_CpuDir = Optional[Union[str, "os.PathLike[str]"]]


def machine_names() -> list[str]:
    """Every name ``[machine] preset`` and ``machine()`` accept: the presets, then ``detect``."""
    return list(_core.machine_names())


def machine(name: str, cpu_dir: _CpuDir = None) -> dict[str, Any]:
    """The ``[machine]`` table of a preset (or of ``detect``: this host, from sysfs) as a dict.

    ``cpu_dir`` makes ``detect`` read another sysfs CPU directory than
    ``/sys/devices/system/cpu`` (a fake tree in tests, or a copy of another machine's)."""
    return json.loads(_core.machine_json(name, None if cpu_dir is None else os.fspath(cpu_dir)))


def machine_toml(name: str, cpu_dir: _CpuDir = None) -> str:
    """The ``[machine]`` table as TOML text: a preset's file with its sources in comments, or the
    detected host's (what ``cachecolor machine NAME`` prints)."""
    return _core.machine_toml(name, None if cpu_dir is None else os.fspath(cpu_dir))


def machine_summaries(name: Optional[str] = None, cpu_dir: _CpuDir = None) -> list[dict[str, Any]]:
    """Every preset's chips, cores per chip, line and page size, levels (name, size, ways,
    slices, shared, serves, colors) and ``llc_colors``; with ``name``, that machine's only."""
    return json.loads(_core.machine_summaries(name, None if cpu_dir is None else os.fspath(cpu_dir)))



def _merged(base: Any, over: Any) -> Any:
    """``over`` on ``base`` as ``[machine] preset`` merges (tables key by key, anything else
    replaced: crates/sim/src/system/presets.rs ``merge``)."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merged(base.get(k), v) if k in base else v
        return out
    return over


def machine_hierarchy(table: Any, cpu_dir: _CpuDir = None) -> dict[str, Any]:
    """The cache hierarchy of a ``[machine]`` table (a preset named by ``preset``, ``detect``
    included, with the table's other keys merged over it, or a whole table such as ``cachecolor
    machine --detect`` prints) as an effective cache-only config, for simulating a trace on a
    machine's caches. One chip: its cores and levels, private and shared as the machine has them.
    Raises ``ConfigError`` if the table has no hierarchy."""
    if not isinstance(table, dict):
        raise _core.ConfigError("[machine]: expected a table")
    over = dict(table)
    name = over.pop("preset", None)
    full = _merged(machine(str(name), cpu_dir), over) if name is not None else over
    hierarchy = full.get("hierarchy")
    if not isinstance(hierarchy, dict):
        raise _core.ConfigError("[machine] has no [machine.hierarchy] (and no preset): no caches to simulate the trace on")
    return load_config({"hierarchy": hierarchy})
