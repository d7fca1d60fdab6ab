//! Fixed color sets (COLORIS section 3.2, "static" page color management): the colors are cut
//! into one contiguous section per core; a process with colors of its own in the config keeps
//! them, any other gets the section of the least-loaded core (fewest processes assigned, lowest
//! core on ties) and is pinned to that core. A process the config pins keeps its pin and gets
//! the section of its first pinned core (issue 19, defect 6: the config is honoured, never
//! overridden in silence; COLORIS 3.2 places a *new* process, the config has placed this one).
//!
//! Two readings of section 3.2 for machines the paper did not run on (issue 19, static and
//! coloris at 0.11-0.16x linux on multithreaded sharing):
//! - The sections partition *a shared cache* among the cores that share it: on a machine of
//!   several chips each chip's LLC is cut among that chip's cores (the paper's E5506 is one
//!   chip, four cores). Cutting the colors over every core of the machine gave a core on a
//!   chip of its own a fraction of a cache nobody else uses.
//! - A process of n threads gets n cores (the least loaded, one at a time) and the union of
//!   their sections, its threads pinned one per core. The paper's programs are
//!   single-threaded; pinning every thread of a process to one core serialised them.
use super::{MachineInfo, Placement, Policy, ProcessInfo};
use crate::memory::ColorSet;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct StaticSections {
    sections: Vec<ColorSet>,
    load: Vec<usize>,
    /// Each process's colors and the cores it was placed on (empty when the config gave it
    /// colors: it is placed as the config says).
    assigned: BTreeMap<usize, (ColorSet, Vec<usize>)>,
}

/// COLORIS section 3.2: `usable` (colors of an LLC of `colors`, in increasing order) cut into
/// one section of contiguous colors per core, the last section taking the remainder. Shared by
/// `static` and `coloris` (which may hold some colors back for shared pages).
pub(crate) fn sections(cores: usize, colors: u64, usable: &[u64]) -> Vec<ColorSet> {
    let cores = cores.max(1);
    let n = usable.len();
    let per = (n / cores).max(1);
    (0..cores)
        .map(|c| {
            let start = (c * per).min(n.saturating_sub(1));
            let end = if c == cores - 1 {
                n
            } else {
                ((c + 1) * per).min(n)
            };
            ColorSet::of(colors, usable[start..end.max(start + 1)].iter().copied())
                .expect("in range")
        })
        .collect()
}

/// One section per core of `machine`: each chip's LLC colors (`usable` of them) cut among the
/// cores of that chip (`sections` per chip), so core `c` gets section `c mod cores_per_chip`.
pub(crate) fn per_core_sections(machine: &MachineInfo, usable: &[u64]) -> Vec<ColorSet> {
    let per_chip = sections(machine.cores_per_chip().max(1), machine.colors, usable);
    (0..machine.cores)
        .map(|c| per_chip[c % per_chip.len()].clone())
        .collect()
}

impl StaticSections {
    /// One chip of `cores` cores sharing an LLC of `colors` colors.
    pub fn new(cores: usize, colors: u64) -> Self {
        let all: Vec<u64> = (0..colors).collect();
        Self::from_sections(sections(cores, colors, &all))
    }

    /// Sections per chip of `machine` (`per_core_sections`).
    pub fn for_machine(machine: &MachineInfo) -> Self {
        let all: Vec<u64> = (0..machine.colors).collect();
        Self::from_sections(per_core_sections(machine, &all))
    }

    /// One section per core, as `sections` cuts them.
    pub(crate) fn from_sections(sections: Vec<ColorSet>) -> Self {
        StaticSections {
            load: vec![0; sections.len()],
            sections,
            assigned: BTreeMap::new(),
        }
    }

    /// The section of `core`.
    pub(crate) fn section(&self, core: usize) -> &ColorSet {
        &self.sections[core]
    }

    /// The colors `process_created` gave `pid`, and the cores it was placed on (empty when the
    /// config gave the colors).
    pub(crate) fn assignment(&self, pid: usize) -> Option<(&ColorSet, &[usize])> {
        self.assigned
            .get(&pid)
            .map(|(c, cores)| (c, cores.as_slice()))
    }

    /// The union of the sections of `cores`.
    fn union(&self, cores: &[usize]) -> ColorSet {
        let mut s = self.sections[cores[0]].clone();
        for &c in &cores[1..] {
            for col in self.sections[c].iter() {
                s.insert(col);
            }
        }
        s
    }
}

