/*!
Test helpers for whole-system runs: one way to run a config under a policy
and seed with the invariants checked (`config_for`, `run_config`, `run`), used by the scenario
tests of every policy, and a spy policy that records when each hook fires (as ChampSim's
replacement-interface test does, `442-replacement-interface.cc`), with the contract test of
the hook order (docs/policies.md "Hooks"), and `Scripted`, a policy made of the few hooks a
test needs.
*/
use super::{System, SystemConfig, SystemReport};
use crate::memory::ColorSet;
use crate::pmu::Sample;
use crate::policy::{Kernel, Placement, Policy, ProcessInfo, SchedEvent, Tick};
use std::sync::{Arc, Mutex};

/// `text` (TOML, presets resolved) under the policy named `policy`; with `seed`, the memory
/// seed is `seed` and thread i's workload seed `seed + i` (threads counted over processes).
///
/// The scenario tests check the papers' shapes on the exact-oracle PMU (`pmu.ideal = true`)
/// unless the config says otherwise: what the realistic PMU changes is measured in the
/// policies' docs (docs/pmu.md), not hidden in these assertions.
pub(crate) fn config_for(text: &str, policy: &str, seed: Option<u64>) -> SystemConfig {
    let mut doc = super::presets::toml_value(text).unwrap();
    if let Some(root) = doc.as_object_mut() {
        let pmu = root.entry("pmu").or_insert_with(|| serde_json::json!({}));
        if let Some(pmu) = pmu.as_object_mut() {
            pmu.entry("ideal").or_insert(true.into());
        }
    }
    let mut config = super::presets::system_config_from_value(doc).unwrap();
    config.policy.name = policy.into();
    if let Some(seed) = seed {
        config.memory.seed = seed;
        let mut k = 0;
        for p in &mut config.processes {
            for t in &mut p.threads {
                if let Some(w) = &mut t.workload {
                    w.seed = seed + k;
                }
                k += 1;
            }
        }
    }
    config
}

/// Run `config` to its end (under `policy` if given, else the one its `[policy]` names) and
/// return the system and its report, whose invariants must all hold.
pub(crate) fn run_config(
    config: &SystemConfig,
    policy: Option<Box<dyn Policy>>,
) -> (System, SystemReport) {
    let mut s = match policy {
        Some(p) => System::with_policy(config, p).unwrap(),
        None => System::new(config).unwrap(),
    };
    s.run().unwrap();
    let r = s.report();
    assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    (s, r)
}

/// `config_for` then `run_config`: the report.
pub(crate) fn run(text: &str, policy: &str, seed: Option<u64>) -> SystemReport {
    run_config(&config_for(text, policy, seed), None).1
}

/// A test policy made of the hooks a test needs: every other hook does nothing, `process_created`
/// places nothing and `allowed_colors` answers `allowed`, so a test writes only what it checks,
/// e.g. `Scripted::new("test-x", 16, state).on_tick(|p, k, t| ...)`. The hooks are plain functions
/// of the policy (its `state` and `allowed` are theirs to change).
pub(crate) struct Scripted<S> {
    pub name: &'static str,
    pub allowed: ColorSet,
    pub state: S,
    created: fn(&mut Scripted<S>, &ProcessInfo),
    ticked: fn(&mut Scripted<S>, &mut dyn Kernel, &Tick),
    sampled: fn(&mut Scripted<S>, &mut dyn Kernel, &Sample),
    widen: fn(&mut Scripted<S>, usize) -> bool,
    reported: fn(&Scripted<S>) -> serde_json::Value,
}

impl<S> Scripted<S> {
    /// Every color of `colors` allowed, no hook doing anything.
    pub(crate) fn new(name: &'static str, colors: u64, state: S) -> Scripted<S> {
        Scripted {
            name,
            allowed: ColorSet::all(colors),
            state,
            created: |_, _| {},
            ticked: |_, _, _| {},
            sampled: |_, _, _| {},
            widen: |_, _| false,
            reported: |_| serde_json::Value::Null,
        }
    }
    pub(crate) fn on_created(mut self, f: fn(&mut Scripted<S>, &ProcessInfo)) -> Self {
        self.created = f;
        self
    }
    pub(crate) fn on_tick(mut self, f: fn(&mut Scripted<S>, &mut dyn Kernel, &Tick)) -> Self {
        self.ticked = f;
        self
    }
    pub(crate) fn on_sample(mut self, f: fn(&mut Scripted<S>, &mut dyn Kernel, &Sample)) -> Self {
        self.sampled = f;
        self
    }
    /// `out_of_colors`: return whether `allowed` was widened.
    pub(crate) fn on_out_of_colors(mut self, f: fn(&mut Scripted<S>, usize) -> bool) -> Self {
        self.widen = f;
        self
    }
    pub(crate) fn on_report(mut self, f: fn(&Scripted<S>) -> serde_json::Value) -> Self {
        self.reported = f;
        self
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Scripted<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripted")
            .field("name", &self.name)
            .field("state", &self.state)
            .finish()
    }
}

