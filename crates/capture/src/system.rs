/*!
Full-system capture (`cachecolor trace capture --system -- PROGRAM ARGS`): boot a packaged Linux
kernel under QEMU system emulation (TCG) with a minimal initramfs that runs the program, and
trace every instruction and memory reference the guest CPU executes -- the kernel's and the
program's -- from the program's start to its exit.

What runs:
```text
qemu-system-x86_64 -M pc -cpu max -smp 1 -m MEM -icount shift=2,sleep=off -display none
    -no-reboot -serial file:$TMP/console -kernel VMLINUZ -initrd $TMP/initramfs.cpio
    -append "console=ttyS0 quiet loglevel=3 panic=-1 nokaslr no5lvl mitigations=off rdinit=/init"
    -plugin $TMP/cachecolor-system.so,out=$TMP/trace.fifo
```
- The kernel: `--kernel`, else `$CACHECOLOR_KERNEL`, else the newest `/boot/vmlinuz-*` (Debian's
  `linux-image-amd64`). QEMU: `$CACHECOLOR_QEMU_SYSTEM` or `qemu-system-x86_64` on `PATH`.
  BusyBox: `$CACHECOLOR_BUSYBOX` or `busybox` on `PATH` (Debian's `busybox-static`).
- The image (src/initramfs.rs): BusyBox (applets linked in /bb), the launcher `cc_run`
  (guest/cc_run.c, static), the program at its host path with the libraries `ldd` lists, its
  interpreter for a script, the `--guest-file` paths (files or trees, at the same paths), the
  host working directory (created, empty unless copied), and `/init`, a BusyBox shell script
  that mounts proc, sys and devtmpfs, creates /tmp, changes to that directory and execs
  `cc_run PROGRAM ARGS`.
- The region: cc_run executes a start magic instruction in the forked child right before its
  execve of the program and a stop magic once the program has exited (guest/cc_run.c), which
  the plugin (qemu-plugin/cachecolor_system.c) acts on; boot and power-off are not traced.
  Everything the one vCPU executes in between is: the program, the kernel on its behalf
  (system calls, page faults, exec, exit), interrupts, kernel threads and the idle loop.
- Privilege: the plugin stream is decoded by the user-mode decoder (src/stream.rs); then every
  instruction fetch at an address in the upper half (>= 0xffff800000000000, where x86-64 Linux
  maps the kernel and user code can never execute) is privileged, and every load or store takes
  the privilege of the instruction that made it, or is privileged if its address is in the
  upper half (interrupt delivery, which QEMU reports within the interrupted user instruction;
  `mark_privilege`). Addresses are virtual, as the instruction used them.
- Tasks (src/tasks.rs): each record's `thread` is the guest kernel task that made it, found
  at the kernel's task switch as the records stream through the reader; the launcher prints
  the symbols it needs before the region and the guest's scheduler events after it, from which
  the tasks get their pids (the `tasks` metadata, set when the capture finishes).
- Guest time: `-icount shift=2` makes guest time advance 4 ns per executed instruction (a
  250 MIPS machine), so the guest kernel's tick-based CPU accounting samples instructions: the
  program's utime/stime (reported by cc_run from /proc/PID/stat) is an independent measure of
  its user/kernel instruction split, which the tests compare with the trace.

Failures (one line each, the temporary directory and QEMU always removed): a missing tool or
kernel (with the apt command that installs it), a program that is not x86-64, an image larger
than the guest memory allows, a guest that does not reach the launcher within `boot_timeout`
(a kernel that does not boot: the console's last line is quoted), a program the guest cannot
execute (the guest's errno), a guest that does not power off within `SHUTDOWN_TIMEOUT` after the
program, a program that fails (its trace is kept, as in user mode). `max_records` stops the
capture as in user mode (QEMU is killed).
*/
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use cachecolor_sim::trace::{Kind, Record, BLOCK_RECORDS};

use crate::child;
use crate::fifo::{self, FifoReader};
use crate::initramfs::Image;
use crate::program::{find_executable, Program};
use crate::sink::{drain, Counts, Drained, Sink};
use crate::stream::{Decoder, REC_BYTES};
use crate::tasks::{self, SwitchSymbols, TaskTracker};
use crate::{Backend, CaptureError, CaptureSummary};

