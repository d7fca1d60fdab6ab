/*!
cachecolor-capture: run an unmodified program under a tracing back end and stream its memory
references straight into a native cachecolor trace (`cachecolor trace -- PROGRAM ARGS`), with
progress, and without a text trace on disk.

Back ends (see docs/capture.md for what each can and cannot see):
- `Backend::Qemu` (preferred): QEMU user mode (`qemu-<arch> -cpu max -plugin ...`) with
  cachecolor's TCG plugin (qemu-plugin/), which build.rs compiles, this library embeds, and
  src/qemu.rs writes to a private temporary directory at run time. The plugin streams 16-byte
  binary records (block definitions, block executions, loads, stores) into a FIFO; src/stream.rs
  expands them into per-instruction fetches and exact instruction counts. Per-thread ids.
- `Backend::Lackey` (fallback): `valgrind --tool=lackey --trace-mem=yes --log-file=FIFO`, parsed
  as it streams by `cachecolor_sim::trace::lackey::LackeyReader` (src/lackey.rs). Threads are
  serialised and unnamed; read-modify-writes come out as `Modify` records.
- `Backend::Auto`: QEMU when its `qemu-<arch>` binary is installed and the plugin was built,
  else lackey.

Both run the same way: a reader thread decodes the FIFO into blocks of records that the calling
thread writes through `sink::Sink` (temporary file, counts, limit, progress); src/fifo.rs makes
the FIFO safe to wait on, src/program.rs finds the program, src/child.rs never leaves a tracer
running behind.

Contract of [`capture`]:
- The program is resolved like a shell does (a path if it contains '/', else the first
  executable match on `PATH`) before anything runs; a missing or non-executable program is a
  [`CaptureError::ProgramNotFound`] / [`CaptureError::NotExecutable`].
- The trace is written to a temporary file in `out`'s directory and renamed over `out` only
  when it is complete (end marker written). Any error before that removes the temporary file and
  leaves an existing `out` untouched.
- The program's own stdin/stdout/stderr are inherited: it runs as it would in the terminal.
- A program that exits with a non-zero status (or is killed by a signal) still yields its trace:
  the trace is renamed to `out` as usual and [`CaptureError::ProgramFailed`] is returned, carrying
  the exit code and the full [`CaptureSummary`], so no caller can mistake it for a clean run.
  Exit codes follow the shell convention: 128 + N for death by signal N.
- With `max_records`, the trace stops at exactly that many records, the program is killed
  (SIGKILL) and the summary says `truncated`; this is a success, whatever the kill did to the exit
  status.
- `progress` is called with the number of records written so far, at most about four times a
  second, and once at the end.
- The metadata string of the trace is a JSON object recording the back end, the tool's path, the
  command line, the working directory and the options.
*/

mod child;
mod fifo;
mod heap;
mod initramfs;
mod lackey;
mod memmap;
mod program;
mod qemu;
mod sink;
mod stream;
mod syscalls;
pub mod system;
pub mod tasks;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

pub use program::Program;
pub use sink::request_stop;
pub use system::{capture_system, GuestReport, RecordReplay, SystemOptions};

/// Which tool captures the references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// QEMU if available, else Valgrind lackey.
    #[default]
    Auto,
    /// QEMU user mode with cachecolor's TCG plugin.
    Qemu,
    /// Valgrind's lackey tool.
    Lackey,
}

