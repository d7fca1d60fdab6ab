/*!
Miss-rate curves and per-set stack distance profiles for Python (`cachecolor.mrc`,
`cachecolor.set_profile`, `cachecolor mrc`).

One entry point, `profile`, runs a miss-rate curve, a per-set profile, or both in one pass over
one source: a trace file (any format, decoded on a helper thread as `simulate` does), a
synthetic workload (TOML or JSON text: a workload table, or a whole config whose `[workload]`
is used) or NumPy columns (addresses, optional sizes and instruction counts, read in place).
Options cross as JSON and are parsed strictly by the Rust core (unknown keys and bad values are
`ConfigError`s naming the option). Results come back as a dict of JSON text plus
little-endian `bytes` for the large arrays (the exact stack-distance histogram, the per-set
counters), which the Python side views with `numpy.frombuffer`.

The work runs with the GIL released; after each block the progress callback (if any) is called
with `(records, bytes, total_bytes, total_records)` and Ctrl-C is checked.
*/
use std::path::PathBuf;

use cachecolor_sim::analysis::mrc::{MrcOptions, MrcProfiler, SetProfileOptions, SetProfiler};
use cachecolor_sim::analysis::rapidmrc::{RapidMrc, RapidMrcOptions};
use cachecolor_sim::analysis::reference::zipf_scan;
use cachecolor_sim::config::{from_json, from_toml};
use cachecolor_sim::trace::{self, Format, Progress, Record, RecordSource, BLOCK_RECORDS};
use cachecolor_sim::workload::{Workload, WorkloadSpec};
use cachecolor_sim::ConfigError as RustConfigError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::{json, Value};

use crate::errors::{catch_panic, in_table, Failure, Result};
use crate::simulate::{report, Column};

/// `c[start..end]`, or nothing for an absent (empty) column.
fn part<T>(c: &[T], start: usize, end: usize) -> &[T] {
    if c.is_empty() {
        c
    } else {
        &c[start..end]
    }
}

