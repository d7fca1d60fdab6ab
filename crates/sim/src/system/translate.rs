/*!
Translation and the fault path: the TLBs (inlined hit path), the page walk whose entry reads go
through the caches, the page-fault handler (first touch: the policy's allowed colors, the
allocator's frame, a huge page in a huge-page region; a page marked for lazy recoloring moved
if its color is no longer allowed), page moves (allocate, copy through the caches, remap),
TLB shootdowns, and the charging of kernel work to a core, its thread and a process.
*/
use super::*;

impl System {
    /// The frame of `vpn` (and whether the TLBs missed): TLBs, else a page walk (reads
    /// through the caches), else a fault. The TLB hits, nearly every reference, are inlined
    /// into the burst loop; the walk is not (callgrind on examples/os/speed-4core.toml: the
    /// call cost about 30 host instructions per reference).
    #[inline(always)]
    pub(super) fn translate(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        kind: Kind,
        spent: &mut u64,
    ) -> Result<(u64, bool), Error> {
        match self.cores[core].tlb_translate(pid as u32, vpn, kind) {
            Some(pfn) => Ok((pfn, false)),
            None => self.translate_walk(core, pid, vpn, kind, spent),
        }
    }

    /// `translate` after both TLBs missed: the page walk, and the fault if the page is not
    /// present; fills both TLBs.
    #[inline(never)]
    pub(super) fn translate_walk(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        kind: Kind,
        spent: &mut u64,
    ) -> Result<(u64, bool), Error> {
        let asid = pid as u32;
        let l1 = if kind.is_instruction() { L1I } else { L1D };
        let c = &mut self.cores[core];
        c.tlb_l2_misses += 1;
        c.tally.tlb_misses += 1;
        let local = c.local;
        let space = self.processes[pid]
            .space
            .as_mut()
            .expect("a running process has tables");
        let walk = space.walk(vpn, kind.is_write());
        for &addr in &walk.reads {
            let read = Record {
                addr,
                thread: local,
                icount: 0,
                size: 8,
                kind: Kind::Load,
                privileged: true,
                syscall: 0,
            };
            *spent += self.walk_read(core, &read);
        }
        let t = match walk.outcome {
            WalkOutcome::Mapped { pfn, huge } => Translation { pfn, huge },
            WalkOutcome::Fault { recolor } => {
                let t = self.fault(core, pid, vpn, recolor)?;
                if !t.huge {
                    let space = self.processes[pid].space.as_mut().expect("tables");
                    space.touch(vpn, kind.is_write());
                }
                t
            }
        };
        let c = &mut self.cores[core];
        c.tlbs[L2TLB].insert(asid, vpn, t);
        c.tlbs[l1].insert(asid, vpn, t);
        Ok((t.pfn, true))
    }

