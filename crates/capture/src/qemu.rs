/*!
The QEMU back end: run the program under QEMU user mode with cachecolor's TCG plugin and turn
the plugin's binary record stream into native trace records.

Command line (x86-64 program; `ifetch=off` when instruction fetches are not wanted):
```text
qemu-x86_64 -cpu max -plugin $TMP/cachecolor-trace.so,out=$TMP/trace.fifo,ifetch=on \
            -0 PROGRAM_AS_TYPED /resolved/PROGRAM ARGS...
```
- `qemu-<arch>` is chosen by the program's ELF machine (so foreign binaries work), found on
  `PATH` (also as `qemu-<arch>-static`), or taken from `$CACHECOLOR_QEMU`.
- `-cpu max` (x86 and Arm guests) lets the guest libc pick the same vector code paths as on the
  host instead of baseline-CPU fallbacks.
- The plugin (qemu-plugin/cachecolor_trace.c, built by build.rs) is embedded in this library and
  written, with the FIFO, into a private temporary directory removed afterwards.
- A `#!` script runs as `-0 INTERPRETER INTERPRETER [ARG] SCRIPT ARGS...`.

Pipeline: a reader thread reads the FIFO in chunks of up to 4 MiB and decodes them
(src/stream.rs) into blocks of `BLOCK_RECORDS` records, which go through a bounded channel to the
calling thread, which encodes and compresses them into the trace (and calls `progress`, so the
callback never leaves the caller's thread). On a 2-core machine qemu, decoding and compression
then each get most of a core. The blocks are recycled through a second channel.

Stopping early (`max_records`, or an error on the writing side): the child is killed first, so
the reader sees end of file, then the channel is dropped, which unblocks a reader waiting to
send; the reader thread is always joined.
*/
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

use cachecolor_sim::trace::{Record, BLOCK_RECORDS};

use crate::child::{self, exit_code};
use crate::fifo::{self, FifoReader};
use crate::program::{find_executable, Program};
use crate::sink::{drain, Counts, Drained, Sink};
use crate::stream::{Decoder, HeapCall, REC_BYTES};
use crate::{metadata, Backend, CaptureError, CaptureOptions, RunOutcome};

/// The plugin shared object built by build.rs (empty if it could not be built).
static PLUGIN_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cachecolor_trace.so"));

/// The guest's heap shim built by build.rs for the host (qemu-plugin/cachecolor_heap.c; empty
/// if it could not be built).
static HEAP_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cachecolor_heap.so"));

/// Blocks in flight between the reader thread and the writer.
const BLOCKS_IN_FLIGHT: usize = 4;

/// A usable QEMU installation for a program.
pub(crate) struct Qemu {
    pub binary: PathBuf,
}

impl Qemu {
    /// Find `qemu-<arch>` for `prog` and check that the plugin was built.
    pub(crate) fn locate(prog: &Program) -> Result<Qemu, CaptureError> {
        let name = prog.qemu_binary_name();
        if PLUGIN_SO.is_empty() {
            return Err(CaptureError::BackendNotInstalled {
                backend: Backend::Qemu,
                tool: "cachecolor's QEMU trace plugin".into(),
                hint: "it was not compiled when cachecolor was built (no working C compiler); \
                       install one (`apt-get install gcc`) and rebuild, or use --backend lackey"
                    .into(),
            });
        }
        if let Some(p) = std::env::var_os("CACHECOLOR_QEMU") {
            let p = PathBuf::from(p);
            return find_executable(&p.to_string_lossy())
                .map(|binary| Qemu { binary })
                .map_err(|_| CaptureError::BackendNotInstalled {
                    backend: Backend::Qemu,
                    tool: format!("{} (from $CACHECOLOR_QEMU)", p.display()),
                    hint: "point CACHECOLOR_QEMU at a qemu user-mode binary, or unset it".into(),
                });
        }
        for cand in [name.clone(), format!("{name}-static")] {
            if let Ok(binary) = find_executable(&cand) {
                return Ok(Qemu { binary });
            }
        }
        Err(CaptureError::BackendNotInstalled {
            backend: Backend::Qemu,
            tool: name,
            hint: "install QEMU user mode with `apt-get install qemu-user` (Debian/Ubuntu), \
                   or use --backend lackey (Valgrind)"
                .into(),
        })
    }
}

