"""Every OS policy's report against its TypedDict in ``_core.pyi`` (issue 26 item 4).

Each Rust policy's ``policy_report`` is a struct of ``crates/sim/src/policy/NAME/report.rs``;
the stub mirrors it as ``<Policy>Report`` (``mrc-partition`` -> ``MrcPartitionReport``), and a
policy with no such TypedDict reports null. Here every policy the registry exports
(``_core.POLICIES``) runs on short example configs chosen so its report's lists are not empty,
and each report is walked against its TypedDict: a dict's keys must be exactly the TypedDict's
(required ones present, no key it does not name), lists and tuples item by item, ``int`` /
``float`` / ``bool`` / ``str`` / ``Literal`` / ``None`` as the values are. A field added on one
side only fails here. Every TypedDict reachable from a report must be seen at least once with
data, so a nested struct cannot drift unseen behind an empty list.

The stub is not importable (the compiled module is), so it is executed here with postponed
annotations (its function signatures use ``X | None``, which Python 3.9 cannot evaluate) and
its TypedDicts' hints resolved in its namespace.
"""

from __future__ import annotations

import __future__
import copy
import math
import typing
from pathlib import Path
from typing import Any, Literal, Optional, Union, get_args, get_origin

import pytest

import cachecolor
from cachecolor import _core
from cachecolor.system import load_system_config
from conftest import load_tool

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
STUB = Path(cachecolor.__file__).parent / "_core.pyi"

#: At most this many references a run by default: each config's phases are cut in proportion
#: (as the golden test does, crates/sim/tests/golden.rs), which keeps a run under a second.
CAP = 400_000

#: A run: (config under examples/, reference cap or None for the config as written, settings
#: by dotted path).
RunSpec = tuple[str, Optional[int], dict[str, Any]]

#: Where a policy not in `RUNS` runs (two processes sharing a cache).
DEFAULT_RUNS: list[RunSpec] = [("azimi/corun.toml", CAP, {})]

#: The runs of each policy whose report has lists to fill: together they fill every list of it
#: (`test_every_report_typeddict_is_exercised` fails otherwise); the settings are there for that
#: alone, they reproduce nothing.
RUNS: dict[str, list[RunSpec]] = {
    "static": [("coloris/isolation-light.toml", CAP, {})],
    # corun's programs no longer reach the LLC-MPKI target at this cap; a stream beside a
    # reused array is searched within it.
    # ... and the kept pages confirmed (`confirm`, off by default) on the whole run.
    "rocs": [("robustness/stream-beside-320k.toml", CAP, {}),
             ("robustness/stream-beside-320k.toml", None, {"policy.rocs.confirm": True})],
    "global-pollute": [("robustness/stream-beside-320k.toml", CAP, {}),
                       ("robustness/stream-beside-320k.toml", None, {"policy.global-pollute.confirm": True})],
    "mrc-partition": [
        # The default window budget affords no window this early (`windows_not_afforded`).
        ("azimi/corun.toml", CAP, {}),
        # Whole, under the ideal PMU: windows bought at once, curves checked against the exact
        # ones, a partition applied, a phase change; a RAM so small the stream's partition runs
        # out of frames.
        (
            "azimi/corun.toml",
            None,
            {
                "policy.mrc-partition.max_window_overhead": 1.0,
                "policy.mrc-partition.always_partition": True,
                "policy.mrc-partition.exact_check": True,
                "memory.ram": "24MiB",
                "pmu.ideal": True,
            },
        ),
        # The same under the realistic PMU: the stream ends before its window is complete
        # (`windows_incomplete`).
        (
            "azimi/corun.toml",
            None,
            {
                "policy.mrc-partition.max_window_overhead": 1.0,
                "policy.mrc-partition.always_partition": True,
                "memory.ram": "24MiB",
            },
        ),
    ],
    # Half length: long enough for a detection to end in clusters and migrations.
    "thread-cluster": [("azimi/sharing.toml", 4_000_000, {})],
    "coloris": [
        ("os/pagewalk-stream.toml", CAP, {}),
        # More processes than sections: colors another core's process owns are handed out and
        # noted (`overlaps`).
        ("coloris/overcommit.toml", None, {}),
    ],
}


