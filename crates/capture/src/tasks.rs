/*!
Guest task identity in full-system traces: which kernel task -- a process or
thread as the guest kernel sees it, or the idle task -- each record belongs to.

QEMU 7.2's plugin API reads neither registers nor guest memory, so the identity is read off the
references themselves, at the one place the kernel changes tasks. x86-64 Linux switches tasks
in `__switch_to_asm` (arch/x86/entry/entry_64.S), which pushes six callee-saved registers on
the old task's kernel stack and then

```text
movq %rsp, TASK_threadsp(%rdi)     # store into prev->thread.sp
movq TASK_threadsp(%rsi), %rsp     # load from next->thread.sp: from here on, next's stack
```

so the last store before the function's first load is at `prev + TASK_threadsp` and that load
at `next + TASK_threadsp`: the address of a task's `thread.sp` field is a key unique to the task
while it lives (its `task_struct` is not freed before it is dead), with no kernel offset to
know. [`TaskTracker`] watches the stream for the fetch of `__switch_to_asm`'s first instruction
(its address comes from the guest's /proc/kallsyms), reads the two keys from the following
store and load, and gives every record a dense task number (the trace's `thread`): 0 is the
task running when the region began (the launcher's child, which becomes the program), the
others are numbered in order of first appearance. The next task's number takes effect at the
next instruction fetch, so all the records of one instruction share a task. A task that dies
(it fetches `do_task_dead`, the last function every exiting task runs) gives up its key at its
last switch: a `task_struct` reused by a later task is a new number.

The numbers say "which task", not which pid: the guest's ftrace `sched_switch` events, listed
after the program (guest/cc_run.c), are matched switch by switch with the trace's switches to
label each number with its pid, thread-group id and command (`label`). Every switch must agree
(the same number always the same pid); otherwise the labels are dropped and the trace says why.
*/
use std::collections::HashMap;

use cachecolor_sim::trace::{Kind, Record};

/// Records after `__switch_to_asm`'s entry within which its stack-switching load must come;
/// beyond that the fetch was not a task switch (it never is: a guard against a kernel whose
/// `__switch_to_asm` differs).
const SWITCH_WINDOW: u32 = 64;

/// Kernel symbols the tracker needs, from the guest's /proc/kallsyms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchSymbols {
    /// `__switch_to_asm`: the task switch.
    pub switch_to: u64,
    /// `do_task_dead`: an exiting task's last function.
    pub task_dead: u64,
}

/// One task switch as the trace shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    pub prev: u32,
    pub next: u32,
}

/// Gives each record its task (see the module documentation).
#[derive(Debug)]
pub struct TaskTracker {
    syms: SwitchSymbols,
    current: u32,
    /// Dense number of the task whose records start at the next instruction fetch.
    pending: Option<u32>,
    /// Records since `__switch_to_asm`'s entry, while waiting for its load.
    in_switch: Option<u32>,
    last_store: Option<u64>,
    keys: HashMap<u64, u32>,
    key_of: Vec<Option<u64>>,
    dying: Vec<bool>,
    /// Instructions of each task, `[user, kernel]` (the records' `icount`s by privilege).
    pub instructions: Vec<[u64; 2]>,
    /// Every switch, in trace order.
    pub switches: Vec<Switch>,
    /// Switches whose old task's key was not the one it was switched in with.
    pub disagreements: u64,
}

impl TaskTracker {
    pub fn new(syms: SwitchSymbols) -> Self {
        TaskTracker {
            syms,
            current: 0,
            pending: None,
            in_switch: None,
            last_store: None,
            keys: HashMap::new(),
            key_of: vec![None],
            dying: vec![false],
            instructions: vec![[0; 2]],
            switches: Vec::new(),
            disagreements: 0,
        }
    }

    /// Tasks numbered so far.
    pub fn tasks(&self) -> u32 {
        self.key_of.len() as u32
    }

