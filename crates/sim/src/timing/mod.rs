/*!
The timing model: cycles per thread and where they went (Azimi et al. section 2.1).

Cycles are *completion* cycles (instructions retiring at the base CPI) or *stall* cycles
attributed to a cause: a reference served by L2, the LLC, DRAM or another chip's cache, a page
walk, or kernel work (faults, page copies, TLB shootdowns, PMU interrupts). A reference that
hits L1 is part of the base CPI. A reference served deeper stalls for its level's latency beyond
L1's, divided by the memory-level parallelism factor (out-of-order cores overlap independent
misses); a page walk is serial, so each of its entry reads stalls for the full latency of the
level that served it (ROCS section 6.4 measured walks of 136 vs 443 cycles this way).

Everything is kept in milli-cycles (integers), so a run is deterministic and the stall
breakdown adds up to the total exactly (DESIGN.md principle 4).
*/
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

fn d_cpi() -> f64 {
    1.0
}
fn d_mlp() -> f64 {
    1.0
}
fn d_walk_factor() -> f64 {
    1.0
}
/// A report's effective config leaves the default out (reports and their digests unchanged).
fn is_native_walk(f: &f64) -> bool {
    *f == 1.0
}

/// `[timing]` in a config. Latencies in cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingConfig {
    /// Cycles per instruction when every reference hits L1.
    #[serde(default = "d_cpi")]
    pub base_cpi: f64,
    /// Hit latency of each cache level, in hierarchy order (every level, L1I included). The
    /// smallest is the L1 latency that the base CPI already covers.
    pub level_latency: Vec<u32>,
    pub dram_latency: u32,
    /// A read served by another chip's cache.
    #[serde(default)]
    pub remote_latency: u32,
    /// Misses overlapped on average (1 = fully serialised).
    #[serde(default = "d_mlp")]
    pub mlp: f64,
    /// Each page-table read of a walk costs this many times the latency of the level that
    /// served it (default 1: a native walk). Above 1 it stands for a virtual machine's nested,
    /// two-dimensional walk, where every guest table read first walks the host's tables (up to
    /// 24 reads for 4 + 4 levels); `cachecolor calibrate` measures it as the page-walk cost of
    /// 4 KiB against 2 MiB pages over the model's own walk (docs/validation.md).
    #[serde(default = "d_walk_factor", skip_serializing_if = "is_native_walk")]
    pub walk_factor: f64,
    #[serde(default)]
    pub fault_cycles: u64,
    /// `fault_cycles` was measured on a real machine as the whole cost of a first touch, the
    /// kernel's zeroing of the page included (`cachecolor calibrate`): the model's clear
    /// (`clear_page`) still stores through the caches and sends its write-backs to memory, but
    /// its time is not charged again on top. Default false: `fault_cycles` is the fault path's
    /// own work and the clear is charged as modelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fault_cycles_include_clear: bool,
    #[serde(default)]
    pub copy_cycles_per_page: u64,
    #[serde(default)]
    pub shootdown_cycles: u64,
    #[serde(default)]
    pub interrupt_cycles: u64,
    /// Visiting one page-table entry in an access-bit scan (COLORIS Redistribution).
    #[serde(default)]
    pub scan_cycles_per_entry: u64,
    /// Moving a thread to another core's run queue (beyond the cold caches it finds there).
    #[serde(default)]
    pub migration_cycles: u64,
}

impl TimingConfig {
    pub fn validate(&self, levels: usize) -> Result<(), ConfigError> {
        if !(self.base_cpi > 0.0 && self.base_cpi < 100.0) {
            return Err(ConfigError::new(
                "timing.base_cpi",
                format!("{}: allowed 0 < base_cpi < 100", self.base_cpi),
            ));
        }
        if !(self.mlp >= 1.0 && self.mlp <= 64.0) {
            return Err(ConfigError::new(
                "timing.mlp",
                format!("{}: allowed 1 <= mlp <= 64", self.mlp),
            ));
        }
        if !(self.walk_factor >= 1.0 && self.walk_factor <= 64.0) {
            return Err(ConfigError::new(
                "timing.walk_factor",
                format!("{}: allowed 1 <= walk_factor <= 64", self.walk_factor),
            ));
        }
        if self.level_latency.len() != levels {
            return Err(ConfigError::new(
                "timing.level_latency",
                format!(
                    "{} latencies for {levels} cache levels: give one per level",
                    self.level_latency.len()
                ),
            ));
        }
        if self.level_latency.windows(2).any(|w| w[1] < w[0])
            || self
                .level_latency
                .last()
                .is_some_and(|&l| l > self.dram_latency)
        {
            return Err(ConfigError::new(
                "timing.level_latency",
                "latencies must not decrease from L1 to DRAM",
            ));
        }
        Ok(())
    }
}

/// Milli-cycles of one walk read at `latency` cycles: exactly `latency * 1000` for a native walk
/// (factor 1, so the counts of every config without `walk_factor` stay as they were).
fn walk_milli(latency: u32, factor: f64) -> u64 {
    if factor == 1.0 {
        latency as u64 * 1000
    } else {
        (latency as f64 * factor * 1000.0).round() as u64
    }
}

