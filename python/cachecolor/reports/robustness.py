"""The robustness matrix: one table per policy against the baseline, over every config
and seed of a report.

A row per config: how many seeds, the worst process's IPC over the baseline's (the minimum over
seeds and processes: "does it ever harm anyone"), the summed IPC over the baseline's (mean and
minimum over seeds), and whether it held >= 0.99 x baseline for every process and in sum on
every seed (the do-no-harm bar)."""
from __future__ import annotations

from typing import Any

#: The do-no-harm bar: where a policy has nothing to gain, at least this fraction of the baseline's
#: IPC for every process and in sum.
NO_HARM = 0.99


def tables(frame: Any) -> list[tuple[str, Any]]:
    """One ``(title, table)`` per policy other than each config's first (the baseline)."""
    import pandas as pd

    if frame.empty or frame["policy"].nunique() < 2:
        return []
    baseline = frame.groupby("config", sort=False)["policy"].first().to_dict()
    out = []
    for policy in [p for p in frame["policy"].unique() if p not in set(baseline.values())]:
        rows = []
        for config, g in frame[frame["policy"] == policy].groupby("config", sort=False):
            base = frame[(frame["config"] == config) & (frame["policy"] == baseline[config])]
            sums = []
            for seed, gs in g.groupby("seed", sort=False, dropna=False):
                bs = base[base["seed"].isna()] if pd.isna(seed) else base[base["seed"] == seed]
                sums.append(gs["ipc"].sum() / bs["ipc"].sum() if bs["ipc"].sum() > 0 else float("nan"))
            worst = g["ipc_vs_baseline"].min()
            rows.append(
                {
                    "config": config,
                    "seeds": g["seed"].nunique(dropna=False),
                    "processes": g["process"].nunique(),
                    "worst_process_ipc_vs_baseline": worst,
                    "sum_ipc_vs_baseline_mean": sum(sums) / len(sums),
                    "sum_ipc_vs_baseline_min": min(sums),
                    "no_harm": bool(worst >= NO_HARM and min(sums) >= NO_HARM),
                }
            )
        title = f"robustness: {policy} against {', '.join(sorted(set(baseline.values())))} (worst over seeds and processes; no_harm: >= {NO_HARM} for each and in sum)"
        out.append((title, pd.DataFrame(rows)))
    return out