    /// Set the `thread` of each record (privilege already marked), carrying state across calls.
    pub fn assign(&mut self, recs: &mut [Record]) {
        for r in recs {
            if r.kind == Kind::IFetch {
                if let Some(n) = self.pending.take() {
                    self.current = n;
                }
                if r.addr == self.syms.switch_to {
                    self.in_switch = Some(0);
                    self.last_store = None;
                } else if r.addr == self.syms.task_dead {
                    self.dying[self.current as usize] = true;
                }
            } else if let Some(seen) = self.in_switch {
                match r.kind {
                    Kind::Store | Kind::Modify => self.last_store = Some(r.addr),
                    Kind::Load => {
                        self.in_switch = None;
                        if let Some(prev_key) = self.last_store {
                            self.switch(prev_key, r.addr);
                        }
                    }
                    Kind::IFetch => {}
                }
                if self.in_switch.is_some() {
                    self.in_switch = (seen < SWITCH_WINDOW).then_some(seen + 1);
                }
            }
            r.thread = self.current;
            self.instructions[self.current as usize][usize::from(r.privileged)] +=
                u64::from(r.icount);
        }
    }

    fn switch(&mut self, prev_key: u64, next_key: u64) {
        let prev = self.current;
        match self.key_of[prev as usize] {
            None => {
                self.key_of[prev as usize] = Some(prev_key);
                self.keys.insert(prev_key, prev);
            }
            Some(k) if k != prev_key => self.disagreements += 1,
            Some(_) => {}
        }
        if self.dying[prev as usize] {
            // Its task_struct may be reused: a later switch to the key is a new task.
            if self.keys.get(&prev_key) == Some(&prev) {
                self.keys.remove(&prev_key);
            }
        }
        let next = match self.keys.get(&next_key) {
            Some(&n) => n,
            None => {
                let n = self.key_of.len() as u32;
                self.key_of.push(Some(next_key));
                self.dying.push(false);
                self.instructions.push([0; 2]);
                self.keys.insert(next_key, n);
                n
            }
        };
        self.switches.push(Switch { prev, next });
        self.pending = Some(next);
    }
}

/// What the guest's ftrace says about one task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskLabel {
    pub pid: u32,
    /// Thread-group id (the process); `None` for a task never seen switching out.
    pub tgid: Option<u32>,
    /// The command at its last switch (after an exec, the new program's name).
    pub comm: String,
    /// The pid of the task that forked it, when that happened inside the region.
    pub parent: Option<u32>,
}

/// One `sched_switch` from the guest's ftrace (pids, commands, the old task's tgid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedSwitch {
    pub prev_pid: u32,
    pub prev_tgid: Option<u32>,
    pub prev_comm: String,
    pub next_pid: u32,
    pub next_comm: String,
}

/// The events of the guest's ftrace between the launcher's start and stop marks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GuestEvents {
    pub switches: Vec<SchedSwitch>,
    /// `(parent pid, child pid)` of every fork.
    pub forks: Vec<(u32, u32)>,
    /// The start and stop marks were both found.
    pub complete: bool,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    // `key=value` where value runs to the next " " followed by a known key or the end; comm
    // values may hold spaces, so a value ends where the next `name=` begins.
    let at = line.find(key)?;
    let rest = &line[at + key.len()..];
    let end = rest
        .match_indices(' ')
        .find(|(i, _)| {
            let after = &rest[i + 1..];
            after.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            }) || after.starts_with("==>")
        })
        .map_or(rest.len(), |(i, _)| i);
    Some(rest[..end].trim())
}

