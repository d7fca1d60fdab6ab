/*!
The burst/batch engine: a burst of up to `BURST` records of one thread on one core
(`run_burst`), either one access at a time through the chip (`step`, `step_pages`) or, without
a sampler, batched: TLB-hit records translated in one loop (`burst_hits`), their physical
accesses collected (`defer`, `batch.rs`) and run through the hierarchy as one block with its
look-ahead, then charged count by count (`flush_batch`). Both orders give the same accesses in
the same order (translation never depends on the caches), so the same results; the batched one
is the fast path (docs/PERFORMANCE.md). On a hierarchy the lean engine does not run on this path
(the paper presets), a burst's TLB-hit run is stepped in one loop instead (`burst_steps`).
*/
use super::*;

impl System {
    /// Move what `core` counted since the last save to the thread that was running.
    pub(super) fn save_counts(&mut self, core: usize) {
        if self.realistic.is_some() {
            // The per-thread virtual counters take what the core counted for the thread that
            // ran, before another one runs (the OS's save on a context switch).
            self.observe(core);
        }
        let c = &mut self.cores[core];
        if let Some(t) = c.current {
            let d = c.tally.since(&c.burst_start);
            self.threads[t].tally.add(&d);
        }
        c.burst_start = c.tally;
        c.saved = Some((c.current, c.clock_milli));
    }

    /// `save_counts`, unless it would change nothing: the core's tally, clock and running
    /// thread are as the last save left them (the usual case at a burst's start, right after
    /// the previous burst's end on the same core). Then the thread's delta is zero and the
    /// counters' observation sees no event and no cycle (callgrind on a captured trace: the
    /// realistic PMU's observation at every burst's start was about 3% of the system's host
    /// instructions).
    fn save_counts_if_changed(&mut self, core: usize) {
        let c = &self.cores[core];
        if c.saved != Some((c.current, c.clock_milli)) || c.tally != c.burst_start {
            self.save_counts(core);
        }
    }

