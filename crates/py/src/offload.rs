/*!
OS off-load runs for Python (`cachecolor offload`): an off-load config (`[offload]` +
`[workload]`, `cachecolor_sim::oscache::offload::OffloadFile`) as TOML or JSON text in, the
run's report as one JSON document out. The run releases the GIL.
*/
use cachecolor_sim::oscache::offload;
use pyo3::prelude::*;

use crate::errors::catch_panic;

/// Run the off-load config `text` (`format` = "toml" or "json"); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (text, format = "toml"))]
pub fn simulate_offload(py: Python<'_>, text: &str, format: &str) -> PyResult<String> {
    let out = py.detach(|| catch_panic(|| Ok(offload::run_text(text, format)?.to_string())))?;
    Ok(out)
}
