/*!
cachecolor's simulator library: caches, hierarchies, traces and synthetic workloads; the
mechanisms of the simulated OS built on them (physical memory and page allocators, page tables
and TLBs, PMU, timing); the machine and kernel that run them (`system`) under an OS policy
(`policy`); and the analyses (`analysis`: miss-rate curves, stack-distance profiles, models).

Pure Rust, deterministic (every random choice comes from a seeded generator), and free of I/O
except reading and writing traces and, for the `detect` machine preset, reading the host's CPU
description from sysfs (`system::detect`). The layout follows `DESIGN.md`: one module per
concern, named for what it models.
*/

pub mod analysis;
pub mod cache;
pub mod config;
pub mod dram;
pub mod error;
pub mod geometry;
pub mod isa;
pub mod limits;
pub mod memory;
pub mod mmu;
pub mod oscache;
pub mod output;
pub mod pmu;
pub mod policy;
pub mod registry;
pub mod rng;
pub mod symbolize;
pub mod system;
pub mod timing;
pub mod trace;
pub mod workload;

pub use error::{ConfigError, Error, TraceError};

/// The version written into results and trace headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
