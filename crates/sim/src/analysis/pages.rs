/*!
Page-level cache profiles (ROCS section 3): per virtual page, the accesses that reached a chosen
level and the misses there, two ways:

- **ground truth**: every data reference of the trace runs through the cache hierarchy and is
  counted at its page by where it was served (a reference reaches level `L` if it missed every
  data level before `L`, and misses there if it was served beyond `L`);
- **the PMU's estimate** (ROCS 3.1): the sampler sees only loads and stores that miss the L1 data
  cache, one in `sample_period`, each with its data address and data source (the level that
  served it). A page's estimated miss rate at `L` is its samples served beyond `L` over its
  samples served at or beyond `L`; its estimated accesses are its samples at or beyond `L`
  times the period.

The result has ROCS Figure 2's per-page miss-rate histogram, Figure 3's address-space view (the
pages in address order with accesses and miss rate) and the *regions* section 3.2.2 observes:
runs of neighbouring pages with similar miss rates ("applications contain distinct memory
regions, each with its own uniform cache behavior").
*/
use crate::cache::{Hierarchy, Serves};
use crate::error::ConfigError;
use crate::pmu::{Event, Sampler, SamplingConfig};
use crate::trace::{Kind, Record};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

fn default_page_size() -> u64 {
    4096
}
fn default_tolerance() -> f64 {
    0.15
}
fn default_gap() -> u64 {
    1
}
fn default_min_accesses() -> u64 {
    1
}

/// What a page profile measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageProfileOptions {
    /// The level profiled, by name (e.g. `"LLC"`, `"L2"`).
    pub level: String,
    #[serde(default = "default_page_size")]
    pub page_size: u64,
    /// Sample one L1D miss in this many (ROCS 3.1); none: ground truth only.
    #[serde(default)]
    pub sample_period: Option<u64>,
    /// Regions: a page joins the current region if its miss rate is within this of the
    /// region's (access-weighted) miss rate so far...
    #[serde(default = "default_tolerance")]
    pub region_tolerance: f64,
    /// ...and it is at most this many pages after the region's last page.
    #[serde(default = "default_gap")]
    pub region_gap: u64,
    /// Pages with fewer accesses at the level are left out of regions (too few to judge).
    #[serde(default = "default_min_accesses")]
    pub min_accesses: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct PageCounts {
    /// Data references to the page (every level).
    references: u64,
    accesses: u64,
    misses: u64,
    samples: u64,
    sampled_accesses: u64,
    sampled_misses: u64,
}

/// One page of the profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PageRow {
    pub vpn: u64,
    pub references: u64,
    pub accesses: u64,
    pub misses: u64,
    /// `misses / accesses` (0 without accesses).
    pub miss_rate: f64,
    pub samples: u64,
    /// Samples served at or beyond the level, and beyond it.
    pub sampled_accesses: u64,
    pub sampled_misses: u64,
    /// `sampled_misses / sampled_accesses` (None without such samples).
    pub sampled_miss_rate: Option<f64>,
}

/// A run of neighbouring pages with similar miss rates (ROCS 3.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Region {
    pub first_vpn: u64,
    pub last_vpn: u64,
    pub pages: u64,
    pub accesses: u64,
    pub misses: u64,
    pub miss_rate: f64,
    /// This region's share of all accesses at the level.
    pub access_share: f64,
}

/// A finished page profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PageProfile {
    pub level: String,
    pub page_size: u64,
    pub sample_period: Option<u64>,
    pub references: u64,
    pub accesses: u64,
    pub misses: u64,
    pub samples: u64,
    /// In address order.
    pub pages: Vec<PageRow>,
    pub regions: Vec<Region>,
}

/// Runs records through a hierarchy and attributes them to pages.
#[derive(Debug)]
pub struct PageProfiler {
    options: PageProfileOptions,
    level: usize,
    /// The first data level (the L1D the sampler watches).
    l1d: usize,
    page_shift: u32,
    line_shift: u32,
    /// Per thread: the PMU's data-address sampler on L1D load misses (a per-thread virtualised
    /// counter), as a whole-system run's.
    samplers: Vec<Sampler>,
    lines: Vec<Record>,
    pages: HashMap<u64, PageCounts>,
    served: Vec<u8>,
    references: u64,
}