    pub(super) fn run_burst(&mut self, core: usize) -> Result<(), Error> {
        self.save_counts_if_changed(core);
        let clock = self.cores[core].clock_milli;
        let c = &mut self.cores[core];
        let tid = match c.current {
            Some(t) if clock < c.slice_end || c.queue.is_empty() => t,
            prev => {
                // Start, or the time slice is over and another thread waits: round-robin.
                if let Some(t) = prev {
                    c.queue.push_back(t);
                }
                let n = c.queue.pop_front().expect("checked by run");
                c.current = Some(n);
                c.slice_end = clock + self.slice_milli;
                c.context_switches += 1;
                self.pending.push(SchedEvent::Switch {
                    core,
                    from: prev,
                    to: n,
                });
                n
            }
        };
        // Without a sampler to interrupt it (and a hierarchy the lean engine runs), a burst is
        // batched: its records are translated in order, their physical accesses (walk reads,
        // data, a recolor's copies) collected and run through the hierarchy as one block with
        // its look-ahead, then charged in order. The same accesses in the same order as one at
        // a time: translation never depends on the caches, and nothing else runs meanwhile.
        let chip = self.cores[core].chip;
        let lean = self.chips[chip].uses_lean_engine();
        // A sampler, or the per-page LLC profile (`keep_page_llc`), needs each access's level:
        // one record at a time.
        let watched = self.cores[core].sampler.is_some() || self.page_llc.is_some();
        let batched = self.batching && !watched && lean;
        self.batch.on = batched;
        // Under the queued memory model each access of a batch is timed at its own record's
        // clock when the batch is flushed (`queue_batch`).
        let timed = !self.controllers.is_empty();
        // Not batched (a hierarchy the lean engine does not run: every paper preset is
        // inclusive or exclusive), but nothing samples: the TLB-hit run of a burst is stepped
        // in one loop (`burst_steps`), the same accesses charged the same way.
        let stepped_runs = self.batching && !batched && !watched;
        // The burst's records, a few host lines of a thread buffer the other cores' bursts
        // have since pushed out of the host's caches: fetched together rather than one miss
        // at a time as the loop reaches them.
        let th = &self.threads[tid];
        let ahead = th.buf.len().min(th.pos + BURST + HOST_AHEAD);
        let line_records = (64 / std::mem::size_of::<Record>()).max(1);
        for i in (th.pos..ahead).step_by(line_records) {
            crate::cache::prefetch_read(&th.buf[i]);
        }
        if batched {
            // The L2 TLB sets of the burst's first records: the loop prefetches them
            // `HOST_AHEAD` records ahead, but what it prefetched for them at the end of the
            // thread's previous burst is gone after the other cores' bursts (perf: a hit's
            // loads of keys, frame and last use stalled on most of `translate`'s samples).
            let tlb = &self.cores[core].tlbs[L2TLB];
            for r in &th.buf[th.pos..th.buf.len().min(th.pos + HOST_AHEAD)] {
                tlb.prefetch(r.addr >> self.page_shift);
            }
        }
        let mut exited = false;
        let mut left = BURST;
        while left > 0 {
            let mut walked = None;
            if batched || stepped_runs {
                let (taken, walk) = if batched {
                    self.burst_hits(core, tid, left)
                } else {
                    self.burst_steps(core, tid, left)
                };
                left -= taken;
                if walk.is_none() && left == 0 {
                    break;
                }
                // Else a record whose TLB lookups missed, or the next record crosses a page or
                // the buffer needs refilling: as unbatched.
                walked = walk;
            }
            let stepped = match walked {
                // The walk's reads and any fault's kernel work move the clock where the records
                // before it left it (`step_outside_batch`).
                Some(r) if self.batch.on && timed => self.step_outside_batch(core, tid, &r, true),
                Some(r) => self.step_walked(core, tid, &r),
                None => {
                    left -= 1;
                    let th = &mut self.threads[tid];
                    if th.pos == th.buf.len() {
                        th.pos = 0;
                        match th.source.next_block(&mut th.buf) {
                            Ok(true) => {}
                            Ok(false) => {
                                exited = true;
                                break;
                            }
                            Err(e) => {
                                self.batch.abandon();
                                return Err(e.into());
                            }
                        }
                    }
                    let th = &mut self.threads[tid];
                    let r = th.buf[th.pos];
                    th.pos += 1;
                    if let Some(&ahead) = th.buf.get(th.pos + HOST_AHEAD) {
                        if batched {
                            // The L2 TLB set that record's translation will look up (the
                            // engine and `step` prefetch the cache sets once translated).
                            self.cores[core].tlbs[L2TLB].prefetch(ahead.addr >> self.page_shift);
                        } else if lean {
                            // (The general path has no host prefetch: nothing to look up.)
                            let pid = th.pid;
                            self.host_prefetch(core, pid, &ahead);
                        }
                    }
                    self.step(core, tid, &r)
                }
            };
            if let Err(e) = stepped {
                self.batch.abandon();
                return Err(e);
            }
            self.deliver_samples(core);
            if self.cores[core].current != Some(tid) {
                break; // a policy moved it elsewhere
            }
        }
        if batched {
            self.batch.on = false;
            self.flush_batch(core);
        }
        if exited {
            self.threads[tid].done = true;
            self.save_counts(core);
            self.cores[core].current = None;
            self.thread_exited(tid);
        }
        self.save_counts(core);
        self.rotate_counters(core);
        Ok(())
    }

    /// Hand the samples a record's access took to the policy.
    #[inline(always)]
    pub(super) fn deliver_samples(&mut self, core: usize) {
        if !self.samples_due.is_empty() {
            for sample in std::mem::take(&mut self.samples_due) {
                self.run_hook(core, |p, k| p.sample(k, &sample));
            }
        }
    }

    /// One record of thread `tid` on `core`. A batched burst's common case, a record within
    /// one page that a TLB translates, is inlined into the burst loop; a one-page record whose
    /// TLB lookups missed takes `step_walked`, any other `step_pages` (callgrind on
    /// examples/os/speed-4core.toml: the call cost about 30 host instructions per reference).
    #[inline(always)]
    pub(super) fn step(&mut self, core: usize, tid: usize, r: &Record) -> Result<(), Error> {
        let size = r.size.max(1) as u64;
        let first_page = r.addr >> self.page_shift;
        let last_page = r.addr.saturating_add(size - 1) >> self.page_shift;
        if self.batch.on {
            let pid = self.threads[tid].pid;
            if first_page == last_page {
                if let Some(pfn) = self.cores[core].tlb_translate(pid as u32, first_page, r.kind) {
                    self.defer_page(core, tid, r, pfn, 0);
                    return Ok(());
                }
                if self.controllers.is_empty() {
                    return self.step_walked(core, tid, r);
                }
            }
            if !self.controllers.is_empty() {
                return self.step_outside_batch(core, tid, r, first_page == last_page);
            }
        }
        self.step_unbatched(core, tid, r)
    }

