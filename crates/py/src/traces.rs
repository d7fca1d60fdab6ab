/*!
Trace files for Python: read a (small) trace into columns, write columns as a native trace,
convert another tool's trace to the native format, and summarise a trace (`cachecolor trace info`).

Columns cross the boundary as little-endian `bytes` (`addr` u64, `thread` u32, `icount` u32,
`size` u16, `kind` u8, `privileged` u8) that the Python side views with `numpy.frombuffer`: no
per-record Python objects. Reading a whole trace into memory is for small traces only (about 20
bytes per record); simulation and conversion stream block by block and never hold a whole trace.

Writing goes through `cachecolor_sim::trace::convert`, so a trace appears at its path only when
complete (temporary file + rename). All file work runs with the GIL released.
*/
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use cachecolor_sim::trace::{self, native, Format, Kind, RecordSource, VecSource, BLOCK_RECORDS};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use serde_json::json;

use crate::errors::{catch_panic, Failure, Result};
use crate::simulate::{report, Columns};

/// A trace opened for reading, with (native traces only) the header's metadata and version.
type Opened = (Box<dyn RecordSource + Send>, Option<(String, u16)>);

/// Open `path` as `format`.
pub(crate) fn open(path: &Path, format: Format) -> Result<Opened> {
    if format == Format::Native {
        let r = native::TraceReader::open(path)?;
        let meta = (r.metadata().to_string(), r.version());
        Ok((Box::new(r), Some(meta)))
    } else {
        Ok((trace::open(path, format)?, None))
    }
}

fn le_bytes<const N: usize, T>(v: &[T], f: impl Fn(&T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * N);
    for x in v {
        out.extend_from_slice(&f(x));
    }
    out
}

/// Read up to `limit` records of a trace into columns. Returns a dict of `bytes` columns plus
/// `metadata` (native traces), `version` and `truncated` (true when `limit` stopped the read).
#[pyfunction]
#[pyo3(signature = (path, format = "native", limit = None))]
pub fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    limit: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let format = Format::parse(format).map_err(Failure::from)?;
    let limit = limit.unwrap_or(u64::MAX);
    struct Read {
        addr: Vec<u64>,
        thread: Vec<u32>,
        icount: Vec<u32>,
        size: Vec<u16>,
        kind: Vec<u8>,
        privileged: Vec<u8>,
        syscall: Vec<u32>,
        pc: Vec<u64>,
        meta: Option<(String, u16)>,
        truncated: bool,
    }
    let r = py.detach(|| {
        catch_panic(|| {
            let (mut src, meta) = open(&path, format)?;
            let mut out = Read {
                addr: Vec::new(),
                thread: Vec::new(),
                icount: Vec::new(),
                size: Vec::new(),
                kind: Vec::new(),
                privileged: Vec::new(),
                syscall: Vec::new(),
                pc: Vec::new(),
                meta,
                truncated: false,
            };
            let mut buf = Vec::with_capacity(BLOCK_RECORDS);
            let mut n = 0u64;
            'blocks: while src.next_block(&mut buf)? {
                let pcs = src.block_pcs();
                for (i, rec) in buf.iter().enumerate() {
                    if n == limit {
                        out.truncated = true;
                        break 'blocks;
                    }
                    if let Some(&pc) = pcs.get(i) {
                        out.pc.push(pc);
                    }
                    out.addr.push(rec.addr);
                    out.thread.push(rec.thread);
                    out.icount.push(rec.icount);
                    out.size.push(rec.size);
                    out.kind.push(rec.kind as u8);
                    out.privileged.push(rec.privileged as u8);
                    out.syscall.push(rec.syscall);
                    n += 1;
                }
                report(None, src.progress())?;
            }
            Ok(out)
        })
    })?;
    // The PC column of a native version 3 trace (None when the trace has none).
    let has_pcs =
        !r.pc.is_empty() || (r.addr.is_empty() && r.meta.as_ref().is_some_and(|m| m.1 >= 3));
    let pc_column = has_pcs.then(|| PyBytes::new(py, &le_bytes(&r.pc, |x| x.to_le_bytes())));
    columns_dict(
        py,
        &RecordVecs {
            addr: r.addr,
            thread: r.thread,
            icount: r.icount,
            size: r.size,
            kind: r.kind,
            privileged: r.privileged,
            syscall: r.syscall,
        },
        r.meta.as_ref(),
        r.truncated,
    )
    .and_then(|d| {
        d.set_item("pc", pc_column)?;
        Ok(d)
    })
}

