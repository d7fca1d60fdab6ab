//! A hierarchy as written in a config (`[hierarchy]`): its levels, the inclusion and write
//! policies, and `effective`, the cross-field checks that give the config a run used.

use super::MAX_DEPTH;
use crate::cache::prefetch::{PrefetcherKind, MAX_DEGREE};
use crate::cache::{LineMeta, ReplacementKind};
use crate::config::Size;
use crate::error::ConfigError;
use crate::geometry::{CacheGeometry, SliceHash};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Inclusion {
    #[default]
    NonInclusive,
    Inclusive,
    Exclusive,
}

/// Which references a level serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Serves {
    #[default]
    Unified,
    Data,
    Instruction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    #[default]
    WriteBack,
    WriteThrough,
}

fn default_true() -> bool {
    true
}
fn default_one() -> u32 {
    1
}
fn default_line() -> u32 {
    64
}
fn default_page() -> Size {
    Size(4096)
}

/// One level of the hierarchy as written in a config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelConfig {
    /// Name used in results (`L1D`, `L2`, `LLC`, ...). Unique within the hierarchy.
    pub name: String,
    pub size: Size,
    pub ways: u32,
    #[serde(default)]
    pub policy: ReplacementKind,
    #[serde(default)]
    pub serves: Serves,
    /// One instance shared by all cores (true) or one per core (false). Default: the last
    /// level is shared, the others private.
    #[serde(default)]
    pub shared: Option<bool>,
    #[serde(default)]
    pub write_policy: WritePolicy,
    #[serde(default = "default_true")]
    pub write_allocate: bool,
    #[serde(default)]
    pub prefetcher: PrefetcherKind,
    #[serde(default = "default_one")]
    pub prefetch_degree: u32,
    /// Hit latency in cycles (used by timing models; 0 = unspecified).
    #[serde(default)]
    pub latency: u32,
    #[serde(default = "default_one")]
    pub slices: u32,
    #[serde(default)]
    pub slice_hash: SliceHash,
}

/// A whole hierarchy as written in a config (`[hierarchy]` in TOML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HierarchyConfig {
    #[serde(default = "default_one")]
    pub cores: u32,
    #[serde(default = "default_line")]
    pub line_size: u32,
    #[serde(default = "default_page")]
    pub page_size: Size,
    #[serde(default)]
    pub inclusion: Inclusion,
    /// Seed of the random and bimodal replacement policies.
    #[serde(default)]
    pub seed: u64,
    /// Prefetchers start enabled (they can be toggled during a run).
    #[serde(default = "default_true")]
    pub prefetch_enabled: bool,
    pub levels: Vec<LevelConfig>,
}

/// Simulator state per cache line: its tag (8 bytes), its metadata and about a byte of
/// replacement state (`Cache::new`; LRU keeps one 8-byte recency word per set of 8 ways, SRRIP
/// a byte per line), with a byte of slack: 14 bytes. Measured: a 64 GiB level ran at 13.7 GB RSS
/// (2^30 lines, 12.8 bytes each), so this estimate errs on the safe side by about 10%.
pub(crate) const STATE_BYTES_PER_LINE: u128 = 8 + std::mem::size_of::<LineMeta>() as u128 + 2;