    /// A record of a batched burst under the queued model that is not a TLB hit within one page
    /// (`walked`: a one-page record whose TLB lookups both missed, counted; else one crossing
    /// pages): the batch so far goes through first, then this record one at a time, and the
    /// burst goes on batching. `queue_batch` times one TLB hit per record at the clock the
    /// records before it left; a walk, a fault or a page's second part would move that clock
    /// or reach the controller inside the batch.
    fn step_outside_batch(
        &mut self,
        core: usize,
        tid: usize,
        r: &Record,
        walked: bool,
    ) -> Result<(), Error> {
        self.flush_batch(core);
        self.batch.on = false;
        let stepped = if walked {
            self.step_walked(core, tid, r)
        } else {
            self.step_unbatched(core, tid, r)
        };
        self.batch.on = true;
        stepped
    }

    /// `step` one access at a time (or, in a batched burst, a record crossing pages under the
    /// fixed-latency model: deferred page by page by `step_pages`).
    fn step_unbatched(&mut self, core: usize, tid: usize, r: &Record) -> Result<(), Error> {
        // Milli-cycles charged to the core's breakdown by this record (kernel work included
        // is charged by `charge_kernel`, which moves the clock itself).
        let mut spent = 0;
        self.step_pages(core, tid, r, &mut spent)?;
        let floor = self.threads[tid].icount_floor;
        self.charge_records(core, 1, (r.icount as u64).max(floor), spent);
        Ok(())
    }

    /// Defer one-page record `r` of thread `tid`, translated to frame `pfn`, and charge it
    /// beside the `spent` milli-cycles its translation cost.
    #[inline(always)]
    pub(super) fn defer_page(&mut self, core: usize, tid: usize, r: &Record, pfn: u64, spent: u64) {
        let page_mask = (1u64 << self.page_shift) - 1;
        let paddr = (pfn << self.page_shift) | (r.addr & page_mask);
        self.defer(core, r, paddr, r.size.max(1), r.kind.is_instruction() as u8);
        let floor = self.threads[tid].icount_floor;
        self.charge_records(core, 1, (r.icount as u64).max(floor), spent);
    }

    /// Charge `references` records of `instructions` instructions in all to `core`, beside
    /// `spent` milli-cycles of their accesses.
    #[inline(always)]
    pub(super) fn charge_records(
        &mut self,
        core: usize,
        references: u64,
        instructions: u64,
        spent: u64,
    ) {
        let c = &mut self.cores[core];
        let spent = spent
            + self
                .timing
                .instructions(&mut c.tally.breakdown, instructions);
        c.tally.instructions += instructions;
        c.tally.references += references;
        c.clock_milli += spent;
    }

    /// `step` for a one-page record of a batched burst or a stepped run (`burst_steps`) whose
    /// TLB lookups (`Core::tlb_translate`) both missed: the walk, then as `step`.
    #[inline(never)]
    pub(super) fn step_walked(&mut self, core: usize, tid: usize, r: &Record) -> Result<(), Error> {
        let pid = self.threads[tid].pid;
        let mut spent = 0;
        let vpn = r.addr >> self.page_shift;
        let (pfn, tlb_missed) = self.translate_walk(core, pid, vpn, r.kind, &mut spent)?;
        let page_mask = (1u64 << self.page_shift) - 1;
        let paddr = (pfn << self.page_shift) | (r.addr & page_mask);
        spent += self.demand_access(core, tid, r, r.addr, paddr, r.size.max(1), tlb_missed);
        let floor = self.threads[tid].icount_floor;
        self.charge_records(core, 1, (r.icount as u64).max(floor), spent);
        Ok(())
    }

