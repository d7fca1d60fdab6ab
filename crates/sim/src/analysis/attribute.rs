/*!
Attribution (`cachecolor annotate`): run a trace with PCs (native version 3) through a cache
hierarchy and tally, per instruction and per data page, where each reference was served.
Python (`cachecolor.annotate`) turns the tallies into misses per level along each reference's
path, and resolves PCs to functions and source lines.

Why histograms of "served by" rather than per-level miss counts: a reference misses every level
of its path above the one that served it, and which levels are on its path depends on its kind
(split L1I/L1D, `serves`). The served level alone, kept per (PC, class), says all of it and
stays independent of the hierarchy's shape.
*/
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::cache::hierarchy::SERVED_BY_MEMORY;
use crate::cache::prefetch::PrefetcherKind;
use crate::cache::{Hierarchy, Inclusion, ReplacementKind, Serves};
use crate::error::TraceError;
use crate::trace::{pipelined_with, Kind, Progress, Record, RecordSource, BLOCK_RECORDS};

/// The class of a reference in the tallies, as cachegrind splits them: 0 data read (load),
/// 1 data write (store, and modify, which cachegrind counts as one write access), 2 ifetch.
#[inline]
pub fn class(kind: Kind) -> u8 {
    match kind {
        Kind::Load => 0,
        Kind::Store | Kind::Modify => 1,
        Kind::IFetch => 2,
    }
}

/// Rows keyed by (key, class), each `slots` counters (one per level, then memory).
///
/// Every record of the trace adds to a row (123 M additions for a run of 98 M instructions), so
/// the lookup is most of attribution's own cost: a direct-mapped memo of recent keys answers
/// almost all of them (a program's hot PCs and data pages are few), and the map behind it
/// hashes with one multiplication (`MulHash`) instead of SipHash, whose resistance to chosen
/// keys a tally of one's own trace does not need.
pub struct Tally {
    slots: usize,
    index: HashMap<(u64, u8), usize, BuildHasherDefault<MulHash>>,
    memo: Vec<(u64, u8, usize)>,
    /// The key of each row, in order of first appearance.
    pub keys: Vec<u64>,
    /// The class of each row.
    pub classes: Vec<u8>,
    /// `slots` counters per row, row after row.
    pub counts: Vec<u64>,
}

/// Entries of `Tally`'s memo (a power of two).
const MEMO: usize = 4096;

/// A hash by one multiplication per word (by 2^64 / golden ratio, as Fibonacci hashing), its
/// well-mixed high bits rotated down to where the map takes its bucket (as rustc's FxHasher).
#[derive(Default)]
pub struct MulHash(u64);

