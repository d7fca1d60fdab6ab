/*!
Configs and simulation runs for Python.

Configs cross the boundary as text: TOML (a file's contents) or JSON (a Python dict dumped by
`json.dumps`); `effective_config` parses strictly, checks every cross-field rule (hierarchy and
workload) and returns the effective config as JSON, every default filled in. Results come back
as one JSON document (`version`, `config`, `source`, the `HierarchyStats` fields, `invariants`)
that `cachecolor.Result` wraps. JSON keeps this layer thin and the result self-describing; a run
returns one small document, so the cost is nothing next to the simulation.

The simulation itself runs with the GIL released (`py.detach`). After every block of records
the run re-attaches briefly to check for Ctrl-C and to call the optional progress callback with
`(records, bytes, total_bytes, total_records)`; an exception from either stops the run and is
re-raised unchanged.
*/
use std::path::PathBuf;

use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::config::SimulationConfig;
use cachecolor_sim::trace::{self, Format, Progress, RecordColumns, RecordSource, BLOCK_RECORDS};
use cachecolor_sim::workload::Workload;
use cachecolor_sim::ConfigError as RustConfigError;
use pyo3::prelude::*;
use serde_json::{json, Value};

use crate::errors::{catch_panic, in_table, Failure, Result};

/// Parse and check a config given as TOML or JSON text.
pub fn parse_config(text: &str, format: &str) -> Result<SimulationConfig> {
    let parsed = match format {
        "toml" => SimulationConfig::from_toml(text)?,
        "json" => SimulationConfig::from_json(text).map_err(without_json_position)?,
        other => {
            return Err(Failure::Argument(format!(
                "config format {other:?}: expected \"toml\" or \"json\""
            )))
        }
    };
    let effective = parsed.effective()?;
    if let Some(w) = &effective.workload {
        w.validate().map_err(|e| in_table("workload", e))?;
    }
    Ok(effective)
}

/// serde_json ends its messages with the position in the JSON text (" at line 1 column 85"):
/// noise for a config that was a Python dict, whose field path the message already names.
fn without_json_position(mut e: RustConfigError) -> RustConfigError {
    if let Some(k) = e.message.rfind(" at line ") {
        let tail = &e.message[k + " at line ".len()..];
        let mut parts = tail.split(" column ");
        let is_num = |s: Option<&str>| {
            s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        };
        if is_num(parts.next()) && is_num(parts.next()) && parts.next().is_none() {
            e.message.truncate(k);
        }
    }
    e
}

/// Check a config and return it with every default filled in, as JSON.
#[pyfunction]
#[pyo3(signature = (text, format = "toml"))]
pub fn effective_config(text: &str, format: &str) -> PyResult<String> {
    let c = parse_config(text, format)?;
    Ok(serde_json::to_string(&c).expect("configs serialise"))
}

/// Call the progress callback (if any) and check for Ctrl-C: the once-per-block re-attach.
pub fn report(progress: Option<&Py<PyAny>>, p: Progress) -> Result<()> {
    Python::attach(|py| -> PyResult<()> {
        py.check_signals()?;
        if let Some(cb) = progress {
            cb.call1(py, (p.records, p.bytes, p.total_bytes, p.total_records))?;
        }
        Ok(())
    })
    .map_err(Failure::Py)
}

fn hierarchy(config: &SimulationConfig) -> Result<Hierarchy> {
    Hierarchy::new(&config.hierarchy).map_err(|e| in_table("hierarchy", e))
}

/// Run `src` through `h` block by block (GIL released by the caller), decoding the next block
/// on a helper thread while this one simulates.
fn run(
    h: &mut Hierarchy,
    src: &mut (dyn RecordSource + Send),
    progress: Option<&Py<PyAny>>,
) -> Result<u64> {
    let mut n = 0u64;
    trace::pipelined_source(src, |block, p| -> Result<()> {
        h.run_block(block);
        n += block.len() as u64;
        report(progress, p)
    })?;
    Ok(n)
}

/// The result document of a finished run.
fn outcome(config: &SimulationConfig, h: &Hierarchy, source: Value) -> String {
    let mut doc = serde_json::Map::new();
    doc.insert("version".into(), json!(cachecolor_sim::VERSION));
    doc.insert(
        "config".into(),
        serde_json::to_value(config).expect("configs serialise"),
    );
    doc.insert("source".into(), source);
    if let Value::Object(stats) = serde_json::to_value(h.stats()).expect("stats serialise") {
        doc.extend(stats);
    }
    doc.insert("invariants".into(), json!(h.check_invariants()));
    Value::Object(doc).to_string()
}

