/*!
Where pages land in a physically indexed cache, and what that does to miss rates (thesis
sections 2.3.2, 5.2 and 5.3.1).

- `PageTranslator`: a virtual-to-physical page mapping applied to a line stream, so the per-set
  stack distance profiles of `mrc::SetProfiler` see the physical cache sets a real cache would
  (thesis 5.3: "the access is translated to a physical memory request, which subsequently may be
  translated into an access to a cache set"). The mapping is either fixed (a `/proc/PID/pagemap`
  snapshot, or a simulation's page tables: `PlacementSpec::Mapping`) or made at first touch by
  one of the simulator's page allocators, as an OS would on the page fault
  (`PlacementSpec::Allocator`).
- `placement_miss_probability`: eq. 5.2, the miss probability of a uniform random workload
  from the pages each bin (color) holds.
- `uniform_hit_rates`: section 2.3.2's stochastic hit rates of each level for a uniform
  workload of a given working-set size.
*/
use crate::error::ConfigError;
use crate::memory::{AllocRequest, ColorSet, MemoryConfig, Owner, PhysicalMemory};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

fn default_page_size() -> u64 {
    4096
}

/// How a trace's virtual pages map to frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PlacementSpec {
    /// Frames given at each page's first touch by a simulated page allocator (`[memory]`'s
    /// `allocator`, `ram`, `seed`, ...), in order of first touch.
    Allocator {
        #[serde(default = "default_page_size")]
        page_size: u64,
        #[serde(default)]
        memory: MemoryConfig,
    },
    /// A fixed mapping of `[vpn, pfn]` pairs; a page of the trace outside it is an error.
    Mapping {
        #[serde(default = "default_page_size")]
        page_size: u64,
        pages: Vec<[u64; 2]>,
    },
}

impl PlacementSpec {
    pub fn page_size(&self) -> u64 {
        match self {
            PlacementSpec::Allocator { page_size, .. }
            | PlacementSpec::Mapping { page_size, .. } => *page_size,
        }
    }
}

/// What a translation did, for the profile's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlacementSummary {
    /// `allocator:<name>` or `mapping`.
    pub source: String,
    pub page_size: u64,
    /// Distinct pages the trace touched.
    pub pages: u64,
    /// Of those, how many landed in each color (bin) of the profiled cache.
    pub pages_per_color: Vec<u64>,
}

/// Translates line numbers (byte address / line size) from virtual to physical pages.
#[derive(Debug)]
pub struct PageTranslator {
    /// log2(lines per page).
    shift: u32,
    colors: u64,
    memory: Option<PhysicalMemory>,
    all: ColorSet,
    map: HashMap<u64, u64>,
    fixed: bool,
    /// A fixed map's pages the trace has touched (an allocator's map holds only those).
    touched: std::collections::HashSet<u64>,
    last: Option<(u64, u64)>,
    pages_per_color: Vec<u64>,
    source: String,
    page_size: u64,
}

impl PageTranslator {
    /// A translator for lines of `line_size` bytes onto a cache of `colors` colors (bins of one
    /// page). Errors name the field and what is allowed.
    pub fn new(spec: &PlacementSpec, line_size: u64, colors: u64) -> Result<Self, ConfigError> {
        let page_size = spec.page_size();
        if !page_size.is_power_of_two() || page_size < line_size {
            return Err(ConfigError::new(
                "placement.page_size",
                format!(
                    "{page_size}: a page is a power of two of at least the line size ({line_size} B)"
                ),
            ));
        }
        let colors = colors.max(1);
        let shift = (page_size / line_size).trailing_zeros();
        let (memory, map, fixed, source) = match spec {
            PlacementSpec::Allocator { memory, .. } => {
                let m = PhysicalMemory::new(memory, page_size, colors, 1).map_err(|e| {
                    ConfigError::new(
                        format!(
                            "placement.memory.{}",
                            e.field
                                .trim_start_matches("memory.")
                                .trim_start_matches("memory")
                        ),
                        e.message,
                    )
                })?;
                let name = format!("allocator:{}", m.allocator_name());
                (Some(m), HashMap::new(), false, name)
            }
            PlacementSpec::Mapping { pages, .. } => {
                if pages.is_empty() {
                    return Err(ConfigError::new(
                        "placement.pages",
                        "the page map is empty: give [vpn, pfn] pairs",
                    ));
                }
                let mut map = HashMap::with_capacity(pages.len());
                for &[vpn, pfn] in pages {
                    if let Some(old) = map.insert(vpn, pfn) {
                        if old != pfn {
                            return Err(ConfigError::new(
                                "placement.pages",
                                format!(
                                    "virtual page {vpn:#x} is mapped twice ({old:#x} and {pfn:#x})"
                                ),
                            ));
                        }
                    }
                }
                (None, map, true, "mapping".to_string())
            }
        };
        Ok(PageTranslator {
            shift,
            colors,
            memory,
            all: ColorSet::all(colors),
            map,
            fixed,
            touched: Default::default(),
            last: None,
            pages_per_color: vec![0; colors as usize],
            source,
            page_size,
        })
    }

