//! A unit's counts over a window, read from its processes' counters as a perf user reads a
//! task's: each event's raw count, time enabled and time running summed over the window and
//! scaled once (ROCS 5.1's IPC and MPKI, the phase signature of a search's steps).

use super::{ratio, PhaseMetric};
use crate::pmu::{Event, Reading};

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

/// Counts of a unit over a window, summed over its processes: each event's readings added
/// (`Reading::add`) and scaled once over the window (`Reading::estimate`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Acc {
    pub(super) counts: [Reading; READ.len()],
    /// Simulated cycles the window spans (what its stage is counted in, ROCS 5.1, 6.2).
    pub(super) elapsed: u64,
    pub(super) ticks: u32,
}

impl Default for Acc {
    fn default() -> Acc {
        Acc {
            counts: READ.map(Reading::zero),
            elapsed: 0,
            ticks: 0,
        }
    }
}

impl Acc {
    pub(super) fn count(&self, e: Event) -> &Reading {
        &self.counts[READ.iter().position(|&r| r == e).expect("a read event")]
    }
    pub(super) fn instructions(&self) -> u64 {
        self.count(Event::Instructions).estimate()
    }
    pub(super) fn cycles(&self) -> u64 {
        self.count(Event::Cycles).estimate()
    }
    pub(super) fn llc_accesses(&self) -> u64 {
        self.count(Event::LlcAccesses).estimate()
    }
    pub(super) fn llc_misses(&self) -> u64 {
        self.count(Event::LlcMisses).estimate()
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
        (refs.time_running > 0 && self.instructions() > 0)
            .then(|| 1000.0 * ratio(refs.estimate(), self.instructions()))
    }
}
