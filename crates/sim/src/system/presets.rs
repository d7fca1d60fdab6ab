/*!
Machine presets: the papers' machines as ready `[machine]` tables, and `detect` for the host.

A preset is a TOML file in `crates/sim/presets/` (embedded at build time) holding one `[machine]`
table: chips, the cache hierarchy, TLBs, page tables and timing of one of the papers' machines,
every number commented with the paper section it comes from, or marked "not in the paper;
vendor documentation" where the paper is silent. `detect` builds the same table for the host from
sysfs (`super::detect`).

A system config uses one with `[machine] preset = "NAME"`. Any other `[machine]` key in the same
config overrides the preset's: tables are merged key by key (deeply), anything else (numbers,
strings, arrays such as `hierarchy.levels`) replaces the preset's value. Resolution works on the
parsed document (TOML or JSON, as a `serde_json::Value`) before the strict typed parse, so errors
keep their field paths (`machine.timing.mlp`) whether a field came from the preset or the config.

Contract: every preset parses as a `MachineConfig` whose hierarchy and timing validate (tests
below); unknown names are errors that list the valid ones; nothing here reads files except
`detect` (sysfs).
*/
use super::detect;
use super::{MachineConfig, SystemConfig};
use crate::cache::hierarchy::HierarchyConfig;
use crate::cache::Serves;
use crate::error::ConfigError;
use crate::geometry::CacheGeometry;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// One preset: its name and its `[machine]` table as commented TOML.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    /// The paper whose machine it is, as cited in docs/system.md.
    pub paper: &'static str,
    /// The TOML file: a `[machine]` table with the sources of its numbers in comments.
    pub toml: &'static str,
}

/// The papers' machines, in the order ROCS, Azimi et al., COLORIS, the thesis's Table 4.1.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "ppc970fx",
        paper: "ROCS (MICRO 2008) Table 1",
        toml: include_str!("../../presets/ppc970fx.toml"),
    },
    Preset {
        name: "power5",
        paper: "Azimi et al. (SIGOPS OSR 2009) sections 4-5",
        toml: include_str!("../../presets/power5.toml"),
    },
    Preset {
        name: "xeon-e5506",
        paper: "COLORIS (PACT 2014) section 4",
        toml: include_str!("../../presets/xeon-e5506.toml"),
    },
    Preset {
        name: "core-i3-2100",
        paper: "COLORIS (PACT 2014) section 4.5",
        toml: include_str!("../../presets/core-i3-2100.toml"),
    },
    Preset {
        name: "opteron-2427",
        paper: "Szlavik thesis (2013) Table 4.1",
        toml: include_str!("../../presets/opteron-2427.toml"),
    },
    Preset {
        name: "power7-740",
        paper: "Szlavik thesis (2013) Table 4.1",
        toml: include_str!("../../presets/power7-740.toml"),
    },
    Preset {
        name: "core-i7-720qm",
        paper: "Szlavik thesis (2013) Table 4.1",
        toml: include_str!("../../presets/core-i7-720qm.toml"),
    },
];

/// The name that builds the host's machine from sysfs instead of a file.
pub const DETECT: &str = "detect";

/// Every name `[machine] preset` accepts: the presets, then `detect`.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).chain([DETECT]).collect()
}

fn unknown(name: &str) -> String {
    format!(
        "`{name}` is not a machine preset; the presets are: {}",
        names().join(", ")
    )
}

/// The preset called `name` (not `detect`).
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Parse TOML text into a JSON value; a syntax error names its line and column.
pub(crate) fn toml_value(text: &str) -> Result<Value, ConfigError> {
    toml::from_str::<Value>(text).map_err(|e| {
        let at = e.span().map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::new("", format!("{}{}", at.unwrap_or_default(), e.message()))
    })
}

/// The `[machine]` table of a preset file (or of detected TOML) as a JSON value.
fn machine_table(text: &str, what: &str) -> Result<Value, ConfigError> {
    let mut doc = toml_value(text)?;
    match doc.as_object_mut().and_then(|o| o.remove("machine")) {
        Some(m) if m.is_object() => Ok(m),
        _ => Err(ConfigError::new(
            "",
            format!("{what} has no [machine] table"),
        )),
    }
}

/// The `[machine]` TOML of `name`: a preset's file, comments included, or for `detect` the table
/// built from the sysfs CPU directory `cpu_dir` (normally `/sys/devices/system/cpu`).
pub fn machine_toml(name: &str, cpu_dir: &Path) -> Result<String, ConfigError> {
    if name == DETECT {
        return detect::detect(cpu_dir)
            .map(|d| d.toml)
            .map_err(|e| ConfigError::new("", format!("detect: {e}")));
    }
    preset(name)
        .map(|p| p.toml.to_string())
        .ok_or_else(|| ConfigError::new("", unknown(name)))
}

/// The `[machine]` table of `name` (a preset, or `detect` read from `cpu_dir`) as JSON.
pub fn machine_value(name: &str, cpu_dir: &Path) -> Result<Value, ConfigError> {
    machine_table(&machine_toml(name, cpu_dir)?, &format!("preset `{name}`"))
}

/// The typed `MachineConfig` of a preset or of `detect`.
pub fn machine_config(name: &str, cpu_dir: &Path) -> Result<MachineConfig, ConfigError> {
    deserialize(machine_value(name, cpu_dir)?)
}

