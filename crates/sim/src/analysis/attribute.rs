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
mod tally;

use tally::CodeLines;
pub use tally::{class, MulHash, Tally};

use crate::cache::hierarchy::SERVED_BY_MEMORY;
use crate::cache::Hierarchy;
use crate::error::TraceError;
use crate::trace::{
    pipelined_with, FoldedFetches, Kind, Progress, Record, RecordSource, BLOCK_RECORDS,
};

/// What `attribute` returns: the tallies per (PC, class) and per (4 KiB data page, class), each
/// row `levels + 1` counters (served by level 0, 1, ... of the hierarchy, then memory).
pub struct Attribution {
    pub pcs: Tally,
    pub pages: Tally,
    pub levels: usize,
    pub records: u64,
    /// Data records whose PC is 0 (unknown).
    pub unknown_pc: u64,
    /// Of `records`, the fetches the source folded out (`FoldedFetches`).
    pub folded: u64,
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

/// The records of one class (data or instructions) that attribution has counted as
/// first-level hits on the line the first level of their path served last, not yet handed to
/// the hierarchy (`apply`), as the system engine's `LineRun`.
#[derive(Clone, Copy)]
struct LineRun {
    /// The line (`u64::MAX`: no run), the thread whose core's first level holds it, and the
    /// tally slot of that level.
    line: u64,
    thread: u32,
    slot: usize,
    per_kind: [u64; 4],
    privileged: u64,
}

impl LineRun {
    const NONE: LineRun = LineRun {
        line: u64::MAX,
        thread: 0,
        slot: 0,
        per_kind: [0; 4],
        privileged: 0,
    };

    /// Hand the counted records to the hierarchy as that many first-level hits
    /// (`Hierarchy::repeat_first_hits`: counters, replacement state, reuse and dirty bits as
    /// one at a time), and count from zero again (the run stays).
    #[inline]
    fn apply(&mut self, h: &mut Hierarchy, class: usize) {
        if self.per_kind != [0; 4] {
            h.repeat_first_hits(
                self.thread,
                class,
                self.line,
                &self.per_kind,
                self.privileged,
            );
            self.per_kind = [0; 4];
            self.privileged = 0;
        }
    }
}

/// Run every record of `src` (which must give PCs: `block_pcs`) through `h` and tally where
/// each was served. The source decodes its next block on a helper thread while this one
/// simulates and tallies the previous (`trace::pipelined_with`: blocks arrive in order, so the
/// tallies are those of a serial run). `on_block` is called after each block with the source's
/// progress; an error it returns stops the run (Ctrl-C).
///
/// Most of a captured program's references repeat the line their class's previous reference
/// touched (fetches of one line with data references between them: 79% of the annotate
/// benchmark's records). After an access that leaves its line as the first level's last hit
/// (`holds_last_hit`: a first-level hit, `access_first_hit`, or a miss that filled it), the
/// records of its class that stay on its line are only counted (`LineRun`) and handed to the
/// hierarchy together (`repeat_first_hits`) before the next record of that class, as the
/// system engine does. That is exact on every hierarchy: where the two classes' first levels
/// are distinct caches (`first_levels_split`) a first-level hit of the other class changes
/// nothing the run depends on, and where they are one cache the other class's run is applied
/// first; an access that misses the first level (which may fill, evict, back-invalidate or
/// prefetch) comes after both runs are applied, and a run goes on after it only where its line
/// is still the first level's last hit in its slot.
///
/// Both engines keep the first level's last hit, so attribution runs on the lean engine
/// wherever its configuration allows (every level LRU, write-back, no prefetcher running:
/// the cachegrind-like config and the inclusive presets), taking its access path on every shape
/// it handles (`set_lean_engine_on_access_path`: attribution has no timing a batched burst
/// could move) and leaving the caller's setting as it found it; a caller's
/// `set_lean_engine(false)` keeps it on the general path.
pub fn attribute<E: Send + From<TraceError>>(
    h: &mut Hierarchy,
    levels: usize,
    src: &mut (dyn RecordSource + Send),
    on_block: impl FnMut(Progress) -> Result<(), E>,
) -> Result<Attribution, E> {
    let callers_access_path = h.lean_engine_on_access_path();
    h.set_lean_engine_on_access_path(true);
    let result = attribute_in(h, levels, src, on_block);
    h.set_lean_engine_on_access_path(callers_access_path);
    result
}

/// Attribution's state between records: the hierarchy, the two classes' runs and the tallies,
/// with what the configuration fixes about the runs.
struct Attributor<'h> {
    h: &'h mut Hierarchy,
    levels: usize,
    /// The general path's first-level hit on its own (`access_first_hit`) declines on the lean
    /// engine, whose `access` serves a hit about as cheaply.
    lean: bool,
    cores: u32,
    /// Whether the two classes' first levels are distinct caches on every core.
    split: bool,
    /// Whether a write joins a run: where it would be a first-level hit (write-back).
    writes_join: Vec<[bool; 2]>,
    /// The tally slot of a run's records: the first level of their core's path.
    first_slot: Vec<[usize; 2]>,
    line_shift: u32,
    line_mask: u64,
    runs: [LineRun; 2],
    pcs: Tally,
    code_lines: CodeLines,
    pages: Tally,
    unknown: u64,
}

