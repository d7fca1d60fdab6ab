"""The thesis's analytic models (Szlavik 2013), computed by the Rust core
(crates/sim/src/analysis/{placement,bins}.rs) and returned as NumPy / pandas:

- ``uniform_hit_rates``: section 2.3.2's stochastic hit rate of each cache level for a uniform
  workload of a given working-set size (Figures 2.7-2.9);
- ``conflict_curve``: eq. 3.1 / 3.2, the expected pages beyond the bins' capacity under random
  frame allocation (binomial, or the exact hypergeometric for a finite RAM) against a perfect
  spread, ``K_avg - K_min`` (Figure 3.2);
- ``placement_miss_rate``: eq. 5.2, the miss probability of a uniform workload from an actual
  frame allocation (pages per bin), per bin and in total (Figures 5.1-5.3).

Each has a ``plot_*`` that draws it, optionally beside measured or simulated values.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _core


def uniform_hit_rates(working_sets: Sequence[float], cache_sizes: Sequence[float], names: Optional[Sequence[str]] = None) -> Any:
    """One row per working-set size (bytes): the probability that an access hits each level
    (``cache_sizes`` in bytes, L1 first; columns named ``names`` or ``L1``, ``L2``, ...) and
    ``memory`` (missing them all)."""
    import pandas as pd

    names = list(names) if names is not None else [f"L{i + 1}" for i in range(len(cache_sizes))]
    if len(names) != len(cache_sizes):
        raise ValueError(f"{len(names)} names for {len(cache_sizes)} cache sizes")
    rows = _core.uniform_hit_rates([float(x) for x in working_sets], [float(c) for c in cache_sizes])
    frame = pd.DataFrame(rows, columns=names + ["memory"])
    frame.insert(0, "working_set", np.asarray(working_sets, dtype=np.float64))
    return frame


def conflict_curve(pages: Sequence[int], bins: int, ways: int, frames_per_bin: Optional[int] = None) -> Any:
    """Per page count: ``k_avg`` (eq. 3.2), ``k_min`` (a perfect spread), ``excess`` =
    ``k_avg - k_min``, and with the binomial model ``k_sd``, the standard deviation of the
    realised K. ``frames_per_bin`` switches to the hypergeometric (frames drawn without
    replacement from a RAM of ``bins * frames_per_bin`` frames)."""
    import pandas as pd

    rows = [_core.expected_conflicts(int(n), int(bins), int(ways), frames_per_bin) for n in pages]
    frame = pd.DataFrame(rows, columns=["k_avg", "k_min", "k_sd"])
    frame.insert(0, "pages", np.asarray(pages, dtype=np.int64))
    frame["excess"] = frame["k_avg"] - frame["k_min"]
    if frames_per_bin is not None:
        frame = frame.drop(columns="k_sd")
    return frame


def placement_miss_rate(pages_per_bin: Sequence[int], ways: int) -> tuple[float, np.ndarray]:
    """Eq. 5.2: the predicted miss rate of a uniform workload whose pages sit ``pages_per_bin``
    to a bin of a ``ways``-way cache, and each bin's term."""
    terms = np.asarray(_core.placement_miss_probability([int(n) for n in pages_per_bin], int(ways)))
    return float(terms.sum()), terms


def plot_hit_rates(frame: Any, measured: Any = None, ax: Any = None) -> Any:
    """Section 2.3.2's curves (a ``uniform_hit_rates`` frame) against the working set, with
    ``measured`` (a frame with ``working_set`` and the same level columns) as points."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    levels = [c for c in frame.columns if c != "working_set"]
    for i, c in enumerate(levels):
        color = f"C{i}"
        ax.plot(frame["working_set"], frame[c], color=color, label=f"{c} (model)")
        if measured is not None and c in measured:
            ax.plot(measured["working_set"], measured[c], "o", color=color, label=f"{c} (measured)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel("hit probability")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax


def plot_conflicts(frame: Any, measured: Any = None, ax: Any = None) -> Any:
    """Eq. 3.2's ``k_avg - k_min`` against the pages allocated, with ``measured`` (a frame of
    ``pages`` and ``excess``) as points."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(frame["pages"], frame["excess"], label="model: K_avg - K_min")
    if measured is not None:
        ax.plot(measured["pages"], measured["excess"], "o", label="measured")
    ax.set_xlabel("pages allocated")
    ax.set_ylabel("pages beyond their bin's capacity")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax
