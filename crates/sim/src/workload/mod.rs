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

mod layout;
pub mod syscall_mix;
mod zipf;

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

// ---------------------------------------------------------------------------------------------
// Serde shape of a phase: flat keys, pattern parameters beside `pattern`.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum PatternName {
    Uniform,
    Sequential,
    Strided,
    Zipf,
    Harmonic,
    PointerChain,
    Mix,
    SyscallMix,
}

impl PatternName {
    fn as_str(self) -> &'static str {
        match self {
            PatternName::Uniform => "uniform",
            PatternName::Sequential => "sequential",
            PatternName::Strided => "strided",
            PatternName::Zipf => "zipf",
            PatternName::Harmonic => "harmonic",
            PatternName::PointerChain => "pointer-chain",
            PatternName::Mix => "mix",
            PatternName::SyscallMix => "syscall-mix",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    pattern: PatternName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stride: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    footprint: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parts: Option<Vec<RawPart>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    os: Option<SyscallMixSpec>,
    #[serde(default = "default_base")]
    base: u64,
    references: u64,
    #[serde(default)]
    store_fraction: f64,
    #[serde(default = "default_size")]
    size: u16,
    #[serde(default)]
    thread: u32,
    #[serde(default)]
    icount: u32,
}

fn default_weight() -> f64 {
    1.0
}

/// A `mix` part in TOML: `{ pattern = "sequential", footprint = "1MiB", base = ..., weight = 2 }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPart {
    pattern: PatternName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stride: Option<Size>,
    footprint: Size,
    #[serde(default = "default_base")]
    base: u64,
    #[serde(default = "default_weight")]
    weight: f64,
}

/// The pattern a name and its parameters give (not `mix`, which the caller builds).
fn simple_pattern(
    pattern: PatternName,
    alpha: Option<f64>,
    stride: Option<Size>,
) -> Result<Pattern, String> {
    if alpha.is_some() && pattern != PatternName::Zipf {
        return Err(format!(
            "alpha: only pattern = \"zipf\" takes alpha, not \"{}\"",
            pattern.as_str()
        ));
    }
    if stride.is_some() && pattern != PatternName::Strided {
        return Err(format!(
            "stride: only pattern = \"strided\" takes stride, not \"{}\"",
            pattern.as_str()
        ));
    }
    Ok(match pattern {
        PatternName::Uniform => Pattern::Uniform,
        PatternName::Sequential => Pattern::Sequential,
        PatternName::Harmonic => Pattern::Harmonic,
        PatternName::PointerChain => Pattern::PointerChain,
        PatternName::Strided => Pattern::Strided {
            stride: stride.ok_or(
                "stride: pattern = \"strided\" needs stride (bytes, a multiple of size, e.g. \"4KiB\")",
            )?,
        },
        PatternName::Zipf => Pattern::Zipf {
            alpha: alpha.ok_or("alpha: pattern = \"zipf\" needs alpha (a number > 0, e.g. 0.9)")?,
        },
        PatternName::Mix | PatternName::SyscallMix => {
            return Err(
                "pattern: a mix part cannot be a mix or syscall-mix: give uniform, sequential, strided, \
                 zipf, harmonic or pointer-chain"
                    .into(),
            )
        }
    })
}

fn pattern_parts(p: &Pattern) -> (PatternName, Option<f64>, Option<Size>) {
    match p {
        Pattern::Uniform => (PatternName::Uniform, None, None),
        Pattern::Sequential => (PatternName::Sequential, None, None),
        Pattern::Strided { stride } => (PatternName::Strided, None, Some(*stride)),
        Pattern::Zipf { alpha } => (PatternName::Zipf, Some(*alpha), None),
        Pattern::Harmonic => (PatternName::Harmonic, None, None),
        Pattern::PointerChain => (PatternName::PointerChain, None, None),
        Pattern::Mix { .. } => (PatternName::Mix, None, None),
        Pattern::SyscallMix { alpha, .. } => (PatternName::SyscallMix, *alpha, None),
    }
}

impl TryFrom<RawPhase> for PhaseSpec {
    type Error = String;

