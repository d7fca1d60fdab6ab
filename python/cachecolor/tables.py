"""The one table writer: rows of text cells as an aligned text table (the CLI's) or a GitHub
pipe table (report.md, evaluation.md, the docs' generated tables). Cells arrive as text: the
numbers in them are the caller's (``reports.fmt`` formats them for people)."""

from __future__ import annotations

from typing import Any, Optional, Sequence


def text_table(header: list[str], rows: list[list[Any]], left: int = 1, rule: bool = True) -> list[str]:
    """``header`` and ``rows`` as aligned text lines: the first ``left`` columns left-aligned, the
    others right-aligned, two spaces apart, a rule of dashes under the header (``rule``), no
    trailing blanks. (pandas formats the CLI's tables that are DataFrames.)"""
    table = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for n, r in enumerate(table):
        cells = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0 and rule:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def pipe_table(header: Sequence[str], rows: Sequence[Sequence[Any]], numeric: Optional[Sequence[bool]] = None) -> str:
    """``header`` and ``rows`` as a GitHub-flavoured pipe table: the ``numeric`` columns
    right-aligned, pipes in cells escaped and line breaks made spaces, so the Markdown renders;
    one empty row when there are none (a header alone is not a table to every renderer)."""
    numeric = list(numeric) if numeric is not None else [False] * len(header)

    def esc(s: Any) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(esc(x) for x in r) + " |")
    if not rows:
        lines.append("| " + " | ".join("" for _ in header) + " |")
    return "\n".join(lines)
