//! Helpers shared by the integration tests (each test file includes this with `mod common;`).
use cachecolor_sim::cache::{LevelConfig, Serves, WritePolicy};
use cachecolor_sim::config::Size;

/// A write-back, write-allocate LRU level without prefetcher, slices or latency.
pub fn level(name: &str, size: u64, ways: u32, serves: Serves) -> LevelConfig {
    LevelConfig {
        name: name.into(),
        size: Size(size),
        ways,
        policy: Default::default(),
        serves,
        shared: None,
        write_policy: WritePolicy::WriteBack,
        write_allocate: true,
        prefetcher: Default::default(),
        prefetch_degree: 1,
        latency: 0,
        slices: 1,
        slice_hash: Default::default(),
    }
}
