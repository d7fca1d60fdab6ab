/*!
Policies written in Python: `PyPolicy` implements the sim crate's `Policy`
trait by calling the methods of a `cachecolor.Policy` instance (python/cachecolor/policy.py),
and `simulate_system_policy` runs a system under one, through `System::with_policy` (the sim
crate is not changed).

Contract:
- The run releases the GIL; each hook the Python class defines re-attaches for the call only.
  A hook the class does not define (the set is read once, from `Policy._defined_hooks()`) is
  answered here without touching Python (`allowed_colors`: every color; `process_created`: no
  pin), so it costs what the same no-op hook of a Rust policy costs.
- Hooks that take a kernel (`tick`, `sample`, `scheduled`) get a `cachecolor.Kernel` wrapping
  the `&mut dyn Kernel` for the duration of the call only: the pointer is cleared as the hook
  returns (whether it returned or raised), and any later use raises `RuntimeError`. It is also
  refused from any thread other than the one running the hook. Kernel actions refused by the
  kernel raise `cachecolor.KernelError`.
- An exception raised by a hook (or a bad value returned by one) ends the run: it is stored,
  the run is unwound with a private payload (`HookFailed`, through `resume_unwind`, so no panic
  message is printed and the panic hook never runs), caught around the run, and the stored
  exception is raised to the caller with its traceback. The half-run `System` is dropped.
- `allowed_colors` may return any iterable of color numbers; a `frozenset` or `tuple` returned
  again as the same object is not converted again (it is immutable and a reference is held, so
  identity means equal contents).
- The report's `policy` is the policy's `name` (the class attribute, else the class name); the
  name is leaked once per run, as the trait wants a `&'static str`.
*/
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::memory::ColorSet;
use cachecolor_sim::pmu::{DataSource, Event, EventCounts, Reading, Sample, SamplingConfig};
use cachecolor_sim::policy::{
    Kernel, MachineInfo, Placement, Policy, ProcessInfo, SchedEvent, Tick,
};
use cachecolor_sim::system::{System, SystemConfig};
use cachecolor_sim::ConfigError as RustConfigError;
use pyo3::exceptions::{PyException, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyList, PyTuple};

use crate::errors::{CachecolorError, Failure, Result};

pyo3::create_exception!(
    cachecolor,
    KernelError,
    CachecolorError,
    "A kernel action a policy asked for was refused (no such process, page, thread or core; no free frame)."
);

/// The hooks a Python policy may define, read once from `Policy._defined_hooks()`.
#[derive(Debug, Default, Clone, Copy)]
struct Hooks {
    check_processes: bool,
    process_created: bool,
    process_exited: bool,
    allowed_colors: bool,
    out_of_colors: bool,
    tick: bool,
    sample: bool,
    scheduled: bool,
    report: bool,
}

impl Hooks {
    fn from_names(names: &[String]) -> Hooks {
        let has = |n: &str| names.iter().any(|m| m == n);
        Hooks {
            check_processes: has("check_processes"),
            process_created: has("process_created"),
            process_exited: has("process_exited"),
            allowed_colors: has("allowed_colors"),
            out_of_colors: has("out_of_colors"),
            tick: has("tick"),
            sample: has("sample"),
            scheduled: has("scheduled"),
            report: has("report"),
        }
    }
}

/// The unwind payload that carries a hook's failure out of `System::run` (the exception itself
/// waits in `PyPolicy::failure`).
struct HookFailed;

/// A `cachecolor.Policy` instance as a `Policy` of the sim crate.
#[derive(Debug)]
pub struct PyPolicy {
    obj: Py<PyAny>,
    name: &'static str,
    hooks: Hooks,
    /// The events the class's `counter_events` names (as a Rust policy's `counter_events`).
    events: Vec<Event>,
    cores: usize,
    colors: u64,
    all: ColorSet,
    /// What the last `allowed_colors` returned, converted, and the object when immutable.
    allowed: ColorSet,
    cached: Option<Py<PyAny>>,
    /// The exception that ended the run (shared with the caller, which owns no `System`).
    failure: Arc<Mutex<Option<PyErr>>>,
}

