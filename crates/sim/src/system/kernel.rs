//! The kernel actions a policy may take (DESIGN.md "The policy trait"), each carried out at
//! once on the system and charged to the core running the policy's hook, except the work on
//! one process's pages (moves, marks, accessed-bit scans), which is charged to a core of that
//! process (`Ctx::core_of`).
use super::{KernelPath, System};
use crate::memory::{ColorSet, Pfn};
use crate::mmu::Pte;
use crate::pmu::{Sampler, SamplingConfig};
use crate::policy::{Kernel, KernelError, PageInfo, SchedEvent, ThreadInfo};

pub(crate) struct Ctx<'a> {
    pub sys: &'a mut System,
    pub core: usize,
}

impl Ctx<'_> {
    fn live(&self, pid: usize) -> Result<(), KernelError> {
        match self.sys.processes.get(pid) {
            Some(p) if p.space.is_some() => Ok(()),
            _ => Err(KernelError::NoProcess(pid)),
        }
    }

    /// The core that does (and is charged for) kernel work on `pid`'s pages: a core running one
    /// of its threads, the hook's core only when it has none left, so an untouched co-runner never
    /// pays for another process's pages. Eager moves had this from the start; COLORIS's lazy marks
    /// (their shootdowns) and accessed-bit scans (Redistribution) were charged to the hook's core,
    /// so the process giving colours up stalled for the one taking them (about 533 K cycles of
    /// `hungry`'s marks and scans on `small` in recolor-c6-win5).
    fn core_of(&self, pid: usize) -> usize {
        self.sys
            .threads
            .iter()
            .find(|t| t.pid == pid && !t.done)
            .map_or(self.core, |t| t.core)
    }
}

