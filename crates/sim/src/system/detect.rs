/*!
`detect`: this host's machine as a `[machine]` table, from Linux sysfs.

What is read, all under the CPU directory (normally `/sys/devices/system/cpu`, a parameter so
tests can point it at a fake tree):
- `online` (e.g. `0-3,6`): the online CPUs; without it, every `cpuN` directory;
- `cpuN/topology/{physical_package_id,die_id,core_id}`: which CPUs are SMT siblings of one
  physical core, and on which package; missing files count each CPU as its own core, on package 0;
- `cpuN/cache/indexK/{level,type,size,ways_of_associativity,coherency_line_size,number_of_sets,
  shared_cpu_list}` of the first online CPU: one hierarchy level per index.

How it becomes a machine:
- A *chip* is a group of cores sharing one last-level cache: a socket on most machines, a core
  complex (CCX) on AMD parts whose package holds several L3s. `chips` = physical cores / cores
  sharing the LLC, `cores` = cores sharing the LLC.
- A level is `shared` when every core of the chip shares it (the LLC always is); a level shared
  by some but not all of the chip's cores (e.g. an L2 per core pair) is modelled private, with a
  comment saying so. SMT siblings are one core.
- Sizes and associativity are sysfs's; LRU replacement, non-inclusive (sysfs does not say),
  4 KiB pages, four-level page tables.
- TLBs are not in sysfs: the simulator's default TLBs are written out. Timing is not measured:
  the latencies are those of a typical recent x86 core (L1 5, L2 14, L3 50, a fourth level 100,
  DRAM 300 cycles; 400 to another chip), marked as such in the TOML.

Errors name the file that is missing or unparsable and what was expected, so a container without
sysfs, or a garbled tree, gives one clear sentence (never a panic or a guess).
*/
use crate::config::Size;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where Linux describes the CPUs.
pub const SYSFS_CPU: &str = "/sys/devices/system/cpu";

/// Latencies of a typical recent x86 core, by cache level number (1-based), and beyond.
const LEVEL_LATENCY: [u32; 4] = [5, 14, 50, 100];
const DRAM_LATENCY: u32 = 300;
const REMOTE_LATENCY: u32 = 400;

/// Why the host could not be described.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DetectError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, DetectError> {
    Err(DetectError(msg.into()))
}

/// One cache as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCache {
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    pub size: u64,
    pub ways: u32,
    pub line_size: u32,
    pub sets: Option<u64>,
    /// Physical cores (online) that share this cache.
    pub shared_cores: usize,
}

/// The detected host.
#[derive(Debug, Clone, PartialEq)]
pub struct Detected {
    pub online_cpus: usize,
    pub packages: usize,
    pub physical_cores: usize,
    pub chips: u32,
    /// Cores per chip.
    pub cores: u32,
    pub caches: Vec<HostCache>,
    /// The `[machine]` table, commented.
    pub toml: String,
}

fn read(path: &Path) -> Result<String, DetectError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| DetectError(format!("cannot read {}: {e}", path.display())))
}

fn read_opt(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn number<T: std::str::FromStr>(path: &Path, text: &str, what: &str) -> Result<T, DetectError> {
    text.parse()
        .or_else(|_| err(format!("{}: `{text}` is not {what}", path.display())))
}

/// Parse a CPU list such as `0-3,6,8-9` (sysfs `online`, `shared_cpu_list`).
pub fn parse_cpu_list(text: &str) -> Option<BTreeSet<usize>> {
    let mut set = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b || b - a > 1 << 16 {
                    return None;
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(part.parse().ok()?);
            }
        }
    }
    Some(set)
}

/// Parse a sysfs cache size: `48K`, `2048K`, `32M`, or plain bytes (also the benchmark's
/// reading of the host caches, `cachecolor_bench::host_caches`).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1u64 << 10),
        'M' | 'm' => (&t[..t.len() - 1], 1 << 20),
        'G' | 'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