impl PyPolicy {
    /// Keep `e` and unwind out of the run.
    fn fail(&self, e: PyErr) -> ! {
        let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        drop(slot);
        std::panic::resume_unwind(Box::new(HookFailed))
    }

    fn ok<T>(&self, r: PyResult<T>) -> T {
        r.unwrap_or_else(|e| self.fail(e))
    }

    /// Call a hook that gets a kernel: the `Kernel` object is valid for this call only.
    fn with_kernel(
        &self,
        k: &mut dyn Kernel,
        call: impl for<'py> FnOnce(Python<'py>, Bound<'py, PyKernel>) -> PyResult<()>,
    ) {
        let r = Python::attach(|py| {
            let ptr: *mut (dyn Kernel + '_) = k;
            // SAFETY: the lifetime is erased only to store the pointer in the Python object;
            // it is cleared below, before `k`'s borrow ends, and every use checks it first.
            let ptr: *mut (dyn Kernel + 'static) = unsafe { std::mem::transmute(ptr) };
            let kernel = Bound::new(
                py,
                PyKernel {
                    ptr: Some(KernelPtr(ptr)),
                    thread: std::thread::current().id(),
                },
            )?;
            let r = call(py, kernel.clone());
            // No Rust borrow of the object outlives a method call, so this cannot fail.
            kernel.borrow_mut().ptr = None;
            r
        });
        self.ok(r)
    }
}

/// Seeing a color set from Python: any iterable of color numbers.
fn color_set(colors: u64, obj: &Bound<'_, PyAny>) -> PyResult<ColorSet> {
    let mut set = ColorSet::empty(colors);
    for c in obj.try_iter()? {
        let c: u64 = c?.extract().map_err(|_| {
            PyTypeError::new_err("a color set is an iterable of color numbers (int >= 0)")
        })?;
        if c >= colors {
            return Err(PyValueError::new_err(format!(
                "color {c} does not exist: this LLC has colors 0..={}",
                colors - 1
            )));
        }
        set.insert(c);
    }
    Ok(set)
}

impl Policy for PyPolicy {
    fn name(&self) -> &'static str {
        self.name
    }

    fn counter_events(&self) -> Vec<Event> {
        self.events.clone()
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        if !self.hooks.process_created {
            return Placement::default();
        }
        let cores = self.cores;
        let r = Python::attach(|py| -> PyResult<Placement> {
            let info = Py::new(py, PyProcessInfo::from(p))?;
            let out = self
                .obj
                .call_method1(py, intern!(py, "process_created"), (info,))?;
            let out = out.bind(py);
            if out.is_none() {
                return Ok(Placement::default());
            }
            let pin: Vec<usize> = out.extract().map_err(|_| {
                PyTypeError::new_err(
                    "process_created returns None or a list of the cores to pin the process to",
                )
            })?;
            if let Some(&c) = pin.iter().find(|&&c| c >= cores) {
                return Err(PyValueError::new_err(format!(
                    "process_created pinned process {} to core {c}: the machine has cores 0..={}",
                    p.pid,
                    cores - 1
                )));
            }
            if pin.is_empty() {
                return Err(PyValueError::new_err(format!(
                    "process_created pinned process {} to no core (return None to leave it)",
                    p.pid
                )));
            }
            Ok(Placement { pin: Some(pin) })
        });
        self.ok(r)
    }

    fn process_exited(&mut self, pid: usize) {
        if !self.hooks.process_exited {
            return;
        }
        let r = Python::attach(|py| {
            self.obj
                .call_method1(py, intern!(py, "process_exited"), (pid,))
                .map(drop)
        });
        self.ok(r)
    }

    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet {
        if !self.hooks.allowed_colors {
            return &self.all;
        }
        let r = Python::attach(|py| -> PyResult<Option<(ColorSet, Option<Py<PyAny>>)>> {
            let out = self
                .obj
                .call_method1(py, intern!(py, "allowed_colors"), (pid, vpn))?;
            let b = out.bind(py);
            if self.cached.as_ref().is_some_and(|c| c.bind(py).is(b)) {
                return Ok(None);
            }
            let set = color_set(self.colors, b).map_err(|e| {
                // Ctrl-C or SIGTERM while a generator runs arrives as its exception
                // (KeyboardInterrupt, a BaseException): passed on, it is an interrupt (exit
                // 130/143), not a bad return value.
                if !e.is_instance_of::<PyException>(py) {
                    return e;
                }
                PyTypeError::new_err(format!("allowed_colors({pid}, {vpn:#x}) returned {b}: {e}"))
            })?;
            let immutable = b.is_instance_of::<PyFrozenSet>() || b.is_instance_of::<PyTuple>();
            Ok(Some((set, immutable.then_some(out))))
        });
        if let Some((set, cached)) = self.ok(r) {
            self.allowed = set;
            self.cached = cached;
        }
        &self.allowed
    }

    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        if !self.hooks.tick {
            return;
        }
        self.with_kernel(k, |py, kernel| {
            let tick = PyTick::new(py, t)?;
            self.obj
                .call_method1(py, intern!(py, "tick"), (kernel, tick))
                .map(drop)
        })
    }