/// Why a cycle did not retire an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StallCause {
    L2,
    Llc,
    Dram,
    Remote,
    Tlb,
    Kernel,
    /// Waiting in the memory controller's queue beyond the unloaded DRAM latency
    /// (`crate::dram`, the queued model).
    Bandwidth,
}

const CAUSES: usize = 7;

/// Where a reference was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    Level(usize),
    Remote,
    Dram,
}

/// A thread's (or core's) cycles: completion plus stalls by cause, in milli-cycles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallBreakdown {
    pub completion: u64,
    pub stalls: [u64; CAUSES],
}

impl StallBreakdown {
    pub fn total_milli(&self) -> u64 {
        self.completion + self.stalls.iter().sum::<u64>()
    }
    pub fn cycles(&self) -> f64 {
        self.total_milli() as f64 / 1000.0
    }
    pub fn stall(&self, c: StallCause) -> f64 {
        self.stalls[c as usize] as f64 / 1000.0
    }
    pub fn accumulate(&mut self, o: &StallBreakdown) {
        self.completion += o.completion;
        for i in 0..CAUSES {
            self.stalls[i] += o.stalls[i];
        }
    }
}

/// Charges cycles to a breakdown by the config's rules.
#[derive(Debug, Clone)]
pub struct Timing {
    cpi_milli: u64,
    /// Per level: stall milli-cycles of a reference it serves.
    level_stall: Vec<u64>,
    level_cause: Vec<StallCause>,
    dram_stall: u64,
    remote_stall: u64,
    /// Milli-cycles of one page-table read of a walk, per level / DRAM / remote (the latency
    /// times `walk_factor`).
    level_latency: Vec<u64>,
    dram_latency: u64,
    remote_latency: u64,
    pub config: TimingConfig,
}

impl Timing {
    /// `levels` cache levels (the hierarchy's, in order); the last is the LLC.
    pub fn new(config: &TimingConfig, levels: usize) -> Result<Self, ConfigError> {
        config.validate(levels)?;
        let l1 = *config
            .level_latency
            .iter()
            .min()
            .expect("validated: one per level") as f64;
        let stall = |lat: f64| ((lat - l1).max(0.0) * 1000.0 / config.mlp).round() as u64;
        let level_cause = (0..levels)
            .map(|i| {
                if i == levels - 1 && levels > 1 {
                    StallCause::Llc
                } else {
                    StallCause::L2
                }
            })
            .collect();
        Ok(Timing {
            cpi_milli: (config.base_cpi * 1000.0).round() as u64,
            level_stall: config
                .level_latency
                .iter()
                .map(|&l| stall(l as f64))
                .collect(),
            level_cause,
            dram_stall: stall(config.dram_latency as f64),
            remote_stall: stall(config.remote_latency.max(config.level_latency[0]) as f64),
            level_latency: config
                .level_latency
                .iter()
                .map(|&l| walk_milli(l, config.walk_factor))
                .collect(),
            dram_latency: walk_milli(config.dram_latency, config.walk_factor),
            remote_latency: walk_milli(config.remote_latency, config.walk_factor),
            config: config.clone(),
        })
    }

    /// `n` instructions retired at the base CPI.
    #[inline]
    pub fn instructions(&self, b: &mut StallBreakdown, n: u64) -> u64 {
        let c = self.instructions_milli(n);
        b.completion += c;
        c
    }

    /// A data or instruction reference served at `s`; returns the milli-cycles charged.
    #[inline]
    pub fn reference(&self, b: &mut StallBreakdown, s: Served) -> u64 {
        self.references(b, s, 1)
    }

    /// `n` data or instruction references served at `s`; returns the milli-cycles charged.
    #[inline]
    pub fn references(&self, b: &mut StallBreakdown, s: Served, n: u64) -> u64 {
        let (cause, c) = self.stall_of(s);
        b.stalls[cause as usize] += c * n;
        c * n
    }

    /// What a reference served at `s` stalls on, and for how many milli-cycles.
    #[inline(always)]
    fn stall_of(&self, s: Served) -> (StallCause, u64) {
        match s {
            Served::Level(i) => (self.level_cause[i], self.level_stall[i]),
            Served::Dram => (StallCause::Dram, self.dram_stall),
            Served::Remote => (StallCause::Remote, self.remote_stall),
        }
    }

    /// The milli-cycles `reference` charges for a reference served at `s` (charging nothing).
    #[inline(always)]
    pub fn reference_milli(&self, s: Served) -> u64 {
        self.stall_of(s).1
    }

    /// The milli-cycles `instructions` charges for `n` instructions (charging nothing).
    #[inline(always)]
    pub fn instructions_milli(&self, n: u64) -> u64 {
        n * self.cpi_milli
    }

    /// One page-table entry read by a walk, served at `s` (walks are serial: full latency).
    #[inline]
    pub fn walk_read(&self, b: &mut StallBreakdown, s: Served) -> u64 {
        self.walk_reads(b, s, 1)
    }

