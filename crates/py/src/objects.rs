/*!
Per-object analytics of `cachecolor annotate --objects`: what Python's
`cachecolor.objects` needs from a pass over a trace, beyond `annotate::attribute_trace`'s tallies.

- `object_reuse`: the reuse side of ROCS's page profile (section 3.2.1: "the per-page miss rate
  can be viewed as an inverse measure of the probability of reusing a cache block of the page"),
  measured directly: the exact LRU stack distance of every data reference (Mattson et al.,
  `analysis::stack::LruStack`, fully associative, in lines) kept per object as a histogram, and
  the level that served each data reference per object and per interval of records (misses per
  object over time). Pages are given to objects by Python (`owner_vpns` -> `owner_ids`), so the
  object list can come from symbols, the memory map or allocation sites alike.
- `placed_page_tallies`: the trace run through the same hierarchy with its pages placed in
  physical frames by the simulator's color-aware allocator (`memory::PhysicalMemory`, the
  `color-pool` allocator ROCS 4.1 needs), every page restricted to the colors a pollute buffer
  (ROCS section 4, Figure 5) gives it: `shared` (every color, as before ROCS acts), `reserved`
  (the buffer's colors out of normal use, nothing in them: the control), `confined` (the given
  pages in the buffer's colors, the others in the rest). Per data page, where it was served.
*/
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use cachecolor_sim::analysis::stack::LruStack;
use cachecolor_sim::cache::hierarchy::SERVED_BY_MEMORY;
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::config::Size;
use cachecolor_sim::memory::{AllocRequest, ColorSet, MemoryConfig, Owner, PhysicalMemory};
use cachecolor_sim::trace::native::TraceReader;
use cachecolor_sim::trace::{Kind, Record, RecordSource, BLOCK_RECORDS};
use cachecolor_sim::ConfigError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{catch_panic, in_table, Failure};
use crate::simulate::{parse_config, report};

