"""A simple ROCS-like pollute buffer written in Python (ROCS, papers/000 sections 3-5, without the
Algorithm 1 search): the last sixteenth of the LLC's colors is the pollute buffer and no other
page is placed there; after `WARMUP` ticks every process is profiled for `PROFILE` ticks by
sampling L1D misses (at most one interrupt per 5 K cycles, ROCS 5.1; the prefetcher off, ROCS
3.2.3), and each sampled page whose samples were served by memory at least `THRESHOLD` of the
time (a streaming page: its lines are not reused within the LLC) is moved into the buffer
eagerly. The Rust `rocs` (crates/sim/src/policy/pollute.rs) adds the empirical search for how many
pages to map, phase detection and the per-process targeting this leaves out.

Run it:  cachecolor simulate examples/rocs/art.toml --policy examples/python/pollute_buffer.py:PolluteBuffer
"""

from __future__ import annotations

import math
from collections import defaultdict

import cachecolor

WARMUP = 2
PROFILE = 6
THROTTLE_CYCLES = 5000
THRESHOLD = 0.9
MIN_SAMPLES = 2


class PolluteBuffer(cachecolor.Policy):
    name = "py-pollute"

    def setup(self, machine: cachecolor.Machine) -> None:
        super().setup(machine)
        size = max(1, machine.colors // 16)
        self.buffer = frozenset(range(machine.colors - size, machine.colors))
        self.normal = frozenset(range(machine.colors - size))
        self.polluting: set[tuple[int, int]] = set()
        # (pid, vpn) -> [samples, samples served by memory or another chip]
        self.profile: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        self.ticks = 0
        self.moved = 0
        self.samples = 0

    def allowed_colors(self, pid: int, vpn: int) -> frozenset[int]:
        return self.buffer if (pid, vpn) in self.polluting else self.normal

    def sample(self, kernel: cachecolor.Kernel, sample: cachecolor.Sample) -> None:
        counts = self.profile[(sample.pid, sample.vaddr // self.machine.page_size)]
        counts[0] += 1
        counts[1] += sample.source != "cache"
        self.samples += 1

    def tick(self, kernel: cachecolor.Kernel, tick: cachecolor.Tick) -> None:
        self.ticks += 1
        if WARMUP <= self.ticks < WARMUP + PROFILE:
            # ROCS 5.1: one interrupt per THROTTLE_CYCLES at the last interval's miss rate.
            misses = sum(p.interval["l1d-misses"] for p in tick.processes)
            cycles = max(sum(p.interval["cycles"] for p in tick.processes), 1)
            period = max(1, math.ceil(THROTTLE_CYCLES * misses / cycles))
            kernel.set_sampling(None, {"event": "l1d-misses", "period": period})
            kernel.set_prefetch(False)
        elif self.ticks == WARMUP + PROFILE:
            kernel.set_sampling(None, None)
            kernel.set_prefetch(True)
            for (pid, vpn), (n, missed) in sorted(self.profile.items()):
                if n >= MIN_SAMPLES and missed >= THRESHOLD * n:
                    self.polluting.add((pid, vpn))
                    try:
                        if kernel.recolor(pid, vpn, self.buffer) is not None:
                            self.moved += 1
                    except cachecolor.KernelError:
                        pass  # the page is gone (its process exited) or is a huge page

    def report(self) -> dict:
        return {"samples": self.samples, "pages_profiled": len(self.profile),
                "polluting_pages": len(self.polluting), "moved": self.moved}
