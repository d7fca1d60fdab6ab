/*!
The `syscall-mix` pattern: user computation interrupted by privileged runs (system calls, traps,
interrupts), shaped like the OS-intensive workloads of Nellans et al. (section 3, Figures 1-2).

```toml
[[phases]]
pattern = "syscall-mix"
references = 2_000_000        # records, as for every pattern
footprint = "768KiB"          # user data; uniform over it, or zipf with `alpha`
alpha = 0.8                   # optional
store_fraction = 0.2          # of data references, user and kernel
[phases.os]
user_text = "32KiB"           # user code, walked sequentially (a loop)
user_text_base = 0x400000     # default
user_run = 600                # mean user instructions between two privileged runs (geometric)
fetch_bytes = 16              # bytes of code per ifetch record = instructions per fetch * 4
data_per_fetch = 1.0          # data references per ifetch record (a fraction is a coin)
kernel_text_base = 0x600000000000       # default (kernel code; 48-bit, TOML integers are i64)
kernel_data_base = 0x680000000000       # default (kernel data, one region per syscall)
interrupt_rate = 0.02         # probability a run is lengthened by an interrupt
interrupt_length = 400        # extra instructions of such an interrupt, uniform in 1..=this
[[phases.os.syscalls]]
number = 3                    # syscall number (0..=1023)
weight = 10                   # relative frequency
length = [200, 4000]          # run length in instructions for argument value 0 .. args-1
args = 8                      # distinct argument values (each its own predictable length)
text = "16KiB"                # this syscall's kernel code
data = "32KiB"                # this syscall's kernel data (uniform over it)
copy = 0.3                    # share of its data references to the user buffer (copy_to_user)
```

One step emits an instruction fetch of `fetch_bytes` bytes (`size = 4`, `icount =
fetch_bytes / 4`, the instructions it stands for) then `data_per_fetch` data references
(`icount = 0`). In user mode code comes from `user_text` (sequential, wrapping) and data from the
phase's footprint. A privileged run of syscall `s` with argument value `a` (drawn uniformly from
`0..args`) is exactly `length(s, a)` instructions, where `length(s, a)` goes linearly from
`length[0]` (a = 0) to `length[1]` (a = args - 1) — "even a single syscall can have dynamic
behavior based on its inputs" (section 4.2) — plus, with probability `interrupt_rate`, an
interrupt of 1..=`interrupt_length` instructions that the syscall's identity does not predict
("large prediction errors most often occur when ... interrupts have not been disabled", 4.2).
Its code walks `text` from its start (so a longer call touches more kernel code), its data
references go to its own `data` region, or with probability `copy` to a user buffer (a
sequential walk from a random element of the user footprint).

Trace contract (what a predictor or report sees): every record of a privileged run has
`privileged = true`; the FIRST record of each run (its first ifetch) carries
`syscall = pack_syscall(number, mix64(number << 32 | a))`, every other record 0. The run's
length is the sum of the `icount` of its records. A run never ends in the middle of a step; the
phase's `references` may end a run early (the last run of a phase is then shorter).

Draws, all from the workload's reference stream, in order: user run length (at the start of
each user stretch), then per privileged run: syscall, argument, interrupt coin (and length),
buffer start; per data reference: its address, then the store coin.
*/
use crate::config::Size;
use crate::error::ConfigError;
use crate::rng::{mix64, SplitMix64};
use crate::trace::{pack_syscall, Kind, Record};
use serde::{Deserialize, Serialize};

use super::zipf::Zipf;

fn d_user_text_base() -> u64 {
    0x40_0000
}
fn d_kernel_text_base() -> u64 {
    0x6000_0000_0000
}
fn d_kernel_data_base() -> u64 {
    0x6800_0000_0000
}
fn d_fetch_bytes() -> u32 {
    16
}
fn d_data_per_fetch() -> f64 {
    1.0
}
fn d_interrupt_length() -> u32 {
    400
}
fn d_weight() -> f64 {
    1.0
}
fn d_args() -> u32 {
    1
}

