//! `[policy.coloris]`: the thresholds, PERIOD, WIN, UNIT and expansion of section 3, with the
//! defaults this simulator uses where the paper's wall-clock values do not carry over.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an assignment is expanded (section 3.2, "Recoloring Engine").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Expansion {
    /// Recolor one in every n+1 pages of each color at once (n = LLC ways).
    SelectiveMoving,
    /// Clear accessed bits, scan after `win`, lazily recolor the accessed pages.
    #[default]
    Redistribution,
}

fn d_high() -> f64 {
    75.0
}
fn d_low() -> f64 {
    30.0
}
fn d_unit() -> u64 {
    4
}
/// PERIOD when the config gives none, in scheduler ticks. The paper's 5 s is 1,250 ticks of Linux
/// 3.8 at HZ = 250 and 1/720 of its hour-long runs; a simulated run is some hundreds of ticks, so 5
/// s of the paper's machine (10.65 G cycles) was longer than every run and the monitor never ran.
/// 16 ticks keeps the miss rate an average over many ticks (not one tick's noise) and leaves tens
/// of PERIODs in a run of a few hundred ticks, which the handshake of Algorithm 1 needs (two
/// PERIODs per UNIT moved).
pub const DEFAULT_PERIOD_TICKS: u64 = 16;
/// WIN when the config gives none: one tick. The paper's 3 ms is less than one tick of its
/// kernel (4 ms at HZ = 250), and WIN's resolution here is one tick.
pub const DEFAULT_WIN_TICKS: u64 = 1;
fn d_min_refs() -> u64 {
    1000
}

/// `[policy.coloris]`. Thresholds are percentages of LLC miss rate, as in Table 2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColorisConfig {
    /// HighThreshold (%): above it a process needs more colors.
    #[serde(default = "d_high")]
    pub high_threshold: f64,
    /// LowThreshold (%): below it a process can give colors away.
    #[serde(default = "d_low")]
    pub low_threshold: f64,
    /// Per-process QoS pairs `name = [low, high]` (%), overriding the global thresholds.
    #[serde(default)]
    pub qos: BTreeMap<String, [f64; 2]>,
    /// UNIT: colors added or taken at a time.
    #[serde(default = "d_unit")]
    pub unit: u64,
    /// PERIOD: cycles between runs of the monitor (acted on at the first tick after); none:
    /// `DEFAULT_PERIOD_TICKS` scheduler ticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// WIN: cycles between clearing and scanning the accessed bits (Redistribution); none:
    /// `DEFAULT_WIN_TICKS` ticks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub win: Option<u64>,
    /// Cycles from a process's start before its counts are read (the paper enables the
    /// monitor a minute into its runs, section 4.3): compulsory misses of a cold start must not
    /// mark a program hot. None: one PERIOD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    /// LLC accesses in a period below which the miss rate counts as 0.
    #[serde(default = "d_min_refs")]
    pub min_references: u64,
    #[serde(default)]
    pub expansion: Expansion,
    /// Virtual byte ranges `[start, end)` holding shared pages (e.g. a shared library).
    #[serde(default)]
    pub shared_regions: Vec<[u64; 2]>,
    /// Colors `[start, end)` reserved for shared pages; none: shared pages take random colors.
    #[serde(default)]
    pub shared_colors: Vec<[u64; 2]>,
    /// Seed of the random colors of shared pages.
    #[serde(default)]
    pub seed: u64,
}

impl Eq for ColorisConfig {}

impl Default for ColorisConfig {
    fn default() -> Self {
        crate::config::from_toml("").expect("defaults")
    }
}