impl<S: std::fmt::Debug + Send> Policy for Scripted<S> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        (self.created)(self, p);
        Placement::default()
    }
    fn allowed_colors(&mut self, _pid: usize, _vpn: u64) -> &ColorSet {
        &self.allowed
    }
    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        (self.ticked)(self, k, t)
    }
    fn sample(&mut self, k: &mut dyn Kernel, s: &Sample) {
        (self.sampled)(self, k, s)
    }
    fn out_of_colors(&mut self, pid: usize) -> bool {
        (self.widen)(self, pid)
    }
    fn report(&self) -> serde_json::Value {
        (self.reported)(self)
    }
}

/// A hook call as the spy saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hook {
    Check(usize),
    Created(usize),
    Allowed { pid: usize, vpn: u64 },
    Tick { now: u64, processes: Vec<usize> },
    Sample { pid: usize, cycle: u64 },
    Scheduled(SchedEvent),
    Exited(usize),
    Report,
}

/// A policy that allows every color and records every hook call in order.
#[derive(Debug)]
pub(crate) struct Spy {
    all: ColorSet,
    log: Arc<Mutex<Vec<Hook>>>,
}

impl Spy {
    pub(crate) fn new(colors: u64) -> (Spy, Arc<Mutex<Vec<Hook>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let spy = Spy {
            all: ColorSet::all(colors),
            log: log.clone(),
        };
        (spy, log)
    }

    fn push(&self, h: Hook) {
        self.log.lock().unwrap().push(h);
    }
}

