"""OS cache-management policies written in Python (docs/policies.md, "Policies written in Python").

A subclass of ``Policy`` defines some of the hooks the Rust ``Policy`` trait has
(crates/sim/src/policy/mod.rs); the simulator calls them as it calls a Rust policy's, through
the adapter in crates/py/src/policy.rs, and the hooks act on the system through the ``Kernel``
they are handed (the Rust ``Kernel`` trait's actions, each charged as for a Rust policy)::

    import cachecolor

    class Halves(cachecolor.Policy):
        name = "halves"

        def allowed_colors(self, pid, vpn):
            half = self.machine.colors // 2
            return range(half) if pid % 2 == 0 else range(half, self.machine.colors)

    cachecolor.simulate_system("examples/os/colors-overlap.toml", policy=Halves)

Contract:

- The run releases the GIL and takes it back only to call a hook this class (or a subclass of
  ``Policy`` between) defines. A hook left to ``Policy``'s default is never called: the adapter
  answers it in Rust (every color for ``allowed_colors``, no pin for ``process_created``, nothing
  for the others), so it costs what the same no-op hook of a Rust policy costs.
- A hook's ``kernel`` is valid only while that hook runs: keeping it and using it later raises
  ``RuntimeError``. A refused action raises ``cachecolor.KernelError``.
- An exception raised by a hook ends the run and is raised from ``simulate_system`` with its
  traceback; so is a bad value returned by a hook (a color that does not exist, a core that does
  not exist).
- Runs are deterministic as long as the hooks are (no wall clock, no unseeded randomness).
- A policy object carries state across the run; ``simulate_system`` makes a new one from a class
  or a name for each run. Pass an instance only for one run.

A policy is named for the CLI and ``simulate_system(policy=...)`` by ``register_policy(name)``,
or referred to as ``module:Class`` (a module importable from the current directory or
``sys.path``) or ``path/to/file.py:Class``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, TypeVar, Union

from . import _core

if TYPE_CHECKING:
    from ._core import Kernel, Machine, ProcessInfo, Sample, SchedEvent, Tick

#: The hooks the adapter may call; ``Policy._defined_hooks`` reports which a class overrides.
HOOKS = (
    "check_processes",
    "process_created",
    "process_exited",
    "allowed_colors",
    "out_of_colors",
    "tick",
    "sample",
    "scheduled",
    "report",
)


class Policy:
    """Base class of a policy written in Python. Override the hooks you need.

    ``name`` (class attribute) names the policy in the report (``policy``); it defaults to the
    class name. ``counter_events`` (class attribute) names the PMU events the policy reads at
    its ticks (names from ``cachecolor.EVENTS``), as a Rust policy's ``counter_events``: a
    realistic PMU (``[pmu] ideal = false``) programs them on every core's counters, multiplexed
    with ``[pmu] events``; an event nobody asked for reads 0 there (docs/policies.md, "What a
    policy's counters give"). ``machine`` is set by ``setup`` before any other hook is called.
    """

    name: Optional[str] = None
    counter_events: Sequence[str] = ()
    machine: "Machine"

    @property
    def policy_name(self) -> str:
        """The name the report gives this policy."""
        return self.name or type(self).__name__

    @classmethod
    def _defined_hooks(cls) -> list[str]:
        """The hooks ``cls`` overrides (the adapter calls only these)."""
        return [h for h in HOOKS if getattr(cls, h) is not getattr(Policy, h)]

    def setup(self, machine: "Machine") -> None:
        """Called once before the run with the machine (``cores``, ``chips``, ``colors``,
        ``llc_size``, ``llc_ways``, ``line_size``, ``page_size``), as a Rust policy's
        constructor gets ``MachineInfo``. Stores it as ``self.machine``; an override should
        call ``super().setup(machine)``."""
        self.machine = machine

    def check_processes(self, names: list[str]) -> None:
        """Before any process starts: the config's process names in pid order. Raise (e.g.
        ``cachecolor.ConfigError``) to reject parameters naming a process that does not exist."""

    def process_created(self, process: "ProcessInfo") -> Optional[Sequence[int]]:
        """A process was created (``pid``, ``name``, ``colors`` from its config or None,
        ``pinned`` cores from its config or None). Return the cores to pin its threads to, or
        None to leave it as configured. Default: None."""
        return None

    def process_exited(self, pid: int) -> None:
        """A process exited (all its frames are already free)."""

    def allowed_colors(self, pid: int, vpn: int) -> Iterable[int]:
        """The LLC colors page ``vpn`` of process ``pid`` may be placed in (page-fault path:
        called at every first touch and every lazy recolor). Any iterable of color numbers;
        return the same ``frozenset`` (or ``tuple``) object again to spare its conversion.
        Default: every color (as the ``linux`` policy)."""
        return range(self.machine.colors)

    def out_of_colors(self, pid: int) -> bool:
        """The fault path found no free frame in any color ``allowed_colors`` gave ``pid``.
        Return True after widening the process's colors: the fault asks ``allowed_colors``
        again and retries once (COLORIS section 3.2). Default: False."""
        return False

    def tick(self, kernel: "Kernel", tick: "Tick") -> None:
        """The periodic tick (``[scheduler] tick`` cycles): ``tick.now``, ``tick.interval``,
        ``tick.cores`` (per core, its counters' ``Reading``s as software reads them) and
        ``tick.processes`` (``ProcessCounts``: ``pid``, ``alive``, ``total`` and ``interval``
        dicts of event name -> count, and ``readings``). The counts are exact under the ideal
        PMU (``[pmu] ideal = true``) and estimates under the realistic one (the default): each
        event's raw count scaled by its time enabled over time running, so two events counted
        in different slices of time can disagree (misses above accesses), and an event not on a
        counter reads 0; ``readings`` then has each event's ``raw``, ``time_enabled`` and
        ``time_running``, summed over the process's threads (docs/policies.md)."""

    def sample(self, kernel: "Kernel", sample: "Sample") -> None:
        """A PMU sample (``[pmu.sampling]``, or sampling the policy programmed with
        ``kernel.set_sampling``): ``core``, ``thread``, ``pid``, ``write``, ``vaddr``, ``paddr``,
        ``source`` ("cache", "remote", "memory"), ``level``, ``cycle``."""

    def scheduled(self, kernel: "Kernel", event: "SchedEvent") -> None:
        """A scheduler event: ``kind`` "switch" (``tid`` starts on ``core`` after ``previous``),
        "migrated" (``tid`` moved to ``core`` from core ``previous``) or "exited" (``tid``
        finished)."""

    def report(self) -> Any:
        """What the policy decided and measured, JSON-serialisable; becomes the report's
        ``policy_report``. Default: None."""
        return None


P = TypeVar("P", bound=type)

_REGISTRY: dict[str, type] = {}


def register_policy(name: str, cls: Optional[type] = None) -> Any:
    """Name a ``Policy`` subclass so ``simulate_system(policy=name)`` and ``cachecolor simulate
    --policy name`` (with the module imported) find it. Usable as a decorator:
    ``@register_policy("halves")``. A name of a Rust policy cannot be taken."""

    def add(c: P) -> P:
        if not (isinstance(c, type) and issubclass(c, Policy)):
            raise TypeError(f"register_policy({name!r}): {c!r} is not a subclass of cachecolor.Policy")
        if name in rust_policy_names():
            raise ValueError(f"policy name {name!r} is a built-in policy's")
        if ":" in name:
            raise ValueError(f"policy name {name!r}: ':' is reserved for module:Class")
        _REGISTRY[name] = c
        return c

    return add if cls is None else add(cls)


def rust_policy_names() -> list[str]:
    """The policies built into the simulator (the Rust registry, ``_core.POLICIES``)."""
    return list(_core.POLICIES)


def registered_policies() -> dict[str, type]:
    """The Python policies registered by name."""
    return dict(_REGISTRY)


PolicySpec = Union[str, type, Policy]


def _bad(spec: str, why: str) -> _core.ConfigError:
    e = _core.ConfigError(f"policy {spec!r}: {why}")
    e.field = "policy.name"
    return e


def _load_class(spec: str) -> type:
    """``module:Class`` or ``path/file.py:Class`` -> the class (ConfigError naming what is wrong)."""
    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise _bad(spec, "expected module:Class or path/file.py:Class")
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = Path(where)
        if not path.is_file():
            raise _bad(spec, f"no file {where}")
        name = f"cachecolor_policy_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise _bad(spec, f"cannot load {where} as a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # the user's module failing to import is bad input
            sys.modules.pop(name, None)
            raise _bad(spec, f"importing {where} failed: {type(e).__name__}: {e}") from e
    else:
        # As `python -m`: the current directory first, so a module beside the config is found.
        added = os.getcwd() not in sys.path
        if added:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            if e.name is not None and (e.name == where or where.startswith(e.name + ".")):
                raise _bad(spec, f"no module named {e.name!r} (looked in the current directory and sys.path)") from e
            raise _bad(spec, f"importing {where} failed: {type(e).__name__}: {e}") from e
        except Exception as e:
            raise _bad(spec, f"importing {where} failed: {type(e).__name__}: {e}") from e
        finally:
            if added:
                sys.path.remove(os.getcwd())
    cls = getattr(module, attr, None)
    if cls is None:
        raise _bad(spec, f"{where} has no attribute {attr!r}")
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise _bad(spec, f"{where}.{attr} is not a subclass of cachecolor.Policy")
    return cls


def resolve_policy(spec: PolicySpec) -> Optional[Policy]:
    """A policy object for ``spec``, or None when ``spec`` names a Rust policy.

    ``spec``: a ``Policy`` instance (used as it is), a subclass (instantiated with no
    arguments), a registered name, ``module:Class`` or ``path/file.py:Class``."""
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, type):
        if not issubclass(spec, Policy):
            raise TypeError(f"policy {spec!r} is not a subclass of cachecolor.Policy")
        return spec()
    if not isinstance(spec, str):
        raise TypeError(f"policy {spec!r}: expected a name, module:Class, a Policy subclass or instance")
    if spec in _REGISTRY:
        return _REGISTRY[spec]()
    if ":" in spec:
        return _load_class(spec)()
    return None


__all__ = [
    "HOOKS",
    "Policy",
    "PolicySpec",
    "register_policy",
    "registered_policies",
    "resolve_policy",
    "rust_policy_names",
]