/// The OS side of a `syscall-mix` phase (`[phases.os]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallMixSpec {
    /// User code bytes, walked sequentially and wrapping.
    pub user_text: Size,
    #[serde(default = "d_user_text_base")]
    pub user_text_base: u64,
    /// Mean user instructions between privileged runs (geometric), at least 1.
    pub user_run: u32,
    /// Code bytes per ifetch record (a multiple of 4, 4..=64).
    #[serde(default = "d_fetch_bytes")]
    pub fetch_bytes: u32,
    /// Data references per ifetch record, 0..=8.
    #[serde(default = "d_data_per_fetch")]
    pub data_per_fetch: f64,
    #[serde(default = "d_kernel_text_base")]
    pub kernel_text_base: u64,
    #[serde(default = "d_kernel_data_base")]
    pub kernel_data_base: u64,
    /// Probability that a privileged run is lengthened by an unpredictable interrupt.
    #[serde(default)]
    pub interrupt_rate: f64,
    /// Most extra instructions such an interrupt adds (at least 1).
    #[serde(default = "d_interrupt_length")]
    pub interrupt_length: u32,
    pub syscalls: Vec<SyscallSpec>,
}

/// One syscall type of a `syscall-mix`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallSpec {
    /// Syscall number, 0..=1023.
    pub number: u32,
    #[serde(default = "d_weight")]
    pub weight: f64,
    /// Run length in instructions for argument 0 and for argument `args - 1`.
    pub length: [u32; 2],
    /// Distinct argument values, at least 1.
    #[serde(default = "d_args")]
    pub args: u32,
    /// Kernel code bytes of this syscall.
    pub text: Size,
    /// Kernel data bytes of this syscall.
    pub data: Size,
    /// Share of its data references that go to the user buffer.
    #[serde(default)]
    pub copy: f64,
}

impl SyscallSpec {
    /// Instructions of a run with argument value `a` (no interrupt).
    pub fn length_of(&self, a: u32) -> u32 {
        let [lo, hi] = self.length;
        if self.args <= 1 {
            return lo;
        }
        let span = hi as i64 - lo as i64;
        (lo as i64 + span * a as i64 / (self.args as i64 - 1)) as u32
    }

    /// The syscall identity word of argument value `a` (what the first record carries).
    pub fn identity(&self, a: u32) -> u32 {
        pack_syscall(self.number, mix64((self.number as u64) << 32 | a as u64))
    }
}

impl SyscallMixSpec {
    /// Check every field; `at` is the field path of the `os` table (`phases[0].os`).
    pub fn check(&self, at: &str, footprint: u64, size: u64) -> Result<(), ConfigError> {
        let f = |k: &str| format!("{at}.{k}");
        if self.user_text.bytes() < 4 {
            return Err(ConfigError::new(f("user_text"), "at least 4 bytes"));
        }
        if self.user_run == 0 {
            return Err(ConfigError::new(
                f("user_run"),
                "0 is not allowed: the mean user instructions between privileged runs, >= 1",
            ));
        }
        if self.fetch_bytes < 4 || self.fetch_bytes > 64 || !self.fetch_bytes.is_multiple_of(4) {
            return Err(ConfigError::new(
                f("fetch_bytes"),
                format!(
                    "{} is not allowed: a multiple of 4 in 4..=64 (bytes of code per ifetch record)",
                    self.fetch_bytes
                ),
            ));
        }
        if !(0.0..=8.0).contains(&self.data_per_fetch) {
            return Err(ConfigError::new(
                f("data_per_fetch"),
                format!("{} is outside [0, 8]", self.data_per_fetch),
            ));
        }
        if !(0.0..=1.0).contains(&self.interrupt_rate) {
            return Err(ConfigError::new(
                f("interrupt_rate"),
                format!("{} is outside [0, 1] (a probability)", self.interrupt_rate),
            ));
        }
        if self.interrupt_length == 0 {
            return Err(ConfigError::new(f("interrupt_length"), "at least 1"));
        }
        if self.syscalls.is_empty() {
            return Err(ConfigError::new(
                f("syscalls"),
                "the list is empty: give at least one syscall",
            ));
        }
        let _ = (footprint, size);
        for (i, s) in self.syscalls.iter().enumerate() {
            let g = |k: &str| format!("{at}.syscalls[{i}].{k}");
            if s.number > 1023 {
                return Err(ConfigError::new(
                    g("number"),
                    format!("{} is not allowed: 0..=1023", s.number),
                ));
            }
            if !(s.weight.is_finite() && s.weight > 0.0) {
                return Err(ConfigError::new(g("weight"), "a finite number > 0"));
            }
            if s.length[0] == 0 || s.length[1] == 0 {
                return Err(ConfigError::new(
                    g("length"),
                    "run lengths are at least 1 instruction",
                ));
            }
            if s.args == 0 {
                return Err(ConfigError::new(
                    g("args"),
                    "0 is not allowed: at least 1 argument value",
                ));
            }
            if s.text.bytes() < 4 {
                return Err(ConfigError::new(g("text"), "at least 4 bytes"));
            }
            if s.data.bytes() < size {
                return Err(ConfigError::new(
                    g("data"),
                    format!("at least one element ({size} bytes)"),
                ));
            }
            if !(0.0..=1.0).contains(&s.copy) {
                return Err(ConfigError::new(
                    g("copy"),
                    format!("{} is outside [0, 1] (a share)", s.copy),
                ));
            }
        }
        Ok(())
    }
}

