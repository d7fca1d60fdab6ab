/*!
Machine presets for Python (`cachecolor.presets.machine`, `cachecolor machine`): the names, a
preset's `[machine]` TOML as written (with its sources in comments) or as a JSON table, the
detected host's, and a summary of every preset's geometry (chips, cores, levels, colors) for
tables. `cpu_dir` points `detect` at a sysfs CPU directory other than the host's (tests, or a copy
of another machine's `/sys/devices/system/cpu`).
*/
use std::path::{Path, PathBuf};

use cachecolor_sim::system::{detect, presets};
use pyo3::prelude::*;

use crate::errors::Result;

fn dir(cpu_dir: &Option<PathBuf>) -> &Path {
    cpu_dir
        .as_deref()
        .unwrap_or_else(|| Path::new(detect::SYSFS_CPU))
}

/// Every name `[machine] preset` accepts (the presets, then "detect").
#[pyfunction]
pub fn machine_names() -> Vec<&'static str> {
    presets::names()
}

/// The `[machine]` TOML of a preset (its file, comments included) or of "detect".
#[pyfunction]
#[pyo3(signature = (name, cpu_dir = None))]
pub fn machine_toml(name: &str, cpu_dir: Option<PathBuf>) -> Result<String> {
    Ok(presets::machine_toml(name, dir(&cpu_dir))?)
}

/// The `[machine]` table of a preset or of "detect", as JSON.
#[pyfunction]
#[pyo3(signature = (name, cpu_dir = None))]
pub fn machine_json(name: &str, cpu_dir: Option<PathBuf>) -> Result<String> {
    Ok(presets::machine_value(name, dir(&cpu_dir))?.to_string())
}

/// Every preset's summary (name, paper, chips, cores, line and page size, levels, llc_colors)
/// as a JSON list; with `name`, the summary of that one machine ("detect" included).
#[pyfunction]
#[pyo3(signature = (name = None, cpu_dir = None))]
pub fn machine_summaries(name: Option<&str>, cpu_dir: Option<PathBuf>) -> Result<String> {
    let list = match name {
        None => presets::summaries()?,
        Some(n) => {
            let m = presets::machine_config(n, dir(&cpu_dir))?;
            let paper = presets::preset(n).map_or("", |p| p.paper);
            vec![presets::summarize(n, paper, &m)?]
        }
    };
    Ok(serde_json::to_string(&list).expect("summaries serialise"))
}
