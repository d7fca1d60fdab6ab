//! The generator: a `WorkloadSpec` prepared into one plan per phase, then produced block by block
//! as a `RecordSource`.
use super::*;

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
