//! The demand path of one line access through the hierarchy: lookups down the core's path,
//! fills deepest first, evictions and write-backs (inclusive back-invalidation, the exclusive
//! victim cache), stores, and the prefetches a miss or a tagged hit sets off. The semantics are
//! those of the module's header (`hierarchy.rs`).

use super::*;

impl Hierarchy {
    /// The general path's common case done on its own: a record within one line that hits the
    /// first level of its path, is not a tagged prefetch hit (which sets a prefetcher off) and,
    /// if it writes, writes into a write-back first level. Exactly `access`'s updates for such
    /// a record (the counters, the replacement touch or its skip under `LastLine`, the reuse
    /// count, the dirty bit, the last line), and it moves no line and no memory traffic. Returns
    /// the level that served it, or `None` with nothing changed when the record is not such a
    /// hit (or the lean engine runs this hierarchy): the caller then runs `access`.
    ///
    /// Why: on a captured trace about two thirds of the records are instruction fetches, nearly
    /// all first-level hits, and most data references hit L1D too; the general path's lookup
    /// loop, per-kind arrays and fill bookkeeping cost a few hundred host instructions for them
    /// (callgrind on a captured `bzip2` trace on `xeon-e5506`, docs/PERFORMANCE.md).
    #[inline(always)]
    pub fn access_first_hit(&mut self, r: &Record) -> Option<u8> {
        if self.last_stale || !self.first_hit_ready {
            return None;
        }
        let line = r.addr >> self.line_shift;
        if r.addr.saturating_add(r.size.max(1) as u64 - 1) >> self.line_shift != line {
            return None;
        }
        let core = self.core_of(r.thread);
        let class = r.kind.is_instruction() as usize;
        let path = &self.paths[core][class];
        if path.len == 0 {
            return None;
        }
        let h = path.get(0);
        let write = r.kind.is_write();
        let level = &mut self.levels[h.level as usize];
        if write && !level.write_back {
            return None;
        }
        let cache = &mut level.caches[h.instance as usize];
        let last = &mut self.last[core][class];
        let repeat = last.line == line && cache.line_at(last.slot) == line;
        let slot = if repeat {
            last.slot
        } else {
            match cache.lookup(line) {
                Lookup::Hit(slot) => slot,
                Lookup::Miss(_) => return None,
            }
        };
        if cache.meta(slot).prefetched() {
            return None;
        }
        self.lean_units.clear();
        self.records += 1;
        self.line_accesses += 1;
        let counters = &mut level.counters[h.instance as usize];
        counters.privileged.accesses += r.privileged as u64;
        counters.access(r.kind, true);
        if repeat && last.touched && last.epoch == cache.epoch() {
            // `hit_last_line`: the replacement state already has this hit (idempotent).
            let m = cache.meta_mut(slot);
            m.reuse = m.reuse.saturating_add(1);
        } else {
            cache.touch(slot);
            *last = LastLine {
                line,
                slot,
                touched: true,
                epoch: cache.epoch(),
            };
        }
        if write {
            cache.meta_mut(slot).flags |= flags::DIRTY;
        }
        Some(h.level)
    }

    /// `per_kind` more first-level hits (`privileged` of them privileged) on `line`, which the
    /// first level of the path of `thread`'s core of class `class` (0 data, 1 instructions)
    /// served last (an `access_first_hit`, or an `access` on either engine: the lean engine
    /// keeps its last hit too) and still holds there (`holds_last_hit`): exactly what as many
    /// `access_first_hit` calls would do, in one step. A loop that holds a run of records on
    /// one line counts them and calls this once. Panics if the line is no longer where the
    /// last hit left it (the caller's promise was broken).
    #[inline]
    pub fn repeat_first_hits(
        &mut self,
        thread: u32,
        class: usize,
        line: u64,
        per_kind: &[u64; 4],
        privileged: u64,
    ) {
        let n: u64 = per_kind.iter().sum();
        if n == 0 {
            return;
        }
        let core = self.core_of(thread);
        let applied = if self.lean_ready() {
            self.repeat_last_hit_lean(core, class, line, per_kind, privileged)
        } else {
            self.hit_last_line(core, class, line, per_kind, privileged)
        };
        assert!(
            applied,
            "repeat_first_hits: line {line:#x} is not the last first-level hit"
        );
        self.records += n;
        self.line_accesses += n;
    }