/// Parse the lines of the guest's `/sys/kernel/tracing/trace` (with `record-tgid`): the events
/// between the `tracing_mark_write: ccstart` and `ccstop` marks.
pub fn parse_guest_trace(text: &str) -> GuestEvents {
    let mut ev = GuestEvents::default();
    let mut inside = false;
    for line in text.lines() {
        if line.contains("tracing_mark_write: ccstart") {
            inside = true;
            ev.switches.clear();
            ev.forks.clear();
            continue;
        }
        if line.contains("tracing_mark_write: ccstop") {
            if inside {
                ev.complete = true;
            }
            break;
        }
        if !inside {
            continue;
        }
        if line.contains(" sched_switch: ") {
            // "  find-63  (     63) [000] d..2.  12.3: sched_switch: prev_comm=find prev_pid=63 ..."
            let tgid = line
                .split_once('(')
                .and_then(|(_, r)| r.split_once(')'))
                .and_then(|(t, _)| t.trim().parse().ok());
            let num = |k: &str| field(line, k).and_then(|v| v.parse::<u32>().ok());
            if let (Some(p), Some(n)) = (num("prev_pid="), num("next_pid=")) {
                ev.switches.push(SchedSwitch {
                    prev_pid: p,
                    prev_tgid: tgid,
                    prev_comm: field(line, "prev_comm=").unwrap_or("").to_string(),
                    next_pid: n,
                    next_comm: field(line, "next_comm=").unwrap_or("").to_string(),
                });
            }
        } else if line.contains(" sched_process_fork: ") {
            let num = |k: &str| field(line, k).and_then(|v| v.parse::<u32>().ok());
            if let (Some(p), Some(c)) = (num(" pid="), num("child_pid=")) {
                ev.forks.push((p, c));
            }
        }
    }
    ev
}

/// Label the trace's task numbers with the guest's pids: the k-th switch of the trace is the
/// k-th `sched_switch` event. `Err` says why they cannot be matched.
pub fn label(switches: &[Switch], tasks: u32, ev: &GuestEvents) -> Result<Vec<TaskLabel>, String> {
    if !ev.complete {
        return Err(
            "the guest's scheduler events do not cover the region (start or stop mark missing)"
                .into(),
        );
    }
    if switches.len() != ev.switches.len() {
        return Err(format!(
            "the trace has {} task switches and the guest's ftrace {} (events lost?)",
            switches.len(),
            ev.switches.len()
        ));
    }
    let mut labels: Vec<Option<TaskLabel>> = vec![None; tasks as usize];
    let mut put = |n: u32, pid: u32, comm: &str, tgid: Option<u32>| -> Result<(), String> {
        let l = labels[n as usize].get_or_insert_with(|| TaskLabel {
            pid,
            ..TaskLabel::default()
        });
        if l.pid != pid {
            return Err(format!(
                "task {n} of the trace is pid {} at one switch and pid {pid} at another",
                l.pid
            ));
        }
        if !comm.is_empty() {
            l.comm = comm.to_string();
        }
        if tgid.is_some() {
            l.tgid = tgid;
        }
        Ok(())
    };
    for (s, e) in switches.iter().zip(&ev.switches) {
        put(s.prev, e.prev_pid, &e.prev_comm, e.prev_tgid)?;
        put(s.next, e.next_pid, &e.next_comm, None)?;
    }
    let parents: HashMap<u32, u32> = ev.forks.iter().map(|&(p, c)| (c, p)).collect();
    Ok(labels
        .into_iter()
        .enumerate()
        .map(|(n, l)| {
            let mut l = l.unwrap_or_else(|| TaskLabel {
                // Never switched: only task 0 of a region without a switch.
                pid: 0,
                comm: format!("task {n}"),
                ..TaskLabel::default()
            });
            l.parent = parents.get(&l.pid).copied();
            l
        })
        .collect())
}