impl Policy for StaticSections {
    fn name(&self) -> &'static str {
        "static"
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        if let Some(colors) = &p.colors {
            self.assigned.insert(p.pid, (colors.clone(), Vec::new()));
            return Placement::default();
        }
        if let Some(pin) = &p.pinned {
            // Pinned by the config: keep the pin, take the sections of the cores its threads
            // run on (thread t on pin[t mod len], as the scheduler places them).
            let mut cores: Vec<usize> = (0..p.threads.max(1).min(pin.len()))
                .map(|t| pin[t])
                .filter(|&c| c < self.load.len())
                .collect();
            cores.dedup();
            if !cores.is_empty() {
                cores.iter().for_each(|&c| self.load[c] += 1);
                self.assigned.insert(p.pid, (self.union(&cores), cores));
                return Placement::default();
            }
        }
        // The least-loaded core (lowest on ties), once per thread: a process of n threads gets
        // n cores, one thread pinned on each.
        let n = p.threads.clamp(1, self.load.len());
        let mut cores = Vec::with_capacity(n);
        for _ in 0..n {
            let core = (0..self.load.len())
                .filter(|c| !cores.contains(c))
                .min_by_key(|&c| (self.load[c], c))
                .expect("at least one core");
            self.load[core] += 1;
            cores.push(core);
        }
        self.assigned
            .insert(p.pid, (self.union(&cores), cores.clone()));
        Placement { pin: Some(cores) }
    }

    fn process_exited(&mut self, pid: usize) {
        if let Some((_, cores)) = self.assigned.remove(&pid) {
            cores.iter().for_each(|&c| self.load[c] -= 1);
        }
    }

    fn allowed_colors(&mut self, pid: usize, _vpn: u64) -> &ColorSet {
        &self.assigned.get(&pid).expect("process_created first").0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_loaded_core_gets_the_next_process() {
        let mut s = StaticSections::new(4, 64);
        let info = |pid| ProcessInfo {
            pid,
            name: format!("p{pid}"),
            colors: None,
            pinned: None,
            threads: 1,
        };
        let pins: Vec<usize> = (0..6)
            .map(|pid| s.process_created(&info(pid)).pin.unwrap()[0])
            .collect();
        assert_eq!(pins, [0, 1, 2, 3, 0, 1]);
        assert_eq!(
            s.allowed_colors(2, 0).iter().collect::<Vec<_>>(),
            (32..48).collect::<Vec<_>>()
        );
        s.process_exited(2);
        assert_eq!(s.process_created(&info(9)).pin, Some(vec![2]));
        let own = ProcessInfo {
            colors: Some(ColorSet::of(64, [5, 6]).unwrap()),
            ..info(10)
        };
        assert_eq!(s.process_created(&own), Placement::default());
        assert_eq!(s.allowed_colors(10, 0).len(), 2);
    }

    /// Issue 19, defect 6: a pin from the config was replaced by the least-loaded core's in
    /// silence. It is kept now, and the process gets its pinned core's section.
    #[test]
    fn static_keeps_the_configs_pin_instead_of_overriding_it() {
        let mut s = StaticSections::new(4, 64);
        let pinned = ProcessInfo {
            pid: 0,
            name: "p".into(),
            colors: None,
            pinned: Some(vec![3]),
            threads: 1,
        };
        assert_eq!(s.process_created(&pinned), Placement::default());
        assert_eq!(s.assignment(0).unwrap().1, [3]);
        assert_eq!(
            s.allowed_colors(0, 0).iter().collect::<Vec<_>>(),
            (48..64).collect::<Vec<_>>()
        );
        // Core 3 is loaded now: the next unpinned process goes to core 0.
        let free = ProcessInfo {
            pid: 1,
            pinned: None,
            ..pinned
        };
        assert_eq!(s.process_created(&free).pin, Some(vec![0]));
    }

    /// Issue 19 (static/coloris at 0.11-0.16x linux on `examples/robustness/mt-sharing-*`): a
    /// process of two threads was pinned, both threads, to one core with that core's section.
    /// Each thread now gets a core of its own and the process the union of their sections.
    #[test]
    fn static_gives_each_thread_of_a_multithreaded_process_its_own_core() {
        let mut s = StaticSections::new(2, 32);
        let mt = ProcessInfo {
            pid: 0,
            name: "mt".into(),
            colors: None,
            pinned: None,
            threads: 2,
        };
        assert_eq!(s.process_created(&mt).pin, Some(vec![0, 1]));
        assert_eq!(s.allowed_colors(0, 0).len(), 32, "both cores' sections");
        s.process_exited(0);
        assert_eq!(s.load, [0, 0]);
    }

    /// Issue 19: on a machine of two chips of one core each (the PowerPC 970FX preset), every
    /// core was given half the colors of an LLC that no other core shares. The sections cut
    /// each chip's LLC among that chip's cores.
    #[test]
    fn static_sections_are_cut_per_chip_among_the_cores_sharing_its_llc() {
        let m = |cores, chips| MachineInfo {
            cores,
            chips,
            colors: 16,
            inner_colors: 1,
            llc_miss_penalty: 0,
            page_move_cycles: 0,
            llc_size: 1 << 19,
            llc_ways: 8,
            line_size: 128,
            page_size: 4096,
        };
        let two_chips = StaticSections::for_machine(&m(2, 2));
        assert_eq!(two_chips.section(0).len(), 16);
        assert_eq!(two_chips.section(1).len(), 16);
        let one_chip = StaticSections::for_machine(&m(2, 1));
        assert_eq!(
            one_chip.section(0).iter().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        let two_by_two = StaticSections::for_machine(&m(4, 2));
        assert_eq!(
            two_by_two.section(2).iter().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(
            two_by_two.section(3).iter().collect::<Vec<_>>(),
            (8..16).collect::<Vec<_>>()
        );
    }
}
