/*!
The Valgrind lackey back end (fallback when QEMU is missing, or `--backend lackey`): run
```text
valgrind --tool=lackey --trace-mem=yes --child-silent-after-fork=yes --log-file=$TMP/trace.fifo \
         /resolved/PROGRAM ARGS...
```
and parse lackey's text output as it streams through the FIFO with
`cachecolor_sim::trace::lackey::LackeyReader` (which ignores valgrind's own `==PID==` lines).
`valgrind` is found on `PATH` or taken from `$CACHECOLOR_VALGRIND`.

What lackey gives: `I` (instruction fetch), `L`, `S` and `M` (modify: a read-modify-write of one
location) records with sizes; no thread ids (valgrind serialises threads, so every record is
thread 0 and the summary counts one thread); only the initial process (children after fork are
silenced). With `ifetch` off, instruction records are dropped here and their count is carried on
the next data record's `icount`.

As for QEMU, a reader thread parses the text and hands blocks of records through a bounded
channel to the calling thread, which writes them (and calls `progress`).
*/
use std::io::BufReader;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;

use cachecolor_sim::trace::lackey::LackeyReader;
use cachecolor_sim::trace::{Kind, Record, RecordSource};

use crate::child::{self, exit_code};
use crate::fifo::{self, FifoReader};
use crate::memmap::{LoadedObject, ValgrindObjects};
use crate::program::{find_executable, Program};
use crate::sink::{drain, Drained, Sink};
use crate::{metadata, Backend, CaptureError, CaptureOptions, RunOutcome};

/// Find valgrind.
pub(crate) fn locate_valgrind() -> Result<PathBuf, CaptureError> {
    if let Some(p) = std::env::var_os("CACHECOLOR_VALGRIND") {
        let p = PathBuf::from(p);
        return find_executable(&p.to_string_lossy()).map_err(|_| {
            CaptureError::BackendNotInstalled {
                backend: Backend::Lackey,
                tool: format!("{} (from $CACHECOLOR_VALGRIND)", p.display()),
                hint: "point CACHECOLOR_VALGRIND at a valgrind binary, or unset it".into(),
            }
        });
    }
    find_executable("valgrind").map_err(|_| CaptureError::BackendNotInstalled {
        backend: Backend::Lackey,
        tool: "valgrind".into(),
        hint: "install it with `apt-get install valgrind` (Debian/Ubuntu), or use --backend qemu"
            .into(),
    })
}

/// Parse lackey's output from the FIFO, sending blocks to `tx`. Returns whether any record was
/// parsed, or the parse error with that flag.
/// What the reader thread leaves: whether any record came, and the objects valgrind loaded
/// (`memmap::ValgrindObjects`).
type ReaderResult = Result<(bool, Vec<LoadedObject>), (String, bool)>;

fn reader_thread(
    reader: FifoReader,
    ifetch: bool,
    tx: mpsc::SyncSender<Vec<Record>>,
    free: mpsc::Receiver<Vec<Record>>,
) -> ReaderResult {
    let noted = ValgrindObjects::new(reader);
    let objects = noted.handle();
    let mut src = LackeyReader::new(BufReader::with_capacity(1 << 20, noted));
    let objects = move || std::mem::take(&mut *objects.lock().unwrap());
    let mut block: Vec<Record> = Vec::new();
    let mut pending_icount: u32 = 0;
    let mut any = false;
    loop {
        match src.next_block(&mut block) {
            Ok(true) => {}
            Ok(false) => return Ok((any, objects())),
            Err(e) => return Err((e.to_string(), any)),
        }
        any = true;
        if !ifetch {
            // Drop instruction records, carrying their count on the next data record.
            block.retain_mut(|r| {
                if r.kind == Kind::IFetch {
                    pending_icount = pending_icount.saturating_add(r.icount.max(1));
                    false
                } else {
                    r.icount = r.icount.saturating_add(pending_icount);
                    pending_icount = 0;
                    true
                }
            });
        }
        let next = free.try_recv().unwrap_or_default();
        if tx.send(std::mem::replace(&mut block, next)).is_err() {
            return Ok((any, objects()));
        }
    }
}

