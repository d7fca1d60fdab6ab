//! `[offload]`: the machine and the off-load mechanism as written in a config (static or dynamic
//! threshold, section 5), with their defaults and checks.

use super::super::predictor::PredictorConfig;
use crate::config::Size;
use crate::error::ConfigError;
use crate::geometry::CacheGeometry;
use serde::{Deserialize, Serialize};

fn d_mig() -> u64 {
    5000
}
fn d_user_cores() -> u32 {
    1
}
fn d_l1() -> Size {
    Size(32 << 10)
}
fn d_l1_ways() -> u32 {
    4
}
fn d_l2() -> Size {
    Size(1 << 20)
}
fn d_l2_ways() -> u32 {
    8
}
fn d_l1_lat() -> u32 {
    1
}
fn d_l2_lat() -> u32 {
    5
}
fn d_mem() -> u32 {
    500
}
fn d_five() -> u32 {
    5
}
fn d_candidates() -> Vec<u64> {
    vec![100, 500, 1000, 5000, 10000]
}
fn d_epoch() -> u64 {
    100_000_000
}
fn d_phase() -> f64 {
    0.1
}
fn d_triggers() -> Vec<u64> {
    vec![0, 25, 100, 500, 1000, 5000, 10000]
}

/// Section 4.4's dynamic choice of N.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamicConfig {
    /// Candidate triggers sampled one epoch each after a phase change (paper: 100, 500, ...).
    #[serde(default = "d_candidates")]
    pub candidates: Vec<u64>,
    /// Epoch length in instructions of the thread (paper: 100 M; scale down for short runs).
    #[serde(default = "d_epoch")]
    pub epoch_instructions: u64,
    /// Relative change of IPC or L2 miss rate between steady epochs that signals a phase change.
    #[serde(default = "d_phase")]
    pub phase_threshold: f64,
}

impl Default for DynamicConfig {
    fn default() -> Self {
        DynamicConfig {
            candidates: d_candidates(),
            epoch_instructions: d_epoch(),
            phase_threshold: d_phase(),
        }
    }
}

/// `[offload]` in a config: the paper's machine and mechanism, every number configurable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffloadConfig {
    /// Off-load a privileged run when its predicted length exceeds N; absent = never (baseline).
    #[serde(default)]
    pub trigger: Option<u64>,
    /// Choose N per phase by epoch sampling (section 4.4) instead of a fixed trigger.
    #[serde(default)]
    pub dynamic: Option<DynamicConfig>,
    /// Cycles the user core pays to hand a run to the OS core (paper: 5,000-10,000 on modern
    /// hardware, lower values as an optimistic assumption).
    #[serde(default = "d_mig")]
    pub migration_cycles: u64,
    /// Cycles to come back; default = `migration_cycles`.
    #[serde(default)]
    pub return_cycles: Option<u64>,
    /// User cores sharing the one OS core.
    #[serde(default = "d_user_cores")]
    pub user_cores: u32,
    #[serde(default = "d_l1")]
    pub l1_size: Size,
    #[serde(default = "d_l1_ways")]
    pub l1_ways: u32,
    #[serde(default = "d_l1_lat")]
    pub l1_latency: u32,
    #[serde(default = "d_l2")]
    pub l2_size: Size,
    #[serde(default = "d_l2_ways")]
    pub l2_ways: u32,
    #[serde(default = "d_l2_lat")]
    pub l2_latency: u32,
    #[serde(default = "d_mem")]
    pub memory_latency: u32,
    /// Looking up another core's L2 on a coherence miss.
    #[serde(default = "d_five")]
    pub remote_latency: u32,
    /// Directory look-up and inter-core messaging on a coherence miss or invalidation.
    #[serde(default = "d_five")]
    pub directory_latency: u32,
    #[serde(default = "d_line")]
    pub line_size: u32,
    #[serde(default)]
    pub predictor: PredictorConfig,
    /// Triggers N at which the predictor's binary decision accuracy is reported (Figure 4).
    #[serde(default = "d_triggers")]
    pub report_triggers: Vec<u64>,
}

fn d_line() -> u32 {
    64
}

impl Default for OffloadConfig {
    fn default() -> Self {
        toml::from_str("").expect("defaults")
    }
}

impl OffloadConfig {
    pub fn return_cost(&self) -> u64 {
        self.return_cycles.unwrap_or(self.migration_cycles)
    }

    /// Check every field and cross-field rule; errors name the field under `offload.`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.predictor.validate("offload.predictor")?;
        let f = |n: &str| format!("offload.{n}");
        if self.user_cores == 0 || self.user_cores > 64 {
            return Err(ConfigError::new(
                f("user_cores"),
                format!(
                    "{}: between 1 and 64 user cores share the OS core",
                    self.user_cores
                ),
            ));
        }
        if self.trigger.is_some() && self.dynamic.is_some() {
            return Err(ConfigError::new(
                f("dynamic"),
                "a fixed trigger and dynamic N are exclusive: set one of offload.trigger, [offload.dynamic]",
            ));
        }
        if self.migration_cycles > 1 << 40 || self.return_cost() > 1 << 40 {
            return Err(ConfigError::new(
                f("migration_cycles"),
                "more than 2^40 cycles per migration is not a machine",
            ));
        }
        if let Some(d) = &self.dynamic {
            if d.candidates.is_empty() {
                return Err(ConfigError::new(
                    f("dynamic.candidates"),
                    "no candidate trigger: list at least one N (paper: 100, 500, 1000, 5000, 10000)",
                ));
            }
            if d.epoch_instructions == 0 {
                return Err(ConfigError::new(
                    f("dynamic.epoch_instructions"),
                    "0: an epoch needs at least 1 instruction (paper: 100 M)",
                ));
            }
            if !(d.phase_threshold.is_finite() && d.phase_threshold > 0.0) {
                return Err(ConfigError::new(
                    f("dynamic.phase_threshold"),
                    format!(
                        "{}: a positive relative change (e.g. 0.1)",
                        d.phase_threshold
                    ),
                ));
            }
        }
        if self.l1_latency == 0 || self.l2_latency < self.l1_latency {
            return Err(ConfigError::new(
                f("l2_latency"),
                format!(
                    "l1_latency {} and l2_latency {}: L1 needs at least 1 cycle and L2 at least as many as L1",
                    self.l1_latency, self.l2_latency
                ),
            ));
        }
        if self.memory_latency < self.l2_latency {
            return Err(ConfigError::new(
                f("memory_latency"),
                format!(
                    "{}: memory cannot be faster than the L2 ({})",
                    self.memory_latency, self.l2_latency
                ),
            ));
        }
        for (name, size, ways) in [
            ("l1_size", self.l1_size, self.l1_ways),
            ("l2_size", self.l2_size, self.l2_ways),
        ] {
            CacheGeometry::new(size.bytes(), ways, self.line_size, 4096)
                .map_err(|e| ConfigError::new(f(name), e.to_string()))?;
        }
        Ok(())
    }
}