    /// The frame of virtual page `vpn`: looked up, or allocated at its first touch.
    fn frame(&mut self, vpn: u64) -> Result<u64, ConfigError> {
        if let Some(&pfn) = self.map.get(&vpn) {
            if self.fixed && self.touched.insert(vpn) {
                self.pages_per_color[(pfn % self.colors) as usize] += 1;
            }
            return Ok(pfn);
        }
        let memory = match &mut self.memory {
            Some(m) => m,
            None => {
                return Err(ConfigError::new(
                    "placement.pages",
                    format!(
                        "the trace touches virtual page {vpn:#x} (address {:#x}), which the page map \
                         ({} pages of {} B) does not map: the map must cover every page of the trace \
                         and use its page size",
                        vpn * self.page_size,
                        self.map.len(),
                        self.page_size
                    ),
                ))
            }
        };
        let req = AllocRequest {
            allowed: &self.all,
            cpu: 0,
            asid: 1,
            vpn,
        };
        let pfn = memory.alloc(&req, Owner::Space(1)).map_err(|e| {
            ConfigError::new(
                "placement.memory.ram",
                format!("{e}: the trace touches more pages than the simulated RAM holds"),
            )
        })?;
        self.map.insert(vpn, pfn);
        self.pages_per_color[(pfn % self.colors) as usize] += 1;
        Ok(pfn)
    }

    /// Replace every virtual line number in `lines` by its physical line number.
    pub fn translate(&mut self, lines: &mut [u64]) -> Result<(), ConfigError> {
        let mask = (1u64 << self.shift) - 1;
        for line in lines {
            let vpn = *line >> self.shift;
            let pfn = match self.last {
                Some((v, p)) if v == vpn => p,
                _ => {
                    let p = self.frame(vpn)?;
                    self.last = Some((vpn, p));
                    p
                }
            };
            *line = (pfn << self.shift) | (*line & mask);
        }
        Ok(())
    }

    pub fn summary(&self) -> PlacementSummary {
        let pages_per_color = self.pages_per_color.clone();
        PlacementSummary {
            source: self.source.clone(),
            page_size: self.page_size,
            pages: pages_per_color.iter().sum(),
            pages_per_color,
        }
    }
}

/// Eq. 5.2 (thesis section 5.2): for a uniform random workload whose pages sit
/// `pages_per_bin[x]` to a bin of an `ways`-way cache, the miss probability of an access to bin
/// `x` weighted by the bin's share of the pages,
/// `P_miss(x) = E(x) / (E(x) + A) * T(x) / total`, `E(x) = max(0, T(x) - A)`.
/// Returns the per-bin terms; their sum is the predicted miss rate.
pub fn placement_miss_probability(pages_per_bin: &[u64], ways: u64) -> Vec<f64> {
    let total: u64 = pages_per_bin.iter().sum();
    if total == 0 {
        return vec![0.0; pages_per_bin.len()];
    }
    let a = ways as f64;
    pages_per_bin
        .iter()
        .map(|&t| {
            let e = t.saturating_sub(ways) as f64;
            if e == 0.0 {
                0.0
            } else {
                e / (e + a) * (t as f64 / total as f64)
            }
        })
        .collect()
}

