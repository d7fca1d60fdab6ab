/*!
cachecolor's simulator library: caches, hierarchies, traces and synthetic workloads.

Pure Rust, deterministic (every random choice comes from a seeded generator), and free of I/O
except reading and writing traces. The layout follows `DESIGN.md`: one module per concern, named
for what it models. Later layers (MMU, page allocators, PMU, scheduler, OS policies) build on the
cache model here.
*/

pub mod cache;
pub mod config;
pub mod error;
pub mod geometry;
pub mod memory;
pub mod mmu;
pub mod rng;
pub mod trace;
pub mod workload;

pub use error::{ConfigError, Error, TraceError};

/// The version written into results and trace headers.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
