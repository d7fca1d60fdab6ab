"""A Python port of the Rust `static` policy (crates/sim/src/policy/static_sections.rs), COLORIS
section 3.2's static page color management: the colors are cut into one contiguous section per
core; a process with colors of its own in the config keeps them, any other gets the section of
the least-loaded core (fewest processes assigned, lowest core on ties) and is pinned there.

Run it:  cachecolor simulate examples/coloris/isolation-light.toml --policy examples/python/static_sections.py:StaticSections
tests/test_pypolicy.py checks that every report is identical to the Rust policy's.
"""

from __future__ import annotations

from typing import Optional

import cachecolor


def sections(cores: int, colors: int, usable: list[int]) -> list[frozenset[int]]:
    """`usable` cut into one section of contiguous colors per core, the last taking the rest
    (the Rust `sections`, same rounding)."""
    cores = max(cores, 1)
    n = len(usable)
    per = max(n // cores, 1)
    out = []
    for c in range(cores):
        start = min(c * per, max(n - 1, 0))
        end = n if c == cores - 1 else min((c + 1) * per, n)
        out.append(frozenset(usable[start : max(end, start + 1)]))
    return out


class StaticSections(cachecolor.Policy):
    name = "py-static"

    def setup(self, machine: cachecolor.Machine) -> None:
        super().setup(machine)
        self.sections = sections(machine.cores, machine.colors, list(range(machine.colors)))
        self.load = [0] * len(self.sections)
        # pid -> (colors, the core it was pinned to or None)
        self.assigned: dict[int, tuple[frozenset[int], Optional[int]]] = {}

    def process_created(self, process: cachecolor.ProcessInfo) -> Optional[list[int]]:
        if process.colors is not None:
            self.assigned[process.pid] = (frozenset(process.colors), None)
            return None
        core = min(range(len(self.load)), key=lambda c: (self.load[c], c))
        self.load[core] += 1
        self.assigned[process.pid] = (self.sections[core], core)
        return [core]

    def process_exited(self, pid: int) -> None:
        _, core = self.assigned.pop(pid, (None, None))
        if core is not None:
            self.load[core] -= 1

    def allowed_colors(self, pid: int, vpn: int) -> frozenset[int]:
        # The same frozenset object each time: the adapter converts it once.
        return self.assigned[pid][0]