/// Simulate a trace file, or the config's workload when `trace` is None. Returns the result
/// document as JSON.
#[pyfunction]
#[pyo3(signature = (config_json, trace = None, trace_format = "native", progress = None))]
pub fn simulate(
    py: Python<'_>,
    config_json: &str,
    trace: Option<PathBuf>,
    trace_format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let config = parse_config(config_json, "json")?;
    let format = Format::parse(trace_format).map_err(Failure::from)?;
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut h = hierarchy(&config)?;
            let (mut src, source) = open_source(&config, trace.as_deref(), format)?;
            run(&mut h, &mut *src, progress)?;
            Ok(outcome(&config, &h, source))
        })
    })?;
    Ok(doc)
}

/// The records to simulate: the trace file if one is given, else the config's `[workload]`.
fn open_source(
    config: &SimulationConfig,
    trace: Option<&std::path::Path>,
    format: Format,
) -> Result<(Box<dyn RecordSource + Send>, Value)> {
    Ok(match trace {
        Some(path) => (
            trace::open(path, format)?,
            json!({"kind": "trace", "path": path.display().to_string(), "format": format.name()}),
        ),
        None => match &config.workload {
            Some(w) => (
                Box::new(Workload::new(w).map_err(|e| in_table("workload", e))?),
                json!({"kind": "workload"}),
            ),
            None => {
                return Err(Failure::Config(RustConfigError::new(
                    "workload",
                    "no trace was given and the config has no [workload] table: pass a trace \
                     (--trace FILE) or add a [workload] with [[workload.phases]]",
                )))
            }
        },
    })
}

/// A page-level profile (ROCS 3, `analysis::pages`) of a trace (or the config's workload) on
/// the config's hierarchy; `options_json` is a `PageProfileOptions`. Returns the profile as
/// JSON (with `source` and `version`).
#[pyfunction]
#[pyo3(signature = (config_json, options_json, trace = None, trace_format = "native", progress = None))]
pub fn page_profile(
    py: Python<'_>,
    config_json: &str,
    options_json: &str,
    trace: Option<PathBuf>,
    trace_format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use cachecolor_sim::analysis::pages::{PageProfileOptions, PageProfiler};
    let config = parse_config(config_json, "json")?;
    let options: PageProfileOptions =
        cachecolor_sim::config::from_json(options_json).map_err(Failure::from)?;
    let format = Format::parse(trace_format).map_err(Failure::from)?;
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let mut h = hierarchy(&config)?;
            let mut profiler = PageProfiler::new(options, &h)?;
            let (mut src, source) = open_source(&config, trace.as_deref(), format)?;
            trace::pipelined_source(&mut *src, |block, p| -> Result<()> {
                profiler.feed(&mut h, block);
                report(progress, p)
            })?;
            let result = profiler.finish(&h)?;
            let mut doc = serde_json::to_value(&result).expect("profiles serialise");
            doc["source"] = source;
            doc["version"] = json!(cachecolor_sim::VERSION);
            Ok(doc.to_string())
        })
    })?;
    Ok(doc)
}

/// One column of records: the caller's array itself when it is contiguous and aligned (no
/// copy: a 5 M-reference trace is 40 MB, and copying it cost more in page faults than
/// simulating it), otherwise a contiguous copy NumPy makes. The simulation reads it with the GIL
/// released, as NumPy's own nogil functions do: the caller must not resize or write the arrays
/// during the call.
///
/// Read through NumPy's array interface (`__array_interface__`: data pointer, shape, strides,
/// `typestr`), not the buffer protocol: the extension is built for the stable ABI of CPython 3.9
/// (one abi3 wheel for every version), and `PyObject_GetBuffer` joined the limited API only in
/// 3.11 (PyO3 0.30 offers `pyo3::buffer` under abi3 only from `abi3-py311`). The column holds a
/// reference to the array, which keeps its memory alive and makes NumPy refuse an in-place
/// `resize` while the simulation reads it (its reference check), as an exported buffer did.
pub enum Column<T: Element> {
    Shared {
        _owner: Py<PyAny>,
        /// Address of the first element (a `usize`, so the column is `Send`/`Sync` and can be
        /// read inside `py.detach`).
        ptr: usize,
        len: usize,
        _t: std::marker::PhantomData<T>,
    },
    Owned(Vec<T>),
}

