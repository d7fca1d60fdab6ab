"""``_core.pyi``'s policy-report TypedDicts, written from the Rust report structs.

Each registry line of ``crates/sim/src/policy/mod.rs`` names the struct its policy's ``report()``
serializes; ``_core.policy_report_schemas()`` gives each one's JSON schema (schemars, as
serialized: a field serde may skip is not required). This writes, between the two marker
comments of ``python/cachecolor/_core.pyi``, one TypedDict per struct (nested ones first, named
as the schema names them: ``RocsReport``, ``RocsSearch``, ...), with the structs' doc comments as
docstrings and field comments; a ``<Policy>Report`` alias where a policy shares another's struct
(``global-pollute`` -> ``RocsReport``); and ``PolicyReport``, the union of them all.

    python tools/report_stubs.py          # rewrite the block (make docs-tables)
    python tools/report_stubs.py --check  # exit 1 if the block differs (tests/test_policy_reports.py)

Schema to Python: integer -> int, number -> float, boolean -> bool, string -> str, a string enum
-> Literal[...], null -> None (a nullable type -> Optional[...]), array -> list[...], a fixed-length
array (a Rust tuple) -> tuple[...], a map -> dict[str, ...], a struct -> its TypedDict. A struct
with fields serde may skip is a TypedDict of the rest with a ``total=False`` subclass adding them;
a field named as a Python keyword puts its TypedDict in the functional form.
"""

from __future__ import annotations

import json
import keyword
import sys
import textwrap
from pathlib import Path
from typing import Any

from docs_tables import generator_main, marked_block

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "cachecolor" / "_core.pyi"
START = "# <generated: policy reports (tools/report_stubs.py)>"
END = "# </generated: policy reports>"
WIDTH = 100


class SchemaError(ValueError):
    """A schema construct the stub has no Python type for."""


def schemas() -> dict[str, Any]:
    """``{policy: root schema or None}`` in registry order, from the extension."""
    from cachecolor import _core

    return json.loads(_core.policy_report_schemas())


def class_name(policy: str) -> str:
    """The TypedDict a policy's report is named by: ``mrc-partition`` -> ``MrcPartitionReport``."""
    return "".join(part.capitalize() for part in policy.split("-")) + "Report"


def _ref_name(ref: str) -> str:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise SchemaError(f"reference {ref!r} outside $defs")
    return ref[len(prefix):]


def _literal(values: list[Any]) -> str:
    return "Literal[" + ", ".join(json.dumps(v) for v in values) + "]"


def _string_enum(schema: dict[str, Any]) -> list[str] | None:
    """The values of a string enum (``enum``, or ``oneOf`` of ``const``s as schemars writes an
    enum whose variants have doc comments), else None."""
    if schema.get("type") == "string" and "enum" in schema:
        return list(schema["enum"])
    variants = schema.get("oneOf")
    if variants and all("const" in v and isinstance(v["const"], str) for v in variants):
        return [v["const"] for v in variants]
    return None


class Renderer:
    """Python types and TypedDict classes for one root schema and its ``$defs``."""

    def __init__(self, root: dict[str, Any]):
        self.root = root
        self.defs: dict[str, Any] = root.get("$defs", {})

    def type_of(self, s: dict[str, Any], needs: list[str]) -> str:
        if s is True or s == {}:
            return "Any"
        if "$ref" in s:
            name = _ref_name(s["$ref"])
            target = self.defs[name]
            values = _string_enum(target)
            if values is not None:
                return _literal(values)
            needs.append(name)
            return name
        if "const" in s:
            return _literal([s["const"]])
        values = _string_enum(s)
        if values is not None:
            return _literal(values)
        for key in ("anyOf", "oneOf"):
            if key in s:
                parts = [self.type_of(p, needs) for p in s[key]]
                return self._union(parts)
        kind = s.get("type")
        if isinstance(kind, list):
            parts = [self.type_of({**s, "type": k}, needs) for k in kind]
            return self._union(parts)
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "string":
            return "str"
        if kind == "null":
            return "None"
        if kind == "array":
            if "prefixItems" in s:
                return "tuple[" + ", ".join(self.type_of(p, needs) for p in s["prefixItems"]) + "]"
            return f"list[{self.type_of(s.get('items', True), needs)}]"
        if kind == "object":
            if s.get("properties"):
                raise SchemaError(f"an inline struct ({sorted(s['properties'])}): give it a name")
            return f"dict[str, {self.type_of(s.get('additionalProperties', True), needs)}]"
        raise SchemaError(f"no Python type for {json.dumps(s)[:200]}")

    @staticmethod
    def _union(parts: list[str]) -> str:
        rest = [p for p in dict.fromkeys(parts) if p != "None"]
        inner = rest[0] if len(rest) == 1 else "Union[" + ", ".join(rest) + "]"
        return f"Optional[{inner}]" if "None" in parts else inner

    def typeddict(self, name: str, s: dict[str, Any], needs: list[str]) -> str:
        """The class (or classes) of a struct's schema."""
        if s.get("type") != "object" or "properties" not in s:
            raise SchemaError(f"{name} is not a struct: {json.dumps(s)[:200]}")
        props: dict[str, Any] = s["properties"]
        required = set(s.get("required", []))
        fields = [(k, self.type_of(v, needs), v.get("description")) for k, v in props.items()]
        doc = s.get("description")
        if any(keyword.iskeyword(k) or not k.isidentifier() for k in props):
            # A key Python cannot spell as a class attribute: the functional form (no docs).
            if required != set(props):
                raise SchemaError(f"{name}: a keyword field beside optional ones")
            items = ", ".join(f"{json.dumps(k)}: {t}" for k, t, _ in fields)
            head = [f"# `{name}` has a key that is a Python keyword: the functional form."]
            if doc:
                head += _comment(doc)
            return "\n".join(head + [f'{name} = TypedDict("{name}", {{{items}}})'])
        mandatory = [f for f in fields if f[0] in required]
        optional = [f for f in fields if f[0] not in required]
        if not optional:
            return _class(name, "TypedDict", doc, mandatory)
        base = f"_{name}"
        return _class(base, "TypedDict", None, mandatory) + "\n\n" + _class(name, f"{base}, total=False", doc, optional)

    def classes(self) -> list[tuple[str, str]]:
        """``(name, source)`` of the root struct and every struct it reaches, each after the
        structs it names (so base classes and the functional form's types exist first)."""
        out: dict[str, str] = {}
        visiting: set[str] = set()

        def visit(name: str, s: dict[str, Any]) -> None:
            if name in out or name in visiting:
                return
            visiting.add(name)
            needs: list[str] = []
            source = self.typeddict(name, s, needs)
            for n in needs:
                visit(n, self.defs[n])
            out[name] = source

        visit(self.root["title"], self.root)
        return list(out.items())


