/*!
Full-system capture for Python (`cachecolor.fullsys.capture_system`, `cachecolor trace capture
--system`): boots the packaged kernel under qemu-system-x86_64 with the program in a minimal
initramfs and traces kernel and user code (`cachecolor_capture::capture_system`, whose module
documentation is the contract). Returns the capture summary and the guest's report as one JSON
object; errors are `CaptureError`s like user-mode capture's. Progress and Ctrl-C as in
`capture.rs`: the GIL is released, the callback re-attaches briefly, and the first Python
exception is raised once the capture returns (QEMU is then already gone).
*/
use std::path::PathBuf;
use std::time::Duration;

use cachecolor_capture::{RecordReplay, SystemOptions};
use cachecolor_sim::trace::Progress;
use pyo3::prelude::*;
use serde_json::json;

use crate::capture::summary_json;
use crate::errors::{catch_panic, Failure};
use crate::simulate::report;

/// Capture `program args` in a booted guest into the native trace `out`. Returns JSON:
/// `{"summary": {...}, "guest": {"utime", "stime", "hz", "boot_seconds", "run_seconds",
/// "output", "kernel"}}`.
#[pyfunction]
#[pyo3(signature = (program, args, out, kernel = None, guest_files = Vec::new(), memory_mib = 512, boot_timeout = 600.0, max_records = None, progress = None, record = None, replay = None))]
#[allow(clippy::too_many_arguments)]
pub fn capture_system(
    py: Python<'_>,
    program: String,
    args: Vec<String>,
    out: PathBuf,
    kernel: Option<PathBuf>,
    guest_files: Vec<PathBuf>,
    memory_mib: u32,
    boot_timeout: f64,
    max_records: Option<u64>,
    progress: Option<Py<PyAny>>,
    record: Option<PathBuf>,
    replay: Option<PathBuf>,
) -> PyResult<String> {
    if !(boot_timeout.is_finite() && boot_timeout > 0.0) {
        return Err(Failure::Argument(format!(
            "boot_timeout {boot_timeout}: a positive number of seconds"
        ))
        .into());
    }
    let opts = SystemOptions {
        kernel,
        guest_files,
        memory_mib,
        boot_timeout: Duration::from_secs_f64(boot_timeout),
        max_records,
        record_replay: match (record, replay) {
            (Some(_), Some(_)) => {
                return Err(Failure::Argument(
                    "record and replay: give one record/replay log, to write or to replay".into(),
                )
                .into())
            }
            (Some(p), None) => Some(RecordReplay::Record(p)),
            (None, Some(p)) => Some(RecordReplay::Replay(p)),
            (None, None) => None,
        },
    };
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut failed: Option<Failure> = None;
            let result =
                cachecolor_capture::capture_system(&program, &args, &out, &opts, &mut |n| {
                    if failed.is_none() {
                        if let Err(e) = report(
                            progress,
                            Progress {
                                records: n,
                                ..Progress::default()
                            },
                        ) {
                            failed = Some(e);
                        }
                    }
                });
            if let Some(e) = failed {
                return Err(e);
            }
            let (summary, guest) = result?;
            let summary: serde_json::Value =
                serde_json::from_str(&summary_json(&summary)).expect("summary JSON");
            Ok(json!({
                "summary": summary,
                "guest": {
                    "utime": guest.utime,
                    "stime": guest.stime,
                    "hz": guest.hz,
                    "boot_seconds": guest.boot_seconds,
                    "run_seconds": guest.run_seconds,
                    "output": guest.output,
                    "kernel": guest.kernel.display().to_string(),
                },
            })
            .to_string())
        })
    })?;
    Ok(doc)
}

/// The kernel image a full-system capture boots (`kernel`, else `$CACHECOLOR_KERNEL`, else the
/// newest `/boot/vmlinuz-*`): the capture's own look-up, so the workload suite records the
/// kernel the capture will boot. Raises `CaptureError` when there is none.
#[pyfunction]
#[pyo3(signature = (kernel = None))]
pub fn locate_kernel(kernel: Option<PathBuf>) -> PyResult<String> {
    cachecolor_capture::system::locate_kernel(kernel.as_deref())
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| Failure::from(e).into())
}

/// Check, without running anything, that full-system capture can run here: qemu-system,
/// BusyBox and a kernel image found as the capture finds them, and the system-mode plugin
/// and guest launcher compiled into this build. Raises `CaptureError` naming what is missing.
#[pyfunction]
#[pyo3(signature = (kernel = None))]
pub fn check_system(kernel: Option<PathBuf>) -> PyResult<()> {
    cachecolor_capture::system::check_system(kernel.as_deref()).map_err(|e| Failure::from(e).into())
}
