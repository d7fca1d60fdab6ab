//! `[policy.rocs]` / `[policy.global-pollute]`: the pollute engine's settings and their checks
//! against the machine.

use super::MachineInfo;
use crate::config::Size;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// What decides a phase change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseMetric {
    Ipc,
    LlcMpki,
}

/// `[policy.rocs]` and `[policy.global-pollute]`: defaults are the papers' values, scaled
/// (1 M simulated cycles stand for the paper's billion).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(rename = "RocsConfig")]
pub struct PolluteConfig {
    /// Size of the pollute buffer, a whole number of LLC colors below the LLC's size
    /// (default: 1/16 of the LLC, ROCS section 6; Azimi 4.2.2).
    #[schemars(with = "Option<u64>")]
    pub buffer_size: Option<Size>,
    /// At most one sample interrupt per this many cycles (ROCS 3.1, 5.1: 5 K).
    pub throttle_cycles: u64,
    /// Cycles one sample interrupt costs (ROCS Figure 6's overheads of 15-65% at one per 5-10 K
    /// cycles put it at about 1-3 K).
    pub sample_cost_cycles: u64,
    /// L1 lines the sample handler touches (ROCS 3.1's handler pollution).
    pub handler_lines: u32,
    /// Cycles a profile lasts (the examples' 4 ticks of 2 M cycles). Like every duration below it
    /// is counted in simulated cycles, as the paper counts (ROCS 5.1, 6.2), never in policy ticks:
    /// a stage ends at the first tick at which it has run this long, so its length does not move
    /// with `[scheduler] tick`.
    pub profile_cycles: u64,
    /// Cycles before the first profile (ROCS 6.2: "after the first 4 billion cycles", at the
    /// configs' scale of 1 M simulated cycles per billion).
    pub warmup_cycles: u64,
    /// A unit is profiled once its LLC miss rate over a `measure_cycles` window exceeds this
    /// (ROCS Table 2: 25%) ...
    pub target_miss_rate: f64,
    /// ... and its LLC misses per kilo-instruction over the same window reach this: what can
    /// pay for sampling. ROCS Table 2's targeted programs have an L2 MPKI of 3.0 (mgrid) to 69;
    /// "all other benchmarks ... displayed far lower" MPKI (section 6). A program that fits
    /// the LLC can still show a high miss rate on few accesses; COLORIS's Cache Utilization
    /// Monitor reads such a miss rate as zero for the same reason (section 3.3, its minimum
    /// references). 0 targets on the miss rate alone.
    pub min_llc_mpki: f64,
    /// Pages mapped per search step (0: a sixteenth of the stack, at least 1).
    pub step_pages: u64,
    /// Pages at the bottom of the stack the search never maps (Algorithm 1's `minPages`).
    pub min_pages: u64,
    /// Cycles left out after each step before measuring (the examples' one tick of 2 M).
    pub settle_cycles: u64,
    /// Cycles each step's IPC is measured over (one tick of 2 M); also the window of the
    /// targeting test.
    pub measure_cycles: u64,
    /// Cycles the baseline (nothing mapped) is measured over, and at least 3 ticks: their
    /// tick-to-tick spread of IPC is the search's noise (one tick's IPC swings +-50% on a phased
    /// program), and three is the fewest ticks whose spread has more than one degree of
    /// freedom. Default three ticks of 2 M.
    pub baseline_cycles: u64,
    /// A step counts as a gain only when its IPC exceeds the baseline's by this many standard
    /// errors of the difference (`noise x sqrt(1/step ticks + 1/baseline ticks)`); the best of
    /// those is kept. Default 2, the usual ~95% bar; with no step above it Algorithm 1 keeps
    /// no page (its minimal set).
    pub significance: f64,
    /// Most the search's page moves (into the buffer and, reserved in advance, back out) may
    /// cost, as a fraction of the unit's cycles so far, while no step has shown a significant
    /// gain. The search buys its next pages the way ski rental is played: only once the unit
    /// has run long enough that they cost at most this share (the moves' cost is the kernel's
    /// own accounting, `Kernel::policy_cycles`). Default 0.01, the do-no-harm bar (1%), the same as
    /// `mrc-partition`'s window budget; fitted to no config. Once a step gains significantly the
    /// gain pays for the rest of the walk and the moves' budget no longer binds. The same share
    /// bounds what the steps lose net against the baseline: past it, a step significantly below the
    /// baseline ends the walk (the best step kept).
    pub max_search_overhead: f64,
    /// Phase-detection window in cycles (ROCS 5.1 computes the IPC every 1 billion cycles; the
    /// examples' window was 10 ticks of 2 M).
    pub phase_cycles: u64,
    pub phase_metric: PhaseMetric,
    /// Relative change of the metric that counts as a new phase.
    pub phase_threshold: f64,
    /// Profile with the prefetcher on (ROCS Figure 8's third bar).
    pub profile_prefetch: bool,
    /// Best-offline runs: map exactly the top N pages of the stack, no search.
    pub offline_pages: Option<u64>,
    /// Cycles of a second profile after the search, with the buffer in place (0: none).
    pub verify_cycles: u64,
    /// Measure the walk's kept pages again around a fresh baseline before keeping them (kept,
    /// nothing mapped, kept; each over `baseline_cycles`), and keep them only when the mean of
    /// the two kept measurements beats the baseline between them by `significance` standard
    /// errors. Algorithm 1 judges every step against one baseline measured before the walk
    /// (ROCS 5.2), which holds on programs whose IPC is "stable after initialization" (ROCS
    /// 6.1); a phase or a co-runner that moves during the walk makes a step beat it for no
    /// cause of the buffer's. Off by default: Algorithm 1's best step is kept as measured. On
    /// the fresh configs, whose runs are 0.1-0.5 billion cycles, the confirmation's moves (the
    /// kept set out and back in) cost more than the drift-made buffers it drops (docs/rocs.md,
    /// "Confirming the kept pages").
    pub confirm: bool,
}

