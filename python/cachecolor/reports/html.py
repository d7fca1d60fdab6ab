"""``report.html``: the report as one self-contained page (no script, no external resource:
plots inline as SVG, the policy reporters' PNGs as data URIs), so it can be mailed or archived
and opens the same anywhere.

Why static matplotlib and not plotly / Vega-Altair: a self-contained plotly page inlines its
3.5 MB JavaScript bundle (Altair needs vl-convert or a CDN for the same); the report's plots are
bar charts and time series a reader looks at rather than explores, matplotlib is already a
dependency, and a page with no script cannot fail in a browser (tests/test_reports.py renders it
in headless Chromium and checks the console).

Per config: IPC per process under each policy (bars; 95% intervals over seeds as error bars),
each process's IPC over time and its resident memory over time (axes in cycles and bytes, the
LLC's size marked), the pages each process holds per LLC color at the end, then every table of
the report (the comparison with mean ± interval, the papers' tables from the policy reporters)
and the reporters' own plots (MRCs, color assignments over time). Labels are never clipped:
figures use constrained layout and are saved with a tight bounding box.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any, Sequence

from . import fmt
from .base import Run, comparison, report_tables

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; white-space: nowrap; } th { background: #f3f3f3; }
td.text { white-space: normal; min-width: 20em; max-width: 50em; }
.scroll { overflow-x: auto; max-width: 100%; }
.verdicts { background: #f7f7f0; border: 1px solid #ddd; padding: 0.5em 1em; }
p.verdict { margin: 0.4em 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1em 0; } figure svg, figure img { max-width: 100%; height: auto; }
.meta { color: #555; }
"""


_SVGS = [0]


def _svg(fig: Any) -> str:
    """The figure as inline SVG: no date, and ids salted per figure (several SVGs share the
    page's id space), so the same runs give the same page byte for byte."""
    import matplotlib
    import matplotlib.pyplot as plt

    _SVGS[0] += 1
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"cachecolor-figure-{_SVGS[0]}"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _bytes_axis(ax: Any) -> None:
    """Bytes on the y axis, ticks at a power of two (256 KiB, 512 KiB, ...), never 977 KiB."""
    import math

    from matplotlib.ticker import FuncFormatter, MultipleLocator

    top = max(ax.get_ylim()[1], 1.0)
    ax.yaxis.set_major_locator(MultipleLocator(2 ** math.ceil(math.log2(top / 8))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.bytes_(v)))