impl Backend {
    /// Every name [`Backend::parse`] accepts.
    pub const NAMES: [&'static str; 3] = ["auto", "qemu", "lackey"];

    /// Parse a back end name (case-insensitive): `auto`, `qemu` or `lackey` (`valgrind` is
    /// accepted as an alias of `lackey`).
    pub fn parse(name: &str) -> Result<Backend, CaptureError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "qemu" => Ok(Backend::Qemu),
            "lackey" | "valgrind" => Ok(Backend::Lackey),
            _ => Err(CaptureError::UnknownBackend {
                name: name.to_string(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Qemu => "qemu",
            Backend::Lackey => "lackey",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = CaptureError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::parse(s)
    }
}

/// What to capture and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureOptions {
    pub backend: Backend,
    /// Record one instruction fetch per executed instruction (default true). When false, the
    /// instruction counts still ride on the data records' `icount`.
    pub ifetch: bool,
    /// Stop after this many records: the program is killed and the summary says `truncated`.
    pub max_records: Option<u64>,
    /// Turn every system call into privileged records (qemu only; `syscalls.rs`): a marker
    /// carrying the call's identity and the user-buffer accesses the call implies. Off by
    /// default; lackey cannot see system calls and rejects it.
    pub syscalls: bool,
    /// Fast-forward (qemu only): record nothing until the program (all threads together) has
    /// executed this many instructions, counted per executed block (so within one block of
    /// it); each thread then starts at its next block. 0 (default) records from the first instruction. Lackey
    /// rejects a non-zero value.
    pub skip_instructions: u64,
    /// Keep the PC of every record (for attribution, `cachecolor annotate`): the trace is then
    /// native version 3 with a PC column. Default true; needs `ifetch` (a data record's PC is the
    /// address of the fetch before it), so without fetches there are none.
    pub pcs: bool,
    /// Basic-block vectors (qemu only; SimPoint, Sherwood et al. ASPLOS 2002): every this many
    /// instructions (all threads, skipped ones included), one line of per-block instruction
    /// counts appended to `bbv_out` in SimPoint's `.bb` format. 0 (default): none.
    pub bbv_interval: u64,
    /// Where the vectors go (required with `bbv_interval`).
    pub bbv_out: Option<PathBuf>,
    /// Stop once the trace holds this many instructions (its last record is the one that
    /// reaches them): a region fixed in instructions. The program is killed and the summary
    /// says `truncated`, as with `max_records`; either limit stops the capture.
    pub max_instructions: Option<u64>,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            backend: Backend::Auto,
            ifetch: true,
            max_records: None,
            syscalls: false,
            skip_instructions: 0,
            pcs: true,
            bbv_interval: 0,
            bbv_out: None,
            max_instructions: None,
        }
    }
}

/// What a capture produced.
#[derive(Debug, Clone, PartialEq)]
pub struct CaptureSummary {
    /// The back end that ran (never `Auto`).
    pub backend: Backend,
    /// The trace file written.
    pub out: PathBuf,
    /// Records in the trace, and how many of each kind.
    pub records: u64,
    pub loads: u64,
    pub stores: u64,
    pub ifetches: u64,
    pub modifies: u64,
    /// Distinct threads seen (1 for lackey, which does not tell threads apart).
    pub threads: u32,
    /// The program's exit status; 128 + N if it died of signal N.
    pub exit_code: i32,
    /// Wall-clock seconds from start to the trace being in place.
    pub seconds: f64,
    /// True when `max_records` stopped the capture (the program was killed).
    pub truncated: bool,
    /// True when the back end's stream ended properly: for QEMU, the plugin's end record arrived
    /// and its record count matched; for lackey (which writes every line at once), valgrind was
    /// not SIGKILLed. False for QEMU when the program died of a signal: QEMU 7.2 then exits
    /// without telling the plugin, and the records it still buffered (up to 8192 per thread,
    /// the program's last moments) are lost.
    pub complete: bool,
}

impl CaptureSummary {
    /// Records per second of wall-clock time.
    pub fn records_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.records as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Everything that can go wrong in a capture, each saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("unknown capture backend '{name}': expected one of auto, qemu, lackey")]
    UnknownBackend { name: String },

    #[error("program not found: '{program}' {where_}")]
    ProgramNotFound { program: String, where_: String },

    #[error("cannot run '{}': {reason}", .path.display())]
    NotExecutable { path: PathBuf, reason: String },

    #[error("{tool} is not installed (needed by the {backend} capture backend): {hint}")]
    BackendNotInstalled {
        backend: Backend,
        tool: String,
        hint: String,
    },

    #[error("the {backend} capture backend failed: {message}")]
    BackendFailed { backend: Backend, message: String },

    #[error("the {backend} capture backend cannot {what}: {hint}")]
    Unsupported {
        backend: Backend,
        what: String,
        hint: String,
    },

    #[error(
        "program exited with status {code}{how}; its trace ({records} records) was kept in {out}",
        records = .summary.records, out = .summary.out.display(),
        how = if .summary.complete { "" } else { " before the tracer could flush its last records" }
    )]
    ProgramFailed {
        code: i32,
        summary: Box<CaptureSummary>,
    },

    /// Full-system capture (src/system.rs) could not run or finish.
    #[error("full-system capture: {message}")]
    System { message: String },

    #[error("trace I/O error: {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error("trace I/O error: writing {}: {source}", .path.display())]
    Trace {
        path: PathBuf,
        #[source]
        source: cachecolor_sim::Error,
    },
}

impl CaptureError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CaptureError::Io {
            context: context.into(),
            source,
        }
    }

    /// The summary of a capture whose trace was kept despite the error (`ProgramFailed`).
    pub fn summary(&self) -> Option<&CaptureSummary> {
        match self {
            CaptureError::ProgramFailed { summary, .. } => Some(summary),
            _ => None,
        }
    }
}

