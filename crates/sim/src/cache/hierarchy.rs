/*!
A cache hierarchy: per-core private levels (L1I, L1D, L2, ...) above shared levels (the LLC),
with inclusion policy, write policy, prefetchers and write-backs.

Semantics (fixed, so results compare with other tools; DESIGN.md "Semantics to keep fixed"):
- An instruction fetch walks the levels that serve instructions or are unified; a load, store
  or modify walks the data and unified levels. Thread `t` runs on core `t mod cores`.
- A level is looked up only on a miss in the level above; the missing line is then filled into
  every level that missed (deepest first), so each level's demand accesses are the misses of the
  level above. An access that spans two lines is two line accesses.
- Write-back + write-allocate by default: a store that misses fetches the line like a load and
  dirties it in the first level. A write-through level marks nothing dirty and passes the store
  down (counted as `write_throughs`; a level below that holds the line is dirtied without a
  replacement update, one that does not is skipped). A no-write-allocate level is not filled
  by a store miss.
- A dirty victim is written back to the next level of its path: dirtied there if present (no
  replacement update: a write-back is not a use), allocated there dirty if absent (a whole-line
  write needs no fetch), or written to memory below the last level.
- Inclusion: `non-inclusive` (default) never invalidates; `inclusive` back-invalidates a line
  evicted from a level in every level above it on every core (dirty data there goes to memory);
  `exclusive` makes the last level a victim cache of the level above it, as AMD's L3 is: demand
  misses do not fill it, lines evicted from the level above are inserted into it, and a hit in
  it moves the line up. A write-back from higher up that misses the level above the victim
  cache goes to the victim cache if it holds the line (so no line is in both).
- Prefetchers react to demand misses of their level and to the first demand hit on a line they
  prefetched (tagged prefetching, so a detected stream keeps going); prefetched lines are
  fetched through the levels below (as `prefetch_accesses`, not demand accesses) and filled into the prefetching
  level and every level below it that missed.
- Modes (Nellans et al. sections 3 and 5): a privileged record's demand accesses and misses are
  also counted on the privileged side of each level it reaches, and every eviction is counted
  for the mode of the demand access whose fill caused it, down the whole chain that access set
  off (write-backs allocated below, victim fills, inclusive fills, and the prefetches it
  triggered). The user side is the total minus the privileged side (`stats.rs`).
*/
mod config;
mod lean;
mod miss;
#[cfg(target_arch = "x86_64")]
pub(crate) use config::STATE_BYTES_PER_LINE;
pub(crate) use lean::{scan, sse2_eq64_mask};

use super::prefetch::{Prefetcher, PrefetcherKind, MAX_DEGREE};
use super::stats::{Counters, LevelStats};
use super::{flags, Cache, Evicted, LineMeta, Lookup, Miss, ReplacementKind, Slot, INVALID};
use crate::error::{ConfigError, TraceError};
use crate::geometry::CacheGeometry;
use crate::trace::{Kind, Progress, Record, RecordColumns, RecordSource};
use serde::Serialize;

pub use config::{HierarchyConfig, Inclusion, LevelConfig, Serves, WritePolicy};

/// Deepest hierarchy supported (levels on one path).
pub const MAX_DEPTH: usize = 8;

/// One position on a core's path through the hierarchy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Hop {
    level: u8,
    instance: u16,
}

/// The levels a reference of one class visits, in order.
#[derive(Debug, Clone, Copy, Default)]
struct Path {
    hops: [Hop; MAX_DEPTH],
    len: u8,
}

impl Path {
    #[inline]
    fn get(&self, d: usize) -> Hop {
        self.hops[d]
    }
}

#[derive(Debug, Clone)]
struct Level {
    name: String,
    write_back: bool,
    write_allocate: bool,
    caches: Vec<Cache>,
    counters: Vec<Counters>,
    prefetchers: Vec<Prefetcher>,
}

