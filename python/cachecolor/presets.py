"""Machine presets: hierarchies to simulate on, as configs.

- ``detect()``: this machine's hierarchy, from the caches sysfs lists for CPU 0
  (``/sys/devices/system/cpu/cpu0/cache``, read by the Rust bench crate), modelled as one core:
  L1I/L1D/L2 private, the last level shared, LRU, non-inclusive. Falls back to ``builtin()`` when
  sysfs says nothing usable (containers, non-Linux) or describes a geometry the simulator
  rejects; ``describe_source`` says which happened.
- ``builtin()``: a typical recent x86 core (L1I 32 KiB 8-way, L1D 48 KiB 12-way, L2 2 MiB 16-way,
  L3 32 MiB 16-way, 64 B lines), the same shape as examples/demo/demo.toml.

Contract: each returns an effective config dict (checked by the Rust core), ready for
``simulate``. Replacement is LRU everywhere: real caches use undisclosed PLRU variants, so a
preset models geometry, not the exact policy.
"""

from __future__ import annotations

from typing import Any, Optional

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
