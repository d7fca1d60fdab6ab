//! What `thread-cluster` reports of itself (`policy_report`), as the structs its log is kept
//! in. Its TypedDicts in `python/cachecolor/_core.pyi` are generated from these structs' schemas
//! (`make docs-tables`; `tests/test_policy_reports.py`).

use serde::Serialize;
use std::collections::BTreeMap;

/// The `thread-cluster` report (Azimi et al. case study 3, section 5.2).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ThreadClusterReport {
    /// Counters per shMap (5.2.1: 256).
    pub shmap_entries: usize,
    /// Bytes per monitored region (5.2.1: 128, the coherence unit).
    pub region_bytes: u64,
    /// Each start of sharing detection (phase 1's remote-stall share above the threshold).
    pub detections: Vec<Detection>,
    /// Each end of detection: the clusters found and the migrations made (phases 3 and 4).
    pub clusterings: Vec<Clustering>,
    /// Threads migrated over the run.
    pub migrations: u64,
}

/// Detection started (5.2, phase 1 -> 2).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ThreadClusterDetection")]
pub struct Detection {
    /// Tick time (cycles).
    pub time: u64,
    /// The process whose remote stalls crossed `stall_threshold` (`null`: unnamed).
    pub process: Option<String>,
    /// Its remote-access stall cycles over all its stall cycles in the last interval.
    pub remote_stall_share: f64,
    /// N: one in N remote accesses sampled (5.2.1), as first set.
    pub period: u64,
}

/// Detection ended: clustering (5.2, phase 3) and placement (phase 4).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ThreadClusterClustering")]
pub struct Clustering {
    /// Tick time (cycles).
    pub time: u64,
    /// Thread ids per cluster (threads with an empty shMap are in none).
    pub clusters: Vec<Vec<usize>>,
    /// Thread id (as text) -> shMap entries with a nonzero counter.
    pub shmap_entries_used: BTreeMap<String, usize>,
    /// Filter entries claimed by a region (spatial sampling, 5.2.1).
    pub filter_regions: usize,
    /// Samples not counted because their entry monitors another region.
    pub collisions: u64,
    /// The moves made to co-locate the clusters.
    pub migrations: Vec<Migration>,
}

/// One thread moved to another core (phase 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ThreadClusterMigration")]
pub struct Migration {
    pub thread: usize,
    /// Core before and after.
    pub from: usize,
    pub to: usize,
}
