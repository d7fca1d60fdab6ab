/*!
The uniprocessor of Nellans et al. sections 3 and 5 for Python (`cachecolor oscache`): one
machine (`cachecolor_sim::oscache::model::RunConfig`, an `examples/oscache/` machine file as TOML
or JSON text) run on a workload (`[workload]`-style spec as JSON text) or a trace file; the
`ModelReport` (characterisation counters, IPC, bank predictions, invariants) comes back as one
JSON document. The run releases the GIL and re-attaches once per block for progress and Ctrl-C.
*/
use std::path::PathBuf;

use cachecolor_sim::oscache::model::{require_os_information, Model, RunConfig};
use cachecolor_sim::trace::{self, Format, RecordSource};
use cachecolor_sim::workload::{Workload, WorkloadSpec};
use pyo3::prelude::*;
use serde_json::json;

use crate::errors::{catch_panic, in_table, Failure, Result};
use crate::simulate::report;

fn machine(text: &str, format: &str) -> Result<RunConfig> {
    match format {
        "toml" => Ok(RunConfig::from_toml(text)?),
        "json" => {
            let c: RunConfig = serde_json::from_str(text)
                .map_err(|e| cachecolor_sim::ConfigError::new("", e.to_string()))?;
            c.model.validate().map_err(|e| in_table("model", e))?;
            Ok(c)
        }
        other => Err(Failure::Argument(format!(
            "machine format {other:?}: expected \"toml\" or \"json\""
        ))),
    }
}

/// Run the machine `machine` (TOML or JSON text, `machine_format`) on `workload_json` (a
/// workload spec as JSON; default: the machine file's own `[workload]`) or on the trace file
/// `trace` (`trace_format`). Records without any privileged one are rejected (no OS
/// information). Returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (machine_text, machine_format = "toml", workload_json = None, trace = None, trace_format = "native", progress = None))]
pub fn oscache_model(
    py: Python<'_>,
    machine_text: &str,
    machine_format: &str,
    workload_json: Option<&str>,
    trace: Option<PathBuf>,
    trace_format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let cfg = machine(machine_text, machine_format)?;
    let format = Format::parse(trace_format).map_err(Failure::from)?;
    if trace.is_some() && workload_json.is_some() {
        return Err(Failure::Argument("give a workload or a trace, not both".into()).into());
    }
    let spec: Option<WorkloadSpec> = match workload_json {
        Some(t) => Some(serde_json::from_str(t).map_err(|e| {
            in_table(
                "workload",
                cachecolor_sim::ConfigError::new("", e.to_string()),
            )
        })?),
        None => cfg.workload.clone(),
    };
    let progress = progress.as_ref();
    let out = py.detach(|| {
        catch_panic(|| {
            let (mut src, what, source): (Box<dyn RecordSource + Send>, &str, _) =
                match (&trace, &spec) {
                    (Some(path), _) => (
                        trace::open(path, format)?,
                        "trace",
                        json!({"kind": "trace", "path": path.display().to_string(), "format": format.name()}),
                    ),
                    (None, Some(w)) => (
                        Box::new(Workload::new(w).map_err(|e| in_table("workload", e))?),
                        "workload",
                        json!({"kind": "workload"}),
                    ),
                    (None, None) => {
                        return Err(Failure::Argument(
                            "nothing to run: give a workload or a trace (the machine file has no [workload])"
                                .into(),
                        ))
                    }
                };
            let mut m = Model::new(&cfg.model).map_err(|e| in_table("model", e))?;
            let mut buf = Vec::new();
            while src.next_block(&mut buf)? {
                for r in &buf {
                    m.step(r);
                }
                report(progress, src.progress())?;
            }
            let rep = m.finish();
            require_os_information(&rep, what)?;
            let mut doc = serde_json::to_value(&rep).expect("reports serialise");
            doc["version"] = json!(cachecolor_sim::VERSION);
            doc["config"] = serde_json::to_value(&cfg.model).expect("configs serialise");
            doc["source"] = source;
            Ok(doc.to_string())
        })
    })?;
    Ok(out)
}