    /// An unbatched burst's run of records that need nothing but the TLBs (no sampler): each
    /// within one page and in the thread's buffer, at most `max`. Each is translated, sent
    /// through the chip, and charged exactly as `step` and `step_pages` would one at a time
    /// (the same calls in the same order, the core's clock moved after each record so the
    /// memory controller sees the same times), with the thread, the core, the chip and the
    /// controllers borrowed once for the run; a first-level hit
    /// (`Hierarchy::access_first_hit`) skips the traffic's bookkeeping (callgrind on the suite's
    /// matmul trace on `xeon-e5506`: `run_burst`'s, `step`'s and `step_pages`' per-record
    /// reloads, calls and bounds checks were about 400 host instructions per record).
    ///
    /// The records after a first-level hit that stay on its line, of its class (data or
    /// instructions), are only counted (`LineRun`) and applied together when the run ends: the
    /// L1 TLB's repeated hits (`Tlb::repeat_hits`), the first level's (`repeat_first_hits`),
    /// the tally's and the stall charges by their sums. That is exact: nothing else looks at
    /// that TLB or that cache line meanwhile (the other class has its own L1 TLB and, where
    /// a run is kept at all, its own first-level cache), every charge is a sum, a run is
    /// applied before anything reads the core's clock (an access that misses the first level,
    /// for its memory controller), and after such an access it goes on only if its line is
    /// still where its first-level hit left it. On a captured trace most instruction fetches
    /// and many data references are such repeats (docs/PERFORMANCE.md).
    ///
    /// Returns how many records it took, and the last of them if its TLB lookups both missed
    /// (counted; the caller finishes it with `step_walked`). Stops before a record crossing a
    /// page or at the buffer's end.
    pub(super) fn burst_steps(
        &mut self,
        core: usize,
        tid: usize,
        max: usize,
    ) -> (usize, Option<Record>) {
        debug_assert!(!self.batch.on);
        let page_shift = self.page_shift;
        let page_mask = (1u64 << page_shift) - 1;
        let line_shift = self.line_size.trailing_zeros();
        let line_mask = self.line_size - 1;
        let th = &mut self.threads[tid];
        let asid = th.pid as u32;
        let floor = th.icount_floor;
        let c = &mut self.cores[core];
        debug_assert!(c.sampler.is_none());
        let (chips, coherence, controllers) =
            (&mut self.chips, &mut self.coherence, &mut self.controllers);
        let one_chip = chips.len() == 1;
        let (timing, paths) = (&self.timing, &self.paths);
        // Runs are kept only where the two classes' first levels are distinct caches, and
        // a store joins one only where it would be a first-level hit (a write-back first
        // level) that no other chip must hear of (one chip: otherwise each store's coherence
        // check is made as before).
        let chip = &chips[c.chip];
        let keep_runs = chip.first_levels_split(c.local);
        let writes_join = [0, 1].map(|k| one_chip && chip.first_level_write_back(c.local, k));
        let mut runs = [LineRun::NONE; 2];
        let (mut taken, mut walk) = (0, None);
        while taken < max && th.pos < th.buf.len() {
            let r = &th.buf[th.pos];
            let class = r.kind.is_instruction() as usize;
            let run = &mut runs[class];
            if r.addr >> line_shift == run.vline
                && (r.addr & line_mask) + r.size.max(1) as u64 <= line_mask + 1
                && (!r.kind.is_write() || writes_join[class])
            {
                run.per_kind[r.kind as usize] += 1;
                run.privileged += r.privileged as u64;
                run.instructions += (r.icount as u64).max(floor);
                th.pos += 1;
                taken += 1;
                continue;
            }
            if (r.addr & page_mask) + r.size as u64 > page_mask + 1 {
                break;
            }
            th.pos += 1;
            taken += 1;
            // This record's lookups come after the run's on its class's L1 TLB and cache.
            if runs[class].counted() {
                runs[class].apply(class, asid, c, &mut chips[c.chip], timing, paths);
            }
            let Some(pfn) = c.tlb_translate(asid, r.addr >> page_shift, r.kind) else {
                walk = Some(*r);
                break;
            };
            let part = Record {
                addr: (pfn << page_shift) | (r.addr & page_mask),
                thread: c.local,
                size: r.size.max(1),
                ..*r
            };
            let path = r.kind.is_instruction() as usize;
            let instructions = (r.icount as u64).max(floor);
            let b = &mut c.tally.breakdown;
            let mut spent = timing.instructions(b, instructions);
            if let Some(served) = chips[c.chip].access_first_hit(&part) {
                // A first-level hit: no line moved, no memory traffic, no queueing, nothing
                // another chip must see but a write (`chip_access` without the bookkeeping).
                if !one_chip && r.kind.is_write() {
                    coherence.after_access(chips, c.chip, &part, false);
                }
                let s = c.tally.serve(&paths[path], served, false);
                spent += timing.reference(&mut c.tally.breakdown, s);
                if keep_runs {
                    runs[class] = LineRun {
                        vline: r.addr >> line_shift,
                        vpn: r.addr >> page_shift,
                        pline: part.addr >> line_shift,
                        level: served,
                        ..LineRun::NONE
                    };
                }
            } else {
                // The other class's run first: this access may move lines, and the memory
                // controller reads the core's clock. A run goes on after it only where its
                // line is still the first level's last hit (`holds_last_hit`).
                let other = 1 - class;
                if runs[other].counted() {
                    runs[other].apply(other, asid, c, &mut chips[c.chip], timing, paths);
                }
                let (served, remote, delay) = chip_access(chips, coherence, controllers, c, &part);
                for (k, run) in runs.iter_mut().enumerate() {
                    if run.vline != u64::MAX && !chips[c.chip].holds_last_hit(c.local, k, run.pline)
                    {
                        *run = LineRun::NONE;
                    }
                }
                // As `step_pages`' charge of the access, then `step`'s `charge_records`.
                let s = c.tally.serve(&paths[path], served, remote);
                let b = &mut c.tally.breakdown;
                spent += timing.reference(b, s) + timing.bandwidth(b, delay, false);
            }
            c.tally.instructions += instructions;
            c.tally.references += 1;
            c.clock_milli += spent;
        }
        for (class, run) in runs.iter_mut().enumerate() {
            if run.counted() {
                run.apply(class, asid, c, &mut chips[c.chip], timing, paths);
            }
        }
        (taken, walk)
    }

