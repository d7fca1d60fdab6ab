/*!
The performance monitoring unit: what the papers' OS policies read (Azimi et al. section 2).

- `Event`: the per-core events the papers use (cycles, instructions, per-level accesses and
  misses, TLB misses and page-walk cycles, stall cycles by cause, prefetches, remote-cache
  accesses).
- `EventCounts`: exact counts, kept by the system per core and per thread (the per-thread
  copy is the OS's virtualised counter, saved and restored on context switches).
- `CounterSet`: what software can actually read: a few physical counters per core, more
  requested events multiplexed round-robin (Azimi section 2: "fine-grained HPC multiplexing";
  the thesis section 4.3: counters are reconfigured at a set frequency and the counts scaled up),
  each read scaled by time_enabled / time_running as Linux perf does.
- `Sampler`: every `period`-th occurrence of a chosen event raises an interrupt that records the
  data address and the level that served it (POWER5's continuous data address sampling with a
  data source; ROCS section 3.1), costing configurable cycles and optionally polluting L1.
*/
pub mod hardware;

use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// A countable event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    Cycles,
    Instructions,
    L1dAccesses,
    L1dMisses,
    L2Accesses,
    L2Misses,
    LlcAccesses,
    LlcMisses,
    TlbMisses,
    PageWalkCycles,
    StallL2,
    StallLlc,
    StallDram,
    StallRemote,
    StallTlb,
    Prefetches,
    RemoteCacheAccesses,
    /// Memory references retired (loads, stores, instruction fetches of the trace).
    MemoryReferences,
    /// Page faults (a software event, as perf's `page-faults`).
    PageFaults,
    /// Lines read from memory by the core's accesses (demand, walk and prefetch reads; the
    /// memory controller's reads, as Intel's uncore `UNC_IMC_READS` counts them per socket).
    MemoryReads,
    /// Lines written to memory because of the core's accesses (write-backs of lines its fills
    /// evicted; `UNC_IMC_WRITES`).
    MemoryWrites,
    /// Cycles stalled waiting in the memory controller's queue beyond the unloaded DRAM
    /// latency (`crate::dram`; 0 under the fixed-latency model).
    StallBandwidth,
}

impl Event {
    pub const ALL: [Event; 22] = [
        Event::Cycles,
        Event::Instructions,
        Event::L1dAccesses,
        Event::L1dMisses,
        Event::L2Accesses,
        Event::L2Misses,
        Event::LlcAccesses,
        Event::LlcMisses,
        Event::TlbMisses,
        Event::PageWalkCycles,
        Event::StallL2,
        Event::StallLlc,
        Event::StallDram,
        Event::StallRemote,
        Event::StallTlb,
        Event::Prefetches,
        Event::RemoteCacheAccesses,
        Event::MemoryReferences,
        Event::PageFaults,
        Event::MemoryReads,
        Event::MemoryWrites,
        Event::StallBandwidth,
    ];

    /// Whether the event is counted on data references, so a sample of it has a data address
    /// (what `[pmu.sampling] event` may be).
    pub fn has_data_address(self) -> bool {
        matches!(
            self,
            Event::L1dAccesses
                | Event::L1dMisses
                | Event::L2Accesses
                | Event::L2Misses
                | Event::LlcAccesses
                | Event::LlcMisses
                | Event::TlbMisses
                | Event::RemoteCacheAccesses
                | Event::MemoryReferences
        )
    }

    /// The event's bit in a set of events held in a `u32`.
    pub fn bit(self) -> u32 {
        1 << Event::ALL.iter().position(|&e| e == self).expect("in ALL")
    }

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }
}

/// Exact counts of every event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCounts([u64; Event::ALL.len()]);

impl EventCounts {
    #[inline]
    pub fn add(&mut self, e: Event, n: u64) {
        self.0[e as usize] += n;
    }
    #[inline]
    pub fn get(&self, e: Event) -> u64 {
        self.0[e as usize]
    }
    #[inline]
    pub fn set(&mut self, e: Event, n: u64) {
        self.0[e as usize] = n;
    }
    /// `self - earlier`, event by event (counts only grow).
    pub fn since(&self, earlier: &EventCounts) -> EventCounts {
        let mut d = EventCounts::default();
        for i in 0..self.0.len() {
            d.0[i] = self.0[i] - earlier.0[i];
        }
        d
    }
    pub fn accumulate(&mut self, other: &EventCounts) {
        for i in 0..self.0.len() {
            self.0[i] += other.0[i];
        }
    }
}