    fn sample(&mut self, k: &mut dyn Kernel, s: &Sample) {
        if !self.hooks.sample {
            return;
        }
        self.with_kernel(k, |py, kernel| {
            let sample = PySample::from(s);
            self.obj
                .call_method1(py, intern!(py, "sample"), (kernel, sample))
                .map(drop)
        })
    }

    fn scheduled(&mut self, k: &mut dyn Kernel, e: &SchedEvent) {
        if !self.hooks.scheduled {
            return;
        }
        self.with_kernel(k, |py, kernel| {
            let event = PySchedEvent::from(e);
            self.obj
                .call_method1(py, intern!(py, "scheduled"), (kernel, event))
                .map(drop)
        })
    }

    fn report(&self) -> serde_json::Value {
        if !self.hooks.report {
            return serde_json::Value::Null;
        }
        let r = Python::attach(|py| -> PyResult<serde_json::Value> {
            let out = self.obj.call_method0(py, intern!(py, "report"))?;
            let text: String = py
                .import("json")?
                .call_method1("dumps", (out,))?
                .extract()?;
            serde_json::from_str(&text).map_err(|e| PyValueError::new_err(format!("report(): {e}")))
        });
        self.ok(r)
    }

    fn out_of_colors(&mut self, pid: usize) -> bool {
        if !self.hooks.out_of_colors {
            return false;
        }
        let r = Python::attach(|py| -> PyResult<bool> {
            self.obj
                .call_method1(py, intern!(py, "out_of_colors"), (pid,))?
                .bind(py)
                .is_truthy()
        });
        self.ok(r)
    }

    fn check_processes(&self, names: &[String]) -> std::result::Result<(), RustConfigError> {
        if !self.hooks.check_processes {
            return Ok(());
        }
        let r = Python::attach(|py| {
            self.obj
                .call_method1(py, intern!(py, "check_processes"), (names.to_vec(),))
                .map(drop)
        });
        // Not inside the run yet: the caller raises the stored exception instead of this error.
        r.map_err(|e| {
            let msg = e.to_string();
            *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            RustConfigError::new("policy", msg)
        })
    }
}