/// Traffic to and from memory below the last level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    /// Lines read from memory (demand and prefetch).
    pub reads: u64,
    /// Lines written to memory (write-backs, write-throughs, back-invalidated dirty lines).
    pub writes: u64,
}

impl MemoryStats {
    /// The traffic since `earlier` (a reading of the same counters).
    #[inline(always)]
    pub fn since(&self, earlier: &MemoryStats) -> MemoryStats {
        MemoryStats {
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
        }
    }
}

/// Everything a run of the hierarchy counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HierarchyStats {
    /// In hierarchy order.
    pub levels: Vec<LevelStats>,
    pub memory: MemoryStats,
    /// Records simulated, and line accesses they turned into (an access spanning two lines is two).
    pub records: u64,
    pub line_accesses: u64,
    /// References no level serves (e.g. ifetches in a data-only hierarchy).
    pub unserved: u64,
}

/// The line a core's first level served last, and where it sits there: a repeated access to
/// it is a first-level hit, confirmed by one load of the slot (so an invalidation or eviction in
/// between is never missed). Sequential traces take this path for most references.
///
/// `touched` records that the replacement state's last update in that cache (`epoch`) was a
/// hit on this very line: every policy here is idempotent under a repeated hit to the same way
/// with nothing in between (LRU's order, PLRU's and NRU's bits, RRIP's zero RRPV do not
/// change), so the fast path skips the update and the victims chosen stay exactly those of the
/// slow path. Anything else that updates the cache in between (the other path of a unified
/// first level, a prefetch fill) changes the epoch and the update is applied again.
#[derive(Debug, Clone, Copy)]
struct LastLine {
    line: u64,
    slot: Slot,
    touched: bool,
    epoch: u64,
}

impl Default for LastLine {
    fn default() -> Self {
        LastLine {
            line: INVALID,
            slot: Slot {
                set: 0,
                way: 0,
                index: 0,
            },
            touched: false,
            epoch: 0,
        }
    }
}

/// Where a line access was served: a level index, or memory.
pub const SERVED_BY_MEMORY: u8 = u8::MAX;

/// A simulated cache hierarchy.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    config: HierarchyConfig,
    levels: Vec<Level>,
    /// Per core: [data path, instruction path].
    paths: Vec<[Path; 2]>,
    /// Per core and path: the first level's most recent line.
    last: Vec<[LastLine; 2]>,
    /// Per level, per instance: the caches above it on some path (for back-invalidation).
    uppers: Vec<Vec<Vec<Hop>>>,
    line_shift: u32,
    cores: usize,
    inclusion: Inclusion,
    prefetch_enabled: bool,
    memory: MemoryStats,
    records: u64,
    line_accesses: u64,
    unserved: u64,
    /// Some level has a prefetcher configured.
    has_prefetchers: bool,
    /// The lean engine's precomputed paths, when the configuration is one it handles.
    lean: Option<lean::LeanPlan>,
    /// Use the lean engine when it applies (on by default; off to test it against the general
    /// path).
    lean_enabled: bool,
    /// Take `access_first_hit` in `access` (on by default; off to test it against the rest of
    /// the general path).
    first_hit_enabled: bool,
    /// `first_hit_enabled` and not `lean_ready`, kept by the setters of what those read:
    /// `access_first_hit` asks on every record (callgrind: evaluating `lean_ready` there was
    /// about 1.5% of a whole-system run's host instructions).
    first_hit_ready: bool,
    lean_units: lean::UnitCache,
    /// `set_lean_engine_on_access_path`.
    lean_on_access_path: bool,
    /// `access_lean` ran since the general path last looked: its `last` shortcuts are stale.
    last_stale: bool,
}