fn online_cpus(dir: &Path) -> Result<BTreeSet<usize>, DetectError> {
    let online = dir.join("online");
    if let Some(text) = read_opt(&online) {
        return match parse_cpu_list(&text) {
            Some(s) if !s.is_empty() => Ok(s),
            _ => err(format!(
                "{}: `{text}` is not a CPU list such as 0-3,6",
                online.display()
            )),
        };
    }
    let entries = std::fs::read_dir(dir).map_err(|e| {
        DetectError(format!(
            "cannot read {}: {e} (is this Linux with sysfs mounted?)",
            dir.display()
        ))
    })?;
    let cpus: BTreeSet<usize> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
        .collect();
    if cpus.is_empty() {
        return err(format!("no cpuN directories under {}", dir.display()));
    }
    Ok(cpus)
}

fn read_cache(
    index: &Path,
    core_of: &BTreeMap<usize, (i64, i64, i64)>,
) -> Result<HostCache, DetectError> {
    let f = |name: &str| index.join(name);
    let level_text = read(&f("level"))?;
    let level: u32 = number(&f("level"), &level_text, "a cache level (1, 2, 3, ...)")?;
    if level == 0 {
        return err(format!(
            "{}: level 0 is not a cache level",
            f("level").display()
        ));
    }
    let kind = read(&f("type"))?;
    if !matches!(kind.as_str(), "Data" | "Instruction" | "Unified") {
        return err(format!(
            "{}: `{kind}` is not a cache type (Data, Instruction or Unified)",
            f("type").display()
        ));
    }
    let size_text = read(&f("size"))?;
    let size = parse_size(&size_text).filter(|&s| s > 0).ok_or_else(|| {
        DetectError(format!(
            "{}: `{size_text}` is not a cache size such as 48K",
            f("size").display()
        ))
    })?;
    let line_text = read(&f("coherency_line_size"))?;
    let line_size: u32 = number(
        &f("coherency_line_size"),
        &line_text,
        "a line size in bytes",
    )?;
    if line_size == 0 {
        return err(format!(
            "{}: a line size of 0 bytes",
            f("coherency_line_size").display()
        ));
    }
    let ways_text = read(&f("ways_of_associativity"))?;
    let mut ways: u32 = number(&f("ways_of_associativity"), &ways_text, "a number of ways")?;
    if ways == 0 {
        // Linux reports 0 ways for a fully associative cache.
        ways = u32::try_from(size / line_size as u64).unwrap_or(u32::MAX);
    }
    let sets = read_opt(&f("number_of_sets")).and_then(|s| s.parse().ok());
    let shared_cores = match read_opt(&f("shared_cpu_list")) {
        Some(text) => {
            let cpus = parse_cpu_list(&text).ok_or_else(|| {
                DetectError(format!(
                    "{}: `{text}` is not a CPU list such as 0-3,6",
                    f("shared_cpu_list").display()
                ))
            })?;
            let cores: BTreeSet<_> = cpus.iter().filter_map(|c| core_of.get(c)).collect();
            cores.len().max(1)
        }
        None => 1,
    };
    Ok(HostCache {
        level,
        kind,
        size,
        ways,
        line_size,
        sets,
        shared_cores,
    })
}

fn kind_order(kind: &str) -> u8 {
    match kind {
        "Instruction" => 0,
        "Data" => 1,
        _ => 2,
    }
}