    /// A batched burst's run of records that need nothing but the TLBs: each within one page
    /// and in the thread's buffer, at most `max`. They are translated and deferred exactly as
    /// `step` would, with the thread, the core and the batch borrowed once for the run and
    /// their instructions charged once at its end: nothing reads the core's clock or tally
    /// meanwhile (callgrind on examples/os/speed-4core.toml: `step`'s per-record reloads and
    /// bounds checks were about a tenth of the system's host instructions). Returns how many
    /// records it took, and the last of them if its TLB lookups both missed (done, counted;
    /// the caller finishes it with `step_walked`). Stops before a record crossing a page or at
    /// the buffer's end, for `step`.
    pub(super) fn burst_hits(
        &mut self,
        core: usize,
        tid: usize,
        max: usize,
    ) -> (usize, Option<Record>) {
        let page_shift = self.page_shift;
        let page_mask = (1u64 << page_shift) - 1;
        let th = &mut self.threads[tid];
        let asid = th.pid as u32;
        let floor = th.icount_floor;
        let c = &mut self.cores[core];
        let chip = &mut self.chips[c.chip];
        // Each record taken adds one access and one mark: room for all of them is made here,
        // they are written in place, and the lengths set once at the end (callgrind on
        // examples/os/speed-4core.toml: pushing them one by one, with its capacity checks and
        // length updates, cost about 20 host instructions per reference).
        let start = self.batch.accesses.len();
        debug_assert_eq!(start, self.batch.marks.len());
        if start == 0 {
            self.batch.start_milli = c.clock_milli;
        }
        self.batch.accesses.reserve(max);
        self.batch.marks.reserve(max);
        let parts = &mut self.batch.accesses.spare_capacity_mut()[..max];
        let marks = &mut self.batch.marks.spare_capacity_mut()[..max];
        let (mut taken, mut deferred, mut instructions, mut walk) = (0, 0, 0, None);
        while taken < max && th.pos < th.buf.len() {
            let r = &th.buf[th.pos];
            // Within one page: the offset plus the size (0 counts as 1, which always fits)
            // does not pass the page's end.
            if (r.addr & page_mask) + r.size as u64 > page_mask + 1 {
                break;
            }
            th.pos += 1;
            taken += 1;
            if let Some(ahead) = th.buf.get(th.pos + HOST_AHEAD) {
                c.tlbs[L2TLB].prefetch(ahead.addr >> page_shift);
            }
            let Some(pfn) = c.tlb_translate(asid, r.addr >> page_shift, r.kind) else {
                walk = Some(*r);
                break;
            };
            instructions += (r.icount as u64).max(floor);
            // As `defer`: copied whole from the thread's buffer, then the fields that
            // change set in place.
            let part = parts[deferred].write(*r);
            part.addr = (pfn << page_shift) | (r.addr & page_mask);
            part.thread = c.local;
            part.size = r.size.max(1);
            if start + deferred < HOST_AHEAD {
                chip.prefetch_host(part);
            }
            marks[deferred].write(Mark::Demand(r.kind.is_instruction() as u8));
            deferred += 1;
        }
        // SAFETY: the first `deferred` spare slots of both were written above, and `reserve`
        // made room for `max >= deferred` more.
        unsafe {
            self.batch.accesses.set_len(start + deferred);
            self.batch.marks.set_len(start + deferred);
        }
        self.charge_records(core, deferred as u64, instructions, 0);
        (taken, walk)
    }