    fn try_from(r: RawPhase) -> Result<PhaseSpec, String> {
        let (pattern, footprint) = if r.pattern == PatternName::Mix {
            if r.alpha.is_some() || r.stride.is_some() || r.footprint.is_some() {
                return Err(
                    "pattern = \"mix\" takes no alpha, stride or footprint of its own: \
                            give them in each of its parts"
                        .into(),
                );
            }
            let raw = r.parts.ok_or(
                "parts: pattern = \"mix\" needs parts, e.g. [{ pattern = \"sequential\", \
                 footprint = \"1MiB\", weight = 1 }]",
            )?;
            let mut parts = Vec::with_capacity(raw.len());
            let mut total: u64 = 0;
            for (j, q) in raw.into_iter().enumerate() {
                let pattern = simple_pattern(q.pattern, q.alpha, q.stride)
                    .map_err(|e| format!("parts[{j}].{e}"))?;
                total = total.saturating_add(q.footprint.bytes());
                parts.push(MixPart {
                    pattern,
                    footprint: q.footprint,
                    base: q.base,
                    weight: q.weight,
                });
            }
            (Pattern::Mix { parts }, Size(total))
        } else if r.pattern == PatternName::SyscallMix {
            if r.parts.is_some() || r.stride.is_some() {
                return Err(
                    "pattern = \"syscall-mix\" takes no parts or stride: its user data is \
                     uniform over footprint (zipf with alpha), its OS side is the os table"
                        .into(),
                );
            }
            let os = r.os.ok_or(
                "os: pattern = \"syscall-mix\" needs an os table (user_text, user_run, \
                 syscalls = [...]; see docs/oscache.md)",
            )?;
            let footprint = r
                .footprint
                .ok_or("footprint: missing (user data bytes, e.g. \"1MiB\")")?;
            (
                Pattern::SyscallMix {
                    alpha: r.alpha,
                    os: Box::new(os),
                },
                footprint,
            )
        } else {
            if r.os.is_some() {
                return Err(format!(
                    "os: only pattern = \"syscall-mix\" takes an os table, not \"{}\"",
                    r.pattern.as_str()
                ));
            }
            if r.parts.is_some() {
                return Err(format!(
                    "parts: only pattern = \"mix\" takes parts, not \"{}\"",
                    r.pattern.as_str()
                ));
            }
            let footprint = r
                .footprint
                .ok_or("footprint: missing (bytes, e.g. \"1MiB\")")?;
            (simple_pattern(r.pattern, r.alpha, r.stride)?, footprint)
        };
        Ok(PhaseSpec {
            pattern,
            footprint,
            base: r.base,
            references: r.references,
            store_fraction: r.store_fraction,
            size: r.size,
            thread: r.thread,
            icount: r.icount,
        })
    }
}