def _cycles_axis(ax: Any) -> None:
    """Cycles on the x axis: at most four ticks (labels such as "150 M" are wide; more ran
    together in a 4-inch panel)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, min_n_ticks=2))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt.number(v)))


def _process_legend(axes: Any) -> None:
    """The processes' legend on the last panel, from the first panel that drew any: a panel
    of its own may be empty (a run without the series), and matplotlib then warned on stderr
    and the figure had no legend."""
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            axes[-1].legend(handles, labels, title="process", fontsize=8, loc="upper left",
                            bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
            return


def _llc(run: Run) -> tuple[str, int, int, int]:
    """(name, size in bytes, colors, page size) of the run's last-level cache."""
    cfg = run.result.to_dict().get("config", {})
    h = cfg.get("machine", {}).get("hierarchy", {})
    levels = h.get("levels") or [{}]
    llc = levels[-1]
    size = int(llc.get("size", 0) or 0)
    ways = int(llc.get("ways", 1) or 1)
    page = int(h.get("page_size", 4096) or 4096)
    slices = int(llc.get("slices", 1) or 1)
    # Colors per slice, as the simulator counts them (`Geometry::colors`, COLORIS eq. 1 on one
    # slice); the whole cache's size over ways and pages overcounted a sliced LLC (POWER5,
    # core-i3-2100), and the pages-per-color figure, finding no run with that many colors, was
    # left out without a word.
    colors = max(1, size // slices // ways // page) if size else 0
    return str(llc.get("name", "LLC")), size, colors, page


def _figures(config: str, runs: list[Run], frame: Any) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out = []
    stem = Path(config).stem
    policies = list(dict.fromkeys(r.policy for r in runs))
    rows = frame[frame["config"] == stem]
    procs = list(dict.fromkeys(rows["process"]))
    # IPC per process and policy, mean over seeds with the 95% interval.
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(procs) * len(policies) / 2 + 3), 3.6), layout="constrained")
    width = 0.8 / max(1, len(policies))
    for k, pol in enumerate(policies):
        means, errs = [], []
        for proc in procs:
            vals = rows[(rows["policy"] == pol) & (rows["process"] == proc)]["ipc"].to_numpy(dtype=float)
            m, h = fmt.mean_ci(vals)
            means.append(m)
            errs.append(0.0 if h != h else h)
        x = np.arange(len(procs)) + (k - (len(policies) - 1) / 2) * width
        ax.bar(x, means, width, yerr=errs, capsize=3, label=pol)
    ax.set_xticks(np.arange(len(procs)), procs, rotation=20 if len(procs) > 4 else 0, ha="right" if len(procs) > 4 else "center")
    ax.set_ylabel("IPC (instructions per cycle)")
    ax.set_xlabel("process")
    seeds = rows["seed"].nunique(dropna=False)
    ax.set_title(f"{stem}: IPC per process" + (f" (mean of {seeds} seeds, 95% interval)" if seeds > 1 else ""))
    ax.legend(title="policy", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(True, axis="y", alpha=0.3)
    out.append(("IPC per process", _svg(fig)))

    first = {}
    for r in runs:
        first.setdefault(r.policy, r)
    name, size, colors, page = _llc(runs[0])
    seeds_run = list(dict.fromkeys(r.seed for r in runs))
    seed_note = f" (one run per policy: the first of the seeds {', '.join(map(str, seeds_run))})" if len(seeds_run) > 1 else ""
    # IPC and resident memory over time, one panel per policy (the first seed's run, named in
    # each panel's title).
    for metric, ylabel, caption in (("ipc", "IPC in the interval", "IPC over time"), ("frames", "resident memory (bytes)", "Resident memory over time")):
        fig, axes = plt.subplots(1, len(first), figsize=(max(5.5, 4.2 * len(first)), 3.4), layout="constrained", sharey=True, squeeze=False)
        for ax, (pol, r) in zip(axes[0], first.items()):
            iv = r.result.intervals
            if len(iv):
                for proc, g in iv.groupby("process", sort=False):
                    y = g[metric] * page if metric == "frames" else g[metric]
                    ax.plot(g["time"], y, label=proc, marker="." if len(g) < 40 else None)
            if metric == "frames" and size:
                ax.axhline(size, color="k", linestyle="--", linewidth=1)
                ax.annotate(f"{name} {fmt.bytes_(size)}", (0.01, size), xycoords=("axes fraction", "data"), va="bottom", fontsize=8)
                _bytes_axis(ax)
            _cycles_axis(ax)
            ax.set_xlabel("time (cycles)")
            seed = "the config's seed" if r.seed is None else f"seed {r.seed}"
            ax.set_title(f"{stem} under {pol}, {seed}", fontsize=10)
            ax.grid(True, alpha=0.3)
        axes[0][0].set_ylabel(ylabel)
        _process_legend(axes[0])
        out.append((caption + seed_note, _svg(fig)))

    # Pages faulted in per LLC color over the run, per process: every fault counts its page in
    # the color it was given (first touch, and a lazy recolor's fault again); eager recolors and
    # frees are not subtracted, so this is where pages were placed, not where they are at the end.
    if colors and colors <= 1024:
        fig, axes = plt.subplots(1, len(first), figsize=(max(5.5, 4.2 * len(first)), 3.2), layout="constrained", sharey=True, squeeze=False)
        drawn = False
        for ax, (pol, r) in zip(axes[0], first.items()):
            bottom = np.zeros(colors)
            for p in r.result.to_dict()["processes"]:
                ppc = p.get("pages_per_color") or []
                if len(ppc) == colors:
                    ax.bar(np.arange(colors), ppc, bottom=bottom, width=1.0, label=p["name"])
                    bottom += np.asarray(ppc, dtype=float)
                    drawn = True
            ax.set_xlabel(f"{name} color ({colors} colors of {fmt.bytes_(size // colors)})")
            seed = "the config's seed" if r.seed is None else f"seed {r.seed}"
            ax.set_title(f"{stem} under {pol}, {seed}", fontsize=10)
            ax.grid(True, axis="y", alpha=0.3)
        axes[0][0].set_ylabel(f"pages ({fmt.bytes_(page)}) faulted in")
        if drawn:
            _process_legend(axes[0])
            out.append(("Pages faulted in per color over the run (where each page was placed at its faults; "
                        "not subtracted when moved or freed)" + seed_note, _svg(fig)))
        else:
            plt.close(fig)
    return out


def _table(frame: Any) -> str:
    head, rows = fmt.cells(frame)
    numeric = [frame[c].dtype.kind in "iuf" for c in head]
    parts = ['<div class="scroll"><table><thead><tr>', "".join(f"<th>{html.escape(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for r in rows:
        parts.append("<tr>" + "".join(
            f'<td class="n">{html.escape(x)}</td>' if n else (f'<td class="text">{html.escape(x)}</td>' if len(x) > 40 else f"<td>{html.escape(x)}</td>")
            for x, n in zip(r, numeric)) + "</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def write_html(runs: Sequence[Run], out_dir: Any, pngs: Sequence[Path] = (), reporters: Any = None,
               tables: Any = None, frame: Any = None, verdicts: Any = None) -> Path:
    """Write ``out_dir/report.html`` (replaced only once complete) and return its path;
    ``frame``, ``tables``: ``comparison``'s and ``report_tables``'s, when already computed."""
    from .. import __version__

    if reporters is None:
        from . import REPORTERS as reporters
    runs = list(runs)
    _SVGS[0] = 0
    if frame is None:
        frame = comparison(runs)
    configs = list(dict.fromkeys(r.config for r in runs))
    policies = list(dict.fromkeys(r.policy for r in runs))
    seeds = list(dict.fromkeys(r.seed for r in runs))
    seed_text = "the configs' own seeds" if seeds == [None] else ", ".join(str(s) for s in seeds)
    body = [
        "<h1>cachecolor report</h1>",
        f'<p class="meta">cachecolor {html.escape(__version__)}; configs: {html.escape(", ".join(configs))}; '
        f"policies: {html.escape(', '.join(policies))}; seeds: {html.escape(seed_text)}.</p>",
    ]
    from . import verdict

    # The page opens as report.md does (verdict.opening): the headroom verdicts of report
    # --oracle (docs/verdicts.md), then the page's conclusions, one sentence per config and policy.
    opening = verdict.opening(runs, frame, verdicts)
    if opening.verdicts is not None:
        body.append(f"<h2>Verdicts</h2><p>{html.escape(opening.headline)}</p>{_table(opening.verdicts)}"
                    f"<p class=\"meta\">{html.escape(opening.rule)}</p><h3>Oracles</h3>{_table(opening.oracles)}")
    if opening.sentences:
        body.append('<section class="verdicts" id="verdicts"><h2>Verdict</h2>' + "".join(
            f'<p class="verdict" data-config="{html.escape(c)}" data-policy="{html.escape(p)}">{html.escape(t)}</p>'
            for c, p, t in opening.sentences) + "</section>")
    for config in configs:
        body.append(f"<h2>{html.escape(Path(config).stem)}</h2><p class=\"meta\">{html.escape(config)}</p>")
        for title, svg in _figures(config, [r for r in runs if r.config == config], frame):
            body.append(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>")
    body.append("<h2>Tables</h2>")
    for title, table in report_tables(runs, frame, reporters) if tables is None else tables:
        body.append(f"<h3>{html.escape(title)}</h3>{_table(table)}")
    if pngs:
        body.append("<h2>The policies' plots</h2>")
        for p in pngs:
            data = base64.b64encode(Path(p).read_bytes()).decode()
            body.append(f'<figure><figcaption>{html.escape(Path(p).name)}</figcaption><img alt="{html.escape(Path(p).stem)}" src="data:image/png;base64,{data}"></figure>')
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>cachecolor report</title><style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    from .._output import write_text

    out = Path(out_dir) / "report.html"
    write_text(out, page)
    return out