    /// Whether `line` is still the last line the first level of `thread`'s core's path of
    /// class `class` served, in the slot it served it from, and not a tagged prefetch: then
    /// another access to it is a first-level hit that `repeat_first_hits` can apply, whatever
    /// else happened in the hierarchy since (`hit_last_line` touches the replacement state
    /// again when something else did; the lean engine's `repeat_last_hit_lean` always does).
    pub fn holds_last_hit(&self, thread: u32, class: usize, line: u64) -> bool {
        let core = self.core_of(thread);
        let last = &self.last[core][class];
        let path = &self.paths[core][class];
        if last.line != line || path.len == 0 {
            return false;
        }
        let h = path.get(0);
        let cache = &self.levels[h.level as usize].caches[h.instance as usize];
        cache.line_at(last.slot) == line && !cache.meta(last.slot).prefetched()
    }

    /// The level that serves first on the path of `thread`'s core of class `class` (0 data, 1
    /// instructions), or `None` when no level serves that class.
    pub fn first_level(&self, thread: u32, class: usize) -> Option<u8> {
        let path = &self.paths[self.core_of(thread)][class];
        (path.len > 0).then(|| path.get(0).level)
    }

    /// Whether a write that hits the first level of `thread`'s core's path of class `class`
    /// can be an `access_first_hit` (the level is write-back; a write-through one sends it on).
    pub fn first_level_write_back(&self, thread: u32, class: usize) -> bool {
        let path = &self.paths[self.core_of(thread)][class];
        path.len > 0 && self.levels[path.get(0).level as usize].write_back
    }

    /// Whether `thread`'s core has distinct first-level caches for data and instructions, so
    /// a first-level hit on one path changes nothing the other path's last hit depends on.
    pub fn first_levels_split(&self, thread: u32) -> bool {
        let [data, instructions] = &self.paths[self.core_of(thread)];
        data.len > 0 && instructions.len > 0 && data.get(0) != instructions.get(0)
    }

    /// One demand access to one line.
    #[inline]
    pub(super) fn access_line(
        &mut self,
        core: usize,
        kind: Kind,
        line: u64,
        privileged: bool,
    ) -> u8 {
        self.line_accesses += 1;
        let path = self.paths[core][kind.is_instruction() as usize];
        let n = path.len as usize;
        if n == 0 {
            self.unserved += 1;
            return SERVED_BY_MEMORY;
        }
        let class = kind.is_instruction() as usize;
        let mut one = [0u64; 4];
        one[kind as usize] = 1;
        if self.hit_last_line(core, class, line, &one, privileged as u64) {
            return path.get(0).level;
        }
        let mut first_slot = None;
        let mut first_touched = false;
        let mut first_epoch = 0;
        let mut hit_depth = n;
        let mut moved_dirty = false;
        // Where each missing level would put the line. Fills go deepest first, and without
        // back-invalidation nothing a deeper fill does (evictions, write-backs further down)
        // changes a shallower set, so the lookup's scan is reused instead of repeated.
        let mut misses = [Miss {
            set: 0,
            base: 0,
            free: 0,
        }; MAX_DEPTH];
        #[allow(clippy::needless_range_loop)] // `d` also indexes the path
        for d in 0..n {
            let h = path.get(d);
            let lv = h.level as usize;
            let level = &mut self.levels[lv];
            let cache = &mut level.caches[h.instance as usize];
            let counters = &mut level.counters[h.instance as usize];
            let slot = match cache.lookup(line) {
                Lookup::Hit(slot) => Some(slot),
                Lookup::Miss(m) => {
                    misses[d] = m;
                    None
                }
            };
            counters.privileged.accesses += privileged as u64;
            if let Some(slot) = slot {
                counters.access(kind, true);
                cache.touch(slot);
                if d == 0 {
                    first_epoch = cache.epoch();
                }
                let m = cache.meta_mut(slot);
                let mut prefetched_hit = false;
                if m.flags & flags::PREFETCHED != 0 {
                    m.flags &= !flags::PREFETCHED;
                    counters.prefetches_useful += 1;
                    prefetched_hit = true;
                }
                if prefetched_hit
                    && self.prefetch_enabled
                    && level.prefetchers[h.instance as usize].kind() != PrefetcherKind::None
                {
                    let flags = if privileged { flags::PRIVILEGED } else { 0 };
                    self.prefetch(&path, d, line, flags);
                }
                hit_depth = d;
                if d == 0 {
                    first_slot = Some(slot);
                    first_touched = true;
                }
                if d > 0 && self.inclusion == Inclusion::Exclusive && lv == self.levels.len() - 1 {
                    // A victim-cache hit moves the line up (it is filled above, below).
                    let m = self.levels[lv].caches[h.instance as usize]
                        .invalidate(line)
                        .unwrap_or_default();
                    moved_dirty = m.dirty();
                }
                break;
            }
            counters.access(kind, false);
            counters.privileged.misses += privileged as u64;
        }
        if hit_depth == n {
            self.memory.reads += 1;
        }
        let base_flags = if privileged { flags::PRIVILEGED } else { 0 };
        let mut deepest_filled = true;
        for d in (0..hit_depth).rev() {
            let h = path.get(d);
            let lv = h.level as usize;
            if self.is_exclusive_last(lv) {
                continue;
            }
            if kind.is_write() && !self.levels[lv].write_allocate {
                continue;
            }
            let mut f = base_flags;
            if deepest_filled && moved_dirty {
                f |= flags::DIRTY;
            }
            deepest_filled = false;
            let meta = LineMeta {
                asid: 0,
                flags: f,
                reuse: 0,
            };
            let slot = if self.inclusion == Inclusion::Inclusive {
                self.fill(&path, d, line, meta, privileged)
            } else {
                let (slot, ev) =
                    self.levels[lv].caches[h.instance as usize].fill_at(misses[d], line, meta);
                if let Some(ev) = ev {
                    self.evicted(&path, d, ev, privileged);
                }
                slot
            };
            if d == 0 {
                first_slot = Some(slot);
            }
            if self.prefetch_enabled
                && self.levels[lv].prefetchers[h.instance as usize].kind() != PrefetcherKind::None
            {
                self.prefetch(&path, d, line, base_flags);
            }
        }
        if kind.is_write() {
            self.write(&path, 0, line);
        }
        self.last[core][class] = match first_slot {
            Some(slot) => LastLine {
                line,
                slot,
                touched: first_touched,
                epoch: first_epoch,
            },
            None => LastLine::default(),
        };
        if hit_depth == n {
            SERVED_BY_MEMORY
        } else {
            path.get(hit_depth).level
        }
    }

