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
    /// `raw * time_enabled / time_running` (0 if it never ran): the estimate of the full count.
    pub fn scaled(&self) -> f64 {
        if self.time_running == 0 {
            0.0
        } else {
            self.raw as f64 * self.time_enabled as f64 / self.time_running as f64
        }
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
            e.set(r.event, r.scaled().round() as u64);
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
/// every thread's virtual counters, every core's sampling hardware, and what each process's
/// estimate was at the previous tick.
#[derive(Debug, Clone)]
pub struct RealisticPmu {
    /// The cores' logical counters, fixed first (`CounterSet::events`).
    pub events: Vec<Event>,
    pub threads: Vec<VirtualCounters>,
    pub hardware: Vec<SamplingHardware>,
    pub last_estimate: Vec<EventCounts>,
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

    /// The estimate since the previous call for `pid` (saturating: a scaled estimate may fall
    /// as more of the run is seen), and the new total.
    pub fn interval(&mut self, pid: usize, total: EventCounts) -> EventCounts {
        if self.last_estimate.len() <= pid {
            self.last_estimate.resize(pid + 1, EventCounts::default());
        }
        let last = &mut self.last_estimate[pid];
        let mut d = EventCounts::default();
        for e in Event::ALL {
            d.set(e, total.get(e).saturating_sub(last.get(e)));
        }
        *last = total;
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
mod tests {
    use super::*;

    #[test]
    fn multiplexed_counts_scale_to_the_true_totals_for_a_steady_rate() {
        let events = [
            Event::Instructions,
            Event::L2Misses,
            Event::LlcMisses,
            Event::TlbMisses,
            Event::StallDram,
        ];
        let mut pmu = CounterSet::new(2, &events).unwrap();
        assert!(pmu.multiplexed());
        let mut truth = EventCounts::default();
        // 100 intervals of 1000 cycles at a steady rate, rotating after each.
        for _ in 0..100 {
            let mut d = EventCounts::default();
            d.add(Event::Instructions, 800);
            d.add(Event::L2Misses, 30);
            d.add(Event::LlcMisses, 10);
            d.add(Event::TlbMisses, 4);
            d.add(Event::StallDram, 250);
            pmu.observe(&d, 1000);
            truth.accumulate(&d);
            pmu.rotate();
        }
        for r in pmu.read() {
            assert_eq!(r.time_enabled, 100_000);
            assert!(r.time_running < r.time_enabled && r.time_running > 0);
            let want = truth.get(r.event) as f64;
            assert!(
                (r.scaled() - want).abs() / want < 0.02,
                "{:?} {} vs {}",
                r.event,
                r.scaled(),
                want
            );
        }
        // Each of 5 events runs on 2 of 5 "slots" per rotation: 40% of the time.
        assert_eq!(pmu.read()[0].time_running, 40_000);
    }

    #[test]
    fn bursty_events_show_multiplexing_error_and_unmultiplexed_counts_are_exact() {
        let events = [Event::Instructions, Event::LlcMisses, Event::TlbMisses];
        let mut m = CounterSet::new(1, &events).unwrap();
        let mut exact = CounterSet::new(3, &events).unwrap();
        for k in 0..30u64 {
            let mut d = EventCounts::default();
            d.add(Event::Instructions, 1000);
            // LLC misses only in every third interval, which is when TLB misses are counted.
            d.add(Event::LlcMisses, if k % 3 == 2 { 300 } else { 0 });
            for c in [&mut m, &mut exact] {
                c.observe(&d, 1000);
                c.rotate();
            }
        }
        let llc = m.read()[1];
        assert_eq!(llc.scaled(), 0.0, "the bursts always fell outside its slot");
        assert_eq!(exact.read()[1].raw, 3000);
        assert_eq!(exact.read()[1].scaled(), 3000.0);
        assert!(CounterSet::new(0, &events).is_err());
    }

    #[test]
    fn sampler_takes_every_period_th_occurrence() {
        let mut s = Sampler::new(SamplingConfig {
            event: Event::L1dMisses,
            period: 7,
            cost_cycles: 100,
            pollute_l1_lines: 0,
        })
        .unwrap();
        let hits: Vec<usize> = (1..=30).filter(|_| s.occurrence()).collect();
        assert_eq!(hits, vec![7, 14, 21, 28]);
        s.set_period(2);
        assert!(!s.occurrence() && s.occurrence());
        assert_eq!(s.samples, 5);
        let bad = SamplingConfig {
            event: Event::L1dMisses,
            period: 0,
            cost_cycles: 1,
            pollute_l1_lines: 0,
        };
        assert!(Sampler::new(bad).is_err());
        let e: Event = serde_json::from_str("\"llc-misses\"").unwrap();
        assert_eq!(e, Event::LlcMisses);
    }

    fn constant(events: &[(Event, u64)]) -> EventCounts {
        let mut d = EventCounts::default();
        for &(e, n) in events {
            d.add(e, n);
        }
        d
    }

    #[test]
    fn a_constant_rate_event_multiplexed_over_k_groups_is_estimated_exactly() {
        // 6 programmable events on 2 counters: k = 3 groups; intervals aligned with rotations
        // and a whole number of rounds, so each event runs exactly 1/3 of the time at the same
        // rate: raw * 3 is the true count with no error at all.
        let events = [
            Event::L2Misses,
            Event::LlcAccesses,
            Event::LlcMisses,
            Event::TlbMisses,
            Event::StallDram,
            Event::RemoteCacheAccesses,
        ];
        let fixed = [Event::Cycles, Event::Instructions];
        let mut pmu = CounterSet::with_fixed(2, &fixed, &events).unwrap();
        let mut thread = VirtualCounters::default();
        let d = constant(&[
            (Event::Cycles, 1000),
            (Event::Instructions, 700),
            (Event::L2Misses, 31),
            (Event::LlcAccesses, 29),
            (Event::LlcMisses, 11),
            (Event::TlbMisses, 5),
            (Event::StallDram, 257),
            (Event::RemoteCacheAccesses, 3),
        ]);
        let rounds = 7;
        for _ in 0..3 * rounds {
            pmu.observe_for(&d, 1000, Some(&mut thread));
            pmu.rotate();
        }
        let all: Vec<Event> = fixed.iter().chain(&events).copied().collect();
        assert_eq!(pmu.events(), &all[..]);
        for (r, t) in pmu.read().iter().zip(thread.read(&all)) {
            assert_eq!(*r, t, "the thread ran the whole time: same reading");
            let truth = d.get(r.event) * 3 * rounds;
            assert_eq!(r.scaled(), truth as f64, "{:?}", r.event);
            let fixed_counter = fixed.contains(&r.event);
            assert_eq!(
                r.time_running * if fixed_counter { 1 } else { 3 },
                r.time_enabled
            );
        }
        assert_eq!(thread.estimate(&all), {
            let mut t = EventCounts::default();
            for _ in 0..3 * rounds {
                t.accumulate(&d);
            }
            t
        });
    }

    #[test]
    fn a_phased_event_multiplexed_has_the_closed_form_error() {
        // Two events on one counter, rotated every interval: `a` is counted in the even
        // intervals only. If `a` grows linearly, a_k = k for k in 0..2n, the estimate is
        // 2 * sum(even k) = 2n(n-1) against the truth n(2n-1): relative error -1/(2n-1).
        for n in [2u64, 5, 50] {
            let mut pmu = CounterSet::new(1, &[Event::LlcMisses, Event::TlbMisses]).unwrap();
            for k in 0..2 * n {
                pmu.observe(
                    &constant(&[(Event::LlcMisses, k), (Event::TlbMisses, 9)]),
                    100,
                );
                pmu.rotate();
            }
            let r = pmu.read()[0];
            let truth = (n * (2 * n - 1)) as f64;
            assert_eq!(r.scaled(), (2 * n * (n - 1)) as f64);
            let error = (r.scaled() - truth) / truth;
            assert!(
                (error + 1.0 / (2 * n - 1) as f64).abs() < 1e-12,
                "n={n}: {error}"
            );
            assert_eq!(pmu.read()[1].scaled(), (9 * 2 * n) as f64, "steady: exact");
        }
    }

    #[test]
    fn fixed_counters_are_never_multiplexed_and_a_thread_reads_only_while_it_ran() {
        let mut pmu = CounterSet::with_fixed(
            1,
            &[Event::Instructions],
            &[Event::LlcMisses, Event::L2Misses],
        )
        .unwrap();
        assert!(pmu.multiplexed());
        let (mut a, mut b) = (VirtualCounters::default(), VirtualCounters::default());
        let d = constant(&[
            (Event::Instructions, 10),
            (Event::LlcMisses, 4),
            (Event::L2Misses, 6),
        ]);
        // a runs in the first group's slot, b in the second's: each sees one event only.
        for _ in 0..4 {
            pmu.observe_for(&d, 50, Some(&mut a));
            pmu.rotate();
            pmu.observe_for(&d, 50, Some(&mut b));
            pmu.rotate();
        }
        let ev = pmu.events().to_vec();
        let (ea, eb) = (a.estimate(&ev), b.estimate(&ev));
        assert_eq!(
            (ea.get(Event::Instructions), eb.get(Event::Instructions)),
            (40, 40)
        );
        assert_eq!((ea.get(Event::LlcMisses), ea.get(Event::L2Misses)), (16, 0));
        assert_eq!((eb.get(Event::LlcMisses), eb.get(Event::L2Misses)), (0, 24));
        assert_eq!(
            ea.get(Event::TlbMisses),
            0,
            "an event no counter counts reads 0"
        );
        assert!(CounterSet::with_fixed(0, &[Event::Cycles], &[Event::L2Misses]).is_err());
        assert!(CounterSet::with_fixed(0, &[Event::Cycles], &[]).is_ok());
    }

    fn sampler(period: u64) -> Sampler {
        Sampler::new(SamplingConfig {
            event: Event::L1dMisses,
            period,
            cost_cycles: 1,
            pollute_l1_lines: 0,
        })
        .unwrap()
    }

    fn at(i: u64, source: DataSource) -> Candidate {
        Candidate {
            vaddr: i * 64,
            paddr: i * 64,
            write: false,
            source,
        }
    }

    #[test]
    fn marked_sampling_misses_the_references_a_flush_loses_at_the_closed_form_rate() {
        // Every reference an occurrence, no skid: samples at occurrence P, then F are lost to
        // the flush, then P more: the k-th sample is at kP + (k-1)F.
        for (p, f) in [(1u64, 0u32), (1, 8), (10, 8), (7, 3)] {
            let mut s = sampler(p);
            let mut hw = SamplingHardware::new(SampleMode::Marked, 0, f, 1);
            let n = 10_000u64;
            let mut got = Vec::new();
            for i in 1..=n {
                if let Some(c) = hw.reference(&mut s, true, true, at(i, DataSource::Memory)) {
                    got.push(c.vaddr / 64);
                }
            }
            let want: Vec<u64> = (1..)
                .map(|k| k * p + (k - 1) * f as u64)
                .take_while(|&i| i <= n)
                .collect();
            assert_eq!(got, want, "P={p} F={f}");
            assert_eq!(s.samples, want.len() as u64);
            assert_eq!(hw.occurrences, n);
            // Missed: every occurrence in a flush shadow (the last shadow may be cut short).
            let last = *want.last().unwrap();
            assert_eq!(
                hw.missed,
                (want.len() as u64 - 1) * f as u64 + (n - last).min(f as u64)
            );
        }
    }

    #[test]
    fn marked_sampling_skids_up_to_skid_matching_references_and_is_seeded() {
        let run = |seed: u64| {
            let mut s = sampler(50);
            let mut hw = SamplingHardware::new(SampleMode::Marked, 6, 0, seed);
            let mut lags = Vec::new();
            let mut overflowed_at = 0;
            for i in 1..=200_000u64 {
                // The counter overflows at each 50th occurrence counted (none while pending).
                let before = s.countdown;
                let out = hw.reference(&mut s, true, true, at(i, DataSource::Memory));
                if before == 1 && s.countdown == 50 {
                    overflowed_at = i;
                }
                if let Some(c) = out {
                    lags.push(c.vaddr / 64 - overflowed_at);
                }
            }
            lags
        };
        let lags = run(3);
        assert!(lags.iter().all(|&l| l <= 6), "skid bounded");
        for k in 0..=6 {
            assert!(lags.contains(&k), "skid {k} occurs");
        }
        let mean = lags.iter().sum::<u64>() as f64 / lags.len() as f64;
        assert!((mean - 3.0).abs() < 0.2, "uniform 0..=6: mean {mean}");
        assert_eq!(lags, run(3), "same seed, same samples");
        assert_ne!(lags, run(4));
    }

    #[test]
    fn a_remote_sample_is_the_sdar_s_last_l1_miss_not_the_remote_access() {
        // Azimi 5.2.1: the SDAR follows L1D misses; the remote-access counter's overflow takes
        // the sample. No skid: the last L1 miss is the remote access itself. With skid, it is a
        // later L1 miss (local), the approximation's error.
        let refs: Vec<(bool, Candidate)> = (1..=40_000u64)
            .map(|i| {
                (
                    i % 5 == 0,
                    at(
                        i,
                        if i % 5 == 0 {
                            DataSource::Remote
                        } else {
                            DataSource::Memory
                        },
                    ),
                )
            })
            .collect();
        for skid in [0u32, 4] {
            let mut s = sampler(3);
            let mut hw = SamplingHardware::new(SampleMode::Marked, skid, 0, 9);
            let mut remote = 0;
            let mut total = 0;
            for &(is_remote, c) in &refs {
                if let Some(x) = hw.reference(&mut s, is_remote, true, c) {
                    total += 1;
                    remote += (x.source == DataSource::Remote) as u32;
                }
            }
            assert!(total > 2000);
            if skid == 0 {
                assert_eq!(remote, total, "every sample is the remote access");
            } else {
                let share = remote as f64 / total as f64;
                // A skid of k in 0..=4 lands on a remote reference only when k = 0.
                assert!((share - 0.2).abs() < 0.03, "share {share}");
            }
        }
    }

    #[test]
    fn precise_sampling_reports_the_reference_itself_at_a_random_one_in_period_rate() {
        let mut s = sampler(20);
        let mut hw = SamplingHardware::new(SampleMode::Precise, 99, 99, 5);
        let n = 200_000u64;
        let mut k = 0u64;
        for i in 1..=n {
            let occurred = i % 2 == 0;
            if let Some(c) = hw.reference(&mut s, occurred, occurred, at(i, DataSource::Level(2))) {
                assert_eq!(c.vaddr / 64 % 2, 0, "the occurrence itself, no skid");
                k += 1;
            }
        }
        // Binomial(n/2, 1/20): mean 5000, sd 69.
        assert!((k as f64 - 5000.0).abs() < 5.0 * 69.0, "{k}");
        assert_eq!(hw.missed, 0);
        assert_eq!(s.samples, k);
    }
}

/// The realistic PMU in a whole system: per-thread virtual counters across context switches.
#[cfg(test)]
mod system_tests {
    use crate::system::testing;

    /// One core, two single-thread processes and a third of two threads, sharing it by time
    /// slices (hundreds of context switches); `[pmu]` appended.
    fn config(pmu: &str) -> crate::system::SystemConfig {
        let proc = |name: &str, seed: u64, threads: usize, footprint: &str| {
            let mut s = format!("[[processes]]\nname = \"{name}\"\n");
            for t in 0..threads as u64 {
                s += &format!(
                    "[[processes.threads]]\nworkload = {{ seed = {}, phases = [{{ pattern = \"uniform\", footprint = \"{footprint}\", references = 60000, base = {} }}] }}\n",
                    seed + t,
                    0x1000_0000 * (seed + t + 1)
                );
            }
            s
        };
        let text = format!(
            "[machine]\nchips = 1\n[machine.hierarchy]\ncores = 1\n[[machine.hierarchy.levels]]\nname = \"L1D\"\nsize = \"4KiB\"\nways = 4\n[[machine.hierarchy.levels]]\nname = \"LLC\"\nsize = \"64KiB\"\nways = 4\n[machine.timing]\nlevel_latency = [4, 40]\ndram_latency = 200\nfault_cycles = 1000\n[memory]\nram = \"16MiB\"\n[scheduler]\ntime_slice = 20000\ntick = 100000\n{pmu}\n{}{}{}",
            proc("small", 1, 1, "8KiB"),
            proc("big", 5, 1, "512KiB"),
            proc("pair", 9, 2, "128KiB"),
        );
        testing::config_for(&text, "linux", None)
    }

    #[test]
    fn per_thread_counts_survive_context_switches_exactly_when_nothing_is_multiplexed() {
        let c = config("[pmu]\nideal = false\ncounters = 6\nfixed = [\"cycles\", \"instructions\"]\nmux_interval = 30000\n");
        let (_, r) = testing::run_config(&c, None);
        assert!(r.cores[0].context_switches > 100);
        let pmu = r.pmu.as_ref().expect("realistic");
        assert!(!pmu.multiplexed);
        for e in &pmu.estimates {
            assert_eq!(e.estimated, e.exact, "{e:?}");
            assert_eq!(e.running, 1.0);
        }
        // The ideal PMU has no such section.
        let (_, ideal) = testing::run_config(&config(""), None);
        assert!(ideal.pmu.is_none());
    }

    #[test]
    fn multiplexed_per_thread_counts_are_estimates_with_the_core_s_schedule() {
        let c = config("[pmu]\nideal = false\ncounters = 1\nfixed = [\"cycles\"]\nmux_interval = 30000\nevents = [\"instructions\", \"l1d-misses\", \"llc-misses\"]\n");
        let (_, r) = testing::run_config(&c, None);
        let pmu = r.pmu.as_ref().expect("realistic");
        assert!(pmu.multiplexed);
        let mut on_counter = std::collections::BTreeMap::<&str, f64>::new();
        for e in &pmu.estimates {
            if e.event == crate::pmu::Event::Cycles {
                assert_eq!(e.estimated, e.exact, "a fixed counter is exact");
                continue;
            }
            assert!(e.running > 0.0 && e.running < 1.0, "{e:?}");
            // Steady events are estimated within 15% however the slices fell; `small`'s LLC
            // misses are all compulsory, at its start (bursty: its error may be anything).
            if !(e.process == "small" && e.event == crate::pmu::Event::LlcMisses) {
                assert!(e.error.abs() < 0.15, "{e:?}");
            }
            *on_counter.entry(&e.process).or_default() += e.running;
        }
        // Three events share one counter: at every cycle a thread runs exactly one of them is
        // on it, so each process's three running fractions add up to 1.
        assert_eq!(on_counter.len(), 3);
        for (p, sum) in on_counter {
            assert!((sum - 1.0).abs() < 1e-9, "{p}: {sum}");
        }
        assert!(pmu.estimates.iter().any(|e| e.estimated != e.exact));
    }
}
