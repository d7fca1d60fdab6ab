/*!
Exact LRU stack distances (Mattson, Gecsei, Slutz and Traiger 1970) in O(log M) per reference,
for one fully associative stack (`LruStack`) or one stack per cache set (`SetStacks`, the
thesis's per-set stack distance profiles, section 5.3).

The stack distance of a reference to line `x` is 1 + the number of distinct lines referenced
since the previous reference to `x` (infinite for a first reference). Under LRU a cache of `C`
lines hits exactly the references of distance `<= C` (the inclusion property), so one histogram
of distances gives the miss rate of every size at once. Per set, the same holds with the lines of
that set only: a set-associative LRU cache with `S` sets and `A` ways hits exactly the references
whose per-set distance is `<= A`, for every `A` in one pass.

How a distance is counted (Olken 1981's idea, with a bit vector in place of his tree):
- Every distinct line owns the slot of its most recent reference on a *time axis*; a bit per
  slot marks the slots that are some line's latest. The distance of a reference is 1 + the
  number of marked slots after the line's previous slot; then that slot is cleared and the next
  slot is marked.
- The marks live in 64-bit words; a Fenwick tree over the words' popcounts answers "marks
  before word w" in O(log(slots / 64)). A short reuse (previous slot within `SHORT_WORDS` words
  of the present) is counted by popcounts alone. The tree only covers *sealed* words (those the
  present has passed), so marking the present slot costs nothing until its word fills up.
- The axis does not grow with the trace: when it is full it is compacted (live marks renumbered
  0..live, in order), and given room for 3x the live lines again, so compaction is amortised
  O(1) per reference and memory is O(distinct lines), never O(references).
- Line numbers map to their slot through an open-addressing table (linear probing, Fibonacci
  hashing), not a general-purpose hash map: one probe of one 16-byte entry per reference, and the
  table is prefetched `AHEAD` references ahead (a trace-driven profiler knows its future, as the
  simulator does), so the host's misses on it overlap. Compaction of the single stack rewrites
  slots by one sequential scan of the table (each entry's new slot is the rank of its old one),
  so no slot-to-line array is kept; per-set axes keep one (slot -> table entry), small per set.

Contract: `access` is exact for any sequence of line numbers below `u64::MAX`; the histograms
count every reference once (`cold` = first references = distinct lines). Deterministic: the
result depends only on the sequence.
*/
use crate::cache::{prefetch_read, Aligned};
use crate::rng::GOLDEN_GAMMA;

/// A reuse whose previous slot is within this many words of the present is counted by popcounts
/// instead of the Fenwick tree.
const SHORT_WORDS: usize = 8;

/// References looked ahead for the table prefetch.
const AHEAD: usize = 16;

/// Smallest time axis, in 64-slot words.
const MIN_WORDS: usize = 64;

/// Free space left after a compaction of the single stack, as a multiple of the live lines.
const ROOM_FACTOR: usize = 4;

/// Histogram increments are delayed by this many references, their counters prefetched.
const LAG: usize = 8;

/// Increments of histogram counters, each delayed by `LAG` increments after its counter is
/// prefetched: a histogram over a million distances is megabytes, and a random
/// read-modify-write into it per reference otherwise stalls on the host's memory (measured: it
/// was over half the time of `LruStack::run` on the zipf + scan trace).
struct Delayed {
    ring: [usize; LAG],
    pos: usize,
}

impl Delayed {
    fn new() -> Self {
        Delayed {
            ring: [usize::MAX; LAG],
            pos: 0,
        }
    }

    #[inline(always)]
    fn add(&mut self, counts: &mut [u64], i: usize) {
        prefetch_read(counts.as_ptr().wrapping_add(i));
        let old = std::mem::replace(&mut self.ring[self.pos], i);
        self.pos = (self.pos + 1) % LAG;
        if old != usize::MAX {
            counts[old] += 1;
        }
    }

    fn flush(&mut self, counts: &mut [u64]) {
        for i in self.ring.iter_mut() {
            if *i != usize::MAX {
                counts[*i] += 1;
                *i = usize::MAX;
            }
        }
    }
}

