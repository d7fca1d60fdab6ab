//! Helpers shared by the integration tests (each test file includes this with `mod common;`).
use cachecolor_sim::cache::{LevelConfig, Serves, WritePolicy};
use cachecolor_sim::config::Size;

/// A write-back, write-allocate LRU level without prefetcher, slices or latency.
#[allow(dead_code)] // not every test file that includes this module builds a hierarchy by hand
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

/// The `[machine]` tables of the tests' small machine (as tests/conftest.py's
/// `ONE_CORE_MACHINE`, with `cores` cores): a 32 KiB 8-way L1D and a 256 KiB 16-way LLC, 4 and
/// 40 cycles, DRAM at 200.
#[allow(dead_code)] // not every test file that includes this module builds a system
pub fn two_level_machine(cores: usize) -> String {
    format!(
        r#"
[machine.hierarchy]
cores = {cores}
[[machine.hierarchy.levels]]
name = "L1D"
size = "32KiB"
ways = 8
[[machine.hierarchy.levels]]
name = "LLC"
size = "256KiB"
ways = 16
[machine.timing]
level_latency = [4, 40]
dram_latency = 200
"#
    )
}
