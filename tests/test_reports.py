"""``cachecolor report`` on sweeps (python/cachecolor/reports/): seeds folded into a mean and a 95%
interval (checked against a numerical integration of Student's t), pipe tables that render,
numbers for people, the registry, and the HTML page rendered in headless Chromium (not blank, no
console errors)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecolor import _core, reports
from cachecolor.reports import fmt

OS = Path(__file__).resolve().parent.parent / "examples" / "os"


def small(tmp_path: Path, references: int = 20_000) -> Path:
    text = (OS / "colors-disjoint.toml").read_text().replace("references = 600000", f"references = {references}")
    p = tmp_path / "small.toml"
    p.write_text(text)
    return p


def t_cdf(x: float, df: int) -> float:
    """Student's t CDF by Simpson integration of its density (independent of the table)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    n = 20_000
    xs = np.linspace(0.0, x, n + 1)
    f = c * (1 + xs**2 / df) ** (-(df + 1) / 2)
    h = x / n
    return 0.5 + h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())


def test_run_matrix_runs_its_grid_through_sweep_and_takes_stored_points_again(tmp_path):
    """``run_matrix`` is a grid of sweep points (stored, keyed, reused), not a loop of its own:
    its results equal ``simulate_system``'s on each (config, policy, seed), and a second call on
    the same directory runs nothing (every point file untouched)."""
    from cachecolor.system import simulate_system

    cfg = small(tmp_path, references=5_000)
    store = tmp_path / "store"
    runs = reports.run_matrix([cfg], ["linux", "static"], seeds=[1, 2], out_dir=store)
    assert [(r.policy, r.seed) for r in runs] == [("linux", 1), ("linux", 2), ("static", 1), ("static", 2)]
    for r in runs:
        assert r.result.to_dict() == simulate_system(cfg, policy=r.policy, seed=r.seed).to_dict()
    points = sorted((store / "points").glob("*.json"))
    assert len(points) == 4
    stamps = [p.stat().st_mtime_ns for p in points]
    again = reports.run_matrix([cfg], ["linux", "static"], seeds=[1, 2], out_dir=store)
    assert [r.result.to_dict() for r in again] == [r.result.to_dict() for r in runs]
    assert [p.stat().st_mtime_ns for p in sorted((store / "points").glob("*.json"))] == stamps


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 9, 19, 29])
def test_t_quantiles_match_the_t_distribution(df):
    assert t_cdf(fmt.t975(df), df) == pytest.approx(0.975, abs=2e-4)


def test_mean_and_interval():
    m, h = fmt.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    m, h = fmt.mean_ci([5.0])
    assert m == 5.0 and h != h


def test_numbers_for_people():
    assert fmt.number(42_424_242.0) == "42.4 M"
    assert fmt.number(np.int64(123456)) == "123,456"
    assert fmt.number(1.23456) == "1.235"
    assert fmt.number(0.0123456) == "0.01235"
    assert fmt.number(float("nan")) == "-" and fmt.number(None) == "-"
    assert fmt.bytes_(8 << 20) == "8 MiB" and fmt.bytes_(1536) == "1.5 KiB"
    frame = pd.DataFrame({"policy": ["a|b"], "ipc": [1.5], "ipc_ci": [0.25], "cycles": [4.242e7]})
    md = fmt.markdown_table(frame).splitlines()
    assert md[0] == "| policy | ipc | cycles |"
    assert md[1] == "|---|---:|---:|"
    assert md[2] == "| a\\|b | 1.500 ± 0.25 | 42.4 M |"
    assert fmt.half(0.0001479) == "0.00015" and fmt.half(8557.0) == "8,600" and fmt.half(1_234_567.0) == "1.2 M"


