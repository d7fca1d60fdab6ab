/*!
The one place where Rust errors become Python exceptions (STYLE.md: "one error enum in Rust
mapped once to a Python exception hierarchy at the boundary").

Python sees (all created here, re-exported by `cachecolor/__init__.py`):

```text
ValueError
 └─ cachecolor.CachecolorError
     ├─ cachecolor.ConfigError       .field  = "hierarchy.levels[1].ways" (or "")
     ├─ cachecolor.TraceError        .offset = byte offset in the file (or None)
     ├─ cachecolor.SimulationError   an internal failure of a run (a panic, caught here)
     └─ cachecolor.CaptureError      .summary = dict when the traced program failed but its
                                     trace was kept, else None
```
I/O errors (a missing file, a directory that cannot be written) stay Python `OSError`s
(`FileNotFoundError`, ...), whose message already names the path. A Python exception raised by a
progress callback, or `KeyboardInterrupt` from Ctrl-C, is re-raised unchanged.

Contract: every fallible function of the glue returns `Result<_, Failure>`; `Failure` is `Send`
so it can leave a `py.detach` closure, and `From<Failure> for PyErr` is the only conversion.
*/
use cachecolor_capture::CaptureError as RustCaptureError;
use cachecolor_sim::{
    ConfigError as RustConfigError, Error as SimError, TraceError as RustTraceError,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pyo3::create_exception!(
    cachecolor,
    CachecolorError,
    PyValueError,
    "Base class of every error cachecolor raises for bad input or a failed run."
);
pyo3::create_exception!(
    cachecolor,
    ConfigError,
    CachecolorError,
    "An invalid configuration. `.field` is the dotted path of the field (e.g. \"hierarchy.levels[1].ways\")."
);
pyo3::create_exception!(
    cachecolor,
    TraceError,
    CachecolorError,
    "A trace that cannot be read. `.offset` is the byte offset where the problem was found, or None."
);
pyo3::create_exception!(
    cachecolor,
    SimulationError,
    CachecolorError,
    "A simulation that could not complete for a reason other than its config or its trace."
);
pyo3::create_exception!(
    cachecolor,
    CaptureError,
    CachecolorError,
    "A program capture that failed. `.summary` holds the capture summary when a trace was kept."
);

/// Everything the glue can fail with.
#[derive(Debug)]
pub enum Failure {
    Config(RustConfigError),
    Trace(RustTraceError),
    Io(std::io::Error),
    Capture(RustCaptureError),
    /// A run that failed inside the simulator (a caught panic).
    Simulation(String),
    /// Bad arguments to a glue function (wrong lengths, out-of-range codes).
    Argument(String),
    /// A Python exception (from a callback, a signal, a conversion): re-raised as it is.
    Py(PyErr),
}

pub type Result<T, E = Failure> = std::result::Result<T, E>;

impl From<SimError> for Failure {
    fn from(e: SimError) -> Self {
        match e {
            SimError::Config(c) => Failure::Config(c),
            SimError::Trace(t) => Failure::Trace(t),
            SimError::Io(io) => Failure::Io(io),
        }
    }
}

impl From<RustConfigError> for Failure {
    fn from(e: RustConfigError) -> Self {
        Failure::Config(e)
    }
}

impl From<RustTraceError> for Failure {
    fn from(e: RustTraceError) -> Self {
        Failure::Trace(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<RustCaptureError> for Failure {
    fn from(e: RustCaptureError) -> Self {
        Failure::Capture(e)
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Py(e)
    }
}

/// Prefix a config error's field path with the table it came from (`workload.` + `phases[0]...`).
pub fn in_table(table: &str, e: RustConfigError) -> Failure {
    let field = if e.field.is_empty() {
        table.to_string()
    } else {
        format!("{table}.{}", e.field)
    };
    Failure::Config(RustConfigError::new(field, e.message))
}

fn with_attrs(
    err: PyErr,
    attrs: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<()>,
) -> PyErr {
    Python::attach(|py| {
        let value = err.value(py);
        match attrs(py, value.as_any()) {
            Ok(()) => err,
            Err(e) => e,
        }
    })
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Config(e) => {
                let field = e.field.clone();
                with_attrs(ConfigError::new_err(e.to_string()), |_, v| {
                    v.setattr("field", field)
                })
            }
            Failure::Trace(e) => {
                let offset = e.offset;
                with_attrs(TraceError::new_err(e.to_string()), |_, v| {
                    v.setattr("offset", offset)
                })
            }
            Failure::Io(e) => PyErr::from(e),
            Failure::Capture(e) => {
                let summary = e.summary().map(crate::capture::summary_json);
                let code = match &e {
                    RustCaptureError::ProgramFailed { code, .. } => Some(*code),
                    _ => None,
                };
                // An I/O error inside a capture is still the capture's failure: one class.
                with_attrs(CaptureError::new_err(e.to_string()), |py, v| {
                    let s = match summary {
                        Some(text) => py.import("json")?.call_method1("loads", (text,))?.unbind(),
                        None => py.None(),
                    };
                    v.setattr("summary", s)?;
                    v.setattr("exit_code", code)
                })
            }
            Failure::Simulation(msg) => SimulationError::new_err(msg),
            Failure::Argument(msg) => PyValueError::new_err(msg),
            Failure::Py(e) => e,
        }
    }
}

/// Run `f`, turning a panic into a `SimulationError` (a panic is a bug, but the user should get
/// a message, not a crashed interpreter).
pub fn catch_panic<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(Failure::Simulation(format!(
                "internal error in the simulator (please report it): {msg}"
            )))
        }
    }
}

/// Register the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CachecolorError", py.get_type::<CachecolorError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    // Class attributes so `.field` / `.offset` / `.summary` exist even on instances raised from
    // Python code with a bare message.
    py.get_type::<ConfigError>().setattr("field", "")?;
    py.get_type::<TraceError>().setattr("offset", py.None())?;
    py.get_type::<CaptureError>()
        .setattr("summary", py.None())?;
    py.get_type::<CaptureError>()
        .setattr("exit_code", py.None())?;
    Ok(())
}
