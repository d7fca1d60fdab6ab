//! `global-pollute`: Azimi et al. (papers/001) case study 2, section 4.2: the ROCS pollute buffer
//! extended to shared caches. Every core samples its running thread's LLC hits and misses with
//! their addresses (4.2.1); the samples are aggregated per address space into one page profile
//! of all processes (one stack of `(process, page)`), and one fixed partition of the LLC is the
//! pollute buffer of every process and thread (4.2.2). The search (Algorithm 1 of ROCS, with the
//! summed IPC of all processes as its measure) and the rest are `pollute.rs`, shared with `rocs`.
use super::pollute::{PolluteConfig, PolluteEngine, Scope};
use super::{Kernel, MachineInfo, Placement, Policy, ProcessInfo, Tick};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::Sample;

#[derive(Debug)]
pub struct GlobalPollute(PolluteEngine);

impl GlobalPollute {
    pub fn new(cfg: &PolluteConfig, m: &MachineInfo) -> Result<Self, ConfigError> {
        let colors = cfg.validate("policy.global-pollute", m)?;
        Ok(GlobalPollute(PolluteEngine::new(
            cfg.clone(),
            Scope::Global,
            colors,
            m,
        )))
    }
}

impl Policy for GlobalPollute {
    fn name(&self) -> &'static str {
        "global-pollute"
    }
    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        self.0.process_created(p.pid);
        Placement::default()
    }
    fn process_exited(&mut self, pid: usize) {
        self.0.process_exited(pid);
    }
    fn allowed_colors(&mut self, _pid: usize, _vpn: u64) -> &ColorSet {
        self.0.normal()
    }
    fn tick(&mut self, k: &mut dyn Kernel, t: &Tick) {
        self.0.tick(k, t);
    }
    fn sample(&mut self, _k: &mut dyn Kernel, s: &Sample) {
        self.0.sample(s);
    }
    fn report(&self) -> serde_json::Value {
        self.0.report("global-pollute")
    }
}