/// One logical counter's reading, as `perf_event` gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub event: Event,
    /// Events counted while the counter was on a physical counter.
    pub raw: u64,
    /// Cycles the event was requested / actually counted.
    pub time_enabled: u64,
    pub time_running: u64,
}

impl Reading {
    /// Nothing counted yet.
    pub fn zero(event: Event) -> Reading {
        Reading {
            event,
            raw: 0,
            time_enabled: 0,
            time_running: 0,
        }
    }

    /// An exact count over `cycles` (the ideal PMU's: always on a counter).
    pub fn exact(event: Event, count: u64, cycles: u64) -> Reading {
        Reading {
            event,
            raw: count,
            time_enabled: cycles,
            time_running: cycles,
        }
    }

    /// `raw * time_enabled / time_running` (0 if it never ran): the estimate of the full count.
    pub fn scaled(&self) -> f64 {
        if self.time_running == 0 {
            0.0
        } else {
            self.raw as f64 * self.time_enabled as f64 / self.time_running as f64
        }
    }

    /// `scaled`, rounded to the nearest count: what software reads as the event's count.
    pub fn estimate(&self) -> u64 {
        self.scaled().round() as u64
    }

    /// The reading over the interval since `before`, an earlier reading of the same counter.
    pub fn since(&self, before: &Reading) -> Reading {
        Reading {
            event: self.event,
            raw: self.raw.saturating_sub(before.raw),
            time_enabled: self.time_enabled.saturating_sub(before.time_enabled),
            time_running: self.time_running.saturating_sub(before.time_running),
        }
    }

    /// Sum another interval's reading of the same event into this one: a window's reading,
    /// to be scaled once over the window. A sum of per-interval estimates is not one: an
    /// interval whose multiplexed group left the event off reads 0.
    pub fn add(&mut self, o: &Reading) {
        self.raw += o.raw;
        self.time_enabled += o.time_enabled;
        self.time_running += o.time_running;
    }
}

/// The counters of one core: fixed-function counters (always counting their one event, as
/// Intel's three fixed counters or POWER5's PMC5/PMC6) and `physical` programmable ones; more
/// programmable events than counters are multiplexed round-robin.
#[derive(Debug, Clone)]
pub struct CounterSet {
    physical: usize,
    /// The first `fixed` logical counters are on fixed-function counters, never multiplexed.
    fixed: usize,
    events: Vec<Event>,
    raw: Vec<u64>,
    enabled: Vec<u64>,
    running: Vec<u64>,
    /// Index (among the programmable events) of the first event in the group now on the
    /// physical counters.
    group_start: usize,
    pub rotations: u64,
}

impl CounterSet {
    /// `physical` counters serving `events` (multiplexed when there are more events).
    pub fn new(physical: usize, events: &[Event]) -> Result<Self, ConfigError> {
        Self::with_fixed(physical, &[], events)
    }

    /// Fixed-function counters for `fixed`, and `physical` programmable counters for `events`.
    pub fn with_fixed(
        physical: usize,
        fixed: &[Event],
        events: &[Event],
    ) -> Result<Self, ConfigError> {
        if physical == 0 && !events.is_empty() {
            return Err(ConfigError::new(
                "pmu.counters",
                "a PMU needs at least one physical counter",
            ));
        }
        let all: Vec<Event> = fixed.iter().chain(events).copied().collect();
        let n = all.len();
        Ok(CounterSet {
            physical,
            fixed: fixed.len(),
            events: all,
            raw: vec![0; n],
            enabled: vec![0; n],
            running: vec![0; n],
            group_start: 0,
            rotations: 0,
        })
    }