/// The `&mut dyn Kernel` of one hook call (lifetime erased; see `PyPolicy::with_kernel`).
struct KernelPtr(*mut (dyn Kernel + 'static));

// SAFETY: the pointer is dereferenced only on the thread that created it (checked against
// `PyKernel::thread`), while the hook that received it is running.
unsafe impl Send for KernelPtr {}
unsafe impl Sync for KernelPtr {}

/// What a policy may ask of the kernel, valid during the hook it was passed to.
#[pyclass(name = "Kernel", module = "cachecolor")]
pub struct PyKernel {
    ptr: Option<KernelPtr>,
    thread: ThreadId,
}

fn kernel_err(e: cachecolor_sim::policy::KernelError) -> PyErr {
    KernelError::new_err(e.to_string())
}

impl PyKernel {
    fn get(&mut self) -> PyResult<&mut dyn Kernel> {
        match &self.ptr {
            None => Err(PyRuntimeError::new_err(
                "this Kernel was passed to a hook that has returned: a Kernel is valid only \
                 during the hook call it was passed to",
            )),
            Some(_) if std::thread::current().id() != self.thread => Err(PyRuntimeError::new_err(
                "a Kernel may be used only by the thread running its hook",
            )),
            // SAFETY: set by `with_kernel` for the duration of the hook, on this thread.
            Some(p) => Ok(unsafe { &mut *p.0 }),
        }
    }
}

#[pymethods]
impl PyKernel {
    /// Simulated time (cycles) on the core running the hook.
    fn now(&mut self) -> PyResult<u64> {
        Ok(self.get()?.now())
    }

    /// The core running the hook.
    fn core(&mut self) -> PyResult<usize> {
        Ok(self.get()?.core())
    }

    /// The number of cores of the machine.
    fn cores(&mut self) -> PyResult<usize> {
        Ok(self.get()?.cores())
    }

    /// The colors of the LLC.
    fn colors(&mut self) -> PyResult<u64> {
        Ok(self.get()?.colors())
    }

    /// Whether the kernel may still be used (the hook it was passed to is running).
    #[getter]
    fn valid(&self) -> bool {
        self.ptr.is_some()
    }

    /// Every thread: `tid`, `pid`, `core` (whose run queue holds it), `done`.
    fn threads(&mut self) -> PyResult<Vec<PyThread>> {
        Ok(self
            .get()?
            .threads()
            .into_iter()
            .map(|t| PyThread {
                tid: t.tid,
                pid: t.pid,
                core: t.core,
                done: t.done,
            })
            .collect())
    }

    /// The mapped pages of process `pid` in vpn order (empty if it has exited).
    fn pages(&mut self, pid: usize) -> PyResult<Vec<PyPage>> {
        Ok(self
            .get()?
            .pages(pid)
            .into_iter()
            .map(|p| PyPage {
                vpn: p.vpn,
                pfn: p.pfn,
                color: p.color,
                accessed: p.accessed,
                dirty: p.dirty,
                marked: p.marked,
                huge: p.huge,
            })
            .collect())
    }

    /// Eager recolor (ROCS section 4.2, COLORIS section 3.3): move page `vpn` of `pid` to a frame
    /// of one of `colors` (allocate, copy, remap, TLB shootdown). Returns the new frame, or None
    /// if its color is already one of `colors`.
    fn recolor(
        &mut self,
        pid: usize,
        vpn: u64,
        colors: &Bound<'_, PyAny>,
    ) -> PyResult<Option<u64>> {
        let k = self.get()?;
        let set = color_set(k.colors(), colors)?;
        k.recolor(pid, vpn, &set).map_err(kernel_err)
    }

    /// Lazy recolor (COLORIS section 3.3): clear the page's present bit and mark it; its next
    /// fault asks `allowed_colors` again and moves it if its color is no longer allowed.
    fn mark_for_recolor(&mut self, pid: usize, vpn: u64) -> PyResult<()> {
        self.get()?.mark_for_recolor(pid, vpn).map_err(kernel_err)
    }

    /// Clear the accessed bit of every page of `pid`; return the vpns that had it set (cost per
    /// entry visited, and a TLB flush of the process so the bits are set again).
    fn scan_accessed(&mut self, pid: usize) -> PyResult<Vec<u64>> {
        self.get()?.scan_accessed(pid).map_err(kernel_err)
    }

    /// Cycles the kernel has spent so far on process `pid` doing a policy's work: page moves and
    /// their TLB shootdowns, sample interrupts, accessed-bit scans, migrations (every kernel
    /// path but the page faults any process pays); 0 for an unknown pid. The OS's own
    /// accounting, as Linux keeps a task's system time (rocs weighs its moves with it).
    fn policy_cycles(&mut self, pid: usize) -> PyResult<u64> {
        Ok(self.get()?.policy_cycles(pid))
    }

    /// Move thread `tid` to `core`'s run queue (and pin it there).
    fn migrate(&mut self, tid: usize, core: usize) -> PyResult<()> {
        self.get()?.migrate(tid, core).map_err(kernel_err)
    }

    /// Program the data-address sampler of `core` (every core if None) with a dict of
    /// `[pmu.sampling]`'s keys (`event`, `period`, `cost_cycles`, `pollute_l1_lines`), or switch
    /// it off with `sampling=None` (ROCS section 3.3 throttles it by changing the period).
    #[pyo3(signature = (core = None, sampling = None))]
    fn set_sampling(
        &mut self,
        py: Python<'_>,
        core: Option<usize>,
        sampling: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let k = self.get()?;
        let cores = k.cores();
        if let Some(c) = core.filter(|&c| c >= cores) {
            return Err(KernelError::new_err(format!(
                "core {c} does not exist (the machine has {cores})"
            )));
        }
        let config = match sampling {
            None => None,
            Some(d) => {
                // The same keys and defaults as `[pmu.sampling]`.
                let text: String = py.import("json")?.call_method1("dumps", (d,))?.extract()?;
                let c: SamplingConfig = serde_json::from_str(&text).map_err(|e| {
                    PyValueError::new_err(format!(
                        "sampling {text}: {e} (keys as [pmu.sampling]: event, period, cost_cycles, pollute_l1_lines)"
                    ))
                })?;
                if !c.event.has_data_address() {
                    return Err(PyValueError::new_err(format!(
                        "sampling event `{}` has no data address",
                        c.event.name()
                    )));
                }
                Some(c)
            }
        };
        self.get()?.set_sampling(core, config);
        Ok(())
    }

    /// Switch the hardware prefetchers on or off (ROCS section 3.2 profiles with them off).
    fn set_prefetch(&mut self, on: bool) -> PyResult<()> {
        self.get()?.set_prefetch(on);
        Ok(())
    }

    fn __repr__(&self) -> String {
        if self.ptr.is_some() {
            "<cachecolor.Kernel (valid during its hook)>".into()
        } else {
            "<cachecolor.Kernel (expired: its hook returned)>".into()
        }
    }
}

/// The machine a policy runs on (given to `Policy.setup`).
#[pyclass(name = "Machine", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PyMachine {
    cores: usize,
    chips: usize,
    colors: u64,
    llc_size: u64,
    llc_ways: u32,
    line_size: u64,
    page_size: u64,
}

#[pyclass(name = "ProcessInfo", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PyProcessInfo {
    pid: usize,
    name: String,
    colors: Option<Vec<u64>>,
    pinned: Option<Vec<usize>>,
    threads: usize,
}

