/*!
The traced process as the back ends see it: started so that it dies with the capture (Linux
`PR_SET_PDEATHSIG`: if the capturing thread's process is killed, the tracer gets SIGKILL instead
of running on untraced), guarded so that a capture that ends early or fails never leaves a
tracer running or blocked on a FIFO nobody reads, and the shell convention for exit codes.
*/
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

/// Start `cmd` (inheriting stdin/stdout/stderr) as a child that is killed if we die. (The
/// death signal follows the spawning thread, which is the one blocked in `capture` until the
/// child has been reaped.)
pub(crate) fn spawn(cmd: &mut Command) -> io::Result<ChildGuard> {
    // SAFETY: getpid/getppid/prctl/_exit are async-signal-safe, as pre_exec requires.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
            }
            let _ = parent;
            Ok(())
        });
    }
    cmd.spawn().map(ChildGuard::new)
}

/// Kills (SIGKILL) and reaps the child on drop unless it has been waited for.
pub(crate) struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub(crate) fn new(c: Child) -> Self {
        ChildGuard(Some(c))
    }

    pub(crate) fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, |c| c.id())
    }

    /// Kill the child and reap it.
    pub(crate) fn kill_and_wait(&mut self) -> io::Result<ExitStatus> {
        let mut c = self.0.take().expect("child already reaped");
        let _ = c.kill();
        c.wait()
    }

    /// Wait for the child to exit by itself.
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        let mut c = self.0.take().expect("child already reaped");
        c.wait()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Shell-style exit code: the status, or 128 + N for death by signal N.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