/// Describe the host whose sysfs CPU directory is `cpu_dir` (normally `SYSFS_CPU`).
pub fn detect(cpu_dir: &Path) -> Result<Detected, DetectError> {
    let cpus = online_cpus(cpu_dir)?;
    let cpu_path = |c: usize| cpu_dir.join(format!("cpu{c}"));
    // Physical core of each online CPU: (package, die, core); SMT siblings share it.
    let mut core_of = BTreeMap::new();
    for &c in &cpus {
        let topo = cpu_path(c).join("topology");
        let id = |name: &str| -> Result<Option<i64>, DetectError> {
            let p = topo.join(name);
            match read_opt(&p) {
                Some(t) => number(&p, &t, "a topology id").map(Some),
                None => Ok(None),
            }
        };
        let package = id("physical_package_id")?.unwrap_or(0).max(0);
        let die = id("die_id")?.unwrap_or(0);
        let core = match id("core_id")? {
            Some(core) => core,
            None => -1 - c as i64, // no topology: each CPU its own core
        };
        core_of.insert(c, (package, die, core));
    }
    let packages = core_of.values().map(|k| k.0).collect::<BTreeSet<_>>().len();
    let physical_cores = core_of.values().collect::<BTreeSet<_>>().len();

    let first = *cpus.first().expect("online_cpus is never empty");
    let cache_dir = cpu_path(first).join("cache");
    let entries = std::fs::read_dir(&cache_dir).map_err(|e| {
        DetectError(format!(
            "cannot read {}: {e} (sysfs lists no caches for this CPU, as in some containers and VMs)",
            cache_dir.display()
        ))
    })?;
    let mut indices: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("index"))
        })
        .map(|e| e.path())
        .collect();
    indices.sort();
    if indices.is_empty() {
        return err(format!(
            "{} lists no caches (no index* directories)",
            cache_dir.display()
        ));
    }
    let mut caches = indices
        .iter()
        .map(|i| read_cache(i, &core_of))
        .collect::<Result<Vec<_>, _>>()?;
    caches.sort_by_key(|c| (c.level, kind_order(&c.kind)));

    let line_size = caches[0].line_size;
    if let Some(c) = caches.iter().find(|c| c.line_size != line_size) {
        return err(format!(
            "the caches have different line sizes ({line_size} B at L{}, {} B at L{}); the simulator has one line size per hierarchy",
            caches[0].level, c.line_size, c.level
        ));
    }
    let llc = caches.last().expect("at least one cache");
    if llc.kind != "Unified" && caches.len() > 1 {
        return err(format!(
            "the last cache level (L{} {}) is not unified; the simulator's last level must serve both instructions and data",
            llc.level, llc.kind
        ));
    }
    let group = llc.shared_cores.clamp(1, physical_cores);
    let (chips, cores) = if physical_cores.is_multiple_of(group) {
        (physical_cores / group, group)
    } else {
        (1, physical_cores)
    };

    let toml = render(
        cpu_dir,
        &cpus,
        packages,
        physical_cores,
        chips,
        cores,
        &caches,
    );
    Ok(Detected {
        online_cpus: cpus.len(),
        packages,
        physical_cores,
        chips: chips as u32,
        cores: cores as u32,
        caches,
        toml,
    })
}

fn level_name(c: &HostCache) -> String {
    let suffix = match c.kind.as_str() {
        "Instruction" => "I",
        "Data" => "D",
        _ => "",
    };
    format!("L{}{suffix}", c.level)
}

fn latency(level: u32) -> u32 {
    LEVEL_LATENCY[(level.max(1) as usize - 1).min(LEVEL_LATENCY.len() - 1)]
}

