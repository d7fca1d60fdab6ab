//! The distribution generator (thesis 4.2.3): installs the pointer chain in a buffer.
//!
//! The buffer is an array of 4-byte indices ("Cachetest forces integer elements to be 4-bytes
//! in size"): the element at slot `γ` holds `φ`, the slot visited next, as an offset in 4-byte
//! slots from the buffer's base (the "mapped index": the translation layer from the logical
//! working set to the buffer's possibly scattered pages). Distributions draw cache-line numbers
//! of the working set; line `ℓ` lives in buffer page `ℓ / lines_per_page` at offset
//! `(ℓ mod lines_per_page) * 64`. Every chain is a closed loop: its last element points back to
//! the first.
//!
//! - `uniform`: a uniformly random cyclic permutation of the lines (Sattolo): every next line is
//!   equally likely among those not yet visited, every line visited once per loop, so the loop
//!   covers exactly the working set (the thesis draws lines independently, which leaves ~1/e of
//!   the lines unvisited and shrinks the effective working set; a permutation keeps the x-axis
//!   exact).
//! - `sequential`: lines in address order (Figure 4.3); the hardware prefetcher follows it.
//! - `strided`: line `k*s mod L` with `s` the smallest stride >= 65 lines (4160 bytes) coprime
//!   with `L`: every step crosses a 4 KiB page, which the stream prefetchers (which work inside a
//!   page) cannot follow.
//! - `zipf`: `L` draws of rank `r` with probability `r^-α / Σ j^-α` (α = 1 by default), rank
//!   `r` at line `r - 1` (hot data contiguous, as `crates/sim`'s workload `zipf`).
//! - `harmonic`: Zipf with α = 1, ranks scattered over the lines by a seeded permutation (as
//!   `crates/sim`'s workload `harmonic`).
//!
//! For zipf and harmonic a line is visited several times per loop; the thesis's hash-set rule
//! places each visit in the next free 4-byte slot of the line (16 per 64-byte line); a draw that
//! lands on a full line is redrawn.

use serde::Serialize;

use crate::buffer::Buffer;
use crate::Error;

pub const LINE: usize = 64;
const SLOTS_PER_LINE: usize = LINE / 4;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Uniform,
    Sequential,
    Strided,
    Zipf,
    Harmonic,
}

impl Pattern {
    pub const ALL: [Pattern; 5] = [
        Pattern::Uniform,
        Pattern::Sequential,
        Pattern::Strided,
        Pattern::Zipf,
        Pattern::Harmonic,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Uniform => "uniform",
            Pattern::Sequential => "sequential",
            Pattern::Strided => "strided",
            Pattern::Zipf => "zipf",
            Pattern::Harmonic => "harmonic",
        }
    }
    pub fn parse(s: &str) -> Result<Pattern, Error> {
        Pattern::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                Error::BadInput(format!(
                    "pattern: unknown {s:?}; allowed: uniform, sequential, strided, zipf, harmonic"
                ))
            })
    }
}

/// SplitMix64: small, seedable, good enough for layouts.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// An installed chain.
#[derive(Debug, Clone, Serialize)]
pub struct Chain {
    /// Slot (4-byte index from the buffer base) of the first element.
    pub start: u32,
    /// Loads per loop.
    pub length: usize,
    /// Distinct lines the loop touches.
    pub lines: usize,
}

