"""The generated blocks of the docs (tools/headline_tables.py, tools/verdict_tables.py): every
block the tools write has its markers in its page, once, and holds a generated table; the
splice replaces only what is between the markers; the claims table sorts rows by verdict.

Whether the committed figures are current needs the runs (minutes, and an hour, of CPU):
``make docs-headlines`` / ``make docs-verdicts`` with ``--check``, not run here."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import load_tool

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str):
    return load_tool(name)


def _blocks():
    h = _tool("headline_tables")
    v = _tool("verdict_tables")
    out = [(b.page, b.name) for b in h.HEADLINES]
    out += [(v.PAGE, f"verdicts-{s.name}") for s in v.SETS] + [(v.PAGE, "verdicts-claims")]
    return out


@pytest.mark.parametrize("page, name", _blocks())
def test_every_generated_block_is_in_its_page_once_and_holds_a_table(page, name):
    text = (ROOT / page).read_text()
    start = f"<!-- headline-table: {name} -->"
    assert text.count(start) == 1, f"{page}: {start} missing or repeated"
    body = text[text.index(start) + len(start): text.index("<!-- /headline-table -->", text.index(start))]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    if name.startswith("verdicts-") and _tool("verdict_tables").NOT_RUN in body:
        # a verdict set not run yet: its block names the command that fills it, and holds no stale rows
        assert "python tools/verdict_tables.py --only " + name.removeprefix("verdicts-") in body and not rows, body
        return
    assert len(rows) >= 3, f"{page}: the {name} block has no generated table (run make docs-headlines / docs-verdicts)"


def test_splice_replaces_only_the_named_block():
    h = _tool("headline_tables")
    text = "a\n<!-- headline-table: x -->\nold\n<!-- /headline-table -->\nb\n<!-- headline-table: y -->\nkeep\n<!-- /headline-table -->\n"
    new = h.splice(text, "x", "page.md", "NEW")
    assert new == "a\n<!-- headline-table: x -->\nNEW\n<!-- /headline-table -->\nb\n<!-- headline-table: y -->\nkeep\n<!-- /headline-table -->\n"
    with pytest.raises(SystemExit, match="no '<!-- headline-table: z -->' marker"):
        h.splice(text, "z", "page.md", "NEW")


def test_the_claims_table_sorts_each_row_by_its_verdict(tmp_path, monkeypatch):
    import pandas as pd

    v = _tool("verdict_tables")
    rows = [
        {"config": "a", "policy": "rocs", "verdict": "gain taken"},
        {"config": "b", "policy": "rocs", "verdict": "gain missed"},
        {"config": "c", "policy": "rocs", "verdict": "nothing to gain"},
        {"config": "d", "policy": "mrc-partition", "verdict": "harm"},
        {"config": "e", "policy": "rocs", "verdict": "gain missed"},
        {"config": "f", "policy": "rocs", "verdict": "nothing to gain", "above_oracle": True},
    ]
    for r in rows:
        r["noise"] = 0.01
        r.setdefault("above_oracle", False)
    # the oracles' gains per config and seed: a and b have a pollute buffer's headroom, e a
    # partition's only (its pollute oracle within the noise), c and d none
    gains = {"a": ("oracle:pollute", [0.2, 0.3]), "b": ("oracle:pollute", [0.1, -0.1]), "c": ("oracle:pollute", [0.0, 0.005]),
             "d": ("oracle:partition", [-0.02, 0.0]), "e": ("oracle:pollute", [0.004, 0.006]), "f": ("oracle:pollute", [0.0, 0.0])}
    orc = [{"config": c, "seed": i + 1, "oracle": name, "gain": g} for c, (name, gs) in gains.items() for i, g in enumerate(gs)]
    orc.append({"config": "e", "seed": 1, "oracle": "oracle:partition", "gain": 0.4})
    (tmp_path / "s").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "s" / "verdicts.csv", index=False)
    pd.DataFrame(orc).to_csv(tmp_path / "s" / "oracles.csv", index=False)
    monkeypatch.setattr(v, "ROOT", tmp_path)
    monkeypatch.setattr(v, "CLAIMS", [("takes the gain", ["rocs"], ["oracle:pollute"], ["gain taken", v.ABOVE], ["gain missed"]),
                                      ("no harm", ["mrc-partition"], None, ["nothing to gain"], ["harm"])])
    table = v.render_claims([v.VerdictSet("s", [], [], 3, 4, "s")]).splitlines()
    # b's pollute headroom is the mean of max(0, gain) over seeds (0.05); e's headroom is a
    # partition's: it does not test a pollute buffer's claim, nor does c (nothing to gain)
    # f came above its oracle: it supports a gain claim though its own headroom is nil
    assert table[2] == ("| takes the gain | rocs | a (rocs: gain taken; oracle:pollute +0.250), f (rocs: above its oracle) "
                        "| b (rocs: gain missed; oracle:pollute +0.050) "
                        "| no oracle:pollute headroom above the noise: c, e |")
    assert table[3] == "| no harm | mrc-partition | none | d (mrc-partition: harm) | none |"