/// A growable array of histogram counters in `Aligned` storage (huge pages once large: the
/// delayed increments land at random in it).
#[derive(Debug, Clone)]
struct Counters {
    buf: Aligned<u64>,
    len: usize,
}

impl Counters {
    fn new() -> Self {
        Counters {
            buf: Aligned::new(0, 1024, 0),
            len: 1,
        }
    }

    /// Append a zero counter.
    #[inline(always)]
    fn push_zero(&mut self) {
        if self.len == self.buf.len() {
            self.grow();
        }
        self.len += 1;
    }

    #[cold]
    fn grow(&mut self) {
        let mut b = Aligned::new(0, self.buf.len() * 2, 0);
        b[..self.len].copy_from_slice(&self.buf[..self.len]);
        self.buf = b;
    }

    fn as_slice(&self) -> &[u64] {
        &self.buf[..self.len]
    }

    /// Every counter, including spare capacity (always zero).
    #[inline(always)]
    fn all_mut(&mut self) -> &mut [u64] {
        &mut self.buf
    }

    fn bytes(&self) -> usize {
        self.buf.len() * 8
    }
}

// ---------------------------------------------------------------------------------------------
// The line table.

#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
pub(crate) struct Entry {
    /// Line number + 1; 0 marks an empty entry.
    key: u64,
    /// Slot of the line's latest reference on its time axis.
    pub(crate) slot: u32,
    /// Free for the owner: the set number in `SetStacks`.
    pub(crate) aux: u32,
}

impl Entry {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.key == 0
    }
}

/// Open-addressing table of lines (linear probing, load at most 1/2).
#[derive(Debug, Clone)]
pub(crate) struct LineTable {
    /// Huge pages once large: probes land at random in it, and a TLB miss per probe (a
    /// two-dimensional page walk in a VM) would cost more than the probe.
    entries: Aligned<Entry>,
    shift: u32,
    len: usize,
}

impl LineTable {
    pub(crate) fn new() -> Self {
        Self::with_bits(10)
    }

    fn with_bits(bits: u32) -> Self {
        LineTable {
            entries: Aligned::new(Entry::default(), 1 << bits, 0),
            shift: 64 - bits,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn bytes(&self) -> usize {
        self.entries.len() * std::mem::size_of::<Entry>()
    }

    /// The first bucket to probe for `key`: a Fibonacci hash of `key / 4` picks a group of
    /// four buckets (one host cache line of entries) and `key mod 4` the bucket in it, so four
    /// consecutive lines share one host line of the table (a scan then misses once per four
    /// references instead of every time), while other keys still spread uniformly.
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(GOLDEN_GAMMA) >> self.shift) as usize
    }

    #[inline(always)]
    pub(crate) fn prefetch(&self, line: u64) {
        prefetch_read(self.entries.as_ptr().wrapping_add(self.home(line + 1)));
    }

    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> &Entry {
        &self.entries[i]
    }

    #[inline(always)]
    pub(crate) fn get_mut(&mut self, i: usize) -> &mut Entry {
        &mut self.entries[i]
    }

    /// The entry of `line`: `(index, true)` if present, else a new entry `(index, false)` whose
    /// `slot` and `aux` the caller must set (and then call `grow_if_needed`).
    #[inline(always)]
    pub(crate) fn find_or_insert(&mut self, line: u64) -> (usize, bool) {
        debug_assert!(line != u64::MAX);
        let key = line + 1;
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        loop {
            let k = self.entries[i].key;
            if k == key {
                return (i, true);
            }
            if k == 0 {
                self.entries[i].key = key;
                self.len += 1;
                return (i, false);
            }
            i = (i + 1) & mask;
        }
    }