    /// The page-fault handler: a first touch gets a frame of a color the policy allows (a
    /// whole huge page in a huge-page region); a page marked for lazy recoloring is moved if
    /// its color is no longer allowed (COLORIS section 3.3), else just made present again.
    pub(super) fn fault(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        recolor: bool,
    ) -> Result<Translation, Error> {
        let asid = pid as u32;
        self.cores[core].tally.faults += 1;
        let fault_cycles = self.timing.config.fault_cycles;
        self.charge_kernel(core, KernelPath::Fault, fault_cycles, Some(pid));
        let name = self.processes[pid].name.clone();
        let oom = |e: &dyn std::fmt::Display| {
            Error::Config(ConfigError::new("memory", format!("process `{name}`: {e}")))
        };
        let huge = self.processes[pid]
            .huge
            .iter()
            .any(|&(a, b)| (a..b).contains(&vpn));
        if huge {
            let base = vpn & !(ENTRIES - 1);
            let block = self
                .memory
                .alloc_block(HUGE_ORDER, Owner::Space(asid))
                .map_err(|e| oom(&e))?;
            self.clear_frames(core, pid, block, ENTRIES, block + (vpn - base));
            let p = &mut self.processes[pid];
            p.space
                .as_mut()
                .expect("tables")
                .map_huge(&mut self.memory, base, block)
                .map_err(|e| oom(&e))?;
            for i in 0..ENTRIES {
                self.memory.stamp(block + i, page_checksum(asid, base + i));
                let color = self.memory.color_of(block + i) as usize;
                p.pages_per_color[color] += 1;
            }
            p.frames += ENTRIES;
            p.huge_pages += 1;
            self.clear_new_tables(core, pid);
            return Ok(Translation {
                pfn: block + (vpn - base),
                huge: true,
            });
        }
        let allowed = self
            .policy
            .as_mut()
            .expect("policy present")
            .allowed_colors(pid, vpn)
            .clone();
        if recolor {
            // A lazy move is a fault too: it retries in widened colors as a first touch does.
            return self.alloc_widening(pid, vpn, allowed, &oom, |sys, allowed| {
                let space = sys.processes[pid].space.as_mut().expect("tables");
                let old = space.pte(vpn).expect("a marked page has tables").pfn();
                if allowed.contains(sys.memory.color_of(old)) {
                    space.remap(vpn, old);
                    return Ok(Translation {
                        pfn: old,
                        huge: false,
                    });
                }
                let new = sys.move_page(core, pid, vpn, allowed)?;
                sys.processes[pid].lazy_recolors += 1;
                Ok(Translation {
                    pfn: new,
                    huge: false,
                })
            });
        }
        let pfn = self.alloc_widening(pid, vpn, allowed, &oom, |sys, allowed| {
            let req = AllocRequest {
                allowed,
                cpu: core,
                asid,
                vpn,
            };
            sys.memory.alloc(&req, Owner::Space(asid))
        })?;
        self.clear_frames(core, pid, pfn, 1, pfn);
        self.memory.stamp(pfn, page_checksum(asid, vpn));
        let p = &mut self.processes[pid];
        p.space
            .as_mut()
            .expect("tables")
            .map(&mut self.memory, vpn, pfn)
            .map_err(|e| oom(&e))?;
        let color = self.memory.color_of(pfn) as usize;
        p.frames += 1;
        p.pages_per_color[color] += 1;
        self.clear_new_tables(core, pid);
        Ok(Translation { pfn, huge: false })
    }

    /// The fault path's one allocation with widening: `attempt` with `allowed` (`pid`'s colors
    /// for `vpn`); out of frames in them, the policy may widen them (COLORIS section 3.2:
    /// ALLOC_COLORS when a process runs out of memory in its colors, `Policy::out_of_colors`)
    /// and `attempt` runs once more with the new colors. Any other error, or a second
    /// shortage, is `oom`'s error.
    fn alloc_widening<T>(
        &mut self,
        pid: usize,
        vpn: u64,
        mut allowed: ColorSet,
        oom: &dyn Fn(&dyn std::fmt::Display) -> Error,
        mut attempt: impl FnMut(&mut System, &ColorSet) -> Result<T, MemoryError>,
    ) -> Result<T, Error> {
        let mut retried = false;
        loop {
            match attempt(self, &allowed) {
                Ok(v) => return Ok(v),
                Err(e @ MemoryError::OutOfFrames { .. }) if !retried => {
                    retried = true;
                    allowed = self
                        .widened_colors(pid, vpn, &allowed)
                        .ok_or_else(|| oom(&e))?;
                }
                Err(e) => return Err(oom(&e)),
            }
        }
    }

    /// The fault path ran out of frames in `allowed`, `pid`'s colors for `vpn`: the colors to
    /// retry with if the policy widened them (`Policy::out_of_colors`), else `None`.
    pub(super) fn widened_colors(
        &mut self,
        pid: usize,
        vpn: u64,
        allowed: &ColorSet,
    ) -> Option<ColorSet> {
        let policy = self.policy.as_mut().expect("policy present");
        if allowed.is_full() || !policy.out_of_colors(pid) {
            return None;
        }
        Some(policy.allowed_colors(pid, vpn).clone())
    }