/// The page size objects are tallied in (as `attribute_trace`'s page tallies).
const PAGE_SHIFT: u32 = 12;

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn u64s(b: &[u8], what: &str) -> Result<Vec<u64>, Failure> {
    if !b.len().is_multiple_of(8) {
        return Err(Failure::Argument(format!(
            "{what}: {} bytes is not a whole number of little-endian u64",
            b.len()
        )));
    }
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// The slot of a served level: the level's index, or `levels` for memory.
fn slot(s: u8, levels: usize) -> usize {
    if s == SERVED_BY_MEMORY {
        levels
    } else {
        (s as usize).min(levels)
    }
}

/// Disjoint runs of pages `[first, last]` of one object each, sorted (the inside of large
/// ranges, which Python does not list page by page).
struct Spans {
    first: Vec<u64>,
    last: Vec<u64>,
    ids: Vec<u64>,
}

impl Spans {
    fn find(&self, vpn: u64) -> Option<u64> {
        let k = self.first.partition_point(|&f| f <= vpn).checked_sub(1)?;
        (vpn <= self.last[k]).then(|| self.ids[k])
    }
}

/// Which object a page belongs to: explicit pages first, then spans, else `other`.
struct ObjectMap {
    explicit: HashMap<u64, u64>,
    spans: Spans,
    other: u64,
    last: (u64, u64),
}

impl ObjectMap {
    fn new(
        owner_vpns: &[u8],
        owner_ids: &[u8],
        span_first: &[u8],
        span_last: &[u8],
        span_ids: &[u8],
        other: u64,
    ) -> Result<Self, Failure> {
        let vpns = u64s(owner_vpns, "owner_vpns")?;
        let ids = u64s(owner_ids, "owner_ids")?;
        if vpns.len() != ids.len() {
            return Err(Failure::Argument(format!(
                "owner_vpns has {} pages but owner_ids {}",
                vpns.len(),
                ids.len()
            )));
        }
        let spans = Spans {
            first: u64s(span_first, "span_first")?,
            last: u64s(span_last, "span_last")?,
            ids: u64s(span_ids, "span_ids")?,
        };
        if spans.last.len() != spans.first.len() || spans.ids.len() != spans.first.len() {
            return Err(Failure::Argument(
                "span_first, span_last and span_ids differ in length".into(),
            ));
        }
        Ok(ObjectMap {
            explicit: vpns.into_iter().zip(ids).collect(),
            spans,
            other,
            last: (u64::MAX, other),
        })
    }

    #[inline]
    fn object(&mut self, vpn: u64) -> u64 {
        if vpn != self.last.0 {
            let o = self
                .explicit
                .get(&vpn)
                .copied()
                .or_else(|| self.spans.find(vpn))
                .unwrap_or(self.other);
            self.last = (vpn, o);
        }
        self.last.1
    }
}

/// Misses over time: per (object, interval), where its data references were served.
type Series = BTreeMap<(u64, u64), Vec<u64>>;

fn set_series(py: Python<'_>, d: &Bound<'_, PyDict>, series: &Series) -> PyResult<()> {
    let so: Vec<u64> = series.keys().map(|k| k.0).collect();
    let si: Vec<u64> = series.keys().map(|k| k.1).collect();
    let counts: Vec<u64> = series.values().flatten().copied().collect();
    d.set_item(
        "series_object",
        PyBytes::new(py, &le(&so, u64::to_le_bytes)),
    )?;
    d.set_item(
        "series_interval",
        PyBytes::new(py, &le(&si, u64::to_le_bytes)),
    )?;
    d.set_item(
        "series_counts",
        PyBytes::new(py, &le(&counts, u64::to_le_bytes)),
    )?;
    Ok(())
}

/// Per object: exact stack distances of its data references that reach level `reuse_level` (an
/// index into the config's levels: served there or beyond), and where every data reference was
/// served per interval. `owner_vpns`/`owner_ids` (little-endian u64 each, same length) give pages to
/// objects `0..objects`, then the sorted disjoint spans `span_first..=span_last` -> `span_ids`;
/// a data page outside both is object `objects` (the rest). Returns
/// `dist_object`, `dist_value` (distance in lines, 0 for a first reference), `dist_count` (u64
/// arrays, one row per distinct (object, distance)), `series_object`, `series_interval`,
/// `series_counts` (rows of `levels + 1` counts: served by level 0, 1, ..., memory), `levels`,
/// `level_lines` (each level's size in lines), `records`, `intervals`.
#[pyfunction]
#[pyo3(signature = (config_json, trace, owner_vpns, owner_ids, span_first, span_last, span_ids, objects, interval_records, reuse_level, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn object_reuse<'py>(
    py: Python<'py>,
    config_json: &str,
    trace: PathBuf,
    owner_vpns: &[u8],
    owner_ids: &[u8],
    span_first: &[u8],
    span_last: &[u8],
    span_ids: &[u8],
    objects: u64,
    interval_records: u64,
    reuse_level: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let progress = progress.as_ref();
    if interval_records == 0 {
        return Err(Failure::Argument("interval_records: 0; give at least 1".into()).into());
    }
    let mut owner = ObjectMap::new(
        owner_vpns, owner_ids, span_first, span_last, span_ids, objects,
    )?;
    let (dists, series, levels, records, level_lines) = py.detach(|| {
        catch_panic(|| {
            let config = parse_config(config_json, "json")?;
            let mut h = Hierarchy::new(&config.hierarchy).map_err(|e| in_table("hierarchy", e))?;
            let levels = config.hierarchy.levels.len();
            let line_shift = config.hierarchy.line_size.trailing_zeros();
            let level_lines: Vec<u64> = config
                .hierarchy
                .levels
                .iter()
                .map(|l| l.size.0 >> line_shift)
                .collect();
            let mut r = TraceReader::open(&trace)?;
            let mut stack = LruStack::new();
            let mut dists: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            let mut series = Series::new();
            let mut buf = Vec::with_capacity(BLOCK_RECORDS);
            let mut served = Vec::with_capacity(BLOCK_RECORDS);
            let mut records = 0u64;
            while r.next_block(&mut buf)? {
                served.clear();
                h.run_block_served(&buf, &mut served);
                for (rec, &s) in buf.iter().zip(&served) {
                    let interval = records / interval_records;
                    records += 1;
                    // Every reference takes a place in the LRU stack (instructions share a
                    // unified LLC); a record is one reference at its first line, as the
                    // tallies count it.
                    let d = stack.access(rec.addr >> line_shift).map_or(0, u64::from);
                    if rec.kind == Kind::IFetch {
                        continue;
                    }
                    let last_obj = owner.object(rec.addr >> PAGE_SHIFT);
                    let s = slot(s, levels);
                    // ROCS 3.1 profiles the references that reach the LLC (its samples are L1D
                    // misses with their data source): the reuse of those is what the LLC sees.
                    if s >= reuse_level {
                        *dists.entry((last_obj, d)).or_default() += 1;
                    }
                    series
                        .entry((last_obj, interval))
                        .or_insert_with(|| vec![0; levels + 1])[s] += 1;
                }
                report(progress, r.progress())?;
            }
            Ok((dists, series, levels, records, level_lines))
        })
    })?;
    let d = PyDict::new(py);
    let col = |f: &dyn Fn(&(u64, u64), &u64) -> u64| -> Vec<u8> {
        le(
            &dists.iter().map(|(k, v)| f(k, v)).collect::<Vec<_>>(),
            u64::to_le_bytes,
        )
    };
    d.set_item("dist_object", PyBytes::new(py, &col(&|k, _| k.0)))?;
    d.set_item("dist_value", PyBytes::new(py, &col(&|k, _| k.1)))?;
    d.set_item("dist_count", PyBytes::new(py, &col(&|_, v| *v)))?;
    set_series(py, &d, &series)?;
    d.set_item("levels", levels)?;
    d.set_item("level_lines", level_lines)?;
    d.set_item("records", records)?;
    d.set_item("intervals", records.div_ceil(interval_records))?;
    Ok(d)
}