def _comment(text: str, indent: str = "") -> list[str]:
    lines = []
    for para in text.split("\n\n"):
        lines += textwrap.wrap(" ".join(para.split()), WIDTH - len(indent) - 2, break_on_hyphens=False) or [""]
    return [f"{indent}# {line}".rstrip() for line in lines]


def _docstring(text: str) -> list[str]:
    text = " ".join(text.split()).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    one = f'    """{text}"""'
    if len(one) <= WIDTH:
        return [one]
    body = textwrap.wrap(text, WIDTH - 4, break_on_hyphens=False)
    return ['    """' + body[0], *(f"    {line}" for line in body[1:]), '    """']


def _class(name: str, bases: str, doc: str | None, fields: list[tuple[str, str, str | None]]) -> str:
    lines = [f"class {name}({bases}):"]
    if doc:
        lines += _docstring(doc)
        if fields:
            lines.append("")
    for key, tp, about in fields:
        if about:
            lines += _comment(about, "    ")
        lines.append(f"    {key}: {tp}")
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines)


def render(by_policy: dict[str, Any]) -> str:
    """The generated block: each report's TypedDicts, the aliases, ``PolicyReport``."""
    sections: list[str] = []
    written: dict[str, str] = {}  # schema title -> source, once each
    users: dict[str, list[str]] = {}
    for policy, root in by_policy.items():
        if root is not None:
            users.setdefault(root["title"], []).append(policy)
    for policy, root in by_policy.items():
        if root is None or root["title"] in written:
            continue
        title = root["title"]
        classes = Renderer(root).classes()
        for name, _ in classes:
            if name in written:
                raise SchemaError(f"two reports name a struct {name}: rename one (#[schemars(rename)])")
        written.update(dict(classes))
        head = f"# --- {', '.join(users[title])}: {title} ---"
        sections.append(head + "\n\n" + "\n\n".join(src for _, src in classes))
    aliases = [f"{class_name(p)} = {root['title']}" for p, root in by_policy.items()
               if root is not None and class_name(p) != root["title"]]
    union = list(users)
    parts = [
        "# Generated from each policy's report struct (its registry line in crates/sim/src/policy/mod.rs,\n"
        "# `report: Struct`): do not edit here; `make docs-tables` rewrites it and\n"
        "# tests/test_policy_reports.py fails while it differs.",
        *sections,
    ]
    if aliases:
        parts.append("# Policies sharing another's report struct.\n" + "\n".join(aliases))
    parts.append(
        "PolicyReport = Union[" + ", ".join([*union, "None"]) + "]\n"
        '"""What a Rust OS policy reports (``SystemResult.policy_report``): one of the report TypedDicts\n'
        "above, or None for a policy whose registry line names no report struct; a policy written in\n"
        'Python reports whatever its ``report`` returns."""'
    )
    return "\n\n".join(parts)


def update(text: str, by_policy: dict[str, Any]) -> str:
    a, b = marked_block(text, START, END, str(STUB))
    return text[:a] + "\n" + render(by_policy) + "\n" + text[b:]


def problems(text: str | None = None, by_policy: dict[str, Any] | None = None) -> list[str]:
    """What differs between the stub's block and what the registry's schemas give."""
    text = STUB.read_text() if text is None else text
    by_policy = schemas() if by_policy is None else by_policy
    new = update(text, by_policy)
    if new == text:
        return []
    old_lines, new_lines = text.splitlines(), new.splitlines()
    first = next((i for i, (x, y) in enumerate(zip(old_lines, new_lines)) if x != y), min(len(old_lines), len(new_lines)))
    shown = new_lines[first] if first < len(new_lines) else "(end of file)"
    return [f"{STUB.relative_to(ROOT)}:{first + 1}: the policy-report TypedDicts differ from the Rust report structs "
            f"(generated line: {shown.strip()!r}); run `make docs-tables`"]


def write() -> None:
    text = STUB.read_text()
    new = update(text, schemas())
    if new != text:
        STUB.write_text(new)
        print(f"updated the policy-report TypedDicts in {STUB.relative_to(ROOT)}")


def main(argv: list[str]) -> int:
    return generator_main(argv, "report_stubs.py", problems, write)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