def test_the_registry_names_every_policy_reporter():
    # Every policy whose registry line names a report struct with a reporter has it, and no
    # reporter is for a struct no registered policy reports (a new struct needs none: its policy
    # gets the generic tables).
    structs = _core.POLICY_REPORTS
    assert set(reports.REPORTERS) == {p for p, s in structs.items() if s in reports.BY_REPORT}
    assert set(reports.BY_REPORT) <= {s for s in structs.values() if s}
    assert set(reports.REPORTERS) >= {"rocs", "global-pollute"}  # one struct, two policies
    assert all(isinstance(r, reports.PolicyReporter) for r in reports.REPORTERS.values())


def test_report_aggregates_seeds_and_writes_markdown_that_renders(tmp_path):
    cfg = small(tmp_path)
    out = tmp_path / "rep"
    run = subprocess.run([sys.executable, "-m", "cachecolor", "report", str(cfg), "--policy", "linux", "--policy", "static",
                          "--seeds", "3", "--out", str(out), "--workers", "2", "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    md = (out / "report.md").read_text()
    assert "seed None" not in md and "e+0" not in md
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert lines[0].startswith("| config | policy | process | seeds | ipc |")
    # The first table's rows only (the robustness table per policy follows it).
    # (The verdict sentences, a list, come before it.)
    first = next(t for t in ([line for line in sec.splitlines() if line.startswith("|")] for sec in md.split("\n## ")) if t)
    widths = {line.count("|") - line.count("\\|") for line in first}
    assert len(widths) == 1, "every row of the first table has the header's columns"
    raw = pd.read_csv(out / "comparison.csv")
    victim = raw[(raw["process"] == "victim") & (raw["policy"] == "static")]["ipc"].to_numpy()
    mean, half = fmt.mean_ci(victim)
    row = next(line for line in lines if "| static | victim |" in line)
    assert f"{fmt.number(mean)} ± {fmt.half(half)}" in row
    assert (out / "report.html").is_file() and (out / "results.parquet").is_file()
    # Re-running the report computes nothing: every point is stored.
    again = reports.report_sweep(
        [p for c in [cfg] for p in __import__("cachecolor").grid([c], None, ["linux", "static"], [1, 2, 3])],
        out, executor="serial", progress=False, plots=False, html=False,
    )
    assert again.markdown == md


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium is not installed (make tools installs it as root)")
    return exe


def render(exe: str, page: Path, png: Path) -> str:
    """Screenshot ``page`` with headless Chromium; return its log (console messages included)."""
    run = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2400",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={page.parent / 'chromium-profile'}",
         f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert png.is_file(), run.stderr[-2000:]
    return run.stderr


def console_errors(log: str) -> list[str]:
    # Chromium's log gives every console message (error, warning, log, an uncaught exception) as
    # INFO:CONSOLE without its level; the report has no script, so any message is an error.
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def test_html_report_renders_in_headless_chromium(tmp_path):
    exe = chromium()
    import matplotlib.pyplot as plt

    # The console check can fail: a page that logs an error is caught.
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('boom')</script></body></html>")
    assert any("boom" in line for line in console_errors(render(exe, bad, tmp_path / "bad.png")))

    cfg = small(tmp_path)
    out = tmp_path / "rep"
    rep = reports.report_sweep(
        __import__("cachecolor").grid([cfg], None, ["linux", "static"], [1, 2]), out, executor="serial", progress=False
    )
    page = out / "report.html"
    assert page in rep.files
    text = page.read_text()
    assert "<script" not in text and "<link" not in text
    # Self-contained: every resource is inline (a missing file would not reach the console).
    import re

    refs = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert all(r.startswith(("data:", "#")) for r in refs), [r for r in refs if not r.startswith(("data:", "#"))][:3]
    assert "time (cycles)" in text or "<svg" in text
    png = tmp_path / "report.png"
    log = render(exe, page, png)
    assert console_errors(log) == [], console_errors(log)
    img = plt.imread(png)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    # Not blank: many distinct colors, and a good part of the page is not the background.
    flat = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(flat, axis=0)) > 50
    background = np.all(flat == flat[0], axis=1).mean()
    assert background < 0.97, background
    shutil.copy(png, Path("/tmp/cachecolor-report-screenshot.png")) if Path("/tmp").is_dir() else None


# Run inside a copy of the page (the report itself has no script): measures the laid-out DOM
# and leaves the result in <body data-checks="...">, which --dump-dom prints.
DOM_CHECKS = """<script>
(function () {
  const out = {cut: [], clipped: [], verdicts: [], captions: []};
  const page = document.body.getBoundingClientRect();
  for (const t of document.querySelectorAll('table')) {
    const box = t.closest('.scroll');
    const scrolls = box !== null && getComputedStyle(box).overflowX === 'auto'
      && box.getBoundingClientRect().right <= page.right + 1;
    if (t.getBoundingClientRect().right > page.right + 1 && !scrolls)
      out.cut.push(t.rows[0].textContent.slice(0, 60));
  }
  for (const td of document.querySelectorAll('td'))
    if (td.scrollWidth > td.clientWidth + 1) out.clipped.push(td.textContent.slice(0, 60));
  for (const p of document.querySelectorAll('section.verdicts p.verdict')) out.verdicts.push(p.textContent);
  for (const f of document.querySelectorAll('figcaption')) out.captions.push(f.textContent);
  out.verdictFirst = document.querySelector('h2') !== null && document.querySelector('h2').textContent === 'Verdict';
  document.body.setAttribute('data-checks', JSON.stringify(out));
})();
</script>"""


def dom_checks(exe: str, page: Path, width: int = 1000) -> dict:
    """Lay ``page`` out in headless Chromium at ``width`` pixels and return DOM_CHECKS' findings."""
    import html as html_lib
    import json
    import re

    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", DOM_CHECKS + "</body>"))
    run = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--window-size={width},2000",
         f"--user-data-dir={page.parent / 'chromium-dom'}", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    m = re.search(r'data-checks="([^"]*)"', run.stdout)
    assert m, run.stderr[-2000:]
    return json.loads(html_lib.unescape(m.group(1)))


def test_html_report_layout_in_headless_chromium(tmp_path):
    """The laid-out page: a verdict sentence per config and policy first, with the gain's
    interval; every table fits the page or scrolls in its own box; no cell cuts its text (the
    policy warnings wrap); each time plot's caption says which seed it shows; the pages-per-color
    plot says what it counts. The check itself can fail: a wide table outside a scroll box and a
    clipped cell are caught."""
    exe = chromium()
    bad = tmp_path / "bad" / "report.html"
    bad.parent.mkdir()
    bad.write_text("<!DOCTYPE html><html><body style='width:500px'><table><tr><td>" + "x" * 400
                   + "</td></tr></table><table><tr><td style='max-width:50px;overflow:hidden'>" + "y" * 60
                   + "</td></tr></table></body></html>")
    found = dom_checks(exe, bad)
    assert found["cut"] and found["clipped"], found

    cfg = small(tmp_path)
    out = tmp_path / "rep"
    reports.report_sweep(
        __import__("cachecolor").grid([cfg], None, ["linux", "static"], [1, 2, 3]), out, executor="serial", progress=False
    )
    found = dom_checks(exe, out / "report.html")
    assert found["verdictFirst"], found
    assert len(found["verdicts"]) == 1 and "static changes IPC by" in found["verdicts"][0], found["verdicts"]
    assert "95% interval" in found["verdicts"][0] and "over 3 seeds" in found["verdicts"][0]
    assert found["cut"] == [], found["cut"]
    assert found["clipped"] == [], found["clipped"]
    timed = [c for c in found["captions"] if "over time" in c]
    assert timed and all("seed" in c for c in timed), found["captions"]
    colors = [c for c in found["captions"] if "per color" in c]
    assert colors and all("faulted in" in c and "at the end" not in c for c in colors), colors
    md = (out / "report.md").read_text()
    assert md.startswith("## Verdict\n") and found["verdicts"][0] in md


def test_report_control_runs_are_labelled_apart_from_their_policy(tmp_path):
    """Regression (`report --control`): a control run carries its policy's ``[policy] name``
    and ``control = true``; labelled by the name alone, the control runs were folded into the
    policy's rows (10 seeds of `global-pollute` for 5 asked, a summed IPC of 1.985x linux in the
    robustness table) and each control's search plot overwrote the policy's."""
    cfg = small(tmp_path)
    out = tmp_path / "rep"
    run = subprocess.run([sys.executable, "-m", "cachecolor", "report", str(cfg), "--policy", "linux", "--policy", "static",
                          "--control", "--seeds", "2", "--out", str(out), "--workers", "2", "-q", "--no-plots", "--no-html"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    raw = pd.read_csv(out / "comparison.csv")
    assert set(raw.policy) == {"linux", "static", "static+control"}
    assert (raw.groupby(["policy", "process"]).seed.nunique() == 2).all(), "each label holds its own 2 seeds"
    assert len(raw) == raw[["policy", "process", "seed"]].drop_duplicates().shape[0], "one row per run and process"
    md = (out / "report.md").read_text()
    assert "## robustness: static against linux" in md and "## robustness: static+control against linux" in md
    # The sweep's own table labels the runs the same way.
    results = pd.read_parquet(out / "results.parquet")
    assert set(results.policy) == {"linux", "static", "static+control"}


def test_report_figures_warn_nothing_and_keep_the_process_legend_when_a_panel_is_empty(tmp_path):
    """Regression (the HTML report's per-process panels): the legend was taken from the last
    panel, so a panel without the series printed matplotlib's "No artists with labels" warning
    on stderr, and a figure whose other panels drew had no legend. On every POWER5 and sliced-i3
    config the report counted the LLC's colors over the whole cache, not per slice as the
    simulator does, so no run matched and the pages-per-color figure was dropped (after the
    warning)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cachecolor.reports.html import _process_legend

    fig, axes = plt.subplots(1, 2, squeeze=False)
    axes[0][0].plot([0, 1], [1, 2], label="victim")
    _process_legend(axes[0])
    legend = axes[0][1].get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == ["victim"]
    plt.close(fig)

    cfg = Path(__file__).resolve().parent.parent / "examples" / "robustness" / "sliced-i3-two-fit.toml"
    run = subprocess.run([sys.executable, "-m", "cachecolor", "report", str(cfg), "--policy", "linux", "--seeds", "1",
                          "--out", str(tmp_path / "rep"), "--no-plots", "-q"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "Warning" not in run.stderr, run.stderr
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "Pages faulted in per color" in html and "32 colors of" in html, "core-i3-2100: 3 MiB / 2 slices / 12 ways / 4 KiB"


def test_a_policy_that_never_acted_says_so_in_simulate_and_report(tmp_path):
    """Regression (the audit of issue 19): `mrc-partition` set no partition on 17 example
    configs, `thread-cluster` migrated nothing, `rocs` targeted nothing, and neither `simulate`
    nor `report` said a word: a column identical to linux's read as a measured null result."""
    cfg = Path(__file__).resolve().parent.parent / "examples" / "robustness" / "mix2-both-fit.toml"
    sim = subprocess.run([sys.executable, "-m", "cachecolor", "simulate", str(cfg), "--policy", "mrc-partition", "-q"],
                         capture_output=True, text=True)
    assert sim.returncode == 0, sim.stderr
    assert "warning: mrc-partition set no partition" in sim.stderr, sim.stderr
    out = tmp_path / "rep"
    run = subprocess.run([sys.executable, "-m", "cachecolor", "report", str(cfg), "--policy", "linux", "--policy", "rocs",
                          "--policy", "rocs+control", "--seeds", "2", "--out", str(out), "-q", "--no-plots", "--no-html"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    md = (out / "report.md").read_text()
    section = md.split("## policy warnings")[1].split("\n## ")[0]
    assert "| mix2-both-fit | rocs | 1, 2 | rocs targeted no process" in section, section
    assert "rocs+control" not in section, "a control run is its own record (its refused moves), not a warning"