impl From<&ProcessInfo> for PyProcessInfo {
    fn from(p: &ProcessInfo) -> Self {
        PyProcessInfo {
            pid: p.pid,
            name: p.name.clone(),
            colors: p.colors.as_ref().map(|c| c.iter().collect()),
            pinned: p.pinned.clone(),
            threads: p.threads,
        }
    }
}

#[pyclass(name = "Thread", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PyThread {
    tid: usize,
    pid: usize,
    core: usize,
    done: bool,
}

#[pyclass(name = "Page", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PyPage {
    vpn: u64,
    pfn: u64,
    color: u64,
    accessed: bool,
    dirty: bool,
    marked: bool,
    huge: bool,
}

#[pyclass(name = "Sample", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PySample {
    core: u32,
    thread: u32,
    pid: u32,
    write: bool,
    vaddr: u64,
    paddr: u64,
    /// "cache", "remote" or "memory".
    source: &'static str,
    /// The cache level (index in the hierarchy) that served it, when `source` is "cache".
    level: Option<u8>,
    cycle: u64,
}

impl From<&Sample> for PySample {
    fn from(s: &Sample) -> Self {
        let (source, level) = match s.source {
            DataSource::Level(l) => ("cache", Some(l)),
            DataSource::Remote => ("remote", None),
            DataSource::Memory => ("memory", None),
        };
        PySample {
            core: s.core,
            thread: s.thread,
            pid: s.pid,
            write: s.write,
            vaddr: s.vaddr,
            paddr: s.paddr,
            source,
            level,
            cycle: s.cycle,
        }
    }
}