    /// `step`'s translation and access of `r`, page by page (a record may cross pages), one
    /// access at a time unless the burst is batched; adds the cycles charged to `spent`.
    #[inline(never)]
    pub(super) fn step_pages(
        &mut self,
        core: usize,
        tid: usize,
        r: &Record,
        spent: &mut u64,
    ) -> Result<(), Error> {
        let pid = self.threads[tid].pid;
        let page_mask = (1u64 << self.page_shift) - 1;
        let size = r.size.max(1) as u64;
        let first_page = r.addr >> self.page_shift;
        let last_page = r.addr.saturating_add(size - 1) >> self.page_shift;
        for vpn in first_page..=last_page {
            let start = if vpn == first_page {
                r.addr
            } else {
                vpn << self.page_shift
            };
            let end = if vpn == last_page {
                r.addr.saturating_add(size - 1)
            } else {
                (vpn << self.page_shift) | page_mask
            };
            let (pfn, tlb_missed) = self.translate(core, pid, vpn, r.kind, spent)?;
            let paddr = (pfn << self.page_shift) | (start & page_mask);
            let size = (end - start + 1) as u16;
            *spent += self.demand_access(core, tid, r, start, paddr, size, tlb_missed);
        }
        Ok(())
    }

    /// The access of `size` bytes at physical `paddr` (virtual `vaddr`) that record `r` of
    /// thread `tid` makes on `core`, translated (`tlb_missed`: its TLB lookups both missed):
    /// one at a time, through the chip (`access`), counted on its path, its latency and
    /// queueing delay charged (returned, milli-cycles), and on the data path counted in the
    /// per-page LLC profile and offered to the sampler; or, in a batched burst, added to the
    /// batch and charged when it is flushed (returns 0).
    #[allow(clippy::too_many_arguments)]
    fn demand_access(
        &mut self,
        core: usize,
        tid: usize,
        r: &Record,
        vaddr: u64,
        paddr: u64,
        size: u16,
        tlb_missed: bool,
    ) -> u64 {
        let path = r.kind.is_instruction() as usize;
        if self.batch.on {
            self.defer(core, r, paddr, size, path as u8);
            return 0;
        }
        let part = Record {
            addr: paddr,
            thread: self.cores[core].local,
            size,
            ..*r
        };
        let (served, remote, delay) = self.access(core, &part);
        let c = &mut self.cores[core];
        let s = c.tally.serve(&self.paths[path], served, remote);
        let spent = self.timing.reference(&mut c.tally.breakdown, s)
            + self.timing.bandwidth(&mut c.tally.breakdown, delay, false);
        if path == 0 {
            self.tally_page_llc(tid, vaddr, served, remote);
            if self.cores[core].sampler.is_some() {
                self.maybe_sample(core, tid, vaddr, paddr, r.kind, served, remote, tlb_missed);
            }
        }
        spent
    }

    /// Send a physical reference through `core`'s chip, keeping the chips coherent, and its
    /// memory traffic through the chip's controller. Returns the level that served it locally
    /// (or memory), whether another chip's cache served it, and the queueing delay of its read
    /// from memory (milli-cycles; 0 unless memory served it under the queued model).
    #[inline]
    pub(super) fn access(&mut self, core: usize, rec: &Record) -> (u8, bool, u64) {
        let c = &mut self.cores[core];
        chip_access(
            &mut self.chips,
            &mut self.coherence,
            &mut self.controllers,
            c,
            rec,
        )
    }

