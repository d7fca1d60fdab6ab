/*!
What a whole-system run may take of the host, decided before it starts:

- **memory**: [`check_system_memory`] adds up what the system's structures will hold (the
  caches' state on every chip, RAM's per-frame tables and the allocator's free lists, each
  process's and thread's structures, the bounded time series) and refuses a config over the
  budget (`crate::config::memory_budget`: `MemAvailable`, or `CACHECOLOR_MEMORY_LIMIT`) with
  one error naming the field, before anything is allocated. Every term is linear in what the
  config asks for (frames, processes, threads); the per-item sizes are upper bounds checked
  against a counting allocator (`crates/sim/tests/memory_budget.rs`).
- **the time series**: [`series_points`] bounds its points so that points x processes stays
  under [`MAX_SERIES_CELLS`] (the series held one row per process per point: 4,096 x 1,600
  processes was 2.4 GB).
- **stopping**: [`StopCheck`] tells a run loop when to offer its front end a stop, once per
  block of work (bursts of at most `system::BURST` records, or ticks), so how soon Ctrl-C stops
  a run depends on neither the tick length nor the load.
*/
use crate::config::{human_bytes, memory_budget, MEMORY_BUDGET_SOURCE};
use crate::error::ConfigError;
use crate::memory::AllocatorKind;
use crate::system::SystemConfig;

/// Most points the whole-system time series keeps (one point per tick would grow without bound with
/// simulated time, 878 MB for 100 records of `icount = 0xFFFFFFFF`). Past it the series is thinned:
/// neighbouring intervals merge pairwise and later ticks accumulate into points of the same
/// (doubled) span, so the series stays evenly spaced and covers the whole run.
pub const MAX_INTERVALS: usize = 4096;

/// Most cells (points x processes) the whole-system time series keeps. 16 processes keep all
/// of `MAX_INTERVALS` points; more processes keep fewer points each.
pub const MAX_SERIES_CELLS: usize = MAX_INTERVALS * 16;

/// Fewest points the series keeps, however many processes there are.
pub const MIN_SERIES_POINTS: usize = 16;

/// Most points the series of a run of `processes` processes keeps: even, so that the pairwise
/// merge past it leaves the newest point alone (`system::report::Series::push`).
pub fn series_points(processes: usize) -> usize {
    (MAX_SERIES_CELLS / processes.max(1)).clamp(MIN_SERIES_POINTS, MAX_INTERVALS) & !1
}

/// Units of work (a burst or a tick) between two stop checks. A burst is at most 64 records,
/// so a check comes at least every 65,536 records.
pub const STOP_CHECK_EVERY: u32 = 1024;

/// A counter of work units that is due every [`STOP_CHECK_EVERY`] of them.
#[derive(Debug, Default)]
pub struct StopCheck {
    count: u32,
}

impl StopCheck {
    /// Count one unit of work; true when a stop check is due.
    #[inline]
    pub fn due(&mut self) -> bool {
        self.count += 1;
        if self.count >= STOP_CHECK_EVERY {
            self.count = 0;
            true
        } else {
            false
        }
    }
}

/// Bytes per RAM frame, by allocator: the ownership table (4) and modelled contents (8) every
/// allocator has, the invariant check's transient seen-table (1) and copy of the free list (8,
/// collected into a vector that grows by doubling: 20 at its last reallocation), and what the
/// allocator keeps per frame. Measured with a counting allocator over 1 GiB of 4 KiB frames
/// (`crates/sim/tests/memory_budget.rs`): buddy 47.6 bytes per frame, color-pool 49.9,
/// sequential 44.6, random / bin-hopping / contiguous 33.0; these bound them with 15-25% to
/// spare.
pub fn frame_bytes(allocator: AllocatorKind) -> u128 {
    let allocator_bytes: u128 = match allocator {
        // next, prev (8 + 8) and order (1) per frame, and its own free-frame listing.
        AllocatorKind::Buddy => 23,
        // The buddy system under it, the pool's per-color stacks and bitmap.
        AllocatorKind::ColorPool => 27,
        // Per-color stacks of every frame (8).
        AllocatorKind::Random | AllocatorKind::Contiguous | AllocatorKind::BinHopping => 8,
        // A B-tree set per color: keys (8) and node overhead.
        AllocatorKind::Sequential => 19,
    };
    12 + 21 + allocator_bytes
}

/// Bytes per process beyond its threads: the process's own structure, its per-color page
/// counts (8 per color), its page-table root and the policy's and kernel's per-process state.
pub const PROCESS_BYTES: u128 = 16 << 10;

/// Bytes of one time-series cell (a process's counts at one point, with its name); a process
/// has `series_points` of them, and half as many again while a merge copies the series.
pub const SERIES_CELL_BYTES: u128 = 128;

