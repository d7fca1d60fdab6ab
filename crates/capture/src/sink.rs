/*!
Where captured records go: a native trace written to a temporary file beside the requested output
and renamed over it only when complete, so a failed capture never leaves a half-written trace at
`out` nor destroys an existing one (the temporary file is deleted when the `Sink` is dropped
without `finish`).

The sink also counts records by kind, enforces `max_records` (it accepts exactly that many and
then tells the back end to stop) and throttles progress reports to about four a second.
*/
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cachecolor_sim::trace::native::TraceWriter;
use cachecolor_sim::trace::{Kind, Record};
use tempfile::NamedTempFile;

use crate::CaptureError;

const PROGRESS_EVERY: Duration = Duration::from_millis(250);

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
    tmp: NamedTempFile,
    writer: Option<TraceWriter<BufWriter<File>>>,
    counts: Counts,
    records: u64,
    max: u64,
    last_progress: Instant,
}

impl Sink {
    /// Prepare the temporary file in `out`'s directory (no header yet: see `start`).
    pub(crate) fn create(out: &Path, max_records: Option<u64>) -> Result<Sink, CaptureError> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(&dir)
            .map_err(|e| {
                CaptureError::io(format!("cannot create a file in {}", dir.display()), e)
            })?;
        Ok(Sink {
            out: out.to_path_buf(),
            tmp,
            writer: None,
            counts: Counts::default(),
            records: 0,
            max: max_records.unwrap_or(u64::MAX),
            last_progress: Instant::now(),
        })
    }

    /// Write the trace header with `metadata`; must precede `push`.
    pub(crate) fn start(&mut self, metadata: &str) -> Result<(), CaptureError> {
        let file = self
            .tmp
            .as_file()
            .try_clone()
            .map_err(|e| CaptureError::io(format!("{}", self.tmp.path().display()), e))?;
        let w = TraceWriter::new(BufWriter::with_capacity(1 << 20, file), metadata)
            .map_err(|e| self.trace_err(e))?;
        self.writer = Some(w);
        Ok(())
    }

    fn trace_err(&self, source: cachecolor_sim::Error) -> CaptureError {
        CaptureError::Trace {
            path: self.tmp.path().to_path_buf(),
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

    /// True once `max_records` records have been accepted.
    pub(crate) fn full(&self) -> bool {
        self.records >= self.max
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
        let room = self.max - self.records;
        let (recs, counts) = if (recs.len() as u64) > room {
            let r = &recs[..room as usize];
            (r, Counts::of(r))
        } else {
            (recs, counts.unwrap_or_else(|| Counts::of(recs)))
        };
        self.counts.add(counts);
        let w = self.writer.as_mut().expect("Sink::start not called");
        if let Err(e) = w.write_all(recs) {
            return Err(self.trace_err(e));
        }
        self.records += recs.len() as u64;
        if self.last_progress.elapsed() >= PROGRESS_EVERY {
            self.last_progress = Instant::now();
            progress(self.records);
        }
        Ok(self.full())
    }

    /// Write the end of the trace and move it to `out`. Returns the record count.
    pub(crate) fn finish(mut self) -> Result<u64, CaptureError> {
        let w = self.writer.take().expect("Sink::start not called");
        let buf = w.finish().map_err(|e| self.trace_err(e))?;
        buf.into_inner().map_err(|e| {
            CaptureError::io(
                format!("writing {}", self.tmp.path().display()),
                e.into_error(),
            )
        })?;
        let out = self.out.clone();
        // NamedTempFile is created 0600; a trace is an ordinary data file.
        use std::os::unix::fs::PermissionsExt;
        let _ = self
            .tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
        self.tmp.persist(&out).map_err(|e| {
            CaptureError::io(
                format!("cannot move the finished trace to {}", out.display()),
                e.error,
            )
        })?;
        Ok(self.records)
    }
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
    for item in rx.iter() {
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
        assert_eq!(sink.finish().unwrap(), 1500);
        assert_eq!(names(dir.path()), ["t.cctrace"]);
        let mut r = cachecolor_sim::trace::native::TraceReader::open(&out).unwrap();
        assert_eq!(r.metadata(), "{\"x\":1}");
        assert_eq!(cachecolor_sim::trace::collect(&mut r).unwrap().len(), 1500);
    }
}