    /// Every logical counter's event: the fixed ones first, then the programmable ones.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    fn programmable(&self) -> usize {
        self.events.len() - self.fixed
    }

    pub fn multiplexed(&self) -> bool {
        self.programmable() > self.physical
    }

    /// Whether logical counter `i` is on a physical counter now.
    pub fn scheduled(&self, i: usize) -> bool {
        let m = self.programmable();
        if i < self.fixed || m <= self.physical {
            return true;
        }
        (i - self.fixed + m - self.group_start) % m < self.physical
    }

    /// An interval of `cycles` cycles in which the core's exact counts grew by `delta`: every
    /// logical counter is enabled for it; the scheduled ones count it.
    pub fn observe(&mut self, delta: &EventCounts, cycles: u64) {
        self.observe_for(delta, cycles, None);
    }

    /// As `observe`, crediting the same counts to `thread`, the thread that ran on the core in
    /// the interval: the OS's per-thread virtual counters (perf's per-task events), saved and
    /// restored on context switches, so a thread's reading is what the core's counters counted
    /// while it ran, with its own time_enabled/time_running.
    pub fn observe_for(
        &mut self,
        delta: &EventCounts,
        cycles: u64,
        mut thread: Option<&mut VirtualCounters>,
    ) {
        if let Some(t) = thread.as_deref_mut() {
            t.fit(self.events.len());
        }
        for i in 0..self.events.len() {
            self.enabled[i] += cycles;
            let on = self.scheduled(i);
            let counted = if on { delta.get(self.events[i]) } else { 0 };
            if on {
                self.running[i] += cycles;
                self.raw[i] += counted;
            }
            if let Some(t) = thread.as_deref_mut() {
                t.enabled[i] += cycles;
                if on {
                    t.running[i] += cycles;
                    t.raw[i] += counted;
                }
            }
        }
    }

    /// Put the next group of events on the physical counters (the multiplexing timer).
    pub fn rotate(&mut self) {
        if self.multiplexed() {
            self.group_start = (self.group_start + self.physical) % self.programmable();
            self.rotations += 1;
        }
    }

    pub fn read(&self) -> Vec<Reading> {
        (0..self.events.len())
            .map(|i| Reading {
                event: self.events[i],
                raw: self.raw[i],
                time_enabled: self.enabled[i],
                time_running: self.running[i],
            })
            .collect()
    }
}

/// One thread's virtual counters (what the OS accumulates for it across context switches),
/// indexed as its cores' `CounterSet::events`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VirtualCounters {
    raw: Vec<u64>,
    enabled: Vec<u64>,
    running: Vec<u64>,
}

impl VirtualCounters {
    fn fit(&mut self, n: usize) {
        if self.raw.len() < n {
            self.raw.resize(n, 0);
            self.enabled.resize(n, 0);
            self.running.resize(n, 0);
        }
    }

    /// Add another thread's counters (a process's reading is the sum of its threads').
    pub fn accumulate(&mut self, other: &VirtualCounters) {
        self.fit(other.raw.len());
        for i in 0..other.raw.len() {
            self.raw[i] += other.raw[i];
            self.enabled[i] += other.enabled[i];
            self.running[i] += other.running[i];
        }
    }

    /// The readings of `events` (the core's logical counters, in order).
    pub fn read(&self, events: &[Event]) -> Vec<Reading> {
        events
            .iter()
            .enumerate()
            .map(|(i, &event)| Reading {
                event,
                raw: self.raw.get(i).copied().unwrap_or(0),
                time_enabled: self.enabled.get(i).copied().unwrap_or(0),
                time_running: self.running.get(i).copied().unwrap_or(0),
            })
            .collect()
    }

    /// What software estimates from these counters: each event's scaled reading, rounded to
    /// the nearest count; an event no counter was asked for reads 0, as on real hardware.
    pub fn estimate(&self, events: &[Event]) -> EventCounts {
        let mut e = EventCounts::default();
        for r in self.read(events) {
            e.set(r.event, r.estimate());
        }
        e
    }
}

/// Where a sampled reference was served from (the sample's data source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataSource {
    /// A cache level, by index in the hierarchy.
    Level(u8),
    /// Another chip's cache.
    Remote,
    Memory,
}

/// One sample delivered to the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Sample {
    pub core: u32,
    /// The thread (system-wide index) and its process.
    pub thread: u32,
    pub pid: u32,
    pub write: bool,
    pub vaddr: u64,
    pub paddr: u64,
    pub source: DataSource,
    pub cycle: u64,
}

fn default_cost() -> u64 {
    2000
}

/// `[pmu.sampling]` in a config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingConfig {
    /// The event whose occurrences are sampled (e.g. `l1d-misses`, `llc-misses`).
    pub event: Event,
    /// One sample every `period` occurrences.
    pub period: u64,
    /// Cycles an interrupt costs the sampled core.
    #[serde(default = "default_cost")]
    pub cost_cycles: u64,
    /// The handler evicts this many L1 lines, as a real one does (ROCS section 3.1).
    #[serde(default)]
    pub pollute_l1_lines: u32,
}

/// Counts occurrences of the sampled event down to the next interrupt.
#[derive(Debug, Clone)]
pub struct Sampler {
    pub config: SamplingConfig,
    countdown: u64,
    pub samples: u64,
}