/// Which back end `Auto` would pick on this machine for `program`, or why none can run it.
pub fn resolve_backend(program: &Program, backend: Backend) -> Result<Backend, CaptureError> {
    match backend {
        Backend::Qemu => qemu::Qemu::locate(program).map(|_| Backend::Qemu),
        Backend::Lackey => lackey::locate_valgrind().map(|_| Backend::Lackey),
        Backend::Auto => match qemu::Qemu::locate(program) {
            Ok(_) => Ok(Backend::Qemu),
            Err(qemu_err) => {
                if program.is_foreign_arch() {
                    // Valgrind runs host binaries only.
                    return Err(qemu_err);
                }
                match lackey::locate_valgrind() {
                    Ok(_) => Ok(Backend::Lackey),
                    Err(_) => Err(CaptureError::BackendNotInstalled {
                        backend: Backend::Auto,
                        tool: format!("neither {} nor valgrind", program.qemu_binary_name()),
                        hint: "install QEMU user mode with `apt-get install qemu-user` \
                               (preferred) or Valgrind with `apt-get install valgrind`"
                            .to_string(),
                    }),
                }
            }
        },
    }
}

/// Run `program args` under a tracing back end and write its memory references to the native
/// trace `out`. See the crate documentation for the contract.
pub fn capture(
    program: &str,
    args: &[String],
    out: &Path,
    opts: &CaptureOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<CaptureSummary, CaptureError> {
    let started = Instant::now();
    sink::clear_stop();
    let prog = Program::resolve(program)?;
    let backend = resolve_backend(&prog, opts.backend)?;
    if opts.syscalls && backend == Backend::Lackey {
        return Err(CaptureError::Unsupported {
            backend,
            what: "mark system calls (--syscalls)".into(),
            hint: "Valgrind's lackey sees user code only and no system call boundaries; use \
                   --backend qemu (apt-get install qemu-user)"
                .into(),
        });
    }
    if opts.skip_instructions > 0 && backend == Backend::Lackey {
        return Err(CaptureError::Unsupported {
            backend,
            what: "fast-forward (skip instructions)".into(),
            hint: "only the QEMU plugin can skip; use --backend qemu (apt-get install qemu-user)"
                .into(),
        });
    }
    if opts.bbv_interval > 0 && backend == Backend::Lackey {
        return Err(CaptureError::Unsupported {
            backend,
            what: "basic-block vectors".into(),
            hint:
                "only the QEMU plugin counts them; use --backend qemu (apt-get install qemu-user)"
                    .into(),
        });
    }
    let command: Vec<String> = std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .collect();

    let mut sink = sink::Sink::create(out, opts.max_records)?;
    sink.limit_instructions(opts.max_instructions);
    sink.keep_pcs(opts.pcs && opts.ifetch);
    let run = match backend {
        Backend::Qemu => qemu::run(&prog, args, &command, opts, &mut sink, progress),
        Backend::Lackey => lackey::run(&prog, args, &command, opts, &mut sink, progress),
        Backend::Auto => unreachable!("resolve_backend never returns Auto"),
    }?;
    let counts = sink.counts();
    let records = sink.finish(Some((run.exit_code, run.complete, run.truncated)))?;
    progress(records);

    let summary = CaptureSummary {
        backend,
        out: out.to_path_buf(),
        records,
        loads: counts.loads,
        stores: counts.stores,
        ifetches: counts.ifetches,
        modifies: counts.modifies,
        threads: run.threads,
        exit_code: run.exit_code,
        seconds: started.elapsed().as_secs_f64(),
        truncated: run.truncated,
        complete: run.complete,
    };
    if run.exit_code != 0 && !run.truncated {
        return Err(CaptureError::ProgramFailed {
            code: run.exit_code,
            summary: Box::new(summary),
        });
    }
    Ok(summary)
}

/// What a back end's run reports to [`capture`].
pub(crate) struct RunOutcome {
    pub exit_code: i32,
    pub threads: u32,
    pub truncated: bool,
    pub complete: bool,
}

/// The JSON metadata string stored in the trace header.
pub(crate) fn metadata(
    backend: Backend,
    tool: &Path,
    tool_argv: &[String],
    command: &[String],
    prog: &Program,
    opts: &CaptureOptions,
) -> String {
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "source": "cachecolor-capture",
        "cachecolor_version": env!("CARGO_PKG_VERSION"),
        "backend": backend.name(),
        "tool": tool.display().to_string(),
        "tool_command": tool_argv,
        "command": command,
        "program": prog.path.display().to_string(),
        "cwd": cwd,
        "ifetch": opts.ifetch,
        "max_records": opts.max_records,
        "max_instructions": opts.max_instructions,
        "syscalls": opts.syscalls,
        "skip_instructions": opts.skip_instructions,
        "bbv_interval": opts.bbv_interval,
        "host": format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
    })
    .to_string()
}