static SYSTEM_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cachecolor_system.so"));
static CC_RUN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cc_run"));

/// Lowest x86-64 kernel address (the upper canonical half).
pub const KERNEL_BASE: u64 = 0xffff_8000_0000_0000;
/// Seconds the guest may take to power off after the program ended.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(120);
/// Guest time per instruction, as `-icount shift=ICOUNT_SHIFT` (2^shift ns).
pub const ICOUNT_SHIFT: u32 = 2;
const BLOCKS_IN_FLIGHT: usize = 4;
/// Header bytes left for the task table (about 1000 tasks; more and the table is left out,
/// saying so).
const TASK_METADATA_ROOM: usize = 128 << 10;

/// Options of a full-system capture.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemOptions {
    /// Kernel image (bzImage); `None`: `$CACHECOLOR_KERNEL` or the newest `/boot/vmlinuz-*`.
    pub kernel: Option<PathBuf>,
    /// Host files or directory trees copied into the guest at the same paths.
    pub guest_files: Vec<PathBuf>,
    /// Guest memory in MiB (64 ..= 16384).
    pub memory_mib: u32,
    /// Seconds from QEMU's start until the guest must be running the launcher.
    pub boot_timeout: Duration,
    /// Stop after this many records (QEMU is killed; a success marked truncated).
    pub max_records: Option<u64>,
    /// QEMU record/replay: record the guest's nondeterministic inputs (interrupts, timers,
    /// clock reads, device input) into a log, or replay such a log, so that a replayed capture
    /// repeats the recorded guest's execution (docs/capture.md "Reproducibility").
    pub record_replay: Option<RecordReplay>,
}

/// `-icount shift=2,rr=record|replay,rrfile=LOG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordReplay {
    /// Write the guest's nondeterministic events to this log.
    Record(PathBuf),
    /// Feed the guest the events of this log (one recorded with the same program, kernel,
    /// guest files and memory: the initramfs is the same bytes).
    Replay(PathBuf),
}

impl RecordReplay {
    fn icount_arg(&self) -> String {
        let (mode, log) = match self {
            RecordReplay::Record(p) => ("record", p),
            RecordReplay::Replay(p) => ("replay", p),
        };
        // sleep=off is not given: QEMU's record/replay keeps the guest clock to the log.
        format!(
            "shift={ICOUNT_SHIFT},rr={mode},rrfile={}",
            log.to_string_lossy().replace(',', ",,")
        )
    }

    fn describe(&self) -> serde_json::Value {
        match self {
            RecordReplay::Record(p) => {
                serde_json::json!({"mode": "record", "log": p.display().to_string()})
            }
            RecordReplay::Replay(p) => {
                serde_json::json!({"mode": "replay", "log": p.display().to_string()})
            }
        }
    }
}

impl Default for SystemOptions {
    fn default() -> Self {
        SystemOptions {
            kernel: None,
            guest_files: Vec::new(),
            memory_mib: 512,
            boot_timeout: Duration::from_secs(600),
            max_records: None,
            record_replay: None,
        }
    }
}

/// What the guest reported besides the trace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GuestReport {
    /// The program's CPU time in clock ticks as the guest kernel accounted it (/proc/PID/stat
    /// fields 14 and 15) and the tick rate; `None` when the capture stopped early.
    pub utime: Option<u64>,
    pub stime: Option<u64>,
    pub hz: Option<u64>,
    /// Seconds from QEMU's start until the launcher ran (boot).
    pub boot_seconds: f64,
    /// Seconds from the launcher's start until QEMU exited (the traced run plus power-off).
    pub run_seconds: f64,
    /// What the program (and the guest) printed on the console between start and exit.
    pub output: String,
    /// The kernel image booted.
    pub kernel: PathBuf,
    /// The running kernel's text, `[_stext, _etext)` from the guest's /proc/kallsyms.
    pub kernel_text: Option<(u64, u64)>,
}

fn err(message: impl Into<String>) -> CaptureError {
    CaptureError::System {
        message: message.into(),
    }
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The kernel image to boot.
pub fn locate_kernel(kernel: Option<&Path>) -> Result<PathBuf, CaptureError> {
    if let Some(k) = kernel
        .map(Path::to_path_buf)
        .or_else(|| env_path("CACHECOLOR_KERNEL"))
    {
        return if k.is_file() {
            Ok(k)
        } else {
            Err(err(format!("kernel image {} does not exist", k.display())))
        };
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/boot")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().ok_or_else(|| {
        err(
            "no kernel image in /boot: install one with `apt-get install linux-image-amd64`, \
             or give --kernel PATH",
        )
    })
}