impl From<PhaseSpec> for RawPhase {
    fn from(p: PhaseSpec) -> RawPhase {
        let (pattern, alpha, stride) = pattern_parts(&p.pattern);
        let (footprint, parts) = match &p.pattern {
            Pattern::Mix { parts } => (
                None,
                Some(
                    parts
                        .iter()
                        .map(|q| {
                            let (pattern, alpha, stride) = pattern_parts(&q.pattern);
                            RawPart {
                                pattern,
                                alpha,
                                stride,
                                footprint: q.footprint,
                                base: q.base,
                                weight: q.weight,
                            }
                        })
                        .collect(),
                ),
            ),
            _ => (Some(p.footprint), None),
        };
        let os = match &p.pattern {
            Pattern::SyscallMix { os, .. } => Some((**os).clone()),
            _ => None,
        };
        RawPhase {
            pattern,
            alpha,
            stride,
            footprint,
            parts,
            os,
            base: p.base,
            references: p.references,
            store_fraction: p.store_fraction,
            size: p.size,
            thread: p.thread,
            icount: p.icount,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The generator.

/// Store or load per reference.
#[derive(Debug, Clone, Copy)]
enum Stores {
    Never,
    Always,
    /// Store when the draw is below this threshold (`store_fraction * 2^64`).
    Below(u64),
}

/// What a phase needs at run time, precomputed once.
#[derive(Debug)]
enum Gen {
    Uniform,
    Sequential,
    /// Slots per step.
    Strided {
        step: u64,
    },
    Zipf(Zipf),
    Harmonic(Zipf, Scatter),
    /// Visit order of the chain's lines, built on the phase's first run.
    PointerChain {
        lines: u64,
        layout_seed: u64,
        order: Option<Vec<u32>>,
    },
    /// The parts, and the cumulative weight thresholds (`u < thresholds[j]` picks part `j` for
    /// a draw `u`; the last is `u64::MAX`).
    Mix {
        parts: Vec<MixGen>,
        thresholds: Vec<u64>,
    },
    SyscallMix(Box<syscall_mix::MixState>),
}

/// One part of a running mix: its generator, slots, base and walk.
#[derive(Debug)]
struct MixGen {
    gen: Gen,
    slots: u64,
    base: u64,
    cursor: Cursor,
}

impl Gen {
    /// The generator of a non-mix `pattern` over `footprint` in elements of `size` bytes.
    fn new(pattern: &Pattern, footprint: Size, size: u64, lseed: u64) -> Gen {
        let slots = footprint.bytes() / size;
        match pattern {
            Pattern::Uniform => Gen::Uniform,
            Pattern::Sequential => Gen::Sequential,
            Pattern::Strided { stride } => Gen::Strided {
                step: stride.bytes() / size,
            },
            Pattern::Zipf { alpha } => Gen::Zipf(Zipf::new(slots, *alpha)),
            Pattern::Harmonic => Gen::Harmonic(
                Zipf::new(slots, 1.0),
                Scatter::new(slots, &mut SplitMix64::new(lseed)),
            ),
            Pattern::PointerChain => Gen::PointerChain {
                lines: footprint.bytes() / CHAIN_LINE,
                layout_seed: lseed,
                order: None,
            },
            Pattern::Mix { parts } => {
                let total: f64 = parts.iter().map(|q| q.weight).sum();
                let mut acc = 0.0;
                let mut thresholds: Vec<u64> = parts
                    .iter()
                    .map(|q| {
                        acc += q.weight;
                        // Saturating cast of the cumulative share of 2^64.
                        (acc / total * 18_446_744_073_709_551_616.0) as u64
                    })
                    .collect();
                if let Some(last) = thresholds.last_mut() {
                    *last = u64::MAX;
                }
                let parts = parts
                    .iter()
                    .enumerate()
                    .map(|(j, q)| MixGen {
                        gen: Gen::new(
                            &q.pattern,
                            q.footprint,
                            size,
                            mix64(lseed ^ GOLDEN_GAMMA.wrapping_mul(j as u64 + 1)),
                        ),
                        slots: q.footprint.bytes() / size,
                        base: q.base,
                        cursor: Cursor::default(),
                    })
                    .collect();
                Gen::Mix { parts, thresholds }
            }
            Pattern::SyscallMix { alpha, os } => {
                Gen::SyscallMix(Box::new(syscall_mix::MixState::new(os, *alpha, slots)))
            }
        }
    }

    /// Get ready for a run of the phase: build a pointer chain on the first run, restart the
    /// walks of a mix's parts.
    fn start_run(&mut self) {
        match self {
            Gen::PointerChain {
                lines,
                layout_seed,
                order,
            } if order.is_none() => {
                *order = Some(cycle_order(*lines, &mut SplitMix64::new(*layout_seed)));
            }
            Gen::Mix { parts, .. } => {
                for q in parts {
                    q.cursor = Cursor::default();
                    q.gen.start_run();
                }
            }
            Gen::SyscallMix(m) => m.start_run(),
            _ => {}
        }
    }

    /// The next address of a non-mix pattern (the one-reference form of `Workload::generate`'s
    /// loops, used by a mix's parts).
    fn next_addr(
        &self,
        cur: &mut Cursor,
        r: &mut SplitMix64,
        base: u64,
        size: u64,
        slots: u64,
    ) -> u64 {
        match self {
            Gen::Uniform => base + size * r.below(slots),
            Gen::Sequential => {
                let s = cur.next;
                cur.next = if s + 1 == slots { 0 } else { s + 1 };
                base + size * s
            }
            Gen::Strided { step } => {
                let s = cur.next;
                cur.next += step;
                if cur.next >= slots {
                    cur.pass += 1;
                    if cur.pass == *step {
                        cur.pass = 0;
                    }
                    cur.next = cur.pass;
                }
                base + size * s
            }
            Gen::Zipf(z) => base + size * (z.sample(r) - 1),
            Gen::Harmonic(z, sc) => base + size * sc.apply(z.sample(r) - 1),
            Gen::PointerChain { order, .. } => {
                let order = order
                    .as_deref()
                    .expect("chain built when the phase started");
                let step = cur.next as usize;
                cur.next = if step + 1 == order.len() {
                    0
                } else {
                    step as u64 + 1
                };
                base + CHAIN_LINE * order[step] as u64
            }
            Gen::Mix { .. } | Gen::SyscallMix(_) => {
                unreachable!("a mix part is never a mix or syscall-mix (validated)")
            }
        }
    }
}

#[derive(Debug)]
struct Plan {
    gen: Gen,
    slots: u64,
    base: u64,
    size: u64,
    references: u64,
    template: Record,
    stores: Stores,
}

/// Where the current phase run's walk is.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    /// Next slot (sequential, strided) or step along the chain (pointer-chain).
    next: u64,
    /// Current pass of a strided walk.
    pass: u64,
}

/// The layout seed of phase `index`: independent of the reference stream.
fn layout_seed(seed: u64, index: usize) -> u64 {
    mix64(seed ^ mix64(GOLDEN_GAMMA.wrapping_mul(index as u64 + 1) ^ 0x6c61_796f_7574))
}

/// A running synthetic workload; a `RecordSource`.
#[derive(Debug)]
pub struct Workload {
    plans: Vec<Plan>,
    /// Phase runs in total (`phases * repeat`) and started so far.
    runs: u64,
    started: u64,
    /// References left in the current phase run.
    left: u64,
    current: usize,
    cursor: Cursor,
    rng: SplitMix64,
    produced: u64,
    total: u64,
}

impl Workload {
    /// Validate `spec` and prepare the generator (pointer chains are built when first run).
    pub fn new(spec: &WorkloadSpec) -> Result<Workload, ConfigError> {
        let total = spec.check()?;
        let plans = spec
            .phases
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let size = p.size as u64;
                let slots = p.footprint.bytes() / size;
                let gen = Gen::new(&p.pattern, p.footprint, size, layout_seed(spec.seed, i));
                let stores = if p.store_fraction <= 0.0 {
                    Stores::Never
                } else if p.store_fraction >= 1.0 {
                    Stores::Always
                } else {
                    // Saturating cast; p < 1 so this is below 2^64 up to rounding.
                    Stores::Below((p.store_fraction * 18_446_744_073_709_551_616.0) as u64)
                };
                Plan {
                    gen,
                    slots,
                    base: p.base,
                    size,
                    references: p.references,
                    template: Record {
                        addr: 0,
                        thread: p.thread,
                        icount: p.icount,
                        size: p.size,
                        kind: Kind::Load,
                        privileged: false,
                        syscall: 0,
                    },
                    stores,
                }
            })
            .collect::<Vec<_>>();
        Ok(Workload {
            runs: plans.len() as u64 * spec.repeat as u64,
            plans,
            started: 0,
            left: 0,
            current: 0,
            cursor: Cursor::default(),
            rng: SplitMix64::new(spec.seed),
            produced: 0,
            total,
        })
    }

