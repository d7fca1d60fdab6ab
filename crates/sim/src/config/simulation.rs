/*!
The top-level config of a cache simulation (`cachecolor simulate CONFIG.toml`): the hierarchy,
and optionally a synthetic workload to run when no trace is given.

```toml
[hierarchy]
line_size = 64
[[hierarchy.levels]]
name = "L1D"
size = "32KiB"
ways = 8

[workload]            # optional
seed = 1
[[workload.phases]]
pattern = "uniform"
footprint = "64MiB"
references = 5000000
```
Later layers (machine, allocator, OS policy) extend this table; unknown keys are errors.
*/
use crate::cache::HierarchyConfig;
use crate::error::ConfigError;
use crate::workload::WorkloadSpec;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulationConfig {
    pub hierarchy: HierarchyConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSpec>,
}

impl SimulationConfig {
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let c: Self = super::from_toml(text)?;
        if let Some(v) = super::strict::input_value(text, "toml") {
            super::strict::reject_arrays_for_tables(&v, &c)?;
        }
        Ok(c)
    }

    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let c: Self = super::from_json(text)?;
        if let Some(v) = super::strict::input_value(text, "json") {
            super::strict::reject_arrays_for_tables(&v, &c)?;
        }
        Ok(c)
    }

    /// The config with every default filled in and cross-field rules checked, with field
    /// paths prefixed by their table (`hierarchy.levels[0].ways`).
    pub fn effective(&self) -> Result<Self, ConfigError> {
        let hierarchy = self
            .hierarchy
            .effective()
            .map_err(|e| ConfigError::new(prefixed("hierarchy", &e.field), e.message))?;
        Ok(SimulationConfig {
            hierarchy,
            workload: self.workload.clone(),
        })
    }
}

fn prefixed(table: &str, field: &str) -> String {
    if field.is_empty() {
        table.to_string()
    } else {
        format!("{table}.{field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_fields_are_named() {
        let e = SimulationConfig::from_toml("[hierarchy]\nlevelz = []\n").unwrap_err();
        assert!(e.to_string().contains("levelz"), "{e}");
        let e = SimulationConfig::from_toml(
            "[hierarchy]\n[[hierarchy.levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 0\n",
        )
        .unwrap()
        .effective()
        .unwrap_err();
        assert_eq!(e.field, "hierarchy.levels[0].ways");
        let e = SimulationConfig::from_toml(
            "[hierarchy]\n[[hierarchy.levels]]\nname = \"L1\"\nsize = \"32KiB\"\nways = 8\npolicy = \"belady\"\n",
        )
        .unwrap_err();
        assert!(
            e.field.contains("hierarchy.levels[0].policy") || e.to_string().contains("policy"),
            "{e}"
        );
        assert!(
            e.to_string().contains("lru"),
            "the message lists the valid policies: {e}"
        );
    }
}