/// Records as columns (one `Vec` per field).
#[derive(Default)]
struct RecordVecs {
    addr: Vec<u64>,
    thread: Vec<u32>,
    icount: Vec<u32>,
    size: Vec<u16>,
    kind: Vec<u8>,
    privileged: Vec<u8>,
    syscall: Vec<u32>,
}

impl RecordVecs {
    fn push(&mut self, rec: &trace::Record) {
        self.addr.push(rec.addr);
        self.thread.push(rec.thread);
        self.icount.push(rec.icount);
        self.size.push(rec.size);
        self.kind.push(rec.kind as u8);
        self.privileged.push(rec.privileged as u8);
        self.syscall.push(rec.syscall);
    }
}

/// The dict `read_trace` returns (and each `TraceChunks` item).
fn columns_dict<'py>(
    py: Python<'py>,
    r: &RecordVecs,
    meta: Option<&(String, u16)>,
    truncated: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "addr",
        PyBytes::new(py, &le_bytes(&r.addr, |x| x.to_le_bytes())),
    )?;
    d.set_item(
        "thread",
        PyBytes::new(py, &le_bytes(&r.thread, |x| x.to_le_bytes())),
    )?;
    d.set_item(
        "icount",
        PyBytes::new(py, &le_bytes(&r.icount, |x| x.to_le_bytes())),
    )?;
    d.set_item(
        "size",
        PyBytes::new(py, &le_bytes(&r.size, |x| x.to_le_bytes())),
    )?;
    d.set_item("kind", PyBytes::new(py, &r.kind))?;
    d.set_item("privileged", PyBytes::new(py, &r.privileged))?;
    d.set_item(
        "syscall",
        PyBytes::new(py, &le_bytes(&r.syscall, |x| x.to_le_bytes())),
    )?;
    d.set_item("metadata", meta.map(|m| m.0.clone()))?;
    d.set_item("version", meta.map(|m| m.1))?;
    d.set_item("truncated", truncated)?;
    Ok(d)
}

/// A trace read `chunk` records at a time (`cachecolor.read_trace(..., chunksize=N)`): a Python
/// iterator whose items are `read_trace`'s dicts, so a trace of any length is read in bounded
/// memory. The source stays open between items; each item is read with the GIL released.
#[pyclass(module = "cachecolor._core")]
pub struct TraceChunks {
    /// The source and the records read from it but not yet handed out (a block can straddle
    /// two chunks). A mutex because a pyclass must be `Sync`; only one thread iterates.
    state: std::sync::Mutex<ChunkState>,
    meta: Option<(String, u16)>,
    chunk: usize,
}

struct ChunkState {
    src: Box<dyn RecordSource + Send>,
    pending: Vec<trace::Record>,
    at: usize,
    done: bool,
}

