/*!
Privileged runs in a stream of records (Nellans et al. section 3, "Privileged Instruction Run
Lengths"): the processor enters privileged mode, executes a run of instructions, and leaves.

A run belongs to one thread: it starts at a record of that thread with `privileged` set after a
non-privileged record of the same thread (or at the thread's first record), and ends at the
thread's next non-privileged record. Records of other threads in between do not end it. Its
length in instructions is the sum of the `icount`s of its records (a record's `icount` is the
instructions retired since the thread's previous record, so they are counted to the mode of the
record that ends them); its syscall identity is the `syscall` of its first record (0 when the
trace does not carry one: a trace captured by a back end that sees only the privilege bit).
*/
use crate::trace::Record;

/// One completed privileged run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub thread: u32,
    /// `Record::syscall` of the run's first record (0 = unknown).
    pub syscall: u32,
    /// Instructions (sum of the records' `icount`).
    pub instructions: u64,
    /// Records in the run.
    pub records: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Open {
    active: bool,
    syscall: u32,
    instructions: u64,
    records: u64,
}

/// Follows the privilege mode of every thread and reports each run when it ends.
#[derive(Debug, Clone, Default)]
pub struct RunTracker {
    open: Vec<Open>,
}

impl RunTracker {
    pub fn new() -> RunTracker {
        RunTracker::default()
    }

    /// Account `r`; returns the run of `r.thread` that `r` ends, if any.
    #[inline]
    pub fn push(&mut self, r: &Record) -> Option<Run> {
        let t = r.thread as usize;
        if t >= self.open.len() {
            self.open.resize(t + 1, Open::default());
        }
        let o = &mut self.open[t];
        if r.privileged {
            if !o.active {
                *o = Open {
                    active: true,
                    syscall: r.syscall,
                    instructions: 0,
                    records: 0,
                };
            }
            o.instructions += r.icount as u64;
            o.records += 1;
            None
        } else if o.active {
            o.active = false;
            Some(Run {
                thread: r.thread,
                syscall: o.syscall,
                instructions: o.instructions,
                records: o.records,
            })
        } else {
            None
        }
    }

    /// Whether `thread` is inside a privileged run.
    pub fn in_run(&self, thread: u32) -> bool {
        self.open.get(thread as usize).is_some_and(|o| o.active)
    }

    /// End of the stream: the runs still open, in thread order.
    pub fn finish(&mut self) -> Vec<Run> {
        let mut out = Vec::new();
        for (t, o) in self.open.iter_mut().enumerate() {
            if o.active {
                o.active = false;
                out.push(Run {
                    thread: t as u32,
                    syscall: o.syscall,
                    instructions: o.instructions,
                    records: o.records,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Kind;

    fn rec(thread: u32, privileged: bool, icount: u32, syscall: u32) -> Record {
        Record {
            addr: 0,
            thread,
            icount,
            size: 4,
            kind: Kind::IFetch,
            privileged,
            syscall,
        }
    }

    #[test]
    fn runs_are_per_thread_and_counted_in_instructions() {
        let mut t = RunTracker::new();
        assert_eq!(t.push(&rec(0, false, 4, 0)), None);
        assert_eq!(t.push(&rec(0, true, 4, 77)), None);
        assert_eq!(t.push(&rec(1, true, 4, 5)), None); // thread 1's run, interleaved
        assert_eq!(t.push(&rec(0, true, 3, 0)), None);
        assert!(t.in_run(0) && t.in_run(1) && !t.in_run(2));
        let r = t.push(&rec(0, false, 4, 0)).unwrap();
        assert_eq!(
            r,
            Run {
                thread: 0,
                syscall: 77,
                instructions: 7,
                records: 2
            }
        );
        assert_eq!(t.push(&rec(0, false, 4, 0)), None);
        let rest = t.finish();
        assert_eq!(rest.len(), 1);
        assert_eq!(
            (rest[0].thread, rest[0].syscall, rest[0].instructions),
            (1, 5, 4)
        );
        assert!(t.finish().is_empty());
    }
}
