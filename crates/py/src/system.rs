/*!
Whole-system runs for Python: a `SystemConfig` (machine, memory, policy, scheduler, processes)
as TOML or JSON text in (`[machine] preset = "NAME"` resolved first, the config's other
`[machine]` keys merged over the preset's), the run's report as one JSON document out
(`version`, `config` (the effective config, the preset expanded), `policy`, `allocator`,
`processes`, `cores`, `levels`, `invariants`). The run releases the GIL.
*/
use cachecolor_sim::config::strict;
use cachecolor_sim::system::{presets, System, SystemConfig};
use cachecolor_sim::ConfigError;
use pyo3::prelude::*;
use serde_json::{json, Value};

use crate::errors::{catch_panic, Result};

/// Parse a system config, resolving `[machine] preset` (`cachecolor_sim::system::presets`).
///
/// Stricter than the derived parse (defect 6): a table given as an array is rejected
/// (`config::strict`), and so are two processes with one name (results are keyed by name).
fn parse(text: &str, format: &str) -> Result<SystemConfig> {
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

/// Check a system config without running it (`cachecolor report` checks every config before the
/// first run, so a bad one cannot leave a partial table); returns the effective config as JSON.
#[pyfunction]
#[pyo3(signature = (text, format = "toml"))]
pub fn check_system_config(py: Python<'_>, text: &str, format: &str) -> PyResult<String> {
    let config = parse(text, format)?;
    // Building the system applies every rule a run applies (scheduler, memory, placement) and
    // opens every trace, without simulating a cycle.
    py.detach(|| catch_panic(|| System::new(&config).map(|_| ()).map_err(Into::into)))?;
    Ok(serde_json::to_string(&config).expect("configs serialise"))
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
            let report = system.report();
            let mut doc = serde_json::Map::new();
            doc.insert("version".into(), json!(cachecolor_sim::VERSION));
            doc.insert(
                "config".into(),
                serde_json::to_value(&config).expect("configs serialise"),
            );
            if let Value::Object(r) = serde_json::to_value(&report).expect("reports serialise") {
                doc.extend(r);
            }
            Ok(Value::Object(doc).to_string())
        })
    })?;
    Ok(doc)
}
