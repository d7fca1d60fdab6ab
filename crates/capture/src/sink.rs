/*!
Where captured records go: a native trace written through the output helper
(`cachecolor_sim::output`, docs/reliability.md): to a unique temporary file beside the requested
output, renamed over it only when complete, so a failed or interrupted capture never leaves a
half-written trace at `out` nor destroys an existing one (the temporary file is deleted when the
`Sink` is dropped without `finish`); a device or FIFO is written in place, a directory refused.

The sink also counts records by kind, enforces `max_records` (it accepts exactly that many and
then tells the back end to stop) and throttles progress reports to about four a second.
*/
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cachecolor_sim::output::Output;
use cachecolor_sim::trace::native::TraceWriter;
use cachecolor_sim::trace::{Kind, Record};

use crate::CaptureError;

const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// Spaces after the metadata written at the start, room for the outcome's values at the end
/// (`null` -> `-2147483648`, `false`, `false`).
const OUTCOME_ROOM: usize = 32;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub loads: u64,
    pub stores: u64,
    pub ifetches: u64,
    pub modifies: u64,
}

impl Counts {
    /// Count `recs` by kind (independent sums, no store-to-load dependency between records).
    pub(crate) fn of(recs: &[Record]) -> Counts {
        let (mut l, mut s, mut i, mut m) = (0u64, 0u64, 0u64, 0u64);
        for r in recs {
            l += (r.kind == Kind::Load) as u64;
            s += (r.kind == Kind::Store) as u64;
            i += (r.kind == Kind::IFetch) as u64;
            m += (r.kind == Kind::Modify) as u64;
        }
        Counts {
            loads: l,
            stores: s,
            ifetches: i,
            modifies: m,
        }
    }

    fn add(&mut self, o: Counts) {
        self.loads += o.loads;
        self.stores += o.stores;
        self.ifetches += o.ifetches;
        self.modifies += o.modifies;
    }
}

pub(crate) struct Sink {
    out: PathBuf,
    tmp: Option<Output>,
    /// The metadata object written by `start` and its length with the room left for the outcome.
    metadata: Option<(serde_json::Map<String, serde_json::Value>, usize)>,
    /// Extra room for `late` (full-system capture's task table, known only at the end).
    late_room: usize,
    late: serde_json::Map<String, serde_json::Value>,
    writer: Option<TraceWriter<BufWriter<Output>>>,
    /// The PC of each data record, derived from the fetches (`keep_pcs`).
    pcs: Option<PcFromFetches>,
    counts: Counts,
    records: u64,
    max: u64,
    /// Instructions accepted (the records' `icount`) and the cap on them (`limit_instructions`).
    instructions: u64,
    max_instructions: u64,
    last_progress: Instant,
}

impl Sink {
    /// Prepare the temporary file in `out`'s directory (no header yet: see `start`).
    pub(crate) fn create(out: &Path, max_records: Option<u64>) -> Result<Sink, CaptureError> {
        let tmp = Output::create(out, &[]).map_err(|e| {
            CaptureError::io(format!("cannot write the trace to {}", out.display()), e)
        })?;
        Ok(Sink {
            out: out.to_path_buf(),
            tmp: Some(tmp),
            metadata: None,
            late_room: 0,
            late: serde_json::Map::new(),
            writer: None,
            pcs: None,
            counts: Counts::default(),
            records: 0,
            max: max_records.unwrap_or(u64::MAX),
            instructions: 0,
            max_instructions: u64::MAX,
            last_progress: Instant::now(),
        })
    }

    /// Keep the PC of every record in the trace (native version 3); call before `start`. Only for a
    /// stream with instruction fetches, in which each data record follows the fetch of the
    /// instruction that made it (both back ends): that fetch's address is its PC.
    pub(crate) fn keep_pcs(&mut self, on: bool) {
        self.pcs = on.then(PcFromFetches::default);
    }

    /// Leave `bytes` more room in the header for metadata set at the end (`set_late`); call
    /// before `start`.
    pub(crate) fn reserve_metadata(&mut self, bytes: usize) {
        self.late_room = bytes;
    }

    /// Add `key` to the metadata written at `finish` (the room `reserve_metadata` left usually
    /// holds it; if not, `finish` grows the header and moves the records behind it).
    pub(crate) fn set_late(&mut self, key: &str, value: serde_json::Value) {
        self.late.insert(key.into(), value);
    }

