//! A unit's counts over a window, read from its processes' counters as a perf user reads a
//! task's: each event's raw count, time enabled and time running summed over the window and
//! scaled once (ROCS 5.1's IPC and MPKI, the phase signature of a search's steps).

use super::{ratio, PhaseMetric};
use crate::pmu::Event;

/// One event's count over a window as the counters read it (perf's reading): the raw count and
/// the cycles the event was requested (enabled) and actually on a counter (running).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Counted {
    pub(super) raw: u64,
    pub(super) enabled: u64,
    pub(super) running: u64,
}

impl Counted {
    pub(super) fn add(&mut self, o: &Counted) {
        self.raw += o.raw;
        self.enabled += o.enabled;
        self.running += o.running;
    }
    /// The window's estimate, `raw x enabled / running` scaled once over the whole window (0
    /// if the event was never on a counter). A sum of per-tick estimates is not one: with the
    /// groups rotating every 4 M cycles, a tick that left the event off reads 0, so a window
    /// read a third or half of a count, and LLC misses above LLC accesses.
    pub(super) fn value(&self) -> u64 {
        if self.running == 0 || self.running >= self.enabled {
            self.raw
        } else {
            (self.raw as f64 * self.enabled as f64 / self.running as f64).round() as u64
        }
    }
}

/// The events a unit reads at every tick, in `Acc::counts`' order.
pub(super) const READ: [Event; 5] = [
    Event::Instructions,
    Event::Cycles,
    Event::LlcAccesses,
    Event::LlcMisses,
    // Data references: their density per instruction is the program's own, which no page
    // placement moves (a step's phase signature).
    Event::L1dAccesses,
];

/// Counts of a unit over a window, summed over its processes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Acc {
    pub(super) counts: [Counted; READ.len()],
    /// Simulated cycles the window spans (what its stage is counted in, ROCS 5.1, 6.2).
    pub(super) elapsed: u64,
    pub(super) ticks: u32,
}

impl Acc {
    pub(super) fn count(&self, e: Event) -> &Counted {
        &self.counts[READ.iter().position(|&r| r == e).expect("a read event")]
    }
    pub(super) fn instructions(&self) -> u64 {
        self.count(Event::Instructions).value()
    }
    pub(super) fn cycles(&self) -> u64 {
        self.count(Event::Cycles).value()
    }
    pub(super) fn llc_accesses(&self) -> u64 {
        self.count(Event::LlcAccesses).value()
    }
    pub(super) fn llc_misses(&self) -> u64 {
        self.count(Event::LlcMisses).value()
    }
    pub(super) fn ipc(&self) -> f64 {
        ratio(self.instructions(), self.cycles())
    }
    pub(super) fn metric(&self, m: PhaseMetric) -> f64 {
        match m {
            PhaseMetric::Ipc => self.ipc(),
            PhaseMetric::LlcMpki => 1000.0 * ratio(self.llc_misses(), self.instructions()),
        }
    }
    /// Data references per kilo-instruction: what the program does, not where its pages sit
    /// (a step's colors move its miss rates and IPC, never this). `None` when the multiplexed
    /// event was never on a counter during the window.
    pub(super) fn data_apki(&self) -> Option<f64> {
        let refs = self.count(Event::L1dAccesses);
        (refs.running > 0 && self.instructions() > 0)
            .then(|| 1000.0 * ratio(refs.value(), self.instructions()))
    }
}
