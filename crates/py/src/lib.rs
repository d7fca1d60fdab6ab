/*!
`cachecolor._core`: the PyO3 extension module, thin glue from the Rust crates to Python.

Design (STYLE.md, pydantic-core / polars): Rust owns the models and the hot loop, Python owns
the API, tables and the CLI (`python/cachecolor`). This module only converts: configs and
results cross as JSON text, record columns as buffers / `bytes`, and every Rust error becomes a
Python exception in one place (`errors.rs`). Nothing here is meant to be called directly; the
typed stub `python/cachecolor/_core.pyi` documents the signatures the Python front relies on.

Files: `errors.rs` (exception classes, the one mapping), `simulate.rs` (configs, runs),
`system.rs` (whole-system runs), `policy.rs` (policies written in Python), `presets.rs` (machine presets and `detect`),
`traces.rs` (read, write, convert, info), `capture.rs` (program capture, host caches).
`traces.rs` (read, write, convert, info), `capture.rs` (program capture, host caches),
`analysis.rs` (miss-rate curves, per-set stack distance profiles), `bench.rs` (Cachetest:
sweeps, co-runs, the page-color probe), `offload.rs` and `oscache.rs` (Nellans et al.: OS
off-load, the OS/user split-L2 uniprocessor).
Long operations release the GIL and re-attach once per block for progress and Ctrl-C.
*/
mod analysis;
mod annotate;
mod bench;
mod capture;
mod capture_system;
mod errors;
mod objects;
mod offload;
mod oscache;
mod policy;
mod presets;
mod simulate;
mod system;
mod traces;
mod window;

use pyo3::prelude::*;

/// The trace format names `simulate`, `read_trace`, `convert_trace` and `trace_info` accept.
#[pyfunction]
fn trace_formats() -> Vec<&'static str> {
    cachecolor_sim::trace::Format::ALL
        .iter()
        .map(|f| f.name())
        .collect()
}

/// A byte size as configs write it (`"48KiB"`, `"1 MiB"`, `"32M"`, `"4096"`, `"0x1000"`; K, M, G,
/// T binary): the one parser of sizes (`cachecolor_sim::config::Size`), for the CLI's flags and
/// every Python reader. Raises ValueError naming the text and the allowed units.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<u64> {
    cachecolor_sim::config::Size::parse(text)
        .map(|s| s.bytes())
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Every policy's report schema (`PolicyKind::report_schema`: JSON Schema draft 2020-12, as the
/// report is serialized), as JSON: `{policy name: schema or null}`, in registry order.
/// `tools/report_stubs.py` writes `_core.pyi`'s report TypedDicts from it.
#[pyfunction]
fn policy_report_schemas() -> String {
    use cachecolor_sim::policy::PolicyKind;
    let entries: Vec<String> = PolicyKind::ALL
        .iter()
        .map(|k| {
            let schema = serde_json::to_string(&k.report_schema()).expect("a schema is JSON");
            format!("{}:{schema}", serde_json::Value::from(k.name()))
        })
        .collect();
    format!("{{{}}}", entries.join(","))
}

/// The names of every kind of a registry (`cachecolor_sim::registry`), in registry order.
fn names<K: Copy>(all: &[K], name: fn(K) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|&k| name(k)).collect()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", cachecolor_sim::VERSION)?;
    // The plug-in registries' names: the CLI's choices and help,
    // `placement.ALLOCATORS` and the docs' tables are made from these, never spelled again.
    use cachecolor_sim::cache::{prefetch::PrefetcherKind, ReplacementKind};
    use cachecolor_sim::{memory::AllocatorKind, policy::PolicyKind, trace::Format};
    m.add("POLICIES", names(&PolicyKind::ALL, PolicyKind::name))?;
    // Each policy's report TypedDict (`_core.pyi`), the title of its registry line's report
    // schema (None: the policy reports null).
    let reports = pyo3::types::PyDict::new(m.py());
    for k in PolicyKind::ALL {
        let title = k
            .report_schema()
            .and_then(|s| s.get("title").and_then(|t| t.as_str()).map(str::to_owned));
        reports.set_item(k.name(), title)?;
    }
    m.add("POLICY_REPORTS", reports)?;
    m.add_function(wrap_pyfunction!(policy_report_schemas, m)?)?;
    m.add(
        "ALLOCATORS",
        names(&AllocatorKind::ALL, AllocatorKind::name),
    )?;
    m.add(
        "REPLACEMENT_POLICIES",
        names(&ReplacementKind::ALL, ReplacementKind::name),
    )?;
    m.add("TRACE_FORMATS", names(&Format::ALL, Format::name))?;
    m.add(
        "PREFETCHERS",
        names(&PrefetcherKind::ALL, PrefetcherKind::name),
    )?;
    // Every PMU event a policy can read or ask for (`Tick` counts, `counter_events`).
    let events: Vec<String> = cachecolor_sim::pmu::Event::ALL
        .iter()
        .map(|e| e.name())
        .collect();
    m.add("EVENTS", events)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(simulate::effective_config, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(system::simulate_system, m)?)?;
    m.add_function(wrap_pyfunction!(system::simulate_system_page_llc, m)?)?;
    policy::register(m)?;
    m.add_function(wrap_pyfunction!(system::effective_system_config, m)?)?;
    m.add_function(wrap_pyfunction!(presets::machine_names, m)?)?;
    m.add_function(wrap_pyfunction!(presets::machine_toml, m)?)?;
    m.add_function(wrap_pyfunction!(presets::machine_json, m)?)?;
    m.add_function(wrap_pyfunction!(presets::machine_summaries, m)?)?;
    m.add_function(wrap_pyfunction!(traces::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(traces::native_header, m)?)?;
    m.add_function(wrap_pyfunction!(traces::write_trace, m)?)?;
    m.add_function(wrap_pyfunction!(traces::convert_trace, m)?)?;
    m.add_function(wrap_pyfunction!(traces::trace_info, m)?)?;
    m.add_function(wrap_pyfunction!(traces::filter_trace, m)?)?;
    m.add_function(wrap_pyfunction!(window::window_trace, m)?)?;
    m.add_class::<traces::TraceChunks>()?;
    m.add_function(wrap_pyfunction!(capture::capture, m)?)?;
    m.add_function(wrap_pyfunction!(capture::capture_backends, m)?)?;
    m.add_function(wrap_pyfunction!(capture::host_caches, m)?)?;
    m.add_function(wrap_pyfunction!(capture_system::capture_system, m)?)?;
    m.add_function(wrap_pyfunction!(capture_system::locate_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(capture_system::check_system, m)?)?;
    m.add_function(wrap_pyfunction!(trace_formats, m)?)?;
    m.add_function(wrap_pyfunction!(offload::simulate_offload, m)?)?;
    m.add_function(wrap_pyfunction!(oscache::oscache_model, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::profile, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::zipf_scan_trace, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::placement_miss_probability, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::page_profile, m)?)?;
    m.add_function(wrap_pyfunction!(annotate::attribute_trace, m)?)?;
    m.add_function(wrap_pyfunction!(annotate::symbolize, m)?)?;
    m.add_function(wrap_pyfunction!(objects::object_reuse, m)?)?;
    m.add_function(wrap_pyfunction!(objects::placed_page_tallies, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::uniform_hit_rates, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::expected_conflicts, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::lookahead_allocation, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_corun, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_probe, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_environment, m)?)?;
    Ok(())
}
