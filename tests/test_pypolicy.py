"""Policies written in Python (python/cachecolor/policy.py, crates/py/src/policy.rs; issue 26
item 5).

The independent reference is the Rust policy: the Python port of ``static``
(examples/python/static_sections.py) must give a report identical to the Rust ``static``'s, field
for field, on every example config that names ``static``; a policy that defines no hook must give
the ``linux`` report. A spy policy checks when each hook fires against the run's own report
(faults, intervals, samples, exits). The rest pins the adapter's contract: a hook's exception
ends the run with that exception, a kernel kept past its hook is refused, hooks a class does not
define are never called, and a bad ``--policy module:Class`` is one line and exit 2.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import cachecolor
from cachecolor.system import load_system_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PORT = EXAMPLES / "python" / "static_sections.py"


def _port():
    from cachecolor.policy import _load_class

    return _load_class(f"{PORT}:StaticSections")


def _static_examples() -> list[Path]:
    out = []
    for path in sorted(EXAMPLES.rglob("*.toml")):
        cfg = load_system_config(path)
        if cfg.get("policy", {}).get("name") == "static" and "processes" in cfg:
            out.append(path)
    return out


def _comparable(doc: dict) -> dict:
    """The report without the two places the policy's name appears."""
    doc = copy.deepcopy(doc)
    doc.pop("policy")
    doc["config"]["policy"].pop("name")
    return doc


def _small(path: Path, references: int = 60_000) -> dict:
    """The example with every generated thread cut to `references` (the run's shape kept)."""
    cfg = load_system_config(path)
    for p in cfg["processes"]:
        for t in p["threads"]:
            for phase in t.get("workload", {}).get("phases", []):
                phase["references"] = min(phase.get("references", references), references)
    cfg.setdefault("policy", {})
    return cfg


STATIC_EXAMPLES = _static_examples()


def test_the_static_examples_are_found():
    # The comparison below must not pass by having nothing to compare.
    names = {p.name for p in STATIC_EXAMPLES}
    assert {"colors-disjoint.toml", "colors-overlap.toml", "isolation-light.toml", "sliced-heavy.toml"} <= names