/// The element types of record columns and their NumPy type strings (little-endian, as the
/// native trace format and `records.DTYPES`).
pub trait Element: Copy + Send + Sync + 'static {
    /// `__array_interface__["typestr"]` values accepted for this type.
    const TYPESTRS: &'static [&'static str];
    /// The dtype to ask NumPy for when the caller's array is not contiguous.
    const DTYPE: &'static str;
}
impl Element for u8 {
    const TYPESTRS: &'static [&'static str] = &["|u1", "<u1", "|b1"];
    const DTYPE: &'static str = "u1";
}
impl Element for u16 {
    const TYPESTRS: &'static [&'static str] = &["<u2"];
    const DTYPE: &'static str = "<u2";
}
impl Element for u32 {
    const TYPESTRS: &'static [&'static str] = &["<u4"];
    const DTYPE: &'static str = "<u4";
}
impl Element for u64 {
    const TYPESTRS: &'static [&'static str] = &["<u8"];
    const DTYPE: &'static str = "<u8";
}

/// What `__array_interface__` says about an array: its data address, its element count, and
/// whether the elements are contiguous (strides `None`, or equal to the C layout's).
struct Interface {
    typestr: String,
    ptr: usize,
    len: usize,
    contiguous: bool,
}

fn interface(obj: &Bound<'_, PyAny>) -> PyResult<Option<Interface>> {
    let Ok(ai) = obj.getattr("__array_interface__") else {
        return Ok(None);
    };
    let typestr: String = ai.get_item("typestr")?.extract()?;
    let (ptr, _readonly): (usize, bool) = ai.get_item("data")?.extract()?;
    let shape: Vec<usize> = ai.get_item("shape")?.extract()?;
    let itemsize: usize = typestr[2..].parse().unwrap_or(0);
    let strides = ai.get_item("strides")?;
    let contiguous = if strides.is_none() {
        true
    } else {
        let strides: Vec<isize> = strides.extract()?;
        // C-contiguous: each dimension's stride is the product of the later ones' extents.
        let mut want = itemsize as isize;
        let mut ok = true;
        for (&n, &s) in shape.iter().zip(&strides).rev() {
            if n > 1 && s != want {
                ok = false;
            }
            want *= n as isize;
        }
        ok
    };
    Ok(Some(Interface {
        typestr,
        ptr,
        len: shape.iter().product(),
        contiguous,
    }))
}

impl<T: Element> Column<T> {
    pub fn get(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>) -> Result<Self> {
        let wrong = |what: String| {
            Failure::Argument(format!(
                "{name}: {what} (pass a contiguous NumPy array of dtype {})",
                T::DTYPE
            ))
        };
        let np = py.import("numpy")?;
        // Anything that is not a NumPy array (a list, a memoryview, array.array) becomes one
        // first: numpy.asarray keeps the dtype the object says it has.
        let mut array = if interface(obj)?.is_some() {
            obj.clone()
        } else {
            np.call_method1("asarray", (obj,))
                .map_err(|e| wrong(e.to_string()))?
        };
        let mut ai = interface(&array)?.ok_or_else(|| wrong("not an array".into()))?;
        if !T::TYPESTRS.contains(&ai.typestr.as_str()) {
            return Err(wrong(format!("dtype {:?}", ai.typestr)));
        }
        let aligned = ai.ptr.is_multiple_of(std::mem::align_of::<T>());
        if ai.len == 0 {
            return Ok(Column::Owned(Vec::new()));
        }
        if !(ai.contiguous && aligned) {
            array = np.call_method1("ascontiguousarray", (&array, T::DTYPE))?;
            ai = interface(&array)?.ok_or_else(|| wrong("not an array".into()))?;
            if !ai.ptr.is_multiple_of(std::mem::align_of::<T>()) {
                // NumPy allocates aligned; copy into a Vec if it ever did not.
                // SAFETY: `ascontiguousarray` returned `len` contiguous elements of T's dtype.
                let s = unsafe {
                    std::slice::from_raw_parts(ai.ptr as *const u8, ai.len * size_of::<T>())
                };
                let v = s
                    .chunks_exact(size_of::<T>())
                    .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr() as *const T) })
                    .collect();
                return Ok(Column::Owned(v));
            }
        }
        Ok(Column::Shared {
            _owner: array.unbind(),
            ptr: ai.ptr,
            len: ai.len,
            _t: std::marker::PhantomData,
        })
    }

    pub fn as_slice(&self) -> &[T] {
        match self {
            // SAFETY: `get` checked the array's type string against T, that its `len` elements
            // are C-contiguous and that the address is aligned for T; `_owner` holds the array,
            // so the memory stays valid while the column lives (see the type's doc for the
            // no-mutation contract).
            Column::Shared { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(*ptr as *const T, *len)
            },
            Column::Owned(v) => v,
        }
    }
}