    /// Records the whole workload produces.
    pub fn total_records(&self) -> u64 {
        self.total
    }

    /// Start the next phase run; false when all have run.
    fn start_next_run(&mut self) -> bool {
        if self.started == self.runs {
            return false;
        }
        self.current = (self.started % self.plans.len() as u64) as usize;
        self.started += 1;
        let plan = &mut self.plans[self.current];
        self.left = plan.references;
        self.cursor = Cursor::default();
        plan.gen.start_run();
        true
    }

    /// Append `n` records of the current phase run to `buf`.
    fn generate(&mut self, n: usize, buf: &mut Vec<Record>) {
        if matches!(self.plans[self.current].gen, Gen::Mix { .. }) {
            return self.generate_mix(n, buf);
        }
        if matches!(self.plans[self.current].gen, Gen::SyscallMix(_)) {
            let plan = &mut self.plans[self.current];
            let store_below = match plan.stores {
                Stores::Never => None,
                Stores::Always => Some(u64::MAX),
                Stores::Below(th) => Some(th),
            };
            let (t, base, slots) = (plan.template, plan.base, plan.slots);
            let Gen::SyscallMix(m) = &mut plan.gen else {
                unreachable!("checked above")
            };
            return m.generate(n, buf, &mut self.rng, t, base, slots, store_below);
        }
        let plan = &self.plans[self.current];
        // Work on local copies so the generator state stays in registers in the hot loop.
        let mut rng_local = self.rng.clone();
        let mut cur_local = self.cursor;
        let rng = &mut rng_local;
        let cur = &mut cur_local;
        let (base, size, slots) = (plan.base, plan.size, plan.slots);
        let (t, stores) = (plan.template, plan.stores);
        match &plan.gen {
            Gen::Uniform => fill(buf, n, rng, t, stores, |r| base + size * r.below(slots)),
            Gen::Sequential => fill(buf, n, rng, t, stores, |_| {
                let s = cur.next;
                cur.next = if s + 1 == slots { 0 } else { s + 1 };
                base + size * s
            }),
            Gen::Strided { step } => {
                let step = *step;
                fill(buf, n, rng, t, stores, |_| {
                    let s = cur.next;
                    cur.next += step;
                    if cur.next >= slots {
                        cur.pass += 1;
                        if cur.pass == step {
                            cur.pass = 0;
                        }
                        cur.next = cur.pass;
                    }
                    base + size * s
                })
            }
            Gen::Zipf(z) => fill(buf, n, rng, t, stores, |r| base + size * (z.sample(r) - 1)),
            Gen::Harmonic(z, sc) => fill(buf, n, rng, t, stores, |r| {
                base + size * sc.apply(z.sample(r) - 1)
            }),
            Gen::Mix { .. } => unreachable!("generate_mix"),
            Gen::SyscallMix(_) => unreachable!("generated above"),
            Gen::PointerChain { order, .. } => {
                let order = order
                    .as_deref()
                    .expect("chain built when the phase started");
                fill(buf, n, rng, t, stores, |_| {
                    let step = cur.next as usize;
                    cur.next = if step + 1 == order.len() {
                        0
                    } else {
                        step as u64 + 1
                    };
                    base + CHAIN_LINE * order[step] as u64
                })
            }
        }
        self.rng = rng_local;
        self.cursor = cur_local;
    }

