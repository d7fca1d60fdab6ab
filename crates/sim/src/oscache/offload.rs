/*!
OS off-load to a dedicated OS core, directed by the run-length predictor (Nellans et al.
section 4), as a trace-driven model of the paper's machine.

Machine (section 4.3): `user_cores` user cores and one OS core, symmetric, each with private
32 KB L1I and L1D (1 cycle) and a private 1 MB L2 (5 cycles); memory 500 cycles. A miss in a
core's L2 looks up a directory: if another core's caches hold the line it is a *coherence miss*,
served in `remote_latency + directory_latency` (5 + 5 cycles, section 4.3: "5 cycles to look up
the remote L2 and an additional 5 cycles for directory look-up and inter-core messaging"), else
memory serves it. A store invalidates every other core's copy (paying the directory latency when
there was one), so data the user core dirtied moves to the OS core by coherence misses and back
the same way ("data moves by coherence misses"; no prefetch, section 4.1).

Timing (section 3: Simics' default in-order model): one cycle per instruction plus, for every
reference, its latency beyond an L1 hit. Cycles are integers.

Off-load (section 4.3): on every transition of a user thread to privileged mode the thread's
core looks up its predictor with the run's AState (`predictor.rs`); if the predicted length
exceeds the trigger N the whole privileged run executes on the OS core: the user core pays
`migration_cycles`, waits while the OS core is busy with earlier requests (FIFO, one request at
a time; section 6 "Scalability"), waits while the OS core executes the run in its own caches,
and pays `return_cycles` to come back. Otherwise the run executes on the user core, in its
caches (the interference the paper measures). The predictor is trained with the run's real
length at its end either way. `trigger = None` never off-loads: the single-core baseline.

Several user cores: each runs its own record stream; the model always advances the core with
the smallest clock by one step (a user-mode record, or a whole privileged run), so requests
reach the OS core in the order of their arrival times (all migrations cost the same). An
off-loaded run's references are applied to the caches when it is dispatched, i.e. the OS core's
execution is not interleaved reference by reference with the other cores' (a simplification;
the OS core runs one request at a time anyway).

Dynamic N (section 4.4): with `dynamic` set, each user core keeps a controller that measures
IPC and L2 miss rate over epochs of `epoch_instructions` of its thread; at the start and after
a phase change (IPC or L2 miss rate moved by more than `phase_threshold` relative to the last
steady epoch) it runs one epoch with each candidate N in turn and then keeps the best-IPC N
until the next change. The choices are reported per phase.

Accounting (DESIGN.md principle 4), checked by `check_invariants`: every thread instruction
executes exactly once (user core or OS core); every privileged run is executed exactly once
(local + off-loaded = runs seen); each user core's cycles = instructions executed on it + its
memory stalls + migration + queueing + waiting for the OS core; the OS core's busy cycles are
the sum of the off-loaded runs' cycles.
*/
use super::predictor::{Accuracy, Predictor};
use crate::cache::{flags, Cache, LineMeta, Lookup, ReplacementKind};
use crate::config::Size;
use crate::error::{ConfigError, Error};
use crate::geometry::CacheGeometry;
use crate::trace::{Kind, Record, RecordSource};
use crate::workload::{Workload, WorkloadSpec};
use serde::{Deserialize, Serialize};

mod config;
mod file;
pub use config::{DynamicConfig, OffloadConfig};
pub use file::{report_json, run_file, run_text, run_value, OffloadFile};

/// How a user thread's privileged runs are identified: the AState at a run's first record
/// (section 4.2) and whether two consecutive privileged records belong to different runs
/// (e.g. two back-to-back system calls).
pub trait RunIdentity {
    fn astate(&self, first: &Record) -> u64;
    /// The AState of a whole privileged run; by default its first record's.
    fn astate_of_run(&self, run: &[Record]) -> u64 {
        self.astate(&run[0])
    }
    fn new_run(&self, _prev: &Record, _next: &Record) -> bool {
        false
    }
}

/// Instructions a record stands for: its `icount` delta.
#[inline]
fn instructions(r: &Record) -> u64 {
    r.icount as u64
}

#[derive(Debug, Clone)]
struct CoreCaches {
    l1i: Cache,
    l1d: Cache,
    l2: Cache,
}

