"""The plug-in registries (issue 26 item 1; crates/sim/src/registry.rs) seen from Python: every
name of every registry round-trips through config parsing, the CLI's choices and help, and
``_core``'s lists, and nothing in the Python front spells a list of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import cachecolor
from cachecolor import _core, cli, placement
from conftest import load_tool, two_level_machine

REGISTRIES = ("POLICIES", "ALLOCATORS", "REPLACEMENT_POLICIES", "TRACE_FORMATS", "PREFETCHERS")

# A one-core machine and one small process: every policy (with a color-placing allocator)
# and every allocator (under linux) runs it.
SYSTEM = two_level_machine(l1="4KiB", l1_ways=4, llc="64KiB", llc_ways=4) + """[memory]
ram = "16MiB"
allocator = "{allocator}"
[policy]
name = "{policy}"
[[processes]]
name = "p"
[[processes.threads]]
workload = {{ seed = 1, phases = [{{ pattern = "uniform", footprint = "64KiB", references = 2000 }}] }}
"""


def _help(*args: str) -> str:
    run = subprocess.run([sys.executable, "-m", "cachecolor", *args, "--help"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return " ".join(run.stdout.split())


@pytest.mark.parametrize("registry", REGISTRIES)
def test_core_exports_each_registry_once(registry):
    names = list(getattr(_core, registry))
    assert names and len(set(names)) == len(names)
    assert all(n == n.lower() and " " not in n for n in names)


def test_python_lists_are_the_registries():
    assert cli.FORMATS == tuple(_core.TRACE_FORMATS)
    assert cli.POLICIES == tuple(_core.POLICIES)
    assert placement.ALLOCATORS == tuple(_core.ALLOCATORS)
    assert _core.trace_formats() == list(_core.TRACE_FORMATS)


def test_every_policy_is_in_the_cli_help():
    simulate, report = _help("simulate"), _help("report")
    for name in _core.POLICIES:
        assert name in simulate, name
        assert name in report, name
    assert ", ".join(_core.POLICIES) in simulate


def test_every_trace_format_is_a_cli_choice():
    for cmd in (("simulate",), ("trace", "info")):
        text = _help(*cmd)
        assert "{" + ",".join(_core.TRACE_FORMATS) + "}" in text, cmd


@pytest.mark.parametrize("policy", _core.POLICIES)
def test_every_policy_name_round_trips_through_a_system_run(policy):
    doc = json.loads(_core.simulate_system(SYSTEM.format(policy=policy, allocator="color-pool")))
    assert doc["policy"] == policy
    assert doc["config"]["policy"]["name"] == policy
    assert doc["invariants"] == []


@pytest.mark.parametrize("allocator", _core.ALLOCATORS)
def test_every_allocator_name_round_trips_through_a_system_run(allocator):
    doc = json.loads(_core.simulate_system(SYSTEM.format(policy="linux", allocator=allocator)))
    assert doc["allocator"] == allocator
    assert doc["config"]["memory"]["allocator"] == allocator


def _level_config(**level: str) -> str:
    keys = "".join(f'{k} = "{v}"\n' for k, v in level.items())
    return f'[hierarchy]\n[[hierarchy.levels]]\nname = "L1"\nsize = "4KiB"\nways = 4\n{keys}'


@pytest.mark.parametrize("name", _core.REPLACEMENT_POLICIES)
def test_every_replacement_policy_round_trips_through_config_parsing(name):
    eff = json.loads(_core.effective_config(_level_config(policy=name)))
    assert eff["hierarchy"]["levels"][0]["policy"] == name


@pytest.mark.parametrize("name", _core.PREFETCHERS)
def test_every_prefetcher_round_trips_through_config_parsing(name):
    eff = json.loads(_core.effective_config(_level_config(prefetcher=name)))
    assert eff["hierarchy"]["levels"][0]["prefetcher"] == name


@pytest.mark.parametrize(
    "config, listed",
    [
        (SYSTEM.format(policy="no-such", allocator="buddy"), "POLICIES"),
    ],
)
def test_an_unknown_policy_lists_the_registry(config, listed):
    with pytest.raises(cachecolor.ConfigError) as e:
        _core.simulate_system(config)
    assert ", ".join(getattr(_core, listed)) in str(e.value)


def _docs_tables():
    return load_tool("docs_tables")


def test_the_docs_tables_of_policies_allocators_and_presets_match_the_registries():
    # tools/docs_tables.py: the tables between <!-- registry-table: NAME --> markers list what
    # the registries hold, in their order, each with its description (make docs-tables).
    assert _docs_tables().problems() == []


def test_the_docs_table_check_sees_a_missing_a_stale_and_an_undescribed_row():
    tables = _docs_tables()
    policies = next(t for t in tables.TABLES if t.name == "policies")
    text = (tables.ROOT / policies.page).read_text()
    a, b = tables._block(text, policies)
    rows = tables.parse(text[a:b])
    assert list(rows) == list(_core.POLICIES)
    # A registry name without a row comes back with an empty description; a row for a name
    # the registry does not hold is dropped; the described rows keep their text.
    shown = dict(rows)
    del shown["coloris"]
    shown["gone"] = {"what it does": "a policy removed from the registry", "docs": "-"}
    again = tables.parse(tables.render(policies, shown))
    assert list(again) == list(_core.POLICIES)
    assert again["coloris"]["what it does"] == ""
    assert again["rocs"] == rows["rocs"]


ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


#: The comment that marks a line's policy names as an experiment's choice (a demo's two runs),
#: not a list the registry should give.
CHOSEN = "# chosen policies"


def _hand_lists_of_policies(source: str) -> list[int]:
    """Lines of ``source`` (Python) with a tuple, list or set literal, or a dict's keys, of two or
    more strings that are all registered policy names: a list of policies spelled by hand (unless
    its line ends with ``CHOSEN``)."""
    import ast

    names = set(_core.POLICIES)
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        if len(items) >= 2 and all(isinstance(i, ast.Constant) and i.value in names for i in items):
            if not lines[node.lineno - 1].rstrip().endswith(CHOSEN):
                found.append(node.lineno)
    return found


def test_no_python_file_lists_policies_by_hand():
    # evaluate's default, the reporters, system.policy_warnings and the CLI's choices come from
    # the registry (`_core.POLICIES`, `_core.POLICY_REPORTS`, the system report's
    # `policy_warnings`); a new policy is its folder and its registry line, nothing here. (The
    # experiments of tools/, which docs tables show, choose their policies by design.)
    files = sorted((ROOT / "python" / "cachecolor").rglob("*.py"))
    hits = [f"{p.relative_to(ROOT)}:{line}" for p in files for line in _hand_lists_of_policies(p.read_text())]
    assert hits == []


def test_the_hand_list_check_sees_a_list_of_policies():
    assert _hand_lists_of_policies('POLICIES = ("rocs", "coloris")\nx = ("rocs", "other")\n') == [1]
    assert _hand_lists_of_policies('R = {"rocs": 1, "thread-cluster": 2}\nif p in ["static", "linux"]: pass\n') == [1, 2]
    assert _hand_lists_of_policies(f'run(["linux", "rocs"])  {CHOSEN}\n') == []


def test_no_docs_line_lists_every_policy_by_hand():
    # Outside the generated tables (`make docs-tables`), no line of the docs names every
    # registered policy: such a list goes stale with the next policy.
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    hits = []
    for page in pages:
        text = re.sub(r"<!-- registry-table: [\w-]+ -->.*?<!-- /registry-table -->", "", page.read_text(), flags=re.S)
        for i, line in enumerate(text.splitlines(), 1):
            if all(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", line) for n in _core.POLICIES):
                hits.append(f"{page.relative_to(ROOT)}: {line[:80]}")
    assert hits == []