impl Sampler {
    pub fn new(config: SamplingConfig) -> Result<Self, ConfigError> {
        if config.period == 0 {
            return Err(ConfigError::new(
                "pmu.sampling.period",
                "the sampling period must be at least 1 event",
            ));
        }
        Ok(Sampler {
            countdown: config.period,
            config,
            samples: 0,
        })
    }

    /// Change the period (policies throttle sampling, ROCS section 3.3); the countdown restarts.
    pub fn set_period(&mut self, period: u64) {
        self.config.period = period.max(1);
        self.countdown = self.config.period;
    }

    /// One occurrence of the sampled event; true when it is sampled.
    #[inline]
    pub fn occurrence(&mut self) -> bool {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = self.config.period;
            self.samples += 1;
            true
        } else {
            false
        }
    }
}

/// How the sampling hardware picks the reference a sample reports (`[pmu] sample_mode`; only
/// without `pmu.ideal`, whose sampler takes exactly every `period`-th occurrence).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SampleMode {
    /// POWER5's continuous data address sampling (Azimi et al. sections 2.2, 5.2.1, 6): the
    /// sampled event's counter overflows every `period` occurrences and interrupts; the sample is
    /// the data address register (SDAR), the operand of the last memory instruction that matched
    /// the SDAR's criterion when the interrupt is taken. The interrupt arrives `0..=skid` matching
    /// references late (skid); the handler's pipeline flush loses the next `in_flight` matching
    /// references ("many concurrent memory instructions ... will pass unnoticed", section 6); a
    /// remote-access sample is the last L1D miss's address (section 5.2.1: the SDAR tracks L1
    /// misses, the sample is taken when the remote-access counter overflows).
    #[default]
    Marked,
    /// Instruction tagging with the sampled reference's own address and data source (AMD IBS,
    /// Intel PEBS with load latency; section 6): exact addresses, but the tagged instructions are
    /// picked at random, one occurrence in `period` on average, so the rate is not exact.
    Precise,
}

/// One data reference as the sampling hardware sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub vaddr: u64,
    pub paddr: u64,
    pub write: bool,
    pub source: DataSource,
}

/// The sampling hardware of one core under a realistic PMU: the SDAR, a pending (skidding)
/// interrupt, the flush shadow and the seeded randomness (skid lengths, IBS tagging).
#[derive(Debug, Clone)]
pub struct SamplingHardware {
    pub mode: SampleMode,
    pub skid: u32,
    pub in_flight: u32,
    rng: crate::rng::SplitMix64,
    sdar: Option<Candidate>,
    /// SDAR updates still to come before a pending interrupt is taken.
    pending: Option<u32>,
    /// Matching references still to be lost to the last handler's pipeline flush.
    shadow: u32,
    /// Occurrences of the sampled event the hardware saw / could not count toward a sample.
    pub occurrences: u64,
    pub missed: u64,
}

impl SamplingHardware {
    pub fn new(mode: SampleMode, skid: u32, in_flight: u32, seed: u64) -> Self {
        SamplingHardware {
            mode,
            skid,
            in_flight,
            rng: crate::rng::SplitMix64::new(seed),
            sdar: None,
            pending: None,
            shadow: 0,
            occurrences: 0,
            missed: 0,
        }
    }

    /// One data reference on the core: `occurred` if it is an occurrence of the sampled event,
    /// `matches_sdar` if it updates the SDAR (its criterion: the sampled event itself, or L1D
    /// misses for remote accesses). Returns the sample to deliver, if one is taken now.
    pub fn reference(
        &mut self,
        sampler: &mut Sampler,
        occurred: bool,
        matches_sdar: bool,
        this: Candidate,
    ) -> Option<Candidate> {
        self.occurrences += occurred as u64;
        match self.mode {
            SampleMode::Precise => {
                if occurred && self.rng.below(sampler.config.period) == 0 {
                    sampler.samples += 1;
                    return Some(this);
                }
                None
            }
            SampleMode::Marked => {
                if matches_sdar {
                    if self.shadow > 0 {
                        self.shadow -= 1;
                        self.missed += occurred as u64;
                        return None;
                    }
                    self.sdar = Some(this);
                    if let Some(k) = self.pending {
                        if k <= 1 {
                            self.pending = None;
                            self.missed += occurred as u64;
                            return self.deliver(sampler);
                        }
                        self.pending = Some(k - 1);
                    }
                }
                if !occurred {
                    return None;
                }
                if self.pending.is_some() {
                    self.missed += 1; // the counter is frozen until the interrupt is taken
                    return None;
                }
                if sampler.occurrence() {
                    sampler.samples -= 1; // counted when delivered
                    let k = self.rng.below(self.skid as u64 + 1) as u32;
                    if k == 0 {
                        return self.deliver(sampler);
                    }
                    self.pending = Some(k);
                }
                None
            }
        }
    }

