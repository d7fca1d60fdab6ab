/*!
Seeded synthetic workloads: memory-reference generators that feed a simulation as a
`RecordSource` (block by block, no file), shaped like the access distributions of the Cachetest
benchmark (thesis section 4.2.3, "Distribution Generator") plus strided walks and phases.

A `WorkloadSpec` is a seed, a list of phases and a repeat count. Each `PhaseSpec` names a pattern
over a footprint of `footprint / size` element slots at `base + i * size` and a number of
references. In TOML:

```toml
seed = 1
repeat = 2                     # the whole phase list, run twice (default 1)

[[phases]]
pattern = "zipf"               # uniform | sequential | strided | zipf | harmonic | pointer-chain | mix | syscall-mix
alpha = 0.9                    # zipf only
footprint = "64MiB"            # bytes, or a string with a binary unit
references = 5_000_000
store_fraction = 0.1           # probability a reference is a store (default 0)
size = 8                       # bytes per reference = element size (default 8)
base = 0x200000000             # first byte of the footprint (default 0x2_0000_0000)
thread = 0                     # record thread id (default 0)
icount = 0                     # instruction-count delta per record (default 0)

[[phases]]
pattern = "strided"
stride = "4KiB"                # strided only: a multiple of size, at most the footprint
footprint = "1MiB"
references = 1_000_000
```

Patterns (slots `n = floor(footprint / size)`; address = `base + size * slot`):
- `uniform`: slot uniform in `0..n` by `SplitMix64::below` (Lemire multiply-shift), one draw per
  reference. For `n = 2^k` that is exactly `z >> (64 - k)`, so the ANCHORS.md reference traces
  (splitmix64 seed 1, `z >> 41` over 64 MiB; seed 2, `z >> 45` over 4 MiB) come out bit for bit.
  Thesis 4.2.3: "each cache line sized block of memory is equally likely to be accessed next"
  (Cachetest draws lines; here the unit is the element, so `size = 64` gives its line version).
- `sequential`: slot `i mod n` for the phase's i-th reference: wraps at the footprint. (The
  ANCHORS sequential trace, `base + 8 i` over 5 M references, needs `footprint >= 40 MB`, e.g.
  `"64MiB"`.) Thesis 4.2.3: "a sequential accesses pattern touches each cache line exactly once"
  per pass.
- `strided`: with `k = stride / size` slots per step, pass `p` (0-based, `p < k`) visits slots
  `p, p + k, p + 2k, ... < n`; after the last pass it starts again at pass 0. That is
  `i * stride mod footprint` with a rotation of one element per wrap, so `k` passes cover every
  slot (and every line) exactly once; a page stride first touches offset 0 of every page, then
  offset `size` of every page, and so on.
- `zipf`: rank `r` in `1..=n` with probability `r^-alpha / sum_j j^-alpha` (exact rejection-
  inversion sampler, `zipf.rs`), slot = `r - 1`: the identity rank-to-slot map keeps hot data
  contiguous from `base` (the hottest element is at `base`), as hot regions are in ROCS-style and
  Cachetest-style experiments. Thesis 4.2.3 names "a Zipf distribution generator" without
  further detail; this is Zipf's law over all element slots.
- `harmonic`: thesis 4.2.3 lists "a random harmonic series generator" but does not define it
  ("omitted for the remainder of this discussion"). Here it is rank `r` with probability
  `(1/r) / H_n` (the terms of the harmonic series normalised by the harmonic number `H_n`, i.e.
  Zipf with alpha = 1) with ranks *scattered* over the slots by a fixed seeded bijection
  (`layout.rs`), so hot elements sit at random places in the footprint rather than contiguously.
  For the contiguous version use `pattern = "zipf", alpha = 1.0`.
- `pointer-chain`: one uniformly random cyclic permutation (Sattolo's distribution) of the
  footprint's 64-byte lines, followed from line 0: each reference is a load of `size` bytes at
  the start of the current line, and the next reference goes to the line it points to. Every
  line is visited exactly once per cycle of `lines` references and the chain returns to line 0
  ("Every access distribution must use the first array field as the final memory access, to
  create a circular access chain", thesis 4.2.3). The chain is built when the phase first runs and kept as its visit
  order (4 bytes per line, `layout.rs`). References are loads, so `store_fraction` must be 0,
  and `size` at most 64.

- `mix`: several of the patterns above interleaved within one phase (and one thread), each
  over its own footprint, as art interleaves streaming arrays with a reused one (ROCS section
  3.2.2). The phase takes `parts` instead of `footprint`/`alpha`/`stride`; each part is
  `{ pattern, footprint, base (default 0x2_0000_0000), weight (default 1), alpha | stride }`
  and the phase's `size`, `store_fraction`, `thread` and `icount` apply to all of them:
  ```text
  [[phases]]
  pattern = "mix"
  references = 2_000_000
  parts = [
    { pattern = "sequential", footprint = "2MiB", base = 0x100000000, weight = 2 },
    { pattern = "uniform", footprint = "384KiB", base = 0x200000000, weight = 3 },
  ]
  ```
  Per reference one draw `u` of the reference stream picks part `j`, the first whose
  cumulative weight share exceeds `u / 2^64` (no draw with a single part, which is then the
  plain pattern), then the part draws its address as its pattern does, then the store coin.
  Each part keeps its own walk (a sequential part continues where it left off, whatever the
  other parts did in between); all restart at the phase's next run. A part's layout (chain,
  scatter) is seeded by `(seed, phase index, part index)`. A mix cannot nest a mix.
  `footprint` of a mix phase, as the API reports it, is the sum of its parts'.

- `syscall-mix`: user computation (ifetches from a user code loop, data uniform over the
  footprint or zipf with `alpha`) interrupted by privileged runs of system calls, each with a
  run length set by its number and argument and a kernel code and data footprint of its own
  (Nellans et al. section 3); the OS side is an `os` table. `syscall_mix.rs` defines it and the
  trace contract (the first record of a privileged run carries `Record::syscall`).

Randomness and phases (DESIGN.md principle 3):
- One `SplitMix64::new(seed)` *reference stream* serves every per-reference draw (uniform slots,
  zipf/harmonic ranks, the store coin) across all phases and repetitions: it continues, it is
  never reseeded. Per reference the address draws come first, then, only if
  `0 < store_fraction < 1`, one more draw `z < store_fraction * 2^64` makes it a store (with 0 or
  1 no draw is spent, so a load-only phase consumes exactly its address draws).
- *Layouts* (the pointer-chain permutation, the harmonic scatter) come from a separate generator
  seeded by `(seed, phase index)`, so they do not shift the reference stream, and a repeated
  phase walks the same structure again.
- Phases run in list order, the whole list `repeat` times. Every run of a phase starts its walk
  afresh (sequential and strided at slot 0, pointer-chain at line 0); random patterns simply
  keep drawing from the continuing stream.
- `next_block` fills blocks of `BLOCK_RECORDS` across phase boundaries; only the last block is
  short.

Validation (`WorkloadSpec::validate`, also run by `Workload::new`) reports a `ConfigError` whose
field is a path such as `phases[1].alpha`, with the allowed range in the message. A phase with
zero references is rejected (it would do nothing; remove it instead), as are `repeat = 0`, an
empty phase list, and any unknown key when parsing.
*/