#[pymethods]
impl TraceChunks {
    #[new]
    #[pyo3(signature = (path, format = "native", chunk = 1 << 20))]
    fn new(path: PathBuf, format: &str, chunk: usize) -> PyResult<Self> {
        if chunk == 0 {
            return Err(Failure::Argument("chunksize: at least 1 record".into()).into());
        }
        let format = Format::parse(format).map_err(Failure::from)?;
        let (src, meta) = open(&path, format)?;
        Ok(TraceChunks {
            state: std::sync::Mutex::new(ChunkState {
                src,
                pending: Vec::new(),
                at: 0,
                done: false,
            }),
            meta,
            chunk,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let chunk = self.chunk;
        let out = py.detach(|| {
            catch_panic(|| {
                let mut st = self.state.lock().expect("one iterating thread");
                let st = &mut *st;
                let mut out = RecordVecs::default();
                let mut n = 0;
                while n < chunk {
                    if st.at == st.pending.len() {
                        if st.done {
                            break;
                        }
                        // `next_block` clears `pending` first, also when it reports the end.
                        st.at = 0;
                        if !st.src.next_block(&mut st.pending)? {
                            st.done = true;
                            break;
                        }
                        continue;
                    }
                    let take = (chunk - n).min(st.pending.len() - st.at);
                    for rec in &st.pending[st.at..st.at + take] {
                        out.push(rec);
                    }
                    st.at += take;
                    n += take;
                }
                Ok(out)
            })
        })?;
        if out.addr.is_empty() {
            return Ok(None);
        }
        columns_dict(py, &out, self.meta.as_ref(), false).map(Some)
    }
}

/// Which records `filter_trace` keeps: each given criterion must hold (none given keeps all).
struct Keep {
    kinds: Option<[bool; 4]>,
    threads: Option<BTreeSet<u32>>,
    /// Half-open address ranges `[start, end)`; a record is in one if its address is.
    ranges: Vec<(u64, u64)>,
    privileged: Option<bool>,
}

impl Keep {
    fn keeps(&self, r: &trace::Record) -> bool {
        self.kinds.is_none_or(|k| k[r.kind as usize])
            && self.threads.as_ref().is_none_or(|t| t.contains(&r.thread))
            && (self.ranges.is_empty()
                || self.ranges.iter().any(|&(a, b)| a <= r.addr && r.addr < b))
            && self.privileged.is_none_or(|p| p == r.privileged)
    }
}

/// A source passing on only the records `keep` keeps; counts what it read.
///
/// A record's `icount` is the instructions its thread retired since its previous record, so
/// the instructions of a dropped record belong to the thread's next kept record: dropped, they
/// had gone with it (`--no-ifetch` on a capture with one fetch per instruction left a trace of
/// 0 instructions, which the simulator then counts as one per record: IPC and MPKI off 3x).
/// They are carried per thread and mode: a thread, or a mode (`--user`), that the filter drops
/// takes its instructions with it. The dropped records after a thread's last kept one have no
/// record to carry them.
struct Filtered<'a> {
    src: &'a mut dyn RecordSource,
    keep: Keep,
    read: u64,
    /// Instructions of dropped records not yet carried, per (thread, privileged).
    carry: HashMap<(u32, bool), u64>,
}

impl Filtered<'_> {
    /// Keep `r` (with the instructions carried to it) or carry its instructions on.
    fn pass(&mut self, r: &mut trace::Record) -> bool {
        if !self.keep.keeps(r) {
            if r.icount > 0 {
                *self.carry.entry((r.thread, r.privileged)).or_default() += r.icount as u64;
            }
            return false;
        }
        if let Some(c) = self.carry.get_mut(&(r.thread, r.privileged)) {
            // An icount is a u32: what does not fit waits for the thread's next record.
            let room = (u32::MAX - r.icount) as u64;
            let add = (*c).min(room);
            r.icount += add as u32;
            *c -= add;
        }
        true
    }
}

impl RecordSource for Filtered<'_> {
    fn next_block(
        &mut self,
        buf: &mut Vec<trace::Record>,
    ) -> std::result::Result<bool, cachecolor_sim::error::TraceError> {
        loop {
            if !self.src.next_block(buf)? {
                return Ok(false);
            }
            self.read += buf.len() as u64;
            buf.retain_mut(|r| self.pass(r));
            if !buf.is_empty() {
                return Ok(true);
            }
        }
    }
    fn progress(&self) -> trace::Progress {
        self.src.progress()
    }
}