@pytest.mark.parametrize("path", STATIC_EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_python_static_matches_rust_static(path: Path):
    cfg = _small(path)
    rust = cachecolor.simulate_system(cfg, policy="static").to_dict()
    port = cachecolor.simulate_system(cfg, policy=_port()).to_dict()
    assert rust["policy"] == "static" and port["policy"] == "py-static"
    assert port["config"]["policy"]["name"] == "py-static"
    assert _comparable(port) == _comparable(rust)


def test_python_static_matches_rust_static_in_full_on_one_example():
    # One example at its full length, sections assigned by load (no colors of its own).
    path = EXAMPLES / "coloris" / "isolation-light.toml"
    cfg = load_system_config(path)
    assert all("colors" not in p for p in cfg["processes"])
    rust = cachecolor.simulate_system(cfg, policy="static").to_dict()
    port = cachecolor.simulate_system(cfg, policy=_port()).to_dict()
    assert _comparable(port) == _comparable(rust)
    # Sections were really given: each process's pages lie in one core's section.
    used = [{c for c, n in enumerate(p["pages_per_color"]) if n} for p in port["processes"]]
    assert all(used) and len({frozenset(u) for u in used}) > 1


def test_a_policy_with_no_hooks_is_linux():
    class Nothing(cachecolor.Policy):
        pass

    cfg = _small(EXAMPLES / "os" / "colors-overlap.toml")
    rust = cachecolor.simulate_system(cfg, policy="linux").to_dict()
    port = cachecolor.simulate_system(cfg, policy=Nothing).to_dict()
    assert port["policy"] == "Nothing"
    assert _comparable(port) == _comparable(rust)


def _sampled(period: int = 97) -> dict:
    cfg = _small(EXAMPLES / "os" / "colors-overlap.toml", 40_000)
    cfg["policy"] = {"name": "linux"}
    cfg["scheduler"] = {"tick": 100_000, "time_slice": 50_000}
    cfg["pmu"] = {"sampling": {"event": "l1d-misses", "period": period}}
    for p in cfg["processes"]:
        p.pop("colors", None)
    # The stream walks 1 MiB again and again: a single pass over fresh pages is served by the
    # lines the kernel's clears of them left in the caches (clear_page), and misses nothing.
    cfg["processes"][1]["threads"][0]["workload"]["phases"][0]["footprint"] = "1MiB"
    return cfg


class Spy(cachecolor.Policy):
    """Records every hook call (ChampSim's interface-test idea: the log is checked against the
    run's own report)."""

    name = "spy"

    def setup(self, machine):
        super().setup(machine)
        self.log: list[tuple] = []

    def check_processes(self, names):
        self.log.append(("check", tuple(names)))

    def process_created(self, process):
        self.log.append(("created", process.pid, process.name))
        return None

    def process_exited(self, pid):
        self.log.append(("exited", pid))

    def allowed_colors(self, pid, vpn):
        self.log.append(("allowed", pid, vpn))
        return range(self.machine.colors)

    def tick(self, kernel, tick):
        assert kernel.valid
        self.log.append(("tick", tick.now, tick.interval, tuple(p.pid for p in tick.processes)))

    def sample(self, kernel, sample):
        self.log.append(("sample", sample.core, sample.pid, sample.vaddr))

    def scheduled(self, kernel, event):
        self.log.append(("sched", event.kind, event.tid, event.core))

    def report(self):
        return {"hooks": len(self.log)}


def test_the_spy_sees_every_hook_when_the_report_says_it_fired():
    cfg = _sampled()
    spy = Spy()
    doc = cachecolor.simulate_system(cfg, policy=spy).to_dict()
    log = spy.log
    names = [p["name"] for p in cfg["processes"]]
    # check_processes first, with the names in pid order.
    assert log[0] == ("check", tuple(names))
    created = [e for e in log if e[0] == "created"]
    assert [(e[1], e[2]) for e in created] == list(enumerate(names))
    for pid in range(len(names)):
        first_alloc = next(i for i, e in enumerate(log) if e[0] == "allowed" and e[1] == pid)
        assert log.index(created[pid]) < first_alloc
        # One allowed_colors per fault (no lazy recolors, no widening here).
        allocs = sum(1 for e in log if e[0] == "allowed" and e[1] == pid)
        assert allocs == doc["processes"][pid]["faults"] > 0
    # Ticks every `tick` cycles; the report's last interval is cut at the end without a hook.
    ticks = [e for e in log if e[0] == "tick"]
    assert [t[1] for t in ticks] == [100_000 * (k + 1) for k in range(len(ticks))]
    assert all(t[2] == 100_000 for t in ticks)
    assert len(ticks) in (len(doc["intervals"]), len(doc["intervals"]) - 1) and ticks
    # Every sample the cores took reached the hook, from the core that took it.
    samples = [e for e in log if e[0] == "sample"]
    per_core = [sum(1 for s in samples if s[1] == c) for c in range(len(doc["cores"]))]
    assert per_core == [c["samples"] for c in doc["cores"]]
    assert all(s > 0 for s in per_core)
    # Each thread exits once; its process exits after it, once.
    exits = [e for e in log if e[0] == "sched" and e[1] == "exited"]
    assert sorted(e[2] for e in exits) == [0, 1]
    for pid in range(len(names)):
        gone = log.index(("exited", pid))
        assert sum(1 for e in log if e == ("exited", pid)) == 1
        assert not any(e[0] == "allowed" and e[1] == pid for e in log[gone:])
    switches = [e for e in log if e[0] == "sched" and e[1] == "switch"]
    assert {e[2] for e in switches} == {0, 1}
    assert doc["policy_report"] == {"hooks": len(log)}


def test_undefined_hooks_are_never_called(monkeypatch):
    class OnlySample(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.samples = 0

        def sample(self, kernel, sample):
            self.samples += 1

    assert OnlySample._defined_hooks() == ["sample"]

    def boom(*args):
        raise AssertionError("an undefined hook was called")

    # Inherited hooks now raise if called; the adapter must not call them.
    for hook in ("process_created", "allowed_colors", "tick", "scheduled", "process_exited", "report"):
        monkeypatch.setattr(cachecolor.Policy, hook, boom)
    p = OnlySample()
    doc = cachecolor.simulate_system(_sampled(), policy=p).to_dict()
    assert p.samples == sum(c["samples"] for c in doc["cores"]) > 0
    assert doc["policy_report"] is None


class Fails(cachecolor.Policy):
    def setup(self, machine):
        super().setup(machine)
        self.ticks = 0

    def tick(self, kernel, tick):
        self.ticks += 1
        if self.ticks == 2:
            raise ZeroDivisionError("policy bug on the second tick")


def test_an_exception_in_a_hook_ends_the_run_with_it():
    p = Fails()
    with pytest.raises(ZeroDivisionError, match="second tick") as info:
        cachecolor.simulate_system(_sampled(), policy=p)
    assert p.ticks == 2  # the run stopped there: no third tick
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "tick" in frames


def test_a_bad_return_value_ends_the_run_with_a_clear_error():
    class BadColor(cachecolor.Policy):
        def allowed_colors(self, pid, vpn):
            return [self.machine.colors]

    with pytest.raises(TypeError, match="does not exist"):
        cachecolor.simulate_system(_sampled(), policy=BadColor)

    class BadPin(cachecolor.Policy):
        def process_created(self, process):
            return [99]

    with pytest.raises(ValueError, match="core 99"):
        cachecolor.simulate_system(_sampled(), policy=BadPin)


def test_a_kernel_kept_past_its_hook_is_refused():
    class Keeps(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.kept = None

        def tick(self, kernel, tick):
            if self.kept is None:
                self.kept = kernel
                # The hook runs on a core whose clock has passed the tick.
                assert kernel.now() >= tick.now and kernel.cores() == 2
            else:
                self.kept.threads()  # the first tick's kernel, in the second tick

    p = Keeps()
    with pytest.raises(RuntimeError, match="valid only during the hook"):
        cachecolor.simulate_system(_sampled(), policy=p)
    assert not p.kept.valid
    with pytest.raises(RuntimeError, match="valid only during the hook"):
        p.kept.now()
    with pytest.raises(RuntimeError, match="valid only during the hook"):
        p.kept.recolor(0, 0, [0])


def test_kernel_actions_are_carried_out_and_counted():
    """A small ROCS-like policy: sampled pages of the stream (pid 1) are moved eagerly into the
    last color, and pages of the victim (pid 0, which reuses them) are marked for a lazy move
    there; the report's recolor counts must be what the kernel said it did."""

    class Squeeze(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.last = frozenset([machine.colors - 1])
            self.moved = 0
            self.marked = 0
            self.squeezed: set[tuple[int, int]] = set()

        def allowed_colors(self, pid, vpn):
            return self.last if (pid, vpn) in self.squeezed else range(self.machine.colors)

        def sample(self, kernel, sample):
            if sample.pid != 1:
                return
            vpn = sample.vaddr // self.machine.page_size
            self.squeezed.add((1, vpn))
            if kernel.recolor(1, vpn, self.last) is not None:
                self.moved += 1

        def tick(self, kernel, tick):
            for page in kernel.pages(0)[:8]:
                if (0, page.vpn) not in self.squeezed and page.color not in self.last:
                    kernel.mark_for_recolor(0, page.vpn)
                    self.squeezed.add((0, page.vpn))
                    self.marked += 1
            assert kernel.scan_accessed(0)  # the victim touches its pages every interval

    p = Squeeze()
    doc = cachecolor.simulate_system(_sampled(period=31), policy=p).to_dict()
    victim, stream = doc["processes"]
    assert p.moved > 0 and p.marked > 0
    assert stream["recolors"] == p.moved and stream["lazy_recolors"] == 0
    assert victim["recolors"] == 0 and 0 < victim["lazy_recolors"] <= p.marked
    with pytest.raises(cachecolor.KernelError):
        # A refused action is a KernelError the hook may catch.
        class Refused(cachecolor.Policy):
            def tick(self, kernel, tick):
                kernel.migrate(0, 99)

        cachecolor.simulate_system(_sampled(), policy=Refused)


def test_policy_cycles_is_the_kernels_accounting_of_policy_work():
    """``Kernel.policy_cycles(pid)`` (the Rust ``Kernel::policy_cycles`` rocs budgets its moves
    with) in a Python policy: what each tick's scan of pid 0 added to it sums to what the report's
    kernel table (its own path, ``KernelReport``) charges pid 0 for scans and the shootdowns they
    set off; a process the policy never acts on, and a pid that does not exist, read 0."""

    class Scans(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.added: list[int] = []
            self.untouched: set[int] = set()
            self.after_exit = None

        def tick(self, kernel, tick):
            if self.after_exit is not None:
                return
            self.untouched |= {kernel.policy_cycles(1), kernel.policy_cycles(10**6)}
            before = kernel.policy_cycles(0)
            try:
                kernel.scan_accessed(0)
            except cachecolor.KernelError:  # process 0 has exited: its accounting stays
                self.after_exit = kernel.policy_cycles(0)
                return
            self.added.append(kernel.policy_cycles(0) - before)

    cfg = _sampled()
    cfg.pop("pmu")  # no sample interrupts: the scans are the only policy work
    # Costs of the two paths a scan takes (0 in this example), odd so no two sum alike.
    cfg["machine"]["timing"].update(scan_cycles_per_entry=7, shootdown_cycles=301)
    p = Scans()
    doc = cachecolor.simulate_system(cfg, policy=p).to_dict()
    k = doc["processes"][0]["kernel"]
    assert len(p.added) > 1 and all(a > 0 for a in p.added)
    assert all(k[path]["cycles"] == 0 for path in ("recolor", "interrupt", "migration"))
    # Whole cycles (the kernel keeps milli-cycles): each reading is floored, so the sum of the
    # differences is within one cycle per tick of the report's.
    charged = k["scan"]["cycles"] + k["shootdown"]["cycles"]
    assert charged > 0 and abs(sum(p.added) - charged) < len(p.added)
    assert p.after_exit == sum(p.added)  # nothing else was charged to it, before or after
    assert p.untouched == {0}


def test_policies_are_found_by_registered_name_and_config(tmp_path):
    port = _port()
    cachecolor.register_policy("py-static-test", port)
    cfg = _small(EXAMPLES / "os" / "colors-disjoint.toml")
    by_name = cachecolor.simulate_system(cfg, policy="py-static-test").to_dict()
    cfg2 = copy.deepcopy(cfg)
    cfg2["policy"]["name"] = f"{PORT}:StaticSections"
    by_config = cachecolor.simulate_system(cfg2).to_dict()
    assert by_name == by_config
    with pytest.raises(ValueError, match="built-in"):
        cachecolor.register_policy("static", port)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cachecolor", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_cli_runs_a_python_policy_by_module_and_by_file(tmp_path):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps(_small(EXAMPLES / "os" / "colors-disjoint.toml")))
    (tmp_path / "mypolicies.py").write_text(PORT.read_text())
    by_module = _cli("simulate", str(cfg), "--policy", "mypolicies:StaticSections", "--json", str(tmp_path / "a.json"), cwd=tmp_path)
    assert by_module.returncode == 0, by_module.stderr
    assert "policy py-static" in by_module.stdout
    by_file = _cli("simulate", str(cfg), "--policy", f"{PORT}:StaticSections", "--json", str(tmp_path / "b.json"))
    assert by_file.returncode == 0, by_file.stderr
    rust = _cli("simulate", str(cfg), "--policy", "static", "--json", str(tmp_path / "c.json"))
    a, b, c = (json.loads((tmp_path / f"{x}.json").read_text()) for x in "abc")
    assert a == b
    assert _comparable(a) == _comparable(c)


@pytest.mark.parametrize(
    "spec, why",
    [
        ("nosuchmodule:Thing", "no module named 'nosuchmodule'"),
        ("mypolicies:Missing", "has no attribute 'Missing'"),
        ("mypolicies:NOT_A_POLICY", "is not a subclass of cachecolor.Policy"),
        ("broken:Thing", "importing broken failed: SyntaxError"),
        ("nofile.py:Thing", "no file nofile.py"),
        (":Thing", "expected module:Class"),
    ],
)
def test_cli_bad_policy_is_one_line_and_exit_2(tmp_path, spec, why):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps(_small(EXAMPLES / "os" / "colors-disjoint.toml", 1000)))
    (tmp_path / "mypolicies.py").write_text(PORT.read_text() + "\nNOT_A_POLICY = 3\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    r = _cli("simulate", str(cfg), "--policy", spec, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cachecolor: error: "), r.stderr
    assert why in lines[0]
    assert r.stdout == ""


def test_cli_hook_exception_is_one_line_and_exit_1(tmp_path):
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps(_sampled()))
    (tmp_path / "failing.py").write_text(
        "import cachecolor\n"
        "class Fails(cachecolor.Policy):\n"
        "    def tick(self, kernel, tick):\n"
        "        raise KeyError('oops')\n"
    )
    r = _cli("simulate", str(cfg), "--policy", "failing:Fails", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "KeyError" in lines[0] and "oops" in lines[0], r.stderr


def test_the_python_pollute_buffer_protects_art_as_rocs_does():
    """examples/python/pollute_buffer.py (a ROCS-like buffer without the search) on the art
    scenario: streaming pages moved into the buffer lower art's LLC miss rate below linux's, as
    the Rust `rocs` does (docs/rocs.md); every page it moved is a recolor in the report."""
    from cachecolor.policy import _load_class

    cls = _load_class(f"{EXAMPLES / 'python' / 'pollute_buffer.py'}:PolluteBuffer")
    cfg = load_system_config(EXAMPLES / "rocs" / "art.toml")
    linux = cachecolor.simulate_system(cfg, policy="linux").to_dict()["processes"][0]
    rocs = cachecolor.simulate_system(cfg, policy="rocs").to_dict()["processes"][0]
    doc = cachecolor.simulate_system(cfg, policy=cls).to_dict()
    art, report = doc["processes"][0], doc["policy_report"]
    assert report["moved"] > 0 and art["recolors"] == report["moved"]
    assert report["samples"] == sum(c["samples"] for c in doc["cores"]) > 0
    assert art["llc_miss_rate"] < linux["llc_miss_rate"] - 0.03
    assert rocs["llc_miss_rate"] < linux["llc_miss_rate"] - 0.03
    assert doc["invariants"] == []


def test_a_python_policy_run_releases_the_gil_between_hooks():
    # As test_api.test_simulation_releases_the_gil: a hook that fires a few times in the run
    # (ticks every 100 M cycles); had the run kept the GIL, this thread could step only while a
    # hook runs.
    import threading
    import time

    class FewTicks(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.ticks = 0

        def tick(self, kernel, tick):
            self.ticks += 1

    cfg = load_system_config(EXAMPLES / "rocs" / "art.toml")
    cfg["scheduler"]["tick"] = 100_000_000
    policy = FewTicks()
    done = threading.Event()
    steps = 0

    def run():
        try:
            cachecolor.simulate_system(cfg, policy=policy)
        finally:
            done.set()

    t = threading.Thread(target=run)
    start = time.monotonic()
    t.start()
    while not done.is_set():
        steps += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.monotonic() - start
    assert 0 < policy.ticks < 20
    assert elapsed < 0.05 or steps > 20, (steps, elapsed)


def test_out_of_colors_widens_and_the_fault_retries():
    # 8 MiB of RAM over 16 colors: 128 frames of color 0, fewer than either process touches
    # (224 and 256 pages), so each runs out once and is widened to every color (COLORIS 3.2).
    class Widen(cachecolor.Policy):
        def setup(self, machine):
            super().setup(machine)
            self.widened: list[int] = []

        def allowed_colors(self, pid, vpn):
            return range(self.machine.colors) if pid in self.widened else (0,)

        def out_of_colors(self, pid):
            self.widened.append(pid)
            return True

    cfg = _sampled()
    cfg["memory"]["ram"] = "8MiB"
    p = Widen()
    doc = cachecolor.simulate_system(cfg, policy=p).to_dict()
    assert sorted(p.widened) == [0, 1]
    assert [q["faults"] for q in doc["processes"]] == [224, 256]
    # Widened for real: each process has pages beyond color 0.
    assert all(sum(1 for n in q["pages_per_color"] if n) > 1 for q in doc["processes"])

    class Empty(cachecolor.Policy):
        def allowed_colors(self, pid, vpn):
            return ()

    with pytest.raises(cachecolor.ConfigError, match="allowed color set is empty"):
        cachecolor.simulate_system(_sampled(), policy=Empty)


class _Counting(cachecolor.Policy):
    """Asks for the LLC's accesses and misses and keeps what every tick gave."""

    name = "counting"
    counter_events = ("llc-accesses", "llc-misses")

    def setup(self, machine):
        super().setup(machine)
        self.seen = []

    def tick(self, kernel, tick):
        for p in tick.processes:
            self.seen.append((p.pid, dict(p.interval),
                              {r.event: (r.raw, r.time_enabled, r.time_running) for r in p.readings}))


def _realistic(references: int = 200_000) -> dict:
    cfg = _small(EXAMPLES / "os" / "colors-overlap.toml", references)
    cfg.setdefault("pmu", {})["ideal"] = False
    cfg["pmu"]["events"] = ["l1d-misses", "l2-misses", "tlb-misses", "stall-dram", "page-faults", "memory-reads"]
    return cfg


def test_python_policy_counter_events_are_programmed_and_readings_exposed():
    """A Python policy's ``counter_events`` are programmed as a Rust policy's are: with six
    other events on four counters, the LLC's two are multiplexed with them, each process's
    ``readings`` carry raw, time enabled and time running, and every interval estimate equals
    the interval's raw count scaled by its enabled over running time (perf stat -I)."""
    policy = _Counting()
    cachecolor.simulate_system(_realistic(), policy=policy)
    assert policy.seen, "ticks happened"
    got_misses = 0
    prev: dict = {}
    for pid, interval, readings in policy.seen:
        assert {"llc-accesses", "llc-misses"} <= set(readings)
        for ev in ("llc-accesses", "llc-misses"):
            raw, en, run = readings[ev]
            assert run <= en
            r0, e0, u0 = prev.get((pid, ev), (0, 0, 0))
            want = int((raw - r0) * (en - e0) / (run - u0) + 0.5) if run > u0 else 0
            assert interval[ev] == want, (pid, ev, interval[ev], want)
            prev[(pid, ev)] = (raw, en, run)
        got_misses += interval["llc-misses"]
    assert got_misses > 0
    # Without counter_events the same config reads 0 for the LLC's events: nobody asked for them.
    class Silent(_Counting):
        counter_events = ()

    silent = Silent()
    cachecolor.simulate_system(_realistic(), policy=silent)
    assert silent.seen and all(i["llc-misses"] == 0 and "llc-misses" not in r for _p, i, r in silent.seen)


def test_a_bad_counter_event_is_one_clear_error():
    class Bad(_Counting):
        counter_events = ("llc-miss",)

    with pytest.raises(ValueError, match=r"counter_events: \"llc-miss\" is not an event; the events are: cycles"):
        cachecolor.simulate_system(_realistic(20_000), policy=Bad)
