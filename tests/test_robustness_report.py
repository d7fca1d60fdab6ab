"""The robustness matrix's per-policy table (issue 19): `cachecolor report DIR --policy linux
--policy P --seeds N` prints, for each policy but the baseline, the worst process's IPC over the
baseline's and the summed IPC's ratio per config. Checked on a hand-made comparison frame whose
answers are worked out by hand."""
import math

import pandas as pd

from cachecolor.reports import robustness


def _row(config, policy, seed, process, ipc, base):
    return {"config": config, "policy": policy, "seed": seed, "process": process, "ipc": ipc, "ipc_vs_baseline": ipc / base}


def test_robustness_table_per_policy_worst_process_and_sum():
    rows = []
    # Config "pair": linux IPCs a=1.0, b=2.0 on both seeds; rocs a=0.98 (seed 1) and 1.0
    # (seed 2), b=2.0; so the worst process is 0.98 and the sums 2.98/3 and 3/3.
    for seed, a in [(1, 0.98), (2, 1.0)]:
        rows += [_row("pair", "linux", seed, "a", 1.0, 1.0), _row("pair", "linux", seed, "b", 2.0, 2.0)]
        rows += [_row("pair", "rocs", seed, "a", a, 1.0), _row("pair", "rocs", seed, "b", 2.0, 2.0)]
        rows += [_row("pair", "mrc-partition", seed, "a", 1.0, 1.0), _row("pair", "mrc-partition", seed, "b", 2.0, 2.0)]
    tables = robustness.tables(pd.DataFrame(rows))
    assert [t for t, _ in tables][0].startswith("robustness: rocs")
    assert len(tables) == 2, "one table per policy other than the baseline"
    rocs = tables[0][1].iloc[0]
    assert rocs["seeds"] == 2 and rocs["processes"] == 2
    assert math.isclose(rocs["worst_process_ipc_vs_baseline"], 0.98)
    assert math.isclose(rocs["sum_ipc_vs_baseline_min"], 2.98 / 3.0)
    assert math.isclose(rocs["sum_ipc_vs_baseline_mean"], (2.98 / 3.0 + 1.0) / 2)
    assert not rocs["no_harm"], "a process at 0.98 is below the 0.99 bar"
    assert tables[1][1].iloc[0]["no_harm"]


def test_robustness_table_needs_two_policies():
    rows = [_row("one", "linux", 1, "a", 1.0, 1.0)]
    assert robustness.tables(pd.DataFrame(rows)) == []