/// Copy the records of `src` (in `format`) that pass every given criterion to the native trace
/// `out` (`cachecolor trace filter`): `kinds` codes 0-3, `threads` ids, `ranges` half-open
/// address ranges (any of them), `privileged` the mode. Returns (records read, records kept).
#[pyfunction]
#[pyo3(signature = (src, format, out, kinds = None, threads = None, ranges = None, privileged = None, metadata = None, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn filter_trace(
    py: Python<'_>,
    src: PathBuf,
    format: &str,
    out: PathBuf,
    kinds: Option<Vec<u8>>,
    threads: Option<Vec<u32>>,
    ranges: Option<Vec<(u64, u64)>>,
    privileged: Option<bool>,
    metadata: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(u64, u64)> {
    let format = Format::parse(format).map_err(Failure::from)?;
    let kinds = match kinds {
        None => None,
        Some(ks) => {
            let mut m = [false; 4];
            for k in ks {
                if k > 3 {
                    return Err(Failure::Argument(format!(
                        "kind code {k}: expected 0 (load), 1 (store), 2 (ifetch) or 3 (modify)"
                    ))
                    .into());
                }
                m[k as usize] = true;
            }
            Some(m)
        }
    };
    let ranges = ranges.unwrap_or_default();
    if let Some(&(a, b)) = ranges.iter().find(|&&(a, b)| a >= b) {
        return Err(Failure::Argument(format!(
            "address range {a:#x}-{b:#x}: the start must be below the end"
        ))
        .into());
    }
    let keep = Keep {
        kinds,
        threads: threads.map(|t| t.into_iter().collect()),
        ranges,
        privileged,
    };
    let metadata = metadata.unwrap_or_else(|| {
        json!({
            "source": "cachecolor trace filter",
            "cachecolor_version": cachecolor_sim::VERSION,
            "from": format.name(),
            "input": src.display().to_string(),
        })
        .to_string()
    });
    let progress = progress.as_ref();
    let counts = py.detach(|| {
        catch_panic(|| {
            let (mut source, _) = open(&src, format)?;
            let mut filtered = Filtered {
                src: &mut *source,
                keep,
                read: 0,
                carry: HashMap::new(),
            };
            let mut failed: Option<Failure> = None;
            let kept = trace::convert(&mut filtered, &out, &metadata, &mut |p| {
                if failed.is_none() {
                    if let Err(e) = report(progress, p) {
                        failed = Some(e);
                    }
                }
            })?;
            match failed {
                Some(e) => Err(e),
                None => Ok((filtered.read, kept)),
            }
        })
    })?;
    Ok(counts)
}

/// Write columns as a native trace at `path` (atomically). Returns the records written.
#[pyfunction]
#[pyo3(signature = (path, addresses, kinds = None, sizes = None, threads = None, icounts = None, privileged = None, metadata = "", syscalls = None))]
#[allow(clippy::too_many_arguments)]
pub fn write_trace(
    py: Python<'_>,
    path: PathBuf,
    addresses: &Bound<'_, PyAny>,
    kinds: Option<&Bound<'_, PyAny>>,
    sizes: Option<&Bound<'_, PyAny>>,
    threads: Option<&Bound<'_, PyAny>>,
    icounts: Option<&Bound<'_, PyAny>>,
    privileged: Option<&Bound<'_, PyAny>>,
    metadata: &str,
    syscalls: Option<&Bound<'_, PyAny>>,
) -> PyResult<u64> {
    let cols = Columns::extract(py, addresses, kinds, sizes, threads, icounts, privileged)?
        .with_syscalls(py, syscalls)?;
    let n = py.detach(|| {
        catch_panic(|| {
            let mut records = Vec::with_capacity(cols.len());
            cols.view()?.extend_records(0, cols.len(), &mut records);
            let mut src = VecSource::new(records);
            Ok(trace::convert(&mut src, &path, metadata, &mut |_| {})?)
        })
    })?;
    Ok(n)
}

/// Convert `src` (any format) to a native trace at `out`. Returns the records written.
#[pyfunction]
#[pyo3(signature = (src, format, out, metadata = None, progress = None))]
pub fn convert_trace(
    py: Python<'_>,
    src: PathBuf,
    format: &str,
    out: PathBuf,
    metadata: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<u64> {
    let format = Format::parse(format).map_err(Failure::from)?;
    let metadata = metadata.unwrap_or_else(|| {
        json!({
            "source": "cachecolor trace convert",
            "cachecolor_version": cachecolor_sim::VERSION,
            "from": format.name(),
            "input": src.display().to_string(),
        })
        .to_string()
    });
    let progress = progress.as_ref();
    // The conversion runs on a worker thread while this (the main) thread waits, checking for
    // Ctrl-C / SIGTERM every 200 ms: a worker blocked reading a FIFO cannot check by itself.
    // On a signal it asks the reader to give up (`trace::request_abort`), waits for the worker
    // (whose dropped output removes the temporary file) and raises the Python error.
    let n = py.detach(|| -> PyResult<u64> {
        trace::clear_abort();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let (src, out, metadata) = (&src, &out, &metadata);
            scope.spawn(move || {
                let r = catch_panic(|| {
                    let (mut source, _) = open(src, format)?;
                    let mut failed: Option<Failure> = None;
                    let r = trace::convert_checked(&mut *source, out, &[src], metadata, &mut |p| {
                        report(progress, p).map_err(|e| {
                            failed = Some(e);
                            cachecolor_sim::Error::Io(std::io::Error::other("interrupted"))
                        })
                    });
                    match (r, failed) {
                        (_, Some(e)) => Err(e),
                        (Ok(n), None) => Ok(n),
                        (Err(e), None) => Err(e.into()),
                    }
                });
                let _ = tx.send(r);
            });
            let mut interrupt: Option<PyErr> = None;
            loop {
                match rx.recv_timeout(std::time::Duration::from_millis(200)) {
                    Ok(r) => {
                        return match interrupt {
                            Some(e) => Err(e),
                            None => r.map_err(PyErr::from),
                        };
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if interrupt.is_none() {
                            if let Err(e) = Python::attach(|py| py.check_signals()) {
                                trace::request_abort();
                                interrupt = Some(e);
                            }
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(pyo3::exceptions::PyRuntimeError::new_err(
                            "the conversion thread ended without a result",
                        ));
                    }
                }
            }
        })
    })?;
    Ok(n)
}