impl HierarchyConfig {
    /// Validate cross-field rules and fill every default, giving the config the run used.
    pub fn effective(&self) -> Result<HierarchyConfig, ConfigError> {
        let mut c = self.clone();
        if c.levels.is_empty() {
            return Err(ConfigError::new(
                "levels",
                "a hierarchy needs at least one level",
            ));
        }
        if c.levels.len() > MAX_DEPTH {
            return Err(ConfigError::new(
                "levels",
                format!("at most {MAX_DEPTH} levels are supported"),
            ));
        }
        if c.cores == 0 || c.cores > 1024 {
            return Err(ConfigError::new(
                "cores",
                format!("{} cores: allowed 1..=1024", c.cores),
            ));
        }
        let n = c.levels.len();
        let mut shared_seen = false;
        for (i, l) in c.levels.iter_mut().enumerate() {
            let f = |k: &str| format!("levels[{i}].{k}");
            if l.name.is_empty() {
                return Err(ConfigError::new(f("name"), "must not be empty"));
            }
            let shared = *l.shared.get_or_insert(i == n - 1);
            if shared {
                shared_seen = true;
            } else if shared_seen {
                return Err(ConfigError::new(
                    f("shared"),
                    format!("level `{}` is private but a level above it is shared; private levels must come first", l.name),
                ));
            }
            if l.prefetch_degree == 0 || l.prefetch_degree > MAX_DEGREE {
                return Err(ConfigError::new(
                    f("prefetch_degree"),
                    format!("allowed 1..={MAX_DEGREE}"),
                ));
            }
            CacheGeometry::sliced(
                l.size.0,
                l.ways,
                c.line_size,
                c.page_size.0,
                l.slices,
                l.slice_hash.clone(),
            )
            .map_err(|e| {
                let field = if e.field == "line_size" || e.field == "page_size" {
                    e.field.clone()
                } else {
                    f(&e.field)
                };
                ConfigError::new(field, format!("level `{}`: {}", l.name, e.message))
            })?;
            // The same limit `Cache::new` applies, here so that checking a config (`load_config`)
            // rejects what running it would (`ways = 512` would pass the check).
            if l.ways > 64 {
                return Err(ConfigError::new(
                    f("ways"),
                    format!(
                        "level `{}`: {} ways: at most 64 are supported",
                        l.name, l.ways
                    ),
                ));
            }
            if l.policy == ReplacementKind::TreePlru && !(l.ways.is_power_of_two() && l.ways <= 64)
            {
                return Err(ConfigError::new(
                    f("policy"),
                    format!("tree-plru needs a power-of-two associativity up to 64, but `{}` has {} ways", l.name, l.ways),
                ));
            }
        }
        for i in 0..n {
            for j in 0..i {
                if c.levels[i].name == c.levels[j].name {
                    return Err(ConfigError::new(
                        format!("levels[{i}].name"),
                        format!("`{}` is used twice", c.levels[i].name),
                    ));
                }
            }
        }
        // What the caches' state will take, checked before anything is allocated (a `size = "1TiB"`
        // level would end in an allocation abort): tags and line metadata per line, replacement
        // state, one instance per core for a private level.
        let mut total: u128 = 0;
        for (i, l) in c.levels.iter().enumerate() {
            let lines = (l.size.0 / c.line_size as u64) as u128;
            let instances = if l.shared == Some(true) {
                1
            } else {
                c.cores as u128
            };
            let bytes = lines * instances * STATE_BYTES_PER_LINE;
            total += bytes;
            let budget = crate::config::memory_budget();
            if total > budget as u128 {
                return Err(ConfigError::new(
                    format!("levels[{i}].size"),
                    format!(
                        "level `{}` ({} x {instances}) needs {} of simulator state ({} for all levels so far), more than the {} allowed ({}); use a smaller cache",
                        l.name,
                        crate::config::human_bytes(l.size.0 as u128),
                        crate::config::human_bytes(bytes),
                        crate::config::human_bytes(total),
                        crate::config::human_bytes(budget as u128),
                        crate::config::MEMORY_BUDGET_SOURCE,
                    ),
                ));
            }
        }
        // A hierarchy with no level serving instruction fetches is allowed: the run counts such
        // references as `unserved`.
        if c.inclusion == Inclusion::Exclusive && n < 2 {
            return Err(ConfigError::new(
                "inclusion",
                "an exclusive (victim) last level needs a level above it",
            ));
        }
        if c.inclusion == Inclusion::Exclusive {
            let last = &c.levels[n - 1];
            if last.serves != Serves::Unified {
                return Err(ConfigError::new(
                    "inclusion",
                    "an exclusive last level must be unified",
                ));
            }
        }
        Ok(c)
    }
}