impl Policy for Spy {
    fn name(&self) -> &'static str {
        "spy"
    }
    fn check_processes(&self, names: &[String]) -> Result<(), crate::ConfigError> {
        self.push(Hook::Check(names.len()));
        Ok(())
    }
    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        self.push(Hook::Created(p.pid));
        Placement::default()
    }
    fn process_exited(&mut self, pid: usize) {
        self.push(Hook::Exited(pid));
    }
    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet {
        self.push(Hook::Allowed { pid, vpn });
        &self.all
    }
    fn tick(&mut self, _k: &mut dyn Kernel, t: &Tick) {
        self.push(Hook::Tick {
            now: t.now,
            processes: t.processes.iter().map(|p| p.pid).collect(),
        });
    }
    fn sample(&mut self, _k: &mut dyn Kernel, s: &Sample) {
        self.push(Hook::Sample {
            pid: s.pid as usize,
            cycle: s.cycle,
        });
    }
    fn scheduled(&mut self, _k: &mut dyn Kernel, e: &SchedEvent) {
        self.push(Hook::Scheduled(*e));
    }
    fn report(&self) -> serde_json::Value {
        self.push(Hook::Report);
        serde_json::Value::Null
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One core, two processes (the second starts at cycle 300,000), ticks every 100,000
    /// cycles, a sampler on LLC misses: every hook has occasion to fire.
    const SPIED: &str = r#"
[machine.hierarchy]
cores = 1
[[machine.hierarchy.levels]]
name = "L1D"
size = "4KiB"
ways = 4
[[machine.hierarchy.levels]]
name = "LLC"
size = "64KiB"
ways = 4
[machine.timing]
level_latency = [4, 40]
dram_latency = 200
fault_cycles = 1000
[memory]
ram = "16MiB"
[scheduler]
time_slice = 50000
tick = 100000
[pmu.sampling]
event = "llc-misses"
period = 500
[[processes]]
name = "early"
[[processes.threads]]
workload = { seed = 1, phases = [{ pattern = "uniform", footprint = "256KiB", references = 40000 }] }
[[processes]]
name = "late"
start = 300000
[[processes.threads]]
workload = { seed = 2, phases = [{ pattern = "uniform", footprint = "256KiB", references = 40000 }] }
"#;

    fn spied() -> Vec<Hook> {
        let config = config_for(SPIED, "linux", None);
        let (spy, log) = Spy::new(16);
        let (_, r) = run_config(&config, Some(Box::new(spy)));
        assert_eq!(r.policy, "spy");
        let log = log.lock().unwrap().clone();
        log
    }

    fn position(log: &[Hook], f: impl Fn(&Hook) -> bool) -> usize {
        log.iter()
            .position(f)
            .expect("the hook fired at least once")
    }

    /// The times `f` finds in the log, in order.
    fn times(log: &[Hook], f: impl Fn(&Hook) -> Option<u64>) -> Vec<u64> {
        log.iter().filter_map(f).collect()
    }

    #[test]
    fn spy_sees_every_hook_in_the_contracted_order() {
        let log = spied();
        // check_processes first, with both names; the report last and once.
        assert_eq!(log[0], Hook::Check(2));
        assert_eq!(log.last(), Some(&Hook::Report));
        assert_eq!(log.iter().filter(|h| **h == Hook::Report).count(), 1);
        for pid in 0..2 {
            let created = position(&log, |h| *h == Hook::Created(pid));
            let exited = position(&log, |h| *h == Hook::Exited(pid));
            // Every fault of a process comes after its creation and before its exit.
            for (i, h) in log.iter().enumerate() {
                if let Hook::Allowed { pid: p, .. } | Hook::Sample { pid: p, .. } = h {
                    if *p == pid {
                        assert!(
                            created < i && i < exited,
                            "{h:?} at {i}, created {created}, exited {exited}"
                        );
                    }
                }
            }
            // Its thread's exit is a scheduler event before the process's exit.
            let tid = pid; // one thread each, in creation order
            let thread_exit = position(&log, |h| *h == Hook::Scheduled(SchedEvent::Exited { tid }));
            assert!(created < exited && created < thread_exit);
        }
        // The late process is created by the tick after its start, not before: every tick
        // before its creation is at most its start and lists only the early process.
        let late = position(&log, |h| *h == Hook::Created(1));
        for h in &log[..late] {
            if let Hook::Tick { now, processes } = h {
                assert!(*now <= 300_000, "{now}");
                assert_eq!(processes, &vec![0]);
            }
        }
        // Ticks at every multiple of the interval, in order (the last one cut at the end).
        let ticks = times(&log, |h| match h {
            Hook::Tick { now, .. } => Some(*now),
            _ => None,
        });
        assert!(ticks.len() >= 3, "{ticks:?}");
        for (i, t) in ticks[..ticks.len() - 1].iter().enumerate() {
            assert_eq!(*t, (i as u64 + 1) * 100_000, "{ticks:?}");
        }
        // One core, two threads and a 50,000-cycle slice: switches between them.
        let switches = log
            .iter()
            .filter(|h| matches!(h, Hook::Scheduled(SchedEvent::Switch { .. })))
            .count();
        assert!(switches >= 3, "{switches}");
        assert!(
            log.iter().any(|h| matches!(h, Hook::Sample { .. })),
            "the sampler fired"
        );
        // Samples come in time order.
        let cycles = times(&log, |h| match h {
            Hook::Sample { cycle, .. } => Some(*cycle),
            _ => None,
        });
        assert!(cycles.windows(2).all(|w| w[0] <= w[1]), "{cycles:?}");
    }

    #[test]
    fn a_process_exits_after_its_thread_and_is_never_asked_about_again() {
        let log = spied();
        for pid in 0..2 {
            let thread_exit = position(&log, |h| {
                *h == Hook::Scheduled(SchedEvent::Exited { tid: pid })
            });
            let exited = position(&log, |h| *h == Hook::Exited(pid));
            // The kernel frees the process at its last thread's end and tells the policy at
            // once; the scheduler event is delivered after the burst.
            assert!(
                exited < thread_exit,
                "exited {exited}, thread event {thread_exit}"
            );
            assert!(!log[exited..]
                .iter()
                .any(|h| matches!(h, Hook::Allowed { pid: p, .. } if *p == pid)));
        }
    }
}
