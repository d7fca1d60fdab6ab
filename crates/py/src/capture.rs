/*!
Program capture and host facts for Python: `capture` runs an unmodified program under QEMU (or
Valgrind lackey) via `cachecolor_capture` and returns its summary as JSON; `host_caches` lists
the host's caches as sysfs describes them (`cachecolor_bench::host_caches`), from which the
Python front builds the "this machine" preset.

The capture runs with the GIL released; its progress callback (records so far, about four times
a second, also while the program is quiet) re-attaches briefly. The first Python exception (a
callback error, Ctrl-C, SIGTERM through the CLI's handler) asks the capture to stop
(`cachecolor_capture::request_stop`): the program and tracer are killed, no trace is kept, the
temporary files are removed, and the exception is raised once the capture returns.
*/
use std::path::PathBuf;

use cachecolor_capture::{Backend, CaptureOptions, CaptureSummary};
use cachecolor_sim::trace::Progress;
use pyo3::prelude::*;
use serde_json::json;

use crate::errors::{catch_panic, Failure};
use crate::simulate::report;

/// A capture summary as JSON (also attached to `CaptureError.summary`).
pub fn summary_json(s: &CaptureSummary) -> String {
    json!({
        "backend": s.backend.name(),
        "out": s.out.display().to_string(),
        "records": s.records,
        "loads": s.loads,
        "stores": s.stores,
        "ifetches": s.ifetches,
        "modifies": s.modifies,
        "threads": s.threads,
        "exit_code": s.exit_code,
        "seconds": s.seconds,
        "records_per_second": s.records_per_second(),
        "truncated": s.truncated,
        "complete": s.complete,
    })
    .to_string()
}

/// Capture `program args` into the native trace `out`. Returns the summary as JSON.
#[pyfunction]
#[pyo3(signature = (program, args, out, backend = "auto", ifetch = true, max_records = None, progress = None, syscalls = false, skip_instructions = 0, pcs = true, bbv_interval = 0, bbv_out = None, max_instructions = None))]
#[allow(clippy::too_many_arguments)]
pub fn capture(
    py: Python<'_>,
    program: String,
    args: Vec<String>,
    out: PathBuf,
    backend: &str,
    ifetch: bool,
    max_records: Option<u64>,
    progress: Option<Py<PyAny>>,
    syscalls: bool,
    skip_instructions: u64,
    pcs: bool,
    bbv_interval: u64,
    bbv_out: Option<PathBuf>,
    max_instructions: Option<u64>,
) -> PyResult<String> {
    let backend = Backend::parse(backend).map_err(Failure::from)?;
    let opts = CaptureOptions {
        backend,
        ifetch,
        max_records,
        syscalls,
        skip_instructions,
        pcs,
        bbv_interval,
        bbv_out,
        max_instructions,
    };
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut failed: Option<Failure> = None;
            let result = cachecolor_capture::capture(&program, &args, &out, &opts, &mut |n| {
                if failed.is_none() {
                    if let Err(e) = report(
                        progress,
                        Progress {
                            records: n,
                            ..Progress::default()
                        },
                    ) {
                        // Ctrl-C / SIGTERM / a callback error: stop the capture now, keep
                        // nothing, and raise the error once it has returned.
                        cachecolor_capture::request_stop();
                        failed = Some(e);
                    }
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
            Ok(summary_json(&result?))
        })
    })?;
    Ok(doc)
}

/// The backends `capture` accepts.
#[pyfunction]
pub fn capture_backends() -> Vec<&'static str> {
    Backend::NAMES.to_vec()
}

/// The host's caches (CPU 0) as `(level, type, size, ways, line_size, shared_by)` tuples, in
/// level order; empty when sysfs does not describe them.
#[pyfunction]
pub fn host_caches() -> Vec<(u32, String, u64, u32, u32, u32)> {
    cachecolor_bench::host_caches()
        .into_iter()
        .map(|c| (c.level, c.kind, c.size, c.ways, c.line_size, c.shared_by))
        .collect()
}
