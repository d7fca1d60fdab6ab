/*!
A window of a trace written by streaming: the records after the first `skip`, at most `records`
of them (or as many as hold a number of instructions), copied to a native trace (`cachecolor evaluate`'s region prefixes). Memory is one block
whatever the window's length, and reading stops at the window's end, so a 200 M-record window of
a longer trace reads no further than it needs.

The instructions of the skipped records belong before the window (a record's `icount` counts the
instructions its thread retired since its previous record): the window's first records keep only
their own counts. The window's instruction count and the share of it that privileged records
carry (a full-system trace's kernel, Nellans et al. Figure 1) are summed on the way.
*/
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;

use cachecolor_sim::error::TraceError;
use cachecolor_sim::trace::{self, Format, RecordSource};
use pyo3::prelude::*;

use crate::errors::{catch_panic, Failure};
use crate::simulate::report;
use crate::traces::open;

/// `src` from record `skip` on, at most `limit` records; stops early when `stop` is set (an
/// interrupt seen by the progress callback).
struct Window<'a> {
    src: &'a mut dyn RecordSource,
    skip: u64,
    left: u64,
    /// Instructions the window may still take: it ends with the record that reaches them.
    insn_left: u64,
    read: u64,
    instructions: u64,
    privileged_instructions: u64,
    /// Records of each thread in the window.
    threads: BTreeMap<u32, u64>,
    stop: &'a Cell<bool>,
}

impl RecordSource for Window<'_> {
    fn next_block(&mut self, buf: &mut Vec<trace::Record>) -> Result<bool, TraceError> {
        loop {
            if self.left == 0
                || self.insn_left == 0
                || self.stop.get()
                || !self.src.next_block(buf)?
            {
                buf.clear();
                return Ok(false);
            }
            self.read += buf.len() as u64;
            let drop = self.skip.min(buf.len() as u64) as usize;
            self.skip -= drop as u64;
            buf.drain(..drop);
            buf.truncate(self.left.min(buf.len() as u64) as usize);
            let mut end = buf.len();
            for (i, r) in buf.iter().enumerate() {
                let n = (r.icount as u64).min(self.insn_left);
                self.insn_left -= n;
                if self.insn_left == 0 {
                    end = i + 1;
                    break;
                }
            }
            buf.truncate(end);
            self.left -= buf.len() as u64;
            for r in buf.iter() {
                self.instructions += r.icount as u64;
                if r.privileged {
                    self.privileged_instructions += r.icount as u64;
                }
                *self.threads.entry(r.thread).or_default() += 1;
            }
            if !buf.is_empty() {
                return Ok(true);
            }
        }
    }
    fn progress(&self) -> trace::Progress {
        self.src.progress()
    }
}

/// (records read, records written, their instructions, privileged instructions, records per
/// thread id).
type WindowCounts = (u64, u64, u64, u64, BTreeMap<u32, u64>);

/// Copy records `skip .. skip + records` of `src` (in `format`) to the native trace `out`
/// (written atomically, with `metadata` as its header's); with `instructions`, the window ends
/// earlier, at the record whose instructions bring it to that many. Returns (records read from `src`,
/// records written, their instructions, the privileged records' instructions, records per
/// thread id).
#[pyfunction]
#[pyo3(signature = (src, format, out, skip, records, metadata = "", progress = None, instructions = None))]
#[allow(clippy::too_many_arguments)]
pub fn window_trace(
    py: Python<'_>,
    src: PathBuf,
    format: &str,
    out: PathBuf,
    skip: u64,
    records: u64,
    metadata: &str,
    progress: Option<Py<PyAny>>,
    instructions: Option<u64>,
) -> PyResult<WindowCounts> {
    let format = Format::parse(format).map_err(Failure::from)?;
    let progress = progress.as_ref();
    let counts = py.detach(|| {
        catch_panic(|| {
            let (mut source, _) = open(&src, format)?;
            let stop = Cell::new(false);
            let mut window = Window {
                src: &mut *source,
                skip,
                left: records,
                insn_left: instructions.unwrap_or(u64::MAX),
                read: 0,
                instructions: 0,
                privileged_instructions: 0,
                threads: BTreeMap::new(),
                stop: &stop,
            };
            let mut failed: Option<Failure> = None;
            let kept = trace::convert(&mut window, &out, metadata, &mut |p| {
                if failed.is_none() {
                    if let Err(e) = report(progress, p) {
                        failed = Some(e);
                        stop.set(true);
                    }
                }
            });
            if let Some(e) = failed {
                // Interrupted: the written window is incomplete; remove it (it was renamed into
                // place when the source stopped early).
                let _ = std::fs::remove_file(&out);
                return Err(e);
            }
            let kept = kept?;
            Ok((
                window.read,
                kept,
                window.instructions,
                window.privileged_instructions,
                window.threads,
            ))
        })
    })?;
    Ok(counts)
}