#[pyclass(name = "SchedEvent", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PySchedEvent {
    /// "switch", "migrated" or "exited".
    kind: &'static str,
    /// switch: the core; migrated: the destination core; exited: None.
    core: Option<usize>,
    /// switch: the thread that starts running; migrated, exited: the thread.
    tid: usize,
    /// switch: the thread that ran before (or None); migrated: the core it left.
    previous: Option<usize>,
}

impl From<&SchedEvent> for PySchedEvent {
    fn from(e: &SchedEvent) -> Self {
        match *e {
            SchedEvent::Switch { core, from, to } => PySchedEvent {
                kind: "switch",
                core: Some(core),
                tid: to,
                previous: from,
            },
            SchedEvent::Migrated { tid, from, to } => PySchedEvent {
                kind: "migrated",
                core: Some(to),
                tid,
                previous: Some(from),
            },
            SchedEvent::Exited { tid } => PySchedEvent {
                kind: "exited",
                core: None,
                tid,
                previous: None,
            },
        }
    }
}

#[pyclass(name = "Reading", module = "cachecolor", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PyReading {
    event: String,
    raw: u64,
    time_enabled: u64,
    time_running: u64,
    /// `raw` scaled by enabled/running time, as perf reports a multiplexed counter.
    scaled: f64,
}

impl From<&Reading> for PyReading {
    fn from(r: &Reading) -> Self {
        PyReading {
            event: r.event.name(),
            raw: r.raw,
            time_enabled: r.time_enabled,
            time_running: r.time_running,
            scaled: r.scaled(),
        }
    }
}

#[pyclass(name = "ProcessCounts", module = "cachecolor", frozen, get_all)]
pub struct PyProcessCounts {
    pid: usize,
    alive: bool,
    /// Event name -> count since the process started.
    total: Py<PyDict>,
    /// Event name -> count since the previous tick.
    interval: Py<PyDict>,
    /// Under a realistic PMU: the process's counters as read (list of `Reading`: raw, time
    /// enabled, time running, scaled), summed over its threads; empty under the ideal PMU.
    readings: Py<PyList>,
}

#[pyclass(name = "Tick", module = "cachecolor", frozen, get_all)]
pub struct PyTick {
    now: u64,
    interval: u64,
    /// Per core: its counters' readings (list of `Reading`).
    cores: Py<PyList>,
    processes: Py<PyList>,
}

fn counts<'py>(py: Python<'py>, c: &EventCounts) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    for e in Event::ALL {
        d.set_item(e.name(), c.get(e))?;
    }
    Ok(d.unbind())
}

impl PyTick {
    fn new(py: Python<'_>, t: &Tick) -> PyResult<Py<PyTick>> {
        let cores = PyList::empty(py);
        for c in &t.cores {
            let readings: Vec<PyReading> = c.iter().map(PyReading::from).collect();
            cores.append(readings)?;
        }
        let processes = PyList::empty(py);
        for p in &t.processes {
            processes.append(PyProcessCounts {
                pid: p.pid,
                alive: p.alive,
                total: counts(py, &p.total)?,
                interval: counts(py, &p.interval)?,
                readings: PyList::new(py, p.readings.iter().map(PyReading::from))?.unbind(),
            })?;
        }
        Py::new(
            py,
            PyTick {
                now: t.now,
                interval: t.interval,
                cores: cores.unbind(),
                processes: processes.unbind(),
            },
        )
    }
}

macro_rules! debug_repr {
    ($($t:ty),*) => {$(
        #[pymethods]
        impl $t {
            fn __repr__(&self) -> String {
                format!("{self:?}").replacen("Py", "", 1)
            }
        }
    )*};
}
debug_repr!(
    PyMachine,
    PyProcessInfo,
    PyThread,
    PyPage,
    PySample,
    PySchedEvent,
    PyReading
);