/// Section 2.3.2's stochastic model: with every line of a working set of `x` bytes equally
/// likely (no conflict misses), the probability that an access hits in level `k` of caches of
/// `sizes` bytes (L1 first). The thesis gives three levels; its derivation (a level sees what
/// every level before it missed, and keeps `C_k / x` of it) is the general rule
/// `P(L_k hit) = (1 - sum_{j<k} P(L_j hit)) * min(1, C_k / x)`, which reduces to its equations.
/// The last element is the probability of missing every level.
pub fn uniform_hit_rates(x: f64, sizes: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(sizes.len() + 1);
    let mut remaining = 1.0;
    for &c in sizes {
        let hit = if x <= 0.0 {
            remaining
        } else {
            remaining * (c / x).min(1.0)
        };
        out.push(hit);
        remaining -= hit;
    }
    out.push(remaining.max(0.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stack::SetStacks;
    use crate::cache::HierarchyConfig;
    use crate::memory::AllocatorKind;
    use crate::rng::SplitMix64;

    #[test]
    fn uniform_hit_rates_follow_the_thesis_equations() {
        let (c1, c2, c3) = (32.0, 256.0, 8192.0);
        for x in [16.0, 32.0, 100.0, 256.0, 1000.0, 8192.0, 20000.0] {
            let p = uniform_hit_rates(x, &[c1, c2, c3]);
            // The thesis's closed forms, case by case.
            let l1 = if x <= c1 { 1.0 } else { c1 / x };
            let l2 = if x <= c1 {
                0.0
            } else if x <= c2 {
                1.0 - c1 / x
            } else {
                (1.0 - c1 / x) * c2 / x
            };
            let l3 = if x <= c2 {
                0.0
            } else if x <= c3 {
                1.0 - (c1 / x + (1.0 - c1 / x) * c2 / x)
            } else {
                (1.0 - (c1 / x + (1.0 - c1 / x) * c2 / x)) * c3 / x
            };
            for (got, want) in p.iter().zip([l1, l2, l3]) {
                assert!((got - want).abs() < 1e-12, "x {x}: {p:?} vs {l1} {l2} {l3}");
            }
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn eq_5_2_terms() {
        // 4 bins of 2 ways: bins of 1, 2, 3 and 6 pages (12 pages).
        let p = placement_miss_probability(&[1, 2, 3, 6], 2);
        assert_eq!(p[0], 0.0);
        assert_eq!(p[1], 0.0);
        assert!((p[2] - (1.0 / 3.0) * (3.0 / 12.0)).abs() < 1e-12);
        assert!((p[3] - (4.0 / 6.0) * (6.0 / 12.0)).abs() < 1e-12);
        // It equals K / N (bins.rs): sum of pages beyond capacity over pages.
        let k = crate::analysis::bins::realised_conflicts(&[1, 2, 3, 6], 2);
        assert!((p.iter().sum::<f64>() - k as f64 / 12.0).abs() < 1e-12);
    }

    fn random_memory(seed: u64) -> MemoryConfig {
        MemoryConfig {
            ram: crate::config::Size(256 << 20),
            allocator: AllocatorKind::Random,
            seed,
            ..MemoryConfig::default()
        }
    }

    /// Thesis 5.2: "the approach is able to predict the cache miss rate within 5% error". A
    /// uniform workload over as many pages as the cache holds, its pages placed by the random
    /// allocator, run through the simulator's set-associative LRU cache (an independent model:
    /// `cache::Cache`, not the stack profiles), against eq. 5.2 from the same placement.
    #[test]
    fn eq_5_2_predicts_a_simulated_random_placement_within_5_percent() {
        // An 8 MiB 16-way LLC of 64 B lines and 4 KiB pages: 128 colors (a Core i7-like L3).
        let (size, ways, line, page) = (8u64 << 20, 16u64, 64u64, 4096u64);
        let colors = size / (ways * page);
        let text = format!(
            "[hierarchy]\ncores = 1\n[[hierarchy.levels]]\nname = \"LLC\"\nsize = {size}\nways = {ways}\n"
        );
        let cfg: crate::config::SimulationConfig = toml::from_str(&text).unwrap();
        let hc: HierarchyConfig = cfg.hierarchy;
        assert_eq!(hc.levels.len(), 1);
        for (seed, fraction) in [(1u64, 1.0), (2, 0.75), (3, 1.25)] {
            let pages = (size / page) as f64 * fraction;
            let pages = pages as u64;
            let spec = PlacementSpec::Allocator {
                page_size: page,
                memory: random_memory(seed),
            };
            let mut t = PageTranslator::new(&spec, line, colors).unwrap();
            let lines_per_page = page / line;
            let n = pages * lines_per_page;
            let mut g = SplitMix64::new(seed);
            let mut h = crate::cache::Hierarchy::new(&hc).unwrap();
            let refs = 40 * n as usize;
            // Warm up: every line once, in order, then measure the steady state.
            let mut lines: Vec<u64> = (0..n).chain((0..refs).map(|_| g.below(n))).collect();
            t.translate(&mut lines).unwrap();
            let mut misses = 0u64;
            for (i, &l) in lines.iter().enumerate() {
                let served = h.access(&crate::trace::Record::load(l * line));
                if i as u64 >= n && served > 0 {
                    misses += 1;
                }
            }
            let simulated = misses as f64 / refs as f64;
            let s = t.summary();
            assert_eq!(s.pages, pages);
            let predicted: f64 = placement_miss_probability(&s.pages_per_color, ways)
                .iter()
                .sum();
            let err = (predicted - simulated).abs() / simulated;
            eprintln!(
                "{pages} pages: eq 5.2 {predicted:.4}, simulated {simulated:.4}, error {err:.3}"
            );
            assert!(
                err < 0.05,
                "{pages} pages: eq 5.2 {predicted} vs simulated {simulated}"
            );
        }
    }

    #[test]
    fn a_fixed_map_translates_and_names_an_unmapped_page() {
        // Pages 5 and 6 are mapped but never touched: not counted in the summary.
        let spec = PlacementSpec::Mapping {
            page_size: 4096,
            pages: vec![[0, 7], [1, 3], [5, 0], [6, 4]],
        };
        let mut t = PageTranslator::new(&spec, 64, 4).unwrap();
        let mut lines = vec![0, 65, 63, 64];
        t.translate(&mut lines).unwrap();
        assert_eq!(lines, vec![7 * 64, 3 * 64 + 1, 7 * 64 + 63, 3 * 64]);
        let s = t.summary();
        assert_eq!(s.pages_per_color, vec![0, 0, 0, 2]);
        assert_eq!(s.pages, 2);
        let e = t.translate(&mut [2 * 64]).unwrap_err();
        assert_eq!(e.field, "placement.pages");
        assert!(e.message.contains("0x2000"), "{}", e.message);
        for (spec, field) in [
            (
                PlacementSpec::Mapping {
                    page_size: 3000,
                    pages: vec![[0, 1]],
                },
                "placement.page_size",
            ),
            (
                PlacementSpec::Mapping {
                    page_size: 4096,
                    pages: vec![],
                },
                "placement.pages",
            ),
            (
                PlacementSpec::Mapping {
                    page_size: 4096,
                    pages: vec![[0, 1], [0, 2]],
                },
                "placement.pages",
            ),
        ] {
            assert_eq!(PageTranslator::new(&spec, 64, 4).unwrap_err().field, field);
        }
    }

    /// Thesis 5.3.1: contiguous placement (what a naive SDP assumes) against random frames: the
    /// physically aware miss rate is far above the naive one for working sets within the cache,
    /// and the two agree once the working set is several times the cache.
    #[test]
    fn placement_changes_the_per_set_profile_most_within_the_cache() {
        let (sets, ways, page_lines) = (256u64, 8u32, 64u64); // 128 KiB, 8-way, 4 KiB pages: 4 colors
        let colors = sets / page_lines;
        let ratio = |fraction: f64, seed: u64| {
            let pages = ((sets * ways as u64 / page_lines) as f64 * fraction) as u64;
            let n = pages * page_lines;
            let mut g = SplitMix64::new(seed);
            let lines: Vec<u64> = (0..30 * n).map(|_| g.below(n)).collect();
            let mut naive = SetStacks::new(sets, ways).unwrap();
            naive.run(&lines);
            let spec = PlacementSpec::Allocator {
                page_size: 4096,
                memory: random_memory(seed),
            };
            let mut t = PageTranslator::new(&spec, 64, colors).unwrap();
            let mut phys = lines.clone();
            t.translate(&mut phys).unwrap();
            let mut aware = SetStacks::new(sets, ways).unwrap();
            aware.run(&phys);
            let m = |s: &SetStacks| s.pooled().misses(ways as u64) as f64;
            m(&aware) / m(&naive)
        };
        let within: f64 = (1..=5).map(|s| ratio(0.75, s)).fold(0.0, f64::max);
        let beyond: f64 = (1..=5).map(|s| ratio(4.0, s)).fold(0.0, f64::max);
        eprintln!("max ratio at 0.75x the cache {within:.2}, at 4x {beyond:.3}");
        assert!(within > 2.0, "{within}");
        assert!(beyond < 1.1, "{beyond}");
    }
}
