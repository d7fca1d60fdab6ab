/*!
OS cache-management policies (DESIGN.md "The policy trait"). A policy sees what an OS sees and
decides which page colors each process may use; the kernel (`system`) carries its decisions
out and charges their cost. One file per policy and one line in `build` to register it.

Shipped so far:
- `linux`: no coloring (every color allowed); paired with the `buddy` allocator it is the
  baseline the papers compare against.
- `static`: fixed color sets: the ones a process's config gives (`colors = [[0, 32]]`), or
  COLORIS's static scheme (section 3.2): the colors are split into one section per core, and a
  new process without colors of its own gets the section of the least-loaded core and is pinned
  there.
*/
mod linux;
mod static_sections;

pub use linux::Linux;
pub use static_sections::StaticSections;

use crate::error::ConfigError;
use crate::memory::ColorSet;
use serde::{Deserialize, Serialize};

/// What a policy is told about a new process.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub pid: usize,
    pub name: String,
    /// Colors the config gives it, if any.
    pub colors: Option<ColorSet>,
    /// Cores it is pinned to by the config, if any.
    pub pinned: Option<Vec<usize>>,
}

/// What a policy may decide when a process starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Pin the process's threads to these cores (None: leave as configured).
    pub pin: Option<Vec<usize>>,
}

/// An OS cache-management policy.
pub trait Policy: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// A process was created; the policy may pin it.
    fn process_created(&mut self, p: &ProcessInfo) -> Placement;
    /// A process exited.
    fn process_exited(&mut self, _pid: usize) {}
    /// The colors page `vpn` of process `pid` may be placed in (page-fault path).
    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet;
}

/// `[policy]` in a config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    #[serde(default = "default_name")]
    pub name: String,
}

fn default_name() -> String {
    "linux".into()
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            name: default_name(),
        }
    }
}

/// The policy names a config may give.
pub const NAMES: &str = "linux, static";

/// Build the named policy for a machine of `cores` cores and a cache of `colors` colors.
pub fn build(
    config: &PolicyConfig,
    cores: usize,
    colors: u64,
) -> Result<Box<dyn Policy>, ConfigError> {
    Ok(match config.name.as_str() {
        "linux" => Box::new(Linux::new(colors)),
        "static" => Box::new(StaticSections::new(cores, colors)),
        other => {
            return Err(ConfigError::new(
                "policy.name",
                format!("unknown policy `{other}`; the policies are: {NAMES}"),
            ))
        }
    })
}