/// Where a running syscall mix is.
#[derive(Debug)]
pub(super) struct MixState {
    spec: SyscallMixSpec,
    zipf: Option<Zipf>,
    /// Kernel text and data base of each syscall (regions laid out one after the other).
    text_at: Vec<u64>,
    data_at: Vec<u64>,
    thresholds: Vec<u64>,
    /// Instructions left in the current stretch; its mode; syscall index.
    left: u64,
    privileged: bool,
    first: bool,
    current: usize,
    identity: u32,
    /// Offset into the current code region (user text or the syscall's text).
    pc: u64,
    user_pc: u64,
    /// Next element of the current copy buffer.
    buf: u64,
    /// Data references still owed by the current step.
    owed: u32,
}

fn unit(r: &mut SplitMix64) -> f64 {
    (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl MixState {
    pub(super) fn new(spec: &SyscallMixSpec, alpha: Option<f64>, slots: u64) -> MixState {
        let mut text_at = Vec::new();
        let mut data_at = Vec::new();
        let (mut t, mut d) = (spec.kernel_text_base, spec.kernel_data_base);
        for s in &spec.syscalls {
            text_at.push(t);
            data_at.push(d);
            // Page-align the next region.
            t = t.wrapping_add(s.text.bytes().div_ceil(4096) * 4096);
            d = d.wrapping_add(s.data.bytes().div_ceil(4096) * 4096);
        }
        let total: f64 = spec.syscalls.iter().map(|s| s.weight).sum();
        let mut acc = 0.0;
        let mut thresholds: Vec<u64> = spec
            .syscalls
            .iter()
            .map(|s| {
                acc += s.weight;
                (acc / total * 18_446_744_073_709_551_616.0) as u64
            })
            .collect();
        if let Some(l) = thresholds.last_mut() {
            *l = u64::MAX;
        }
        MixState {
            spec: spec.clone(),
            zipf: alpha.map(|a| Zipf::new(slots, a)),
            text_at,
            data_at,
            thresholds,
            left: 0,
            privileged: true, // the first stretch is a user one (flipped on start)
            first: false,
            current: 0,
            identity: 0,
            pc: 0,
            user_pc: 0,
            buf: 0,
            owed: 0,
        }
    }

    /// Restart at the beginning of a phase run.
    pub(super) fn start_run(&mut self) {
        self.left = 0;
        self.privileged = true;
        self.owed = 0;
        self.user_pc = 0;
    }

    /// Begin the next stretch (user after privileged and vice versa).
    fn next_stretch(&mut self, r: &mut SplitMix64, slots: u64) {
        if self.privileged {
            // A user stretch: geometric with mean user_run, at least 1.
            self.privileged = false;
            let mean = self.spec.user_run as f64;
            let u = unit(r);
            let len = (-(1.0 - u).ln() * mean).round().max(1.0);
            self.left = len.min(1e12) as u64;
            self.pc = self.user_pc;
        } else {
            self.privileged = true;
            self.first = true;
            let u = r.next_u64();
            let j = self
                .thresholds
                .iter()
                .position(|&th| u < th)
                .unwrap_or(self.thresholds.len() - 1);
            let s = &self.spec.syscalls[j];
            let a = r.below(s.args as u64) as u32;
            let mut len = s.length_of(a) as u64;
            if self.spec.interrupt_rate > 0.0 && unit(r) < self.spec.interrupt_rate {
                len += 1 + r.below(self.spec.interrupt_length as u64);
            }
            self.current = j;
            self.identity = s.identity(a);
            self.left = len;
            self.pc = 0;
            self.buf = r.below(slots);
        }
    }

    /// Append `n` records to `buf` (template `t` gives thread and data size).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn generate(
        &mut self,
        n: usize,
        out: &mut Vec<Record>,
        r: &mut SplitMix64,
        t: Record,
        base: u64,
        slots: u64,
        store_below: Option<u64>,
    ) {
        let size = t.size as u64;
        let fetch = self.spec.fetch_bytes as u64;
        let per_fetch = self.spec.data_per_fetch;
        let whole = per_fetch.floor() as u32;
        let frac = per_fetch - whole as f64;
        for _ in 0..n {
            if self.owed > 0 {
                self.owed -= 1;
                let addr = if self.privileged {
                    let s = &self.spec.syscalls[self.current];
                    if s.copy > 0.0 && unit(r) < s.copy {
                        let a = base + size * self.buf;
                        self.buf = if self.buf + 1 >= slots {
                            0
                        } else {
                            self.buf + 1
                        };
                        a
                    } else {
                        self.data_at[self.current] + size * r.below(s.data.bytes() / size)
                    }
                } else {
                    match &self.zipf {
                        Some(z) => base + size * (z.sample(r) - 1),
                        None => base + size * r.below(slots),
                    }
                };
                let kind = match store_below {
                    Some(th) if r.next_u64() < th => Kind::Store,
                    _ => Kind::Load,
                };
                out.push(Record {
                    addr,
                    kind,
                    privileged: self.privileged,
                    icount: 0,
                    syscall: 0,
                    ..t
                });
                continue;
            }
            if self.left == 0 {
                if !self.privileged {
                    self.user_pc = self.pc;
                }
                self.next_stretch(r, slots);
            }
            // One step: an ifetch of up to fetch_bytes / 4 instructions.
            let insns = (fetch / 4).min(self.left);
            self.left -= insns;
            let (region, at) = if self.privileged {
                let s = &self.spec.syscalls[self.current];
                (s.text.bytes(), self.text_at[self.current])
            } else {
                (self.spec.user_text.bytes(), self.spec.user_text_base)
            };
            let addr = at + self.pc % region;
            self.pc = (self.pc + 4 * insns) % region;
            let syscall = if self.first {
                self.first = false;
                self.identity
            } else {
                0
            };
            out.push(Record {
                addr,
                kind: Kind::IFetch,
                size: 4,
                icount: insns as u32,
                privileged: self.privileged,
                syscall,
                ..t
            });
            self.owed = whole + (frac > 0.0 && unit(r) < frac) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oscache::runs::RunTracker;
    use crate::trace::{collect, syscall_number};
    use crate::workload::{Pattern, Workload, WorkloadSpec};
    use std::collections::HashMap;

    const WEB: &str = include_str!("../../../../examples/oscache/workloads/web-server.toml");
    const JVM: &str = include_str!("../../../../examples/oscache/workloads/jvm.toml");
    const COMPUTE: &str = include_str!("../../../../examples/oscache/workloads/compute.toml");

    fn spec(text: &str, references: u64) -> WorkloadSpec {
        let mut s: WorkloadSpec = crate::config::from_toml(text).unwrap();
        s.phases[0].references = references;
        s
    }

    fn records(s: &WorkloadSpec) -> Vec<Record> {
        collect(&mut Workload::new(s).unwrap()).unwrap()
    }

    /// Privileged share of instructions, and the runs.
    fn shape(recs: &[Record]) -> (f64, Vec<crate::oscache::runs::Run>) {
        let mut t = RunTracker::new();
        let (mut all, mut os) = (0u64, 0u64);
        let mut runs = Vec::new();
        for r in recs {
            all += r.icount as u64;
            if r.privileged {
                os += r.icount as u64;
            }
            runs.extend(t.push(r));
        }
        (os as f64 / all as f64, runs)
    }

    #[test]
    fn presets_have_the_papers_privileged_shares_and_figure_2_shape() {
        for (text, lo, hi) in [(WEB, 0.62, 0.72), (JVM, 0.22, 0.30), (COMPUTE, 0.0, 0.005)] {
            let (share, runs) = shape(&records(&spec(text, 1_000_000)));
            assert!((lo..=hi).contains(&share), "{share} not in {lo}..{hi}");
            let short = runs.iter().filter(|r| r.instructions < 25).count();
            let long = runs.iter().filter(|r| r.instructions > 1000).count();
            assert!(short * 3 > runs.len(), "traps are the largest group");
            if lo > 0.1 {
                assert!(
                    long * 50 > runs.len(),
                    "a tail over 1000: {long} of {}",
                    runs.len()
                );
            }
        }
    }

    #[test]
    fn first_record_of_a_run_carries_its_identity_and_same_identity_gives_same_length() {
        let mut s = spec(WEB, 400_000);
        let Pattern::SyscallMix { os, .. } = &mut s.phases[0].pattern else {
            panic!()
        };
        os.interrupt_rate = 0.0;
        let recs = records(&s);
        let mut prev_priv = false;
        for r in &recs {
            let starts = r.privileged && !prev_priv;
            assert_eq!(r.syscall != 0, starts, "{r:?}");
            if starts {
                assert_eq!(r.kind, Kind::IFetch);
                assert!((1..=5).contains(&syscall_number(r.syscall)));
            }
            prev_priv = r.privileged;
        }
        let (_, runs) = shape(&recs);
        let mut seen: HashMap<u32, u64> = HashMap::new();
        for r in &runs {
            let len = *seen.entry(r.syscall).or_insert(r.instructions);
            assert_eq!(len, r.instructions, "syscall {:#x}", r.syscall);
        }
        assert!(seen.len() > 10);
        // With interrupts some runs of one identity are longer.
        let (_, runs) = shape(&records(&spec(WEB, 400_000)));
        let mut by: HashMap<u32, (u64, u64)> = HashMap::new();
        for r in &runs {
            let e = by.entry(r.syscall).or_insert((u64::MAX, 0));
            e.0 = e.0.min(r.instructions);
            e.1 = e.1.max(r.instructions);
        }
        assert!(by.values().any(|(lo, hi)| hi > lo));
    }

    #[test]
    fn deterministic_and_round_trips_through_toml() {
        let s = spec(JVM, 50_000);
        assert_eq!(records(&s), records(&s));
        let text = toml::to_string(&s).unwrap();
        let back: WorkloadSpec = crate::config::from_toml(&text).unwrap();
        assert_eq!(back, s);
        let recs = records(&s);
        assert_eq!(recs.len(), 50_000);
        // Kernel code and data live in their own regions.
        for r in &recs {
            if r.privileged && r.kind == Kind::IFetch {
                assert!(r.addr >= d_kernel_text_base());
            }
            if !r.privileged {
                assert!(r.addr < d_kernel_text_base());
            }
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let bad = |edit: &dyn Fn(&mut SyscallMixSpec), field: &str| {
            let mut s = spec(WEB, 10);
            let Pattern::SyscallMix { os, .. } = &mut s.phases[0].pattern else {
                panic!()
            };
            edit(os);
            let e = s.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
        };
        bad(&|o| o.user_run = 0, "phases[0].os.user_run");
        bad(&|o| o.fetch_bytes = 6, "phases[0].os.fetch_bytes");
        bad(&|o| o.syscalls.clear(), "phases[0].os.syscalls");
        bad(&|o| o.syscalls[1].args = 0, "phases[0].os.syscalls[1].args");
        bad(
            &|o| o.syscalls[0].number = 5000,
            "phases[0].os.syscalls[0].number",
        );
        bad(
            &|o| o.syscalls[2].copy = 1.5,
            "phases[0].os.syscalls[2].copy",
        );
        bad(&|o| o.interrupt_rate = -0.1, "phases[0].os.interrupt_rate");
        let e = crate::config::from_toml::<WorkloadSpec>(
            "[[phases]]\npattern = \"syscall-mix\"\nfootprint = \"1MiB\"\nreferences = 10\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("os table"), "{e}");
        let e = crate::config::from_toml::<WorkloadSpec>(
            "[[phases]]\npattern = \"uniform\"\nfootprint = \"1MiB\"\nreferences = 10\n[phases.os]\nuser_text = \"1KiB\"\nuser_run = 5\nsyscalls = []\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("only pattern = \"syscall-mix\""),
            "{e}"
        );
    }

    #[test]
    fn packing_keeps_number_and_is_never_zero() {
        assert_eq!(pack_syscall(0, 0), 1);
        let w = pack_syscall(1023, u64::MAX);
        assert_eq!(syscall_number(w), 1023);
        assert_eq!(syscall_number(pack_syscall(3, 0xdead_beef_1234)), 3);
        assert_ne!(pack_syscall(3, 1), pack_syscall(3, 2));
    }
}