fn locate_tool(var: &str, name: &str, package: &str) -> Result<PathBuf, CaptureError> {
    let n = env_path(var).map_or(name.to_string(), |p| p.to_string_lossy().into_owned());
    find_executable(&n).map_err(|_| CaptureError::BackendNotInstalled {
        backend: Backend::Qemu,
        tool: n.clone(),
        hint: format!("full-system capture needs it: `apt-get install {package}`"),
    })
}

/// Check that full-system capture can run here (tools, kernel, built parts), without running.
pub fn check_system(kernel: Option<&Path>) -> Result<(), CaptureError> {
    if SYSTEM_SO.is_empty() || CC_RUN.is_empty() {
        return Err(err(
            "the system-mode plugin or the guest launcher was not compiled when cachecolor was \
             built (a C compiler and a static C library are needed: `apt-get install gcc \
             libc6-dev`)",
        ));
    }
    locate_tool(
        "CACHECOLOR_QEMU_SYSTEM",
        "qemu-system-x86_64",
        "qemu-system-x86",
    )?;
    locate_tool("CACHECOLOR_BUSYBOX", "busybox", "busybox-static")?;
    locate_kernel(kernel)?;
    Ok(())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The guest's /init: mount the pseudo file systems, go to the working directory, run.
fn init_script(cwd: &Path, argv: &[String]) -> String {
    let cmd: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
    format!(
        "#!/bin/busybox sh\n\
         # Generated by cachecolor (crates/capture/src/system.rs): full-system capture's init.\n\
         /bin/busybox mkdir -p /proc /sys /dev /tmp /bb\n\
         /bin/busybox mount -t proc proc /proc\n\
         /bin/busybox mount -t sysfs sys /sys\n\
         /bin/busybox mount -t devtmpfs dev /dev\n\
         /bin/busybox --install -s /bb\n\
         # The scheduler's events label the trace's tasks with pids (src/tasks.rs).\n\
         if /bin/busybox mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then\n\
         echo 16384 > /sys/kernel/tracing/buffer_size_kb\n\
         echo 1 > /sys/kernel/tracing/options/record-tgid\n\
         echo 0 > /sys/kernel/tracing/options/overwrite\n\
         echo 'sched:sched_switch sched:sched_process_fork' > /sys/kernel/tracing/set_event\n\
         fi 2>/dev/null\n\
         export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/bb\n\
         export HOME=/root TERM=dumb LANG=C.UTF-8\n\
         cd {} || exit 1\n\
         exec /cc_run {}\n",
        shell_quote(&cwd.to_string_lossy()),
        cmd.join(" ")
    )
}

/// Build the guest image for `prog` into `out`; returns the guest argv.
fn build_image(
    prog: &Program,
    args: &[String],
    opts: &SystemOptions,
    busybox: &Path,
    cwd: &Path,
    out: &Path,
) -> Result<(u64, Vec<String>), CaptureError> {
    let mut img = Image::default();
    let io_err = |what: &str, e: io::Error| err(format!("cannot copy {what} into the guest: {e}"));
    // BusyBox at /bin/busybox whatever its host path (its libraries, if dynamic, at theirs).
    let bb = std::fs::read(busybox).map_err(|e| io_err("busybox", e))?;
    img.file("/bin/busybox", 0o755, bb);
    img.add_host_path(busybox)
        .map_err(|e| io_err("busybox", e))?;
    img.file("/cc_run", 0o755, CC_RUN.to_vec());
    img.add_host_path(&prog.path)
        .map_err(|e| io_err("the program", e))?;
    let mut argv = Vec::new();
    if let Some((interp, arg)) = &prog.interpreter {
        img.add_host_path(interp)
            .map_err(|e| io_err("the script's interpreter", e))?;
        argv.push(interp.to_string_lossy().into_owned());
        argv.extend(arg.iter().cloned());
    }
    argv.push(prog.path.to_string_lossy().into_owned());
    argv.extend(args.iter().cloned());
    for f in &opts.guest_files {
        let abs = if f.is_absolute() {
            f.clone()
        } else {
            cwd.join(f)
        };
        img.add_host_path(&abs)
            .map_err(|e| io_err("a --guest-file", e))?;
    }
    img.dir(&cwd.to_string_lossy());
    img.dir("/tmp");
    img.dir("/root");
    img.file("/init", 0o755, init_script(cwd, &argv).into_bytes());
    let file = std::fs::File::create(out)
        .map_err(|e| err(format!("cannot write {}: {e}", out.display())))?;
    let mut w = io::BufWriter::new(file);
    img.write(&mut w)
        .and_then(|_| w.flush())
        .map_err(|e| err(format!("cannot write {}: {e}", out.display())))?;
    Ok((img.data_bytes(), argv))
}

/// Set `privileged` from the addresses: a fetch in the kernel half is privileged, a load/store
/// inherits its instruction's mode (the decoder emits it right after the fetch), and any access
/// to the kernel half is privileged whatever the instruction: user mode cannot touch it, so it
/// is the CPU delivering an interrupt or exception (pushing the frame onto the kernel's entry
/// stack in the cpu_entry_area, 0xfffffe0000000000), which QEMU performs -- and reports --
/// within the interrupted user instruction. `mode` carries the current instruction's mode
/// across calls.
pub(crate) fn mark_privilege(recs: &mut [Record], mode: &mut bool) {
    for r in recs {
        if r.kind == Kind::IFetch {
            *mode = r.addr >= KERNEL_BASE;
            r.privileged = *mode;
        } else {
            r.privileged = *mode || r.addr >= KERNEL_BASE;
        }
    }
}

enum ReaderError {
    Io(io::Error),
    Stream(String),
}

struct ReaderEnd {
    complete: bool,
    /// The task tracker, `None` when the guest did not name `__switch_to_asm`.
    tasks: Option<TaskTracker>,
}

/// The kernel symbols of the console's `@@CC KTEXT ...@@` line (printed, and sent, before the
/// region begins: guest/cc_run.c).
fn switch_symbols(console: &Path) -> Option<SwitchSymbols> {
    let text = read_console(console);
    let line = text.lines().find(|l| l.contains("@@CC KTEXT"))?;
    let syms = SwitchSymbols {
        switch_to: stat_field(line, "switch")?,
        task_dead: stat_field(line, "dead")?,
    };
    (syms.switch_to != 0 && syms.task_dead != 0).then_some(syms)
}

fn reader_thread(
    mut reader: FifoReader,
    tx: mpsc::SyncSender<(Vec<Record>, Counts)>,
    free: mpsc::Receiver<Vec<Record>>,
    started: Arc<AtomicBool>,
    console: PathBuf,
    limit: u64,
) -> Result<ReaderEnd, ReaderError> {
    let mut dec = Decoder::new(true);
    let mut mode = false;
    // Records decoded within `limit` (the sink's max_records). The reader runs ahead of the
    // sink, so records past the cap are dropped here: the task table must count only the
    // records the trace keeps (bug: a capped capture's `tasks` counted up to a block more).
    let mut kept: u64 = 0;
    let mut cap = |block: &mut Vec<Record>, mark: usize| {
        let room = usize::try_from(limit - kept).unwrap_or(usize::MAX);
        if block.len() - mark > room {
            block.truncate(mark + room);
        }
        kept += (block.len() - mark) as u64;
    };
    let mut tasks: Option<TaskTracker> = None;
    let mut looked = false;
    let mut buf = vec![0u8; 4 << 20];
    let mut have = 0usize;
    let mut block: Vec<Record> = Vec::with_capacity(BLOCK_RECORDS + 1024);
    let send = |block: &mut Vec<Record>, counts: Counts| -> bool {
        let next = free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK_RECORDS + 1024));
        let full = std::mem::replace(block, next);
        block.clear(); // a recycled block still holds its old records
        tx.send((full, counts)).is_ok()
    };
    loop {
        let n = match reader.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => break,
            Err(e) => return Err(ReaderError::Io(e)),
        };
        have += n;
        let whole = have - have % REC_BYTES;
        let mut pos = 0;
        while pos < whole {
            let mark = block.len();
            pos += dec
                .decode(&buf[pos..whole], &mut block, BLOCK_RECORDS)
                .map_err(ReaderError::Stream)?;
            mark_privilege(&mut block[mark..], &mut mode);
            cap(&mut block, mark);
            if block.len() > mark {
                started.store(true, Ordering::Relaxed);
                if !looked {
                    looked = true;
                    tasks = switch_symbols(&console).map(TaskTracker::new);
                }
            }
            if let Some(t) = &mut tasks {
                t.assign(&mut block[mark..]);
            }
            if block.len() >= BLOCK_RECORDS && !send(&mut block, dec.take_counts()) {
                return Ok(ReaderEnd {
                    complete: false,
                    tasks,
                });
            }
        }
        buf.copy_within(whole..have, 0);
        have -= whole;
    }
    let mark = block.len();
    dec.finish(&mut block);
    mark_privilege(&mut block[mark..], &mut mode);
    cap(&mut block, mark);
    if let Some(t) = &mut tasks {
        t.assign(&mut block[mark..]);
    }
    if !block.is_empty() {
        send(&mut block, dec.take_counts());
    }
    Ok(ReaderEnd {
        complete: have == 0 && dec.complete(),
        tasks,
    })
}

