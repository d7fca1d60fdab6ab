//! Free and idle colors (COLORIS section 3.2, Algorithm 1, 4.1): colors no live process on an
//! LLC owns are free and a hot process takes them without a donor; a process alone on its LLC is
//! lent every color (Table 1's setup) until another is created there; colors ALLOC_COLORS gives
//! that another core's process owns are noted as overlaps, and no color is owned by processes
//! on two cores of an LLC otherwise (`check_exclusive`). docs/coloris.md "Decisions where the
//! paper is silent" says why.

use super::Coloris;
use crate::memory::ColorSet;

impl Coloris {
    /// `a` and `b` share an LLC: some core of one is on the chip of some core of the other.
    pub(super) fn same_llc(&self, a: usize, b: usize) -> bool {
        let chip = |pid: usize| -> Vec<usize> {
            self.procs[&pid]
                .cores
                .iter()
                .map(|c| c / self.cores_per_chip)
                .collect()
        };
        let cb = chip(b);
        chip(a).iter().any(|c| cb.contains(c))
    }

    /// A live process on another core of `pid`'s LLC owns `c`.
    pub(super) fn owned_on_other_core(&self, pid: usize, c: u64) -> bool {
        let cores = &self.procs[&pid].cores;
        self.procs.iter().any(|(&q, p)| {
            q != pid
                && p.alive
                && p.assignment.contains(c)
                && !p.cores.iter().any(|x| cores.contains(x))
                && self.same_llc(pid, q)
        })
    }

    /// Free colors for `pid`: usable colors no live process sharing its LLC owns: the colors of
    /// idle cores' sections and those an exited process left. Section 3.2: "isCold is set when
    /// extra page colors are available", and "Sufficient capacity here means there are some
    /// other applications ... that are able to provide enough free colors": colors nobody owns
    /// are free without a donor.
    pub(super) fn free_colors(&self, pid: usize) -> Vec<u64> {
        self.usable
            .iter()
            .filter(|&c| {
                !self.procs.iter().any(|(&q, p)| {
                    p.alive && p.assignment.contains(c) && (q == pid || self.same_llc(pid, q))
                })
            })
            .collect()
    }

    /// ALLOC_COLORS(num) over free colors only (no donor freed any): the local ones first while
    /// `pid` has not its whole local section (needRemote), the lowest first. Never a color
    /// another process owns: without a cold donor Algorithm 1 takes nothing from anyone.
    pub(super) fn alloc_free(&mut self, pid: usize, num: u64) -> Vec<u64> {
        let mut new = Vec::new();
        for _ in 0..num {
            let free = self.free_colors(pid);
            let local = self.local(pid);
            let c = if self.need_remote(pid) {
                free.first().copied()
            } else {
                free.iter()
                    .copied()
                    .find(|&c| local.contains(c))
                    .or(free.first().copied())
            };
            let Some(c) = c else { break };
            let p = self.procs.get_mut(&pid).expect("known");
            p.assignment.insert(c);
            // A remote color taken without a donor is idle capacity: given back (`reclaimed`)
            // when a process is created on this LLC, whose core's section it may be
            // (`lend_or_reclaim`); else the new process and this one would own it together.
            if !p.local.contains(c) {
                p.lent.insert(c);
            }
            new.push(c);
        }
        new
    }

    /// Colors in `new` that a live process on another core of `pid`'s LLC owns too (the two
    /// share that part of the cache again), by owner; noted in `overlaps`.
    pub(super) fn note_overlaps(&mut self, pid: usize, new: &[u64]) {
        let cores = self.procs[&pid].cores.clone();
        let others: Vec<usize> = self
            .procs
            .iter()
            .filter(|(&q, p)| q != pid && p.alive && !p.cores.iter().any(|c| cores.contains(c)))
            .map(|(&q, _)| q)
            .filter(|&q| self.same_llc(pid, q))
            .collect();
        for q in others {
            let shared: Vec<u64> = new
                .iter()
                .copied()
                .filter(|&c| self.procs[&q].assignment.contains(c))
                .collect();
            if !shared.is_empty() {
                self.overlaps.push((self.now, pid, q, shared));
            }
        }
    }