mod generator;
mod layout;
mod phase_serde;
pub mod syscall_mix;
mod zipf;

pub use generator::Workload;
use phase_serde::RawPhase;
pub use syscall_mix::{SyscallMixSpec, SyscallSpec};

#[cfg(test)]
mod tests;

use crate::config::Size;
use crate::error::{ConfigError, TraceError};
use crate::rng::{mix64, SplitMix64, GOLDEN_GAMMA};
use crate::trace::{Kind, Progress, Record, RecordSource, BLOCK_RECORDS};
use layout::{cycle_order, Scatter};
use serde::{Deserialize, Serialize};
use zipf::Zipf;

/// The exact zipf sampler (ranks `1..=n`, probability proportional to `r^-alpha`) for other
/// modules' synthetic traces (`analysis::reference`).
pub(crate) fn zipf_sampler(n: u64, alpha: f64) -> Zipf {
    Zipf::new(n, alpha)
}

/// Line granularity of the `pointer-chain` pattern (DESIGN.md default line size).
pub const CHAIN_LINE: u64 = 64;

/// Default first byte of a phase's footprint (the ANCHORS.md traces' base).
pub const DEFAULT_BASE: u64 = 0x2_0000_0000;

fn default_base() -> u64 {
    DEFAULT_BASE
}
fn default_size() -> u16 {
    8
}
fn one() -> u32 {
    1
}

/// A synthetic workload: a seed, phases run in order, and how often to run the whole list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Seeds the reference stream and the layouts.
    #[serde(default)]
    pub seed: u64,
    pub phases: Vec<PhaseSpec>,
    /// Runs of the whole phase list (at least 1); the reference stream continues across runs.
    #[serde(default = "one")]
    pub repeat: u32,
}

