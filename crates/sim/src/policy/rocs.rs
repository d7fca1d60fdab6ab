//! `rocs`: the run-time OS cache-filtering service of ROCS (papers/000, sections 3-5): one pollute
//! buffer of LLC colors, each process whose LLC miss rate exceeds the threshold profiled on its
//! own (L1D-miss samples with their data source, throttled, prefetcher off), its miss-rate stack
//! searched by Algorithm 1, eager remapping, coarse phase detection. The machinery is
//! `pollute.rs`, shared with `global-pollute`.
use super::pollute::{PolluteConfig, PolluteEngine, Scope};
use super::{Kernel, MachineInfo, Placement, Policy, ProcessInfo, Tick};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use crate::pmu::Sample;

#[derive(Debug)]
pub struct Rocs(PolluteEngine);

impl Rocs {
    pub fn new(cfg: &PolluteConfig, m: &MachineInfo) -> Result<Self, ConfigError> {
        let colors = cfg.validate("policy.rocs", m)?;
        Ok(Rocs(PolluteEngine::new(
            cfg.clone(),
            Scope::PerProcess,
            colors,
            m,
        )))
    }
}

impl Policy for Rocs {
    fn name(&self) -> &'static str {
        "rocs"
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
        self.0.report("rocs")
    }
}

#[cfg(test)]
#[path = "rocs_tests.rs"]
mod tests;