/// An optional column.
fn column<T: Element>(
    py: Python<'_>,
    name: &str,
    obj: Option<&Bound<'_, PyAny>>,
) -> Result<Option<Column<T>>> {
    obj.map(|o| Column::<T>::get(py, name, o)).transpose()
}

/// In-memory columns of records, as the Python front passes them; `view` checks them
/// (`RecordColumns::new`: lengths, kinds, sizes) and lends them to the simulator.
pub struct Columns {
    addr: Column<u64>,
    kind: Option<Column<u8>>,
    size: Option<Column<u16>>,
    thread: Option<Column<u32>>,
    icount: Option<Column<u32>>,
    privileged: Option<Column<u8>>,
    syscall: Option<Column<u32>>,
}

impl Columns {
    #[allow(clippy::too_many_arguments)]
    pub fn extract(
        py: Python<'_>,
        addr: &Bound<'_, PyAny>,
        kind: Option<&Bound<'_, PyAny>>,
        size: Option<&Bound<'_, PyAny>>,
        thread: Option<&Bound<'_, PyAny>>,
        icount: Option<&Bound<'_, PyAny>>,
        privileged: Option<&Bound<'_, PyAny>>,
    ) -> Result<Columns> {
        Ok(Columns {
            addr: Column::<u64>::get(py, "addresses", addr)?,
            kind: column::<u8>(py, "kinds", kind)?,
            size: column::<u16>(py, "sizes", size)?,
            thread: column::<u32>(py, "threads", thread)?,
            icount: column::<u32>(py, "icounts", icount)?,
            privileged: column::<u8>(py, "privileged", privileged)?,
            syscall: None,
        })
    }

    /// Add the syscall-identity column (`Record::syscall`), if given.
    pub fn with_syscalls(
        mut self,
        py: Python<'_>,
        syscall: Option<&Bound<'_, PyAny>>,
    ) -> Result<Columns> {
        self.syscall = column::<u32>(py, "syscalls", syscall)?;
        Ok(self)
    }

    /// The columns as the simulator reads them, checked (lengths, kinds, sizes) once here.
    pub fn view(&self) -> Result<RecordColumns<'_>> {
        RecordColumns::new(
            self.addr.as_slice(),
            self.kind.as_ref().map(Column::as_slice),
            self.size.as_ref().map(Column::as_slice),
            self.thread.as_ref().map(Column::as_slice),
            self.icount.as_ref().map(Column::as_slice),
            self.privileged.as_ref().map(Column::as_slice),
        )
        .and_then(|c| c.with_syscalls(self.syscall.as_ref().map(Column::as_slice)))
        .map_err(|e| Failure::Argument(e.message))
    }

    pub fn len(&self) -> usize {
        self.addr.as_slice().len()
    }
}

/// Simulate records held in memory (NumPy columns). Returns the result document as JSON.
#[pyfunction]
#[pyo3(signature = (config_json, addresses, kinds = None, sizes = None, threads = None, icounts = None, privileged = None, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn simulate_arrays(
    py: Python<'_>,
    config_json: &str,
    addresses: &Bound<'_, PyAny>,
    kinds: Option<&Bound<'_, PyAny>>,
    sizes: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    icounts: Option<&Bound<'_, PyAny>>,
    privileged: Option<&Bound<'_, PyAny>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let config = parse_config(config_json, "json")?;
    let cols = Columns::extract(py, addresses, kinds, sizes, threads, icounts, privileged)?;
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let view = cols.view()?;
            let mut h = hierarchy(&config)?;
            let n = view.len();
            let mut start = 0;
            while start < n {
                let end = (start + BLOCK_RECORDS).min(n);
                // Inline, not pipelined like trace files: turning columns into records is cheap
                // enough that a helper thread measured no faster.
                h.run_columns(&view.slice(start, end));
                start = end;
                let p = Progress {
                    records: end as u64,
                    total_records: Some(n as u64),
                    ..Progress::default()
                };
                report(progress, p)?;
            }
            Ok(outcome(
                &config,
                &h,
                json!({"kind": "arrays", "records": n}),
            ))
        })
    })?;
    Ok(doc)
}