    /// `n` page-table entry reads served at `s`; returns the milli-cycles charged.
    #[inline]
    pub fn walk_reads(&self, b: &mut StallBreakdown, s: Served, n: u64) -> u64 {
        let c = match s {
            Served::Level(i) => self.level_latency[i],
            Served::Dram => self.dram_latency,
            Served::Remote => self.remote_latency,
        };
        b.stalls[StallCause::Tlb as usize] += c * n;
        c * n
    }

    /// A memory read's queueing delay of `delay_milli` (`crate::dram`): overlapped with other
    /// misses (divided by `mlp`) as the DRAM stall is, or in full for a page walk's read
    /// (`serial`). Returns the milli-cycles charged.
    #[inline]
    pub fn bandwidth(&self, b: &mut StallBreakdown, delay_milli: u64, serial: bool) -> u64 {
        let c = if serial || delay_milli == 0 {
            delay_milli
        } else {
            (delay_milli as f64 / self.config.mlp).round() as u64
        };
        b.stalls[StallCause::Bandwidth as usize] += c;
        c
    }

    /// Kernel work of `cycles` cycles (fault handling, copies, shootdowns, interrupts).
    pub fn kernel(&self, b: &mut StallBreakdown, cycles: u64) {
        b.stalls[StallCause::Kernel as usize] += cycles * 1000;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TimingConfig {
        TimingConfig {
            base_cpi: 0.5,
            level_latency: vec![4, 14, 40],
            dram_latency: 200,
            remote_latency: 120,
            mlp: 2.0,
            walk_factor: 1.0,
            fault_cycles: 1000,
            fault_cycles_include_clear: false,
            copy_cycles_per_page: 2000,
            shootdown_cycles: 500,
            interrupt_cycles: 300,
            scan_cycles_per_entry: 10,
            migration_cycles: 5000,
        }
    }

    #[test]
    fn cycles_are_the_sum_of_completion_and_stalls() {
        let t = Timing::new(&config(), 3).unwrap();
        let mut b = StallBreakdown::default();
        t.instructions(&mut b, 1000); // 500 cycles
        for s in [
            Served::Level(0),
            Served::Level(1),
            Served::Level(2),
            Served::Dram,
            Served::Remote,
        ] {
            t.reference(&mut b, s);
        }
        // L2: (14-4)/2 = 5, LLC: (40-4)/2 = 18, DRAM: (200-4)/2 = 98, remote (120-4)/2 = 58.
        assert_eq!(b.stall(StallCause::L2), 5.0);
        assert_eq!(b.stall(StallCause::Llc), 18.0);
        assert_eq!(b.stall(StallCause::Dram), 98.0);
        assert_eq!(b.stall(StallCause::Remote), 58.0);
        // A walk reading 4 entries: two from L2, one from the LLC, one from DRAM, serially.
        let walk: u64 = [
            Served::Level(1),
            Served::Level(1),
            Served::Level(2),
            Served::Dram,
        ]
        .into_iter()
        .map(|s| t.walk_read(&mut b, s))
        .sum();
        assert_eq!(walk, (14 + 14 + 40 + 200) * 1000);
        assert_eq!(b.stall(StallCause::Tlb), 268.0);
        t.kernel(&mut b, 1500);
        let parts: f64 = [
            StallCause::L2,
            StallCause::Llc,
            StallCause::Dram,
            StallCause::Remote,
            StallCause::Tlb,
            StallCause::Kernel,
            StallCause::Bandwidth,
        ]
        .iter()
        .map(|&c| b.stall(c))
        .sum::<f64>()
            + b.completion as f64 / 1000.0;
        assert_eq!(b.cycles(), parts);
        assert_eq!(
            b.cycles(),
            500.0 + 5.0 + 18.0 + 98.0 + 58.0 + 268.0 + 1500.0
        );
    }

    #[test]
    fn walk_factor_scales_only_the_walk_reads() {
        let mut c = config();
        c.walk_factor = 2.5;
        let t = Timing::new(&c, 3).unwrap();
        let native = Timing::new(&config(), 3).unwrap();
        let (mut b, mut n) = (StallBreakdown::default(), StallBreakdown::default());
        for s in [Served::Level(1), Served::Level(2), Served::Dram] {
            assert_eq!(t.walk_read(&mut b, s) * 2, native.walk_read(&mut n, s) * 5);
            // A data reference is not a walk read: unchanged.
            assert_eq!(t.reference(&mut b, s), native.reference(&mut n, s));
        }
        c.walk_factor = 0.5;
        assert_eq!(Timing::new(&c, 3).unwrap_err().field, "timing.walk_factor");
    }

    #[test]
    fn configs_are_checked() {
        let mut c = config();
        c.level_latency = vec![4, 14];
        assert!(Timing::new(&c, 3)
            .unwrap_err()
            .message
            .contains("2 latencies for 3"));
        let mut c = config();
        c.level_latency = vec![4, 40, 14];
        assert_eq!(
            Timing::new(&c, 3).unwrap_err().field,
            "timing.level_latency"
        );
        let mut c = config();
        c.mlp = 0.5;
        assert_eq!(Timing::new(&c, 3).unwrap_err().field, "timing.mlp");
    }
}