    /// Apply a store's data at the first level (from depth `from`) holding the line.
    pub(super) fn write(&mut self, path: &Path, from: usize, line: u64) {
        for d in from..path.len as usize {
            let h = path.get(d);
            let level = &mut self.levels[h.level as usize];
            let cache = &mut level.caches[h.instance as usize];
            if let Some(slot) = cache.find(line) {
                if level.write_back {
                    cache.meta_mut(slot).flags |= flags::DIRTY;
                    return;
                }
                level.counters[h.instance as usize].write_throughs += 1;
            }
        }
        self.memory.writes += 1;
    }

    /// Fill `line` into the cache at depth `d` of `path` and deal with what it evicts.
    /// `privileged`: the mode of the demand access that started this fill (directly, or by a
    /// write-back, victim fill or prefetch it set off), to which any eviction is attributed.
    pub(super) fn fill(
        &mut self,
        path: &Path,
        d: usize,
        line: u64,
        meta: LineMeta,
        privileged: bool,
    ) -> Slot {
        let h = path.get(d);
        let (slot, ev) = self.levels[h.level as usize].caches[h.instance as usize].fill(line, meta);
        if let Some(ev) = ev {
            self.evicted(path, d, ev, privileged);
        }
        slot
    }

    /// A valid line left the cache at depth `d` of `path`, pushed out by a fill that an access
    /// of mode `privileged` started.
    pub(super) fn evicted(&mut self, path: &Path, d: usize, mut ev: Evicted, privileged: bool) {
        let h = path.get(d);
        let lv = h.level as usize;
        let c = &mut self.levels[lv].counters[h.instance as usize];
        c.evictions += 1;
        c.privileged.evictions += privileged as u64;
        if self.inclusion == Inclusion::Inclusive {
            for i in 0..self.uppers[lv][h.instance as usize].len() {
                let up = self.uppers[lv][h.instance as usize][i];
                if let Some(m) =
                    self.levels[up.level as usize].caches[up.instance as usize].invalidate(ev.line)
                {
                    self.levels[lv].counters[h.instance as usize].back_invalidations += 1;
                    if m.dirty() {
                        // The copy above is newer than this one; it leaves with the victim.
                        ev.meta.flags |= flags::DIRTY;
                    }
                }
            }
        }
        let below = d + 1;
        if below < path.len as usize && self.is_exclusive_last(path.get(below).level as usize) {
            // Exclusive: every line leaving the level above the victim cache goes into it.
            let vh = path.get(below);
            if ev.meta.dirty() {
                self.levels[lv].counters[h.instance as usize].writebacks += 1;
            }
            let vc = &mut self.levels[vh.level as usize];
            vc.counters[vh.instance as usize].victim_fills += 1;
            let cache = &mut vc.caches[vh.instance as usize];
            if let Some(slot) = cache.find(ev.line) {
                // Another core's path may have left a copy there.
                cache.meta_mut(slot).flags |= ev.meta.flags & flags::DIRTY;
            } else {
                let meta = LineMeta {
                    reuse: 0,
                    flags: ev.meta.flags & !flags::PREFETCHED,
                    ..ev.meta
                };
                self.fill(path, below, ev.line, meta, privileged);
            }
            return;
        }
        if ev.meta.dirty() {
            self.levels[lv].counters[h.instance as usize].writebacks += 1;
            self.write_back(path, below, ev.line, ev.meta, privileged);
        }
    }