/// The file header of a native trace, reading no record: `metadata` (str), `version`, `pcs`
/// (whether the records carry PCs), `header_bytes` (where the records start: the blocks and the
/// end marker follow the header) and `records` (the end marker's count; None when it is
/// missing or damaged).
#[pyfunction]
pub fn native_header<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| catch_panic(|| Ok(native::TraceReader::open(&path)?)))?;
    let d = PyDict::new(py);
    d.set_item("metadata", r.metadata())?;
    d.set_item("version", r.version())?;
    d.set_item("pcs", r.has_pcs())?;
    d.set_item("header_bytes", r.header_bytes())?;
    d.set_item("records", r.total_records())?;
    Ok(d)
}

/// Summarise a trace: records, kinds, threads, address range, sizes, metadata. Returns JSON.
#[pyfunction]
#[pyo3(signature = (path, format = "native", progress = None))]
pub fn trace_info(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let format = Format::parse(format).map_err(Failure::from)?;
    let progress = progress.as_ref();
    let doc = py.detach(|| {
        catch_panic(|| {
            let file_bytes = std::fs::metadata(&path).map(|m| m.len()).ok();
            let (mut src, meta) = open(&path, format)?;
            let mut kinds = [0u64; 4];
            let mut threads = BTreeSet::new();
            let (mut lo, mut hi) = (u64::MAX, 0u64);
            let (mut records, mut privileged, mut bytes, mut icount) = (0u64, 0u64, 0u64, 0u64);
            let mut buf = Vec::with_capacity(BLOCK_RECORDS);
            while src.next_block(&mut buf)? {
                for r in &buf {
                    kinds[r.kind as usize] += 1;
                    if threads.len() < 1 << 16 {
                        threads.insert(r.thread);
                    }
                    lo = lo.min(r.addr);
                    hi = hi.max(r.addr.saturating_add(r.size.max(1) as u64 - 1));
                    privileged += r.privileged as u64;
                    bytes += r.size as u64;
                    icount += r.icount as u64;
                }
                records += buf.len() as u64;
                report(progress, src.progress())?;
            }
            let metadata = meta.as_ref().map(|(m, _)| {
                serde_json::from_str::<serde_json::Value>(m).unwrap_or_else(|_| json!(m))
            });
            let kinds: serde_json::Map<String, serde_json::Value> = Kind::ALL
                .iter()
                .map(|k| (k.name().to_string(), json!(kinds[*k as usize])))
                .collect();
            Ok(json!({
                "path": path.display().to_string(),
                "format": format.name(),
                "version": meta.as_ref().map(|m| m.1),
                "file_bytes": file_bytes,
                "records": records,
                "kinds": kinds,
                "threads": threads.len(),
                "thread_ids": threads.iter().take(64).collect::<Vec<_>>(),
                "address_min": (records > 0).then_some(lo),
                "address_max": (records > 0).then_some(hi),
                "privileged": privileged,
                "bytes_accessed": bytes,
                "instructions": icount,
                "metadata": metadata,
            })
            .to_string())
        })
    })?;
    Ok(doc)
}