impl Hierarchy {
    pub fn new(config: &HierarchyConfig) -> Result<Self, ConfigError> {
        let config = config.effective()?;
        let cores = config.cores as usize;
        let mut levels = Vec::with_capacity(config.levels.len());
        for (i, l) in config.levels.iter().enumerate() {
            let shared = l.shared.unwrap_or(false);
            let instances = if shared { 1 } else { cores };
            let geom = CacheGeometry::sliced(
                l.size.0,
                l.ways,
                config.line_size,
                config.page_size.0,
                l.slices,
                l.slice_hash.clone(),
            )?;
            let mut caches = Vec::with_capacity(instances);
            for inst in 0..instances {
                // Each instance gets its own stream so cores do not share random choices.
                let seed = crate::rng::mix64(config.seed ^ ((i as u64) << 32 | inst as u64));
                caches.push(Cache::new(geom.clone(), l.policy, seed).map_err(|e| {
                    ConfigError::new(format!("levels[{i}].{}", e.field), e.message)
                })?);
            }
            levels.push(Level {
                name: l.name.clone(),
                write_back: l.write_policy == WritePolicy::WriteBack,
                write_allocate: l.write_allocate,
                counters: vec![Counters::default(); instances],
                prefetchers: (0..instances)
                    .map(|_| Prefetcher::new(l.prefetcher, l.prefetch_degree))
                    .collect(),
                caches,
            });
        }
        let mut paths = Vec::with_capacity(cores);
        for core in 0..cores {
            let mut pair = [Path::default(); 2];
            for (slot, wanted) in [(0, Serves::Data), (1, Serves::Instruction)] {
                let p = &mut pair[slot];
                for (i, l) in config.levels.iter().enumerate() {
                    if l.serves == wanted || l.serves == Serves::Unified {
                        let instance = if l.shared.unwrap_or(false) {
                            0
                        } else {
                            core as u16
                        };
                        p.hops[p.len as usize] = Hop {
                            level: i as u8,
                            instance,
                        };
                        p.len += 1;
                    }
                }
            }
            paths.push(pair);
        }
        let mut uppers: Vec<Vec<Vec<Hop>>> = levels
            .iter()
            .map(|l| vec![Vec::new(); l.caches.len()])
            .collect();
        for pair in &paths {
            for p in pair {
                for d in 0..p.len as usize {
                    let h = p.get(d);
                    for u in 0..d {
                        let up = p.get(u);
                        let list = &mut uppers[h.level as usize][h.instance as usize];
                        if !list.contains(&up) {
                            list.push(up);
                        }
                    }
                }
            }
        }
        let has_prefetchers = config
            .levels
            .iter()
            .any(|l| l.prefetcher != PrefetcherKind::None);
        let mut h = Hierarchy {
            has_prefetchers,
            lean: None,
            lean_enabled: true,
            first_hit_enabled: true,
            first_hit_ready: false,
            lean_units: lean::UnitCache::default(),
            lean_on_access_path: false,
            last_stale: false,
            line_shift: config.line_size.trailing_zeros(),
            cores,
            inclusion: config.inclusion,
            prefetch_enabled: config.prefetch_enabled,
            config,
            levels,
            last: vec![[LastLine::default(); 2]; cores],
            paths,
            uppers,
            memory: MemoryStats::default(),
            records: 0,
            line_accesses: 0,
            unserved: 0,
        };
        h.lean = lean::LeanPlan::for_hierarchy(&h);
        h.refresh_first_hit_ready();
        Ok(h)
    }

    /// Whether runs may use the lean engine (`hierarchy/lean.rs`) for configurations it
    /// handles. On by default; results are identical either way (that is tested), so this is
    /// for testing and measuring the general path.
    pub fn set_lean_engine(&mut self, on: bool) {
        self.lean_enabled = on;
        self.refresh_first_hit_ready();
    }

    /// Whether `access` serves a first-level hit on its own (`access_first_hit`). On by
    /// default; results are identical either way (tested), so this is for testing.
    pub fn set_first_hit_path(&mut self, on: bool) {
        self.first_hit_enabled = on;
        self.refresh_first_hit_ready();
    }

    /// Whether the record-at-a-time calls (`access`, `run_block_served`, `prefetch_host`) run
    /// on the lean engine. On the shapes it handles beyond non-inclusive power-of-two caches
    /// (inclusive, set counts that are not a power of two, slices) only after
    /// `set_lean_engine_on_access_path(true)`.
    pub fn uses_lean_engine(&self) -> bool {
        self.lean_ready()
    }