/// The access pattern of one phase (see the module comment for exact definitions).
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    Uniform,
    Sequential,
    /// Walk the footprint `stride` bytes at a time, rotating by one element per pass.
    Strided {
        stride: Size,
    },
    /// Rank r with probability proportional to r^-alpha; rank r at slot r - 1.
    Zipf {
        alpha: f64,
    },
    /// Rank r with probability (1/r)/H_n, ranks scattered over the slots by a seeded bijection.
    Harmonic,
    /// A random single-cycle chain over the footprint's 64-byte lines, followed from line 0.
    PointerChain,
    /// Sub-patterns over their own footprints, interleaved reference by reference: each
    /// reference picks a part with probability proportional to its weight.
    Mix {
        parts: Vec<MixPart>,
    },
    /// User computation interrupted by privileged runs (`syscall_mix.rs`): user data uniform
    /// over the footprint, or zipf with `alpha`; the OS side in `os`.
    SyscallMix {
        alpha: Option<f64>,
        os: Box<SyscallMixSpec>,
    },
}

/// One part of a `mix` phase: a (non-mix) pattern over its own footprint, with a weight.
#[derive(Debug, Clone, PartialEq)]
pub struct MixPart {
    pub pattern: Pattern,
    pub footprint: Size,
    pub base: u64,
    /// Relative share of the phase's references (> 0).
    pub weight: f64,
}

impl Pattern {
    /// The pattern's name in configs.
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Uniform => "uniform",
            Pattern::Sequential => "sequential",
            Pattern::Strided { .. } => "strided",
            Pattern::Zipf { .. } => "zipf",
            Pattern::Harmonic => "harmonic",
            Pattern::PointerChain => "pointer-chain",
            Pattern::Mix { .. } => "mix",
            Pattern::SyscallMix { .. } => "syscall-mix",
        }
    }
}

/// One phase: a pattern over a footprint for a number of references.
///
/// Serialised flat: `pattern = "zipf"` beside `alpha = 0.9` (or `stride = ...` for `strided`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPhase", into = "RawPhase")]
pub struct PhaseSpec {
    pub pattern: Pattern,
    /// Bytes covered; `footprint / size` element slots at `base + i * size`.
    pub footprint: Size,
    /// First byte of the footprint (default `0x2_0000_0000`).
    pub base: u64,
    /// References in one run of this phase (at least 1).
    pub references: u64,
    /// Probability in `[0, 1]` that a reference is a store (default 0).
    pub store_fraction: f64,
    /// Bytes per reference, the element size (default 8).
    pub size: u16,
    /// Thread id written into the records (default 0).
    pub thread: u32,
    /// Instruction-count delta written into every record (default 0).
    pub icount: u32,
}

impl PhaseSpec {
    /// A phase with every optional field at its default.
    pub fn new(pattern: Pattern, footprint: Size, references: u64) -> PhaseSpec {
        PhaseSpec {
            pattern,
            footprint,
            base: DEFAULT_BASE,
            references,
            store_fraction: 0.0,
            size: default_size(),
            thread: 0,
            icount: 0,
        }
    }
}

impl WorkloadSpec {
    /// Instructions one generated record counts at least in a whole-system run: 1, so a
    /// generated reference stands for one instruction unless its phase's `icount` says more;
    /// 0 when every phase is `syscall-mix`, whose records carry their own counts as a trace's
    /// do (the fetch the step's instructions, each data record 0; `syscall_mix.rs`). A spec
    /// mixing syscall-mix with other phases keeps 1 (its data records then count one each).
    pub fn instruction_floor(&self) -> u64 {
        let all_counted = self
            .phases
            .iter()
            .all(|p| matches!(p.pattern, Pattern::SyscallMix { .. }));
        u64::from(!all_counted)
    }

    /// One phase with defaults, run once.
    pub fn single(pattern: Pattern, footprint: Size, references: u64, seed: u64) -> WorkloadSpec {
        WorkloadSpec {
            seed,
            phases: vec![PhaseSpec::new(pattern, footprint, references)],
            repeat: 1,
        }
    }

    /// Check every field; errors name the field path (`phases[0].footprint`) and what is allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check().map(|_| ())
    }

    /// Validate and return the total number of records.
    fn check(&self) -> Result<u64, ConfigError> {
        if self.phases.is_empty() {
            return Err(ConfigError::new(
                "phases",
                "the list is empty: give at least one phase",
            ));
        }
        if self.repeat == 0 {
            return Err(ConfigError::new(
                "repeat",
                "0 is not allowed: repeat is how many times the phase list runs (at least 1)",
            ));
        }
        let mut per_run: u64 = 0;
        for (i, p) in self.phases.iter().enumerate() {
            check_phase(i, p)?;
            per_run = per_run.checked_add(p.references).ok_or_else(too_many)?;
        }
        per_run.checked_mul(self.repeat as u64).ok_or_else(too_many)
    }
}

fn too_many() -> ConfigError {
    ConfigError::new(
        "phases",
        "the total number of references (times repeat) overflows 2^64",
    )
}

fn check_phase(i: usize, p: &PhaseSpec) -> Result<(), ConfigError> {
    check_at(&format!("phases[{i}]"), p)
}

