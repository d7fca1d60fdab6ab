/*!
Cachetest (thesis chapter 4, `004_b94baa2235a39050.txt`): the real-hardware pointer-chasing
benchmark and the page-color probe.

Modules, named for what they model:
- `engine`: the execution engine (4.2.1): a one-load-per-iteration pointer chase in assembly,
  time-bounded by a timer signal that clears a register flag, or count-bounded; core pinning.
- `buffer`: the buffer allocators (4.2.2): naive, cache-aware contiguous (Algorithm 4.2.2),
  THP, hugetlb (with reservation restored on drop), hugetlb + contiguous; bin reports against
  the binomial model of 3.2 (`cachecolor_sim::analysis::bins`).
- `pagemap`: virtual page -> frame numbers from /proc/self/pagemap.
- `chain`: the distribution generator (4.2.3): uniform, sequential, strided, zipf, harmonic.
- `pmu`: the PMU provider (4.2.4) on perf_event_open, each event probed on its own.
- `stats`: means and 95% confidence intervals (Student t).
- `sweep`: working-set sweeps (4.3.2-4.3.4) and synchronised co-runs (Figure 2.5).
- `probe`: does page color matter here, and which bits index each level.
- sysfs cache discovery (`host_caches`, below), also used by the simulator's presets; the size
  and CPU-list parsers are the simulator's (`cachecolor_sim::system::detect`).
*/

pub mod buffer;
pub mod chain;
pub mod engine;
pub mod pagemap;
pub mod pmu;
pub mod probe;
pub mod stats;
pub mod sweep;

use cachecolor_sim::system::detect::{parse_cpu_list, parse_size};

/// Errors of the benchmark: bad input (the user can fix the request), something this machine
/// or this process cannot do, or an interruption (Ctrl-C through the caller's hook).
#[derive(Debug)]
pub enum Error {
    BadInput(String),
    Unsupported(String),
    Interrupted,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadInput(m) | Error::Unsupported(m) => f.write_str(m),
            Error::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for Error {}

/// One cache level as the host's sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCache {
    pub level: u32,
    /// "Data", "Instruction" or "Unified".
    pub kind: String,
    pub size: u64,
    pub ways: u32,
    pub line_size: u32,
    /// Number of CPUs sharing this cache.
    pub shared_by: u32,
}

fn read_trim(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// CPUs in a sysfs CPU list (`0-3,6`); the simulator's `detect` parses the same files.
fn count_cpus(list: &str) -> Option<u32> {
    parse_cpu_list(list).and_then(|cpus| u32::try_from(cpus.len()).ok())
}

/// The caches of CPU 0 as listed under `/sys/devices/system/cpu/cpu0/cache`, in level order.
/// Entries that do not give size, ways and line size are skipped.
pub fn host_caches() -> Vec<HostCache> {
    host_caches_under(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

/// As `host_caches`, from any directory laid out like sysfs (tests use a fake one).
pub fn host_caches_under(dir: &std::path::Path) -> Vec<HostCache> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut idx: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"))
        })
        .collect();
    idx.sort();
    for p in idx {
        let get = |f: &str| read_trim(&p.join(f));
        let (Some(level), Some(kind), Some(size), Some(ways), Some(line)) = (
            get("level").and_then(|s| s.parse().ok()),
            get("type"),
            get("size").and_then(|s| parse_size(&s)),
            get("ways_of_associativity").and_then(|s| s.parse().ok()),
            get("coherency_line_size").and_then(|s| s.parse().ok()),
        ) else {
            continue;
        };
        let shared_by = get("shared_cpu_list")
            .and_then(|s| count_cpus(&s))
            .unwrap_or(1);
        out.push(HostCache {
            level,
            kind,
            size,
            ways,
            line_size: line,
            shared_by,
        });
    }
    out.sort_by_key(|c| (c.level, c.kind != "Instruction"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_sysfs_like_tree() {
        let d = std::env::temp_dir().join(format!("cc-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for (i, (lvl, ty, size, ways)) in [
            (1, "Data", "48K", "12"),
            (1, "Instruction", "32K", "8"),
            (2, "Unified", "1024K", "16"),
        ]
        .iter()
        .enumerate()
        {
            let p = d.join(format!("index{i}"));
            std::fs::create_dir_all(&p).unwrap();
            for (f, v) in [
                ("level", lvl.to_string()),
                ("type", ty.to_string()),
                ("size", size.to_string()),
                ("ways_of_associativity", ways.to_string()),
                ("coherency_line_size", "64".into()),
                ("shared_cpu_list", "0-1".into()),
            ] {
                std::fs::write(p.join(f), v).unwrap();
            }
        }
        let c = host_caches_under(&d);
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].kind, "Instruction");
        assert_eq!(c[1].size, 48 << 10);
        assert_eq!(c[2].size, 1 << 20);
        assert_eq!(c[2].shared_by, 2);
    }
}
