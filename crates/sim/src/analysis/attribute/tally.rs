//! The tallies of attribution: rows per (key, class) of counts per serving level, behind a memo
//! of recent keys, and the per-code-line counts of the fetches folded after records.
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::trace::Kind;

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
        let row = self.row(key, class);
        self.counts[row * self.slots + slot] += 1;
    }

    /// The row of (`key`, `class`), created at its first reference (rows are never removed,
    /// so a row number stays valid for the tally's life).
    #[inline(always)]
    pub fn row(&mut self, key: u64, class: u8) -> usize {
        let m = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize ^ class as usize;
        let e = self.memo[m & (MEMO - 1)];
        if e.0 == key && e.1 == class {
            e.2
        } else {
            self.row_of(key, class, m)
        }
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

/// The fetches folded after records (about four fifths of a captured program's records),
/// counted per 64-byte code line before they reach the PC tally: each line recently seen
/// (direct-mapped) keeps the tally's row of each of its bytes' fetches, and how many fetches
/// at each byte are not yet added, all served at one slot. A folded fetch is then one
/// increment; the lines' counts go to the tally when a line gives its entry up, when the slot
/// changes, and after every block (`flush`; so a count stays below a block's records). Rows are
/// created at a fetch's first reference, as `Tally::add` creates them, so the tally's order of
/// first appearance is kept.
pub(super) struct CodeLines {
    entries: Vec<CodeLine>,
    /// The entries with counts not yet added (an entry given up and taken again within a
    /// block is listed twice; the second flush of it finds nothing to add).
    dirty: Vec<usize>,
}

#[derive(Clone, Copy)]
struct CodeLine {
    /// The line's address (`u64::MAX`: none).
    line: u64,
    /// The tally slot every pending count is served at.
    slot: usize,
    rows: [u32; 64],
    pending: [u32; 64],
    dirty: bool,
}

/// Lines `CodeLines` keeps (a power of two): a program's hot loops span few.
const CODE_LINES: usize = 256;

/// No row yet.
const NO_ROW: u32 = u32::MAX;

impl CodeLines {
    pub(super) fn new() -> Self {
        let empty = CodeLine {
            line: u64::MAX,
            slot: 0,
            rows: [NO_ROW; 64],
            pending: [0; 64],
            dirty: false,
        };
        CodeLines {
            entries: vec![empty; CODE_LINES],
            dirty: Vec::new(),
        }
    }

    /// Count one fetch at each byte of `offsets` within the 64-byte line at `line` (its
    /// address), served at `slot`, toward `pcs` (class 2, under the fetch's address).
    #[inline]
    pub(super) fn add_fetches(&mut self, pcs: &mut Tally, line: u64, offsets: &[u8], slot: usize) {
        let e = ((line >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize & (CODE_LINES - 1);
        let entry = &mut self.entries[e];
        if entry.line != line || entry.slot != slot {
            Self::add_pending(entry, pcs);
            if entry.line != line {
                entry.line = line;
                entry.rows = [NO_ROW; 64];
            }
            entry.slot = slot;
        }
        if !entry.dirty {
            entry.dirty = true;
            self.dirty.push(e);
        }
        for &off in offsets {
            // A folded fetch lies within its line: `off` < 64.
            let i = off as usize & 63;
            if entry.rows[i] == NO_ROW {
                let row = pcs.row(line | off as u64, class(Kind::IFetch));
                entry.rows[i] = u32::try_from(row).expect("fewer than 2^32 rows");
            }
            entry.pending[i] += 1;
        }
    }

    /// Add an entry's pending counts to the tally.
    fn add_pending(entry: &mut CodeLine, pcs: &mut Tally) {
        if !entry.dirty {
            return;
        }
        for (row, n) in entry.rows.iter().zip(entry.pending.iter_mut()) {
            if *n > 0 {
                pcs.counts[*row as usize * pcs.slots + entry.slot] += *n as u64;
                *n = 0;
            }
        }
        entry.dirty = false;
    }

    /// Add every pending count to the tally.
    pub(super) fn flush(&mut self, pcs: &mut Tally) {
        for e in self.dirty.drain(..) {
            Self::add_pending(&mut self.entries[e], pcs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CodeLines` against `Tally::add` one fetch at a time: the same rows in the same order
    /// and the same counts, over more lines than it keeps (entries given up to conflicting
    /// lines), a slot that changes on a line, and flushes between groups as between blocks.
    #[test]
    fn code_lines_tally_as_one_add_per_fetch() {
        let (mut by_line, mut one_by_one) = (Tally::new(3), Tally::new(3));
        let mut lines = CodeLines::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for group in 0..20_000 {
            let r = next();
            // Hot lines most of the time, 1,000 distinct ones in all.
            let line = 0x40_0000
                + 64 * if r % 4 == 0 {
                    r >> 8 & 1023
                } else {
                    r >> 8 & 15
                };
            let slot = (r >> 20) as usize % 3 * ((r >> 24) % 8 == 0) as usize;
            let offsets: Vec<u8> = (0..1 + r as usize % 7)
                .map(|_| (next() % 64) as u8)
                .collect();
            lines.add_fetches(&mut by_line, line, &offsets, slot);
            for &off in &offsets {
                one_by_one.add(line | off as u64, class(Kind::IFetch), slot);
            }
            // A fetch given (not folded) on the same line, tallied directly, as `step` does,
            // while the line's folded counts are still pending.
            if r % 5 == 0 {
                let key = line | ((r >> 32) % 64);
                by_line.add(key, class(Kind::IFetch), slot);
                one_by_one.add(key, class(Kind::IFetch), slot);
            }
            if group % 997 == 0 {
                lines.flush(&mut by_line);
            }
        }
        lines.flush(&mut by_line);
        assert!(
            one_by_one.keys.len() > 10_000,
            "{} rows",
            one_by_one.keys.len()
        );
        assert_eq!(by_line.keys, one_by_one.keys);
        assert_eq!(by_line.classes, one_by_one.classes);
        assert_eq!(by_line.counts, one_by_one.counts);
    }
}
