/*!
The traced process as the back ends see it: started so that it dies with the capture (Linux
`PR_SET_PDEATHSIG`: if the capturing thread's process is killed, the tracer gets SIGKILL instead
of running on untraced), guarded so that a capture that ends early or fails never leaves a
tracer running or blocked on a FIFO nobody reads, and the shell convention for exit codes.

The tracer starts a session (and so a process group) of its own, and stopping it kills the
whole group: a traced shell's children (`bash -c 'yes > /dev/null'`, each one a forked tracer)
die with it instead of running on at 100% CPU, re-parented to init. A new session rather than
only a new group: with no controlling terminal, a traced program that reads the terminal or
sets its modes is not stopped by SIGTTIN/SIGTTOU as a background group would be. Ctrl-C at the
terminal reaches cachecolor (the foreground group), which stops the capture and with it the
group.
*/
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};

/// Start `cmd` (inheriting stdin/stdout/stderr) as a child that is killed if we die. (The
/// death signal follows the spawning thread, which is the one blocked in `capture` until the
/// child has been reaped.)
pub(crate) fn spawn(cmd: &mut Command) -> io::Result<ChildGuard> {
    // SAFETY: getpid/getppid/prctl/setsid/_exit are async-signal-safe, as pre_exec requires.
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
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
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

    /// Kill the child and its process group, and reap it.
    pub(crate) fn kill_and_wait(&mut self) -> io::Result<ExitStatus> {
        let mut c = self.0.take().expect("child already reaped");
        kill_group(&mut c);
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
            kill_group(&mut c);
            let _ = c.wait();
        }
    }
}

/// SIGKILL to the child's process group (its id: `spawn` made it a session leader), then to
/// the child itself in case it never got that far. Sent before the child is reaped, so the
/// group id cannot have been reused.
fn kill_group(c: &mut Child) {
    if let Ok(pgid) = libc::pid_t::try_from(c.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    let _ = c.kill();
}

/// Shell-style exit code: the status, or 128 + N for death by signal N.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}
