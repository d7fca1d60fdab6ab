/*!
The uniprocessor of Nellans et al. sections 3 and 5: an in-order core (one instruction per cycle
plus memory stalls, as Simics' default in-order model) with split 32 KB L1 instruction and data
caches shared by user and OS code, and a private L2 that is either one unified cache (the
baseline: 1 MB, 5 cycles) or the section 5 split L2: a user bank and an OS bank with mutually
exclusive contents. Memory is 500 cycles (section 3).

Split L2 (section 5):
- Block placement: a block fetched on an L2 miss goes to the OS bank when the access that
  missed is privileged and its class is routed: `data` ("Route Data Only": privileged loads and
  stores), `instructions` ("Route Instructions Only": privileged ifetches), `both` ("Route
  Instructions and Data"); everything else goes to the user bank. Blocks are never swapped
  between banks and leave only by LRU eviction in their bank, so a line is in at most one bank
  (checked on every fill: a violation is counted in `invariants`).
- Look-up: `parallel` probes both banks, `parallel_latency` cycles for a hit anywhere.
  `sequential` probes first the bank the placement policy would have put the block in (the bank
  predictor "mirrors the block placement policy"): `sequential_latency` on a hit there,
  `mispredict_latency` when the line is in the other bank or in neither (the second bank must
  be looked up before going to memory, to keep mutual exclusion).
- Adaptive fallback (section 5.2): at the end of every epoch of `epoch` instructions, if fewer
  than `adaptive_threshold` of the epoch's instructions were privileged, the next epoch places
  blocks round-robin in the two banks ("the bank placement policy alternately uses either bank
  to place a newly fetched block") and looks up in parallel ("there is no basis for L2 bank
  predictability"); otherwise the configured placement and look-up apply. "Alternately" has
  two readings, both kept (`round_robin`): `per-set` (default) alternates the banks among the
  blocks that compete for one set (one toggle bit per set of the user bank, indexed by the
  line's set there), so each set's fills go to the banks in turn and the pair behaves like one
  cache of twice the ways; `global` alternates over all fills with one toggle, so for a given
  set the bank is effectively a coin flip and one bank's half of a set can take several fills
  in a row while the other half keeps older lines. Either way a block is in exactly one bank
  and the parallel look-up finds it there.

Timing: cycles = instructions + stalls; an L1 hit adds nothing (1-cycle L1 in the pipeline), an
L1 miss adds the L2 latency (as above for a split L2), an L2 miss adds the memory latency on
top. Write-backs are not charged (the paper's model does not mention them) and caches are
non-inclusive; a record's line is `addr / 64` (the syscall-mix generator never spans lines).

Characterisation (section 3, Figures 1-3): instructions by mode; privileged runs
(`runs::RunTracker`) in run-length buckets; per cache (L1I, L1D, L2 or each L2 bank) demand
accesses and misses by mode, and evictions attributed to the mode of the access whose fill
caused them, those caused by the OS further split by the length bucket of the run that caused
them (known when the run ends).
*/
use super::runs::RunTracker;
use crate::cache::{flags, Cache, LineMeta, Lookup, ReplacementKind};
use crate::config::Size;
use crate::error::ConfigError;
use crate::geometry::CacheGeometry;
use crate::trace::{Kind, Record, RecordSource};
use serde::{Deserialize, Serialize};

/// Upper bounds of the run-length buckets (instructions): < 25, < 100, < 1000, < 5000,
/// < 10000, and the rest. 25 and 1000 are the paper's Figure 2 landmarks; 100, 1000, 5000 and
/// 10000 its Table 1 thresholds.
pub const RUN_BUCKETS: [u64; 5] = [25, 100, 1000, 5000, 10000];
/// Names of the buckets, for reports.
pub const RUN_BUCKET_NAMES: [&str; 6] = [
    "<25",
    "25-99",
    "100-999",
    "1000-4999",
    "5000-9999",
    ">=10000",
];

/// The bucket of a run of `n` instructions.
pub fn run_bucket(n: u64) -> usize {
    RUN_BUCKETS.iter().position(|&b| n < b).unwrap_or(5)
}

fn d_l1() -> Size {
    Size(32 << 10)
}
fn d_l1_ways() -> u32 {
    4
}
fn d_l2() -> Size {
    Size(1 << 20)
}
fn d_ways() -> u32 {
    8
}
fn d_l2_latency() -> u32 {
    5
}
fn d_memory() -> u32 {
    500
}
fn d_epoch() -> u64 {
    1_000_000
}
fn d_threshold() -> f64 {
    0.25
}
fn d_par() -> u32 {
    8
}
fn d_seq() -> u32 {
    6
}
fn d_mis() -> u32 {
    10
}