/// Escape a value for QEMU's `-plugin` option list (',' separates options; ',,' is a comma).
fn qemu_opt_escape(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

/// The heap shim written where its path is the same in every capture: the guest's loader reads
/// `LD_PRELOAD` byte by byte, so a path with a random part (the capture's temporary directory)
/// would make two captures of one program differ. The user's cache,
/// `$XDG_CACHE_HOME/cachecolor/heap-HASH.so` (default `~/.cache`), in a directory only this
/// user can write (created 0700; owned by another user or writable by others, or no home, and
/// the private `dir` is used instead), written to a temporary name and renamed (concurrent captures write the same
/// bytes). Not in `$TMPDIR`: a capture leaves nothing there.
fn stable_shim_path(dir: &Path) -> Result<PathBuf, CaptureError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let hash = HEAP_SO.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| Path::new(c).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| Path::new(h).is_absolute())
                .map(|h| Path::new(&h).join(".cache"))
        });
    let private_to_us = |p: &Path| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0)
    };
    let shared = cache.map(|c| c.join("cachecolor")).filter(|d| {
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d);
        private_to_us(d)
    });
    let base = shared.as_deref().unwrap_or(dir);
    let path = base.join(format!("heap-{hash:016x}.so"));
    if std::fs::read(&path).is_ok_and(|b| b == HEAP_SO) {
        return Ok(path);
    }
    // a name of this process's own beside the final one, so the rename is atomic
    let tmp = base.join(format!(".heap-{hash:016x}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, HEAP_SO)
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            CaptureError::io(format!("cannot write {}", path.display()), e)
        })?;
    Ok(path)
}

/// The qemu arguments (after the binary) for `prog args`.
#[allow(clippy::too_many_arguments)]
fn qemu_argv(
    prog: &Program,
    args: &[String],
    so: &Path,
    fifo: &Path,
    ifetch: bool,
    syscalls: bool,
    skip: u64,
    maps: Option<&Path>,
    heap_shim: Option<&Path>,
    bbv: Option<(u64, &Path)>,
) -> Vec<String> {
    let mut v = Vec::new();
    if matches!(
        prog.arch,
        "x86_64" | "i386" | "aarch64" | "aarch64_be" | "arm" | "armeb"
    ) {
        v.extend(["-cpu".to_string(), "max".to_string()]);
    }
    if let Some(shim) = heap_shim {
        // the guest's environment only: QEMU itself is not preloaded; a preload the user set
        // is kept after the shim
        let mut pre = format!("LD_PRELOAD={}", shim.to_string_lossy());
        if let Some(user) = std::env::var_os("LD_PRELOAD").filter(|u| !u.is_empty()) {
            pre.push(':');
            pre.push_str(&user.to_string_lossy());
        }
        v.extend(["-E".to_string(), pre]);
    }
    v.push("-plugin".into());
    v.push(format!(
        "{},out={},ifetch={}{}{}{}{}{}",
        qemu_opt_escape(so),
        qemu_opt_escape(fifo),
        if ifetch { "on" } else { "off" },
        if syscalls { ",syscalls=on" } else { "" },
        match maps {
            Some(m) => format!(",maps={}", qemu_opt_escape(m)),
            None => String::new(),
        },
        match heap_shim {
            Some(h) => format!(",heap={}", qemu_opt_escape(h)),
            None => String::new(),
        },
        if skip > 0 {
            format!(",skip={skip}")
        } else {
            String::new()
        },
        match bbv {
            Some((n, out)) => format!(",bbv={n},bbvout={}", qemu_opt_escape(out)),
            None => String::new(),
        }
    ));
    match &prog.interpreter {
        None => {
            v.extend(["-0".to_string(), prog.name.clone()]);
            v.push(path_arg(&prog.path));
        }
        Some((interp, arg)) => {
            v.extend(["-0".to_string(), interp.to_string_lossy().into_owned()]);
            v.push(path_arg(interp));
            v.extend(arg.iter().cloned());
            v.push(path_arg(&prog.path));
        }
    }
    v.extend(args.iter().cloned());
    v
}

/// A program path as an argument that cannot be taken for an option.
fn path_arg(p: &Path) -> String {
    let s = p.to_string_lossy().into_owned();
    if s.starts_with('-') {
        format!("./{s}")
    } else {
        s
    }
}

/// What the reader thread reports when it ends.
struct ReaderEnd {
    threads: u32,
    complete: bool,
    /// MAPS marks: (event of the maps= log, index of the first trace record after it).
    marks: Vec<(u64, u64)>,
    /// The heap shim's calls, each with the index of the first trace record after it.
    heap: Vec<(HeapCall, u64)>,
}

enum ReaderError {
    /// qemu exited without ever opening the FIFO.
    NeverConnected,
    Io(io::Error),
    Stream(String),
}

