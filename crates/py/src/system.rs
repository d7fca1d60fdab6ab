/*!
Whole-system runs for Python: a `SystemConfig` (machine, memory, policy, scheduler, processes)
as TOML or JSON text in (`[machine] preset = "NAME"` resolved first, the config's other
`[machine]` keys merged over the preset's), the run's report as one JSON document out
(`version`, `config` (the effective config, the preset expanded), `policy`, `allocator`,
`processes`, `cores`, `levels`, `invariants`). The run releases the GIL.
*/
use cachecolor_sim::system::{presets, System, SystemConfig};
use pyo3::prelude::*;

use crate::errors::{catch_panic, Result};

/// Parse a system config, resolving `[machine] preset` (`cachecolor_sim::system::presets`).
fn parse(text: &str, format: &str) -> Result<SystemConfig> {
    Ok(match format {
        "json" => presets::system_config_from_json(text)?,
        _ => presets::system_config_from_toml(text)?,
    })
}

/// Run the system described by `text` (`format` = "toml" or "json"); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (text, format = "toml"))]
pub fn simulate_system(py: Python<'_>, text: &str, format: &str) -> PyResult<String> {
    let config = parse(text, format)?;
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut system = System::new(&config)?;
            system.run()?;
            // The report carries the version and the effective config itself.
            Ok(serde_json::to_string(&system.report()).expect("reports serialise"))
        })
    })?;
    Ok(doc)
}