/// Which privileged blocks go to the OS bank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// "Route Data Only": blocks fetched by privileged loads and stores.
    Data,
    /// "Route Instructions Only": blocks fetched by privileged instruction fetches.
    Instructions,
    /// "Route Instructions and Data": every block fetched in privileged mode.
    Both,
}

/// How the adaptive fallback alternates the banks (section 5.2; module comment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoundRobin {
    /// Alternate per set: the fills of one set go to the banks in turn.
    #[default]
    PerSet,
    /// Alternate over all fills with one toggle.
    Global,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lookup2 {
    Parallel,
    Sequential,
}

/// `[split]`: the section 5 split L2 (defaults: the larger-budget 1 MB + 1 MB of Table 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitConfig {
    #[serde(default = "d_l2")]
    pub user_size: Size,
    #[serde(default = "d_l2")]
    pub os_size: Size,
    #[serde(default = "d_ways")]
    pub ways: u32,
    /// The L2 capacity this configuration claims to use; the banks together must fit in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Size>,
    pub placement: Placement,
    pub lookup: Lookup2,
    #[serde(default = "d_par")]
    pub parallel_latency: u32,
    #[serde(default = "d_seq")]
    pub sequential_latency: u32,
    #[serde(default = "d_mis")]
    pub mispredict_latency: u32,
    /// Section 5.2's fallback (round-robin placement, parallel look-up in low-OS epochs).
    #[serde(default)]
    pub adaptive: bool,
    #[serde(default = "d_threshold")]
    pub adaptive_threshold: f64,
    /// How the fallback alternates the banks: `per-set` (default) or `global`.
    #[serde(default)]
    pub round_robin: RoundRobin,
    /// Instructions per epoch of the adaptive fallback.
    #[serde(default = "d_epoch")]
    pub epoch: u64,
}

/// The machine (defaults: the paper's section 4.3 / 5.1 baseline core).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    #[serde(default = "d_l1")]
    pub l1i_size: Size,
    #[serde(default = "d_l1")]
    pub l1d_size: Size,
    #[serde(default = "d_l1_ways")]
    pub l1_ways: u32,
    /// Baseline unified L2 (ignored when `split` is given).
    #[serde(default = "d_l2")]
    pub l2_size: Size,
    #[serde(default = "d_ways")]
    pub l2_ways: u32,
    #[serde(default = "d_l2_latency")]
    pub l2_latency: u32,
    #[serde(default = "d_memory")]
    pub memory_latency: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitConfig>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        crate::config::from_toml("").expect("every field has a default")
    }
}

fn geometry(field: &str, size: Size, ways: u32) -> Result<CacheGeometry, ConfigError> {
    CacheGeometry::new(size.bytes(), ways, 64, 4096)
        .map_err(|e| ConfigError::new(field, format!("{size} with {ways} ways: {}", e.message)))
}

impl ModelConfig {
    /// Check every field and cross-field rule; errors name the field (`split.os_size`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        geometry("l1i_size", self.l1i_size, self.l1_ways)?;
        geometry("l1d_size", self.l1d_size, self.l1_ways)?;
        geometry("l2_size", self.l2_size, self.l2_ways)?;
        if self.memory_latency == 0 {
            return Err(ConfigError::new("memory_latency", "at least 1 cycle"));
        }
        if let Some(s) = &self.split {
            geometry("split.user_size", s.user_size, s.ways)?;
            geometry("split.os_size", s.os_size, s.ways)?;
            if let Some(b) = s.budget {
                let total = s.user_size.bytes() + s.os_size.bytes();
                if total > b.bytes() {
                    return Err(ConfigError::new(
                        "split.budget",
                        format!(
                            "the banks take {} + {} = {} but the budget is {b}: shrink the banks \
                             or raise the budget",
                            s.user_size,
                            s.os_size,
                            Size(total)
                        ),
                    ));
                }
            }
            for (f, v) in [
                ("split.parallel_latency", s.parallel_latency),
                ("split.sequential_latency", s.sequential_latency),
                ("split.mispredict_latency", s.mispredict_latency),
            ] {
                if v == 0 {
                    return Err(ConfigError::new(f, "at least 1 cycle"));
                }
            }
            if s.mispredict_latency < s.sequential_latency {
                return Err(ConfigError::new(
                    "split.mispredict_latency",
                    format!(
                        "{} is below sequential_latency {}: a mispredicted look-up probes two banks",
                        s.mispredict_latency, s.sequential_latency
                    ),
                ));
            }
            if !(0.0..=1.0).contains(&s.adaptive_threshold) {
                return Err(ConfigError::new(
                    "split.adaptive_threshold",
                    format!("{} is outside [0, 1]", s.adaptive_threshold),
                ));
            }
            if s.epoch == 0 {
                return Err(ConfigError::new(
                    "split.epoch",
                    "0 is not allowed: instructions per epoch",
                ));
            }
        }
        Ok(())
    }
}