/// Frames handed to a trace's pages under a pollute buffer: the simulator's `color-pool`
/// allocator with the allowed colors of each page as the placement `mode` says.
struct PolluteBufferPlacement {
    memory: PhysicalMemory,
    buffer: ColorSet,
    others: ColorSet,
    all: ColorSet,
    mode: Mode,
    pollute: std::collections::HashSet<u64>,
    frames: HashMap<u64, u64>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Shared,
    Reserved,
    Confined,
}

impl PolluteBufferPlacement {
    fn frame(&mut self, vpn: u64) -> Result<u64, Failure> {
        if let Some(&f) = self.frames.get(&vpn) {
            return Ok(f);
        }
        let allowed = match self.mode {
            Mode::Shared => &self.all,
            Mode::Reserved => &self.others,
            Mode::Confined if self.pollute.contains(&vpn) => &self.buffer,
            Mode::Confined => &self.others,
        };
        let req = AllocRequest {
            allowed,
            cpu: 0,
            asid: 1,
            vpn,
        };
        let pfn = self.memory.alloc(&req, Owner::Space(1)).map_err(|e| {
            Failure::Config(ConfigError::new(
                "placement",
                format!(
                    "page {vpn:#x}: {e} (the placement's RAM is {} frames of 4 KiB)",
                    self.memory.frames()
                ),
            ))
        })?;
        self.frames.insert(vpn, pfn);
        Ok(pfn)
    }
}

