/*!
cachecolor's simulator library: caches, hierarchies, traces and synthetic workloads, and the
mechanisms of the simulated OS built on them (physical memory and page allocators, page tables
and TLBs, PMU, timing).

Pure Rust, deterministic (every random choice comes from a seeded generator), and free of I/O
except reading and writing traces and, for the `detect` machine preset, reading the host's CPU
description from sysfs (`system::detect`). The layout follows `DESIGN.md`: one module per concern, named
for what it models. The machine and scheduler (`system`) and the OS policies (`policy`) that tie
these mechanisms together are still to come (issue 3).
*/

pub mod analysis;
pub mod cache;
pub mod config;
pub mod error;
pub mod geometry;
pub mod memory;
pub mod mmu;
pub mod pmu;
pub mod policy;
pub mod rng;
pub mod system;
pub mod timing;
pub mod trace;
pub mod workload;

pub use error::{ConfigError, Error, TraceError};

/// The version written into results and trace headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