/// Counts of one cache (or L2 bank).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CacheStats {
    pub name: String,
    /// Demand accesses and misses, [user, privileged].
    pub accesses: [u64; 2],
    pub misses: [u64; 2],
    /// Evictions caused by fills of [user, privileged] accesses.
    pub evictions: [u64; 2],
    /// Evictions of a line brought in by the other mode ([user evicting OS, OS evicting user]).
    pub cross_evictions: [u64; 2],
    /// Evictions caused by privileged accesses, by the length bucket of their run.
    pub os_evictions_by_run: [u64; 6],
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelReport {
    pub records: u64,
    /// Instructions [user, privileged].
    pub instructions: [u64; 2],
    pub cycles: u64,
    pub ipc: f64,
    /// Privileged share of instructions (Figure 1).
    pub privileged_share: f64,
    /// Privileged runs and their instructions per length bucket (Figure 2).
    pub runs_by_length: [u64; 6],
    pub run_instructions_by_length: [u64; 6],
    pub run_buckets: [&'static str; 6],
    /// Runs that carried a syscall identity.
    pub runs_with_identity: u64,
    /// L1I, L1D, then L2 (or "L2-user" and "L2-os").
    pub caches: Vec<CacheStats>,
    /// Split L2 only: look-ups that found the line in the first bank probed / in the second.
    pub bank_predictions: [u64; 2],
    /// Split L2 only: epochs run in the adaptive fallback and in total.
    pub fallback_epochs: u64,
    pub epochs: u64,
    /// Broken invariants (mutual exclusion of the banks); must be empty.
    pub invariants: Vec<String>,
}

struct Level {
    cache: Cache,
    stats: CacheStats,
    /// Evictions caused by the current privileged run (attributed to its bucket at its end).
    pending: u64,
}

impl Level {
    fn new(name: &str, g: CacheGeometry) -> Level {
        Level {
            cache: Cache::new(g, ReplacementKind::Lru, 0).expect("validated geometry"),
            stats: CacheStats {
                name: name.into(),
                ..CacheStats::default()
            },
            pending: 0,
        }
    }

    /// Demand access; returns hit.
    #[inline]
    fn access(&mut self, line: u64, mode: usize, write: bool) -> bool {
        self.stats.accesses[mode] += 1;
        match self.cache.lookup(line) {
            Lookup::Hit(slot) => {
                self.cache.touch(slot);
                if write {
                    self.cache.meta_mut(slot).flags |= flags::DIRTY;
                }
                true
            }
            Lookup::Miss(_) => {
                self.stats.misses[mode] += 1;
                false
            }
        }
    }

    /// Fill after a miss by an access of `mode`.
    #[inline]
    fn fill(&mut self, line: u64, mode: usize) {
        let meta = LineMeta {
            asid: 0,
            flags: if mode == 1 { flags::PRIVILEGED } else { 0 },
            reuse: 0,
        };
        let (_, ev) = self.cache.fill(line, meta);
        if let Some(ev) = ev {
            self.stats.evictions[mode] += 1;
            let by_os = ev.meta.flags & flags::PRIVILEGED != 0;
            if by_os != (mode == 1) {
                self.stats.cross_evictions[mode] += 1;
            }
            if mode == 1 {
                self.pending += 1;
            }
        }
    }

    fn end_run(&mut self, bucket: usize) {
        self.stats.os_evictions_by_run[bucket] += self.pending;
        self.pending = 0;
    }
}

/// The machine being simulated.
pub struct Model {
    config: ModelConfig,
    l1i: Level,
    l1d: Level,
    /// Unified L2, or [user bank, OS bank].
    l2: Vec<Level>,
    runs: RunTracker,
    report: ModelReport,
    epoch_insns: [u64; 2],
    fallback: bool,
    /// The global toggle (`RoundRobin::Global`).
    round_robin: usize,
    /// One toggle per set of the user bank (`RoundRobin::PerSet`).
    round_robin_sets: Vec<u8>,
}

impl Model {
    pub fn new(config: &ModelConfig) -> Result<Model, ConfigError> {
        config.validate()?;
        let c = config.clone();
        let l2 = match &c.split {
            None => vec![Level::new("L2", geometry("l2_size", c.l2_size, c.l2_ways)?)],
            Some(s) => vec![
                Level::new("L2-user", geometry("split.user_size", s.user_size, s.ways)?),
                Level::new("L2-os", geometry("split.os_size", s.os_size, s.ways)?),
            ],
        };
        let round_robin_sets = match &c.split {
            Some(s) if s.adaptive && s.round_robin == RoundRobin::PerSet => {
                vec![0; l2[0].cache.geometry().sets() as usize]
            }
            _ => Vec::new(),
        };
        Ok(Model {
            l1i: Level::new("L1I", geometry("l1i_size", c.l1i_size, c.l1_ways)?),
            l1d: Level::new("L1D", geometry("l1d_size", c.l1d_size, c.l1_ways)?),
            l2,
            runs: RunTracker::new(),
            report: ModelReport {
                run_buckets: RUN_BUCKET_NAMES,
                ..ModelReport::default()
            },
            epoch_insns: [0; 2],
            // Before the first epoch has been measured there is no OS share to go by: an
            // adaptive cache starts as the unpartitioned one (round-robin, parallel).
            fallback: c.split.as_ref().is_some_and(|s| s.adaptive),
            round_robin: 0,
            round_robin_sets,
            config: c,
        })
    }

    /// The bank (0 user, 1 OS) the placement policy gives an access.
    #[inline]
    fn placed(p: Placement, kind: Kind, privileged: bool) -> usize {
        let routed = match p {
            Placement::Data => !kind.is_instruction(),
            Placement::Instructions => kind.is_instruction(),
            Placement::Both => true,
        };
        (privileged && routed) as usize
    }

    /// The L2 part of an L1 miss: stall cycles.
    fn l2_access(&mut self, line: u64, kind: Kind, mode: usize) -> u64 {
        let mem = self.config.memory_latency as u64;
        let write = kind.is_write();
        let Some(s) = &self.config.split else {
            let l2 = &mut self.l2[0];
            let lat = self.config.l2_latency as u64;
            if l2.access(line, mode, write) {
                return lat;
            }
            l2.fill(line, mode);
            return lat + mem;
        };
        let (par, seq, mis) = (
            s.parallel_latency as u64,
            s.sequential_latency as u64,
            s.mispredict_latency as u64,
        );
        let placement = s.placement;
        let parallel = self.fallback || s.lookup == Lookup2::Parallel;
        let predicted = Self::placed(placement, kind, mode == 1);
        // Probe the predicted bank first (for parallel look-up the order only decides which
        // bank's counters see the access first; both are probed).
        let first = predicted;
        let second = 1 - first;
        let (hit_first, hit_second);
        if self.l2[first].cache.contains(line) {
            hit_first = self.l2[first].access(line, mode, write);
            hit_second = false;
        } else {
            // The line is not in the first bank: count the probe there only for sequential
            // look-up (parallel look-up counts one access, in the bank that holds the line or,
            // on a miss, in the bank that receives it).
            hit_first = false;
            hit_second = self.l2[second].cache.contains(line);
            if hit_second {
                self.l2[second].access(line, mode, write);
            }
        }
        let latency = if parallel {
            par
        } else if hit_first {
            seq
        } else {
            mis
        };
        if hit_first || hit_second {
            self.report.bank_predictions[hit_second as usize] += 1;
            return latency;
        }
        // Miss in both banks: place by policy (round-robin in a fallback epoch).
        let bank = if self.fallback {
            match s.round_robin {
                RoundRobin::PerSet => {
                    let t = &mut self.round_robin_sets[self.l2[0].cache.set_of_line(line)];
                    *t ^= 1;
                    *t as usize
                }
                RoundRobin::Global => {
                    self.round_robin ^= 1;
                    self.round_robin
                }
            }
        } else {
            predicted
        };
        let target = &mut self.l2[bank];
        target.stats.accesses[mode] += 1;
        target.stats.misses[mode] += 1;
        if self.l2[1 - bank].cache.contains(line) {
            self.report.invariants.push(format!(
                "line {line:#x} filled into bank {bank} while the other bank holds it"
            ));
        }
        self.l2[bank].fill(line, mode);
        latency + mem
    }

    /// Simulate one record.
    #[inline]
    pub fn step(&mut self, r: &Record) {
        let mode = r.privileged as usize;
        self.report.records += 1;
        let insns = r.icount as u64;
        self.report.instructions[mode] += insns;
        self.report.cycles += insns;
        if let Some(run) = self.runs.push(r) {
            self.end_run(run.instructions, run.syscall);
        }
        if let Some(s) = &self.config.split {
            if s.adaptive {
                self.epoch_insns[mode] += insns;
                let total = self.epoch_insns[0] + self.epoch_insns[1];
                if total >= s.epoch {
                    let share = self.epoch_insns[1] as f64 / total as f64;
                    self.fallback = share < s.adaptive_threshold;
                    self.report.epochs += 1;
                    self.report.fallback_epochs += self.fallback as u64;
                    self.epoch_insns = [0; 2];
                }
            }
        }
        let line = r.addr >> 6;
        let write = r.kind.is_write();
        let l1 = if r.kind.is_instruction() {
            &mut self.l1i
        } else {
            &mut self.l1d
        };
        if l1.access(line, mode, write) {
            return;
        }
        l1.fill(line, mode);
        let stall = self.l2_access(line, r.kind, mode);
        self.report.cycles += stall;
    }

    fn end_run(&mut self, instructions: u64, syscall: u32) {
        let b = run_bucket(instructions);
        self.report.runs_by_length[b] += 1;
        self.report.run_instructions_by_length[b] += instructions;
        self.report.runs_with_identity += (syscall != 0) as u64;
        self.l1i.end_run(b);
        self.l1d.end_run(b);
        for l in &mut self.l2 {
            l.end_run(b);
        }
    }

    /// Run a whole source.
    pub fn run(&mut self, src: &mut dyn RecordSource) -> Result<(), crate::error::TraceError> {
        let mut buf = Vec::new();
        while src.next_block(&mut buf)? {
            for r in &buf {
                self.step(r);
            }
        }
        Ok(())
    }

    /// Close open runs and return the report.
    pub fn finish(mut self) -> ModelReport {
        for run in self.runs.finish() {
            self.end_run(run.instructions, run.syscall);
        }
        let mut rep = self.report;
        let all = rep.instructions[0] + rep.instructions[1];
        rep.privileged_share = if all == 0 {
            0.0
        } else {
            rep.instructions[1] as f64 / all as f64
        };
        rep.ipc = if rep.cycles == 0 {
            0.0
        } else {
            all as f64 / rep.cycles as f64
        };
        rep.caches = vec![self.l1i.stats, self.l1d.stats];
        rep.caches.extend(self.l2.into_iter().map(|l| l.stats));
        rep
    }
}

/// A machine config file (`examples/oscache/*.toml`): `[model]` (and `[model.split]`), and
/// optionally a `[workload]` to run when none is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    #[serde(default)]
    pub model: ModelConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<crate::workload::WorkloadSpec>,
}