/// What served a reference (for statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Served {
    L1,
    L2,
    Remote,
    Memory,
}

/// Per-core counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CoreStats {
    /// Instructions executed on this core.
    pub instructions: u64,
    /// Cycles: this core's clock at the end (user cores) or busy cycles (OS core).
    pub cycles: u64,
    pub references: u64,
    pub l1_misses: u64,
    pub l2_misses: u64,
    /// L2 misses served by another core's caches (cache-to-cache transfers).
    pub coherence_misses: u64,
    /// Stores that invalidated another core's copy.
    pub invalidations: u64,
    /// Cycles stalled on references beyond an L1 hit.
    pub stall_cycles: u64,
    /// User cores: migration + return cycles paid, cycles queued behind other requests, cycles
    /// waiting while the OS core ran this core's runs.
    pub migration_cycles: u64,
    pub queue_cycles: u64,
    pub remote_cycles: u64,
    /// Instructions of this core's thread (user cores; includes off-loaded ones).
    pub thread_instructions: u64,
    pub privileged_instructions: u64,
    pub privileged_runs: u64,
    pub offloaded_runs: u64,
    pub offloaded_instructions: u64,
}

impl CoreStats {
    pub fn ipc(&self) -> f64 {
        if self.cycles == 0 {
            0.0
        } else {
            self.thread_instructions as f64 / self.cycles as f64
        }
    }
}

/// One phase of the dynamic controller: where it started, what was sampled, what was kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseChoice {
    pub core: u32,
    /// Thread instructions when sampling started.
    pub start_instruction: u64,
    /// (candidate N, IPC of its sampling epoch).
    pub sampled: Vec<(u64, f64)>,
    pub chosen: u64,
}

/// The result of one off-load run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffloadResult {
    pub user: Vec<CoreStats>,
    pub os: CoreStats,
    /// Predictor accuracy per user core (its own predictor).
    pub accuracy: Vec<Accuracy>,
    pub phases: Vec<PhaseChoice>,
    /// Longest the user cores waited in the OS core's queue for one request.
    pub max_queue_wait: u64,
    pub invariants: Vec<String>,
}

impl OffloadResult {
    /// Wall-clock of the run: the slowest user core.
    pub fn makespan(&self) -> u64 {
        self.user.iter().map(|c| c.cycles).max().unwrap_or(0)
    }
    /// Mean IPC of the user threads.
    pub fn mean_ipc(&self) -> f64 {
        self.user.iter().map(|c| c.ipc()).sum::<f64>() / self.user.len().max(1) as f64
    }
    /// Table 1: OS core busy cycles / total execution time.
    pub fn os_time_fraction(&self) -> f64 {
        let m = self.makespan();
        if m == 0 {
            0.0
        } else {
            self.os.cycles as f64 / m as f64
        }
    }
    /// Accuracy summed over user cores.
    pub fn total_accuracy(&self) -> Accuracy {
        let mut a = self.accuracy[0].clone();
        for b in &self.accuracy[1..] {
            a.runs += b.runs;
            a.exact += b.exact;
            a.within += b.within;
            a.global += b.global;
            for k in 0..a.triggers.len() {
                a.decision_correct[k] += b.decision_correct[k];
                a.longer_than[k] += b.longer_than[k];
            }
        }
        a
    }
}

/// Section 4.4's controller of one user core.
#[derive(Debug, Clone)]
struct Controller {
    cfg: DynamicConfig,
    /// Sampling: index of the candidate being measured; None = steady.
    sampling: Option<usize>,
    sampled: Vec<(u64, f64)>,
    current: u64,
    /// IPC and L2 miss rate of the last steady epoch.
    reference: Option<(f64, f64)>,
    epoch_start: (u64, u64, u64, u64), // thread instructions, cycles, L2 accesses, L2 misses
    phase_start: u64,
}

impl Controller {
    fn new(cfg: &DynamicConfig) -> Controller {
        Controller {
            cfg: cfg.clone(),
            sampling: Some(0),
            sampled: Vec::new(),
            current: cfg.candidates[0],
            reference: None,
            epoch_start: (0, 0, 0, 0),
            phase_start: 0,
        }
    }

