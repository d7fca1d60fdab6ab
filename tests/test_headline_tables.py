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
    out += [(page, block) for _, page, block, _ in v.VIEWS]
    return out


@pytest.mark.parametrize("page, name", _blocks())
def test_every_generated_block_is_in_its_page_once_and_holds_a_table(page, name):
    text = (ROOT / page).read_text()
    start = f"<!-- headline-table: {name} -->"
    assert text.count(start) == 1, f"{page}: {start} missing or repeated"
    body = text[text.index(start) + len(start): text.index("<!-- /headline-table -->", text.index(start))]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    if _tool("verdict_tables").NOT_RUN in body:
        # a verdict set not run yet: its block names the command that fills it, and holds no stale rows
        assert "python tools/verdict_tables.py --only " in body and not rows, body
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


def test_a_policys_view_reads_every_process_against_linux_on_the_same_seed(tmp_path, monkeypatch):
    """The no-harm bar is per process and per seed: a policy whose summed IPC matches linux but
    whose one process loses 5% on one seed is below 0.99x, and is named."""
    import pandas as pd

    v = _tool("verdict_tables")
    ipc = {  # (policy, seed, process) -> IPC
        ("linux", 1, "a"): 1.0, ("linux", 1, "b"): 1.0, ("linux", 2, "a"): 2.0, ("linux", 2, "b"): 1.0,
        ("rocs", 1, "a"): 1.0, ("rocs", 1, "b"): 1.0, ("rocs", 2, "a"): 1.9, ("rocs", 2, "b"): 1.1,
        ("rocs+control", 1, "a"): 0.5, ("rocs+control", 1, "b"): 0.5, ("rocs+control", 2, "a"): 0.5, ("rocs+control", 2, "b"): 0.5,
    }
    (tmp_path / "s").mkdir()
    pd.DataFrame([{"config": "m", "policy": p, "seed": sd, "process": pr, "ipc": x, "status": "ok"}
                  for (p, sd, pr), x in ipc.items()]).to_csv(tmp_path / "s" / "results.csv", index=False)
    pd.DataFrame([{"config": "m", "policy": "rocs", "verdict": "nothing to gain", "headroom": 0.0, "best_oracle": "oracle:pollute",
                   "achieved": 0.0, "share": float("nan"), "control": -0.5, "noise": 0.01}]).to_csv(tmp_path / "s" / "verdicts.csv", index=False)
    monkeypatch.setattr(v, "ROOT", tmp_path)
    r = v.process_ratios(tmp_path / "s")
    got = {(row.policy, row.seed): (round(row.worst, 6), round(row["sum"], 6)) for _, row in r.iterrows()}
    assert got[("rocs", 1)] == (1.0, 1.0)
    assert got[("rocs", 2)] == (0.95, 1.0)  # a: 1.9 / 2.0; the sum 3.0 / 3.0
    assert got[("rocs+control", 1)] == (0.5, 0.5)
    text = v.render_view(v.VerdictSet("s", [], [], 2, 4, "s"), ["rocs"])
    assert "| m | rocs | nothing to gain |" in text and "| 0.950 | 1.000 | no |" in text, text
    assert "nothing to gain (the headroom within the noise), 1 of 1 cells are below 0.99x linux for some process: rocs on `m` (0.950)." in text, text