    /// Whether the next block of `run_block` or `run_columns` (cache-only runs) would run on the
    /// lean engine: on every shape it handles.
    pub fn blocks_use_lean_engine(&self) -> bool {
        self.lean_ready_blocks()
    }

    /// Let the record-at-a-time calls (`access`, `run_block_served`, `prefetch_host`,
    /// `uses_lean_engine`) take the lean engine on every shape it handles, not only on
    /// non-inclusive power-of-two caches (off by default). Results are the same either way, the
    /// whole system's too (its batched bursts time each access at its record:
    /// `batched_equals_stepped` in the system's tests). It is off because on a captured trace
    /// the whole system runs faster on the general path's stepped runs, which keep a run of
    /// repeated hits per class across interleaved fetches and data references, than batched on
    /// this engine (docs/PERFORMANCE.md, "Exact batched queueing").
    pub fn set_lean_engine_on_access_path(&mut self, on: bool) {
        self.lean_on_access_path = on;
        self.refresh_first_hit_ready();
    }

    /// Recompute `first_hit_ready` after a change to what it reads.
    fn refresh_first_hit_ready(&mut self) {
        self.first_hit_ready = self.first_hit_enabled && !self.lean_ready();
    }

    /// Whether `set_lean_engine_on_access_path` is on.
    pub fn lean_engine_on_access_path(&self) -> bool {
        self.lean_on_access_path
    }

    /// The effective configuration (every default filled in).
    pub fn config(&self) -> &HierarchyConfig {
        &self.config
    }

    /// Switch every prefetcher on or off (takes effect from the next access).
    pub fn set_prefetch_enabled(&mut self, on: bool) {
        self.prefetch_enabled = on;
        self.refresh_first_hit_ready();
    }

    pub fn prefetch_enabled(&self) -> bool {
        self.prefetch_enabled
    }

    /// The cache of `level` for `core` (the shared instance for a shared level).
    pub fn cache(&self, level: usize, core: usize) -> &Cache {
        let l = &self.levels[level];
        &l.caches[if l.caches.len() == 1 { 0 } else { core }]
    }

    pub fn level_names(&self) -> Vec<&str> {
        self.levels.iter().map(|l| l.name.as_str()).collect()
    }

    #[inline]
    fn is_exclusive_last(&self, level: usize) -> bool {
        self.inclusion == Inclusion::Exclusive && level == self.levels.len() - 1
    }

    /// Simulate a block of records as `run_block` does, and append to `served` where each
    /// was served (as `access` returns it). The system engine's batched path: a burst of one
    /// thread's records, translated, goes through here in one call.
    pub fn run_block_served(&mut self, recs: &[Record], served: &mut Vec<u8>) {
        if self.lean_ready() {
            self.run_block_lean(recs, served);
        } else {
            for r in recs {
                served.push(self.access(r));
            }
        }
    }

    /// `run_block_served`, also appending to `traffic` the memory traffic of each access that
    /// made any (the lines it read from and wrote to memory, write-backs of the lines it
    /// evicted included), with the access's index in `served`: what a memory controller that
    /// times each access needs (the system's batched bursts under the queued model). Most
    /// accesses make none, so they are left out.
    pub fn run_block_served_traffic(
        &mut self,
        recs: &[Record],
        served: &mut Vec<u8>,
        traffic: &mut Vec<(u32, MemoryStats)>,
    ) {
        if self.lean_ready() {
            let mut sink = lean::TrafficSink {
                served,
                traffic,
                last: self.memory,
            };
            self.run_block_lean(recs, &mut sink);
        } else {
            for r in recs {
                let before = self.memory;
                let i = served.len() as u32;
                served.push(self.access(r));
                if self.memory != before {
                    traffic.push((i, self.memory.since(&before)));
                }
            }
        }
    }