    /// Called after each step; closes an epoch when enough instructions have retired.
    fn after_step(
        &mut self,
        core: u32,
        instr: u64,
        cycles: u64,
        l2: (u64, u64),
        out: &mut Vec<PhaseChoice>,
    ) {
        if instr - self.epoch_start.0 < self.cfg.epoch_instructions {
            return;
        }
        let di = instr - self.epoch_start.0;
        let dc = (cycles - self.epoch_start.1).max(1);
        let ipc = di as f64 / dc as f64;
        let da = l2.0 - self.epoch_start.2;
        let miss = if da == 0 {
            0.0
        } else {
            (l2.1 - self.epoch_start.3) as f64 / da as f64
        };
        self.epoch_start = (instr, cycles, l2.0, l2.1);
        match self.sampling {
            Some(i) => {
                self.sampled.push((self.cfg.candidates[i], ipc));
                if i + 1 < self.cfg.candidates.len() {
                    self.sampling = Some(i + 1);
                    self.current = self.cfg.candidates[i + 1];
                } else {
                    // Best IPC; the first candidate wins ties.
                    let mut best = self.sampled[0];
                    for &s in &self.sampled[1..] {
                        if s.1 > best.1 {
                            best = s;
                        }
                    }
                    self.current = best.0;
                    out.push(PhaseChoice {
                        core,
                        start_instruction: self.phase_start,
                        sampled: std::mem::take(&mut self.sampled),
                        chosen: best.0,
                    });
                    self.sampling = None;
                    self.reference = None;
                }
            }
            None => match self.reference {
                None => self.reference = Some((ipc, miss)),
                Some((ripc, rmiss)) => {
                    let t = self.cfg.phase_threshold;
                    let changed = rel(ipc, ripc) > t || rel(miss, rmiss) > t;
                    if changed {
                        self.sampling = Some(0);
                        self.current = self.cfg.candidates[0];
                        self.phase_start = instr;
                    } else {
                        self.reference = Some((ipc, miss));
                    }
                }
            },
        }
    }
}

fn rel(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        if a == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (a - b).abs() / b.abs()
    }
}

/// One step of a user thread: a user-mode record or a whole privileged run.
enum Step {
    User(Record),
    Run(Vec<Record>),
}

/// Reads a thread's records and cuts them into steps.
struct Stream<S> {
    src: S,
    buf: Vec<Record>,
    pos: usize,
    done: bool,
}

impl<S: RecordSource> Stream<S> {
    fn peek(&mut self) -> Result<Option<Record>, Error> {
        while self.pos == self.buf.len() {
            if self.done {
                return Ok(None);
            }
            self.pos = 0;
            if !self.src.next_block(&mut self.buf)? {
                self.done = true;
                self.buf.clear();
            }
        }
        Ok(Some(self.buf[self.pos]))
    }

    fn next_step(&mut self, id: &dyn RunIdentity) -> Result<Option<Step>, Error> {
        let Some(r) = self.peek()? else {
            return Ok(None);
        };
        self.pos += 1;
        if !r.privileged {
            return Ok(Some(Step::User(r)));
        }
        let mut run = vec![r];
        while let Some(n) = self.peek()? {
            if !n.privileged || id.new_run(run.last().unwrap(), &n) {
                break;
            }
            run.push(n);
            self.pos += 1;
        }
        Ok(Some(Step::Run(run)))
    }
}

/// The machine: caches of every core (user cores first, the OS core last) and the clocks.
pub struct OffloadModel {
    cfg: OffloadConfig,
    cores: Vec<CoreCaches>,
    line_shift: u32,
}