impl RunConfig {
    pub fn from_toml(text: &str) -> Result<RunConfig, ConfigError> {
        let c: RunConfig = crate::config::from_toml(text)?;
        c.model
            .validate()
            .map_err(|e| ConfigError::new(format!("model.{}", e.field), e.message))?;
        Ok(c)
    }
}

/// Simulate `workload` on `model`.
pub fn run_workload(
    model: &ModelConfig,
    workload: &crate::workload::WorkloadSpec,
) -> Result<ModelReport, crate::error::Error> {
    let mut m = Model::new(model)?;
    let mut w = crate::workload::Workload::new(workload)?;
    m.run(&mut w)?;
    Ok(m.finish())
}

/// Simulate a trace (or any source) on `model`. A source with no privileged record is
/// rejected: the OS report would be empty, not a finding ("traces without privileged
/// information asked for an OS report are reported clearly").
pub fn run_source(
    model: &ModelConfig,
    src: &mut dyn RecordSource,
) -> Result<ModelReport, crate::error::Error> {
    let mut m = Model::new(model)?;
    m.run(src)?;
    let rep = m.finish();
    require_os_information(&rep, "trace")?;
    Ok(rep)
}

/// The check of `run_source`, for callers that drive a `Model` themselves (the Python
/// binding, block by block with progress): an error naming `what` ("trace", "workload") when
/// the records carried no privileged information.
pub fn require_os_information(rep: &ModelReport, what: &str) -> Result<(), ConfigError> {
    if rep.records > 0 && rep.instructions[1] == 0 && rep.runs_by_length.iter().sum::<u64>() == 0 {
        return Err(ConfigError::new(
            what,
            format!(
                "the {what} has {} records and none is privileged: it carries no OS information \
                 (a lackey capture sees user code only; a qemu capture marks system calls with \
                 --syscalls); an OS report needs records with the privileged flag, e.g. a \
                 syscall-mix workload",
                rep.records
            ),
        ));
    }
    Ok(())
}