    /// Hint that `r` comes soon: the host prefetches the simulated sets it will visit in the
    /// levels whose state does not stay in the host's caches (lean engine only; a no-op
    /// otherwise). Changes nothing simulated.
    #[inline]
    pub fn prefetch_host(&mut self, r: &Record) {
        if self.lean_ready() {
            self.host_prefetch_lean(r);
        }
    }

    /// Lines read from and written to memory so far (the memory controller's traffic).
    #[inline]
    pub fn memory_traffic(&self) -> MemoryStats {
        self.memory
    }

    /// Simulate one record. Returns where its (last) line was served.
    #[inline]
    pub fn access(&mut self, r: &Record) -> u8 {
        if self.lean_ready() {
            return self.access_lean(r);
        }
        if let Some(served) = self.access_first_hit(r) {
            return served;
        }
        self.drop_lean_units();
        if self.last_stale {
            self.last_stale = false;
            for l in &mut self.last {
                *l = [LastLine::default(); 2];
            }
        }
        self.records += 1;
        let core = self.core_of(r.thread);
        let first = r.addr >> self.line_shift;
        let end = r.addr.saturating_add(r.size.max(1) as u64 - 1) >> self.line_shift;
        let mut line = first;
        loop {
            let served = self.access_line(core, r.kind, line, r.privileged);
            if line >= end {
                return served;
            }
            line += 1;
        }
    }

    /// Simulate a block of records. Two things a trace-driven simulator can do because it knows
    /// the future:
    /// - records a few places ahead have their sets prefetched into the host's caches, so the
    ///   host's memory latency overlaps with simulation work (the simulated LLC's tags do not
    ///   fit in the host's cache);
    /// - a run of records on one core touching the line its first level has just served is
    ///   settled in one step (`repeat_hits`): each of them is a first-level hit, and applying
    ///   them together changes exactly the counters and line state that applying them one by
    ///   one would.
    pub fn run_block(&mut self, recs: &[Record]) {
        if self.lean_ready_blocks() {
            self.run_block_lean(recs, &mut ());
            return;
        }
        self.drop_lean_units();
        const AHEAD: usize = 12;
        let n = recs.len();
        let line_mask = (1u64 << self.line_shift) - 1;
        let mut i = 0;
        while i < n {
            if i + AHEAD < n {
                let a = recs[i + AHEAD].addr >> self.line_shift;
                let b = recs[i + AHEAD - 1].addr >> self.line_shift;
                if a != b {
                    self.host_prefetch(&recs[i + AHEAD]);
                }
            }
            let r = &recs[i];
            self.access(r);
            i += 1;
            let within_line =
                |x: &Record| (x.addr & line_mask) + (x.size.max(1) as u64) <= line_mask + 1;
            if i < n && within_line(r) {
                let line = r.addr >> self.line_shift;
                let core = self.core_of(r.thread);
                let class = r.kind.is_instruction();
                let mut j = i;
                while j < n {
                    let x = &recs[j];
                    if x.addr >> self.line_shift != line
                        || x.kind.is_instruction() != class
                        || self.core_of(x.thread) != core
                        || !within_line(x)
                    {
                        break;
                    }
                    j += 1;
                }
                if j > i {
                    self.repeat_hits(core, class as usize, line, &recs[i..j]);
                    i = j;
                }
            }
        }
    }

    /// Simulate records held as columns (`RecordColumns`), in order. The lean engine reads
    /// address-and-size columns in place (the usual NumPy input). Other columns are turned into
    /// records a piece at a time, small enough to stay in the host's L2 between being written
    /// and being simulated: building each record from every column inside the engine measured
    /// slower, since each field then costs its own load and bounds check.
    pub fn run_columns(&mut self, cols: &RecordColumns) {
        const PIECE: usize = 8192;
        let n = cols.len();
        if let (true, Some((addr, size))) = (self.lean_ready_blocks(), cols.addresses_and_sizes()) {
            // Loads given by address (and size) only: the lean engine reads them in place.
            for start in (0..n).step_by(crate::trace::BLOCK_RECORDS) {
                let end = (start + crate::trace::BLOCK_RECORDS).min(n);
                let size = if size.is_empty() {
                    size
                } else {
                    &size[start..end]
                };
                self.run_block_lean(
                    &lean::AddrSize {
                        addr: &addr[start..end],
                        size,
                    },
                    &mut (),
                );
            }
            return;
        }
        let mut buf = Vec::with_capacity(PIECE.min(n));
        for start in (0..n).step_by(PIECE) {
            buf.clear();
            cols.extend_records(start, (start + PIECE).min(n), &mut buf);
            self.run_block(&buf);
        }
    }