/// Check phase (or mix part, with the phase's other fields) `p`; fields are named `{at}.name`.
fn check_at(at: &str, p: &PhaseSpec) -> Result<(), ConfigError> {
    let field = |name: &str| format!("{at}.{name}");
    if matches!(&p.pattern, Pattern::Mix { parts } if parts.is_empty()) {
        return Err(ConfigError::new(
            field("parts"),
            "the list is empty: a mix needs at least one part",
        ));
    }
    let size = p.size as u64;
    let footprint = p.footprint.bytes();
    if size == 0 {
        return Err(ConfigError::new(
            field("size"),
            "0 is not allowed: size is the bytes per reference (element size), 1..=65535",
        ));
    }
    if footprint < size {
        return Err(ConfigError::new(
            field("footprint"),
            format!(
                "{} is smaller than one element of size {size} bytes: give at least {size} bytes",
                p.footprint
            ),
        ));
    }
    if p.base.checked_add(footprint).is_none() {
        return Err(ConfigError::new(
            field("footprint"),
            format!(
                "base {:#x} + footprint {} overflows the 64-bit address space",
                p.base, p.footprint
            ),
        ));
    }
    if p.references == 0 {
        return Err(ConfigError::new(
            field("references"),
            "0 is not allowed: a phase needs at least 1 reference (remove the phase instead)",
        ));
    }
    if !(0.0..=1.0).contains(&p.store_fraction) {
        return Err(ConfigError::new(
            field("store_fraction"),
            format!(
                "{} is outside [0, 1]: it is the probability that a reference is a store",
                p.store_fraction
            ),
        ));
    }
    match &p.pattern {
        Pattern::Uniform | Pattern::Sequential | Pattern::Harmonic => {}
        Pattern::Strided { stride } => {
            let s = stride.bytes();
            if s == 0 || s > footprint || s % size != 0 {
                return Err(ConfigError::new(
                    field("stride"),
                    format!(
                        "{stride} is not allowed: the stride must be a positive multiple of size \
                         ({size} bytes) and at most the footprint ({})",
                        p.footprint
                    ),
                ));
            }
        }
        Pattern::Zipf { alpha } => {
            if !(alpha.is_finite() && *alpha > 0.0) {
                return Err(ConfigError::new(
                    field("alpha"),
                    format!(
                        "{alpha} is not allowed: zipf needs a finite alpha > 0 (e.g. 0.9; near 0 \
                         it approaches uniform, larger values are more skewed)"
                    ),
                ));
            }
        }
        Pattern::PointerChain => {
            let lines = footprint / CHAIN_LINE;
            if lines == 0 || lines > 1 << 32 {
                return Err(ConfigError::new(
                    field("footprint"),
                    format!(
                        "{} is not allowed for pointer-chain: it needs 1 to 2^32 lines of \
                         {CHAIN_LINE} bytes (64 B to 256 GiB)",
                        p.footprint
                    ),
                ));
            }
            if size > CHAIN_LINE {
                return Err(ConfigError::new(
                    field("size"),
                    format!("{size} is not allowed for pointer-chain: at most {CHAIN_LINE} bytes (one line)"),
                ));
            }
            if p.store_fraction != 0.0 {
                return Err(ConfigError::new(
                    field("store_fraction"),
                    "pointer-chain references are loads of the next pointer: store_fraction must be 0",
                ));
            }
        }
        Pattern::SyscallMix { alpha, os } => {
            if let Some(alpha) = alpha {
                if !(alpha.is_finite() && *alpha > 0.0) {
                    return Err(ConfigError::new(
                        field("alpha"),
                        format!("{alpha} is not allowed: a finite alpha > 0 (zipf user data)"),
                    ));
                }
            }
            os.check(&field("os"), footprint, size)?;
        }
        Pattern::Mix { parts } => {
            for (j, part) in parts.iter().enumerate() {
                let at = format!("{at}.parts[{j}]");
                if matches!(
                    part.pattern,
                    Pattern::Mix { .. } | Pattern::SyscallMix { .. }
                ) {
                    return Err(ConfigError::new(
                        format!("{at}.pattern"),
                        "a mix part cannot be a mix itself: give uniform, sequential, strided, \
                         zipf, harmonic or pointer-chain",
                    ));
                }
                if !(part.weight.is_finite() && part.weight > 0.0) {
                    return Err(ConfigError::new(
                        format!("{at}.weight"),
                        format!(
                            "{} is not allowed: a weight is a finite number > 0 (the part's \
                             relative share of the references)",
                            part.weight
                        ),
                    ));
                }
                let sub = PhaseSpec {
                    pattern: part.pattern.clone(),
                    footprint: part.footprint,
                    base: part.base,
                    ..p.clone()
                };
                check_at(&at, &sub)?;
            }
        }
    }
    Ok(())
}