    /// A dirty line arrives at depth `d` of `path` (or memory past the end); `privileged` is
    /// the mode of the access whose fill evicted it.
    pub(super) fn write_back(
        &mut self,
        path: &Path,
        d: usize,
        line: u64,
        meta: LineMeta,
        privileged: bool,
    ) {
        if d >= path.len as usize {
            self.memory.writes += 1;
            return;
        }
        let h = path.get(d);
        let level = &mut self.levels[h.level as usize];
        let c = &mut level.counters[h.instance as usize];
        c.writebacks_received += 1;
        let cache = &mut level.caches[h.instance as usize];
        if let Some(slot) = cache.find(line) {
            cache.meta_mut(slot).flags |= flags::DIRTY;
            return;
        }
        let below = d + 1;
        if below < path.len as usize && self.is_exclusive_last(path.get(below).level as usize) {
            let vh = path.get(below);
            let victim_cache = &mut self.levels[vh.level as usize];
            if let Some(slot) = victim_cache.caches[vh.instance as usize].find(line) {
                victim_cache.counters[vh.instance as usize].writebacks_received += 1;
                victim_cache.caches[vh.instance as usize]
                    .meta_mut(slot)
                    .flags |= flags::DIRTY;
                return;
            }
        }
        let c = &mut self.levels[h.level as usize].counters[h.instance as usize];
        c.writeback_fills += 1;
        let meta = LineMeta {
            flags: (meta.flags & flags::PRIVILEGED) | flags::DIRTY,
            reuse: 0,
            ..meta
        };
        self.fill(path, d, line, meta, privileged);
    }

    /// The prefetcher at depth `d` saw a demand miss to `line`, or a first hit on a line it
    /// prefetched. `base_flags` carries the triggering access's mode (`flags::PRIVILEGED`):
    /// the prefetched lines are marked with it and the evictions their fills cause are
    /// attributed to it (a prefetch is part of the chain its demand access started).
    pub(super) fn prefetch(&mut self, path: &Path, d: usize, line: u64, base_flags: u8) {
        let h = path.get(d);
        let privileged = base_flags & flags::PRIVILEGED != 0;
        let mut cand = [0u64; MAX_DEGREE as usize];
        let k =
            self.levels[h.level as usize].prefetchers[h.instance as usize].on_miss(line, &mut cand);
        for &p in &cand[..k] {
            if self.levels[h.level as usize].caches[h.instance as usize].contains(p) {
                continue;
            }
            self.levels[h.level as usize].counters[h.instance as usize].prefetches_issued += 1;
            // Look the line up below; fill every level from the one that found it up to `d`.
            let n = path.len as usize;
            let mut found = n;
            for e in d + 1..n {
                let hh = path.get(e);
                let level = &mut self.levels[hh.level as usize];
                let c = &mut level.counters[hh.instance as usize];
                c.prefetch_accesses += 1;
                if level.caches[hh.instance as usize].contains(p) {
                    found = e;
                    break;
                }
                c.prefetch_misses += 1;
            }
            // Found in the victim cache: the line moves up out of it, as on a demand hit there
            // (an exclusive last level holds no line the level above it holds), its dirty bit
            // going to the deepest level filled.
            let mut moved_dirty = false;
            if found == n {
                self.memory.reads += 1;
            } else if self.is_exclusive_last(path.get(found).level as usize) {
                let vh = path.get(found);
                moved_dirty = self.levels[vh.level as usize].caches[vh.instance as usize]
                    .invalidate(p)
                    .is_some_and(|m| m.dirty());
            }
            for e in (d..found).rev() {
                if self.is_exclusive_last(path.get(e).level as usize) {
                    continue;
                }
                let mut f = if e == d {
                    base_flags | flags::PREFETCHED
                } else {
                    base_flags
                };
                if std::mem::take(&mut moved_dirty) {
                    f |= flags::DIRTY;
                }
                self.fill(
                    path,
                    e,
                    p,
                    LineMeta {
                        asid: 0,
                        flags: f,
                        reuse: 0,
                    },
                    privileged,
                );
            }
        }
    }
}
