//! Attribution (`cachecolor annotate`) for Python: `cachecolor_sim::analysis::attribute` on a
//! native trace with PCs, its tallies handed back as little-endian arrays.
use std::path::PathBuf;

use cachecolor_sim::analysis::attribute::attribute;
use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::trace::native::TraceReader;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{catch_panic, in_table, Failure};
use crate::simulate::{parse_config, report};

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
            let a = attribute(&mut h, levels, &mut r, |p| report(progress, p))?;
            Ok((a.pcs, a.pages, a.levels, a.records, a.unknown_pc))
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

/// `symbolize`'s answer for one address: function, file, line, nearest symbol.
type Place = (Option<String>, Option<String>, u32, Option<String>);

/// For each of `addresses` (link-time addresses of the ELF file `path`), `(function, file,
/// line, nearest)`: the function (demangled; the innermost where inlined) and source line from
/// the file's debug information (found apart by build ID or debug link too), else the symbol
/// containing the address; `line` 0 where unknown; `nearest`, only where the function is
/// unknown, the nearest text symbol at or below. A file that cannot be read places nothing.
#[pyfunction]
pub fn symbolize(py: Python<'_>, path: PathBuf, addresses: Vec<u64>) -> PyResult<Vec<Place>> {
    let places =
        py.detach(|| catch_panic(|| Ok(cachecolor_sim::symbolize::symbolize(&path, &addresses))))?;
    Ok(places
        .into_iter()
        .map(|p| (p.function, p.file, p.line, p.nearest))
        .collect())
}