fn render(
    cpu_dir: &Path,
    cpus: &BTreeSet<usize>,
    packages: usize,
    physical_cores: usize,
    chips: usize,
    cores: usize,
    caches: &[HostCache],
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# This host, detected from {} (`cachecolor machine --detect`): {} online CPU(s), {} package(s), {} physical core(s).",
        cpu_dir.display(),
        cpus.len(),
        packages,
        physical_cores
    );
    let _ = writeln!(
        t,
        "# Cache geometry and topology are sysfs's; TLBs and timing are not in sysfs (see below)."
    );
    let _ = writeln!(t, "[machine]");
    let _ = writeln!(
        t,
        "# A chip is a group of cores sharing one last-level cache (a socket, or an AMD core complex)."
    );
    let _ = writeln!(t, "chips = {chips}");
    let _ = writeln!(t);
    let _ = writeln!(t, "[machine.hierarchy]");
    let _ = writeln!(
        t,
        "cores = {cores}                    # per chip; SMT siblings are one core"
    );
    let _ = writeln!(t, "line_size = {}", caches[0].line_size);
    let _ = writeln!(t, "page_size = \"4KiB\"");
    let _ = writeln!(
        t,
        "inclusion = \"non-inclusive\"  # sysfs does not say; set inclusive or exclusive if the vendor does"
    );
    let n = caches.len();
    let mut names: Vec<String> = Vec::with_capacity(n);
    for (i, c) in caches.iter().enumerate() {
        let mut name = level_name(c);
        if names.contains(&name) {
            name = format!("{name}_{i}");
        }
        names.push(name.clone());
        let _ = writeln!(t);
        let _ = writeln!(t, "[[machine.hierarchy.levels]]");
        let mut note = format!("sysfs: {} ways", c.ways);
        if let Some(sets) = c.sets {
            let _ = write!(note, ", {sets} sets");
            if sets * c.ways as u64 * c.line_size as u64 != c.size {
                let _ = write!(
                    note,
                    " (sets x ways x line = {} B, not the size; the size is used)",
                    sets * c.ways as u64 * c.line_size as u64
                );
            }
        }
        let _ = write!(note, ", shared by {} core(s)", c.shared_cores);
        let _ = writeln!(t, "# {note}");
        let _ = writeln!(t, "name = \"{name}\"");
        let _ = writeln!(t, "size = \"{}\"", Size(c.size));
        let _ = writeln!(t, "ways = {}", c.ways);
        let serves = match c.kind.as_str() {
            "Instruction" => "instruction",
            "Data" => "data",
            _ => "unified",
        };
        let _ = writeln!(t, "serves = \"{serves}\"");
        let last = i == n - 1;
        let shared = last || (cores > 1 && c.shared_cores >= cores);
        if !last && c.shared_cores > 1 && c.shared_cores < cores {
            let _ = writeln!(
                t,
                "# shared by {} of the chip's {cores} cores in hardware; modelled private",
                c.shared_cores
            );
        }
        let _ = writeln!(t, "shared = {shared}");
    }
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "# Not in sysfs: the simulator's default TLBs (64-entry 4-way L1s, 1536-entry 12-way L2)."
    );
    let _ = writeln!(t, "[machine.tlb]");
    let _ = writeln!(t, "l1d = {{ entries = 64, ways = 4 }}");
    let _ = writeln!(t, "l1i = {{ entries = 64, ways = 4 }}");
    let _ = writeln!(t, "l2 = {{ entries = 1536, ways = 12 }}");
    let _ = writeln!(t);
    let _ = writeln!(t, "[machine.mmu]");
    let _ = writeln!(
        t,
        "levels = 4                   # x86-64 four-level page tables"
    );
    let _ = writeln!(t);
    let _ = writeln!(t, "[machine.timing]");
    let _ = writeln!(
        t,
        "# Not measured: latencies of a typical recent x86 core (L1 5, L2 14, L3 50, L4 100, DRAM 300"
    );
    let _ = writeln!(
        t,
        "# cycles), in the order of the levels above ({}); replace them with your machine's figures.",
        names.join(", ")
    );
    let lat: Vec<String> = caches
        .iter()
        .map(|c| latency(c.level).to_string())
        .collect();
    let _ = writeln!(t, "level_latency = [{}]", lat.join(", "));
    let _ = writeln!(t, "dram_latency = {DRAM_LATENCY}");
    if chips > 1 {
        let _ = writeln!(
            t,
            "remote_latency = {REMOTE_LATENCY}         # typical cross-socket transfer (core complexes of one package are closer)"
        );
    }
    let _ = writeln!(t, "base_cpi = 1.0");
    let _ = writeln!(t, "mlp = 1.0");
    t
}

/// A fake sysfs CPU directory for tests (here and in `presets`).
#[cfg(test)]
pub(crate) mod fake {
    use std::path::PathBuf;

    /// A fake sysfs CPU directory in the temp dir, removed on drop.
    pub(crate) struct FakeSysfs(pub PathBuf);

