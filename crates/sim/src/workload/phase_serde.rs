//! The serde shape of a phase: flat keys, the pattern's parameters beside `pattern` (`pattern =
//! "zipf"` beside `alpha = 0.9`), converted to and from `PhaseSpec` with the checks of
//! `check_phase`.
use super::*;

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
pub(super) struct RawPhase {
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
