/*!
Attribution (`cachecolor annotate`): run a trace with PCs (native version 3) through
the config's hierarchy and tally, per instruction and per data page, where each reference was
served. Python (`cachecolor.annotate`) turns the tallies into misses per level along each
reference's path, and resolves PCs to functions and source lines.

Why histograms of "served by" rather than per-level miss counts: a reference misses every level
of its path above the one that served it, and which levels are on its path depends on its kind
(split L1I/L1D, `serves`). The served level alone, kept per (PC, class), says all of it and
stays independent of the hierarchy's shape.
*/
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;

use cachecolor_sim::cache::hierarchy::SERVED_BY_MEMORY;
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::trace::native::TraceReader;
use cachecolor_sim::trace::{Kind, RecordSource, BLOCK_RECORDS};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{catch_panic, in_table, Failure};
use crate::simulate::{parse_config, report};

/// The class of a reference in the tallies, as cachegrind splits them: 0 data read (load),
/// 1 data write (store, and modify, which cachegrind counts as one write access), 2 ifetch.
fn class(kind: Kind) -> u8 {
    match kind {
        Kind::Load => 0,
        Kind::Store | Kind::Modify => 1,
        Kind::IFetch => 2,
    }
}

/// Rows keyed by (key, class), each `slots` counters (one per level, then memory).
///
/// Every record of the trace adds to a row (123 M additions for a run of 98 M instructions), so
/// the lookup is most of attribution's own cost: a direct-mapped memo of recent keys answers
/// almost all of them (a program's hot PCs and data pages are few), and the map behind it
/// hashes with one multiplication (`MulHash`) instead of SipHash, whose resistance to chosen
/// keys a tally of one's own trace does not need.
struct Tally {
    slots: usize,
    index: HashMap<(u64, u8), usize, BuildHasherDefault<MulHash>>,
    memo: Vec<(u64, u8, usize)>,
    keys: Vec<u64>,
    classes: Vec<u8>,
    counts: Vec<u64>,
}

/// Entries of `Tally`'s memo (a power of two).
const MEMO: usize = 4096;

/// A hash by one multiplication per word (by 2^64 / golden ratio, as Fibonacci hashing), its
/// well-mixed high bits rotated down to where the map takes its bucket (as rustc's FxHasher).
#[derive(Default)]
struct MulHash(u64);

impl Hasher for MulHash {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write_u64(u64::from(b));
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = (self.0 ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Tally {
    fn new(slots: usize) -> Self {
        Tally {
            slots,
            index: HashMap::default(),
            // No reference has class 3: an empty entry.
            memo: vec![(0, 3, 0); MEMO],
            keys: Vec::new(),
            classes: Vec::new(),
            counts: Vec::new(),
        }
    }

    #[inline]
    fn add(&mut self, key: u64, class: u8, slot: usize) {
        let m = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize ^ class as usize;
        let e = &mut self.memo[m & (MEMO - 1)];
        let row = if e.0 == key && e.1 == class {
            e.2
        } else {
            let next = self.keys.len();
            let row = *self.index.entry((key, class)).or_insert(next);
            if row == next {
                self.keys.push(key);
                self.classes.push(class);
                self.counts.resize(self.counts.len() + self.slots, 0);
            }
            *e = (key, class, row);
            row
        };
        self.counts[row * self.slots + slot] += 1;
    }
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// Simulate the native trace `trace` (it must carry PCs) on the hierarchy of `config_json` and
/// return the tallies: `pc`, `pc_class`, `pc_counts` (rows of `levels + 1` u64: served by level
/// 0, 1, ... of the config, then memory), the same per 4 KiB data page (`page`, `page_class`,
/// `page_counts`; ifetches excluded), `levels`, `records` and `unknown_pc` (data records whose
/// PC is 0).
#[pyfunction]
#[pyo3(signature = (config_json, trace, progress = None))]
pub fn attribute_trace<'py>(
    py: Python<'py>,
    config_json: &str,
    trace: PathBuf,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let progress = progress.as_ref();
    let (pcs, pages, levels, records, unknown) = py.detach(|| {
        catch_panic(|| {
            let config = parse_config(config_json, "json")?;
            let mut h = Hierarchy::new(&config.hierarchy).map_err(|e| in_table("hierarchy", e))?;
            let levels = config.hierarchy.levels.len();
            let mut r = TraceReader::open(&trace)?;
            if !r.has_pcs() {
                return Err(Failure::Argument(format!(
                    "{} has no PCs (native version {}): attribution needs a trace captured \
                     with instruction fetches by this cachecolor (native version 3)",
                    trace.display(),
                    r.version()
                )));
            }
            let slot = |s: u8| {
                if s == SERVED_BY_MEMORY {
                    levels
                } else {
                    (s as usize).min(levels)
                }
            };
            let (mut pcs, mut pages) = (Tally::new(levels + 1), Tally::new(levels + 1));
            let mut buf = Vec::with_capacity(BLOCK_RECORDS);
            let mut served = Vec::with_capacity(BLOCK_RECORDS);
            let (mut records, mut unknown) = (0u64, 0u64);
            while r.next_block(&mut buf)? {
                served.clear();
                h.run_block_served(&buf, &mut served);
                for ((rec, &s), &pc) in buf.iter().zip(&served).zip(r.block_pcs()) {
                    let c = class(rec.kind);
                    let s = slot(s);
                    pcs.add(pc, c, s);
                    if c != 2 {
                        pages.add(rec.addr >> 12, c, s);
                        unknown += (pc == 0) as u64;
                    }
                }
                records += buf.len() as u64;
                report(progress, r.progress())?;
            }
            Ok((pcs, pages, levels, records, unknown))
        })
    })?;
    let d = PyDict::new(py);
    d.set_item("pc", PyBytes::new(py, &le(&pcs.keys, u64::to_le_bytes)))?;
    d.set_item("pc_class", PyBytes::new(py, &pcs.classes))?;
    d.set_item(
        "pc_counts",
        PyBytes::new(py, &le(&pcs.counts, u64::to_le_bytes)),
    )?;
    d.set_item("page", PyBytes::new(py, &le(&pages.keys, u64::to_le_bytes)))?;
    d.set_item("page_class", PyBytes::new(py, &pages.classes))?;
    d.set_item(
        "page_counts",
        PyBytes::new(py, &le(&pages.counts, u64::to_le_bytes)),
    )?;
    d.set_item("levels", levels)?;
    d.set_item("records", records)?;
    d.set_item("unknown_pc", unknown)?;
    Ok(d)
}