impl Kernel for Ctx<'_> {
    fn now(&self) -> u64 {
        self.sys.cores[self.core].clock_milli / 1000
    }

    fn core(&self) -> usize {
        self.core
    }

    fn cores(&self) -> usize {
        self.sys.cores.len()
    }

    fn colors(&self) -> u64 {
        self.sys.memory.colors()
    }

    fn threads(&self) -> Vec<ThreadInfo> {
        self.sys
            .threads
            .iter()
            .enumerate()
            .map(|(tid, t)| ThreadInfo {
                tid,
                pid: t.pid,
                core: t.core,
                done: t.done,
            })
            .collect()
    }

    fn pages(&self, pid: usize) -> Vec<PageInfo> {
        let Some(Some(space)) = self.sys.processes.get(pid).map(|p| p.space.as_ref()) else {
            return Vec::new();
        };
        space
            .mappings()
            .into_iter()
            .map(|(vpn, pte, huge)| PageInfo {
                vpn,
                pfn: pte.pfn(),
                color: self.sys.memory.color_of(pte.pfn()),
                accessed: pte.has(Pte::ACCESSED),
                dirty: pte.has(Pte::DIRTY),
                marked: pte.has(Pte::RECOLOR),
                huge,
            })
            .collect()
    }

    fn recolor(
        &mut self,
        pid: usize,
        vpn: u64,
        colors: &ColorSet,
    ) -> Result<Option<Pfn>, KernelError> {
        self.live(pid)?;
        let space = self.sys.processes[pid].space.as_mut().expect("live");
        let pte = match space.pte(vpn) {
            Some(e) if e.has(Pte::PRESENT) || e.has(Pte::RECOLOR) => e,
            _ => return Err(KernelError::NotMapped { pid, vpn }),
        };
        if colors.contains(self.sys.memory.color_of(pte.pfn())) {
            return Ok(None);
        }
        if let Some(c) = self.sys.control.as_mut() {
            // A control run moves no page: the policy sees "already in its colors".
            c.refused_recolors += 1;
            return Ok(None);
        }
        let core = self.core_of(pid);
        // A page waiting for a lazy move is settled too: the remap makes it present again.
        let new = self.sys.move_page(core, pid, vpn, colors)?;
        self.sys.processes[pid].recolors += 1;
        self.sys.shootdown(core, pid, Some(vpn));
        Ok(Some(new))
    }

    fn mark_for_recolor(&mut self, pid: usize, vpn: u64) -> Result<(), KernelError> {
        self.live(pid)?;
        let space = self.sys.processes[pid].space.as_mut().expect("live");
        if let Some(c) = self.sys.control.as_mut() {
            return match space.pte(vpn) {
                Some(e) if e.has(Pte::PRESENT) || e.has(Pte::RECOLOR) => {
                    c.refused_marks += 1;
                    Ok(())
                }
                _ => Err(KernelError::NotMapped { pid, vpn }),
            };
        }
        if !space.mark_for_recolor(vpn) {
            return Err(KernelError::NotMapped { pid, vpn });
        }
        let core = self.core_of(pid);
        self.sys.shootdown(core, pid, Some(vpn));
        Ok(())
    }

    fn scan_accessed(&mut self, pid: usize) -> Result<Vec<u64>, KernelError> {
        self.live(pid)?;
        let space = self.sys.processes[pid].space.as_mut().expect("live");
        let (visited, hot) = space.scan_and_clear_accessed();
        let cost = visited * self.sys.timing.config.scan_cycles_per_entry;
        let core = self.core_of(pid);
        self.sys
            .charge_kernel(core, KernelPath::Scan, cost, Some(pid));
        // Cleared bits are set again only by walks: flush the process's translations.
        self.sys.shootdown(core, pid, None);
        Ok(hot)
    }

    fn policy_cycles(&self, pid: usize) -> u64 {
        self.sys.processes.get(pid).map_or(0, |p| {
            KernelPath::ALL
                .iter()
                .filter(|&&path| path != KernelPath::Fault)
                .map(|&path| p.kernel[path as usize][1])
                .sum::<u64>()
                / 1000
        })
    }

    fn migrate(&mut self, tid: usize, core: usize) -> Result<(), KernelError> {
        let cores = self.sys.cores.len();
        if core >= cores {
            return Err(KernelError::NoCore { core, cores });
        }
        match self.sys.threads.get(tid) {
            Some(t) if !t.done => {}
            _ => return Err(KernelError::NoThread(tid)),
        }
        let from = self.sys.threads[tid].core;
        if from != core {
            if let Some(c) = self.sys.control.as_mut() {
                c.refused_migrations += 1;
                return Ok(());
            }
        }
        self.sys.threads[tid].pinned = true;
        if from == core {
            return Ok(());
        }
        let f = &mut self.sys.cores[from];
        if f.current == Some(tid) {
            self.sys.save_counts(from);
            self.sys.cores[from].current = None;
        } else {
            f.queue.retain(|&t| t != tid);
        }
        // A core with nothing to run has stood still since its last thread ended: it takes the
        // thread now, not in the past (as idle balancing does).
        let now = self.sys.cores[self.core].clock_milli;
        let to = &mut self.sys.cores[core];
        if to.current.is_none() && to.queue.is_empty() && to.clock_milli < now {
            to.idle_milli += now - to.clock_milli;
            to.clock_milli = now;
        }
        self.sys.cores[core].queue.push_back(tid);
        self.sys.threads[tid].core = core;
        let pid = self.sys.threads[tid].pid;
        let cycles = self.sys.timing.config.migration_cycles;
        self.sys
            .charge_kernel(self.core, KernelPath::Migration, cycles, Some(pid));
        self.sys.pending.push(SchedEvent::Migrated {
            tid,
            from,
            to: core,
        });
        Ok(())
    }

    fn set_sampling(&mut self, core: Option<usize>, sampling: Option<SamplingConfig>) {
        // The handler's data is one page (as `[pmu.sampling]` is checked at start).
        let max_lines = ((1u64 << self.sys.page_shift) / self.sys.line_size) as u32;
        let sampler = sampling.map(|c| {
            Sampler::new(SamplingConfig {
                period: c.period.max(1),
                pollute_l1_lines: c.pollute_l1_lines.min(max_lines),
                ..c
            })
            .expect("the period is at least 1")
        });
        for (i, c) in self.sys.cores.iter_mut().enumerate() {
            if core.is_none_or(|k| k == i) {
                c.sampler = sampler.clone();
            }
        }
    }

    fn set_prefetch(&mut self, on: bool) {
        for h in &mut self.sys.chips {
            h.set_prefetch_enabled(on);
        }
    }
}
