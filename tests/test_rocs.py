"""ROCS and global-pollute from Python and the CLI: the configs run under every policy name, the
report's ROCS tables (Table 3, Figures 7, 8, 10) come out with the best-offline harness, and bad
settings are clear errors (the scenario checks themselves are Rust tests in
crates/sim/src/policy/rocs_tests.rs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cachecolor
from cachecolor.reports import rocs as report_rocs
from conftest import needs_cc, needs_qemu

ROOT = Path(__file__).resolve().parent.parent
ART = ROOT / "examples" / "rocs" / "art.toml"
CAPTURED = ROOT / "examples" / "rocs" / "programs" / "art_like.toml"


def test_art_under_linux_and_rocs_from_the_cli(tmp_path):
    docs = {}
    for policy in ("linux", "rocs"):
        out = tmp_path / f"{policy}.json"
        run = subprocess.run(
            [sys.executable, "-m", "cachecolor", "simulate", str(ART), "--policy", policy,
             "--json", str(out), "-q"],
            capture_output=True, text=True,
        )
        assert run.returncode == 0, run.stderr
        docs[policy] = json.loads(out.read_text())
        assert docs[policy]["invariants"] == []
    l, r = docs["linux"]["processes"][0], docs["rocs"]["processes"][0]
    assert r["ipc"] > 1.1 * l["ipc"] and r["llc_mpki"] < l["llc_mpki"]
    assert docs["linux"]["policy_report"] is None
    rep = docs["rocs"]["policy_report"]
    assert rep["policy"] == "rocs" and rep["sampled_event"] == "l1d-misses"
    assert rep["units"][0]["searches"][0]["chosen"] > 0


def test_report_tables_and_best_offline(tmp_path, monkeypatch):
    from cachecolor import reports as report

    monkeypatch.setattr(report_rocs, "best_offline_points", 3)
    runs = report.run_matrix([ART], ["linux", "rocs"])
    text, written = report.write_report(runs, tmp_path)
    for title in ("Table 3", "Figure 7", "Figure 8", "Figure 10"):
        assert f"rocs - ROCS {title}" in text
    t3 = report_rocs.table3(runs)
    assert t3["from_streaming"][0] > 0.9
    f10 = report_rocs.figure10(runs).set_index("array")
    reused = f10[~f10["streaming"]].iloc[0]
    assert reused["miss_rate_after"] < reused["miss_rate_before"]
    f7 = report_rocs.figure7(runs)
    assert 0 < f7["monitoring_pct"][0] < 5 and 0 < f7["remapping_pct"][0] < 5
    f8 = report_rocs.figure8(runs)
    assert f8["best_offline_pages"][0] > 0
    assert any(p.suffix == ".png" for p in written)


def test_report_on_a_search_cut_short_by_the_exit_says_unfinished(tmp_path, monkeypatch):
    """Regression: art shortened to 1 M references exits three steps into its search; the
    search now reads as unfinished (`chosen: null`), and the report's tables and plots take it
    (a NaN count, a plot without the kept line) instead of failing on the null."""
    from cachecolor import reports as report

    short = tmp_path / "art_short.toml"
    text = ART.read_text()
    assert "references = 8_000_000" in text
    short.write_text(text.replace("references = 8_000_000", "references = 1_000_000"))
    monkeypatch.setattr(report_rocs, "best_offline_points", 2)
    runs = report.run_matrix([short], ["rocs"])
    unit = runs[0].result.policy_report["units"][0]
    assert unit["search_unfinished"] and unit["searches"][-1]["chosen"] is None
    _text, written = report.write_report(runs, tmp_path / "out")
    t3 = report_rocs.table3(runs)
    assert t3["pollute_pages"].isna().all() and t3["from_streaming"].isna().all()
    assert any(p.suffix == ".png" for p in written)


def test_best_offline_sweeps_the_given_counts():
    frame = report_rocs.best_offline(ART, points=[0, 444])
    assert list(frame["pages"]) == [0, 444]
    assert frame.set_index("pages").loc[444, "ipc"] > frame.set_index("pages").loc[0, "ipc"]
    assert frame["best"].sum() == 1


@pytest.mark.parametrize(
    "policy,table,body,field",
    [
        ("rocs", "rocs", {"buffer_size": "1MiB"}, "policy.rocs.buffer_size"),
        ("rocs", "rocs", {"throttle_cycles": 0}, "policy.rocs.throttle_cycles"),
        ("rocs", "rocs", {"target_miss_rate": 2.0}, "policy.rocs.target_miss_rate"),
        ("global-pollute", "global-pollute", {"buffer_size": "512KiB"}, "policy.global-pollute.buffer_size"),
    ],
)
def test_bad_settings_are_config_errors(policy, table, body, field):
    cfg = cachecolor.system.load_system_config(ART)
    cfg["policy"] = {"name": policy, table: body}
    with pytest.raises(cachecolor.ConfigError) as info:
        cachecolor.simulate_system(cfg)
    assert field in str(info.value)


@needs_cc
@needs_qemu
def test_rocs_on_a_captured_art_like_program(run_cli, tmp_path):
    """A real program (examples/rocs/programs/art_like.c) captured and run as programs/art_like.toml says:
    rocs pays on it as on the synthetic art, and what it moves is the streaming arrays."""
    exe = tmp_path / "art_like"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "examples/rocs/programs/art_like.c")], check=True)
    cap = run_cli("trace", "--no-ifetch", "-o", "art_like.cctrace", "--", exe, "2500000")
    assert cap.returncode == 0, cap.stderr
    arrays = {}
    for line in cap.stdout.splitlines():
        name, *rest = line.split()
        if name in ("bus", "tds", "f1_layer"):
            arrays[name] = (int(rest[0], 16), int(rest[0], 16) + int(rest[1]))
    assert set(arrays) == {"bus", "tds", "f1_layer"}, cap.stdout
    # The config beside the trace: a system config's trace paths are relative to its own
    # directory (issue 24), and the example's trace is art_like.cctrace beside it.
    config = tmp_path / CAPTURED.name
    config.write_text(CAPTURED.read_text())
    docs = {}
    for policy in ("linux", "rocs"):
        out = run_cli("simulate", config, "--policy", policy, "--json", f"{policy}.json", "-q")
        assert out.returncode == 0, out.stderr
        docs[policy] = json.loads((tmp_path / f"{policy}.json").read_text())
        assert docs[policy]["invariants"] == []
    l, r = docs["linux"]["processes"][0], docs["rocs"]["processes"][0]
    assert r["ipc"] > 1.1 * l["ipc"] and r["llc_mpki"] < l["llc_mpki"], (l, r)
    pages = docs["rocs"]["policy_report"]["units"][0]["searches"][0]["pages"]
    in_streams = sum(
        any(lo <= vpn * 4096 < hi for lo, hi in (arrays["bus"], arrays["tds"])) for _, vpn in pages
    )
    assert len(pages) > 100 and in_streams > 0.9 * len(pages), (len(pages), in_streams)


def test_report_runs_best_offline_only_when_asked(tmp_path):
    """Regression: every rocs run of a `cachecolor report` ran ROCS Figure 8's best offline (18
    more runs each, one after another): over the robustness matrix and 5 seeds the report spent
    more than 20 minutes in it after a 3-minute sweep. It is now opt-in (`--best-offline N`)."""
    import subprocess
    import sys

    cfg = tmp_path / "art_short.toml"
    cfg.write_text(ART.read_text().replace("references = 8_000_000", "references = 3_000_000"))

    def report(*extra: str, quiet: bool = True) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "cachecolor", "report", str(cfg), "--policy", "linux",
                               "--policy", "rocs", "--out", str(tmp_path / f"rep{len(extra)}{quiet}"), "--no-plots",
                               *(["--no-html", "-q"] if quiet else []), *extra], capture_output=True, text=True)

    plain = report()
    assert plain.returncode == 0, plain.stderr
    assert "ROCS Figure 8" in plain.stdout and "best_offline" not in plain.stdout
    assert "best offline:" not in plain.stderr
    asked = report("--best-offline", "2")
    assert asked.returncode == 0, asked.stderr
    assert "best_offline" in asked.stdout and "best offline:" not in asked.stderr, "-q: no progress on stderr"
    # Regression: report.md and report.html each computed the tables, so the best offline ran
    # twice (its N + 1 simulations per rocs run, one after another).
    loud = report("--best-offline", "2", quiet=False)
    assert loud.returncode == 0, loud.stderr
    assert loud.stderr.count("best offline: art_short, seed") == 1, loud.stderr
    bad = report("--best-offline", "1")
    assert bad.returncode == 2 and "--best-offline 1" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_skipped_search_says_why_in_table3_and_draws_no_ipc(tmp_path, monkeypatch):
    """Regression: swim (seed 1) skipped its search ("no sampled reference hit"); Table 3 gave
    0 pollute pages with no word, and the search plot drew its unmeasured baseline as IPC 0.
    swim's own search runs now (its first passes over new pages hit the lines their clear left);
    its streams alone, with no reused part, sample no hit (seed 2; seed 1 samples one)."""
    from cachecolor import reports as report

    swim = (ROOT / "examples" / "rocs" / "swim.toml").read_text()
    uniform = next(line for line in swim.splitlines() if 'pattern = "uniform"' in line)
    streams = tmp_path / "swim-streams.toml"
    streams.write_text(swim.replace(uniform + "\n", "").replace("weight = 0.2375", "weight = 0.25"))
    runs = report.run_matrix([streams], ["rocs"], seeds=[2])
    s = runs[0].result.policy_report["units"][0]["searches"][0]
    assert s["skipped"] and s["baseline_ipc"] == 0.0
    t3 = report_rocs.table3(runs)
    assert t3["skipped"][0] == s["skipped"]
    from matplotlib.figure import Figure

    drawn = []
    save = Figure.savefig

    def keep(fig, *a, **k):  # look at the figure as it is saved
        left = fig.axes[0]
        drawn.append(([line for line in left.lines if len(line.get_xdata())], [t.get_text() for t in left.texts]))
        return save(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    [png] = report_rocs._plots(runs, tmp_path)
    assert png.is_file()
    [(lines, texts)] = drawn
    assert lines == [], "no IPC drawn for a search that measured none"
    assert any("search skipped" in t and s["skipped"] in t for t in texts), texts