/// Read and decode the plugin's stream, sending full blocks to `tx`.
fn reader_thread(
    mut reader: FifoReader,
    ifetch: bool,
    tx: mpsc::SyncSender<(Vec<Record>, Counts)>,
    free: mpsc::Receiver<Vec<Record>>,
) -> Result<ReaderEnd, ReaderError> {
    let mut dec = Decoder::new(ifetch);
    let mut buf = vec![0u8; 4 << 20];
    let mut have = 0usize;
    let mut block: Vec<Record> = Vec::with_capacity(BLOCK_RECORDS + 1024);
    let mut receiver_gone = false;
    let mut marks: Vec<(u64, u64)> = Vec::new();
    let mut heap: Vec<(HeapCall, u64)> = Vec::new();
    let mut emitted: u64 = 0;
    let mut take_marks = |dec: &mut Decoder, block_len: usize| {
        marks.extend(
            dec.take_marks()
                .into_iter()
                .map(|(e, pos)| (e, emitted + pos as u64)),
        );
        heap.extend(
            dec.take_heap()
                .into_iter()
                .map(|c| (c, emitted + c.at as u64)),
        );
        emitted += block_len as u64;
    };
    let send = |block: &mut Vec<Record>, counts: Counts| -> bool {
        let next = free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK_RECORDS + 1024));
        let full = std::mem::replace(block, next);
        block.clear();
        tx.send((full, counts)).is_ok()
    };
    loop {
        let n = match reader.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                return Err(ReaderError::NeverConnected)
            }
            Err(e) => return Err(ReaderError::Io(e)),
        };
        have += n;
        let whole = have - have % REC_BYTES;
        let mut pos = 0;
        while pos < whole {
            pos += dec
                .decode(&buf[pos..whole], &mut block, BLOCK_RECORDS)
                .map_err(ReaderError::Stream)?;
            if block.len() >= BLOCK_RECORDS {
                take_marks(&mut dec, block.len());
                if !send(&mut block, dec.take_counts()) {
                    receiver_gone = true;
                    break;
                }
            }
        }
        if receiver_gone {
            break;
        }
        buf.copy_within(whole..have, 0);
        have -= whole;
    }
    if !receiver_gone {
        dec.finish(&mut block);
        take_marks(&mut dec, block.len());
        if !block.is_empty() {
            send(&mut block, dec.take_counts());
        }
    }
    Ok(ReaderEnd {
        threads: dec.threads(),
        complete: have == 0 && dec.complete(),
        marks,
        heap,
    })
}

