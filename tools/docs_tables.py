"""The docs' tables of registered things, made from the registries.

Each table sits between ``<!-- registry-table: NAME -->`` and ``<!-- /registry-table -->`` in a
docs page. Its rows, their order and the generated columns come from the registries the
extension exports (``_core.POLICIES``, ``_core.ALLOCATORS``, ``_core.EVENTS``) and from the machine presets
(``presets.machine_summaries()``); the prose columns are kept from the page as it is, row by
row, so a description is written once, by hand, beside the name it describes. A name newly
registered gets a row with an empty description, which ``--check`` reports until it is written.

    python tools/docs_tables.py          # rewrite the tables in place (make docs-tables)
    python tools/docs_tables.py --check  # exit 1 naming each table that differs (tests/test_registry.py)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
END = "<!-- /registry-table -->"


@dataclass
class Table:
    """One generated table: ``keys()`` gives its rows in order; each column after the key is
    made by a function of the key (from the registry) or, where it has none, is prose kept from
    the page."""

    name: str
    page: str
    key_header: str
    keys: Callable[[], list[str]]
    columns: list[tuple[str, Optional[Callable[[str], str]]]]

    @property
    def prose(self) -> list[str]:
        return [h for h, make in self.columns if make is None]


def _policies() -> list[str]:
    from cachecolor import _core

    return list(_core.POLICIES)


def _allocators() -> list[str]:
    from cachecolor import _core

    return list(_core.ALLOCATORS)


def _summaries() -> dict[str, dict]:
    from cachecolor import presets

    return {m["name"]: m for m in presets.machine_summaries()}


def _events() -> list[str]:
    from cachecolor import _core

    return list(_core.EVENTS)


def _presets() -> list[str]:
    return list(_summaries())


def _chips_cores(name: str) -> str:
    m = _summaries()[name]
    return f"{m['chips']} × {m['cores']}"


TABLES = [
    Table("policies", "docs/policies.md", "`[policy] name`", _policies, [("what it does", None), ("docs", None)]),
    Table("events", "docs/policies.md", "event", _events, [("what it counts", None)]),
    Table("allocators", "docs/system.md", "`[memory] allocator`", _allocators, [("how it gives frames", None)]),
    Table("presets", "docs/system.md", "preset", _presets,
          [("paper", None), ("chips × cores", _chips_cores), ("L1D", None), ("L2", None), ("LLC", None),
           ("LLC colors (4 KiB pages)", None)]),
]


def _cells(line: str) -> list[str]:
    # Split a markdown row on | not escaped as \|.
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _key(cell: str) -> str:
    return cell.strip().strip("`")


def render(table: Table, old_rows: dict[str, dict[str, str]]) -> str:
    headers = [table.key_header, *(h for h, _ in table.columns)]
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    for key in table.keys():
        kept = old_rows.get(key, {})
        cells = [f"`{key}`", *(make(key) if make else kept.get(h, "") for h, make in table.columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def marked_block(text: str, start: str, end: str, page: str) -> tuple[int, int]:
    """Where the generated block opened by the marker ``start`` lies in ``text``: from just after
    ``start`` to the first ``end`` after it (each docs generator's blocks)."""
    a = text.find(start)
    if a < 0:
        raise SystemExit(f"{page}: no '{start}' marker")
    b = text.find(end, a)
    if b < 0:
        raise SystemExit(f"{page}: '{start}' has no '{end}' after it")
    return a + len(start), b


def _block(text: str, table: Table) -> tuple[int, int]:
    return marked_block(text, f"<!-- registry-table: {table.name} -->", END, table.page)


def parse(body: str) -> dict[str, dict[str, str]]:
    """The rows of a markdown table, by key (first column), as {header: cell}."""
    rows = [line for line in body.strip().splitlines() if line.strip().startswith("|")]
    if len(rows) < 2:
        return {}
    headers = _cells(rows[0])
    return {_key(c[0]): dict(zip(headers, c)) for c in map(_cells, rows[2:])}


def update(text: str, table: Table) -> str:
    a, b = _block(text, table)
    new = render(table, parse(text[a:b]))
    return text[:a] + "\n" + new + "\n" + text[b:]


def problems() -> list[str]:
    """What is out of date: tables that differ from the registries, rows with empty prose."""
    out = []
    for table in TABLES:
        path = ROOT / table.page
        text = path.read_text()
        new = update(text, table)
        if new != text:
            out.append(f"{table.page}: the {table.name} table differs from the registry (run make docs-tables)")
        a, b = _block(new, table)
        for key, row in parse(new[a:b]).items():
            empty = [h for h in table.prose if not row.get(h)]
            if empty:
                out.append(f"{table.page}: the {table.name} table's row `{key}` has no {', '.join(empty)}: write it")
    return out


def generator_main(argv: list[str], script: str, problems: Callable[[], list[str]], write: Callable[[], None]) -> int:
    """A generator's command line: ``--check`` prints ``problems()`` and exits 1 if there are
    any; no argument runs ``write()``; anything else is a usage error (exit 2)."""
    if argv == ["--check"]:
        found = problems()
        for p in found:
            print(p, file=sys.stderr)
        return 1 if found else 0
    if argv:
        print(f"usage: python tools/{script} [--check]", file=sys.stderr)
        return 2
    write()
    return 0


def write_tables() -> None:
    for table in TABLES:
        path = ROOT / table.page
        text = path.read_text()
        new = update(text, table)
        if new != text:
            path.write_text(new)
            print(f"updated the {table.name} table in {table.page}")


def main(argv: list[str]) -> int:
    return generator_main(argv, "docs_tables.py", problems, write_tables)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