    /// Write the trace header with `metadata`; must precede `push`. A JSON object gets
    /// `complete`, `exit_code` and `truncated` set to null and room to fill them in at `finish`
    /// (a trace kept from a crashed program must say so in its own metadata).
    pub(crate) fn start(&mut self, metadata: &str) -> Result<(), CaptureError> {
        let metadata = match serde_json::from_str::<serde_json::Value>(metadata) {
            Ok(serde_json::Value::Object(mut m)) => {
                for k in ["complete", "exit_code", "truncated"] {
                    m.insert(k.into(), serde_json::Value::Null);
                }
                let mut text = serde_json::Value::Object(m.clone()).to_string();
                text.push_str(&" ".repeat(OUTCOME_ROOM + self.late_room));
                self.metadata = Some((m, text.len()));
                text
            }
            _ => metadata.to_string(),
        };
        let metadata = metadata.as_str();
        let file = self.tmp.take().expect("Sink::start called twice");
        let w = TraceWriter::new_with(
            BufWriter::with_capacity(1 << 20, file),
            metadata,
            self.pcs.is_some(),
        )
        .map_err(|e| self.trace_err(e))?;
        self.writer = Some(w);
        Ok(())
    }

    fn trace_err(&self, source: cachecolor_sim::Error) -> CaptureError {
        CaptureError::Trace {
            path: self.out.clone(),
            source,
        }
    }

    /// Records accepted so far.
    pub(crate) fn records(&self) -> u64 {
        self.records
    }

    pub(crate) fn counts(&self) -> Counts {
        self.counts
    }

    /// Stop once `n` instructions have been accepted: the last record taken is the one whose
    /// `icount` reaches them (a region fixed in instructions rather than records).
    pub(crate) fn limit_instructions(&mut self, n: Option<u64>) {
        self.max_instructions = n.unwrap_or(u64::MAX);
    }

    /// True once `max_records` records (or the instruction limit) have been accepted.
    pub(crate) fn full(&self) -> bool {
        self.records >= self.max || self.instructions >= self.max_instructions
    }