impl Hasher for MulHash {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, b: u8) {
        self.write_u64(u64::from(b));
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = (self.0 ^ key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Tally {
    /// An empty tally of rows of `slots` counters.
    pub fn new(slots: usize) -> Self {
        Tally {
            slots,
            index: HashMap::default(),
            // No reference has class 3: an empty entry.
            memo: vec![(0, 3, 0); MEMO],
            keys: Vec::new(),
            classes: Vec::new(),
            counts: Vec::new(),
        }
    }

    /// Count one reference of `class` under `key`, served at `slot`. The memo's hit is inlined
    /// into the caller's loop; a miss (a key's first reference, or one the memo lost to another
    /// key) goes to the map out of line, so the loop keeps its registers.
    #[inline(always)]
    pub fn add(&mut self, key: u64, class: u8, slot: usize) {
        let m = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize ^ class as usize;
        let e = self.memo[m & (MEMO - 1)];
        let row = if e.0 == key && e.1 == class {
            e.2
        } else {
            self.row_of(key, class, m)
        };
        self.counts[row * self.slots + slot] += 1;
    }

    /// The row of (`key`, `class`), created at its first reference, and remembered in the
    /// memo's entry `m`.
    #[cold]
    #[inline(never)]
    fn row_of(&mut self, key: u64, class: u8, m: usize) -> usize {
        let next = self.keys.len();
        let row = *self.index.entry((key, class)).or_insert(next);
        if row == next {
            self.keys.push(key);
            self.classes.push(class);
            self.counts.resize(self.counts.len() + self.slots, 0);
        }
        self.memo[m & (MEMO - 1)] = (key, class, row);
        row
    }
}

/// What `attribute` returns: the tallies per (PC, class) and per (4 KiB data page, class), each
/// row `levels + 1` counters (served by level 0, 1, ... of the hierarchy, then memory).
pub struct Attribution {
    pub pcs: Tally,
    pub pages: Tally,
    pub levels: usize,
    pub records: u64,
    /// Data records whose PC is 0 (unknown).
    pub unknown_pc: u64,
}

/// The level that serves an ifetch on the line of the previous ifetch, when `h` makes every
/// such fetch a first-level hit that changes nothing any later reference sees; `None` when it
/// may not.
///
/// Why it holds under these conditions: after a fetch of a line (not spanning two), the
/// instruction path's first level holds it as its set's most recent line. On one core, only
/// instruction fetches visit that cache when it serves instructions alone; a data access fills
/// and evicts only on the data path and the levels below, and a non-inclusive hierarchy sends
/// no back-invalidation up. With no prefetcher nothing else fills it. So the next fetch of the
/// same line hits there, and under LRU a hit on the most recent line leaves the order as it
/// was: simulating it changes only counters, which attribution does not read. Most of a
/// captured program's references are such fetches (79% of the annotate benchmark's), so
/// attribution counts them without handing them to the hierarchy.
pub fn repeated_fetch_level(h: &Hierarchy) -> Option<usize> {
    let c = h.config();
    let prefetching = h.prefetch_enabled()
        && c.levels
            .iter()
            .any(|l| l.prefetcher != PrefetcherKind::None);
    if c.cores != 1 || c.inclusion != Inclusion::NonInclusive || prefetching {
        return None;
    }
    let first = c.levels.iter().position(|l| l.serves != Serves::Data)?;
    let l1 = &c.levels[first];
    (l1.serves == Serves::Instruction && l1.policy == ReplacementKind::Lru).then_some(first)
}

/// Tally one record served at `slot`: under its PC, and (data only: class 2 is an instruction
/// fetch) under its 4 KiB page, counting data references whose PC is unknown (0).
#[inline(always)]
fn tally_one(
    pcs: &mut Tally,
    pages: &mut Tally,
    unknown: &mut u64,
    rec: &Record,
    pc: u64,
    slot: usize,
) {
    let c = class(rec.kind);
    pcs.add(pc, c, slot);
    if c != 2 {
        pages.add(rec.addr >> 12, c, slot);
        *unknown += (pc == 0) as u64;
    }
}

/// Run every record of `src` (which must give PCs: `block_pcs`) through `h` and tally where
/// each was served. The source decodes its next block on a helper thread while this one
/// simulates and tallies the previous (`trace::pipelined_with`: blocks arrive in order, so the
/// tallies are those of a serial run). Fetches of the line the previous fetch fetched are
/// counted as first-level hits without the hierarchy when `repeated_fetch_level` says that is
/// exact. `on_block` is called after each block with the source's progress; an error it
/// returns stops the run (Ctrl-C).
pub fn attribute<E: Send + From<TraceError>>(
    h: &mut Hierarchy,
    levels: usize,
    src: &mut (dyn RecordSource + Send),
    mut on_block: impl FnMut(Progress) -> Result<(), E>,
) -> Result<Attribution, E> {
    let slot = |s: u8| {
        if s == SERVED_BY_MEMORY {
            levels
        } else {
            (s as usize).min(levels)
        }
    };
    let repeat_level = repeated_fetch_level(h);
    let line_shift = h.config().line_size.trailing_zeros();
    // The line of the latest fetch, when it did not span two (none yet: no line matches).
    let mut last_fetch_line = u64::MAX;
    let (mut pcs, mut pages) = (Tally::new(levels + 1), Tally::new(levels + 1));
    let mut served = Vec::with_capacity(BLOCK_RECORDS);
    // The records the hierarchy simulates, and per record whether it was left out.
    let mut simulated = Vec::with_capacity(BLOCK_RECORDS);
    let mut repeated = Vec::with_capacity(BLOCK_RECORDS);
    let (mut records, mut unknown) = (0u64, 0u64);
    pipelined_with(
        || {
            (
                Vec::<Record>::with_capacity(BLOCK_RECORDS),
                Vec::<u64>::with_capacity(BLOCK_RECORDS),
            )
        },
        |(buf, block_pcs)| -> Result<Option<Progress>, E> {
            if !src.next_block(buf)? {
                return Ok(None);
            }
            src.take_block_pcs(block_pcs);
            Ok(Some(src.progress()))
        },
        |(buf, block_pcs), progress| {
            served.clear();
            let Some(first_level) = repeat_level else {
                h.run_block_served(buf, &mut served);
                for ((rec, &s), &pc) in buf.iter().zip(&served).zip(block_pcs) {
                    tally_one(&mut pcs, &mut pages, &mut unknown, rec, pc, slot(s));
                }
                records += buf.len() as u64;
                return on_block(progress);
            };
            simulated.clear();
            repeated.clear();
            for rec in buf.iter() {
                let line = rec.addr >> line_shift;
                let end = rec.addr.saturating_add(rec.size.max(1) as u64 - 1) >> line_shift;
                let fetch = rec.kind == Kind::IFetch;
                let repeat = fetch && line == last_fetch_line && end == line;
                if fetch {
                    last_fetch_line = if end == line { line } else { u64::MAX };
                }
                if !repeat {
                    simulated.push(*rec);
                }
                repeated.push(repeat);
            }
            h.run_block_served(&simulated, &mut served);
            let mut next = served.iter();
            for ((rec, &repeat), &pc) in buf.iter().zip(&repeated).zip(block_pcs) {
                let s = if repeat {
                    first_level
                } else {
                    // One served level per simulated record, in order.
                    next.next().map_or(levels, |&s| slot(s))
                };
                tally_one(&mut pcs, &mut pages, &mut unknown, rec, pc, s);
            }
            records += buf.len() as u64;
            on_block(progress)
        },
    )?;
    Ok(Attribution {
        pcs,
        pages,
        levels,
        records,
        unknown_pc: unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimulationConfig;
    use crate::trace::native::{TraceReader, TraceWriter};
    use std::collections::BTreeMap;
    use std::io::Cursor;

    /// A program-like trace with PCs: fetches run on through a 4 KiB code region (1 to 15
    /// bytes per instruction, so some span two lines) with a jump now and then, a data access
    /// after about a third of them, some of them to the code's own lines; some PCs unknown.
    fn program_like(n: usize) -> (Vec<Record>, Vec<u64>) {
        let (mut x, mut pc) = (7u64, 0x40_0000u64);
        let (mut recs, mut pcs) = (Vec::new(), Vec::new());
        while recs.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let size = 1 + (x >> 60) as u16 % 15;
            recs.push(Record::new(Kind::IFetch, pc, size));
            pcs.push(pc);
            if x % 3 == 0 {
                let kind = if x & 8 == 0 { Kind::Load } else { Kind::Store };
                let addr = if x % 7 == 0 {
                    0x40_0000 + (x >> 20) % 4096
                } else {
                    0x1000_0000 + (x >> 40) % (64 << 10)
                };
                recs.push(Record::new(kind, addr, 8));
                pcs.push(if x % 97 == 0 { 0 } else { pc });
            }
            pc = if x % 23 == 0 {
                0x40_0000 + (x >> 32) % 4096
            } else {
                pc + size as u64
            };
        }
        (recs, pcs)
    }

    /// Attribution on `hierarchy` (TOML levels) equals a record-by-record replay counted in a
    /// plain map (`access` on a fresh hierarchy, every record), over several blocks (the
    /// helper thread's hand-offs); and repeated fetches are left out exactly when expected.
    fn attribution_equals_a_record_by_record_count(hierarchy: &str, leaves_out: Option<usize>) {
        let config = SimulationConfig::from_toml(hierarchy).unwrap();
        let (recs, pcs) = program_like(2 * BLOCK_RECORDS + 1234);
        let mut w = TraceWriter::with_pcs(Vec::new(), "").unwrap();
        w.write_all_with_pcs(&recs, Some(&pcs)).unwrap();
        let bytes = w.finish().unwrap();

        let levels = config.hierarchy.levels.len();
        let mut h = Hierarchy::new(&config.hierarchy).unwrap();
        assert_eq!(repeated_fetch_level(&h), leaves_out);
        let mut src = TraceReader::new(Cursor::new(bytes)).unwrap();
        let mut blocks = 0;
        let a = attribute::<TraceError>(&mut h, levels, &mut src, |_| {
            blocks += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((a.records, blocks), (recs.len() as u64, 3));

        let mut brute = Hierarchy::new(&config.hierarchy).unwrap();
        let (mut by_pc, mut by_page) = (BTreeMap::new(), BTreeMap::new());
        let mut unknown = 0;
        for (r, &pc) in recs.iter().zip(&pcs) {
            let s = brute.access(r);
            let s = if s == SERVED_BY_MEMORY {
                levels
            } else {
                s as usize
            };
            let c = class(r.kind);
            *by_pc.entry((pc, c, s)).or_insert(0u64) += 1;
            if c != 2 {
                *by_page.entry((r.addr >> 12, c, s)).or_insert(0u64) += 1;
                unknown += (pc == 0) as u64;
            }
        }
        let flat = |t: &Tally| {
            let mut m = BTreeMap::new();
            for (row, (&k, &c)) in t.keys.iter().zip(&t.classes).enumerate() {
                for s in 0..=levels {
                    let n = t.counts[row * (levels + 1) + s];
                    if n > 0 {
                        m.insert((k, c, s), n);
                    }
                }
            }
            m
        };
        assert_eq!(flat(&a.pcs), by_pc);
        assert_eq!(flat(&a.pages), by_page);
        assert_eq!(a.unknown_pc, unknown);
        // Not vacuous: unknown PCs, and fetches served by the first level, a lower one and
        // memory.
        assert!(unknown > 0);
        for s in [0, levels - 1, levels] {
            assert!(
                by_pc.keys().any(|k| k.1 == 2 && k.2 == s),
                "no fetch served at {s}"
            );
        }
    }

    const SPLIT_L1: &str = "[[hierarchy.levels]]\nname = \"I1\"\nsize = \"1KiB\"\nways = 2\n\
        serves = \"instruction\"\n\
        [[hierarchy.levels]]\nname = \"D1\"\nsize = \"1KiB\"\nways = 2\nserves = \"data\"\n\
        [[hierarchy.levels]]\nname = \"LL\"\nsize = \"8KiB\"\nways = 4\n";

    /// Split first levels, non-inclusive, LRU, no prefetcher: repeated fetches are left out.
    #[test]
    fn pipelined_attribution_equals_a_record_by_record_count() {
        let toml =
            format!("[hierarchy]\nline_size = 64\ninclusion = \"non-inclusive\"\n{SPLIT_L1}");
        attribution_equals_a_record_by_record_count(&toml, Some(0));
    }

    /// An inclusive last level back-invalidates the instruction cache when data evicts a code
    /// line from it, a unified first level sees data in between, a prefetcher fills on its own:
    /// each simulates every fetch (and stays exact).
    #[test]
    fn repeated_fetches_are_simulated_where_a_data_access_can_evict_them() {
        let inclusive =
            format!("[hierarchy]\nline_size = 64\ninclusion = \"inclusive\"\n{SPLIT_L1}");
        attribution_equals_a_record_by_record_count(&inclusive, None);
        let prefetching = format!(
            "[hierarchy]\nline_size = 64\ninclusion = \"non-inclusive\"\n{}",
            SPLIT_L1.replacen(
                "serves = \"instruction\"",
                "serves = \"instruction\"\nprefetcher = \"next-line\"",
                1
            )
        );
        attribution_equals_a_record_by_record_count(&prefetching, None);
        let unified = "[hierarchy]\nline_size = 64\ninclusion = \"non-inclusive\"\n\
             [[hierarchy.levels]]\nname = \"L1\"\nsize = \"1KiB\"\nways = 2\n\
             [[hierarchy.levels]]\nname = \"LL\"\nsize = \"8KiB\"\nways = 4\n";
        attribution_equals_a_record_by_record_count(unified, None);
    }
}