/// Bytes per thread fed by a generator: its structure, its buffer of a block of records
/// (65,536 x 24 bytes) and the generator's state. Measured: 1.58 MB per process of one
/// generated thread (300 processes, the series at its bound included).
pub const GENERATED_THREAD_BYTES: u128 = 2 << 20;

/// Bytes per thread fed by a trace: the buffer, and the reader's compressed and decoded block.
/// Measured: 2.97 MB per native-trace thread.
pub const TRACE_THREAD_BYTES: u128 = 4 << 20;

/// The caches' state of one chip's hierarchy (`hc` effective): tags, metadata and replacement
/// state of every line of every instance, as `HierarchyConfig::effective` checks it.
pub fn hierarchy_state(hc: &crate::cache::HierarchyConfig) -> u128 {
    hc.levels
        .iter()
        .map(|l| {
            let instances = if l.shared == Some(true) {
                1
            } else {
                hc.cores as u128
            };
            (l.size.0 / hc.line_size.max(1) as u64) as u128
                * instances
                * crate::cache::hierarchy::STATE_BYTES_PER_LINE
        })
        .sum()
}

/// What a system built from `config` will hold (bytes), given its hierarchy's state per chip
/// (`hierarchy_state`), page size and colors.
pub fn system_bytes(config: &SystemConfig, hierarchy_state: u128, page_size: u64) -> SystemBytes {
    let chips = config.machine.chips.max(1) as u128;
    let frames = (config.memory.ram.0 / page_size.max(1)) as u128;
    let processes = config.processes.len() as u128;
    let threads: u128 = config
        .processes
        .iter()
        .flat_map(|p| &p.threads)
        .map(|t| {
            if t.trace.is_some() {
                TRACE_THREAD_BYTES
            } else {
                GENERATED_THREAD_BYTES
            }
        })
        .sum();
    let points = series_points(config.processes.len()) as u128;
    SystemBytes {
        caches: chips * hierarchy_state,
        ram: frames * frame_bytes(config.memory.allocator),
        processes: processes * PROCESS_BYTES + (points + 1) * processes * SERIES_CELL_BYTES * 3 / 2,
        threads,
    }
}

/// The parts of a system's memory, for the refusal's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemBytes {
    pub caches: u128,
    pub ram: u128,
    pub processes: u128,
    pub threads: u128,
}

impl SystemBytes {
    pub fn total(&self) -> u128 {
        self.caches + self.ram + self.processes + self.threads
    }
}

/// Refuse a system whose structures would not fit the memory budget, naming the field that
/// takes the most (`memory.ram`, `processes`, `machine.chips`).
pub fn check_system_memory(
    config: &SystemConfig,
    hierarchy_state: u128,
    page_size: u64,
) -> Result<(), ConfigError> {
    let b = system_bytes(config, hierarchy_state, page_size);
    let budget = memory_budget() as u128;
    if b.total() <= budget {
        return Ok(());
    }
    let field = if b.ram >= b.processes + b.threads && b.ram >= b.caches {
        "memory.ram"
    } else if b.caches > b.processes + b.threads {
        "machine.chips"
    } else {
        "processes"
    };
    Err(ConfigError::new(
        field,
        format!(
            "the system needs {} of simulator memory ({} for {} of RAM with the `{}` allocator, {} for {} processes and {} threads, {} for the caches of {} chip(s)), more than the {} allowed ({}); use less RAM or fewer processes",
            human_bytes(b.total()),
            human_bytes(b.ram),
            human_bytes(config.memory.ram.0 as u128),
            config.memory.allocator.name(),
            human_bytes(b.processes + b.threads),
            config.processes.len(),
            config.processes.iter().map(|p| p.threads.len()).sum::<usize>(),
            human_bytes(b.caches),
            config.machine.chips,
            human_bytes(budget),
            MEMORY_BUDGET_SOURCE,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_points_keep_cells_bounded_and_even() {
        for n in [1, 2, 15, 16, 17, 300, 1600, 5000, 1_000_000] {
            let p = series_points(n);
            assert_eq!(p % 2, 0, "{n} processes: {p} points");
            assert!((MIN_SERIES_POINTS..=MAX_INTERVALS).contains(&p));
            assert!(
                p * n <= MAX_SERIES_CELLS || p == MIN_SERIES_POINTS,
                "{n}: {p}"
            );
        }
        // Up to 16 processes the series is as long as it ever was (golden counts unchanged).
        assert_eq!(series_points(16), MAX_INTERVALS);
    }

    #[test]
    fn stop_check_is_due_once_per_block() {
        let mut c = StopCheck::default();
        let due: Vec<u32> = (1..=3 * STOP_CHECK_EVERY).filter(|_| c.due()).collect();
        assert_eq!(due.len(), 3);
    }
}