pub(crate) fn run(
    prog: &Program,
    args: &[String],
    command: &[String],
    opts: &CaptureOptions,
    sink: &mut Sink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunOutcome, CaptureError> {
    let valgrind = locate_valgrind()?;
    if prog.is_foreign_arch() {
        return Err(CaptureError::NotExecutable {
            path: prog.path.clone(),
            reason: format!(
                "it is a {} program and valgrind runs only host programs; use --backend qemu",
                prog.arch
            ),
        });
    }
    let dir = tempfile::Builder::new()
        .prefix("cachecolor-capture.")
        .tempdir()
        .map_err(|e| CaptureError::io("cannot create a temporary directory", e))?;
    let fifo_path = dir.path().join("trace.fifo");
    fifo::mkfifo(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot create FIFO {}", fifo_path.display()), e))?;
    let mut reader = FifoReader::open(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot open FIFO {}", fifo_path.display()), e))?;

    // With `-v -v` valgrind says where it loads each object (memmap.rs), which is the map of a
    // lackey capture; it is wanted with the PCs.
    let want_map = opts.pcs && opts.ifetch;
    let mut argv: Vec<String> = vec![
        "--tool=lackey".into(),
        "--trace-mem=yes".into(),
        "--child-silent-after-fork=yes".into(),
        format!("--log-file={}", fifo_path.display()),
    ];
    if want_map {
        argv.extend(["-v".into(), "-v".into()]);
    }
    let p = prog.path.to_string_lossy().into_owned();
    argv.push(if p.starts_with('-') {
        format!("./{p}")
    } else {
        p
    });
    argv.extend(args.iter().cloned());
    sink.start(&metadata(
        Backend::Lackey,
        &valgrind,
        &argv,
        command,
        prog,
        opts,
    ))?;

    let mut child = child::spawn(Command::new(&valgrind).args(&argv)).map_err(|e| {
        CaptureError::BackendFailed {
            backend: Backend::Lackey,
            message: format!("cannot start {}: {e}", valgrind.display()),
        }
    })?;
    reader.set_writer(child.id());

    let (tx, rx) = mpsc::sync_channel::<Vec<Record>>(4);
    let (free_tx, free_rx) = mpsc::channel::<Vec<Record>>();
    let ifetch = opts.ifetch;
    let handle = std::thread::Builder::new()
        .name("cachecolor-capture-reader".into())
        .spawn(move || reader_thread(reader, ifetch, tx, free_rx))
        .map_err(|e| CaptureError::io("cannot start the reader thread", e))?;

    let Drained {
        status,
        ended,
        truncated,
    } = drain(
        sink,
        rx,
        |b| (b, None),
        &free_tx,
        &mut child,
        handle,
        Result::is_err,
        progress,
    )?;
    let status = status.map_err(|e| CaptureError::io("waiting for valgrind", e))?;
    let objects = match ended {
        Ok((_, objects)) => objects,
        Err((message, any)) => {
            return Err(lackey_failed(&valgrind, status, message, any));
        }
    };
    if want_map {
        if let Some(map) = crate::memmap::build_from_valgrind(&objects, sink.records(), &prog.path)
        {
            sink.add_metadata("memory_map", map);
        }
    }
    Ok(RunOutcome {
        exit_code: exit_code(status),
        threads: u32::from(sink.records() > 0),
        truncated,
        // Valgrind writes each line as it goes: nothing is held back unless it was SIGKILLed.
        complete: !truncated && status.signal() != Some(libc::SIGKILL),
    })
}

fn lackey_failed(
    valgrind: &std::path::Path,
    status: std::process::ExitStatus,
    message: String,
    any: bool,
) -> CaptureError {
    CaptureError::BackendFailed {
        backend: Backend::Lackey,
        message: if any {
            format!("cannot parse lackey's output: {message}")
        } else {
            format!(
                "{} exited ({status}) before tracing started; see its messages above \
                 ({message})",
                valgrind.display()
            )
        },
    }
}