    /// The Page Color Manager at the creation of `pid` (section 3.2). Colors lent to a process
    /// that was alone on this LLC, or taken as free colors without a donor, go back to nobody (it keeps its own section; the new process
    /// gets its core's section, as the paper places a new process), its pages in them to be
    /// marked at the next tick. A process alone on its LLC, its colors not from the config, is
    /// lent every usable color: Table 1 runs each program alone with all colors (4.1), and an
    /// idle core's section used by nobody is the "low cache utilization for an under utilized
    /// system" section 3.2 recoloring is there to avoid.
    pub(super) fn lend_or_reclaim(&mut self, pid: usize) {
        let borrowers: Vec<usize> = self
            .procs
            .iter()
            .filter(|(&q, p)| q != pid && p.alive && !p.lent.is_empty())
            .map(|(&q, _)| q)
            .filter(|&q| self.same_llc(pid, q))
            .collect();
        for q in borrowers {
            let p = self.procs.get_mut(&q).expect("known");
            let back: Vec<u64> = p.lent.iter().collect();
            back.iter().for_each(|&c| p.assignment.remove(c));
            p.lent = ColorSet::empty(self.colors);
            let colors = p.assignment.iter().collect();
            self.history.push((self.now, q, colors));
            self.reclaimed.push((self.now, q, back.clone()));
            self.pending_shrink.push((q, back));
        }
        let alone = !self
            .procs
            .iter()
            .any(|(&q, p)| q != pid && p.alive && self.same_llc(pid, q));
        if alone && !self.procs[&pid].from_config {
            let p = self.procs.get_mut(&pid).expect("known");
            let lend: Vec<u64> = self
                .usable
                .iter()
                .filter(|&c| !p.assignment.contains(c))
                .collect();
            lend.iter().for_each(|&c| {
                p.assignment.insert(c);
                p.lent.insert(c);
            });
            if !lend.is_empty() {
                self.lent.push((self.now, pid, lend));
            }
        }
    }
}

impl Coloris {
    /// Invariant (section 3.2): two live processes on different cores of one LLC own a color
    /// together only where the paper lets them share: ALLOC_COLORS picked an owned color (the
    /// coldest there was; noted in `overlaps`), or the config gave one of them that color.
    /// Processes on one core may share (they never run at once: "remote hotness"). Any other
    /// shared color was handed out twice by the Page Color Manager; it is reported in
    /// `violations`, which every test asserts empty. Returns the violations found now.
    pub(super) fn check_exclusive(&mut self) -> usize {
        let live: Vec<usize> = self
            .procs
            .iter()
            .filter(|(_, p)| p.alive)
            .map(|(&q, _)| q)
            .collect();
        let mut found = Vec::new();
        for (i, &a) in live.iter().enumerate() {
            for &b in &live[i + 1..] {
                let (pa, pb) = (&self.procs[&a], &self.procs[&b]);
                if pa.cores.iter().any(|c| pb.cores.contains(c)) || !self.same_llc(a, b) {
                    continue;
                }
                for c in pa.assignment.iter().filter(|&c| pb.assignment.contains(c)) {
                    let noted = self.overlaps.iter().any(|(_, x, y, colors)| {
                        ((*x, *y) == (a, b) || (*x, *y) == (b, a)) && colors.contains(&c)
                    });
                    let given = pa.given.as_ref().is_some_and(|s| s.contains(c))
                        || pb.given.as_ref().is_some_and(|s| s.contains(c));
                    if !noted && !given {
                        found.push(format!(
                            "color {c} is owned by both `{}` (cores {:?}) and `{}` (cores {:?}), \
                             on different cores of one LLC, and no over-commit ALLOC_COLORS \
                             gave it",
                            pa.name, pa.cores, pb.name, pb.cores
                        ));
                    }
                }
            }
        }
        found.retain(|v| !self.violations.contains(v));
        let n = found.len();
        self.violations.extend(found);
        n
    }
}