impl PageProfiler {
    /// A profiler for `hierarchy`'s geometry (the hierarchy is passed to `feed`).
    pub fn new(options: PageProfileOptions, hierarchy: &Hierarchy) -> Result<Self, ConfigError> {
        let hc = hierarchy.config();
        let data: Vec<usize> = (0..hc.levels.len())
            .filter(|&i| hc.levels[i].serves != Serves::Instruction)
            .collect();
        let names: Vec<&str> = data.iter().map(|&i| hc.levels[i].name.as_str()).collect();
        let level = data
            .iter()
            .copied()
            .find(|&i| hc.levels[i].name.eq_ignore_ascii_case(&options.level))
            .ok_or_else(|| {
                ConfigError::new(
                    "level",
                    format!(
                        "{:?} is not a data level of this hierarchy; the levels are: {}",
                        options.level,
                        names.join(", ")
                    ),
                )
            })?;
        let l1d = data[0];
        if let Some(p) = options.sample_period {
            if p == 0 {
                return Err(ConfigError::new(
                    "sample_period",
                    "0: sample one L1D miss in N, N >= 1",
                ));
            }
            if level == l1d {
                return Err(ConfigError::new(
                    "sample_period",
                    format!(
                        "the sampler sees L1D misses only (ROCS 3.1), so it cannot estimate {}'s \
                         miss rate: {}",
                        hc.levels[l1d].name,
                        if names.len() > 1 {
                            format!("profile a level beyond it ({})", names[1..].join(", "))
                        } else {
                            "this hierarchy has no level beyond it to profile".to_string()
                        }
                    ),
                ));
            }
        }
        let ps = options.page_size;
        if !ps.is_power_of_two() || ps < hc.line_size as u64 {
            return Err(ConfigError::new(
                "page_size",
                format!(
                    "{ps}: a power of two of at least the line size ({} B)",
                    hc.line_size
                ),
            ));
        }
        if options.region_gap == 0 {
            return Err(ConfigError::new(
                "region_gap",
                "0: neighbouring pages are 1 apart, so a region needs a gap of at least 1 page",
            ));
        }
        if !(0.0..=1.0).contains(&options.region_tolerance) {
            return Err(ConfigError::new(
                "region_tolerance",
                format!(
                    "{}: allowed 0..=1 (a miss-rate difference)",
                    options.region_tolerance
                ),
            ));
        }
        Ok(PageProfiler {
            samplers: Vec::new(),
            lines: Vec::new(),
            line_shift: hc.line_size.trailing_zeros(),
            level,
            l1d,
            page_shift: ps.trailing_zeros(),
            options,
            pages: HashMap::new(),
            served: Vec::new(),
            references: 0,
        })
    }

