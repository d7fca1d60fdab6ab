//! An off-load config file (`cachecolor offload`): what each user core runs, the run, and its
//! JSON report.

use super::*;

/// An off-load config file: `[offload]` (machine and mechanism) and what each user core runs:
/// either `[workload]` (a synthetic workload; core `u` with seed `seed + u`) or `trace = PATH`
/// (a captured trace, `trace_format` default native, replayed whole by every user core: all
/// its threads' records in order, as one thread; core `u`'s user addresses moved by `u << 44`
/// as for workloads, its privileged ones shared).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OffloadFile {
    #[serde(default)]
    pub offload: OffloadConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_format: Option<String>,
}

/// Run an off-load config given as a JSON value (from TOML or JSON text); the report as JSON:
/// `version`, `config`, `mean_ipc`, `makespan`, `os_time_fraction`, `privileged_fraction`,
/// `user` (per core), `os`, `accuracy` (summed over user cores, with fractions), `phases`,
/// `max_queue_wait`, `invariants`.
pub fn run_value(doc: serde_json::Value) -> Result<serde_json::Value, Error> {
    let file: OffloadFile = serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        ConfigError::new(
            if path == "." { String::new() } else { path },
            e.inner().to_string(),
        )
    })?;
    let r = run_file(&file)?;
    Ok(report_json(&file, &r))
}

/// Run a parsed off-load config.
pub fn run_file(file: &OffloadFile) -> Result<OffloadResult, Error> {
    let model = OffloadModel::new(&file.offload)?;
    let cores = file.offload.user_cores as u64;
    match (&file.workload, &file.trace) {
        (Some(workload), None) => {
            if file.trace_format.is_some() {
                return Err(ConfigError::new(
                    "trace_format",
                    "given without a trace: it applies to `trace = PATH` only",
                )
                .into());
            }
            workload
                .validate()
                .map_err(|e| ConfigError::new(format!("workload.{}", e.field), e.message))?;
            let threads = (0..cores)
                .map(|u| {
                    let mut w = workload.clone();
                    w.seed = w.seed.wrapping_add(u);
                    Ok(Relocated {
                        src: Workload::new(&w)?,
                        offset: u << 44,
                    })
                })
                .collect::<Result<Vec<_>, ConfigError>>()?;
            model.run(threads, &SyscallIdentity)
        }
        (None, Some(path)) => {
            let name = file.trace_format.as_deref().unwrap_or("native");
            let format = crate::trace::Format::parse(name).map_err(|_| {
                ConfigError::new(
                    "trace_format",
                    format!("{name:?}: one of {}", crate::trace::Format::NAMES),
                )
            })?;
            let threads = (0..cores)
                .map(|u| {
                    Ok(Relocated {
                        src: crate::trace::open(path, format)?,
                        offset: u << 44,
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            model.run(threads, &TraceIdentity)
        }
        (Some(_), Some(_)) => {
            Err(ConfigError::new("trace", "[workload] and trace are exclusive: give one").into())
        }
        (None, None) => Err(ConfigError::new(
            "workload",
            "missing: give [workload] (or workload_file) or trace = PATH",
        )
        .into()),
    }
}

/// Run an off-load config given as text (`format` = "toml" or "json").
pub fn run_text(text: &str, format: &str) -> Result<serde_json::Value, Error> {
    let doc: serde_json::Value = match format {
        "json" => serde_json::from_str(text).map_err(|e| ConfigError::new("", e.to_string()))?,
        "toml" => toml::from_str(text).map_err(|e| ConfigError::new("", e.to_string()))?,
        f => return Err(ConfigError::new("format", format!("{f:?}: \"toml\" or \"json\"")).into()),
    };
    run_value(doc)
}

/// The JSON report of one run.
pub fn report_json(file: &OffloadFile, r: &OffloadResult) -> serde_json::Value {
    use serde_json::json;
    let acc = r.total_accuracy();
    let thread: u64 = r.user.iter().map(|u| u.thread_instructions).sum();
    let privileged: u64 = r.user.iter().map(|u| u.privileged_instructions).sum();
    let users: Vec<_> = r
        .user
        .iter()
        .map(|u| {
            let mut v = serde_json::to_value(u).expect("stats serialise");
            v["ipc"] = json!(u.ipc());
            v
        })
        .collect();
    let decision: Vec<f64> = (0..acc.triggers.len())
        .map(|k| acc.decision_fraction(k))
        .collect();
    let mut a = serde_json::to_value(&acc).expect("accuracy serialises");
    a["exact_fraction"] = json!(acc.exact_fraction());
    a["within_fraction"] = json!(acc.within_fraction());
    a["decision_fraction"] = json!(decision);
    json!({
        "version": crate::VERSION,
        "config": file,
        "mean_ipc": r.mean_ipc(),
        "makespan": r.makespan(),
        "os_time_fraction": r.os_time_fraction(),
        "privileged_fraction": if thread == 0 { 0.0 } else { privileged as f64 / thread as f64 },
        "user": users,
        "os": r.os,
        "accuracy": a,
        "phases": r.phases,
        "max_queue_wait": r.max_queue_wait,
        "invariants": r.invariants,
    })
}
