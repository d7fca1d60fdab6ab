/*!
Configuration types shared by every part of the simulator. Parsing is strict: unknown keys are
errors and every error names its field path (`levels[1].ways`) and what is allowed (STYLE.md:
validating parse, then a build step that checks cross-field rules).
*/
mod simulation;
mod size;

pub use simulation::SimulationConfig;
pub use size::Size;

use crate::error::ConfigError;
use serde::de::DeserializeOwned;

/// Deserialize `T` from a JSON string, reporting the failing field's path.
pub fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })
}

/// Deserialize `T` from TOML text, reporting the failing field's path.
pub fn from_toml<T: DeserializeOwned>(text: &str) -> Result<T, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().message().to_string();
        ConfigError::new(if path == "." { String::new() } else { path }, msg)
    })
}
