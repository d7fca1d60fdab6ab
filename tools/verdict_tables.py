"""docs/verdicts.md's measured tables: each policy's verdict against the oracles on the verdict
mixes and on a stated subset of the robustness matrix, what the oracles cost, and which
verdicts support or refute each paper claim.

Each set runs the ``cachecolor report ... --oracle`` command the page shows (the runs cached in
its ``--out`` directory by content hash and simulator build, so a second run with nothing
changed recomputes nothing and a rebuilt simulator runs everything again), records the commit
and simulator build it ran on (``OUT/measured-on.json``), and splices the tables between
``<!-- headline-table: NAME -->`` and ``<!-- /headline-table -->`` (``tools/headline_tables.py``'s
markers). Each block's cost line sums its runs' own seconds (each run's wall time in its
worker, so inflated by a loaded machine). CPU time measured with ``/usr/bin/time`` (user +
system, the workers included, nothing cached, at a load of 13-22 on 2 cores): ``matrix-streams``
80 s, ``matrix-rest`` 154 s, ``suite`` 58 s (9, 22 and 14 minutes of wall time with 2, 2 and 1
workers); ``matrix-power5`` 779 s (42 minutes with 1 worker under ``nice -n 19`` at a load of
8-17: four 4-process mixes, each seed a partition climb). The test suite does not run this.

    python tools/verdict_tables.py           # run (or reuse) the reports and rewrite the tables (make docs-verdicts)
    python tools/verdict_tables.py --check   # exit 1 if a table differs (the cost lines, measurements, aside)
    python tools/verdict_tables.py --only mixes --workers 1
    python tools/verdict_tables.py --no-run  # rewrite the tables from the reports already in their --out folders
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from headline_tables import splice  # noqa: E402

PAGE = "docs/verdicts.md"


@dataclass
class VerdictSet:
    """One ``report --oracle`` run: its configs, policies and options, and its output folder."""

    name: str
    configs: list[str]
    policies: list[str]
    seeds: int
    steps: int
    out: str

    def args(self) -> list[str]:
        pol = [a for p in self.policies for a in ("--policy", p)]
        return ["report", *self.configs, *pol, "--seeds", str(self.seeds), "--control", "--oracle",
                "--oracle-steps", str(self.steps), "--out", self.out, "--no-plots"]

    #: Where the run keeps its points, profiles and ``results.csv``, under ``out``.
    points_dir = ""
    quiet_flag = "-q"


@dataclass
class SuiteSet(VerdictSet):
    """One ``evaluate --oracle`` run of the real-program suite's mixes: ``configs`` are its pairs,
    ``seeds`` its aged placements (beside the fresh one), on ``machines``, a window of
    ``records`` per program; the traces come from ``$CACHECOLOR_CACHE`` (``cachecolor workloads
    build`` makes them: docs/workloads.md)."""

    machines: str = "xeon-e5506"
    records: int = 2_000_000
    quads: tuple[str, ...] = ()
    points_dir = "sweep"
    quiet_flag = "--quiet"

    def args(self) -> list[str]:
        return ["evaluate", "--out", self.out, "--only", "mixes", "--pairs", *self.configs, "--quads", *self.quads, "--machines", self.machines,
                "--policies", *self.policies, "--seeds", str(self.seeds), "--records", str(self.records),
                "--oracle", "--oracle-steps", str(self.steps)]


SETS = [
    VerdictSet("mixes", ["examples/verdicts/both-fit-llc.toml", "examples/verdicts/sensitive-beside-stream.toml"],
               ["linux", "mrc-partition", "rocs", "coloris", "static"], 3, 4, "out/verdicts"),
    # A gain outside every oracle's search: thread placement (Azimi et al. case study 3), which
    # no static color or pollute oracle can reach: the row `above_oracle` exists for.
    VerdictSet("dynamic", ["examples/azimi/sharing.toml"], ["linux", "thread-cluster"], 3, 4, "out/verdicts-dynamic"),
    # Azimi et al.'s co-run pair (a cache-sensitive program beside a stream on a shared 1 MiB
    # cache, Table 1's twolf + equake shape): the partition its curves choose, against the oracles.
    VerdictSet("corun", ["examples/azimi/corun.toml"], ["linux", "mrc-partition"], 2, 4, "out/verdicts-corun"),
    # The matrix's kinds, one config each where the matrix has several of a kind (the programs
    # that fit, a stream beside a reused table, a phased program, a two-process shared cache, a
    # streamer beside a sensitive program, a sliced LLC, threads sharing across chips); the
    # 4-process POWER5 mixes (a partition climb of 12 allocations a round and 21 pollute
    # candidates per seed) and the rest of each kind are left out to fit an hour of CPU.
    VerdictSet("matrix", [f"examples/robustness/{c}.toml" for c in (
        "fits-half", "stream-beside-320k", "phased", "mix2-shared-stream-first", "streamer-beside-sensitive",
        "sliced-i3-two-fit", "mt-sharing-cross-chip")],
        ["linux", "rocs", "mrc-partition"], 3, 4, "out/robust"),
    # The rest of the matrix, in three sets that can be run apart: the other streams (one
    # process each: a pure stream, and a stream beside tables of 128, 400 and 480 KiB) ...
    VerdictSet("matrix-streams", [f"examples/robustness/{c}.toml" for c in (
        "pure-stream", "stream-beside-128k", "stream-beside-400k", "stream-beside-480k")],
        ["linux", "rocs", "mrc-partition"], 3, 4, "out/robust-streams"),
    # ... the other program that fits, the other two-process mixes, the sharing threads on one
    # chip ...
    VerdictSet("matrix-rest", [f"examples/robustness/{c}.toml" for c in (
        "just-fits", "mix2-both-fit", "mix2-shared-stream-second", "mt-sharing-one-chip")],
        ["linux", "rocs", "mrc-partition"], 3, 4, "out/robust-rest"),
    # ... and the four 4-process POWER5 mixes (Azimi et al.'s machine): each seed a partition
    # climb of 12 allocations a round and 21 pollute candidates.
    VerdictSet("matrix-power5", [f"examples/robustness/{c}.toml" for c in (
        "mix4-power5", "mix4-power5-rot1", "mix4-power5-rot2", "mix4-power5-rot3")],
        ["linux", "rocs", "mrc-partition"], 3, 4, "out/robust-power5"),
    # Sixteen configs written from the papers' workload classes and tuned to no policy
    # (docs/rocs.md, "Fresh configs"): every policy of a pollute buffer or a coloring on the same
    # runs, so the oracles are run once; 2 seeds (3 do not fit the hour on a shared 2-core machine).
    VerdictSet("fresh", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "fresh").glob("*.toml")),
               ["linux", "rocs", "global-pollute", "coloris", "mrc-partition"], 2, 4, "out/fresh-oracle"),
    # The real-program suite: the two pairs whose programs were captured here (bzip2 and xz:
    # 1 B-instruction regions chosen by phase; sqlite: a 20 M-record region), the first 2 M
    # records of each, on the Xeon, the fresh placement and three aged ones.
    SuiteSet("suite", ["bzip2+xz", "sqlite+xz"], ["rocs", "mrc-partition", "coloris"], 3, 4, "out/suite-oracle"),
    # evaluate's default mixes (its PAIRS and QUADS: every program the default evaluation runs),
    # the same window, machine, placements and policies.
    SuiteSet("suite-defaults", ["zstd+stream", "bzip2+spmv", "cc1+stencil", "sqlite+xz"], ["rocs", "mrc-partition", "coloris"], 3, 4,
             "out/suite-defaults-oracle", quads=("zstd+bzip2+stream+xz", "sqlite+cc1+spmv+stencil")),
]

#: A set's rows for some of its policies, spliced into a policy's own page as well (block
#: ``NAME`` there): the verdicts with each process's IPC against linux's on the same seed, which
#: the "no harm where there is nothing to gain" bar (every process >= 0.99x linux) reads.
VIEWS = [
    ("fresh", "docs/rocs.md", "rocs-fresh", ["rocs", "global-pollute"]),
    ("corun", "docs/azimi.md", "mrc-partition-corun", ["mrc-partition"]),
    ("fresh", "docs/azimi.md", "mrc-partition-fresh", ["mrc-partition"]),
    ("fresh", "docs/coloris.md", "coloris-fresh", ["coloris"]),
]

#: The bar a policy must meet for every process where the verdict is ``nothing to gain``.
NO_HARM = 0.99

#: Where each set's report records what it was measured on.
MEASURED_ON = "measured-on.json"

#: A row above its oracle (``above_oracle``) reads as this verdict in the claims: the policy
#: gained more than any static oracle, whatever the verdict against the headroom says.
ABOVE = "above its oracle"

#: Each paper claim the verdicts can speak to: the policies it is about, the oracles that bound
#: their mechanism (a claim that a policy takes a gain is tested only where its own mechanism's
#: oracles show headroom above the row's noise: `mrc-partition` cannot take a pollute buffer's
#: headroom; None: every row), the verdicts that support it and those that refute it (other
#: rows do not test it).
CLAIMS = [
    ("ROCS (MICRO 2008) 6, Figure 8: the online search comes close to the best offline pollute set, where a buffer pays",
     ["rocs"], ["oracle:pollute"], ["gain taken", ABOVE], ["gain missed", "side effect"]),
    ("ROCS 6: the pollute buffer does no harm where there is nothing to gain (at most 3.8% overhead)",
     ["rocs"], None, ["nothing to gain", ABOVE], ["harm"]),
    ("Azimi et al. case study 1: RapidMRC-guided partitioning gains on mixes where a partition pays",
     ["mrc-partition"], ["oracle:partition", "oracle:mrc"], ["gain taken", ABOVE], ["gain missed", "side effect"]),
    ("Azimi et al. 3.2: partitioning only when the curves predict fewer misses, so no harm where nothing is to gain",
     ["mrc-partition"], None, ["nothing to gain", ABOVE], ["harm"]),
    ("Azimi et al. case study 3: clustering the threads that share data onto one chip gains where they share across chips "
     "(no oracle places threads: only a gain above the oracles, or none, speaks to it)",
     ["thread-cluster"], None, ["gain taken", ABOVE], ["gain missed", "side effect", "harm"]),
    ("COLORIS 4.2: coloring (static sections, dynamic recoloring) isolates a cache-sensitive program from a stream",
     ["static", "coloris"], ["oracle:partition"], ["gain taken", ABOVE], ["gain missed", "side effect", "harm"]),
]


def _f(x: Any) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    return "" if math.isnan(x) else f"{x:+.3f}"


def _git(*args: str) -> str:
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def measured_on() -> dict[str, str]:
    """The checkout's commit (``-dirty`` with uncommitted changes to the code) and the simulator
    build (the hash the sweep keys its points by) the reports are made with now."""
    code = ["crates", "python", "tools", "examples", "Cargo.toml", "Cargo.lock"]
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no", "--", *code):
        commit += "-dirty"
    build = subprocess.run([sys.executable, "-c", "from cachecolor.sweep import simulator_build; print(simulator_build())"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return {"commit": commit, "build": build[:12]}


def run_set(s: VerdictSet, workers: int, quiet: bool) -> None:
    cmd = [sys.executable, "-m", "cachecolor", *s.args(), "--workers", str(workers)] + ([s.quiet_flag] if quiet else [])
    on = measured_on()  # before the run: the checkout may move while it runs
    r = subprocess.run(cmd, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(s.args())}: exit {r.returncode}")
    (ROOT / s.out / MEASURED_ON).write_text(json.dumps(on) + "\n")


def _measured_line(s: VerdictSet) -> str:
    try:
        m = json.loads((ROOT / s.out / MEASURED_ON).read_text())
    except (OSError, ValueError):
        return "Measured on: not recorded (run `make docs-verdicts`)."
    return f"Measured on commit `{m['commit']}` (simulator build `{m['build']}`)."


def _cost(out: Path, points_dir: str = "") -> dict[str, tuple[int, float]]:
    """Runs and simulated seconds of this report's points only (the folder may hold others):
    the policies' (``results.csv``'s keys), the oracles' candidates (``oracle-candidates.csv``'s)
    and the co-run page profiles (one per linux run); ``points_dir``: where under ``out`` the
    sweep keeps its table, points and profiles (evaluate's ``sweep``)."""
    import pandas as pd

    root = out / points_dir
    res = pd.read_csv(root / "results.csv", usecols=["key", "policy"]).drop_duplicates("key")
    cand = pd.read_csv(out / "oracle-candidates.csv", usecols=["key"]).drop_duplicates("key")

    def points(keys: Any) -> tuple[int, float]:
        sec = 0.0
        for k in keys:
            rec = json.loads((root / "points" / f"{k}.json").read_text())
            sec += float(rec.get("elapsed", 0.0))
        return len(keys), sec

    prof = [json.loads(f.read_text()) for k in res[res.policy == "linux"].key if (f := root / "oracle-profiles" / f"{k}.json").exists()]
    return {"policies": points(list(res.key)), "oracles": points(list(cand.key)),
            "profiles": (len(prof), sum(float(p.get("elapsed", 0.0)) for p in prof))}


def _short(note: str) -> str:
    """An oracle's note without the per-seed figures of a profile that did not reproduce its
    linux run (``oracles.csv`` keeps them)."""
    head, sep, _ = note.partition("; WARNING: the profile run did not reproduce the linux run")
    return head + ("; WARNING: the profile run did not reproduce the linux run exactly" if sep else "")


def _cell(x: Any) -> str:
    return "" if not isinstance(x, str) else x.replace("|", "\\|")


def render_set(s: VerdictSet) -> str:
    import pandas as pd

    out = ROOT / s.out
    v = pd.read_csv(out / "verdicts.csv")
    o = pd.read_csv(out / "oracles.csv")
    cost = _cost(out, s.points_dir)
    lines = ["```", "cachecolor " + " ".join(s.args()), "```", ""]
    (np_, sp), (no, so), (nf, sf) = cost["policies"], cost["oracles"], cost["profiles"]
    lines.append(
        f"Cost: {np_} policy and control runs ({sp:,.0f} s of simulation), {no} oracle candidates ({so:,.0f} s) and {nf} "
        f"co-run page profiles ({sf:,.0f} s): {sp + so + sf:,.0f} s of simulation, measured on a shared 2-core machine "
        "(`nice`) when they ran. " + _measured_line(s))
    lines += ["", "| config | policy | seeds | headroom | best_oracle | achieved | share | control | noise | verdict | above_oracle |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in v.itertuples():
        lines.append(f"| {r.config} | {r.policy} | {r.seeds} | {_f(r.headroom)} | {r.best_oracle} | {_f(r.achieved)} | {_f(r.share)} "
                     f"| {_f(r.control)} | {_f(r.noise)} | **{r.verdict}** | {'yes' if r.above_oracle else 'no'} |")
    reasons = [f"- {r.config}, {r.policy}: {r.reason}" for r in v.itertuples() if isinstance(r.reason, str) and r.reason]
    if reasons:
        lines += ["", "The reasons (`verdicts.csv`):", "", *reasons]
    lines += ["", "Each oracle's best per config (mean gain over seeds; seed by seed in `oracles.csv`):", "",
              "| config | oracle | gain (mean) | best (first seed) | runs | simulated s | note |", "|---|---|---|---|---|---|---|"]
    # a report's configs by file name; evaluate's groups as MACHINE--PROGRAMS
    order = {Path(c).stem: i for i, c in enumerate([*s.configs, *getattr(s, "quads", ())])}
    order.update({str(c).split("--")[-1]: i for c, i in list(order.items())})
    order.update({c: order.get(str(c).split("--")[-1], len(order)) for c in o["config"].unique()})
    groups = sorted(o.groupby(["config", "oracle"], sort=False), key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][1]))
    for (config, oracle), g in groups:
        note = "; ".join(dict.fromkeys(_short(str(x)) for x in g["note"] if isinstance(x, str) and x))
        differ = sum("WARNING" in str(x) for x in g["note"])
        if differ:
            note += f" ({differ} of {len(g)} seeds; what differed: `oracles.csv`)"
        if not g["runs"].sum():
            lines.append(f"| {config} | {oracle} | n/a | | 0 | 0 | {_cell(note)} |")
            continue
        best = next((str(b) for b in g["best"] if isinstance(b, str) and b), "")
        lines.append(f"| {config} | {oracle} | {_f(g['gain'].mean())} | {_cell(best)} | {int(g['runs'].sum())} "
                     f"| {g['cpu_seconds'].sum():,.0f} | {_cell(note)} |")
    return "\n".join(lines)