impl Default for PolluteConfig {
    fn default() -> Self {
        PolluteConfig {
            buffer_size: None,
            throttle_cycles: 5000,
            sample_cost_cycles: 1000,
            handler_lines: 16,
            profile_cycles: 8_000_000,
            warmup_cycles: 4_000_000,
            target_miss_rate: 0.25,
            min_llc_mpki: 3.0,
            step_pages: 0,
            min_pages: 0,
            settle_cycles: 2_000_000,
            measure_cycles: 2_000_000,
            baseline_cycles: 6_000_000,
            significance: 2.0,
            max_search_overhead: 0.01,
            phase_cycles: 20_000_000,
            phase_metric: PhaseMetric::Ipc,
            phase_threshold: 0.25,
            profile_prefetch: false,
            offline_pages: None,
            verify_cycles: 0,
            confirm: false,
        }
    }
}

impl PolluteConfig {
    /// What a baseline-length measurement (the baseline, each part of the confirmation) spans:
    /// `baseline_cycles`, and under a significance bar at least 3 windows of `measure_cycles`,
    /// so its spread has two degrees of freedom.
    pub(super) fn baseline_span(&self) -> (u64, usize) {
        (
            self.baseline_cycles,
            if self.significance > 0.0 { 3 } else { 1 },
        )
    }

    /// Check the fields (`at` is `policy.rocs` or `policy.global-pollute`); returns the number of
    /// pollute colors.
    pub fn validate(&self, at: &str, m: &MachineInfo) -> Result<u64, ConfigError> {
        let f = |name: &str| format!("{at}.{name}");
        let color_bytes = (m.llc_size / m.colors.max(1)).max(1);
        let colors = match self.buffer_size {
            None => (m.colors / 16).max(1),
            Some(s) => {
                let b = s.bytes();
                if b >= m.llc_size {
                    return Err(ConfigError::new(
                        f("buffer_size"),
                        format!(
                            "{s} is not smaller than the LLC ({}): the pollute buffer must leave \
                             at least one color ({color_bytes} bytes) to the other pages",
                            Size(m.llc_size)
                        ),
                    ));
                }
                if b == 0 || b % color_bytes != 0 {
                    return Err(ConfigError::new(
                        f("buffer_size"),
                        format!(
                            "{s} is not a whole number of LLC colors: give a positive multiple \
                             of {color_bytes} bytes (one color of {} colors)",
                            m.colors
                        ),
                    ));
                }
                b / color_bytes
            }
        };
        if colors >= m.colors {
            return Err(ConfigError::new(
                f("buffer_size"),
                format!(
                    "the LLC has {} color(s): too few for a pollute buffer beside the other pages",
                    m.colors
                ),
            ));
        }
        let positive = |name: &str, v: u64| {
            if v == 0 {
                Err(ConfigError::new(
                    f(name),
                    "0 is not allowed: give at least 1".to_string(),
                ))
            } else {
                Ok(())
            }
        };
        positive("throttle_cycles", self.throttle_cycles)?;
        positive("profile_cycles", self.profile_cycles)?;
        positive("measure_cycles", self.measure_cycles)?;
        positive("baseline_cycles", self.baseline_cycles)?;
        if !(self.significance.is_finite() && self.significance >= 0.0) {
            return Err(ConfigError::new(
                f("significance"),
                format!(
                    "{} is not allowed: a number of standard errors >= 0 (2 = about 95%)",
                    self.significance
                ),
            ));
        }
        if !(self.max_search_overhead.is_finite()
            && self.max_search_overhead > 0.0
            && self.max_search_overhead <= 1.0)
        {
            return Err(ConfigError::new(
                f("max_search_overhead"),
                format!(
                    "{} is outside (0, 1]: a share of the unit's cycles (0.01 = 1%)",
                    self.max_search_overhead
                ),
            ));
        }
        positive("phase_cycles", self.phase_cycles)?;
        if !(self.min_llc_mpki.is_finite() && self.min_llc_mpki >= 0.0) {
            return Err(ConfigError::new(
                f("min_llc_mpki"),
                format!(
                    "{} is not allowed: LLC misses per 1000 instructions, >= 0 (0: the miss rate \
                     alone targets)",
                    self.min_llc_mpki
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.target_miss_rate) {
            return Err(ConfigError::new(
                f("target_miss_rate"),
                format!(
                    "{} is outside [0, 1]: it is an LLC miss rate (misses / accesses)",
                    self.target_miss_rate
                ),
            ));
        }
        if !(self.phase_threshold.is_finite() && self.phase_threshold > 0.0) {
            return Err(ConfigError::new(
                f("phase_threshold"),
                format!(
                    "{} is not allowed: a relative change > 0 (0.25 = 25%)",
                    self.phase_threshold
                ),
            ));
        }
        let max_lines = (m.page_size / m.line_size.max(1)) as u32;
        if self.handler_lines > max_lines {
            return Err(ConfigError::new(
                f("handler_lines"),
                format!(
                    "{} is more than one page of lines: at most {max_lines}",
                    self.handler_lines
                ),
            ));
        }
        Ok(colors)
    }
}
