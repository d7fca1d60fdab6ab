/*!
Configuration types shared by every part of the simulator. Parsing is strict: unknown keys are
errors and every error names its field path (`levels[1].ways`) and what is allowed (STYLE.md:
validating parse, then a build step that checks cross-field rules).
*/
mod simulation;
mod size;
pub mod strict;

pub use simulation::SimulationConfig;
pub use size::Size;

use crate::error::ConfigError;
use serde::de::DeserializeOwned;

/// Deserialize `T` from a JSON string, reporting the failing field's path.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })
}

/// Deserialize `T` from TOML text, reporting the failing field's path.
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().message().to_string();
        ConfigError::new(if path == "." { String::new() } else { path }, msg)
    })
}

/// Where the memory budget comes from, for messages.
pub const MEMORY_BUDGET_SOURCE: &str =
    "the memory available on this machine, or CACHECOLOR_MEMORY_LIMIT bytes if set";

/// The most memory a config may ask the simulator to allocate for its state (bytes): the
/// `CACHECOLOR_MEMORY_LIMIT` environment variable if set (a number of bytes, or with a KiB / MiB
/// / GiB / TiB suffix), else the memory available now (`MemAvailable` in /proc/meminfo), else
/// 16 GiB. Checked before allocating so an oversized config is a config error naming its field,
/// never an allocation abort (docs/reliability.md).
pub fn memory_budget() -> u64 {
    if let Ok(v) = std::env::var("CACHECOLOR_MEMORY_LIMIT") {
        if let Ok(s) = Size::parse(&v) {
            return s.0;
        }
    }
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb.saturating_mul(1024))
        .unwrap_or(16 << 30)
}

/// `n` bytes for people: "17.0 GiB".
pub fn human_bytes(n: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}