fn le_bytes(v: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The profilers one pass feeds.
struct Profilers {
    mrc: Option<MrcProfiler>,
    sets: Option<SetProfiler>,
    rapid: Option<RapidMrc>,
}

impl Profilers {
    fn records(&mut self, block: &[Record]) {
        if let Some(m) = &mut self.mrc {
            m.feed_records(block);
        }
        if let Some(s) = &mut self.sets {
            s.feed_records(block);
        }
        if let Some(r) = &mut self.rapid {
            r.feed_records(block);
        }
    }

    fn columns(&mut self, addrs: &[u64], sizes: &[u16], icounts: &[u32]) {
        if let Some(m) = &mut self.mrc {
            m.feed_columns(addrs, sizes, icounts);
        }
        if let Some(s) = &mut self.sets {
            s.feed_columns(addrs, sizes);
        }
        if let Some(r) = &mut self.rapid {
            r.feed_columns(addrs, sizes);
        }
    }
}

/// A workload from TOML or JSON text: the text itself, or the `workload` table of a config.
fn workload_spec(text: &str, format: &str) -> Result<WorkloadSpec> {
    let value: Value = match format {
        "toml" => from_toml::<Value>(text)?,
        "json" => from_json::<Value>(text)?,
        other => {
            return Err(Failure::Argument(format!(
                "workload format {other:?}: expected \"toml\" or \"json\""
            )))
        }
    };
    let (table, value) = match value.get("workload") {
        Some(w) => ("workload", w.clone()),
        None => ("", value),
    };
    let prefix = |e: RustConfigError| {
        if table.is_empty() {
            Failure::Config(e)
        } else {
            in_table(table, e)
        }
    };
    let spec: WorkloadSpec = from_json(&value.to_string()).map_err(prefix)?;
    spec.validate().map_err(prefix)?;
    Ok(spec)
}

/// Run a miss-rate curve (`mrc_options`), a per-set profile (`set_options`), a RapidMRC window
/// (`rapid_options`), or several, over one source: `path` (+ `format`), `workload` text
/// (+ `workload_format`), or `addresses` (+ optional `sizes`, `icounts`). Returns a dict with
/// `mrc` (JSON), `histogram` (bytes, exact only), `set_profile` (JSON), `per_set` and `pooled`
/// (bytes), `rapid_mrc` (JSON).
#[pyfunction]
#[pyo3(signature = (mrc_options = None, set_options = None, rapid_options = None, path = None, format = "native", workload = None, workload_format = "toml", addresses = None, sizes = None, icounts = None, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn profile<'py>(
    py: Python<'py>,
    mrc_options: Option<&str>,
    set_options: Option<&str>,
    rapid_options: Option<&str>,
    path: Option<PathBuf>,
    format: &str,
    workload: Option<&str>,
    workload_format: &str,
    addresses: Option<&Bound<'py, PyAny>>,
    sizes: Option<&Bound<'py, PyAny>>,
    icounts: Option<&Bound<'py, PyAny>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let given = [path.is_some(), workload.is_some(), addresses.is_some()];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(Failure::Argument(
            "give exactly one source: a trace path, a workload, or an address array".into(),
        )
        .into());
    }
    if mrc_options.is_none() && set_options.is_none() && rapid_options.is_none() {
        return Err(Failure::Argument(
            "nothing to compute: give mrc_options, set_options or rapid_options".into(),
        )
        .into());
    }
    let mut profilers = Profilers {
        mrc: mrc_options
            .map(|t| -> Result<MrcProfiler> {
                let o: MrcOptions = from_json(t)?;
                Ok(MrcProfiler::new(o)?)
            })
            .transpose()?,
        sets: set_options
            .map(|t| -> Result<SetProfiler> {
                let o: SetProfileOptions = from_json(t)?;
                Ok(SetProfiler::new(o)?)
            })
            .transpose()?,
        rapid: rapid_options
            .map(|t| -> Result<RapidMrc> {
                let o: RapidMrcOptions = from_json(t)?;
                Ok(RapidMrc::new(o)?)
            })
            .transpose()?,
    };
    let format = Format::parse(format).map_err(Failure::from)?;
    let spec = workload
        .map(|t| workload_spec(t, workload_format))
        .transpose()?;
    let addr_col = addresses
        .map(|a| Column::<u64>::get(py, "addresses", a))
        .transpose()?;
    let size_col = sizes
        .map(|a| Column::<u16>::get(py, "sizes", a))
        .transpose()?;
    let icount_col = icounts
        .map(|a| Column::<u32>::get(py, "icounts", a))
        .transpose()?;
    let progress = progress.as_ref();

    let source = py.detach(|| {
        catch_panic(|| -> Result<Value> {
            if let Some(addrs) = &addr_col {
                let a = addrs.as_slice();
                let s = size_col.as_ref().map_or(&[][..], |c| c.as_slice());
                let ic = icount_col.as_ref().map_or(&[][..], |c| c.as_slice());
                for (name, len) in [("sizes", s.len()), ("icounts", ic.len())] {
                    if len != 0 && len != a.len() {
                        return Err(Failure::Argument(format!(
                            "{name} has {len} elements but addresses has {}",
                            a.len()
                        )));
                    }
                }
                if let Some(i) = s.iter().position(|&v| v == 0) {
                    return Err(Failure::Argument(format!(
                        "sizes[{i}] = 0: a reference is at least 1 byte"
                    )));
                }
                let n = a.len();
                let mut start = 0;
                while start < n {
                    let end = (start + BLOCK_RECORDS).min(n);
                    profilers.columns(&a[start..end], part(s, start, end), part(ic, start, end));
                    start = end;
                    report(
                        progress,
                        Progress {
                            records: end as u64,
                            total_records: Some(n as u64),
                            ..Progress::default()
                        },
                    )?;
                }
                return Ok(json!({"kind": "arrays", "records": n}));
            }
            let (mut src, source): (Box<dyn RecordSource + Send>, Value) = match (&path, &spec) {
                (Some(p), _) => (
                    trace::open(p, format)?,
                    json!({"kind": "trace", "path": p.display().to_string(), "format": format.name()}),
                ),
                (None, Some(w)) => (
                    Box::new(Workload::new(w).map_err(|e| in_table("workload", e))?),
                    json!({"kind": "workload", "workload": w}),
                ),
                (None, None) => unreachable!("one source was checked"),
            };
            trace::pipelined_source(src.as_mut(), |block, p| -> Result<()> {
                    profilers.records(block);
                    report(progress, p)
                },
            )?;
            Ok(source)
        })
    })?;

    let d = PyDict::new(py);
    if let Some(m) = &profilers.mrc {
        let r = m.finish().map_err(Failure::from)?;
        let mut doc = serde_json::to_value(&r).expect("results serialise");
        doc["source"] = source.clone();
        doc["version"] = json!(cachecolor_sim::VERSION);
        d.set_item("mrc", doc.to_string())?;
        if let Some(h) = &r.histogram {
            // counts[0] holds the first references in the array Python sees.
            let mut counts = h.counts.clone();
            counts[0] = h.cold;
            d.set_item("histogram", PyBytes::new(py, &le_bytes(&counts)))?;
        }
    }
    if let Some(r) = &profilers.rapid {
        let res = r.finish().map_err(Failure::from)?;
        let mut doc = serde_json::to_value(&res).expect("results serialise");
        doc["source"] = source.clone();
        doc["version"] = json!(cachecolor_sim::VERSION);
        d.set_item("rapid_mrc", doc.to_string())?;
    }
    if let Some(s) = &profilers.sets {
        let r = s.finish().map_err(Failure::from)?;
        let mut doc = serde_json::to_value(&r).expect("results serialise");
        doc["source"] = source;
        doc["version"] = json!(cachecolor_sim::VERSION);
        d.set_item("set_profile", doc.to_string())?;
        d.set_item("per_set", PyBytes::new(py, &le_bytes(&r.per_set)))?;
        let mut pooled = r.pooled.counts.clone();
        pooled[0] = r.pooled.cold;
        d.set_item("pooled", PyBytes::new(py, &le_bytes(&pooled)))?;
    }
    Ok(d)
}

