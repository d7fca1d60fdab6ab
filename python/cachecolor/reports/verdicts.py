"""The verdict of each policy on each config against the oracles (``cachecolor report --oracle``;
docs/verdicts.md has the definitions, repeated here where they are computed).

Per config and seed, against the ``linux`` run of the same seed (weighted speedup: the mean over
processes of IPC / linux's IPC, minus 1, so 0.08 is 8% above linux):

- ``headroom``: the best oracle's gain (0 when no oracle beats linux: doing nothing is always
  allowed), ``achieved``: the policy's, ``control``: its control run's (``P+control``; NaN when
  the report ran no controls). Each is the mean over seeds.
- ``noise``: the larger of ``NOISE_FLOOR`` (1%) and the half-width of the headroom's 95% interval
  (Student's t over seeds, so over placements: the seed is the placement seed);
  ``achieved_noise`` the same of the achieved gain. One seed measures no spread: the floor
  alone, and the table says so. Two seeds give t = 12.7: use three or more.
- ``share``: achieved / headroom (NaN when the headroom is within the noise).
- ``verdict``, the first that applies:
  1. ``side effect``: a control run exists, the policy is away from linux by more than its
     achieved_noise and within it of its control (what changed it was its color placement or
     its measurement, not its moves);
  2. ``harm``: the headroom is within the noise and the policy lost more than its
     achieved_noise (at least 1%);
  3. ``nothing to gain``: the headroom is within the noise;
  4. ``gain taken``: share >= 0.5 and the control within the noise of linux (or no control run);
  5. ``gain missed``: the rest, with the reason the policy's own report gives (its warnings:
     never targeted, no window afforded, search skipped, out of colors, ...).
- ``above_oracle``: the policy beat the headroom by more than the noise: a dynamic gain no
  static oracle can reach (a phased program), or an oracle's search space too small.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional, Sequence

from ..oracles import NOISE_FLOOR, PREFIX, OracleRun, weighted_speedup
from ..system import CONTROL_SUFFIX
from . import fmt
from .base import Run

COLUMNS = ("config", "policy", "seeds", "headroom", "best_oracle", "achieved", "share", "control", "noise", "achieved_noise",
           "verdict", "reason", "above_oracle")


def _procs(r: Run) -> list[dict[str, Any]]:
    return r.result._doc["processes"]


def verdict_table(runs: Sequence[Run], oracle_runs: Sequence[OracleRun]) -> Any:
    """One row per config and judged policy (every policy but linux, controls and oracles)."""
    import pandas as pd

    linux = {(Path(r.config).stem, r.seed): _procs(r) for r in runs if r.policy == "linux"}
    head: dict[tuple[str, Optional[int]], tuple[float, str]] = {}
    for o in oracle_runs:
        k = (Path(o.config).stem, o.seed)
        if o.note or math.isnan(o.gain):
            continue
        gain = max(0.0, o.gain)
        if k not in head or gain > head[k][0]:
            head[k] = (gain, PREFIX + o.oracle if gain > 0 else "none beats linux")
    by: dict[tuple[str, str], dict[Optional[int], Run]] = {}
    for r in runs:
        by.setdefault((Path(r.config).stem, r.policy), {})[r.seed] = r
    rows = []
    for (config, policy), seeds in by.items():
        if policy == "linux" or policy.endswith(CONTROL_SUFFIX) or policy.startswith(PREFIX):
            continue
        control = by.get((config, policy + CONTROL_SUFFIX), {})
        hs, as_, cs, best, reasons = [], [], [], [], []
        for seed, r in seeds.items():
            base = linux.get((config, seed))
            if base is None or (config, seed) not in head:
                continue
            hs.append(head[(config, seed)][0])
            best.append(head[(config, seed)][1])
            as_.append(weighted_speedup(_procs(r), base) - 1.0)
            if seed in control:
                cs.append(weighted_speedup(_procs(control[seed]), base) - 1.0)
            for w in r.result.warnings() + _facts(r):
                if w not in reasons:
                    reasons.append(w)
        if not hs:
            continue
        rows.append(judge(config, policy, hs, as_, cs, best, reasons))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def judge(config: str, policy: str, headrooms: Sequence[float], achieved: Sequence[float], controls: Sequence[float],
          best: Sequence[str], reasons: Sequence[str]) -> dict[str, Any]:
    """The verdict row of one config and policy from its per-seed gains (module docstring)."""
    h, h_ci = fmt.mean_ci(headrooms)
    a, a_ci = fmt.mean_ci(achieved)
    c = fmt.mean_ci(controls)[0] if controls else math.nan
    # The headroom's noise decides whether there is anything to gain; the policy's own spread
    # decides whether it harmed or merely moved with its control (a policy erratic over seeds
    # does not make a headroom disappear).
    noise = max([NOISE_FLOOR] + [h_ci] * (h_ci == h_ci))
    a_noise = max([NOISE_FLOOR] + [a_ci] * (a_ci == a_ci))
    share = a / h if h > noise else math.nan
    why = ""
    if controls and abs(a) > a_noise and abs(a - c) <= a_noise:
        verdict = "side effect"
        why = (f"its control run (its colors, no page or thread moved) is at {c:+.1%} too: the effect is its color "
               "placement or its measurement, not its moves")
    elif h <= noise and a < -a_noise:
        verdict = "harm"
        why = "; ".join(reasons)
    elif h <= noise:
        verdict = "nothing to gain"
    elif share >= 0.5 and (not controls or abs(c) <= a_noise):
        verdict = "gain taken"
        if not controls:
            why = "no control run (report --control) to rule out placement"
    else:
        verdict = "gain missed"
        why = "; ".join(reasons) or "its report gives no warning: it acted and the gain did not follow"
        if controls and abs(c) > a_noise:
            why = f"control {c:+.1%} away from linux; " + why
    above = bool(a > h + noise)
    if above:
        why = (f"above the best oracle ({a:+.1%} > {h:+.1%} + noise): a dynamic gain or one outside the oracles' search"
               + ("; " + why if why else ""))
    if len(headrooms) < 2:
        why = (why + "; " if why else "") + "one seed: noise is the 1% floor alone"
    return {
        "config": config,
        "policy": policy,
        "seeds": len(headrooms),
        "headroom": h,
        "best_oracle": max(set(best), key=list(best).count),
        "achieved": a,
        "share": share,
        "control": c,
        "noise": noise,
        "achieved_noise": a_noise,
        "verdict": verdict,
        "reason": why,
        "above_oracle": above,
    }


def _facts(r: Run) -> list[str]:
    """What a pollute policy's report says it did, for a missed gain's reason: which processes
    each search targeted, what it kept, why a walk stopped, and why a profile was not walked."""
    rep = r.result.policy_report
    if not isinstance(rep, dict) or not isinstance(rep.get("units"), list):
        return []  # not a pollute engine's report (mrc-partition's `units` is a count)
    names = [p["name"] for p in _procs(r)]
    out = []
    for u in rep["units"]:
        who = "+".join(names[i] if i < len(names) else str(i) for i in u["pids"])
        for s in u["searches"]:
            if s.get("skipped"):
                out.append(f"profiled {who}, not walked: {s['skipped']}")
                continue
            kept = "nothing yet (unfinished)" if s["chosen"] is None else f"{s['chosen']} of {s['stack_pages']} pages"
            out.append(f"searched {who}: kept {kept}" + (f", stopped: {s['stopped']}" if s.get("stopped") else ""))
    return out or ["targeted no process"]


def oracle_table(oracle_runs: Sequence[OracleRun]) -> Any:
    """One row per config, seed and oracle: its best candidate and gain, how many runs and
    seconds it cost (simulation time summed over the runs, whatever the pool's parallelism;
    runs already cached in OUT/points cost nothing again), or why it did not apply."""
    import pandas as pd

    return pd.DataFrame([
        {
            "config": Path(o.config).stem,
            "seed": o.seed,
            "oracle": PREFIX + o.oracle,
            "best": o.best_label,
            "gain": o.gain,
            "runs": o.runs,
            "cpu_seconds": round(o.seconds, 1),
            "note": "; ".join(x for x in (o.note, o.basis) if x),
        }
        for o in oracle_runs
    ])


def candidate_table(oracle_runs: Sequence[OracleRun]) -> Any:
    """Every candidate run of every oracle, scored (the brute force behind each best)."""
    import pandas as pd

    return pd.DataFrame([
        {"config": Path(o.config).stem, "seed": o.seed, "oracle": PREFIX + o.oracle, **c}
        for o in oracle_runs for c in o.candidates
    ])


def oracle_as_runs(oracle_runs: Sequence[OracleRun]) -> list[Run]:
    """The best run of each oracle as a ``Run`` named ``oracle:NAME`` (for the comparison)."""
    from ..system import SystemResult

    return [Run(o.config, PREFIX + o.oracle, o.seed, SystemResult(o.best)) for o in oracle_runs if o.best is not None]


def summary_line(table: Any) -> str:
    """Sentences over the verdict table: how many of each verdict, then every policy that came
    above its oracle (``above_oracle``), named, or that none did."""
    if table is None or not len(table):
        return "No verdict: no policy run had a linux run and an oracle beside it."
    counts = table["verdict"].value_counts()
    return "Verdicts: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + ". " + above_oracle_sentence(table)


def above_oracle_sentence(table: Any) -> str:
    """One sentence naming each config and policy above its oracle by more than the noise: a
    dynamic gain no static oracle reaches (a phased program, thread placement, which no oracle
    searches) or an oracle whose search space is too small. Reported, never folded into the
    headroom."""
    above = table[table["above_oracle"].astype(bool)]
    if not len(above):
        return "No policy came above its oracle (above_oracle: no on every row)."
    cases = "; ".join(f"{r.policy} on {r.config} ({r.achieved:+.1%} against a headroom of {r.headroom:+.1%}, {r.best_oracle})"
                      for r in above.itertuples())
    return (f"{len(above)} policy row(s) came above the best oracle by more than the noise: {cases}. The oracles are "
            "static; a gain above them is dynamic (phases, thread placement) or outside their search space "
            "(docs/verdicts.md): read it as that, not as a verdict on the headroom.")


#: The rule under the verdict table, for people (the module docstring in one paragraph).
RULE = (
    "headroom: the best oracle's weighted speedup over linux minus 1 (0 if none beats linux); achieved: the "
    "policy's; control: its control run's; share = achieved / headroom; noise: the larger of 1% and the 95% "
    "half-width over seeds (placements) of the headroom; achieved_noise the same of achieved. Verdict, first that "
    "applies: side effect (|achieved| > achieved_noise and within it of control), harm (headroom <= noise, achieved "
    "< -achieved_noise), nothing to gain (headroom <= noise), gain taken (share >= 0.5, control within achieved_noise "
    "of linux), gain missed (the "
    "rest; reason from the policy's own warnings). Oracles are offline bounds named oracle:NAME, never policies "
    "(docs/verdicts.md)."
)


def headline(table: Any, oracles: Any) -> str:
    """The sentences over the verdict table in report.md and report.html: the summary line and
    what the oracles cost."""
    cost = ""
    if oracles is not None and len(oracles):
        cost = f" The oracles ran {int(oracles['runs'].sum())} simulations ({oracles['cpu_seconds'].sum():.0f} s of simulation, cached in OUT/points)."
    return summary_line(table) + cost


def verdict_markdown(table: Any, oracles: Any) -> str:
    """The verdict section that opens ``report.md``: the summary line, the table, the rule, the
    oracles' best runs and their cost."""
    return (
        f"## verdicts: each policy against the oracles' headroom\n\n{headline(table, oracles)}\n\n"
        f"{fmt.markdown_table(table)}\n\n{RULE}\n\n"
        f"## oracles: the best offline run of each (every candidate: oracle-candidates.csv)\n\n{fmt.markdown_table(oracles)}\n"
    )


def with_verdicts(frame: Any, table: Any) -> Any:
    """``comparison``'s frame with the verdict columns of its config and policy (NaN / empty
    for linux, controls and the oracles themselves)."""
    cols = ["headroom", "achieved", "share", "control", "noise", "verdict"]
    if table is None or not len(table):
        out = frame.copy()
        for c in cols:
            out[c] = math.nan if c != "verdict" else ""
        return out
    out = frame.merge(table[["config", "policy", *cols]], on=["config", "policy"], how="left")
    out["verdict"] = out["verdict"].fillna("")
    return out
