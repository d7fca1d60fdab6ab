/*!
Whole-system runs for Python: a `SystemConfig` (machine, memory, policy, scheduler, processes)
as TOML or JSON text in (`[machine] preset = "NAME"` resolved first, the config's other
`[machine]` keys merged over the preset's), the run's report as one JSON document out
(`version`, `config` (the effective config, the preset expanded), `policy`, `allocator`,
`processes`, `cores`, `levels`, `invariants`). The run releases the GIL and re-attaches once
per scheduler tick to call the optional progress callback with `(records, bytes, total_bytes,
total_records)` summed over the threads' sources, and once per block of records (at most
65,536: `System::run_watched`) to check for Ctrl-C / SIGTERM (`check_signals` runs Python's
handlers), so a stop does not wait for a tick however long it is. An exception there (a
`KeyboardInterrupt`, the callback's own) stops the run and is re-raised unchanged:
no report is made of a run cut short.
*/
use cachecolor_sim::config::strict;
use cachecolor_sim::system::{presets, System, SystemConfig};
use cachecolor_sim::ConfigError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{catch_panic, Failure, Result};
use crate::simulate::report;

/// Parse a system config, resolving `[machine] preset` (`cachecolor_sim::system::presets`).
///
/// Stricter than the derived parse: a table given as an array is rejected (`config::strict`), and
/// so are two processes with one name (results are keyed by name).
pub(crate) fn parse(text: &str, format: &str) -> Result<SystemConfig> {
    let config = match format {
        "json" => presets::system_config_from_json(text)?,
        _ => presets::system_config_from_toml(text)?,
    };
    if let Some(v) = strict::input_value(text, format) {
        strict::reject_arrays_for_tables(&v, &config)?;
    }
    let mut seen = std::collections::BTreeMap::new();
    for (i, p) in config.processes.iter().enumerate() {
        if let Some(j) = seen.insert(p.name.as_str(), i) {
            return Err(ConfigError::new(
                format!("processes[{i}].name"),
                format!(
                    "`{}` is also the name of processes[{j}]; every process needs its own name",
                    p.name
                ),
            )
            .into());
        }
    }
    Ok(config)
}

/// Run the system described by `text` (`format` = "toml" or "json"); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (text, format = "toml", progress = None))]
pub fn simulate_system(
    py: Python<'_>,
    text: &str,
    format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let config = parse(text, format)?;
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut system = System::new(&config)?;
            run_observed(&mut system, progress)?;
            Ok(document(&system))
        })
    })?;
    Ok(doc)
}

/// `simulate_system` keeping the exact per-page LLC profile (`System::keep_page_llc`): the
/// report as JSON and the profile as little-endian u64 rows `[pid, vpn, LLC accesses, LLC
/// misses]`, sorted by pid then page (NumPy: `frombuffer(b, "<u8").reshape(-1, 4)`).
#[pyfunction]
#[pyo3(signature = (text, format = "toml", progress = None))]
pub fn simulate_system_page_llc<'py>(
    py: Python<'py>,
    text: &str,
    format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, Bound<'py, PyBytes>)> {
    let config = parse(text, format)?;
    let progress = progress.as_ref();
    let (doc, rows) = py.detach(|| {
        catch_panic(|| {
            let mut system = System::new(&config)?;
            system.keep_page_llc();
            run_observed(&mut system, progress)?;
            let rows = system.page_llc().expect("kept");
            let mut bytes = Vec::with_capacity(rows.len() * 32);
            for row in &rows {
                for x in row {
                    bytes.extend_from_slice(&x.to_le_bytes());
                }
            }
            Ok((document(&system), bytes))
        })
    })?;
    Ok((doc, PyBytes::new(py, &rows)))
}

/// Run `system` to its end, re-attaching once per scheduler tick to check for Ctrl-C and call
/// `progress`; an exception there stops the run and is returned (no report of a cut run).
/// Shared by the built-in and the Python-written policies' runs (`policy.rs`).
pub(crate) fn run_observed(system: &mut System, progress: Option<&Py<PyAny>>) -> Result<()> {
    let stopped: std::cell::RefCell<Option<Failure>> = Default::default();
    let keep = |r: Result<()>| match r {
        Ok(()) => true,
        Err(e) => {
            *stopped.borrow_mut() = Some(e);
            false
        }
    };
    // Progress once per tick; Ctrl-C / SIGTERM also once per block of records (`run_watched`),
    // however long a tick is.
    let finished = system.run_watched(|p| keep(report(progress, p)), || keep(check_signals()))?;
    if !finished {
        return Err(stopped
            .into_inner()
            .expect("a stopped run keeps its reason"));
    }
    Ok(())
}

/// Whether a signal handler raised (Ctrl-C, SIGTERM): the GIL taken for that alone.
fn check_signals() -> Result<()> {
    Python::attach(|py| py.check_signals()).map_err(Failure::Py)
}

/// The report of a finished run as one JSON document (the report carries the version and the
/// effective config itself; shared with runs under a Python policy, `policy.rs`).
pub(crate) fn document(system: &System) -> String {
    serde_json::to_string(&system.report()).expect("reports serialise")
}

/// Check a system config and return it effective (the preset expanded, every default filled
/// in) as JSON: what a sweep hashes to key its points, and how it rejects a bad override
/// before running anything. With `check` the system is also built (not run), so the rules
/// `System::new` enforces (cache geometry, colors, pins, traces that open) are checked too.
#[pyfunction]
#[pyo3(signature = (text, format = "toml", check = true))]
pub fn effective_system_config(
    py: Python<'_>,
    text: &str,
    format: &str,
    check: bool,
) -> PyResult<String> {
    let config = parse(text, format)?;
    if check {
        py.detach(|| catch_panic(|| System::new(&config).map(drop).map_err(Into::into)))?;
    }
    Ok(serde_json::to_string(&config).expect("configs serialise"))
}