impl<'h> Attributor<'h> {
    fn new(h: &'h mut Hierarchy, levels: usize) -> Self {
        let cores = h.config().cores.max(1);
        let slot = |s: u8| Self::slot_of(levels, s);
        Attributor {
            lean: h.uses_lean_engine(),
            cores,
            // A core's thread `c` is on core `c` (`thread % cores`).
            split: (0..cores).all(|c| h.first_levels_split(c)),
            writes_join: (0..cores)
                .map(|c| [0, 1].map(|k| h.first_level_write_back(c, k)))
                .collect(),
            first_slot: (0..cores)
                .map(|c| [0, 1].map(|k| h.first_level(c, k).map_or(levels, slot)))
                .collect(),
            line_shift: h.config().line_size.trailing_zeros(),
            line_mask: h.config().line_size as u64 - 1,
            runs: [LineRun::NONE; 2],
            pcs: Tally::new(levels + 1),
            code_lines: CodeLines::new(),
            pages: Tally::new(levels + 1),
            unknown: 0,
            levels,
            h,
        }
    }

    /// The tally slot of a `served` level: its index, or `levels` for memory.
    fn slot_of(levels: usize, served: u8) -> usize {
        if served == SERVED_BY_MEMORY {
            levels
        } else {
            (served as usize).min(levels)
        }
    }

    /// One record: counted into its class's run where it repeats the run's line, else
    /// accessed (after the runs it must follow are applied); then tallied.
    #[inline(always)]
    fn step(&mut self, rec: &Record, pc: u64) {
        let (h, cores, split) = (&mut *self.h, self.cores, self.split);
        let k = rec.kind.is_instruction() as usize;
        let run = &mut self.runs[k];
        let line = rec.addr >> self.line_shift;
        let within_line =
            (rec.addr & self.line_mask) + rec.size.max(1) as u64 <= self.line_mask + 1;
        let s = if line == run.line
            && rec.thread == run.thread
            && within_line
            && (!rec.kind.is_write() || self.writes_join[(rec.thread % cores) as usize][k])
        {
            run.per_kind[rec.kind as usize] += 1;
            run.privileged += rec.privileged as u64;
            let s = run.slot;
            // One first level for both classes: the other class's counted records came
            // before this one, and which line its set saw last decides its next victim, so
            // they are handed over first.
            if !split {
                self.runs[1 - k].apply(h, 1 - k);
            }
            s
        } else {
            // This record's access comes after the runs' (both, where the two classes share
            // their first level).
            self.runs[k].apply(h, k);
            if !split {
                self.runs[1 - k].apply(h, 1 - k);
            }
            let hit = if self.lean {
                None
            } else {
                h.access_first_hit(rec)
            };
            if let Some(served) = hit {
                let slot = Self::slot_of(self.levels, served);
                self.runs[k] = LineRun {
                    line,
                    thread: rec.thread,
                    slot,
                    ..LineRun::NONE
                };
                slot
            } else {
                self.runs[1 - k].apply(h, 1 - k);
                let served = h.access(rec);
                // A run starts on the line this access left as the first level's last hit,
                // and the other class's goes on where its line still is.
                self.runs[k] = if within_line && h.holds_last_hit(rec.thread, k, line) {
                    LineRun {
                        line,
                        thread: rec.thread,
                        slot: self.first_slot[(rec.thread % cores) as usize][k],
                        ..LineRun::NONE
                    }
                } else {
                    LineRun::NONE
                };
                let other = &mut self.runs[1 - k];
                if other.line != u64::MAX && !h.holds_last_hit(other.thread, 1 - k, other.line) {
                    *other = LineRun::NONE;
                }
                Self::slot_of(self.levels, served)
            }
        };
        tally_one(
            &mut self.pcs,
            &mut self.pages,
            &mut self.unknown,
            rec,
            pc,
            s,
        );
    }