/// The console's lines, lossily decoded.
fn read_console(path: &Path) -> String {
    let mut s = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_end(&mut s);
    }
    String::from_utf8_lossy(&s).replace('\r', "")
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(nothing)")
        .chars()
        .take(200)
        .collect()
}

/// `key=value` of a `@@CC STAT ...@@` line.
fn stat_field(line: &str, key: &str) -> Option<u64> {
    line.split(|c: char| c.is_whitespace() || c == '@')
        .find_map(|t| t.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// Run `program args` in a freshly booted guest and write everything its CPU executes to the
/// native trace `out`. See the module documentation.
pub fn capture_system(
    program: &str,
    args: &[String],
    out: &Path,
    opts: &SystemOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<(CaptureSummary, GuestReport), CaptureError> {
    let started_at = Instant::now();
    if !(64..=16384).contains(&opts.memory_mib) {
        return Err(err(format!(
            "guest memory {} MiB is out of range: allowed 64 to 16384",
            opts.memory_mib
        )));
    }
    if let Some(RecordReplay::Replay(log)) = &opts.record_replay {
        if !log.is_file() {
            return Err(err(format!(
                "record/replay log {} does not exist: give a log written by a recording capture \
                 of the same program",
                log.display()
            )));
        }
    }
    let prog = Program::resolve(program)?;
    if prog.arch != "x86_64" {
        return Err(err(format!(
            "'{program}' is a {} program; full-system capture boots an x86-64 guest and runs \
             x86-64 programs only",
            prog.arch
        )));
    }
    check_system(opts.kernel.as_deref())?;
    let qemu = locate_tool(
        "CACHECOLOR_QEMU_SYSTEM",
        "qemu-system-x86_64",
        "qemu-system-x86",
    )?;
    let busybox = locate_tool("CACHECOLOR_BUSYBOX", "busybox", "busybox-static")?;
    let kernel = locate_kernel(opts.kernel.as_deref())?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));

    let dir = tempfile::Builder::new()
        .prefix("cachecolor-system.")
        .tempdir()
        .map_err(|e| CaptureError::io("cannot create a temporary directory", e))?;
    let image = dir.path().join("initramfs.cpio");
    let (bytes, guest_argv) = build_image(&prog, args, opts, &busybox, &cwd, &image)?;
    // The kernel unpacks the archive into RAM while the archive itself is still in RAM, and
    // needs working memory besides: the image must fit twice with 96 MiB to spare.
    let need_mib = 2 * bytes.div_ceil(1 << 20) + 96;
    if need_mib > u64::from(opts.memory_mib) {
        return Err(err(format!(
            "the guest image holds {} MiB of files and needs at least {need_mib} MiB of guest \
             memory, more than the {} MiB allowed (--guest-memory, up to 16384): copy fewer \
             files or raise it",
            bytes.div_ceil(1 << 20),
            opts.memory_mib
        )));
    }
    let so = dir.path().join("cachecolor-system.so");
    std::fs::write(&so, SYSTEM_SO)
        .and_then(|_| std::fs::set_permissions(&so, std::fs::Permissions::from_mode(0o700)))
        .map_err(|e| CaptureError::io(format!("cannot write {}", so.display()), e))?;
    let fifo_path = dir.path().join("trace.fifo");
    let console = dir.path().join("console");
    let qemu_log = dir.path().join("qemu.log");
    fifo::mkfifo(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot create FIFO {}", fifo_path.display()), e))?;
    let mut reader = FifoReader::open(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot open FIFO {}", fifo_path.display()), e))?;

    let argv: Vec<String> = vec![
        "-M".into(),
        "pc".into(),
        "-cpu".into(),
        "max".into(),
        "-smp".into(),
        "1".into(),
        "-m".into(),
        format!("{}M", opts.memory_mib),
        "-icount".into(),
        match &opts.record_replay {
            None => format!("shift={ICOUNT_SHIFT},sleep=off"),
            Some(rr) => rr.icount_arg(),
        },
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-nodefaults".into(),
        "-serial".into(),
        format!("file:{}", console.display()),
        "-kernel".into(),
        kernel.to_string_lossy().into_owned(),
        "-initrd".into(),
        image.to_string_lossy().into_owned(),
        "-append".into(),
        "console=ttyS0 quiet loglevel=3 panic=-1 nokaslr no5lvl mitigations=off rdinit=/init"
            .into(),
        "-plugin".into(),
        format!(
            "{},out={}",
            so.to_string_lossy().replace(',', ",,"),
            fifo_path.to_string_lossy().replace(',', ",,")
        ),
    ];
    let command: Vec<String> = std::iter::once(program.to_string())
        .chain(args.iter().cloned())
        .collect();
    let meta = serde_json::json!({
        "source": "cachecolor-capture",
        "cachecolor_version": env!("CARGO_PKG_VERSION"),
        "backend": "qemu-system",
        "system": true,
        "kernel_code": true,
        "privilege": "from the instruction address: fetches at or above 0xffff800000000000 are \
                      the kernel's; loads and stores take their instruction's",
        "addresses": "virtual",
        "threads": "thread 0 is the guest's only vCPU (every process and the kernel)",
        "kernel": kernel.display().to_string(),
        "tool": qemu.display().to_string(),
        "tool_command": argv,
        "guest_command": guest_argv,
        "guest_files": opts.guest_files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "guest_memory_mib": opts.memory_mib,
        "icount_shift": ICOUNT_SHIFT,
        "command": command,
        "program": prog.path.display().to_string(),
        "cwd": cwd.display().to_string(),
        "ifetch": true,
        "max_records": opts.max_records,
        "record_replay": opts.record_replay.as_ref().map(RecordReplay::describe),
        "host": format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
    })
    .to_string();

    let mut sink = Sink::create(out, opts.max_records)?;
    // Room for the task table, known only at the end (src/tasks.rs).
    sink.reserve_metadata(TASK_METADATA_ROOM);
    sink.start(&meta)?;
    let log = std::fs::File::create(&qemu_log)
        .map_err(|e| CaptureError::io(format!("cannot write {}", qemu_log.display()), e))?;
    let mut child = child::spawn(
        Command::new(&qemu)
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log),
    )
    .map_err(|e| err(format!("cannot start {}: {e}", qemu.display())))?;
    reader.set_writer(child.id());

    // The watchdog: kill QEMU if the guest does not reach the launcher in time, or does not
    // power off after the program. `done` stops it before QEMU is reaped.
    let done = Arc::new(AtomicBool::new(false));
    let region = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let booted_at: Arc<std::sync::Mutex<Option<Instant>>> = Arc::default();
    let watchdog = {
        let (done, timed_out, console, booted_at) = (
            done.clone(),
            timed_out.clone(),
            console.clone(),
            booted_at.clone(),
        );
        let pid = child.id() as libc::pid_t;
        let boot_timeout = opts.boot_timeout;
        std::thread::Builder::new()
            .name("cachecolor-system-watchdog".into())
            .spawn(move || {
                let t0 = Instant::now();
                let mut ended_at: Option<Instant> = None;
                while !done.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(100));
                    let text = read_console(&console);
                    let mut b = booted_at.lock().unwrap();
                    if b.is_none() && text.contains("@@CC BOOTED@@") {
                        *b = Some(Instant::now());
                    }
                    let booted = b.is_some();
                    drop(b);
                    if ended_at.is_none() && text.contains("@@CC STAT") {
                        ended_at = Some(Instant::now());
                    }
                    let late = (!booted && t0.elapsed() > boot_timeout)
                        || ended_at.is_some_and(|e| e.elapsed() > SHUTDOWN_TIMEOUT);
                    if late && !done.load(Ordering::Acquire) {
                        timed_out.store(true, Ordering::Release);
                        // SAFETY: plain kill(2) of our own unreaped child (done is still false,
                        // so it has not been waited for).
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                        return;
                    }
                }
            })
            .map_err(|e| CaptureError::io("cannot start the watchdog thread", e))?
    };

    let (tx, rx) = mpsc::sync_channel::<(Vec<Record>, Counts)>(BLOCKS_IN_FLIGHT);
    let (free_tx, free_rx) = mpsc::channel::<Vec<Record>>();
    let region_flag = region.clone();
    let handle = std::thread::Builder::new()
        .name("cachecolor-system-reader".into())
        .spawn({
            let console = console.clone();
            let limit = opts.max_records.unwrap_or(u64::MAX);
            move || reader_thread(reader, tx, free_rx, region_flag, console, limit)
        })
        .map_err(|e| CaptureError::io("cannot start the reader thread", e))?;
    let drained = drain(
        &mut sink,
        rx,
        |(b, c)| (b, Some(c)),
        &free_tx,
        &mut child,
        handle,
        Result::is_err,
        progress,
    );
    done.store(true, Ordering::Release);
    let _ = watchdog.join();
    let Drained {
        status,
        ended,
        truncated,
    } = drained?;
    let status = status.map_err(|e| CaptureError::io("waiting for qemu", e))?;
    let exited_at = Instant::now();
    let text = read_console(&console);
    let boot_seconds = booted_at
        .lock()
        .unwrap()
        .map_or(0.0, |b| (b - started_at).as_secs_f64());
    let ended = match ended {
        Ok(e) => e,
        Err(ReaderError::Io(e)) => {
            return Err(CaptureError::io("reading the qemu plugin's stream", e))
        }
        Err(ReaderError::Stream(m)) => {
            return Err(err(format!("bad record stream from the plugin: {m}")))
        }
    };
    let qemu_said = last_line(&read_console(&qemu_log));
    let booted = text.contains("@@CC BOOTED@@");
    if !truncated && !booted {
        if timed_out.load(Ordering::Acquire) {
            return Err(err(format!(
                "the guest did not start the program within {} s of booting {} (a kernel that \
                 does not boot?); its console's last line: {}",
                opts.boot_timeout.as_secs(),
                kernel.display(),
                last_line(&text)
            )));
        }
        return Err(err(format!(
            "the guest stopped ({status}) before starting the program: kernel {} did not \
             boot? qemu: {qemu_said}; console: {}",
            kernel.display(),
            last_line(&text)
        )));
    }
    if let Some(line) = text.lines().find(|l| l.contains("@@CC EXECFAIL")) {
        let errno = stat_field(
            &format!("e={}", line.split_whitespace().nth(2).unwrap_or("")),
            "e",
        )
        .unwrap_or(0);
        return Err(err(format!(
            "the guest cannot run '{}': {} (errno {errno}); the guest holds only the program, \
             the libraries `ldd` lists for it and the --guest-file paths",
            guest_argv[0],
            io::Error::from_raw_os_error(errno as i32)
        )));
    }
    let stat = text.lines().find(|l| l.contains("@@CC STAT"));
    if !truncated && stat.is_none() {
        return Err(err(if timed_out.load(Ordering::Acquire) {
            format!(
                "the guest did not power off within {} s after the program",
                SHUTDOWN_TIMEOUT.as_secs()
            )
        } else {
            format!(
                "the guest stopped ({status}) before the program ended; console: {}",
                last_line(&text)
            )
        }));
    }
    // What the program printed: from the launcher's BOOTED line to its next line.
    let output = text
        .find("@@CC BOOTED@@\n")
        .map(|a| {
            let rest = &text[a + 14..];
            rest[..rest.find("@@CC ").unwrap_or(rest.len())].to_string()
        })
        .unwrap_or_default();
    let exit_code = stat
        .and_then(|l| stat_field(l, "status"))
        .map_or(0, |c| c as i32);
    if let Some(tracker) = &ended.tasks {
        let guest_trace = match (
            text.find("@@CC TASKS BEGIN@@"),
            text.find("@@CC TASKS END@@"),
        ) {
            (Some(a), Some(b)) if b > a => Some(&text[a..b]),
            _ => None,
        };
        let mut m = tasks::metadata(tracker, if truncated { None } else { guest_trace });
        if truncated {
            m["task_identity"]["pids_missing_because"] =
                "the capture stopped before the guest listed its scheduler events".into();
        }
        let fits = serde_json::Value::Object(m.clone()).to_string().len() < TASK_METADATA_ROOM;
        if !fits {
            m.remove("tasks");
            m["task_identity"]["tasks_left_out"] = "more tasks than the header has room for".into();
        }
        for (k, v) in m {
            sink.set_late(&k, v);
        }
    } else {
        sink.set_late(
            "task_identity",
            serde_json::json!({"version": 1, "tasks": null, "pids": false,
                "pids_missing_because": "the guest did not name __switch_to_asm and do_task_dead"}),
        );
    }
    let counts = sink.counts();
    // The trace's own metadata says how the program ended, as user-mode captures' do.
    let complete = !truncated && ended.complete;
    let records = sink.finish(Some((exit_code, complete, truncated)))?;
    progress(records);
    let summary = CaptureSummary {
        backend: Backend::Qemu,
        out: out.to_path_buf(),
        records,
        loads: counts.loads,
        stores: counts.stores,
        ifetches: counts.ifetches,
        modifies: counts.modifies,
        threads: ended.tasks.as_ref().map_or(1, |t| t.tasks()),
        exit_code,
        seconds: started_at.elapsed().as_secs_f64(),
        truncated,
        complete: !truncated && ended.complete,
    };
    let report = GuestReport {
        utime: stat.and_then(|l| stat_field(l, "utime")),
        stime: stat.and_then(|l| stat_field(l, "stime")),
        hz: stat.and_then(|l| stat_field(l, "hz")),
        boot_seconds,
        run_seconds: (exited_at - started_at).as_secs_f64() - boot_seconds,
        output,
        kernel,
        kernel_text: text
            .lines()
            .find(|l| l.contains("@@CC KTEXT"))
            .and_then(|l| {
                let (a, b) = (stat_field(l, "stext")?, stat_field(l, "etext")?);
                (a < b).then_some((a, b))
            }),
    };
    drop(dir);
    if exit_code != 0 && !truncated {
        return Err(CaptureError::ProgramFailed {
            code: exit_code,
            summary: Box::new(summary),
        });
    }
    Ok((summary, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, addr: u64) -> Record {
        Record::new(kind, addr, 8)
    }

    #[test]
    fn privilege_follows_the_instruction_address() {
        let mut recs = vec![
            rec(Kind::Load, 0x1000), // before any fetch: the carried mode (kernel)
            rec(Kind::IFetch, 0x40_1000),
            rec(Kind::Load, 0x40_2000),
            rec(Kind::Store, 0xffff_fe00_0000_0ec0), // interrupt delivery in a user instruction
            rec(Kind::IFetch, 0xffff_ffff_8100_0000),
            rec(Kind::Store, 0x7fff_0000), // the kernel writing a user buffer
            rec(Kind::IFetch, KERNEL_BASE - 1),
        ];
        let mut mode = true;
        mark_privilege(&mut recs, &mut mode);
        let p: Vec<bool> = recs.iter().map(|r| r.privileged).collect();
        assert_eq!(p, [true, false, false, true, true, true, false]);
        assert!(!mode);
    }

    #[test]
    fn stat_line_fields() {
        let l = "@@CC STAT status=3 utime=12 stime=40 hz=100@@";
        assert_eq!(stat_field(l, "status"), Some(3));
        assert_eq!(stat_field(l, "utime"), Some(12));
        assert_eq!(stat_field(l, "stime"), Some(40));
        assert_eq!(stat_field(l, "hz"), Some(100));
        assert_eq!(stat_field(l, "nope"), None);
    }

    #[test]
    fn init_quotes_arguments() {
        let s = init_script(Path::new("/w d"), &["/bin/echo".into(), "it's".into()]);
        assert!(s.contains("cd '/w d' || exit 1"), "{s}");
        assert!(s.ends_with("exec /cc_run '/bin/echo' 'it'\\''s'\n"), "{s}");
    }
}