    fn deliver(&mut self, sampler: &mut Sampler) -> Option<Candidate> {
        self.shadow = self.in_flight;
        let s = self.sdar?;
        sampler.samples += 1;
        Some(s)
    }
}

/// The system's state for a realistic PMU (`[pmu] ideal = false`): the logical counters' events,
/// every thread's virtual counters, every core's sampling hardware, and each process's readings
/// at the previous tick.
#[derive(Debug, Clone)]
pub struct RealisticPmu {
    /// The cores' logical counters, fixed first (`CounterSet::events`).
    pub events: Vec<Event>,
    pub threads: Vec<VirtualCounters>,
    pub hardware: Vec<SamplingHardware>,
    /// Each process's readings at the previous tick (`interval`).
    pub last_readings: Vec<Vec<Reading>>,
}

impl RealisticPmu {
    pub fn thread(&mut self, tid: usize) -> &mut VirtualCounters {
        if self.threads.len() <= tid {
            self.threads.resize(tid + 1, VirtualCounters::default());
        }
        &mut self.threads[tid]
    }

    /// The OS's estimate for a process: the sum of its threads' scaled readings.
    pub fn estimate(&self, threads: &[usize]) -> EventCounts {
        let mut e = EventCounts::default();
        for &t in threads {
            if let Some(v) = self.threads.get(t) {
                e.accumulate(&v.estimate(&self.events));
            }
        }
        e
    }

    /// A process's counters as the OS reads them: its threads' virtual counters summed, one
    /// reading per logical counter (raw count, time enabled, time running), as `perf_event`
    /// gives a task's counters.
    pub fn readings(&self, threads: &[usize]) -> Vec<Reading> {
        let mut sum = VirtualCounters::default();
        for &t in threads {
            if let Some(v) = self.threads.get(t) {
                sum.accumulate(v);
            }
        }
        sum.read(&self.events)
    }

    /// The estimate for `pid` over the interval since the previous call, from the change in
    /// its readings: each event's raw count in the interval scaled by the interval's time
    /// enabled over its time running (what `perf stat -I` prints); 0 for an event that was not
    /// on a counter during the interval. The difference of two cumulative scaled estimates
    /// is not an interval's estimate: an event first scheduled after several intervals jumped
    /// from 0 to an estimate of the whole run so far, and could exceed a related event's count
    /// in the same interval by the history it carried.
    pub fn interval(&mut self, pid: usize, now: &[Reading]) -> EventCounts {
        if self.last_readings.len() <= pid {
            self.last_readings.resize(pid + 1, Vec::new());
        }
        let last = &mut self.last_readings[pid];
        let mut d = EventCounts::default();
        for (i, r) in now.iter().enumerate() {
            let delta = r.since(last.get(i).unwrap_or(&Reading::zero(r.event)));
            d.set(r.event, d.get(r.event) + delta.estimate());
        }
        *last = now.to_vec();
        d
    }
}

/// One event of a process's run as the realistic PMU estimated it (`pmu` in the report).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimateReport {
    pub process: String,
    pub event: Event,
    /// The exact count (the simulator's oracle).
    pub exact: u64,
    /// What the OS estimated from its threads' counters.
    pub estimated: u64,
    /// Fraction of the run the event was on a counter, over the process's threads.
    pub running: f64,
    /// `(estimated - exact) / exact` (0 when both are 0).
    pub error: f64,
}

/// The realistic PMU's part of a run's report: the counters' estimates against the exact
/// counts (Azimi section 2: the multiplexed estimate's error is part of the result), and the
/// sampler's missed occurrences.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PmuReport {
    pub sample_mode: SampleMode,
    /// The cores' logical counters, fixed ones first.
    pub events: Vec<Event>,
    pub fixed: usize,
    pub counters: usize,
    pub multiplexed: bool,
    pub estimates: Vec<EstimateReport>,
    /// Occurrences of the sampled event the sampling hardware saw, and how many of them it
    /// could not count toward a sample (flush shadow, frozen counter).
    pub sample_occurrences: u64,
    pub samples_missed: u64,
}

#[cfg(test)]
mod tests;

/// The realistic PMU in a whole system: per-thread virtual counters across context switches.
#[cfg(test)]
mod system_tests;