    /// Index of `line`, if present.
    pub(crate) fn find(&self, line: u64) -> Option<usize> {
        let key = line + 1;
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        loop {
            let k = self.entries[i].key;
            if k == key {
                return Some(i);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Double the table when over half full; `moved(entry, new_index)` is called for every entry.
    #[inline]
    pub(crate) fn grow_if_needed(&mut self, moved: impl FnMut(&Entry, usize)) -> bool {
        if self.len * 2 <= self.entries.len() {
            return false;
        }
        self.rehash(self.entries.len().trailing_zeros() + 1, moved);
        true
    }

    #[cold]
    fn rehash(&mut self, bits: u32, mut moved: impl FnMut(&Entry, usize)) {
        let old = std::mem::replace(self, Self::with_bits(bits));
        let mask = self.entries.len() - 1;
        for e in old.entries.iter().filter(|e| !e.is_empty()) {
            let mut i = self.home(e.key);
            while !self.entries[i].is_empty() {
                i = (i + 1) & mask;
            }
            self.entries[i] = *e;
            moved(e, i);
        }
        self.len = old.len;
    }

    /// Remove the entry at `i` (backward-shift deletion: no tombstones). Entries move but keep
    /// their slots; `moved(entry, new_index)` is called for each one moved.
    pub(crate) fn remove_at(&mut self, mut i: usize, mut moved: impl FnMut(&Entry, usize)) {
        let mask = self.entries.len() - 1;
        self.len -= 1;
        loop {
            self.entries[i] = Entry::default();
            let mut j = i;
            loop {
                j = (j + 1) & mask;
                let e = self.entries[j];
                if e.is_empty() {
                    return;
                }
                let h = self.home(e.key);
                // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
                let stays = if i <= j {
                    i < h && h <= j
                } else {
                    i < h || h <= j
                };
                if !stays {
                    self.entries[i] = e;
                    moved(&e, i);
                    i = j;
                    break;
                }
            }
        }
    }

    /// Every occupied entry, mutably, in table order.
    pub(crate) fn entries_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        self.entries.iter_mut().filter(|e| !e.is_empty())
    }
}

// ---------------------------------------------------------------------------------------------
// The time axis.

/// Marked slots (each line's latest reference) with order statistics.
#[derive(Debug, Clone)]
pub(crate) struct TimeAxis {
    bits: Vec<u64>,
    /// Fenwick tree (1-based) over the popcounts of the sealed words `[0, now / 64)`.
    tree: Vec<u32>,
    /// The next slot to mark.
    now: u32,
    /// Marked slots.
    live: u32,
}

impl TimeAxis {
    pub(crate) fn new(words: usize) -> Self {
        assert!(words * 64 <= u32::MAX as usize, "time axis too long");
        TimeAxis {
            bits: vec![0; words],
            tree: vec![0; words + 1],
            now: 0,
            live: 0,
        }
    }

    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.now as usize == self.bits.len() * 64
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bits.len() * 8 + self.tree.len() * 4
    }

    #[inline(always)]
    fn tree_add(&mut self, word: usize, delta: u32) {
        let mut i = word + 1;
        let n = self.tree.len();
        while i < n {
            self.tree[i] = self.tree[i].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Marks in the words `[0, word)`; every such word must be sealed.
    #[inline(always)]
    fn tree_prefix(&self, word: usize) -> u32 {
        let mut i = word;
        let mut s = 0u32;
        while i > 0 {
            s = s.wrapping_add(self.tree[i]);
            i &= i - 1;
        }
        s
    }

    /// Marked slots strictly after `slot` (which is marked).
    #[inline(always)]
    pub(crate) fn after(&self, slot: u32) -> u32 {
        let w = (slot / 64) as usize;
        let above = (self.bits[w] & (!1u64 << (slot % 64))).count_ones();
        let now_w = (self.now / 64) as usize;
        if now_w - w <= SHORT_WORDS {
            // Marks can only be in words up to the present one (or the last, when full).
            let end = now_w.min(self.bits.len() - 1);
            let mut n = above;
            for &b in &self.bits[w + 1..end + 1] {
                n += b.count_ones();
            }
            n
        } else {
            // Words after w: all marks minus those in [0, w] (sealed, since w < now_w).
            self.live - self.tree_prefix(w + 1) + above
        }
    }

    /// Clear the mark of `slot`.
    #[inline(always)]
    pub(crate) fn unmark(&mut self, slot: u32) {
        let w = (slot / 64) as usize;
        self.bits[w] &= !(1u64 << (slot % 64));
        self.live -= 1;
        if w < (self.now / 64) as usize {
            self.tree_add(w, u32::MAX);
        }
    }

    /// Mark the next slot and return it (the axis must not be full).
    #[inline(always)]
    pub(crate) fn push(&mut self) -> u32 {
        let s = self.now;
        let w = (s / 64) as usize;
        self.bits[w] |= 1u64 << (s % 64);
        self.now = s + 1;
        self.live += 1;
        if self.now.is_multiple_of(64) {
            let c = self.bits[w].count_ones();
            self.tree_add(w, c);
        }
        s
    }

    /// Rank of each word: marks before it (for `new_slot`).
    fn word_ranks(&self) -> Vec<u32> {
        let mut r = Vec::with_capacity(self.bits.len());
        let mut acc = 0u32;
        for &b in &self.bits {
            r.push(acc);
            acc += b.count_ones();
        }
        r
    }

    /// The slot a marked `slot` gets when the axis is compacted (its rank among the marks).
    #[inline(always)]
    fn new_slot(&self, ranks: &[u32], slot: u32) -> u32 {
        let w = (slot / 64) as usize;
        ranks[w] + (self.bits[w] & ((1u64 << (slot % 64)) - 1)).count_ones()
    }

    /// Renumber the marks `0..live` on an axis of `words` words (the caller renumbers the
    /// lines' slots, with `new_slot`, before calling this).
    fn reset_compacted(&mut self, words: usize) {
        let live = self.live as usize;
        assert!(live <= words * 64 && words * 64 <= u32::MAX as usize);
        self.bits.clear();
        self.bits.resize(words, 0);
        for w in 0..live / 64 {
            self.bits[w] = u64::MAX;
        }
        if !live.is_multiple_of(64) {
            self.bits[live / 64] = (1u64 << (live % 64)) - 1;
        }
        self.now = live as u32;
        // Fenwick tree of the sealed (full) words, built in O(words).
        self.tree.clear();
        self.tree.resize(words + 1, 0);
        let sealed = live / 64;
        for i in 1..=words {
            if i <= sealed {
                self.tree[i] = self.tree[i].wrapping_add(64);
            }
            let j = i + (i & i.wrapping_neg());
            if j <= words {
                let v = self.tree[i];
                self.tree[j] = self.tree[j].wrapping_add(v);
            }
        }
    }

    /// Words to give an axis holding `live` marks after compaction.
    fn words_for(live: usize, factor: usize, min_words: usize) -> usize {
        (live * factor).div_ceil(64).max(min_words)
    }
}

// ---------------------------------------------------------------------------------------------
// Histograms and miss-rate curves.

/// Stack distances of a run: `counts[d]` references at distance `d` (index 0 unused), `cold`
/// first references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistanceHistogram {
    pub counts: Vec<u64>,
    pub cold: u64,
}

impl DistanceHistogram {
    /// Count one reference at distance `d` (`None`: a first reference).
    pub fn add(&mut self, d: Option<u32>) {
        match d {
            Some(d) => {
                let d = d as usize;
                if self.counts.len() <= d {
                    self.counts.resize(d + 1, 0);
                }
                self.counts[d] += 1;
            }
            None => self.cold += 1,
        }
    }

    /// References counted.
    pub fn references(&self) -> u64 {
        self.cold + self.counts.iter().sum::<u64>()
    }

    /// Distinct lines (first references).
    pub fn distinct(&self) -> u64 {
        self.cold
    }

    /// The largest distance seen (0 if none).
    pub fn max_distance(&self) -> u64 {
        self.counts.iter().rposition(|&c| c != 0).unwrap_or(0) as u64
    }

    /// Misses of a fully associative LRU cache of `size` lines: references whose distance
    /// exceeds `size`, plus first references.
    pub fn misses(&self, size: u64) -> u64 {
        let from = (size as usize).saturating_add(1).min(self.counts.len());
        self.cold + self.counts[from..].iter().sum::<u64>()
    }

    /// Misses at every size `0..=max_distance` (index = size), in one pass.
    pub fn miss_counts(&self) -> Vec<u64> {
        let top = self.max_distance() as usize;
        let mut out = vec![0u64; top + 1];
        let mut acc = self.cold;
        for size in (0..=top).rev() {
            out[size] = acc;
            acc += self.counts.get(size).copied().unwrap_or(0);
        }
        out
    }

    /// Miss rates at `sizes` (0 references give 0).
    pub fn miss_rates(&self, sizes: &[u64]) -> Vec<f64> {
        let refs = self.references();
        let m = self.miss_counts();
        sizes
            .iter()
            .map(|&s| {
                let misses = m.get(s as usize).copied().unwrap_or(self.cold);
                if refs == 0 {
                    0.0
                } else {
                    misses as f64 / refs as f64
                }
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// One fully associative stack.

/// Exact LRU stack distances of a stream of line numbers.
#[derive(Debug, Clone)]
pub struct LruStack {
    table: LineTable,
    axis: TimeAxis,
    /// `counts[d]` references at distance `d`; `counts[0]` first references.
    counts: Counters,
    peak_bytes: usize,
}

impl Default for LruStack {
    fn default() -> Self {
        Self::new()
    }
}

impl LruStack {
    pub fn new() -> Self {
        LruStack {
            table: LineTable::new(),
            axis: TimeAxis::new(MIN_WORDS),
            counts: Counters::new(),
            peak_bytes: 0,
        }
    }

    /// Distinct lines seen so far.
    pub fn distinct(&self) -> u64 {
        self.table.len() as u64
    }

    /// The stack distance of a reference to `line` (`None` for its first reference), updating
    /// the stack. Does not touch the histogram.
    #[inline(always)]
    pub fn access(&mut self, line: u64) -> Option<u32> {
        if self.axis.is_full() {
            self.compact();
        }
        let (i, found) = self.table.find_or_insert(line);
        if found {
            let prev = self.table.get(i).slot;
            let d = self.axis.after(prev) + 1;
            self.axis.unmark(prev);
            self.table.get_mut(i).slot = self.axis.push();
            Some(d)
        } else {
            self.table.get_mut(i).slot = self.axis.push();
            self.table.grow_if_needed(|_, _| {});
            None
        }
    }

    /// Forget `line` (fixed-size SHARDS evicts lines from its sample): later distances no
    /// longer count it. No effect if absent.
    pub fn remove(&mut self, line: u64) {
        if let Some(i) = self.table.find(line) {
            let slot = self.table.get(i).slot;
            self.axis.unmark(slot);
            self.table.remove_at(i, |_, _| {});
        }
    }

    /// Count one reference into the histogram, returning its distance (`None` for a first
    /// reference): `run` of one line, for a caller that also needs the distance.
    pub fn run_one(&mut self, line: u64) -> Option<u32> {
        let d = self.access(line);
        match d {
            Some(d) => self.counts.all_mut()[d as usize] += 1,
            None => {
                self.counts.push_zero();
                self.counts.all_mut()[0] += 1;
            }
        }
        d
    }

    /// Count the distances of `lines` into the histogram.
    pub fn run(&mut self, lines: &[u64]) {
        let mut delayed = Delayed::new();
        for (k, &line) in lines.iter().enumerate() {
            if let Some(&ahead) = lines.get(k + AHEAD) {
                self.table.prefetch(ahead);
            }
            // counts[0] counts first references.
            let d = match self.access(line) {
                Some(d) => d as usize,
                None => {
                    self.counts.push_zero();
                    0
                }
            };
            delayed.add(self.counts.all_mut(), d);
        }
        delayed.flush(self.counts.all_mut());
    }

    /// The histogram so far (distances up to the distinct lines).
    pub fn histogram(&self) -> DistanceHistogram {
        let mut counts = self.counts.as_slice().to_vec();
        counts[0] = 0;
        DistanceHistogram {
            counts,
            cold: self.counts.as_slice()[0],
        }
    }

    /// Bytes of state now (table, axis, histogram) and the most seen at a compaction.
    pub fn state_bytes(&self) -> usize {
        (self.table.bytes() + self.axis.bytes() + self.counts.bytes()).max(self.peak_bytes)
    }

    #[cold]
    fn compact(&mut self) {
        let ranks = self.axis.word_ranks();
        let axis = &self.axis;
        for e in self.table.entries_mut() {
            e.slot = axis.new_slot(&ranks, e.slot);
        }
        let words = TimeAxis::words_for(self.axis.live as usize, ROOM_FACTOR, MIN_WORDS);
        self.peak_bytes = self
            .peak_bytes
            .max(self.table.bytes() + self.axis.bytes() + ranks.len() * 4 + self.counts.bytes());
        self.axis.reset_compacted(words);
    }
}

// ---------------------------------------------------------------------------------------------
// One stack per cache set.

/// A per-set time axis and the table entry owning each of its slots.
#[derive(Debug, Clone)]
struct SetAxis {
    axis: TimeAxis,
    owner: Vec<u32>,
}

/// Per-set LRU stack distances for a cache of `sets` sets (set = line mod sets), with per-set
/// histograms of distances `1..=max_ways` plus one counter for everything beyond (the thesis's
/// `A + 1` counters per set, section 2.3.3), and the pooled histogram of all per-set distances.
#[derive(Debug, Clone)]
pub struct SetStacks {
    sets: u64,
    /// `sets - 1` when `sets` is a power of two.
    mask: Option<u64>,
    max_ways: usize,
    table: LineTable,
    axes: Vec<SetAxis>,
    /// `counts[s * (max_ways + 1) + d - 1]` for `d <= max_ways`; `[s * (max_ways + 1) + max_ways]`
    /// counts the references of set `s` at a larger distance or cold.
    per_set: Vec<u64>,
    /// `pooled[d]` references at per-set distance `d`; `pooled[0]` first references.
    pooled: Counters,
}

/// Largest `sets * (max_ways + 1)` counter array accepted (1 GiB of counters).
pub const MAX_SET_COUNTERS: u64 = 1 << 27;

impl SetStacks {
    /// Profiles for `sets` sets and associativities `1..=max_ways`.
    pub fn new(sets: u64, max_ways: u32) -> Result<Self, crate::ConfigError> {
        if sets == 0 || sets > u32::MAX as u64 {
            return Err(crate::ConfigError::new(
                "sets",
                format!("{sets} is not allowed: give 1 to 2^32 - 1 sets"),
            ));
        }
        if max_ways == 0 {
            return Err(crate::ConfigError::new(
                "max_ways",
                "0 is not allowed: profile associativities 1..=max_ways, max_ways >= 1",
            ));
        }
        let counters = sets.saturating_mul(max_ways as u64 + 1);
        if counters > MAX_SET_COUNTERS {
            return Err(crate::ConfigError::new(
                "max_ways",
                format!(
                    "{sets} sets x {} counters is more than the {MAX_SET_COUNTERS} per-set counters \
                     allowed: lower max_ways or the number of sets",
                    max_ways as u64 + 1
                ),
            ));
        }
        Ok(SetStacks {
            sets,
            mask: sets.is_power_of_two().then(|| sets - 1),
            max_ways: max_ways as usize,
            table: LineTable::new(),
            axes: (0..sets)
                .map(|_| SetAxis {
                    axis: TimeAxis::new(1),
                    owner: vec![0; 64],
                })
                .collect(),
            per_set: vec![0; counters as usize],
            pooled: Counters::new(),
        })
    }

    pub fn sets(&self) -> u64 {
        self.sets
    }

    pub fn max_ways(&self) -> u32 {
        self.max_ways as u32
    }

    #[inline(always)]
    fn set_of(&self, line: u64) -> usize {
        match self.mask {
            Some(m) => (line & m) as usize,
            None => (line % self.sets) as usize,
        }
    }

    /// The per-set stack distance of a reference to `line` (`None` for its first reference).
    #[inline(always)]
    pub fn access(&mut self, line: u64) -> Option<u32> {
        let set = self.set_of(line);
        if self.axes[set].axis.is_full() {
            self.compact(set);
        }
        let (i, found) = self.table.find_or_insert(line);
        let sa = &mut self.axes[set];
        if found {
            let prev = self.table.get(i).slot;
            let d = sa.axis.after(prev) + 1;
            sa.axis.unmark(prev);
            let s = sa.axis.push();
            sa.owner[s as usize] = i as u32;
            self.table.get_mut(i).slot = s;
            Some(d)
        } else {
            let s = sa.axis.push();
            sa.owner[s as usize] = i as u32;
            let e = self.table.get_mut(i);
            e.slot = s;
            e.aux = set as u32;
            let axes = &mut self.axes;
            self.table.grow_if_needed(|e, new_index| {
                axes[e.aux as usize].owner[e.slot as usize] = new_index as u32;
            });
            None
        }
    }

    /// Count the per-set distances of `lines`.
    pub fn run(&mut self, lines: &[u64]) {
        let row = self.max_ways + 1;
        let (mut pooled, mut per_set) = (Delayed::new(), Delayed::new());
        for (k, &line) in lines.iter().enumerate() {
            // Two-stage prefetch: the line's table entry and its set's axis header far ahead,
            // then (the header being in cache by now) the axis's first bit word and slot owners.
            if let Some(&ahead) = lines.get(k + AHEAD) {
                self.table.prefetch(ahead);
                prefetch_read(&self.axes[self.set_of(ahead)]);
            }
            if let Some(&near) = lines.get(k + AHEAD / 2) {
                let a = &self.axes[self.set_of(near)];
                prefetch_read(a.axis.bits.as_ptr());
                prefetch_read(a.owner.as_ptr().wrapping_add(a.axis.now as usize));
            }
            let set = self.set_of(line);
            // pooled[0] counts first references; the per-set miss counter takes them too.
            let d = match self.access(line) {
                Some(d) => d as usize,
                None => {
                    self.pooled.push_zero();
                    0
                }
            };
            pooled.add(self.pooled.all_mut(), d);
            let col = if d == 0 {
                self.max_ways
            } else {
                (d - 1).min(self.max_ways)
            };
            per_set.add(&mut self.per_set, set * row + col);
        }
        pooled.flush(self.pooled.all_mut());
        per_set.flush(&mut self.per_set);
    }

    /// The per-set counters (`sets x (max_ways + 1)`, row-major; see the field comment).
    pub fn per_set_counts(&self) -> &[u64] {
        &self.per_set
    }

    /// All per-set distances pooled: the access-weighted average of the per-set profiles, times
    /// the number of references (thesis 5.3: each set weighted by its share of the references).
    pub fn pooled(&self) -> DistanceHistogram {
        let mut counts = self.pooled.as_slice().to_vec();
        counts[0] = 0;
        DistanceHistogram {
            counts,
            cold: self.pooled.as_slice()[0],
        }
    }

    /// Bytes of state: the line table, every set's axis and slot owners, the counters.
    pub fn state_bytes(&self) -> usize {
        self.table.bytes()
            + self
                .axes
                .iter()
                .map(|a| a.axis.bytes() + a.owner.len() * 4)
                .sum::<usize>()
            + self.per_set.len() * 8
            + self.pooled.bytes()
    }

    #[cold]
    fn compact(&mut self, set: usize) {
        let sa = &mut self.axes[set];
        let live = sa.axis.live as usize;
        let words = TimeAxis::words_for(live, ROOM_FACTOR, 1);
        // Renumber in place: the k-th live slot moves to slot k <= its old slot, so every
        // owner read is still the old one.
        let mut k = 0usize;
        for w in 0..sa.axis.bits.len() {
            let mut b = sa.axis.bits[w];
            while b != 0 {
                let slot = w * 64 + b.trailing_zeros() as usize;
                b &= b - 1;
                let idx = sa.owner[slot];
                self.table.get_mut(idx as usize).slot = k as u32;
                sa.owner[k] = idx;
                k += 1;
            }
        }
        sa.axis.reset_compacted(words);
        sa.owner.resize(words * 64, 0);
    }
}

#[cfg(test)]
#[path = "stack_tests.rs"]
mod tests;
