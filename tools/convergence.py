"""The convergence table and plot of docs/workloads.md: one evaluation per window size (the same
programs, machines, placements and policies; `cachecolor evaluate --instructions N`), read
from each run's evaluation.csv, and per program, machine and policy the speedup over linux and
linux's IPC at each size (and the verdict with the oracles' headroom, for an evaluation run
with --oracle): where a verdict stabilises. Several CSVs may be given for one size (programs
alone and mixes evaluated apart).

    python tools/convergence.py OUT.png 20000000=out/conv/evaluation-20000000.csv ...

Prints the Markdown table; writes the plot (speedup and linux IPC against instructions, log x).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def load(pairs: list[str]) -> pd.DataFrame:
    frames = []
    for p in pairs:
        size, path = p.split("=", 1)
        f = pd.read_csv(path)
        f["instructions"] = int(size)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def table(f: pd.DataFrame) -> pd.DataFrame:
    """Per group, machine, policy and window size: the mean speedup over the group's processes
    (fresh placement and aged mean together when both ran) and linux's IPC."""
    if "verdict" not in f.columns:  # an evaluation without --oracle has none
        f = f.assign(verdict="", headroom=float("nan"))
    per = f.groupby(["group", "machine", "policy", "instructions"], sort=False).agg(
        speedup=("speedup", "mean"), ipc=("ipc", "mean"), mpki=("llc_mpki", "mean"),
        recolored=("recolored", "sum"), verdict=("verdict", "first"), headroom=("headroom", "first")).reset_index()
    per["verdict"] = per["verdict"].fillna("")
    return per


def _size(n: float) -> str:
    return f"{n / 1e9:g} B" if n >= 1e9 else f"{n / 1e6:g} M"


def markdown(per: pd.DataFrame) -> str:
    sizes = sorted(per.instructions.unique())
    head = "| group | machine | policy | " + " | ".join(f"{_size(s)}: speedup (IPC, MPKI)" for s in sizes) + " |"
    lines = [head, "|" + " --- |" * (3 + len(sizes))]
    for (g, m, pol), d in per.groupby(["group", "machine", "policy"], sort=False):
        cells = []
        for s in sizes:
            r = d[d.instructions == s]
            v = "" if r.empty or not r.verdict.iloc[0] else f": **{r.verdict.iloc[0]}** (headroom {r.headroom.iloc[0]:+.3f})"
            cells.append("not run" if r.empty else f"{r.speedup.iloc[0]:.3f} ({r.ipc.iloc[0]:.3f}, {r.mpki.iloc[0]:.2f}){v}")
        lines.append(f"| {g} | {m} | {pol} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(per: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5.6), gridspec_kw={"width_ratios": [3, 2]})
    # One colour per (group, policy); its control the same colour, dashed and hollow (it often
    # lies on its policy's line).
    keys = list(dict.fromkeys((g, pol.removesuffix("+control"), m) for (g, m, pol) in
                              per.groupby(["group", "machine", "policy"], sort=False).groups if pol != "linux"))
    palette = plt.get_cmap("tab20").colors
    colour = {k: palette[(2 * i) % 20 + (i // 10) % 2] for i, k in enumerate(keys)}  # dark shades, then light
    for (g, m, pol), d in per.groupby(["group", "machine", "policy"], sort=False):
        d = d.sort_values("instructions")
        if pol == "linux":
            b.plot(d.instructions, d.ipc, marker="o", label=f"{g} ({m})")
            continue
        style = dict(ls="--", marker="s", mfc="none", ms=9) if pol.endswith("+control") else dict(marker="o")
        a.plot(d.instructions, d.speedup, color=colour[(g, pol.removesuffix("+control"), m)], label=f"{g} {pol} ({m})", **style)
    a.axhline(1.0, color="grey", lw=0.8)
    sizes = sorted(per.instructions.unique())
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_xticks(sizes, [_size(x) for x in sizes])
        ax.minorticks_off()
        ax.set_xlabel("window (instructions of the region)")
    a.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    a.set_ylabel("speedup over linux (same placement)")
    a.set_title("each policy and its control against window size")
    b.set_ylabel("linux IPC")
    b.set_title("the baseline against window size")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    per = table(load(argv[1:]))
    plot(per, Path(argv[0]))
    print(markdown(per))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