    /// Append records (as many as `max_records` still allows), then report progress if due.
    /// `counts`, if given, must be `Counts::of(recs)` (a producer that counted as it went saves
    /// the writing thread a pass). Returns true when the limit has been reached and the capture
    /// should stop.
    pub(crate) fn push(
        &mut self,
        recs: &[Record],
        counts: Option<Counts>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<bool, CaptureError> {
        debug_assert!(counts.is_none_or(|c| c == Counts::of(recs)));
        let mut room = (self.max - self.records).min(recs.len() as u64) as usize;
        if self.max_instructions != u64::MAX {
            let mut left = self.max_instructions - self.instructions;
            for (i, r) in recs[..room].iter().enumerate() {
                left -= (r.icount as u64).min(left);
                if left == 0 {
                    room = i + 1;
                    break;
                }
            }
            self.instructions = self.max_instructions - left;
        }
        let (recs, counts) = if recs.len() > room {
            let r = &recs[..room];
            (r, Counts::of(r))
        } else {
            (recs, counts.unwrap_or_else(|| Counts::of(recs)))
        };
        self.counts.add(counts);
        let w = self.writer.as_mut().expect("Sink::start not called");
        let pcs = self.pcs.as_mut().map(|p| p.derive(recs));
        if let Err(e) = w.write_all_with_pcs(recs, pcs) {
            return Err(self.trace_err(e));
        }
        self.records += recs.len() as u64;
        if self.last_progress.elapsed() >= PROGRESS_EVERY {
            self.last_progress = Instant::now();
            progress(self.records);
        }
        Ok(self.full())
    }

    /// Add `key` to the metadata written at `finish` (the memory map, known only once
    /// the program has run). Ignored when the metadata is not a JSON object.
    pub(crate) fn add_metadata(&mut self, key: &str, value: serde_json::Value) {
        if let Some((m, _)) = &mut self.metadata {
            m.insert(key.into(), value);
        }
    }

    /// Write the end of the trace, record how the program ended in the header's metadata
    /// (`outcome`: exit code, complete, truncated; only for a regular-file output, which can be
    /// rewritten in place) and move it to `out`. Returns the record count.
    pub(crate) fn finish(
        mut self,
        outcome: Option<(i32, bool, bool)>,
    ) -> Result<u64, CaptureError> {
        let w = self.writer.take().expect("Sink::start not called");
        let buf = w.finish().map_err(|e| self.trace_err(e))?;
        let mut out = buf.into_inner().map_err(|e| {
            CaptureError::io(format!("writing {}", self.out.display()), e.into_error())
        })?;
        let mut grown_out = None;
        if let (Some((exit_code, complete, truncated)), Some((mut m, len)), Some(file)) =
            (outcome, self.metadata.take(), out.file_mut())
        {
            m.insert("exit_code".into(), exit_code.into());
            m.insert("complete".into(), complete.into());
            m.insert("truncated".into(), truncated.into());
            // Metadata known only at the end (fullsys's task table) goes in with the rest; a
            // header that no longer fits its reserved room is grown below (memmap).
            m.extend(std::mem::take(&mut self.late));
            let mut text = serde_json::Value::Object(m).to_string();
            use std::io::{Seek, Write};
            let io_err = |e| CaptureError::io(format!("writing {}", self.out.display()), e);
            if text.len() <= len {
                text.push_str(&" ".repeat(len - text.len()));
                file.seek(std::io::SeekFrom::Start(0))
                    .and_then(|_| {
                        file.write_all(&cachecolor_sim::trace::native::file_header_with(
                            &text,
                            self.pcs.is_some(),
                        ))
                    })
                    .map_err(io_err)?;
            } else if text.len() <= cachecolor_sim::trace::native::MAX_METADATA_BYTES {
                // The metadata outgrew the room kept for it (the memory map): write a new file
                // with the longer header and the blocks copied after it (the blocks do not
                // depend on the header), then commit that one; the first is deleted on drop.
                let header =
                    cachecolor_sim::trace::native::file_header_with(&text, self.pcs.is_some());
                let mut grown = Output::create(&self.out, &[]).map_err(|e| {
                    CaptureError::io(
                        format!("cannot write the trace to {}", self.out.display()),
                        e,
                    )
                })?;
                let old_header = 16 + len as u64 + 8;
                file.seek(std::io::SeekFrom::Start(old_header))
                    .and_then(|_| grown.write_all(&header))
                    .and_then(|_| std::io::copy(file, &mut grown).map(|_| ()))
                    .map_err(io_err)?;
                grown_out = Some(grown);
            }
        }
        if let Some(grown) = grown_out {
            out = grown;
        }
        out.commit().map_err(|e| {
            CaptureError::io(
                format!("cannot finish the trace at {}", self.out.display()),
                e,
            )
        })?;
        Ok(self.records)
    }
}

/// The PC of each record of a stream with instruction fetches: the address of its thread's
/// latest fetch (a data record comes right after the fetch of its instruction, in both back
/// ends; a system call's privileged records after the system call instruction). State carries
/// over from one `derive` to the next, as the stream arrives in pieces.
#[derive(Default)]
pub(crate) struct PcFromFetches {
    last_fetch: Vec<u64>,
    pcs: Vec<u64>,
}

impl PcFromFetches {
    pub(crate) fn derive(&mut self, recs: &[Record]) -> &[u64] {
        self.pcs.clear();
        for r in recs {
            let t = r.thread as usize;
            if t >= self.last_fetch.len() {
                self.last_fetch.resize(t + 1, 0);
            }
            if r.kind == cachecolor_sim::trace::Kind::IFetch {
                self.last_fetch[t] = r.addr;
            }
            self.pcs.push(self.last_fetch[t]);
        }
        &self.pcs
    }
}

static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ask the capture running in this process to stop as soon as it can (its `progress` callback
/// saw an interrupt): the program and the tracer are killed, no trace is written (an existing
/// `out` is untouched), the temporary files and directories are removed, and `capture` returns
/// an `Io` error of kind `Interrupted`. Cleared when the next capture starts.
pub fn request_stop() {
    STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub(crate) fn clear_stop() {
    STOP.store(false, std::sync::atomic::Ordering::SeqCst);
}

fn stop_requested() -> bool {
    STOP.load(std::sync::atomic::Ordering::SeqCst)
}

/// What `drain` leaves: the tracer's exit status, the reader thread's own result, and whether
/// the record limit cut the capture short.
pub(crate) struct Drained<T> {
    pub(crate) status: std::io::Result<std::process::ExitStatus>,
    pub(crate) ended: T,
    pub(crate) truncated: bool,
}

/// Write the reader thread's blocks into `sink` as they come (handing each buffer back through
/// `free_tx` for reuse) until the stream ends, the record limit is reached or a write fails;
/// then stop the tracer and join the reader in the order that cannot hang. Both back ends run
/// their capture through this. A write error is returned after everything has been stopped.
#[allow(clippy::too_many_arguments)]
pub(crate) fn drain<I, T>(
    sink: &mut Sink,
    rx: std::sync::mpsc::Receiver<I>,
    parts: impl Fn(I) -> (Vec<Record>, Option<Counts>),
    free_tx: &std::sync::mpsc::Sender<Vec<Record>>,
    child: &mut crate::child::ChildGuard,
    handle: std::thread::JoinHandle<T>,
    failed: impl Fn(&T) -> bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Drained<T>, CaptureError> {
    let mut truncated = false;
    let mut write_error = None;
    loop {
        // Wake at least every PROGRESS_EVERY even when the program is quiet (sleeping, blocked
        // on input), so progress keeps coming and an interrupt (`request_stop`) is seen within
        // a second (SIGINT to cachecolor alone must not be ignored during a capture).
        let item = match rx.recv_timeout(PROGRESS_EVERY) {
            Ok(item) => Some(item),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if let Some(item) = item {
            let (block, counts) = parts(item);
            match sink.push(&block, counts, progress) {
                Ok(full) => {
                    let _ = free_tx.send(block);
                    if full {
                        truncated = true;
                        break;
                    }
                }
                Err(e) => {
                    write_error = Some(e);
                    break;
                }
            }
        } else if sink.last_progress.elapsed() >= PROGRESS_EVERY {
            sink.last_progress = Instant::now();
            progress(sink.records);
        }
        if stop_requested() {
            write_error = Some(CaptureError::io(
                format!("capture of {} interrupted", sink.out.display()),
                std::io::Error::from(std::io::ErrorKind::Interrupted),
            ));
            break;
        }
    }
    let (status, ended) = if truncated || write_error.is_some() {
        // Kill before dropping the channel: the reader then sees end of file rather than the
        // tracer seeing a write error in the middle of the program.
        let status = child.kill_and_wait();
        drop(rx);
        (status, handle.join().expect("the reader thread panicked"))
    } else {
        // The reader has finished (the channel closed). If it failed, the tracer may still be
        // running (untraced, or blocked): stop it rather than wait for it.
        let ended = handle.join().expect("the reader thread panicked");
        let status = if failed(&ended) {
            child.kill_and_wait()
        } else {
            child.wait()
        };
        (status, ended)
    };
    match write_error {
        Some(e) => Err(e),
        None => Ok(Drained {
            status,
            ended,
            truncated,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn abandoned_capture_leaves_out_alone_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.cctrace");
        std::fs::write(&out, b"old").unwrap();
        let mut sink = Sink::create(&out, None).unwrap();
        sink.start("{}").unwrap();
        sink.push(&[Record::load(64); 1000], None, &mut |_| {})
            .unwrap();
        assert_eq!(
            names(dir.path()).len(),
            2,
            "the temporary file sits beside out"
        );
        drop(sink);
        assert_eq!(names(dir.path()), ["t.cctrace"]);
        assert_eq!(std::fs::read(&out).unwrap(), b"old");
    }

    #[test]
    fn finished_capture_replaces_out_and_respects_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.cctrace");
        std::fs::write(&out, b"old").unwrap();
        let mut sink = Sink::create(&out, Some(1500)).unwrap();
        sink.start("{\"x\":1}").unwrap();
        let recs = [Record::load(64), Record::store(128)].repeat(500);
        assert!(!sink
            .push(&recs, Some(Counts::of(&recs)), &mut |_| {})
            .unwrap());
        assert!(sink
            .push(&recs, Some(Counts::of(&recs)), &mut |_| {})
            .unwrap());
        let c = sink.counts();
        assert_eq!((c.loads, c.stores), (750, 750));
        assert_eq!(sink.finish(Some((3, false, true))).unwrap(), 1500);
        assert_eq!(names(dir.path()), ["t.cctrace"]);
        let mut r = cachecolor_sim::trace::native::TraceReader::open(&out).unwrap();
        // The outcome is in the trace's own metadata.
        let meta: serde_json::Value = serde_json::from_str(r.metadata()).unwrap();
        assert_eq!(meta["x"], 1);
        assert_eq!(meta["exit_code"], 3);
        assert_eq!(meta["complete"], false);
        assert_eq!(meta["truncated"], true);
        assert_eq!(cachecolor_sim::trace::collect(&mut r).unwrap().len(), 1500);
    }
}