/// The machine `config` describes, as the sim crate's `policy::build` computes it.
fn machine_info(config: &SystemConfig) -> Result<MachineInfo> {
    let m = &config.machine;
    let h = Hierarchy::new(&m.hierarchy).map_err(|e| {
        Failure::Config(RustConfigError::new(
            format!("machine.hierarchy.{}", e.field),
            e.message,
        ))
    })?;
    let hc = h.config();
    let llc = hc.levels.len() - 1;
    let g = h.cache(llc, 0).geometry();
    let (pmu_counters, pmu_events) = MachineInfo::pmu_of(&config.pmu);
    Ok(MachineInfo {
        cores: hc.cores as usize * m.chips as usize,
        chips: m.chips as usize,
        colors: g.colors(),
        llc_size: g.size(),
        llc_ways: g.ways(),
        line_size: hc.line_size as u64,
        page_size: hc.page_size.0,
        inner_colors: MachineInfo::inner_colors_of(&h),
        llc_miss_penalty: MachineInfo::llc_miss_penalty_of(&m.timing),
        page_move_cycles: MachineInfo::page_move_cycles_of(&m.timing, &m.memory, hc.page_size.0),
        pmu_counters,
        pmu_events,
    })
}

/// Run the system `text` describes (as `simulate_system`) under the Python policy `policy` (a
/// `cachecolor.Policy` instance); returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (text, policy, format = "toml", progress = None))]
pub fn simulate_system_policy(
    py: Python<'_>,
    text: &str,
    policy: Bound<'_, PyAny>,
    format: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let progress = progress.as_ref();
    let config = crate::system::parse(text, format)?;
    let machine = machine_info(&config)?;
    let hooks: Vec<String> = policy.call_method0("_defined_hooks")?.extract()?;
    let name: String = policy.getattr("policy_name")?.extract()?;
    let wanted: Vec<String> = policy.getattr("counter_events")?.extract().map_err(|_| {
        PyTypeError::new_err("counter_events: a sequence of event names (cachecolor.EVENTS)")
    })?;
    let events = wanted
        .iter()
        .map(|n| {
            Event::ALL
                .into_iter()
                .find(|e| e.name() == *n)
                .ok_or_else(|| {
                    let all: Vec<String> = Event::ALL.iter().map(|e| e.name()).collect();
                    PyValueError::new_err(format!(
                        "counter_events: {n:?} is not an event; the events are: {}",
                        all.join(", ")
                    ))
                })
        })
        .collect::<PyResult<Vec<Event>>>()?;
    let m = PyMachine {
        cores: machine.cores,
        chips: machine.chips,
        colors: machine.colors,
        llc_size: machine.llc_size,
        llc_ways: machine.llc_ways,
        line_size: machine.line_size,
        page_size: machine.page_size,
    };
    policy.call_method1("setup", (m,))?;
    let failure = Arc::new(Mutex::new(None));
    let adapter = PyPolicy {
        obj: policy.unbind(),
        name: Box::leak(name.into_boxed_str()),
        hooks: Hooks::from_names(&hooks),
        events,
        cores: machine.cores,
        colors: machine.colors,
        all: ColorSet::all(machine.colors),
        allowed: ColorSet::empty(machine.colors),
        cached: None,
        failure: failure.clone(),
    };
    let out = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<String> {
            let mut system = System::with_policy(&config, Box::new(adapter))?;
            crate::system::run_observed(&mut system, progress)?;
            Ok(crate::system::document(&system))
        }))
    });
    let stored = failure.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (out, stored) {
        (_, Some(e)) => Err(e),
        (Ok(r), None) => Ok(r?),
        (Err(payload), None) => {
            // A panic of the simulator itself: the same message as every other run's.
            let r: Result<String> =
                crate::errors::catch_panic(|| std::panic::resume_unwind(payload));
            Ok(r?)
        }
    }
}

/// Register the classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("KernelError", py.get_type::<KernelError>())?;
    m.add_class::<PyKernel>()?;
    m.add_class::<PyMachine>()?;
    m.add_class::<PyProcessInfo>()?;
    m.add_class::<PyThread>()?;
    m.add_class::<PyPage>()?;
    m.add_class::<PySample>()?;
    m.add_class::<PySchedEvent>()?;
    m.add_class::<PyReading>()?;
    m.add_class::<PyProcessCounts>()?;
    m.add_class::<PyTick>()?;
    m.add_function(wrap_pyfunction!(simulate_system_policy, m)?)?;
    Ok(())
}
