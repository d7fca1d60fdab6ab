"""One sentence per config and policy that says what a report concludes.

For each config, each policy other than the config's first (the baseline, usually ``linux``) gets
a sentence: the change of the summed IPC of the config's processes against the baseline's on the
same seed, as a mean over the seeds with its 95% interval (Student's t, ``fmt.mean_ci``); whether
that is a gain, a loss or no change the seeds can tell apart (the interval holds 0); the worst
single process when there are several; and how many of the policy's warnings the run gave
(``policy_warning_table``: a policy that never acted, a setting overridden). With one seed there is
no interval, and the sentence says so instead of calling a difference a gain.

``sentences(frame, warnings)`` returns ``(config, policy, text)`` rows; ``markdown`` renders them
as the report's first section. The numbers come from ``comparison``'s frame only, so the verdict
cannot disagree with the tables below it.

``opening(runs, frame, verdicts)`` is what a report opens with, assembled once for report.md
(``base.write_report``) and report.html (``html.write_html``), which only render it: with
``report --oracle``, the verdict table under its summary (``verdicts.headline``) and rule and
the oracles' table; then the sentences.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from . import fmt


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def sentences(frame: Any, warnings: Any = None) -> list[tuple[str, str, str]]:
    """``(config, policy, sentence)`` per config and non-baseline policy, in the frame's order."""
    import pandas as pd

    if frame is None or frame.empty:
        return []
    out = []
    for config, g in frame.groupby("config", sort=False):
        policies = list(dict.fromkeys(g["policy"]))
        base_name = policies[0]
        base = g[g["policy"] == base_name]
        if len(policies) == 1:
            out.append((config, base_name, f"{config}: only {base_name} ran; add another --policy to compare."))
            continue
        for policy in policies[1:]:
            mine = g[g["policy"] == policy]
            gains = []
            for seed, gs in mine.groupby("seed", sort=False, dropna=False):
                bs = base[base["seed"].isna()] if pd.isna(seed) else base[base["seed"] == seed]
                if bs["ipc"].sum() > 0:
                    gains.append(gs["ipc"].sum() / bs["ipc"].sum() - 1.0)
            mean, half = fmt.mean_ci(gains)
            n = len(gains)
            if not gains or mean != mean:
                text = f"{config}: {policy} against {base_name}: no IPC to compare"
            elif n < 2 or half != half:
                text = (f"{config}: {policy} changes IPC by {_pct(mean)} against {base_name} on one seed: "
                        "no interval; run --seeds 3 or more to tell a gain from noise")
            else:
                lo, hi = mean - half, mean + half
                if lo > 0:
                    what = "a gain"
                elif hi < 0:
                    what = "a loss"
                else:
                    what = "no change the seeds can tell apart"
                text = (f"{config}: {policy} changes IPC by {_pct(mean)} against {base_name} "
                        f"(95% interval {_pct(lo)} to {_pct(hi)} over {n} seeds): {what}")
            if mine["process"].nunique() > 1:
                worst = mine.loc[mine["ipc_vs_baseline"].idxmin()]
                if worst["ipc_vs_baseline"] == worst["ipc_vs_baseline"]:
                    text += (f"; worst process {worst['process']} at {_pct(worst['ipc_vs_baseline'] - 1.0)}"
                             f" (seed {fmt.number(worst['seed'])})")
            if warnings is not None and len(warnings):
                w = warnings[(warnings["config"] == config) & (warnings["policy"] == policy)]
                if len(w):
                    text += f"; {len(w)} warning{'s' if len(w) > 1 else ''}: {w.iloc[0]['warning']}"
            out.append((config, policy, text + "."))
    return out


def markdown(rows: list[tuple[str, str, str]]) -> str:
    """The verdicts as the report's first section (empty when there are none)."""
    if not rows:
        return ""
    return "## Verdict\n\n" + "\n".join(f"- {text}" for _c, _p, text in rows) + "\n"


@dataclass
class Opening:
    """The opening of a report (module docstring). ``verdicts``, ``oracles``: the verdict and
    oracle tables of ``report --oracle`` (None without); ``headline``: the sentence over them;
    ``rule``: how a verdict is decided; ``sentences``: ``(config, policy, text)`` rows."""

    sentences: list[tuple[str, str, str]] = field(default_factory=list)
    verdicts: Any = None
    oracles: Any = None
    headline: str = ""
    rule: str = ""


def opening(runs: Sequence[Any], frame: Any, verdicts: Optional[tuple[Any, Any, Any]] = None) -> Opening:
    """The opening of the report of ``runs`` (``comparison``'s ``frame``; ``verdicts``: the
    verdict, oracle and candidate tables of ``report --oracle``)."""
    from .base import policy_warning_table

    out = Opening(sentences=sentences(frame, policy_warning_table(runs)))
    if verdicts is not None:
        from .verdicts import RULE, headline

        out.verdicts, out.oracles = verdicts[0], verdicts[1]
        out.headline, out.rule = headline(verdicts[0], verdicts[1]), RULE
    return out
