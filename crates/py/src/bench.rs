/*!
Cachetest for Python (`cachecolor.bench`): sweeps, co-runs, the page-color probe and the PMU
event probe of `cachecolor_bench`. Configs and results cross as JSON text.

Measuring runs with the GIL released; after every trial the glue re-attaches to report progress
and to check for Ctrl-C (`check_signals`), so an interrupt stops the run between trials and
unwinds it: buffers are unmapped and any hugetlb reservation is restored by their destructors
before `KeyboardInterrupt` reaches Python. Bad input becomes `ConfigError` (its `.field` is the
request's field); what this machine or process cannot do becomes `CachecolorError`.
*/
use cachecolor_bench::{probe, sweep, Error as BenchError};
use pyo3::prelude::*;

use crate::errors::{catch_panic, CachecolorError, Failure};

fn failure(e: BenchError, py_err: &mut Option<PyErr>) -> Failure {
    match e {
        BenchError::BadInput(m) => {
            // "field: what" names its field once (the message kept the prefix, and the error's
            // display added the field again: "trials: trials: must be at least 1").
            match m.split_once(": ").filter(|(f, _)| !f.contains(' ')) {
                Some((field, what)) => {
                    Failure::Config(cachecolor_sim::ConfigError::new(field, what.to_string()))
                }
                None => Failure::Config(cachecolor_sim::ConfigError::new("", m)),
            }
        }
        BenchError::Unsupported(m) => Failure::Py(CachecolorError::new_err(m)),
        BenchError::Interrupted => match py_err.take() {
            Some(e) => Failure::Py(e),
            None => Failure::Py(pyo3::exceptions::PyKeyboardInterrupt::new_err(
                "interrupted",
            )),
        },
    }
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T, Failure> {
    serde_json::from_str(json)
        .map_err(|e| Failure::Config(cachecolor_sim::ConfigError::new(what, e.to_string())))
}

/// Runs `f` with the GIL released and a hook that reports progress and checks for Ctrl-C.
fn with_hook<T: Send>(
    py: Python<'_>,
    progress: Option<&Py<PyAny>>,
    f: impl FnOnce(sweep::Hook) -> Result<T, BenchError> + Send,
) -> Result<T, Failure> {
    py.detach(|| {
        catch_panic(|| {
            let mut py_err: Option<PyErr> = None;
            let r = {
                let mut hook = |p: &sweep::Progress| -> Result<(), BenchError> {
                    Python::attach(|py| -> PyResult<()> {
                        py.check_signals()?;
                        if let Some(cb) = progress {
                            cb.call1(py, (p.done, p.total, p.line))?;
                        }
                        Ok(())
                    })
                    .map_err(|e| {
                        py_err = Some(e);
                        BenchError::Interrupted
                    })
                };
                f(&mut hook)
            };
            r.map_err(|e| failure(e, &mut py_err))
        })
    })
}

/// A working-set sweep (`sweep::BenchConfig` as JSON); the result as JSON.
#[pyfunction]
#[pyo3(signature = (config, progress = None))]
pub fn bench_sweep(py: Python<'_>, config: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let cfg: sweep::BenchConfig = parse("bench", config)?;
    let r = with_hook(py, progress.as_ref(), |hook| sweep::run_sweep(&cfg, hook))?;
    Ok(serde_json::to_string(&r).expect("serialisable"))
}

/// A synchronised co-run over 1..N cores (`sweep::CorunConfig` as JSON).
#[pyfunction]
#[pyo3(signature = (config, progress = None))]
pub fn bench_corun(py: Python<'_>, config: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let cfg: sweep::CorunConfig = parse("corun", config)?;
    let r = with_hook(py, progress.as_ref(), |hook| sweep::run_corun(&cfg, hook))?;
    Ok(serde_json::to_string(&r).expect("serialisable"))
}

/// The page-color probe (`probe::ProbeConfig` as JSON).
#[pyfunction]
pub fn bench_probe(py: Python<'_>, config: &str) -> PyResult<String> {
    let cfg: probe::ProbeConfig = parse("probe", config)?;
    let r = with_hook(py, None, |_| probe::run_probe(&cfg))?;
    Ok(serde_json::to_string(&r).expect("serialisable"))
}

/// Each PMU event probed on its own, and the machine facts (JSON).
#[pyfunction]
pub fn bench_environment(py: Python<'_>) -> PyResult<String> {
    let (ev, m) = py.detach(|| (cachecolor_bench::pmu::probe_events(), sweep::machine()));
    Ok(serde_json::json!({"pmu": ev, "machine": m}).to_string())
}