    /// Move small page `vpn` of `pid` to a new frame of one of `allowed` colors: allocate,
    /// copy (through `core`'s caches, cost charged), remap, free the old frame. TLB entries are
    /// the caller's business.
    pub(super) fn move_page(
        &mut self,
        core: usize,
        pid: usize,
        vpn: u64,
        allowed: &ColorSet,
    ) -> Result<u64, crate::memory::MemoryError> {
        let asid = pid as u32;
        let req = AllocRequest {
            allowed,
            cpu: core,
            asid,
            vpn,
        };
        let new = self.memory.alloc(&req, Owner::Space(asid))?;
        let space = self.processes[pid].space.as_mut().expect("tables");
        let old = space.remap(vpn, new).expect("caller checked the mapping");
        self.memory.copy_page(old, new);
        // The copy reads every line of the old frame and writes every line of the new one.
        let local = self.cores[core].local;
        let lines = (1u64 << self.page_shift) / self.line_size;
        // Under the queued model, the longest a copy's read from memory waited for the
        // controller (milli-cycles): the copy is done no sooner than its last line is moved.
        let mut copy_queued = 0;
        for i in 0..lines {
            for (frame, kind) in [(old, Kind::Load), (new, Kind::Store)] {
                let rec = Record {
                    addr: (frame << self.page_shift) + i * self.line_size,
                    thread: local,
                    icount: 0,
                    size: self.line_size as u16,
                    kind,
                    privileged: true,
                    syscall: 0,
                };
                copy_queued = copy_queued.max(self.kernel_line(core, &rec));
            }
        }
        self.memory.free(old, core);
        // A page copy cannot run faster than the memory moves its lines: the copying core
        // waits for its own traffic, max(copy cost, its last read's queueing delay). Charged
        // only `copy_cycles_per_page`, the copy's lines would book the controller far past the
        // core's clock, and the next reads (a walk after the shootdown, the stream's data)
        // would each wait out that backlog instead (docs/system.md, "Memory bandwidth and
        // queueing"; `a_recolor_copy_backlog_is_paid_by_the_copier_not_amplified_over_later_reads`).
        let copy = self
            .timing
            .config
            .copy_cycles_per_page
            .max(copy_queued.div_ceil(1000));
        self.charge_kernel(core, KernelPath::Recolor, copy, Some(pid));
        self.processes[pid].frames += 1;
        Ok(new)
    }

    /// Remove `vpn` of `pid` from every core's TLBs and charge the shootdown to `core`.
    pub(super) fn shootdown(&mut self, core: usize, pid: usize, vpn: Option<u64>) {
        for c in &mut self.cores {
            for t in &mut c.tlbs {
                match vpn {
                    Some(v) => {
                        t.invalidate(pid as u32, v);
                    }
                    None => {
                        t.flush_asid(pid as u32);
                    }
                }
            }
        }
        let cycles = self.timing.config.shootdown_cycles;
        self.charge_kernel(core, KernelPath::Shootdown, cycles, Some(pid));
    }

    /// Charge `cycles` of kernel work on `path` to `core` (and its running thread, if any) and
    /// to process `pid`'s account: one more entry into `path`.
    pub(super) fn charge_kernel(
        &mut self,
        core: usize,
        path: KernelPath,
        cycles: u64,
        pid: Option<usize>,
    ) {
        self.charge_kernel_entries(core, path, cycles, pid, 1);
    }

    /// `charge_kernel` counting `entries` entries into `path`: 0 for work that is part of an
    /// entry already counted (a fault's page clear is that fault's time, not another fault).
    pub(super) fn charge_kernel_entries(
        &mut self,
        core: usize,
        path: KernelPath,
        cycles: u64,
        pid: Option<usize>,
        entries: u64,
    ) {
        let milli = cycles * 1000;
        let c = &mut self.cores[core];
        c.clock_milli += milli;
        let k = &mut c.tally.kernel[path as usize];
        k[0] += entries;
        k[1] += milli;
        if c.current.is_some() {
            c.tally.breakdown.stalls[StallCause::Kernel as usize] += milli;
        } else {
            // Nobody to charge: keep it out of the next thread's counts.
            c.idle_kernel_milli += milli;
            let k = &mut c.burst_start.kernel[path as usize];
            k[0] += entries;
            k[1] += milli;
        }
        if let Some(pid) = pid {
            let k = &mut self.processes[pid].kernel[path as usize];
            k[0] += entries;
            k[1] += milli;
        }
    }
}