    /// Simulate `block` on `h` and attribute its data references to their pages. A record
    /// spanning several lines is split into one reference per line first (the hierarchy
    /// counts each line, and each line may be served elsewhere and sit in another page).
    /// Instruction fetches run through the hierarchy too (they share its lower levels) but are
    /// not counted.
    pub fn feed(&mut self, h: &mut Hierarchy, block: &[Record]) {
        let shift = self.line_shift;
        self.lines.clear();
        for r in block {
            let first = r.addr >> shift;
            let last = r.addr.saturating_add(r.size.max(1) as u64 - 1) >> shift;
            if first == last {
                self.lines.push(*r);
            } else {
                self.lines.extend((first..=last).map(|l| Record {
                    addr: l << shift,
                    size: 1,
                    ..*r
                }));
            }
        }
        self.served.clear();
        h.run_block_served(&self.lines, &mut self.served);
        debug_assert_eq!(self.served.len(), self.lines.len());
        for (r, &s) in self.lines.iter().zip(&self.served) {
            if r.kind == Kind::IFetch {
                continue;
            }
            // A data reference is served at a data level or in memory, never at an L1I.
            let s = s as usize;
            let page = self.pages.entry(r.addr >> self.page_shift).or_default();
            self.references += 1;
            page.references += 1;
            if s >= self.level {
                page.accesses += 1;
                if s > self.level {
                    page.misses += 1;
                }
            }
            // The sampler (ROCS 3.1: "we specifically target loads that miss the L1 data
            // cache") counts the L1D load misses of each thread (a per-thread virtualised
            // counter) and interrupts on every period-th.
            let Some(period) = self.options.sample_period else {
                continue;
            };
            if r.kind != Kind::Load || s <= self.l1d {
                continue;
            }
            let t = r.thread as usize;
            while t >= self.samplers.len() {
                let config = SamplingConfig {
                    event: Event::L1dMisses,
                    period,
                    cost_cycles: 0,
                    pollute_l1_lines: 0,
                };
                // The occurrences are the L1D load misses filtered above (ROCS 3.1 targets
                // loads); `period` was checked (>= 1) in `new`.
                self.samplers
                    .push(Sampler::new(config).expect("sample_period checked"));
            }
            if self.samplers[t].occurrence() {
                page.samples += 1;
                if s >= self.level {
                    page.sampled_accesses += 1;
                    if s > self.level {
                        page.sampled_misses += 1;
                    }
                }
            }
        }
    }

    pub fn finish(&self, h: &Hierarchy) -> Result<PageProfile, ConfigError> {
        if self.references == 0 {
            return Err(ConfigError::new(
                "trace",
                "the trace has no data references: a page profile needs loads or stores",
            ));
        }
        let mut vpns: Vec<u64> = self.pages.keys().copied().collect();
        vpns.sort_unstable();
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let pages: Vec<PageRow> = vpns
            .iter()
            .map(|v| {
                let c = self.pages[v];
                PageRow {
                    vpn: *v,
                    references: c.references,
                    accesses: c.accesses,
                    misses: c.misses,
                    miss_rate: ratio(c.misses, c.accesses),
                    samples: c.samples,
                    sampled_accesses: c.sampled_accesses,
                    sampled_misses: c.sampled_misses,
                    sampled_miss_rate: (c.sampled_accesses > 0)
                        .then(|| ratio(c.sampled_misses, c.sampled_accesses)),
                }
            })
            .collect();
        let accesses = pages.iter().map(|p| p.accesses).sum();
        let misses = pages.iter().map(|p| p.misses).sum();
        let regions = regions(&pages, &self.options, accesses);
        Ok(PageProfile {
            level: h.config().levels[self.level].name.clone(),
            page_size: self.options.page_size,
            sample_period: self.options.sample_period,
            references: self.references,
            accesses,
            misses,
            samples: pages.iter().map(|p| p.samples).sum(),
            pages,
            regions,
        })
    }
}