    impl FakeSysfs {
        pub(crate) fn new(tag: &str) -> Self {
            let d = std::env::temp_dir().join(format!(
                "cachecolor-sysfs-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            FakeSysfs(d)
        }
        pub(crate) fn write(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{text}\n")).unwrap();
        }
        pub(crate) fn cpu(&self, cpu: usize, package: u32, core: u32) {
            self.write(
                &format!("cpu{cpu}/topology/physical_package_id"),
                &package.to_string(),
            );
            self.write(&format!("cpu{cpu}/topology/core_id"), &core.to_string());
        }
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn cache(
            &self,
            cpu: usize,
            index: usize,
            level: u32,
            kind: &str,
            size: &str,
            ways: u32,
            sets: u64,
            shared: &str,
        ) {
            let d = format!("cpu{cpu}/cache/index{index}");
            self.write(&format!("{d}/level"), &level.to_string());
            self.write(&format!("{d}/type"), kind);
            self.write(&format!("{d}/size"), size);
            self.write(&format!("{d}/ways_of_associativity"), &ways.to_string());
            self.write(&format!("{d}/coherency_line_size"), "64");
            self.write(&format!("{d}/number_of_sets"), &sets.to_string());
            self.write(&format!("{d}/shared_cpu_list"), shared);
        }
    }

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeSysfs;
    use super::*;
    use crate::system::MachineConfig;
    use crate::timing::Timing;

    fn machine(d: &Detected) -> MachineConfig {
        let doc = crate::system::presets::toml_value(&d.toml).unwrap();
        serde_json::from_value(doc["machine"].clone()).expect("a valid [machine] table")
    }

    /// Two packages of two cores with 2 SMT threads each (8 CPUs): L1D/L1I per core (shared by
    /// the two SMT siblings), L2 per core, L3 per package.
    fn two_socket() -> FakeSysfs {
        let s = FakeSysfs::new("two-socket");
        s.write("online", "0-7");
        // CPU n: package n / 4, core (n / 2) % 2; siblings are (0,1), (2,3), ...
        for cpu in 0..8 {
            s.cpu(cpu, (cpu / 4) as u32, ((cpu / 2) % 2) as u32);
        }
        s.cache(0, 0, 1, "Data", "48K", 12, 64, "0-1");
        s.cache(0, 1, 1, "Instruction", "32K", 8, 64, "0-1");
        s.cache(0, 2, 2, "Unified", "2048K", 16, 2048, "0-1");
        s.cache(0, 3, 3, "Unified", "30M", 12, 40960, "0-3");
        s
    }

    #[test]
    fn a_two_socket_smt_host_becomes_two_chips_of_two_cores() {
        let s = two_socket();
        let d = detect(&s.0).unwrap();
        assert_eq!((d.online_cpus, d.packages, d.physical_cores), (8, 2, 4));
        assert_eq!((d.chips, d.cores), (2, 2), "an L3 per package of two cores");
        let m = machine(&d);
        assert_eq!(m.chips, 2);
        let h = m.hierarchy.effective().unwrap();
        let names: Vec<&str> = h.levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["L1I", "L1D", "L2", "L3"],
            "instruction before data, by level"
        );
        assert_eq!(h.levels[1].size.0, 48 << 10);
        assert_eq!(h.levels[1].ways, 12);
        assert_eq!(h.levels[3].size.0, 30 << 20, "a non-power-of-two LLC");
        assert_eq!(
            h.levels
                .iter()
                .map(|l| l.shared.unwrap())
                .collect::<Vec<_>>(),
            [false, false, false, true],
            "SMT siblings do not make a level shared"
        );
        crate::cache::Hierarchy::new(&m.hierarchy).unwrap();
        let t = Timing::new(&m.timing, h.levels.len()).unwrap();
        assert_eq!(t.config.level_latency, [5, 5, 14, 50]);
        assert_eq!(t.config.remote_latency, REMOTE_LATENCY);
        assert!(d.toml.contains("not in sysfs") || d.toml.contains("Not in sysfs"));
    }