    #[inline(always)]
    fn core_of(&self, thread: u32) -> usize {
        if self.cores == 1 {
            0
        } else {
            thread as usize % self.cores
        }
    }

    /// Records `recs`, all on `core` and in `line`, which the same core's previous access left
    /// in its first level (unless that access did not allocate: then they run one by one).
    fn repeat_hits(&mut self, core: usize, class: usize, line: u64, recs: &[Record]) {
        let mut per_kind = [0u64; 4];
        let mut privileged = 0;
        for r in recs {
            per_kind[r.kind as usize] += 1;
            privileged += r.privileged as u64;
        }
        if self.hit_last_line(core, class, line, &per_kind, privileged) {
            let count = recs.len() as u64;
            self.records += count;
            self.line_accesses += count;
        } else {
            for r in recs {
                self.access(r);
            }
        }
    }

    /// Apply `per_kind` demand hits (`privileged` of them made by privileged records) to
    /// `line`, the line this core's first level served last,
    /// when it still holds it (see `LastLine`): the counters, the replacement state (touched
    /// again only if something else changed the cache since), the reuse count and the dirty
    /// bit end up exactly as the slow path would leave them. Returns false, changing nothing,
    /// when that shortcut does not apply: another line, a line re-filled by a prefetch (its
    /// first hit must trigger the prefetcher), or stores to a write-through first level.
    #[inline]
    fn hit_last_line(
        &mut self,
        core: usize,
        class: usize,
        line: u64,
        per_kind: &[u64; 4],
        privileged: u64,
    ) -> bool {
        let last = self.last[core][class];
        let path = &self.paths[core][class];
        if last.line != line || path.len == 0 {
            return false;
        }
        let h = path.get(0);
        let level = &mut self.levels[h.level as usize];
        let writes = per_kind[Kind::Store as usize] + per_kind[Kind::Modify as usize];
        if writes > 0 && !level.write_back {
            return false;
        }
        let cache = &mut level.caches[h.instance as usize];
        if cache.line_at(last.slot) != line || cache.meta(last.slot).prefetched() {
            return false;
        }
        let counters = &mut level.counters[h.instance as usize];
        let mut count = 0;
        for (k, &c) in per_kind.iter().enumerate() {
            let kc = &mut counters.by_kind[k];
            kc.accesses += c;
            kc.hits += c;
            count += c;
        }
        counters.privileged.accesses += privileged;
        let skip = last.touched && last.epoch == cache.epoch();
        if !skip {
            cache.touch(last.slot); // counts one reuse
            let l = &mut self.last[core][class];
            l.touched = true;
            l.epoch = cache.epoch();
        }
        let m = cache.meta_mut(last.slot);
        let extra = if skip { count } else { count - 1 };
        m.reuse = u8::try_from(m.reuse as u64 + extra).unwrap_or(u8::MAX);
        if writes > 0 {
            m.flags |= flags::DIRTY;
        }
        true
    }

    #[inline]
    fn host_prefetch(&self, r: &Record) {
        let core = if self.cores == 1 {
            0
        } else {
            r.thread as usize % self.cores
        };
        let path = &self.paths[core][r.kind.is_instruction() as usize];
        let line = r.addr >> self.line_shift;
        for d in 0..path.len as usize {
            let h = path.get(d);
            self.levels[h.level as usize].caches[h.instance as usize].prefetch_set(line);
        }
    }

