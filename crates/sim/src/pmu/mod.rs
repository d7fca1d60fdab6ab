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

/// The programmable counters of one core.
#[derive(Debug, Clone)]
pub struct CounterSet {
    physical: usize,
    events: Vec<Event>,
    raw: Vec<u64>,
    enabled: Vec<u64>,
    running: Vec<u64>,
    /// Index of the first event in the group now on the physical counters.
    group_start: usize,
    pub rotations: u64,
}

impl CounterSet {
    /// `physical` counters serving `events` (multiplexed when there are more events).
    pub fn new(physical: usize, events: &[Event]) -> Result<Self, ConfigError> {
        if physical == 0 {
            return Err(ConfigError::new(
                "pmu.counters",
                "a PMU needs at least one physical counter",
            ));
        }
        let n = events.len();
        Ok(CounterSet {
            physical,
            events: events.to_vec(),
            raw: vec![0; n],
            enabled: vec![0; n],
            running: vec![0; n],
            group_start: 0,
            rotations: 0,
        })
    }

    pub fn multiplexed(&self) -> bool {
        self.events.len() > self.physical
    }

    /// Whether logical counter `i` is on a physical counter now.
    pub fn scheduled(&self, i: usize) -> bool {
        let n = self.events.len();
        if n <= self.physical {
            return true;
        }
        (i + n - self.group_start) % n < self.physical
    }

    /// An interval of `cycles` cycles in which the core's exact counts grew by `delta`: every
    /// logical counter is enabled for it; the scheduled ones count it.
    pub fn observe(&mut self, delta: &EventCounts, cycles: u64) {
        for i in 0..self.events.len() {
            self.enabled[i] += cycles;
            if self.scheduled(i) {
                self.running[i] += cycles;
                self.raw[i] += delta.get(self.events[i]);
            }
        }
    }

    /// Put the next group of events on the physical counters (the multiplexing timer).
    pub fn rotate(&mut self) {
        if self.multiplexed() {
            self.group_start = (self.group_start + self.physical) % self.events.len();
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
}