    /// `generate` for a mix: per reference one draw picks the part (none with a single part),
    /// then the part draws its address, then the store coin.
    fn generate_mix(&mut self, n: usize, buf: &mut Vec<Record>) {
        let plan = &mut self.plans[self.current];
        let (size, t, stores) = (plan.size, plan.template, plan.stores);
        let Gen::Mix { parts, thresholds } = &mut plan.gen else {
            unreachable!("checked by generate")
        };
        let rng = &mut self.rng;
        let single = parts.len() == 1;
        for _ in 0..n {
            let j = if single {
                0
            } else {
                let u = rng.next_u64();
                thresholds
                    .iter()
                    .position(|&th| u < th)
                    .unwrap_or(parts.len() - 1)
            };
            let q = &mut parts[j];
            let addr = q.gen.next_addr(&mut q.cursor, rng, q.base, size, q.slots);
            let kind = match stores {
                Stores::Never => Kind::Load,
                Stores::Always => Kind::Store,
                Stores::Below(th) => {
                    if rng.next_u64() < th {
                        Kind::Store
                    } else {
                        Kind::Load
                    }
                }
            };
            buf.push(Record { addr, kind, ..t });
        }
    }
}

/// Append `n` records with addresses from `addr` and kinds from `stores`. Monomorphised per
/// pattern and store mode so the loop is a straight `extend` over a counted range.
#[inline(always)]
fn fill<F: FnMut(&mut SplitMix64) -> u64>(
    buf: &mut Vec<Record>,
    n: usize,
    rng: &mut SplitMix64,
    t: Record,
    stores: Stores,
    mut addr: F,
) {
    match stores {
        Stores::Never => buf.extend((0..n).map(|_| Record {
            addr: addr(rng),
            ..t
        })),
        Stores::Always => buf.extend((0..n).map(|_| Record {
            addr: addr(rng),
            kind: Kind::Store,
            ..t
        })),
        Stores::Below(th) => buf.extend((0..n).map(|_| {
            let a = addr(rng);
            let kind = if rng.next_u64() < th {
                Kind::Store
            } else {
                Kind::Load
            };
            Record { addr: a, kind, ..t }
        })),
    }
}

impl RecordSource for Workload {
    fn next_block(&mut self, buf: &mut Vec<Record>) -> Result<bool, TraceError> {
        buf.clear();
        buf.reserve(BLOCK_RECORDS);
        while buf.len() < BLOCK_RECORDS {
            if self.left == 0 && !self.start_next_run() {
                break;
            }
            let n = self.left.min((BLOCK_RECORDS - buf.len()) as u64);
            self.generate(n as usize, buf);
            self.left -= n;
            self.produced += n;
        }
        Ok(!buf.is_empty())
    }

    fn progress(&self) -> Progress {
        Progress {
            records: self.produced,
            bytes: 0,
            total_bytes: None,
            total_records: Some(self.total),
        }
    }
}