    /// Run a whole source through the hierarchy, reporting progress after every block.
    pub fn run(
        &mut self,
        src: &mut dyn RecordSource,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<u64, TraceError> {
        let mut buf = Vec::new();
        let mut n = 0u64;
        while src.next_block(&mut buf)? {
            self.run_block(&buf);
            n += buf.len() as u64;
            progress(src.progress());
        }
        Ok(n)
    }

    /// Statistics per level, in hierarchy order.
    pub fn stats(&self) -> HierarchyStats {
        HierarchyStats {
            levels: self
                .levels
                .iter()
                .map(|l| LevelStats::from_counters(&l.name, &l.counters))
                .collect(),
            memory: self.memory,
            records: self.records,
            line_accesses: self.line_accesses,
            unserved: self.unserved,
        }
    }

    /// The counters of each instance of `level` (to sum levels over several hierarchies).
    pub fn counters(&self, level: usize) -> &[Counters] {
        &self.levels[level].counters
    }

    /// Whether any cache of any core holds the line of physical address `addr` (a snoop).
    pub fn holds(&self, addr: u64) -> bool {
        let line = addr >> self.line_shift;
        self.levels
            .iter()
            .any(|l| l.caches.iter().any(|c| c.contains(line)))
    }

    /// The lean engine's cached raw pointers were derived from mutable borrows of the caches;
    /// before the caches are changed through a safe path they are dropped (and rebuilt at the
    /// lean engine's next use), so no pointer outlives a later borrow of what it points to.
    #[inline]
    fn drop_lean_units(&mut self) {
        self.lean_units.clear();
    }

    /// Coherence: remove the line of `addr` from every cache, because another chip writes it.
    /// A dirty copy goes to memory (counted as a memory write). Returns the copies removed.
    pub fn invalidate_line(&mut self, addr: u64) -> u32 {
        self.drop_lean_units();
        let line = addr >> self.line_shift;
        let mut removed = 0;
        let mut dirty = false;
        for l in &mut self.levels {
            for c in &mut l.caches {
                if let Some(m) = c.invalidate(line) {
                    removed += 1;
                    dirty |= m.dirty();
                }
            }
        }
        if dirty {
            self.memory.writes += 1;
        }
        removed
    }

    /// Statistics of each instance of `level` (one per core for a private level).
    pub fn instance_stats(&self, level: usize) -> Vec<LevelStats> {
        let l = &self.levels[level];
        l.counters
            .iter()
            .enumerate()
            .map(|(i, c)| LevelStats::from_counters(&format!("{}#{i}", l.name), [c]))
            .collect()
    }

    /// Check the accounting and structural invariants; returns every violation found.
    pub fn check_invariants(&self) -> Vec<String> {
        let mut bad = Vec::new();
        let stats = self.stats();
        for s in &stats.levels {
            for k in Kind::ALL {
                let c = s.kind(k);
                if c.hits + c.misses != c.accesses {
                    bad.push(format!(
                        "{} {}: hits {} + misses {} != accesses {}",
                        s.name,
                        k.name(),
                        c.hits,
                        c.misses,
                        c.accesses
                    ));
                }
            }
            let p = &s.privileged;
            if p.accesses > s.accesses || p.misses > s.misses || p.evictions > s.evictions {
                bad.push(format!(
                    "{}: privileged accesses/misses/evictions {}/{}/{} exceed the totals {}/{}/{}",
                    s.name, p.accesses, p.misses, p.evictions, s.accesses, s.misses, s.evictions
                ));
            }
            if s.prefetches_useful > s.prefetches_issued {
                bad.push(format!(
                    "{}: {} useful prefetches of {} issued",
                    s.name, s.prefetches_useful, s.prefetches_issued
                ));
            }
        }
        for level in &self.levels {
            for (i, c) in level.caches.iter().enumerate() {
                if c.valid_count() != c.occupancy() {
                    bad.push(format!(
                        "{}#{i}: running count of valid lines {} but {} ways hold one",
                        level.name,
                        c.valid_count(),
                        c.occupancy()
                    ));
                }
            }
        }
        // Flow: without exclusion, the demand accesses of a level are the demand misses of the
        // levels directly above it on the paths through it (store misses above a
        // no-write-allocate level included), and so for the privileged ones alone.
        if self.inclusion != Inclusion::Exclusive {
            for (lv, level) in self.levels.iter().enumerate() {
                let mut expected = 0u64;
                let mut expected_privileged = 0u64;
                let mut has_upper = false;
                for (i, up) in self.levels.iter().enumerate().take(lv) {
                    let directly_above = self.paths.iter().any(|pair| {
                        pair.iter().any(|p| {
                            (1..p.len as usize).any(|d| {
                                p.get(d).level as usize == lv && p.get(d - 1).level as usize == i
                            })
                        })
                    });
                    if directly_above {
                        has_upper = true;
                        expected += up
                            .counters
                            .iter()
                            .map(|c| c.by_kind.iter().map(|k| k.misses).sum::<u64>())
                            .sum::<u64>();
                        expected_privileged +=
                            up.counters.iter().map(|c| c.privileged.misses).sum::<u64>();
                    }
                }
                let got: u64 = level
                    .counters
                    .iter()
                    .map(|c| c.by_kind.iter().map(|k| k.accesses).sum::<u64>())
                    .sum();
                // A level that is the first on some path (a unified L1 under which an L1I
                // sits for instruction fetches) also takes accesses nobody above missed.
                let first_somewhere = self.paths.iter().any(|pair| {
                    pair.iter()
                        .any(|p| p.len > 0 && p.get(0).level as usize == lv)
                });
                if has_upper && !first_somewhere && got != expected {
                    bad.push(format!(
                        "{}: {} demand accesses but the levels above missed {}",
                        level.name, got, expected
                    ));
                }
                let got_privileged: u64 =
                    level.counters.iter().map(|c| c.privileged.accesses).sum();
                if has_upper && !first_somewhere && got_privileged != expected_privileged {
                    bad.push(format!(
                        "{}: {} privileged demand accesses but the levels above missed {}",
                        level.name, got_privileged, expected_privileged
                    ));
                }
            }
        }
        match self.inclusion {
            Inclusion::Inclusive => {
                for (lv, level) in self.levels.iter().enumerate() {
                    for (inst, cache) in level.caches.iter().enumerate() {
                        for up in &self.uppers[lv][inst] {
                            let upper =
                                &self.levels[up.level as usize].caches[up.instance as usize];
                            for (line, _) in upper.valid_lines() {
                                if !cache.contains(line) {
                                    bad.push(format!(
                                        "inclusion: line {line:#x} is in {} but not in {}",
                                        self.levels[up.level as usize].name, level.name
                                    ));
                                    break;
                                }
                            }
                        }
                    }
                }
            }
            Inclusion::Exclusive => {
                // Exclusion holds between the victim cache and the one cache directly above it.
                // With several caches directly above (per-core L2s, or L1I and L1D with no L2
                // between), one of them may hold a line that a sibling has evicted into it.
                let last = self.levels.len() - 1;
                let mut adjacent: Vec<Hop> = Vec::new();
                for pair in &self.paths {
                    for p in pair {
                        for d in 1..p.len as usize {
                            if p.get(d).level as usize == last && !adjacent.contains(&p.get(d - 1))
                            {
                                adjacent.push(p.get(d - 1));
                            }
                        }
                    }
                }
                if let [up] = adjacent[..] {
                    let llc = &self.levels[last].caches[0];
                    for (line, _) in
                        self.levels[up.level as usize].caches[up.instance as usize].valid_lines()
                    {
                        if llc.contains(line) {
                            bad.push(format!(
                                "exclusion: line {line:#x} is in both {} and {}",
                                self.levels[up.level as usize].name, self.levels[last].name
                            ));
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
        bad
    }
}