/// ANCHORS.md's MRC reference trace as byte addresses (`line * line_size`), little-endian u64
/// bytes: `refs` references over `lines` lines, half zipf(`alpha`), half a cyclic scan.
#[pyfunction]
#[pyo3(signature = (refs, lines, alpha = 0.9, seed = 1, line_size = 64))]
pub fn zipf_scan_trace<'py>(
    py: Python<'py>,
    refs: u64,
    lines: u64,
    alpha: f64,
    seed: u64,
    line_size: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    if lines == 0 || !(alpha.is_finite() && alpha > 0.0) || line_size == 0 {
        return Err(Failure::Argument(
            "zipf_scan_trace needs lines >= 1, a finite alpha > 0 and line_size >= 1".into(),
        )
        .into());
    }
    let bytes = py.detach(|| {
        let t = zipf_scan(refs, lines, alpha, seed);
        let addrs: Vec<u64> = t.iter().map(|&l| l * line_size).collect();
        le_bytes(&addrs)
    });
    Ok(PyBytes::new(py, &bytes))
}

/// The thesis's models (`cachecolor.models`): eq. 5.2's per-bin miss probabilities of a
/// uniform workload from the pages each bin holds.
#[pyfunction]
pub fn placement_miss_probability(pages_per_bin: Vec<u64>, ways: u64) -> PyResult<Vec<f64>> {
    if ways == 0 {
        return Err(Failure::Config(RustConfigError::new(
            "ways",
            "0: a cache has at least 1 way",
        ))
        .into());
    }
    Ok(cachecolor_sim::analysis::placement::placement_miss_probability(&pages_per_bin, ways))
}