def load_stub() -> dict[str, Any]:
    """The stub's namespace, executed (TypedDicts and aliases are real objects there)."""
    ns: dict[str, Any] = {"__name__": "cachecolor_core_stub"}
    code = compile(STUB.read_text(), str(STUB), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, ns)
    return ns


STUB_NS = load_stub()


def report_type_name(policy: str) -> Optional[str]:
    """The policy's report TypedDict: the struct its registry line names (None: it reports null)."""
    return _core.POLICY_REPORTS[policy]


def is_typeddict(tp: Any) -> bool:
    # typing.is_typeddict is 3.10+.
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def hints(td: Any) -> dict[str, Any]:
    return typing.get_type_hints(td, globalns=STUB_NS, localns=STUB_NS)


class Mismatch(AssertionError):
    pass


def check(value: Any, tp: Any, path: str, seen: set[str]) -> None:
    """Raise `Mismatch` naming `path` where `value` does not have type `tp`; add to `seen` the
    TypedDicts met with data."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return
    if tp is None or tp is type(None):
        if value is not None:
            raise Mismatch(f"{path}: {value!r} where the stub says None")
        return
    if is_typeddict(tp):
        if not isinstance(value, dict):
            raise Mismatch(f"{path}: {type(value).__name__} where the stub says {tp.__name__}")
        required, optional = set(tp.__required_keys__), set(tp.__optional_keys__)
        missing, extra = required - set(value), set(value) - required - optional
        if missing or extra:
            raise Mismatch(
                f"{path} ({tp.__name__}): keys the stub has and the report lacks {sorted(missing)}, "
                f"keys the report has and the stub lacks {sorted(extra)}"
            )
        seen.add(tp.__name__)
        types = hints(tp)
        for k, v in value.items():
            check(v, types[k], f"{path}.{k}", seen)
        return
    if origin is Union:
        if value is None and type(None) in args:
            return
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                check(value, a, path, seen)
                return
            except Mismatch as e:
                errors.append(str(e))
        raise Mismatch("; ".join(errors))
    if origin is Literal:
        if value not in args:
            raise Mismatch(f"{path}: {value!r} is not one of {args}")
        return
    if origin is list:
        if not isinstance(value, list):
            raise Mismatch(f"{path}: {type(value).__name__} where the stub says a list")
        for i, item in enumerate(value):
            check(item, args[0], f"{path}[{i}]", seen)
        return
    if origin is tuple:
        if not isinstance(value, list) or len(value) != len(args):
            raise Mismatch(f"{path}: {value!r} where the stub says a tuple of {len(args)}")
        for i, (item, a) in enumerate(zip(value, args)):
            check(item, a, f"{path}[{i}]", seen)
        return
    if origin is dict:
        if not isinstance(value, dict):
            raise Mismatch(f"{path}: {type(value).__name__} where the stub says a dict")
        for k, v in value.items():
            check(k, args[0], f"{path} key", seen)
            check(v, args[1], f"{path}[{k!r}]", seen)
        return
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        # serde writes an f64 as `1.0`, never `1`: an int here is an integer field on the Rust side.
        ok = isinstance(value, float) and math.isfinite(value)
    elif tp is str:
        ok = isinstance(value, str)
    else:
        raise AssertionError(f"{path}: the checker does not know {tp!r}")
    if not ok:
        raise Mismatch(f"{path}: {value!r} where the stub says {getattr(tp, '__name__', tp)}")


def reachable(tp: Any, out: set[str]) -> set[str]:
    """The TypedDicts `tp` is made of (itself included)."""
    if is_typeddict(tp):
        if tp.__name__ in out:
            return out
        out.add(tp.__name__)
        for h in hints(tp).values():
            reachable(h, out)
        return out
    for a in get_args(tp):
        reachable(a, out)
    return out


def config(rel: str, cap: Optional[int], settings: dict[str, Any]) -> dict[str, Any]:
    """`examples/REL` with every phase's references divided so the run makes at most `cap`,
    and `settings` (dotted paths) set."""
    cfg = copy.deepcopy(load_system_config(EXAMPLES / rel))
    for path, value in settings.items():
        *tables, key = path.split(".")
        node = cfg
        for t in tables:
            node = node.setdefault(t, {})
        node[key] = value
    if cap is None:
        return cfg
    phases = []  # (repeat, phase)
    for proc in cfg["processes"]:
        for thread in proc.get("threads", []):
            workload = thread.get("workload") or {}
            phases += [(workload.get("repeat", 1), p) for p in workload.get("phases", []) if "references" in p]
    total = sum(repeat * p["references"] for repeat, p in phases)
    div = -(-total // cap) if total else 1
    for _, p in phases:
        p["references"] = max(1, p["references"] // div)
    return cfg


_REPORTS: dict[str, list[Any]] = {}


def reports(policy: str) -> list[Any]:
    if policy not in _REPORTS:
        _REPORTS[policy] = [
            cachecolor.simulate_system(config(*run), policy=policy).policy_report
            for run in RUNS.get(policy, DEFAULT_RUNS)
        ]
    return _REPORTS[policy]


def test_runs_name_registered_policies():
    assert set(RUNS) <= set(_core.POLICIES)


@pytest.mark.parametrize("policy", _core.POLICIES)
def test_policy_report_matches_its_typeddict(policy):
    name = report_type_name(policy)
    assert name is None or name in STUB_NS, f"{name} is not in _core.pyi: run make docs-tables"
    tp = STUB_NS[name] if name else None
    for i, report in enumerate(reports(policy)):
        where = f"{policy} on {RUNS.get(policy, DEFAULT_RUNS)[i][0]}"
        if tp is None:
            assert report is None, f"{where} reports a {type(report).__name__}: name its struct in its registry line"
        else:
            check(report, tp, where, set())


@pytest.mark.parametrize("policy", [p for p in _core.POLICIES if report_type_name(p)])
def test_every_report_typeddict_is_exercised(policy):
    tp = STUB_NS[report_type_name(policy)]
    seen: set[str] = set()
    for report in reports(policy):
        check(report, tp, policy, seen)
    assert reachable(tp, set()) - seen == set(), "TypedDicts no run of RUNS filled: add a config that does"


def test_policy_report_union_names_every_report():
    typed = {STUB_NS[report_type_name(p)] for p in _core.POLICIES if report_type_name(p)}
    assert set(get_args(STUB_NS["PolicyReport"])) == typed | {type(None)}


def _report_stubs():
    return load_tool("report_stubs")


def test_the_report_typeddicts_are_generated_from_the_rust_structs():
    # tools/report_stubs.py (make docs-tables) writes the block between the stub's markers from
    # the registry's report schemas; a field added, removed or retyped in Rust fails here.
    assert _report_stubs().problems() == []


def test_the_stub_check_sees_a_struct_that_drifted():
    stubs = _report_stubs()
    schemas = stubs.schemas()
    text = STUB.read_text()
    # A field the Rust struct gained, and one whose type changed.
    drifted = copy.deepcopy(schemas)
    drifted["coloris"]["properties"]["new_figure"] = {"type": "integer"}
    assert stubs.problems(text, drifted) != []
    retyped = copy.deepcopy(schemas)
    retyped["coloris"]["properties"]["unit"] = {"type": "number"}
    found = stubs.problems(text, retyped)
    assert found and "unit: float" in found[0]
    assert stubs.problems(text, schemas) == []


def test_a_struct_the_stub_cannot_express_is_refused():
    stubs = _report_stubs()
    root = {"title": "XReport", "type": "object", "properties": {"inline": {"type": "object", "properties": {"a": {"type": "integer"}}}}}
    with pytest.raises(stubs.SchemaError):
        stubs.render({"x": root})