/// The visiting order of lines for `pattern` over `lines` lines.
pub fn line_order(pattern: Pattern, lines: usize, alpha: f64, seed: u64) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    match pattern {
        Pattern::Sequential => (0..lines).collect(),
        Pattern::Uniform => {
            // Sattolo's algorithm: a uniformly random single cycle, read from line 0.
            let mut next: Vec<usize> = (0..lines).collect();
            for i in (1..lines).rev() {
                let j = rng.below(i);
                next.swap(i, j);
            }
            let mut order = Vec::with_capacity(lines);
            let mut c = 0;
            for _ in 0..lines {
                order.push(c);
                c = next[c];
            }
            order
        }
        Pattern::Strided => {
            let mut s = 65usize;
            while gcd(s % lines.max(1), lines) != 1 && lines > 1 {
                s += 1;
            }
            (0..lines).map(|k| (k * s) % lines).collect()
        }
        Pattern::Zipf | Pattern::Harmonic => {
            let a = if pattern == Pattern::Harmonic {
                1.0
            } else {
                alpha
            };
            let mut cdf = Vec::with_capacity(lines);
            let mut acc = 0.0;
            for r in 1..=lines {
                acc += (r as f64).powf(-a);
                cdf.push(acc);
            }
            let scatter: Option<Vec<usize>> = (pattern == Pattern::Harmonic).then(|| {
                let mut p: Vec<usize> = (0..lines).collect();
                let mut lr = Rng::new(seed ^ 0x5CA7_7E12);
                for i in (1..lines).rev() {
                    p.swap(i, lr.below(i + 1));
                }
                p
            });
            let mut used = vec![0u8; lines];
            let mut order = Vec::with_capacity(lines);
            let mut free = lines * SLOTS_PER_LINE;
            while order.len() < lines && free > 0 {
                let u = rng.unit() * acc;
                let r = cdf.partition_point(|&c| c < u).min(lines - 1);
                let l = scatter.as_ref().map_or(r, |p| p[r]);
                if (used[l] as usize) < SLOTS_PER_LINE {
                    used[l] += 1;
                    free -= 1;
                    order.push(l);
                }
            }
            order
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Install a chain over the first `working_set` bytes (whole lines) of the buffer.
pub fn install(
    buf: &Buffer,
    working_set: u64,
    pattern: Pattern,
    alpha: f64,
    seed: u64,
) -> Result<Chain, Error> {
    let lines = (working_set as usize) / LINE;
    if lines == 0 {
        return Err(Error::BadInput(format!(
            "working set: {working_set} bytes is less than one 64-byte line"
        )));
    }
    if lines * LINE > buf.bytes() {
        return Err(Error::BadInput(format!(
            "working set: {working_set} bytes exceed the buffer ({} bytes)",
            buf.bytes()
        )));
    }
    if buf.span() / 4 > u32::MAX as usize {
        return Err(Error::BadInput(
            "working set: buffers over 16 GiB cannot be indexed by 4-byte elements".into(),
        ));
    }
    let order = line_order(pattern, lines, alpha, seed);
    let lpp = buf.page_size() / LINE;
    let base = buf.base() as usize;
    let pages = buf.pages();
    let line_slot = |l: usize| -> usize { (pages[l / lpp] + (l % lpp) * LINE - base) / 4 };
    let mut used = vec![0u8; lines];
    let slots: Vec<u32> = order
        .iter()
        .map(|&l| {
            let s = line_slot(l) + used[l] as usize;
            used[l] += 1;
            s as u32
        })
        .collect();
    let p = buf.base() as *mut u32;
    for k in 0..slots.len() {
        let next = slots[(k + 1) % slots.len()];
        // SAFETY: every slot is inside one of the buffer's pages.
        unsafe { p.add(slots[k] as usize).write_volatile(next) };
    }
    Ok(Chain {
        start: slots[0],
        length: slots.len(),
        lines: used.iter().filter(|&&u| u > 0).count(),
    })
}

/// A uniformly random cyclic chain over the 64-byte lines at the given addresses (the probe's
/// chains: lines picked by address, slot 0 of each), indices relative to `base`. Returns the
/// start slot.
///
/// # Safety
/// Every address must be a writable 4-byte-aligned location at or after `base`, within 16 GiB.
pub unsafe fn install_lines(base: *mut u8, addrs: &[usize], seed: u64) -> u32 {
    let order = line_order(Pattern::Uniform, addrs.len(), 1.0, seed);
    let slots: Vec<u32> = order
        .iter()
        .map(|&k| ((addrs[k] - base as usize) / 4) as u32)
        .collect();
    let p = base as *mut u32;
    for k in 0..slots.len() {
        p.add(slots[k] as usize)
            .write_volatile(slots[(k + 1) % slots.len()]);
    }
    slots[0]
}

/// Follow the chain in software; the number of loads until it returns to the start (None if it
/// does not within `limit`).
pub fn walk_length(buf: &Buffer, chain: &Chain, limit: usize) -> Option<usize> {
    let p = buf.base() as *const u32;
    let mut i = chain.start;
    for n in 1..=limit {
        // SAFETY: install wrote only slots inside the buffer.
        i = unsafe { p.add(i as usize).read_volatile() };
        if i == chain.start {
            return Some(n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{AllocOptions, BinGeometry, BufferKind};

    const G: BinGeometry = BinGeometry {
        cache_size: 512 << 10,
        ways: 8,
    };

    #[test]
    fn every_pattern_is_a_closed_loop_over_the_working_set() {
        let b = Buffer::allocate(
            BufferKind::Naive,
            256 << 10,
            G,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        for p in Pattern::ALL {
            let c = install(&b, 200 << 10, p, 1.0, 7).unwrap();
            assert_eq!(c.length, 200 * 16, "{p:?}");
            assert_eq!(walk_length(&b, &c, 1 << 20), Some(c.length), "{p:?}");
            if matches!(p, Pattern::Uniform | Pattern::Sequential | Pattern::Strided) {
                assert_eq!(c.lines, 200 * 16);
            } else {
                assert!(c.lines < 200 * 16);
            }
        }
    }

    #[test]
    fn orders_have_their_shapes() {
        let u = line_order(Pattern::Uniform, 1000, 1.0, 3);
        let mut s = u.clone();
        s.sort();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert_ne!(u, (0..1000).collect::<Vec<_>>());
        let st = line_order(Pattern::Strided, 1000, 1.0, 3);
        let mut s = st.clone();
        s.sort();
        assert_eq!(s, (0..1000).collect::<Vec<_>>());
        assert!(st.windows(2).all(|w| (w[1] + 1000 - w[0]) % 1000 >= 65));
        // Zipf: rank 1 (line 0) is the hottest; harmonic scatters it.
        let z = line_order(Pattern::Zipf, 1000, 1.0, 3);
        let c0 = z.iter().filter(|&&l| l == 0).count();
        assert_eq!(c0, 16, "the hottest line fills all its slots");
        let h = line_order(Pattern::Harmonic, 1000, 1.0, 3);
        assert_eq!(h.len(), 1000);
        assert!(h.iter().filter(|&&l| l == 0).count() < 16);
        // Same seed, same order.
        assert_eq!(line_order(Pattern::Uniform, 1000, 1.0, 3), u);
    }

    #[test]
    fn chain_on_scattered_pages_uses_only_those_pages() {
        let b = Buffer::allocate(
            BufferKind::Naive,
            64 << 10,
            G,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        let c = install(&b, 64 << 10, Pattern::Uniform, 1.0, 1).unwrap();
        let p = b.base() as *const u32;
        let mut i = c.start;
        for _ in 0..c.length {
            let a = b.base() as usize + i as usize * 4;
            assert!(b.pages().iter().any(|&pg| a >= pg && a < pg + 4096));
            i = unsafe { p.add(i as usize).read() };
        }
        assert!(install(&b, 128 << 10, Pattern::Uniform, 1.0, 1).is_err());
        assert!(install(&b, 10, Pattern::Uniform, 1.0, 1)
            .unwrap_err()
            .to_string()
            .contains("line"));
    }
}