    /// The fetches the source folded out after `head` (just stepped; `FoldedFetches`, on a
    /// hierarchy whose lines hold the trace's 64-byte ones), on the 64-byte line at `line`, the
    /// latest fetch's: each within that line, on `head`'s thread and privilege, so where the
    /// instruction run holds the line each takes `step`'s run branch, and they are counted
    /// together; else each is stepped.
    #[inline]
    fn folded(&mut self, head: &Record, line: u64, offsets: &[u8], sizes: &[u8]) {
        let run = &self.runs[1];
        if run.line == line >> self.line_shift && run.thread == head.thread {
            // One first level for both classes: a data record stepped since the latest fetch
            // came before these (`step`'s run branch).
            if !self.split {
                self.runs[0].apply(self.h, 0);
            }
            let run = &mut self.runs[1];
            let n = offsets.len() as u64;
            run.per_kind[Kind::IFetch as usize] += n;
            run.privileged += head.privileged as u64 * n;
            let s = run.slot;
            self.code_lines.add_fetches(&mut self.pcs, line, offsets, s);
        } else {
            for (&off, &size) in offsets.iter().zip(sizes) {
                let f = FoldedFetches::fetch(head, line, off, size);
                self.step(&f, f.addr);
            }
        }
    }
}

fn attribute_in<E: Send + From<TraceError>>(
    h: &mut Hierarchy,
    levels: usize,
    src: &mut (dyn RecordSource + Send),
    mut on_block: impl FnMut(Progress) -> Result<(), E>,
) -> Result<Attribution, E> {
    // Fetches folded out by the source are on one 64-byte line of the trace, so on one of the
    // hierarchy's where its lines are no shorter. The source gives every record again after.
    let folding = h.config().line_size >= 64 && src.fold_repeated_fetches(true);
    let mut a = Attributor::new(h, levels);
    let (mut records, mut folded) = (0u64, 0u64);
    let result = pipelined_with(
        || {
            (
                Vec::<Record>::with_capacity(BLOCK_RECORDS),
                Vec::<u64>::with_capacity(BLOCK_RECORDS),
                FoldedFetches::default(),
            )
        },
        |(buf, block_pcs, folds)| -> Result<Option<Progress>, E> {
            if !src.next_block(buf)? {
                return Ok(None);
            }
            src.take_block_pcs(block_pcs);
            src.take_block_folds(folds);
            Ok(Some(src.progress()))
        },
        |(buf, block_pcs, folds), progress| {
            // The 64-byte line of the block's latest fetch, where the fetches folded after a
            // record are (the block's first fetch is given, so it is always set before used).
            let mut line = 0u64;
            for (i, (rec, &pc)) in buf.iter().zip(block_pcs.iter()).enumerate() {
                a.step(rec, pc);
                line = if rec.kind == Kind::IFetch {
                    rec.addr & !63
                } else {
                    line
                };
                let (offsets, sizes) = folds.after(i);
                if !offsets.is_empty() {
                    a.folded(rec, line, offsets, sizes);
                }
            }
            a.code_lines.flush(&mut a.pcs);
            records += (buf.len() + folds.len()) as u64;
            folded += folds.len() as u64;
            on_block(progress)
        },
    );
    for (k, run) in a.runs.iter_mut().enumerate() {
        run.apply(a.h, k);
    }
    if folding {
        src.fold_repeated_fetches(false);
    }
    result?;
    Ok(Attribution {
        pcs: a.pcs,
        pages: a.pages,
        levels,
        records,
        unknown_pc: a.unknown,
        folded,
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
    /// after about a third of them (a load, store or modify; some of them to the code's own
    /// lines, some followed by a second on the same line), some PCs unknown; two threads taking
    /// turns at the jumps and now and then at a data record, one of them privileged now and
    /// then (the reader folds out the fetches on the line of the block's latest fetch).
    fn program_like(n: usize) -> (Vec<Record>, Vec<u64>) {
        let (mut x, mut pc, mut thread, mut privileged) = (7u64, 0x40_0000u64, 0u32, false);
        let (mut recs, mut pcs) = (Vec::new(), Vec::new());
        let push = |recs: &mut Vec<Record>, kind, addr, size, thread, privileged| {
            let mut r = Record::new(kind, addr, size);
            r.thread = thread;
            r.privileged = privileged;
            // As a capture writes them: one instruction per fetch.
            r.icount = (kind == Kind::IFetch) as u32;
            recs.push(r);
        };
        while recs.len() < n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let size = 1 + (x >> 60) as u16 % 15;
            push(&mut recs, Kind::IFetch, pc, size, thread, privileged);
            pcs.push(pc);
            if x % 3 == 0 {
                // Now and then the other thread takes over at a data record and runs on
                // through the same code (its fetch after the record repeats the line of the
                // other thread's fetch before it).
                if x % 13 == 0 {
                    thread ^= 1;
                }
                let kind =
                    [Kind::Load, Kind::Store, Kind::Load, Kind::Modify][(x >> 3) as usize % 4];
                let addr = if x % 7 == 0 {
                    0x40_0000 + (x >> 20) % 4096
                } else {
                    0x1000_0000 + (x >> 40) % (64 << 10)
                };
                push(&mut recs, kind, addr, 8, thread, privileged);
                pcs.push(if x % 97 == 0 { 0 } else { pc });
                if x % 5 == 0 {
                    push(&mut recs, Kind::Load, addr ^ 8, 4, thread, privileged);
                    pcs.push(pc);
                }
            }
            if x % 23 == 0 && x % 4 == 0 {
                thread ^= 1;
                privileged = x % 3 == 1;
            }
            pc = if x % 23 == 0 {
                0x40_0000 + (x >> 32) % 4096
            } else {
                pc + size as u64
            };
        }
        (recs, pcs)
    }

    /// The two tallies are equal; else a panic naming the first rows that differ.
    fn assert_same(
        got: &BTreeMap<(u64, u8, usize), u64>,
        want: &BTreeMap<(u64, u8, usize), u64>,
        what: &str,
    ) {
        let differ: Vec<_> = got
            .keys()
            .chain(want.keys())
            .filter(|k| got.get(k) != want.get(k))
            .take(6)
            .map(|k| (k, got.get(k), want.get(k)))
            .collect();
        assert!(
            differ.is_empty(),
            "{what}\n(key, class, slot), attributed, replayed: {differ:?}"
        );
    }

    /// Attribution on `hierarchy` (TOML levels) equals a record-by-record replay counted in a
    /// plain map (`access` on a fresh hierarchy, every record, on the general path without its
    /// first-level shortcut), over several blocks (the helper thread's hand-offs), and leaves
    /// the hierarchy's own statistics as that replay does (every record reached it, runs of
    /// repeats as their sums). Run on the lean engine where the config allows it (`lean`:
    /// whether it must), and again on the general path; the caller's engine settings are left
    /// as they were.
    fn attribution_equals_a_record_by_record_count(hierarchy: &str, lean: bool) {
        let config = SimulationConfig::from_toml(hierarchy).unwrap();
        let (recs, pcs) = program_like(2 * BLOCK_RECORDS + 1234);
        let mut w = TraceWriter::with_pcs(Vec::new(), "").unwrap();
        w.write_all_with_pcs(&recs, Some(&pcs)).unwrap();
        let bytes = w.finish().unwrap();

        let levels = config.hierarchy.levels.len();
        let mut brute = Hierarchy::new(&config.hierarchy).unwrap();
        brute.set_lean_engine(false);
        brute.set_first_hit_path(false);
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
        for on_lean in [true, false] {
            let mut h = Hierarchy::new(&config.hierarchy).unwrap();
            h.set_lean_engine(on_lean);
            h.set_lean_engine_on_access_path(true);
            assert_eq!(h.uses_lean_engine(), on_lean && lean, "{hierarchy}");
            h.set_lean_engine_on_access_path(false);
            let mut src = TraceReader::new(Cursor::new(bytes.clone())).unwrap();
            let mut blocks = 0;
            let a = attribute::<TraceError>(&mut h, levels, &mut src, |_| {
                blocks += 1;
                Ok(())
            })
            .unwrap();
            let what = format!("lean engine {}: {hierarchy}", on_lean && lean);
            assert_eq!((a.records, blocks), (recs.len() as u64, 3));
            // Fetches are folded out wherever the hierarchy's lines hold the trace's.
            assert_eq!(
                a.folded > 0,
                config.hierarchy.line_size >= 64,
                "{what}: {} folded",
                a.folded
            );
            assert_eq!(h.stats(), brute.stats(), "{what}");
            assert_same(&flat(&a.pcs), &by_pc, &what);
            assert_same(&flat(&a.pages), &by_page, &what);
            assert_eq!(a.unknown_pc, unknown);
            assert!(!h.lean_engine_on_access_path(), "{what}");
            assert_eq!(h.blocks_use_lean_engine(), on_lean && lean, "{what}");
        }
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

    fn split(head: &str, edit: impl Fn(&str) -> String) -> String {
        format!("[hierarchy]\nline_size = 64\n{head}\n{}", edit(SPLIT_L1))
    }

    /// Split first levels, non-inclusive, LRU, no prefetcher (cachegrind's shape, on the lean
    /// engine and on the general path).
    #[test]
    fn pipelined_attribution_equals_a_record_by_record_count() {
        attribution_equals_a_record_by_record_count(
            &split("inclusion = \"non-inclusive\"", str::to_string),
            true,
        );
    }

    /// `attribute` used to switch the lean engine off on the caller's hierarchy and leave it
    /// so: the caller's settings come back as they were, whichever they were.
    #[test]
    fn attribute_restores_the_callers_lean_engine_setting() {
        let toml = split("inclusion = \"inclusive\"", str::to_string);
        let config = SimulationConfig::from_toml(&toml).unwrap();
        let (recs, pcs) = program_like(1000);
        let mut w = TraceWriter::with_pcs(Vec::new(), "").unwrap();
        w.write_all_with_pcs(&recs, Some(&pcs)).unwrap();
        let bytes = w.finish().unwrap();
        for (lean, access_path) in [(true, false), (true, true), (false, false)] {
            let mut h = Hierarchy::new(&config.hierarchy).unwrap();
            h.set_lean_engine(lean);
            h.set_lean_engine_on_access_path(access_path);
            let before = (h.blocks_use_lean_engine(), h.uses_lean_engine());
            let mut src = TraceReader::new(Cursor::new(bytes.clone())).unwrap();
            attribute::<TraceError>(&mut h, 3, &mut src, |_| Ok(())).unwrap();
            assert_eq!(h.lean_engine_on_access_path(), access_path);
            assert_eq!((h.blocks_use_lean_engine(), h.uses_lean_engine()), before);
            assert_eq!(before, (lean, lean && access_path));
        }
    }

    /// Where a repeat of a line is not left alone between two references of its class: an
    /// inclusive last level back-invalidates the instruction cache when data evicts a code line
    /// from it; a unified first level sees data in between (shared by two cores in one config,
    /// beside a last level whose set count is not a power of two); a prefetcher fills on its
    /// own (and its tagged lines set it off on their first hit); a write-through first level
    /// sends stores on; first levels that are not LRU; two cores (two threads) sharing the last
    /// level. Runs stay exact on each, on the lean engine where it takes the config (`true`).
    #[test]
    fn attribution_is_exact_where_other_references_can_evict_a_repeated_line() {
        let configs = [
            (split("inclusion = \"inclusive\"", str::to_string), true),
            (split("inclusion = \"exclusive\"", str::to_string), false),
            (
                split("inclusion = \"non-inclusive\"", |l| {
                    l.replacen(
                        "serves = \"instruction\"",
                        "serves = \"instruction\"\nprefetcher = \"next-line\"",
                        1,
                    )
                    .replacen(
                        "serves = \"data\"",
                        "serves = \"data\"\nprefetcher = \"stride\"",
                        1,
                    )
                }),
                false,
            ),
            (
                split("inclusion = \"inclusive\"", |l| {
                    l.replacen(
                        "serves = \"data\"",
                        "serves = \"data\"\nprefetcher = \"next-line\"",
                        1,
                    )
                }),
                false,
            ),
            (
                split("inclusion = \"non-inclusive\"", |l| {
                    l.replacen(
                        "serves = \"data\"",
                        "serves = \"data\"\nwrite_policy = \"write-through\"",
                        1,
                    )
                    .replacen(
                        "serves = \"instruction\"",
                        "serves = \"instruction\"\npolicy = \"tree-plru\"",
                        1,
                    )
                }),
                false,
            ),
            (
                split("inclusion = \"non-inclusive\"", |l| {
                    l.replace("ways = 2\n", "ways = 2\npolicy = \"srrip\"\n")
                }),
                false,
            ),
            (
                split("cores = 2\ninclusion = \"inclusive\"", str::to_string),
                true,
            ),
            (
                "[hierarchy]\nline_size = 64\ninclusion = \"non-inclusive\"\n\
                 [[hierarchy.levels]]\nname = \"L1\"\nsize = \"1KiB\"\nways = 2\n\
                 [[hierarchy.levels]]\nname = \"LL\"\nsize = \"8KiB\"\nways = 4\n"
                    .to_string(),
                true,
            ),
            (
                "[hierarchy]\nline_size = 64\ncores = 2\ninclusion = \"inclusive\"\n\
                 [[hierarchy.levels]]\nname = \"L1\"\nsize = \"1KiB\"\nways = 2\n\
                 shared = true\n\
                 [[hierarchy.levels]]\nname = \"LL\"\nsize = \"12KiB\"\nways = 4\n"
                    .to_string(),
                true,
            ),
            (
                "[hierarchy]\nline_size = 64\ninclusion = \"inclusive\"\n\
                 [[hierarchy.levels]]\nname = \"L1\"\nsize = \"1KiB\"\nways = 2\n\
                 prefetcher = \"next-line\"\n\
                 [[hierarchy.levels]]\nname = \"LL\"\nsize = \"8KiB\"\nways = 4\n"
                    .to_string(),
                false,
            ),
        ];
        // Lines shorter than the trace's 64 bytes (nothing folded) and longer.
        let lines = [32, 128].map(|line| {
            split("inclusion = \"non-inclusive\"", str::to_string)
                .replace("line_size = 64", &format!("line_size = {line}"))
        });
        let configs = configs.into_iter().chain(lines.map(|l| (l, true)));
        for (toml, lean) in configs {
            attribution_equals_a_record_by_record_count(&toml, lean);
        }
    }
}