impl OffloadModel {
    pub fn new(cfg: &OffloadConfig) -> Result<OffloadModel, ConfigError> {
        cfg.validate()?;
        let mk = |size: Size, ways: u32, seed: u64| -> Result<Cache, ConfigError> {
            Cache::new(
                CacheGeometry::new(size.bytes(), ways, cfg.line_size, 4096)?,
                ReplacementKind::Lru,
                seed,
            )
        };
        let n = cfg.user_cores as usize + 1;
        let cores = (0..n)
            .map(|i| {
                Ok(CoreCaches {
                    l1i: mk(cfg.l1_size, cfg.l1_ways, i as u64)?,
                    l1d: mk(cfg.l1_size, cfg.l1_ways, i as u64)?,
                    l2: mk(cfg.l2_size, cfg.l2_ways, i as u64)?,
                })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        Ok(OffloadModel {
            cfg: cfg.clone(),
            cores,
            line_shift: cfg.line_size.trailing_zeros(),
        })
    }

    fn os_core(&self) -> usize {
        self.cores.len() - 1
    }

    /// Does any core other than `me` hold `line`?
    fn held_elsewhere(&self, me: usize, line: u64) -> bool {
        self.cores.iter().enumerate().any(|(i, c)| {
            i != me && (c.l2.contains(line) || c.l1d.contains(line) || c.l1i.contains(line))
        })
    }

    fn invalidate_elsewhere(&mut self, me: usize, line: u64) -> bool {
        let mut any = false;
        for (i, c) in self.cores.iter_mut().enumerate() {
            if i != me {
                any |= c.l2.invalidate(line).is_some();
                any |= c.l1d.invalidate(line).is_some();
                any |= c.l1i.invalidate(line).is_some();
            }
        }
        any
    }

    /// One line access on `core`; returns the latency and what served it.
    fn access_line(
        &mut self,
        core: usize,
        line: u64,
        kind: Kind,
        privileged: bool,
        st: &mut CoreStats,
    ) -> u64 {
        let cfg = &self.cfg;
        let (l1lat, l2lat) = (cfg.l1_latency as u64, cfg.l2_latency as u64);
        let write = kind.is_write();
        let multi = self.cores.len() > 1;
        let meta = LineMeta {
            asid: 0,
            flags: if privileged { flags::PRIVILEGED } else { 0 }
                | if write { flags::DIRTY } else { 0 },
            reuse: 0,
        };
        let mut lat;
        let served;
        let c = &mut self.cores[core];
        let l1 = if kind.is_instruction() {
            &mut c.l1i
        } else {
            &mut c.l1d
        };
        match l1.lookup(line) {
            Lookup::Hit(s) => {
                l1.touch(s);
                if write {
                    l1.meta_mut(s).flags |= flags::DIRTY;
                }
                lat = l1lat;
                served = Served::L1;
            }
            Lookup::Miss(m) => {
                st.l1_misses += 1;
                let l2hit = match c.l2.lookup(line) {
                    Lookup::Hit(s) => {
                        c.l2.touch(s);
                        true
                    }
                    Lookup::Miss(_) => false,
                };
                // Fill L1 (a dirty L1 victim is written back into the L2 if it holds it).
                let (_, ev) = l1.fill_at(m, line, meta);
                if let Some(ev) = ev {
                    if ev.meta.dirty() {
                        if let Some(s) = c.l2.find(ev.line) {
                            c.l2.meta_mut(s).flags |= flags::DIRTY;
                        }
                    }
                }
                if l2hit {
                    lat = l1lat + l2lat;
                    served = Served::L2;
                } else {
                    st.l2_misses += 1;
                    c.l2.fill(line, meta);
                    if multi && self.held_elsewhere(core, line) {
                        st.coherence_misses += 1;
                        lat = l1lat
                            + l2lat
                            + self.cfg.remote_latency as u64
                            + self.cfg.directory_latency as u64;
                        served = Served::Remote;
                    } else {
                        lat = l1lat + l2lat + self.cfg.memory_latency as u64;
                        served = Served::Memory;
                    }
                }
            }
        }
        if write && multi && self.invalidate_elsewhere(core, line) {
            st.invalidations += 1;
            if served == Served::L1 || served == Served::L2 {
                // An upgrade: the directory must be told (Remote/Memory already paid for it).
                lat += self.cfg.directory_latency as u64;
            }
        }
        lat
    }

    /// Execute one record on `core`: its instructions plus its references' stalls.
    fn exec(&mut self, core: usize, r: &Record, st: &mut CoreStats) -> u64 {
        let first = r.addr >> self.line_shift;
        let last = (r.addr + r.size.max(1) as u64 - 1) >> self.line_shift;
        let mut stall = 0;
        for line in first..=last {
            st.references += 1;
            let lat = self.access_line(core, line, r.kind, r.privileged, st);
            stall += lat - self.cfg.l1_latency as u64;
        }
        st.stall_cycles += stall;
        let i = instructions(r);
        st.instructions += i;
        i + stall
    }

    /// Run `threads` (one record stream per user core) to the end.
    pub fn run<S: RecordSource>(
        mut self,
        threads: Vec<S>,
        id: &dyn RunIdentity,
    ) -> Result<OffloadResult, Error> {
        let nu = self.cfg.user_cores as usize;
        if threads.len() != nu {
            return Err(ConfigError::new(
                "offload.user_cores",
                format!(
                    "{} user cores but {} record streams were given",
                    nu,
                    threads.len()
                ),
            )
            .into());
        }
        let mut streams: Vec<Stream<S>> = threads
            .into_iter()
            .map(|src| Stream {
                src,
                buf: Vec::new(),
                pos: 0,
                done: false,
            })
            .collect();
        let mut preds = (0..nu)
            .map(|_| Predictor::new(&self.cfg.predictor))
            .collect::<Result<Vec<_>, _>>()?;
        let mut acc: Vec<Accuracy> = (0..nu)
            .map(|_| Accuracy::new(&self.cfg.report_triggers))
            .collect();
        let mut ctl: Vec<Option<Controller>> = (0..nu)
            .map(|_| self.cfg.dynamic.as_ref().map(Controller::new))
            .collect();
        let mut user = vec![CoreStats::default(); nu];
        let mut os = CoreStats::default();
        let mut clock = vec![0u64; nu];
        let mut finished = vec![false; nu];
        let mut os_free = 0u64;
        let mut max_wait = 0u64;
        let mut phases = Vec::new();
        let mig = self.cfg.migration_cycles;
        let ret = self.cfg.return_cost();
        let tol = self.cfg.predictor.tolerance;
        let osc = self.os_core();
        // Always the unfinished core with the smallest clock (lowest index on ties).
        while let Some(u) = (0..nu)
            .filter(|&u| !finished[u])
            .min_by_key(|&u| (clock[u], u))
        {
            let Some(step) = streams[u].next_step(id)? else {
                finished[u] = true;
                continue;
            };
            let mut st = std::mem::take(&mut user[u]);
            match step {
                Step::User(r) => {
                    st.thread_instructions += instructions(&r);
                    clock[u] += self.exec(u, &r, &mut st);
                }
                Step::Run(run) => {
                    let len: u64 = run.iter().map(instructions).sum();
                    let a = id.astate_of_run(&run);
                    let p = preds[u].predict(a);
                    acc[u].record(p, len, tol);
                    preds[u].update(a, len);
                    st.thread_instructions += len;
                    st.privileged_instructions += len;
                    st.privileged_runs += 1;
                    let trigger = match &ctl[u] {
                        Some(c) => Some(c.current),
                        None => self.cfg.trigger,
                    };
                    if trigger.is_some_and(|n| p.length > n) {
                        let arrive = clock[u] + mig;
                        let start = arrive.max(os_free);
                        let wait = start - arrive;
                        let mut busy = 0;
                        for r in &run {
                            busy += self.exec(osc, r, &mut os);
                        }
                        os.cycles += busy;
                        os.offloaded_runs += 1;
                        os.offloaded_instructions += len;
                        os_free = start + busy;
                        max_wait = max_wait.max(wait);
                        st.migration_cycles += mig + ret;
                        st.queue_cycles += wait;
                        st.remote_cycles += busy;
                        st.offloaded_runs += 1;
                        st.offloaded_instructions += len;
                        clock[u] = os_free + ret;
                    } else {
                        for r in &run {
                            clock[u] += self.exec(u, r, &mut st);
                        }
                    }
                }
            }
            st.cycles = clock[u];
            if let Some(c) = &mut ctl[u] {
                let (acc2, miss2) = (st.l1_misses, st.l2_misses);
                c.after_step(
                    u as u32,
                    st.thread_instructions,
                    clock[u],
                    (acc2, miss2),
                    &mut phases,
                );
            }
            user[u] = st;
        }
        let mut res = OffloadResult {
            user,
            os,
            accuracy: acc,
            phases,
            max_queue_wait: max_wait,
            invariants: Vec::new(),
        };
        res.invariants = check_invariants(&res);
        Ok(res)
    }
}

/// Accounting rules every result must satisfy (an empty list when it does).
pub fn check_invariants(r: &OffloadResult) -> Vec<String> {
    let mut v = Vec::new();
    let mut off_runs = 0;
    let mut off_instr = 0;
    for (u, c) in r.user.iter().enumerate() {
        if c.instructions + c.offloaded_instructions != c.thread_instructions {
            v.push(format!(
                "user core {u}: {} executed here + {} off-loaded != {} instructions of its thread",
                c.instructions, c.offloaded_instructions, c.thread_instructions
            ));
        }
        let parts =
            c.instructions + c.stall_cycles + c.migration_cycles + c.queue_cycles + c.remote_cycles;
        if parts != c.cycles {
            v.push(format!(
                "user core {u}: cycles {} != instructions + stalls + migration + queue + remote = {parts}",
                c.cycles
            ));
        }
        if c.offloaded_runs > c.privileged_runs {
            v.push(format!("user core {u}: more runs off-loaded than seen"));
        }
        if r.accuracy[u].runs != c.privileged_runs {
            v.push(format!(
                "user core {u}: {} predictions for {} privileged runs",
                r.accuracy[u].runs, c.privileged_runs
            ));
        }
        off_runs += c.offloaded_runs;
        off_instr += c.offloaded_instructions;
    }
    if off_runs != r.os.offloaded_runs || off_instr != r.os.offloaded_instructions {
        v.push(format!(
            "OS core executed {} runs / {} instructions, user cores off-loaded {off_runs} / {off_instr}",
            r.os.offloaded_runs, r.os.offloaded_instructions
        ));
    }
    if r.os.instructions != r.os.offloaded_instructions {
        v.push("OS core executed instructions it was not sent".into());
    }
    if r.os.instructions + r.os.stall_cycles != r.os.cycles {
        v.push(format!(
            "OS core: busy cycles {} != instructions + stalls {}",
            r.os.cycles,
            r.os.instructions + r.os.stall_cycles
        ));
    }
    v
}

/// The syscall identity carried by the trace (`Record::syscall`, set on a run's first record)
/// as the AState. A record with an identity inside a privileged stretch starts a new run (two
/// system calls back to back).
pub struct SyscallIdentity;

impl RunIdentity for SyscallIdentity {
    fn astate(&self, first: &Record) -> u64 {
        first.syscall as u64
    }
    fn new_run(&self, _prev: &Record, next: &Record) -> bool {
        next.syscall != 0
    }
}

/// The AState of a captured trace's runs: the syscall identity where the capture gives one
/// (user mode with `--syscalls`: the marker that starts each run), else the address of the run's
/// first instruction fetch: in a full-system trace, the kernel entry the CPU took (the system
/// call entry, a fault or an interrupt vector). The paper's AState is the register state at the
/// transition (section 4.2: the system call number and arguments); QEMU 7.2's plugin API reads no
/// guest registers, so a full-system trace's system calls all share one AState (the entry
/// `entry_SYSCALL_64`) and the predictor tells them apart only by its history. A run starts at
/// each record carrying a syscall identity, as with `SyscallIdentity`.
pub struct TraceIdentity;

impl RunIdentity for TraceIdentity {
    fn astate(&self, first: &Record) -> u64 {
        first.syscall as u64
    }
    fn astate_of_run(&self, run: &[Record]) -> u64 {
        if run[0].syscall != 0 {
            return run[0].syscall as u64;
        }
        // Tagged above the 32-bit syscall words so the two kinds never collide.
        run.iter()
            .find(|r| r.kind.is_instruction())
            .map_or(0, |r| r.addr | (1 << 63))
    }
    fn new_run(&self, _prev: &Record, next: &Record) -> bool {
        next.syscall != 0
    }
}

/// User-mode addresses of user core `u` are moved by `u << 44` so the user cores run separate
/// processes; privileged (kernel) addresses are shared by every core, as a kernel is.
struct Relocated<S> {
    src: S,
    offset: u64,
}

impl<S: RecordSource> RecordSource for Relocated<S> {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, crate::error::TraceError> {
        let more = self.src.next_block(buf)?;
        if self.offset != 0 {
            for r in buf.iter_mut().filter(|r| !r.privileged) {
                r.addr = r.addr.wrapping_add(self.offset);
            }
        }
        Ok(more)
    }
}

#[cfg(test)]
mod scenarios;
#[cfg(test)]
mod tests;