pub(crate) fn run(
    prog: &Program,
    args: &[String],
    command: &[String],
    opts: &CaptureOptions,
    sink: &mut Sink,
    progress: &mut dyn FnMut(u64),
) -> Result<RunOutcome, CaptureError> {
    let qemu = Qemu::locate(prog)?;
    let dir = tempfile::Builder::new()
        .prefix("cachecolor-capture.")
        .tempdir()
        .map_err(|e| CaptureError::io("cannot create a temporary directory", e))?;
    let so = dir.path().join("cachecolor-trace.so");
    let fifo_path = dir.path().join("trace.fifo");
    {
        let mut f = std::fs::File::create(&so)
            .map_err(|e| CaptureError::io(format!("cannot write {}", so.display()), e))?;
        f.write_all(PLUGIN_SO)
            .and_then(|_| f.set_permissions(std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| CaptureError::io(format!("cannot write {}", so.display()), e))?;
    }
    fifo::mkfifo(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot create FIFO {}", fifo_path.display()), e))?;
    let mut reader = FifoReader::open(&fifo_path)
        .map_err(|e| CaptureError::io(format!("cannot open FIFO {}", fifo_path.display()), e))?;

    // The memory map comes with the PCs (both are for attribution).
    let maps_path = dir.path().join("maps.log");
    let want_map = opts.pcs && opts.ifetch;
    // Heap objects by allocation site come with the map: the shim is built for the host, so
    // it can be given only to a program of the host's architecture.
    let heap_unavailable: Option<String> = if HEAP_SO.is_empty() {
        Some("the heap shim was not built (no working C compiler when cachecolor was built)".into())
    } else if prog.is_foreign_arch() {
        Some(format!(
            "the heap shim is built for the host ({}), the program is {}",
            crate::program::host_arch(),
            prog.arch
        ))
    } else {
        None
    };
    // With or without fetches alike, so the program runs the same way in both modes (the
    // plugin finds the shim's code by the map, hence maps= with it).
    let want_heap = opts.pcs && heap_unavailable.is_none();
    let shim_path = if want_heap {
        stable_shim_path(dir.path())?
    } else {
        dir.path().join("cachecolor-heap.so")
    };
    let argv = qemu_argv(
        prog,
        args,
        &so,
        &fifo_path,
        opts.ifetch,
        opts.syscalls,
        opts.skip_instructions,
        (want_map || want_heap).then_some(maps_path.as_path()),
        want_heap.then_some(shim_path.as_path()),
        match (&opts.bbv_out, opts.bbv_interval) {
            (Some(out), n) if n > 0 => Some((n, out.as_path())),
            _ => None,
        },
    );
    sink.start(&metadata(
        Backend::Qemu,
        &qemu.binary,
        &argv,
        command,
        prog,
        opts,
    ))?;

    let mut child = child::spawn(Command::new(&qemu.binary).args(&argv)).map_err(|e| {
        CaptureError::BackendFailed {
            backend: Backend::Qemu,
            message: format!("cannot start {}: {e}", qemu.binary.display()),
        }
    })?;
    reader.set_writer(child.id());

    let (tx, rx) = mpsc::sync_channel::<(Vec<Record>, Counts)>(BLOCKS_IN_FLIGHT);
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
        |(b, c)| (b, Some(c)),
        &free_tx,
        &mut child,
        handle,
        Result::is_err,
        progress,
    )?;
    let status = status.map_err(|e| CaptureError::io("waiting for qemu", e))?;
    let ended = match ended {
        Ok(end) => end,
        Err(ReaderError::NeverConnected) => {
            return Err(CaptureError::BackendFailed {
                backend: Backend::Qemu,
                message: format!(
                    "{} exited ({status}) before its tracing plugin started; see its messages \
                     above",
                    qemu.binary.display()
                ),
            })
        }
        Err(ReaderError::Io(e)) => {
            return Err(CaptureError::io("reading the qemu plugin's stream", e))
        }
        Err(ReaderError::Stream(message)) => {
            return Err(CaptureError::BackendFailed {
                backend: Backend::Qemu,
                message: format!("bad record stream from the plugin: {message}"),
            })
        }
    };
    if want_map {
        if let Ok(text) = std::fs::read_to_string(&maps_path) {
            let marks: std::collections::HashMap<u64, u64> = ended.marks.iter().copied().collect();
            // The file QEMU loaded, as /proc/self/maps names it (symlinks resolved).
            let loaded = prog.interpreter.as_ref().map_or(&prog.path, |(i, _)| i);
            let loaded = std::fs::canonicalize(loaded).unwrap_or_else(|_| loaded.clone());
            if let Some(map) = crate::memmap::build(&text, &marks, sink.records(), &loaded) {
                sink.add_metadata("memory_map", map);
            }
        }
    }
    if opts.pcs {
        let loaded = prog.interpreter.as_ref().map_or(&prog.path, |(i, _)| i);
        let not_loaded = if crate::program::is_static_elf(loaded) {
            format!(
                "{} is statically linked: LD_PRELOAD (the heap shim) does not apply to it",
                loaded.display()
            )
        } else {
            "the heap shim was not loaded (the program's loader ignored LD_PRELOAD, or the \
             program does not use the C library)"
                .to_string()
        };
        sink.add_metadata(
            "heap_objects",
            crate::heap::build(&ended.heap, heap_unavailable.as_deref(), &not_loaded),
        );
    }
    Ok(RunOutcome {
        exit_code: exit_code(status),
        threads: ended.threads,
        truncated,
        complete: !truncated && ended.complete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_shape() {
        let prog = Program {
            name: "prog".into(),
            path: "/bin/prog".into(),
            arch: "x86_64",
            interpreter: None,
        };
        let v = qemu_argv(
            &prog,
            &["a,b".into()],
            Path::new("/t/p.so"),
            Path::new("/t/x,y"),
            false,
            false,
            0,
            None,
            None,
            None,
        );
        assert_eq!(
            v,
            [
                "-cpu",
                "max",
                "-plugin",
                "/t/p.so,out=/t/x,,y,ifetch=off",
                "-0",
                "prog",
                "/bin/prog",
                "a,b"
            ]
        );
        let script = Program {
            name: "s.sh".into(),
            path: "/t/s.sh".into(),
            arch: "x86_64",
            interpreter: Some(("/bin/sh".into(), Some("-e".into()))),
        };
        let v = qemu_argv(
            &script,
            &[],
            Path::new("/p.so"),
            Path::new("/f"),
            true,
            true,
            5000,
            Some(Path::new("/t/m.log")),
            Some(Path::new("/t/h.so")),
            Some((1000, Path::new("/t/b,b"))),
        );
        assert_eq!(v[6..], ["-0", "/bin/sh", "/bin/sh", "-e", "/t/s.sh"]);
        assert_eq!(v[2], "-E");
        assert!(v[3].starts_with("LD_PRELOAD=/t/h.so"));
        assert_eq!(
            v[5],
            "/p.so,out=/f,ifetch=on,syscalls=on,maps=/t/m.log,heap=/t/h.so,skip=5000,bbv=1000,bbvout=/t/b,,b"
        );
    }
}
