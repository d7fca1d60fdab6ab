"""Page-level cache profiles (ROCS section 3; crates/sim/src/analysis/pages.rs).

``page_profile(config, trace, level=None)`` (the last level) runs a trace (or the config's workload) through the
config's hierarchy and counts, per virtual page, the data accesses that reached ``level`` and
the misses there: the ground truth. With ``sample_period=N`` it also builds what a PMU sampler
would (ROCS 3.1: one L1D miss in N, with its data address and data source), so the estimate
can be judged against the truth. The result draws ROCS Figure 2 (``histogram``,
``plot_histogram``: how many pages have each miss rate) and Figure 3 (``plot_address_space``:
accesses and miss rate per page in address order) and lists the regions of neighbouring pages
with similar miss rates (section 3.2.2).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

import numpy as np

from . import _core
from .config import ConfigSource, load_config
from .simulation import Progress, _wrap_progress


@dataclass(frozen=True)
class PageProfile:
    """Per-page accesses and misses at ``level`` (``pages``: one row per page in address
    order) and the miss-rate ``regions``."""

    level: str
    page_size: int
    sample_period: Optional[int]
    references: int
    accesses: int
    misses: int
    samples: int
    doc: dict[str, Any] = field(repr=False)

    @property
    def pages(self) -> Any:
        """``vpn``, ``address``, ``references`` (data references to the page), ``accesses`` and
        ``misses`` at the level, ``miss_rate``, ``samples``, ``sampled_accesses``,
        ``sampled_misses``, ``sampled_miss_rate`` (NaN without samples at the level) and
        ``estimated_accesses`` (sampled accesses times the period)."""
        import pandas as pd

        frame = pd.DataFrame(self.doc["pages"])
        frame.insert(1, "address", frame["vpn"] * self.page_size)
        frame["sampled_miss_rate"] = frame["sampled_miss_rate"].astype(float)
        if self.sample_period:
            frame["estimated_accesses"] = frame["sampled_accesses"] * self.sample_period
        return frame

    @property
    def regions(self) -> Any:
        """``first_vpn``, ``last_vpn``, ``pages``, ``accesses``, ``misses``, ``miss_rate``,
        ``access_share``: runs of neighbouring pages whose miss rates agree."""
        import pandas as pd

        return pd.DataFrame(self.doc["regions"], columns=["first_vpn", "last_vpn", "pages", "accesses", "misses", "miss_rate", "access_share"])

    @property
    def miss_rate(self) -> float:
        return self.misses / self.accesses if self.accesses else 0.0

    def histogram(self, bins: int = 10, sampled: bool = False) -> Any:
        """ROCS Figure 2: pages per miss-rate bin (``bins`` equal bins of [0, 1]), with their
        share of the pages and of the accesses; ``sampled`` bins the PMU estimate instead
        (pages without samples left out)."""
        import pandas as pd

        p = self.pages
        p = p[p["accesses"] > 0]
        rate = p["sampled_miss_rate"] if sampled else p["miss_rate"]
        keep = rate.notna()
        p, rate = p[keep], rate[keep]
        edges = np.linspace(0.0, 1.0, bins + 1)
        which = np.minimum((rate.to_numpy() * bins).astype(int), bins - 1)
        pages = np.bincount(which, minlength=bins)
        acc = np.bincount(which, weights=p["accesses"].to_numpy(dtype=float), minlength=bins)
        return pd.DataFrame(
            {
                "low": edges[:-1],
                "high": edges[1:],
                "pages": pages,
                "page_share": pages / max(1, pages.sum()),
                "access_share": acc / max(1.0, acc.sum()),
            }
        )

    def estimate_error(self, min_samples: int = 10) -> float:
        """Mean absolute difference between the sampled and the true miss rate over the pages
        with at least ``min_samples`` samples at the level (NaN if none)."""
        p = self.pages
        p = p[p["sampled_accesses"] >= min_samples]
        return float((p["sampled_miss_rate"] - p["miss_rate"]).abs().mean()) if len(p) else float("nan")

    def plot_histogram(self, ax: Any = None, bins: int = 10) -> Any:
        import matplotlib.pyplot as plt

        h = self.histogram(bins)
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 4.5))
        centers = (h["low"] + h["high"]) / 2
        width = 0.9 / bins
        ax.bar(centers - width / 4, h["page_share"], width / 2, label="pages")
        ax.bar(centers + width / 4, h["access_share"], width / 2, label="accesses")
        if self.sample_period:
            s = self.histogram(bins, sampled=True)
            ax.plot(centers, s["page_share"], "k.", label=f"pages, sampled 1 in {self.sample_period}")
        ax.set_xlabel(f"{self.level} miss rate of the page")
        ax.set_ylabel("share")
        ax.legend()
        return ax

    def plot_address_space(self, ax: Any = None) -> Any:
        """ROCS Figure 3: one bar per page in address order (a compact view: gaps dropped),
        its height the accesses at the level, its color the miss rate."""
        import matplotlib.pyplot as plt

        p = self.pages
        p = p[p["accesses"] > 0]
        if ax is None:
            _, ax = plt.subplots(figsize=(9, 4))
        x = np.arange(len(p))
        colors = plt.get_cmap("coolwarm")(p["miss_rate"].to_numpy())
        ax.bar(x, p["accesses"], width=1.0, color=colors)
        ax2 = ax.twinx()
        ax2.plot(x, p["miss_rate"], "k-", lw=0.8)
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("miss rate")
        ax.set_xlabel("pages in address order")
        ax.set_ylabel(f"{self.level} accesses")
        return ax

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.doc))

    def to_json(self, path: Union[str, "os.PathLike[str]"]) -> None:
        from .results import write_json_atomic

        write_json_atomic(path, self.doc)


def page_profile(
    config: ConfigSource,
    trace: Optional[Union[str, "os.PathLike[str]"]] = None,
    *,
    level: Optional[str] = None,
    page_size: int = 4096,
    sample_period: Optional[int] = None,
    trace_format: str = "native",
    region_tolerance: float = 0.15,
    region_gap: int = 1,
    min_accesses: int = 1,
    progress: Optional[Callable[[Progress], Any]] = None,
) -> PageProfile:
    """Profile ``trace`` (or the config's ``[workload]``) page by page at ``level`` on the
    config's hierarchy; see the module documentation. ``level`` defaults to the hierarchy's last
    level (whatever its name: ``L3``, ``LLC``, ...), the one ROCS profiles."""
    cfg = load_config(config)
    if level is None:
        level = cfg["hierarchy"]["levels"][-1]["name"]
    options: dict[str, Any] = {
        "level": level, "page_size": int(page_size), "region_tolerance": float(region_tolerance),
        "region_gap": int(region_gap), "min_accesses": int(min_accesses),
    }
    if sample_period is not None:
        options["sample_period"] = int(sample_period)
    doc = json.loads(
        _core.page_profile(
            json.dumps(cfg), json.dumps(options), None if trace is None else os.fspath(trace), trace_format, _wrap_progress(progress)
        )
    )
    return PageProfile(
        level=doc["level"], page_size=doc["page_size"], sample_period=doc["sample_period"],
        references=doc["references"], accesses=doc["accesses"], misses=doc["misses"],
        samples=doc["samples"], doc=doc,
    )