def process_ratios(out: Path, points_dir: str = "") -> Any:
    """Per config, policy and seed: the lowest process IPC against the same process's under
    linux on the same seed (``worst``), and the processes' summed IPC against linux's (``sum``)."""
    import pandas as pd

    r = pd.read_csv(out / points_dir / "results.csv", usecols=["config", "policy", "seed", "process", "ipc", "status"])
    r = r[r.status == "ok"]
    lin = r[r.policy == "linux"].set_index(["config", "seed", "process"])["ipc"]
    pol = r[r.policy != "linux"].copy()
    pol["linux"] = [lin.get((c, s, p), math.nan) for c, s, p in zip(pol.config, pol.seed, pol.process)]
    pol["ratio"] = pol.ipc / pol.linux
    g = pol.groupby(["config", "policy", "seed"])
    return pd.DataFrame({"worst": g["ratio"].min(), "sum": g["ipc"].sum() / g["linux"].sum()}).reset_index()


def render_view(s: VerdictSet, policies: list[str]) -> str:
    """``s``'s verdicts for ``policies`` beside each process's IPC against linux's, and the cells
    below the no-harm bar where there is nothing to gain (the headroom within the noise)."""
    import pandas as pd

    out = ROOT / s.out
    v = pd.read_csv(out / "verdicts.csv")
    v = v[v.policy.isin(policies)]
    pr = process_ratios(out, s.points_dir)
    lines = [f"From `make docs-verdicts`' `{s.name}` set (docs/verdicts.md has its command, cost and oracles). "
             "Worst process / linux: the lowest IPC of a process against the same process under linux on the same "
             "seed, over processes and seeds; sum / linux: the processes' summed IPC against linux's, the lowest seed. "
             + _measured_line(s), "",
             "| config | policy | verdict | headroom | best oracle | achieved | share | control | worst process / linux "
             f"| sum / linux (min) | >= {NO_HARM} |", "|---|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
    below, nothing = [], 0
    for r in v.itertuples():
        g = pr[(pr.config == r.config) & (pr.policy == r.policy)]
        worst, total = (float(g.worst.min()), float(g["sum"].min())) if len(g) else (math.nan, math.nan)
        ok = worst >= NO_HARM
        if not r.headroom > r.noise:  # nothing to gain: the verdicts `nothing to gain` and `harm`, or a side effect there
            nothing += 1
            if not ok:
                below.append(f"{r.policy} on `{r.config}` ({worst:.3f})")
        share = _f(r.share) if r.headroom > r.noise else "-"
        lines.append(f"| {r.config} | {r.policy} | {r.verdict} | {_f(r.headroom)} | {r.best_oracle} | {_f(r.achieved)} | {share} | {_f(r.control)} "
                     f"| {worst:.3f} | {total:.3f} | {'yes' if ok else 'no'} |")
    lines += ["", f"Where there is nothing to gain (the headroom within the noise), {len(below)} of {nothing} cells are below "
              f"{NO_HARM}x linux for some process" + (f": {', '.join(below)}." if below else ".")]
    return "\n".join(lines)


#: What a set's block says while its report has not been made.
NOT_RUN = "Not run for these tables"


def render_unrun(s: VerdictSet) -> str:
    """The block of a set whose report is not in its ``--out`` folder: its command, and how to run it."""
    return "\n".join(["```", "cachecolor " + " ".join(s.args()), "```", "",
                      f"{NOT_RUN} (no report in `{s.out}`): `python tools/verdict_tables.py --only {s.name}` runs it "
                      "and rewrites this block."])


def own_headroom(oracles: Any, config: str, own: list[str]) -> float:
    """Mean over seeds of the best of ``own`` oracles' gains on ``config`` (0 when none beats
    linux, as the headroom is; NaN when none of them applies)."""
    rows = oracles[(oracles.config == config) & oracles.oracle.isin(own) & oracles.gain.notna()]
    if not len(rows):
        return math.nan
    return float(rows.groupby("seed")["gain"].max().clip(lower=0.0).mean())


def render_claims(sets: list[VerdictSet]) -> str:
    import pandas as pd

    v = pd.concat([pd.read_csv(ROOT / s.out / "verdicts.csv") for s in sets], ignore_index=True)
    o = pd.concat([pd.read_csv(ROOT / s.out / "oracles.csv") for s in sets], ignore_index=True)
    lines = ["| claim | policy | supported by | refuted by | not tested by (other verdicts) |", "|---|---|---|---|---|"]
    for claim, policies, own, support, refute in CLAIMS:
        rows = v[v.policy.isin(policies)].copy()
        rows["verdict"] = [ABOVE if str(a) == "True" else x for a, x in zip(rows.above_oracle, rows.verdict)]
        label = {}
        keep = []
        for i, r in rows.iterrows():
            label[i] = f"{r.config} ({r.policy}: {r.verdict})"
            if own is None or r.verdict == ABOVE:
                keep.append(i)  # a gain above every oracle speaks to a gain claim whatever the headroom
                continue
            h = own_headroom(o, r.config, own)
            if h == h and h > r.noise:
                keep.append(i)
                label[i] = f"{r.config} ({r.policy}: {r.verdict}; {'/'.join(own)} {h:+.3f})"
        tested, elsewhere = rows.loc[keep], rows.drop(keep)

        def cell(frame: Any, verdicts: Any) -> str:
            return ", ".join(label[i] for i, r in frame.iterrows() if r.verdict in verdicts) or "none"

        others = sorted(set(tested.verdict) - set(support) - set(refute))
        untested = cell(tested, others)
        if len(elsewhere):
            away = f"no {'/'.join(own or [])} headroom above the noise: " + ", ".join(
                r.config + (f" ({r.policy})" if len(policies) > 1 else "") for r in elsewhere.itertuples())
            untested = away if untested == "none" else f"{untested}; {away}"
        lines.append(f"| {claim} | {', '.join(policies)} | {cell(tested, support)} | {cell(tested, refute)} | {untested} |")
    return "\n".join(lines)


def _without_costs(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("Cost: "))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python tools/verdict_tables.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 naming each block that differs; write nothing")
    ap.add_argument("--only", choices=[s.name for s in SETS], help="run and rewrite one set (the claims table is rewritten from every set's verdicts.csv)")
    ap.add_argument("--workers", type=int, default=2, help="processes for the runs (default 2)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--no-run", action="store_true",
                    help="run nothing: rewrite the tables from the reports already in their --out folders (a set without one says so)")
    args = ap.parse_args(argv)
    if args.workers < 1:
        ap.error(f"--workers {args.workers}: expected 1 or more")
    chosen = [s for s in SETS if args.only in (None, s.name)]
    for s in chosen:
        if not args.no_run:
            run_set(s, args.workers, args.quiet)
    path = ROOT / PAGE
    text = path.read_text()
    new = text
    for s in chosen:
        made = (ROOT / s.out / "verdicts.csv").exists()
        new = splice(new, f"verdicts-{s.name}", PAGE, render_set(s) if made else render_unrun(s))
    pages = {PAGE: new}
    for set_name, page, block, policies in VIEWS:
        s = next(x for x in chosen + SETS if x.name == set_name)
        if s not in chosen:
            continue
        body = render_view(s, policies) if (ROOT / s.out / "verdicts.csv").exists() else render_unrun(s)
        pages[page] = splice(pages.get(page) or (ROOT / page).read_text(), block, page, body)
    new = pages.pop(PAGE)
    have = [s for s in SETS if (ROOT / s.out / "verdicts.csv").exists()]
    if have:
        made_of = f"From the sets {', '.join(s.name for s in have)}" + ("" if len(have) == len(SETS) else
                  f" (without {', '.join(s.name for s in SETS if s not in have)}: no report in its --out folder here; "
                  "its block says what it was measured on)") + "."
        new = splice(new, "verdicts-claims", PAGE, made_of + "\n\n" + render_claims(have))
    if args.check:
        # The cost lines are measurements of the machine the runs were made on, not results.
        differ = [PAGE] if _without_costs(new) != _without_costs(text) else []
        differ += [page for page, body in pages.items() if body != (ROOT / page).read_text()]
        for page in differ:
            print(f"{page}: the verdict tables differ from the reports (run make docs-verdicts)", file=sys.stderr)
        return 1 if differ else 0
    if new != text:
        path.write_text(new)
        print(f"updated the verdict tables in {PAGE}")
    for page, body in pages.items():
        if body != (ROOT / page).read_text():
            (ROOT / page).write_text(body)
            print(f"updated the verdict tables in {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