/// Section 2.3.2's stochastic hit rates: per working-set size `x` (bytes), the hit probability
/// of each level of `sizes` (bytes, L1 first) and, last, of missing them all.
#[pyfunction]
pub fn uniform_hit_rates(xs: Vec<f64>, sizes: Vec<f64>) -> PyResult<Vec<Vec<f64>>> {
    if sizes.is_empty()
        || sizes
            .iter()
            .any(|c| c.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
    {
        return Err(Failure::Config(RustConfigError::new(
            "cache_sizes",
            "give one positive size (bytes) per level, L1 first",
        ))
        .into());
    }
    Ok(xs
        .iter()
        .map(|&x| cachecolor_sim::analysis::placement::uniform_hit_rates(x, &sizes))
        .collect())
}

/// Eq. 3.1/3.2: expected K under random placement, binomial (`frames_per_bin` None: `(k_avg,
/// k_min, k_sd)`) or hypergeometric (`(k_avg, k_min, nan)`).
#[pyfunction]
#[pyo3(signature = (pages, bins, ways, frames_per_bin = None))]
pub fn expected_conflicts(
    pages: u64,
    bins: u64,
    ways: u64,
    frames_per_bin: Option<u64>,
) -> PyResult<(f64, f64, f64)> {
    use cachecolor_sim::analysis::bins;
    let bad = |field: &str, message: String| -> PyErr {
        Failure::Config(RustConfigError::new(field, message)).into()
    };
    if bins == 0 || ways == 0 {
        return Err(bad(
            "bins",
            format!("bins {bins}, ways {ways}: each must be at least 1"),
        ));
    }
    let k_min = pages.saturating_sub(bins * ways) as f64;
    match frames_per_bin {
        None => {
            let c = bins::expected_conflicts(pages, bins, ways);
            Ok((c.k_avg, c.k_min, c.k_sd))
        }
        Some(f) if bins.checked_mul(f).is_none_or(|total| pages > total) => Err(bad(
            "frames_per_bin",
            format!("{pages} pages do not fit in {bins} bins of {f} frames"),
        )),
        // The exact sum keeps a table of ln(n!) up to every frame (8 bytes each).
        Some(f) if bins * f > 1 << 26 => Err(bad(
            "frames_per_bin",
            format!(
                "{bins} bins x {f} frames: the exact hypergeometric is limited to 2^26 frames; \
                 with this many frames per bin it equals the binomial (frames_per_bin=None)"
            ),
        )),
        Some(f) => Ok((
            bins::expected_conflicts_hypergeometric(pages, bins, ways, f),
            k_min,
            f64::NAN,
        )),
    }
}

/// Azimi et al. section 3.2's allocation (the utility-based lookahead of `mrc-partition`,
/// `MrcPartition::lookahead`): `total` colors divided among processes whose misses with `c`
/// colors are `misses[i][c]`, each given at least `min`. `cachecolor.oracles` feeds it exact
/// curves (`oracle:mrc`).
#[pyfunction]
pub fn lookahead_allocation(misses: Vec<Vec<f64>>, total: u64, min: u64) -> PyResult<Vec<u64>> {
    if misses.is_empty() || misses.iter().any(|m| m.is_empty()) {
        return Err(Failure::Config(RustConfigError::new(
            "misses",
            "give at least one process, each with misses at 0 colors and up",
        ))
        .into());
    }
    if min * misses.len() as u64 > total {
        return Err(Failure::Config(RustConfigError::new(
            "min",
            format!(
                "{min} colors each for {} processes is more than the {total} colors",
                misses.len()
            ),
        ))
        .into());
    }
    Ok(cachecolor_sim::policy::MrcPartition::lookahead(
        &misses, total, min,
    ))
}