/// Deep merge: tables merge key by key, anything else in `over` replaces `base`'s value.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Replace `machine.preset` in a parsed system config by the preset's table with the config's
/// other `[machine]` keys merged over it (detect reads the host's sysfs). A document without
/// `machine.preset` is left alone.
pub fn resolve(doc: &mut Value) -> Result<(), ConfigError> {
    resolve_with_sysfs(doc, Path::new(detect::SYSFS_CPU))
}

/// As `resolve`, reading `detect`'s CPUs from `cpu_dir` (tests use a fake sysfs tree).
pub fn resolve_with_sysfs(doc: &mut Value, cpu_dir: &Path) -> Result<(), ConfigError> {
    let Some(machine) = doc.get_mut("machine").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let Some(name) = machine.remove("preset") else {
        return Ok(());
    };
    let Value::String(name) = name else {
        return Err(ConfigError::new(
            "machine.preset",
            format!(
                "{name} is not a preset name: give a string, one of {}",
                names().join(", ")
            ),
        ));
    };
    let mut base = if name == DETECT {
        let d = detect::detect(cpu_dir).map_err(|e| {
            ConfigError::new(
                "machine.preset",
                format!(
                    "`detect` could not describe this host: {e}; name one of the presets instead ({})",
                    PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        machine_table(&d.toml, "the detected machine")?
    } else {
        let p = preset(&name).ok_or_else(|| ConfigError::new("machine.preset", unknown(&name)))?;
        machine_table(p.toml, &format!("preset `{name}`"))?
    };
    let overrides = std::mem::take(machine);
    merge(&mut base, Value::Object(overrides));
    *doc.get_mut("machine").expect("checked above") = base;
    // The preset processor's counters, for a realistic PMU.
    crate::pmu::hardware::apply_preset(doc, &name, super::config::PMU_IDEAL_DEFAULT);
    Ok(())
}

/// Deserialize a resolved document, keeping the failing field's path.
fn deserialize<T: serde::de::DeserializeOwned>(doc: Value) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })
}

/// Parse a system config from TOML, resolving `[machine] preset`.
pub fn system_config_from_toml(text: &str) -> Result<SystemConfig, ConfigError> {
    system_config_from_value(toml_value(text)?)
}

/// Parse a system config from JSON, resolving `machine.preset`.
pub fn system_config_from_json(text: &str) -> Result<SystemConfig, ConfigError> {
    let doc: Value = serde_json::from_str(text).map_err(|e| ConfigError::new("", e.to_string()))?;
    system_config_from_value(doc)
}

/// Resolve `machine.preset` in a parsed document and deserialize it strictly.
pub fn system_config_from_value(mut doc: Value) -> Result<SystemConfig, ConfigError> {
    resolve(&mut doc)?;
    deserialize(doc)
}

/// One cache level of a machine, for tables (`cachecolor machine --list`, docs/system.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSummary {
    pub name: String,
    pub size: u64,
    pub ways: u32,
    pub slices: u32,
    pub shared: bool,
    pub serves: Serves,
    /// Colors per slice with the hierarchy's page size (1 when a page covers every set).
    pub colors: u64,
}

/// What a machine is, in numbers: chips, cores and every level's geometry and colors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineSummary {
    pub name: String,
    pub paper: String,
    pub chips: u32,
    /// Cores per chip.
    pub cores: u32,
    pub line_size: u32,
    pub page_size: u64,
    pub levels: Vec<LevelSummary>,
    /// Colors of the last level (per slice).
    pub llc_colors: u64,
}

/// Summarise a machine config (its hierarchy must validate).
pub fn summarize(
    name: &str,
    paper: &str,
    m: &MachineConfig,
) -> Result<MachineSummary, ConfigError> {
    let h: HierarchyConfig = m
        .hierarchy
        .effective()
        .map_err(|e| ConfigError::new(format!("machine.hierarchy.{}", e.field), e.message))?;
    let mut levels = Vec::with_capacity(h.levels.len());
    for l in &h.levels {
        let g = CacheGeometry::sliced(
            l.size.0,
            l.ways,
            h.line_size,
            h.page_size.0,
            l.slices,
            l.slice_hash.clone(),
        )?;
        levels.push(LevelSummary {
            name: l.name.clone(),
            size: l.size.0,
            ways: l.ways,
            slices: l.slices,
            shared: l.shared.unwrap_or(false),
            serves: l.serves,
            colors: g.colors(),
        });
    }
    Ok(MachineSummary {
        name: name.to_string(),
        paper: paper.to_string(),
        chips: m.chips,
        cores: h.cores,
        line_size: h.line_size,
        page_size: h.page_size.0,
        llc_colors: levels.last().map_or(1, |l| l.colors),
        levels,
    })
}

/// Summaries of every preset (not `detect`), in `PRESETS` order.
pub fn summaries() -> Result<Vec<MachineSummary>, ConfigError> {
    PRESETS
        .iter()
        .map(|p| {
            let m = machine_config(p.name, Path::new(detect::SYSFS_CPU))?;
            summarize(p.name, p.paper, &m)
        })
        .collect()
}

#[cfg(test)]
mod tests;
