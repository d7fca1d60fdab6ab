/*!
The named pipe a back end writes its trace into, and the reader of its other end.

Why a FIFO and not an inherited pipe: the tracer opens it by path (`out=PATH` for the QEMU plugin,
`--log-file=PATH` for valgrind), so no file descriptor has to survive exec or be kept from the
traced program, and nothing large is ever stored on disk.

How the reader avoids hanging: the read end is opened non-blocking *before* the tracer starts (so
the tracer's blocking open for writing succeeds at once), and every wait is a `poll` with a
timeout. Linux reports `POLLHUP` on a FIFO only after a writer has connected and gone, so "no data
yet" and "the tracer never connected" are told apart by polling the child process: if it has
exited and the FIFO still has neither data nor a writer, the tracer failed before it started
(bad arguments, plugin load failure) and `read` returns an error of kind `NotConnected`.
End of file is reported (`Ok(0)`) once a writer has connected and every writer has closed, or
once the tracer process itself has exited and the pipe is empty (a process it forked may keep
the FIFO open; its writes are not waited for).

Batching: a writer that makes many small writes (valgrind writes each lackey line with its own
`write`) would wake the reader for every line. After a read that returned less than
`SHORT_READ` bytes the reader sleeps `LINGER` before reading again, letting the pipe (enlarged to
1-4 MiB) fill; the writer never blocks on that unless it produces more than the pipe holds in
that time.
*/
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

const SHORT_READ: usize = 64 << 10;
const LINGER: Duration = Duration::from_millis(1);

/// Create a FIFO readable and writable only by this user.
pub(crate) fn mkfifo(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The read end of a FIFO whose writer is the process `pid`.
pub(crate) struct FifoReader {
    file: File,
    pid: libc::pid_t,
    connected: bool,
    /// The previous read returned little: wait a moment before the next.
    short: bool,
}

impl FifoReader {
    /// Open `path` for reading without blocking; call before starting the writer.
    pub(crate) fn open(path: &Path) -> io::Result<FifoReader> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: valid path; the returned fd is owned by the File below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // A bigger pipe means fewer context switches between tracer and reader. Best effort:
        // the limit for unprivileged users is /proc/sys/fs/pipe-max-size (1 MiB by default).
        // SAFETY: fcntl on an fd we own.
        unsafe {
            if libc::fcntl(fd, libc::F_SETPIPE_SZ, 4 << 20) < 0 {
                libc::fcntl(fd, libc::F_SETPIPE_SZ, 1 << 20);
            }
        }
        // SAFETY: fd is a fresh descriptor owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        Ok(FifoReader {
            file,
            pid: 0,
            connected: false,
            short: false,
        })
    }

    /// The process that will write (watched while waiting for it to connect).
    pub(crate) fn set_writer(&mut self, pid: u32) {
        self.pid = pid as libc::pid_t;
    }

    /// Wait up to `timeout_ms` for data or hang-up. Returns true if the FIFO is readable.
    fn poll(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return Ok(r > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0);
        }
    }

    /// True if the writer process has exited (without reaping it: `Child::wait` still works),
    /// or has already been reaped by the owner of its `Child`.
    fn writer_exited(&self) -> bool {
        if self.pid <= 0 {
            return false;
        }
        // SAFETY: waitid with WNOWAIT only inspects the child's state.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            if r == 0 {
                info.si_pid() != 0
            } else {
                io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
            }
        }
    }
}

impl Read for FifoReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.short {
            std::thread::sleep(LINGER);
        }
        loop {
            match (&self.file).read(buf) {
                Ok(0) if self.connected => return Ok(0),
                Ok(0) => {}
                Ok(n) => {
                    self.connected = true;
                    self.short = n < SHORT_READ && n < buf.len();
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // Nothing to read now: wait for data, hang-up, or (before connection) writer death.
            if self.poll(200)? {
                let mut pfd = libc::pollfd {
                    fd: self.file.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; zero timeout.
                unsafe { libc::poll(&mut pfd, 1, 0) };
                if pfd.revents & libc::POLLHUP != 0 {
                    // A writer has come and gone (POLLHUP is only reported after one connected).
                    self.connected = true;
                }
                continue;
            }
            // The tracer has exited and the pipe is drained: that is the end, even if a process
            // it forked still holds the FIFO open (a daemon under valgrind, say).
            if self.writer_exited() && !self.poll(0)? {
                if self.connected {
                    return Ok(0);
                }
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the tracer exited without opening its output",
                ));
            }
        }
    }
}