/// Run `trace` on `config_json`'s hierarchy with its 4 KiB pages placed in physical frames of
/// the last level's colors: `mode` `"shared"` (every page any color; `buffer_colors` ignored),
/// `"reserved"` (every page
/// outside the last `buffer_colors` colors) or `"confined"` (the pages of `pollute_vpns`, u64
/// little-endian, in the last `buffer_colors` colors, the others outside them). Frames come from
/// the `color-pool` allocator in order of first touch (`ram` bytes of RAM). Returns, per data
/// page: `page`, `page_counts` (rows of `levels + 1`: served by level 0, 1, ..., memory),
/// `levels`, `records`, `colors` (of the last level) and `pages_per_color`; with
/// `interval_records` > 0, also per object (the pages as `object_reuse` takes them) and
/// interval: `series_object`, `series_interval`, `series_counts`.
#[pyfunction]
#[pyo3(signature = (config_json, trace, pollute_vpns, buffer_colors, mode, ram = 8 << 30, progress = None, owner_vpns = &[] as &[u8], owner_ids = &[] as &[u8], span_first = &[] as &[u8], span_last = &[] as &[u8], span_ids = &[] as &[u8], objects = 0, interval_records = 0))]
#[allow(clippy::too_many_arguments)]
pub fn placed_page_tallies<'py>(
    py: Python<'py>,
    config_json: &str,
    trace: PathBuf,
    pollute_vpns: &[u8],
    buffer_colors: u64,
    mode: &str,
    ram: u64,
    progress: Option<Py<PyAny>>,
    owner_vpns: &[u8],
    owner_ids: &[u8],
    span_first: &[u8],
    span_last: &[u8],
    span_ids: &[u8],
    objects: u64,
    interval_records: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let progress = progress.as_ref();
    let mut owner = ObjectMap::new(
        owner_vpns, owner_ids, span_first, span_last, span_ids, objects,
    )?;
    let mut series = Series::new();
    let mode = match mode {
        "shared" => Mode::Shared,
        "reserved" => Mode::Reserved,
        "confined" => Mode::Confined,
        other => {
            return Err(Failure::Argument(format!(
                "mode {other:?}: expected \"shared\", \"reserved\" or \"confined\""
            ))
            .into())
        }
    };
    let pollute = u64s(pollute_vpns, "pollute_vpns")?.into_iter().collect();
    let (pages, counts, levels, records, colors, per_color) = py.detach(|| {
        catch_panic(|| {
            let config = parse_config(config_json, "json")?;
            let mut h = Hierarchy::new(&config.hierarchy).map_err(|e| in_table("hierarchy", e))?;
            let levels = config.hierarchy.levels.len();
            let llc = config
                .hierarchy
                .levels
                .last()
                .expect("a hierarchy has levels");
            let page = 1u64 << PAGE_SHIFT;
            let colors = (llc.size.0 / (llc.ways as u64 * page)).max(1);
            // The shared placement uses no buffer (any `buffer_colors` is ignored there), so an
            // LLC of one color can still be measured before a buffer is asked for.
            let buffer_colors = if mode == Mode::Shared {
                0
            } else {
                buffer_colors
            };
            if mode != Mode::Shared && (buffer_colors == 0 || buffer_colors >= colors) {
                return Err(Failure::Config(ConfigError::new(
                    "buffer_colors",
                    format!(
                        "{buffer_colors}: the pollute buffer needs 1 to {} of the {} colors of {} \
                         (size / ways / 4 KiB), leaving at least one to the other pages",
                        colors.saturating_sub(1),
                        colors,
                        llc.name
                    ),
                )));
            }
            let memory_config = MemoryConfig {
                ram: Size(ram),
                allocator: cachecolor_sim::memory::AllocatorKind::ColorPool,
                ..MemoryConfig::default()
            };
            let memory = PhysicalMemory::new(&memory_config, page, colors, 1)
                .map_err(|e| in_table("placement", e))?;
            // ROCS section 4 and the `rocs` policy: the buffer is the last colors.
            let first = colors - buffer_colors;
            let mut place = PolluteBufferPlacement {
                memory,
                buffer: ColorSet::range(colors, first, colors)?,
                others: ColorSet::range(colors, 0, first)?,
                all: ColorSet::all(colors),
                mode,
                pollute,
                frames: HashMap::new(),
            };
            let mut r = TraceReader::open(&trace)?;
            let mut index: HashMap<u64, usize> = HashMap::new();
            let (mut pages, mut counts) = (Vec::<u64>::new(), Vec::<u64>::new());
            let mut buf = Vec::with_capacity(BLOCK_RECORDS);
            let mut physical: Vec<Record> = Vec::with_capacity(BLOCK_RECORDS);
            let mut served = Vec::with_capacity(BLOCK_RECORDS);
            let mut records = 0u64;
            let offset = page - 1;
            while r.next_block(&mut buf)? {
                physical.clear();
                for rec in &buf {
                    let pfn = place.frame(rec.addr >> PAGE_SHIFT)?;
                    physical.push(Record {
                        addr: pfn << PAGE_SHIFT | (rec.addr & offset),
                        ..*rec
                    });
                }
                served.clear();
                h.run_block_served(&physical, &mut served);
                for (i, (rec, &s)) in buf.iter().zip(&served).enumerate() {
                    if rec.kind == Kind::IFetch {
                        continue;
                    }
                    let vpn = rec.addr >> PAGE_SHIFT;
                    // interval_records 0: no series asked for.
                    if let Some(interval) = (records + i as u64).checked_div(interval_records) {
                        series
                            .entry((owner.object(vpn), interval))
                            .or_insert_with(|| vec![0; levels + 1])[slot(s, levels)] += 1;
                    }
                    let next = pages.len();
                    let row = *index.entry(vpn).or_insert(next);
                    if row == next {
                        pages.push(vpn);
                        counts.resize(counts.len() + levels + 1, 0);
                    }
                    counts[row * (levels + 1) + slot(s, levels)] += 1;
                }
                records += buf.len() as u64;
                report(progress, r.progress())?;
            }
            let mut per_color = vec![0u64; colors as usize];
            for &pfn in place.frames.values() {
                per_color[(pfn % colors) as usize] += 1;
            }
            Ok((pages, counts, levels, records, colors, per_color))
        })
    })?;
    let d = PyDict::new(py);
    d.set_item("page", PyBytes::new(py, &le(&pages, u64::to_le_bytes)))?;
    d.set_item(
        "page_counts",
        PyBytes::new(py, &le(&counts, u64::to_le_bytes)),
    )?;
    d.set_item("levels", levels)?;
    d.set_item("records", records)?;
    d.set_item("colors", colors)?;
    d.set_item("pages_per_color", per_color)?;
    if interval_records > 0 {
        set_series(py, &d, &series)?;
    }
    Ok(d)
}