/// Group pages (address order) into regions: a page joins the current region when it is at
/// most `region_gap` pages after the region's last page and its miss rate is within
/// `region_tolerance` of the region's access-weighted miss rate; otherwise it starts one.
pub fn regions(pages: &[PageRow], o: &PageProfileOptions, total_accesses: u64) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    for p in pages.iter().filter(|p| p.accesses >= o.min_accesses.max(1)) {
        if let Some(r) = out.last_mut() {
            if p.vpn - r.last_vpn <= o.region_gap
                && (p.miss_rate - r.miss_rate).abs() <= o.region_tolerance
            {
                r.last_vpn = p.vpn;
                r.pages += 1;
                r.accesses += p.accesses;
                r.misses += p.misses;
                r.miss_rate = r.misses as f64 / r.accesses as f64;
                continue;
            }
        }
        out.push(Region {
            first_vpn: p.vpn,
            last_vpn: p.vpn,
            pages: 1,
            accesses: p.accesses,
            misses: p.misses,
            miss_rate: p.miss_rate,
            access_share: 0.0,
        });
    }
    for r in &mut out {
        r.access_share = r.accesses as f64 / total_accesses.max(1) as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;
    use crate::trace::Record;

    fn hierarchy() -> Hierarchy {
        let text = "[hierarchy]\ncores = 1\n\
            [[hierarchy.levels]]\nname = \"L1I\"\nsize = \"32KiB\"\nways = 8\nserves = \"instruction\"\n\
            [[hierarchy.levels]]\nname = \"L1D\"\nsize = \"32KiB\"\nways = 8\nserves = \"data\"\n\
            [[hierarchy.levels]]\nname = \"L2\"\nsize = \"256KiB\"\nways = 8\n";
        let cfg: crate::config::SimulationConfig = toml::from_str(text).unwrap();
        Hierarchy::new(&cfg.hierarchy).unwrap()
    }

    /// ROCS 3.2.2's art: streaming arrays beside a reused array. The stream's pages miss in
    /// the L2 nearly always, the reused array's rarely; both show up as regions; the sampled
    /// estimate agrees with the ground truth page by page; the page counts add up to the
    /// hierarchy's own level counters.
    fn art_like(period: Option<u64>) -> (PageProfile, Hierarchy) {
        let mut h = hierarchy();
        let options = PageProfileOptions {
            level: "L2".into(),
            page_size: 4096,
            sample_period: period,
            region_tolerance: 0.15,
            region_gap: 1,
            min_accesses: 1,
        };
        let mut p = PageProfiler::new(options, &h).unwrap();
        let mut g = SplitMix64::new(5);
        let reused = 0x100_0000u64; // 64 KiB reused array: fits the L2 beside the stream, not the L1
        let stream = 0x800_0000u64; // 4 MiB streamed
        let mut block = Vec::new();
        let mut s = 0u64;
        for i in 0..1_500_000u64 {
            let r = if i % 2 == 0 {
                Record::load(reused + g.below(64 << 10 >> 6) * 64)
            } else {
                s = (s + 64) % (4 << 20);
                Record::load(stream + s)
            };
            block.push(r);
            if i % 3 == 0 {
                block.push(Record::new(Kind::IFetch, 0x40_0000 + (i % 64) * 4, 4));
            }
            if block.len() >= 4096 {
                p.feed(&mut h, &block);
                block.clear();
            }
        }
        p.feed(&mut h, &block);
        (p.finish(&h).unwrap(), h)
    }

    #[test]
    fn art_like_pages_regions_and_accounting() {
        let (prof, h) = art_like(Some(50));
        // Accounting: the pages' accesses and misses at the L2 are the L2's own data counters.
        let l2: u64 = h
            .counters(2)
            .iter()
            .map(|c| c.by_kind[Kind::Load as usize].accesses)
            .sum();
        let l2_miss: u64 = h
            .counters(2)
            .iter()
            .map(|c| c.by_kind[Kind::Load as usize].misses)
            .sum();
        assert_eq!(prof.accesses, l2);
        assert_eq!(prof.misses, l2_miss);
        assert_eq!(prof.references, 1_500_000);
        let stream: Vec<&PageRow> = prof.pages.iter().filter(|p| p.vpn >= 0x8000).collect();
        let reused: Vec<&PageRow> = prof.pages.iter().filter(|p| p.vpn < 0x8000).collect();
        assert_eq!(reused.len(), 16);
        assert_eq!(stream.len(), 1024);
        assert!(
            stream.iter().all(|p| p.miss_rate > 0.9),
            "stream pages miss"
        );
        assert!(reused.iter().all(|p| p.miss_rate < 0.3), "reused pages hit");
        // Two regions (address order): the reused array, then the stream.
        let big: Vec<&Region> = prof.regions.iter().filter(|r| r.pages >= 8).collect();
        assert_eq!(big.len(), 2, "{:?}", prof.regions);
        assert_eq!((big[0].first_vpn, big[0].last_vpn), (0x1000, 0x100f));
        assert_eq!((big[1].first_vpn, big[1].last_vpn), (0x8000, 0x83ff));
        // Sampling 1 L1D miss in 50 estimates every page's miss rate closely.
        let mut err = 0.0;
        let mut n = 0.0;
        for p in &prof.pages {
            if p.sampled_accesses >= 10 {
                err += (p.sampled_miss_rate.unwrap() - p.miss_rate).abs();
                n += 1.0;
            }
        }
        assert!(n > 500.0, "{n} pages with enough samples");
        assert!(err / n < 0.08, "mean page error {}", err / n);
        let l1d_load_misses = h.counters(1)[0].by_kind[Kind::Load as usize].misses;
        assert_eq!(prof.samples, l1d_load_misses / 50);
    }

    /// Review finding: records spanning two lines (and two pages) are counted per line, on the
    /// page of each line, as the hierarchy counts them.
    #[test]
    fn records_spanning_lines_and_pages_count_per_line() {
        let mut h = hierarchy();
        let options = PageProfileOptions {
            level: "L2".into(),
            page_size: 4096,
            sample_period: Some(10),
            region_tolerance: 0.15,
            region_gap: 1,
            min_accesses: 1,
        };
        let mut p = PageProfiler::new(options, &h).unwrap();
        // 8-byte loads at byte 4092 of 1,000 pages: each touches the last line of one page and
        // the first of the next; then loads at line offset 60 of other lines.
        let mut block: Vec<Record> = (0..1000u64)
            .map(|i| Record::load(0x100_0000 + i * 8192 + 4092))
            .collect();
        block.extend((0..2000u64).map(|i| Record::load(0x800_0000 + i * 128 + 60)));
        block.push(Record::new(Kind::Store, 0x900_0000 + 10, 200)); // four lines
        p.feed(&mut h, &block);
        let prof = p.finish(&h).unwrap();
        let data = |level: usize, f: fn(&crate::cache::KindCounts) -> u64| -> u64 {
            h.counters(level)
                .iter()
                .map(|c| f(&c.by_kind[Kind::Load as usize]) + f(&c.by_kind[Kind::Store as usize]))
                .sum()
        };
        assert_eq!(prof.accesses, data(2, |k| k.accesses));
        assert_eq!(prof.misses, data(2, |k| k.misses));
        assert_eq!(prof.references, 2000 + 4000 + 4);
        // 2,000 pages from the page-crossing loads, 63 from the line-offset ones, 1 store page.
        assert_eq!(prof.pages.len(), 2000 + 63 + 1);
        let l1d_load_misses = h.counters(1)[0].by_kind[Kind::Load as usize].misses;
        assert_eq!(prof.samples, l1d_load_misses / 10);
    }

    #[test]
    fn bad_options_are_named() {
        let h = hierarchy();
        let o = |level: &str, period: Option<u64>| PageProfileOptions {
            level: level.into(),
            page_size: 4096,
            sample_period: period,
            region_tolerance: 0.15,
            region_gap: 1,
            min_accesses: 1,
        };
        let e = PageProfiler::new(o("LLC", None), &h).unwrap_err();
        assert!(e.message.contains("L1D, L2"), "{}", e.message);
        let e = PageProfiler::new(o("L1I", None), &h).unwrap_err();
        assert_eq!(e.field, "level");
        assert_eq!(
            PageProfiler::new(o("L2", Some(0)), &h).unwrap_err().field,
            "sample_period"
        );
        let e = PageProfiler::new(o("L1D", Some(10)), &h).unwrap_err();
        assert!(e.message.contains("L1D misses only"), "{}", e.message);
        let mut bad = o("L2", None);
        bad.page_size = 100;
        assert_eq!(PageProfiler::new(bad, &h).unwrap_err().field, "page_size");
        let mut gap = o("L2", None);
        gap.region_gap = 0;
        assert_eq!(PageProfiler::new(gap, &h).unwrap_err().field, "region_gap");
        let p = PageProfiler::new(o("l2", None), &h).unwrap();
        assert!(p.finish(&h).is_err(), "an empty trace is an error");
    }
}