/// The trace metadata of the task identity (docs/trace-format.md "Full-system traces"): `threads`
/// (what a thread number is), `task_identity` (how it was found, its version, switches, and why
/// pids are missing if they are) and `tasks` (one entry per thread number: pid, tgid, comm, parent,
/// whether it is the program or one of its descendants, its user and kernel instructions).
/// `guest_trace` is the console text between the launcher's `@@CC TASKS BEGIN@@` and `END` lines,
/// `None` when the guest printed none.
pub fn metadata(
    tracker: &TaskTracker,
    guest_trace: Option<&str>,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::json;
    let labels = match guest_trace {
        None => Err("the guest printed no scheduler events (no ftrace in its kernel?)".to_string()),
        Some(t) => label(&tracker.switches, tracker.tasks(), &parse_guest_trace(t)),
    };
    let labels = if tracker.disagreements > 0 {
        Err(format!(
            "{} switches left a task whose key was not the one it came in with",
            tracker.disagreements
        ))
    } else {
        labels
    };
    // The program: task 0 (the launcher's child, which execs it) and every task forked from it
    // or from one of them, and their threads.
    let mut program = vec![false; tracker.tasks() as usize];
    if let Ok(l) = &labels {
        let mut pids: std::collections::HashSet<u32> = [l[0].pid].into();
        loop {
            let before = pids.len();
            for t in l {
                if t.parent.is_some_and(|p| pids.contains(&p))
                    || t.tgid.is_some_and(|g| pids.contains(&g))
                {
                    pids.insert(t.pid);
                }
            }
            if pids.len() == before {
                break;
            }
        }
        for (n, t) in l.iter().enumerate() {
            program[n] = pids.contains(&t.pid);
        }
    } else if let Some(p) = program.first_mut() {
        *p = true;
    }
    let tasks: Vec<serde_json::Value> = (0..tracker.tasks() as usize)
        .map(|n| {
            let [user, kernel] = tracker.instructions[n];
            let mut v = json!({
                "thread": n,
                "program": program[n],
                "user_instructions": user,
                "kernel_instructions": kernel,
            });
            if let Ok(l) = &labels {
                let l = &l[n];
                v["pid"] = l.pid.into();
                v["tgid"] = l.tgid.into();
                v["comm"] = l.comm.clone().into();
                v["parent"] = l.parent.into();
            }
            v
        })
        .collect();
    let mut m = serde_json::Map::new();
    m.insert(
        "threads".into(),
        "guest tasks: thread N is the N-th kernel task (process, thread or idle task) to run in \
         the region, 0 the program's first; `tasks` says which"
            .into(),
    );
    m.insert(
        "task_identity".into(),
        json!({
            "version": 1,
            "method": "__switch_to_asm's store of prev->thread.sp and load of next->thread.sp",
            "switches": tracker.switches.len(),
            "tasks": tracker.tasks(),
            "pids": labels.is_ok(),
            "pids_missing_because": labels.as_ref().err(),
        }),
    );
    m.insert("tasks".into(), tasks.into());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    const SW: u64 = 0xffff_ffff_8100_0000;
    const DEAD: u64 = 0xffff_ffff_8120_0000;

    fn f(a: u64) -> Record {
        Record::new(Kind::IFetch, a, 4)
    }
    fn st(a: u64) -> Record {
        Record::new(Kind::Store, a, 8)
    }
    fn ld(a: u64) -> Record {
        Record::new(Kind::Load, a, 8)
    }

    /// A switch from the task with key `from` to the one with key `to`, as __switch_to_asm
    /// makes it: entry fetch, six pushes, the store of prev's sp, the load of next's.
    fn switch(from: u64, to: u64) -> Vec<Record> {
        let mut v = vec![f(SW)];
        for i in 0..6 {
            v.push(f(SW + 1 + i));
            v.push(st(0xffff_c900_0000_3f00 - 8 * i));
        }
        v.push(f(SW + 8));
        v.push(st(from));
        v.push(f(SW + 12));
        v.push(ld(to));
        v.push(f(SW + 16)); // the first instruction on the next task's stack
        v
    }

    #[test]
    fn tasks_follow_the_switches_and_a_dead_tasks_struct_is_a_new_task() {
        let syms = SwitchSymbols {
            switch_to: SW,
            task_dead: DEAD,
        };
        let (a, b, c) = (
            0xffff_8880_0100_1000,
            0xffff_8880_0200_1000,
            0xffff_8880_0300_1000,
        );
        let mut recs = vec![f(0x40_1000), ld(0x60_0000)];
        recs.extend(switch(a, b)); // 0 -> 1
        recs.push(f(0x40_2000));
        recs.extend(switch(b, a)); // 1 -> 0
        recs.push(f(DEAD)); // task 0 exits
        recs.extend(switch(a, c)); // 0 -> 2
        recs.extend(switch(c, a)); // 2 -> the reused struct: a new task 3
        recs.push(f(0x40_3000));
        let mut t = TaskTracker::new(syms);
        // In two pieces: state carries over.
        let (x, y) = recs.split_at_mut(9);
        t.assign(x);
        t.assign(y);
        assert_eq!(t.tasks(), 4);
        assert_eq!(t.disagreements, 0);
        let s: Vec<(u32, u32)> = t.switches.iter().map(|s| (s.prev, s.next)).collect();
        assert_eq!(s, [(0, 1), (1, 0), (0, 2), (2, 3)]);
        assert_eq!(recs[0].thread, 0);
        assert_eq!(recs[1].thread, 0);
        // The pushes and the load belong to the old task; the next fetch to the new one.
        let load = recs
            .iter()
            .position(|r| r.kind == Kind::Load && r.addr == b)
            .unwrap();
        assert_eq!(recs[load].thread, 0);
        assert_eq!(recs[load + 1].thread, 1);
        assert_eq!(recs.last().unwrap().thread, 3);
        // Every record of one instruction shares its task.
        let mut task = recs[0].thread;
        for r in &recs {
            if r.kind != Kind::IFetch {
                assert_eq!(r.thread, task);
            }
            task = r.thread;
        }
    }

    #[test]
    fn guest_events_label_the_tasks() {
        let text = "\
# tracer: nop
            init-1       (      1) [000] .....  1.0: tracing_mark_write: ignored
          cc_run-60      (     60) [000] .....  2.0: tracing_mark_write: ccstart
          cc_run-60      (     60) [000] d..2.  2.1: sched_switch: prev_comm=cc_run prev_pid=60 prev_prio=120 prev_state=R ==> next_comm=kworker/0:1 next_pid=12 next_prio=120
     kworker/0:1-12      (     12) [000] d..2.  2.2: sched_switch: prev_comm=kworker/0:1 prev_pid=12 prev_prio=120 prev_state=I ==> next_comm=cc_run next_pid=60 next_prio=120
            find-60      (     60) [000] .....  2.3: sched_process_fork: comm=find pid=60 child_comm=find child_pid=61
            find-60      (     60) [000] d..2.  2.4: sched_switch: prev_comm=find prev_pid=60 prev_prio=120 prev_state=S ==> next_comm=my prog next_pid=61 next_prio=120
         my prog-61      (     60) [000] .....  2.5: tracing_mark_write: ccstop
";
        let ev = parse_guest_trace(text);
        assert!(ev.complete);
        assert_eq!(ev.switches.len(), 3);
        assert_eq!(ev.forks, [(60, 61)]);
        assert_eq!(ev.switches[2].next_comm, "my prog");
        let sw = [
            Switch { prev: 0, next: 1 },
            Switch { prev: 1, next: 0 },
            Switch { prev: 0, next: 2 },
        ];
        let l = label(&sw, 3, &ev).unwrap();
        assert_eq!(
            (l[0].pid, l[0].tgid, l[0].comm.as_str()),
            (60, Some(60), "find")
        );
        assert_eq!((l[1].pid, l[1].tgid), (12, Some(12)));
        assert_eq!(
            (l[2].pid, l[2].parent, l[2].comm.as_str()),
            (61, Some(60), "my prog")
        );
        // A count mismatch or a task seen as two pids drops the labels, saying why.
        assert!(label(&sw[..2], 3, &ev)
            .unwrap_err()
            .contains("2 task switches and the guest's ftrace 3"));
        let bad = [sw[0], sw[1], Switch { prev: 0, next: 1 }];
        assert!(label(&bad, 3, &ev)
            .unwrap_err()
            .contains("pid 12 at one switch"));
    }
}