    #[test]
    fn a_single_core_vm_without_topology_or_online_file() {
        let s = FakeSysfs::new("vm");
        std::fs::create_dir_all(s.0.join("cpu0")).unwrap();
        s.cache(0, 0, 1, "Data", "32K", 8, 64, "0");
        s.cache(0, 1, 2, "Unified", "1024K", 16, 1024, "0");
        let d = detect(&s.0).unwrap();
        assert_eq!((d.chips, d.cores, d.online_cpus), (1, 1, 1));
        let m = machine(&d);
        assert!(
            !d.toml.contains("remote_latency"),
            "one chip has no remote caches"
        );
        assert_eq!(m.timing.level_latency, [5, 14]);
        crate::cache::Hierarchy::new(&m.hierarchy).unwrap();
    }

    #[test]
    fn a_level_shared_by_part_of_the_chip_is_modelled_private() {
        let s = FakeSysfs::new("pairs");
        s.write("online", "0-3");
        for cpu in 0..4 {
            s.cpu(cpu, 0, cpu as u32);
        }
        s.cache(0, 0, 1, "Data", "32K", 8, 64, "0");
        s.cache(0, 1, 2, "Unified", "2M", 16, 2048, "0-1");
        s.cache(0, 2, 3, "Unified", "8M", 16, 8192, "0-3");
        let d = detect(&s.0).unwrap();
        assert_eq!((d.chips, d.cores), (1, 4));
        let h = machine(&d).hierarchy.effective().unwrap();
        assert_eq!(h.levels[1].shared, Some(false));
        assert!(d
            .toml
            .contains("shared by 2 of the chip's 4 cores in hardware"));
    }

    #[test]
    fn missing_sysfs_is_a_clear_error() {
        let e = detect(Path::new("/nonexistent/cachecolor/sys/cpu")).unwrap_err();
        assert!(
            e.0.contains("cannot read /nonexistent/cachecolor/sys/cpu"),
            "{e}"
        );
        assert!(e.0.contains("sysfs"), "{e}");
    }

    #[test]
    fn a_cpu_without_caches_is_a_clear_error() {
        let s = FakeSysfs::new("nocache");
        s.write("online", "0");
        s.cpu(0, 0, 0);
        let e = detect(&s.0).unwrap_err();
        assert!(e.0.contains("cpu0/cache"), "{e}");
    }

    #[test]
    fn garbled_files_are_named_with_what_was_expected() {
        let cases: [(&str, &str, &str); 5] = [
            (
                "cpu0/cache/index2/size",
                "lots",
                "is not a cache size such as 48K",
            ),
            (
                "cpu0/cache/index0/ways_of_associativity",
                "-3",
                "is not a number of ways",
            ),
            ("cpu0/cache/index1/type", "Victim", "is not a cache type"),
            ("online", "0-x", "is not a CPU list"),
            (
                "cpu0/cache/index3/shared_cpu_list",
                "all",
                "is not a CPU list",
            ),
        ];
        for (file, text, expected) in cases {
            let s = two_socket();
            s.write(file, text);
            let e = detect(&s.0).unwrap_err();
            assert!(e.0.contains(file), "{file}: {e}");
            assert!(e.0.contains(expected), "{file}: {e}");
        }
    }

    #[test]
    fn mixed_line_sizes_are_refused() {
        let s = two_socket();
        s.write("cpu0/cache/index3/coherency_line_size", "128");
        let e = detect(&s.0).unwrap_err();
        assert!(e.0.contains("different line sizes"), "{e}");
    }

    #[test]
    fn fully_associative_caches_report_zero_ways() {
        let s = FakeSysfs::new("fa");
        s.write("online", "0");
        s.cpu(0, 0, 0);
        s.cache(0, 0, 1, "Data", "4K", 0, 1, "0");
        let d = detect(&s.0).unwrap();
        assert_eq!(d.caches[0].ways, 64, "4 KiB of 64 B lines");
    }

    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            [0, 1, 2, 3, 6, 8, 9]
        );
        assert_eq!(parse_cpu_list("5").unwrap().len(), 1);
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("a").is_none());
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("K"), None);
    }
}