    /// A record of `pid` comes `HOST_AHEAD` places later on `core`: if the L2 TLB already
    /// translates it, have the host prefetch the simulated sets it will visit (the system's
    /// version of `run_block`'s look-ahead; changes nothing simulated).
    #[inline]
    pub(super) fn host_prefetch(&mut self, core: usize, pid: usize, r: &Record) {
        let c = &self.cores[core];
        if let Some(pfn) = c.tlbs[L2TLB].peek(pid as u32, r.addr >> self.page_shift) {
            let page_mask = (1u64 << self.page_shift) - 1;
            let rec = Record {
                addr: (pfn << self.page_shift) | (r.addr & page_mask),
                thread: c.local,
                ..*r
            };
            self.chips[c.chip].prefetch_host(&rec);
        }
    }
}

/// `System::access` on the parts of the system it uses, so that a loop holding the core (as
/// `burst_steps`) can call it: the reference through core `c`'s chip, the other chips kept
/// coherent, the traffic counted on the core and queued at the chip's controller.
#[inline]
fn chip_access(
    chips: &mut [Hierarchy],
    coherence: &mut Coherence,
    controllers: &mut [crate::dram::Controller],
    c: &mut Core,
    rec: &Record,
) -> (u8, bool, u64) {
    let chip = c.chip;
    let before = chips[chip].memory_traffic();
    let served = chips[chip].access(rec);
    let remote = coherence.after_access(chips, chip, rec, served == SERVED_BY_MEMORY);
    let after = chips[chip].memory_traffic();
    // A line another chip's cache served was counted as a memory read by the local chip's
    // hierarchy: it never reached the controller.
    let demand = served == SERVED_BY_MEMORY && !remote;
    let reads = after.reads - before.reads - (served == SERVED_BY_MEMORY && remote) as u64;
    let writes = after.writes - before.writes;
    c.tally.mem_reads += reads;
    c.tally.mem_writes += writes;
    let mut delay = 0;
    if let Some(ctl) = controllers.get_mut(chip) {
        let at = c.clock_milli;
        let mut background = reads;
        if demand && reads > 0 {
            delay = ctl.read(at);
            background -= 1;
        }
        ctl.background(at, background, writes);
    }
    (served, remote, delay)
}

/// The records of one class that `burst_steps` has counted on the line its last first-level
/// hit served, not yet applied (`apply`).
#[derive(Clone, Copy)]
struct LineRun {
    /// The virtual line (`u64::MAX`: no run).
    vline: u64,
    vpn: u64,
    /// The physical line, and the level that served it.
    pline: u64,
    level: u8,
    per_kind: [u64; 4],
    privileged: u64,
    instructions: u64,
}

impl LineRun {
    const NONE: LineRun = LineRun {
        vline: u64::MAX,
        vpn: 0,
        pline: 0,
        level: 0,
        per_kind: [0; 4],
        privileged: 0,
        instructions: 0,
    };

    /// Whether records are counted, not yet applied. The burst loop asks before `apply`: most
    /// data records end a run that has not begun, and settling that in line saves the call.
    #[inline(always)]
    fn counted(&self) -> bool {
        self.per_kind != [0; 4]
    }

    /// Apply the counted records (`counted`) as that many TLB hits, first-level hits and
    /// charges, each the sum of theirs one at a time, and count from zero again (the run
    /// stays).
    #[inline(never)]
    fn apply(
        &mut self,
        class: usize,
        asid: u32,
        c: &mut Core,
        chip: &mut Hierarchy,
        timing: &Timing,
        paths: &[Vec<u8>; 2],
    ) {
        let n: u64 = self.per_kind.iter().sum();
        debug_assert!(n > 0, "apply of an empty run");
        let l1 = if class == 1 { L1I } else { L1D };
        c.tlbs[l1].repeat_hits(asid, self.vpn, n);
        chip.repeat_first_hits(c.local, class, self.pline, &self.per_kind, self.privileged);
        let b = &mut c.tally.breakdown;
        let mut spent = timing.instructions(b, self.instructions);
        let s = c.tally.serve_n(&paths[class], self.level, false, n);
        spent += timing.references(&mut c.tally.breakdown, s, n);
        c.tally.instructions += self.instructions;
        c.tally.references += n;
        c.clock_milli += spent;
        self.per_kind = [0; 4];
        self.privileged = 0;
        self.instructions = 0;
    }
}
