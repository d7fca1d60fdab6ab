//! Fixed color sets (COLORIS section 3.2, "static" page color management): the colors are cut
//! into one contiguous section per core; a process with colors of its own in the config keeps
//! them, any other gets the section of the least-loaded core (fewest processes assigned, lowest
//! core on ties) and is pinned to that core. A process the config pins keeps its pin and gets
//! the section of its first pinned core (the config is honoured, never overridden in silence;
//! COLORIS 3.2 places a *new* process, the config has placed this one).
//!
//! Two readings of section 3.2 for machines the paper did not run on (a literal reading puts static
//! and coloris at 0.11-0.16x linux on multithreaded sharing):
//! - The sections partition *a shared cache* among the cores that share it: on a machine of
//!   several chips each chip's LLC is cut among that chip's cores (the paper's E5506 is one
//!   chip, four cores). Cutting the colors over every core of the machine gave a core on a
//!   chip of its own a fraction of a cache nobody else uses.
//! - A process of n threads gets n cores (the least loaded, one at a time) and the union of
//!   their sections, its threads pinned one per core. The paper's programs are
//!   single-threaded; pinning every thread of a process to one core serialised them.
//!
//! `[policy.static]` may add an offline pollute set (`pollute_colors`, `pollute`): ROCS section
//! 4's pollute buffer with its pages named before the run instead of found by sampling. It is
//! what `cachecolor report --oracle` runs as `oracle:pollute` (docs/verdicts.md): the listed
//! pages of each process take the buffer's colors, every other page its process's colors
//! without them.
use super::pollute::PolluteEngine;
use super::{MachineInfo, Placement, Policy, ProcessInfo};
use crate::error::ConfigError;
use crate::memory::ColorSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// `[policy.static]`: an offline pollute set (none by default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StaticConfig {
    /// LLC colors of the pollute buffer (the colors `rocs` would use for a buffer of that many
    /// colors, `PolluteEngine::buffer_colors`); 0: no buffer.
    pub pollute_colors: u64,
    /// The pages placed in the buffer, per process.
    pub pollute: Vec<PolluteSet>,
    /// When a fault finds no free frame in the allowed colors: false (default), the run fails
    /// (the colors are fixed); true, as `mrc-partition` and COLORIS 3.2 (`ALLOC_COLORS` on
    /// running out of memory) do: a page of the pollute set that no longer fits the buffer
    /// takes its process's other colors (the buffer is full from then on), and a process out
    /// of its own colors gets every color from then on. The oracles set it, so that a
    /// candidate is the policy it bounds, not a run that stops.
    pub widen_when_out_of_memory: bool,
}

/// One process's pages of an offline pollute set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolluteSet {
    /// The process's `[[processes]] name`.
    pub process: String,
    /// Virtual page numbers (4 KiB pages of the machine's page size).
    pub pages: Vec<u64>,
}

impl StaticConfig {
    /// Nothing set: the table is left out of the effective config.
    pub fn is_default(&self) -> bool {
        *self == StaticConfig::default()
    }
}

/// The offline pollute set as built for a machine.
#[derive(Debug, Clone)]
struct OfflinePollute {
    buffer: ColorSet,
    by_name: BTreeMap<String, HashSet<u64>>,
    /// pid -> (its pages in the buffer, its colors without the buffer's).
    by_pid: BTreeMap<usize, (HashSet<u64>, ColorSet)>,
    /// The buffer had no free frame for a listed page (`widen_when_out_of_memory`).
    full: bool,
}

#[derive(Debug, Clone)]
pub struct StaticSections {
    sections: Vec<ColorSet>,
    load: Vec<usize>,
    /// Each process's colors and the cores it was placed on (empty when the config gave it
    /// colors: it is placed as the config says).
    assigned: BTreeMap<usize, (ColorSet, Vec<usize>)>,
    pollute: Option<OfflinePollute>,
    /// `[policy.static] widen_when_out_of_memory`.
    widen: bool,
    /// The page the last `allowed_colors` answered (`out_of_colors` names only the process).
    last: (usize, u64),
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
            pollute: None,
            widen: false,
            last: (0, 0),
        }
    }

    /// `static` as `[policy.static]` configures it: the sections of `for_machine`, and the
    /// offline pollute set if it names one.
    pub fn configured(c: &StaticConfig, m: &MachineInfo) -> Result<Self, ConfigError> {
        let mut s = Self::for_machine(m);
        s.widen = c.widen_when_out_of_memory;
        if c.pollute_colors == 0 {
            if let Some(p) = c.pollute.iter().find(|p| !p.pages.is_empty()) {
                return Err(ConfigError::new(
                    "policy.static.pollute",
                    format!(
                        "process {:?} has pages for a pollute buffer of 0 colors: set \
                         policy.static.pollute_colors (1..{})",
                        p.process, m.colors
                    ),
                ));
            }
            return Ok(s);
        }
        if c.pollute_colors >= m.colors {
            return Err(ConfigError::new(
                "policy.static.pollute_colors",
                format!(
                    "{} leaves no color to the other pages: allowed 0..{} (the LLC has {} colors)",
                    c.pollute_colors, m.colors, m.colors
                ),
            ));
        }
        let mut by_name: BTreeMap<String, HashSet<u64>> = BTreeMap::new();
        for p in &c.pollute {
            by_name
                .entry(p.process.clone())
                .or_default()
                .extend(p.pages.iter().copied());
        }
        s.pollute = Some(OfflinePollute {
            buffer: PolluteEngine::buffer_colors(c.pollute_colors, m),
            by_name,
            by_pid: BTreeMap::new(),
            full: false,
        });
        Ok(s)
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

    fn check_processes(&self, names: &[String]) -> Result<(), ConfigError> {
        if let Some(o) = &self.pollute {
            if let Some(bad) = o.by_name.keys().find(|n| !names.contains(n)) {
                return Err(ConfigError::new(
                    "policy.static.pollute",
                    format!(
                        "process {bad:?} does not exist: the config's processes are {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        let placement = self.place(p);
        if let Some(o) = &mut self.pollute {
            let own = &self.assigned[&p.pid].0;
            let outside = ColorSet::of(own.colors(), own.iter().filter(|&c| !o.buffer.contains(c)))
                .expect("in range");
            // A process whose own colors are all the buffer's keeps them.
            let outside = if outside.is_empty() {
                own.clone()
            } else {
                outside
            };
            let pages = o.by_name.get(&p.name).cloned().unwrap_or_default();
            o.by_pid.insert(p.pid, (pages, outside));
        }
        placement
    }

    fn process_exited(&mut self, pid: usize) {
        if let Some(o) = &mut self.pollute {
            o.by_pid.remove(&pid);
        }
        if let Some((_, cores)) = self.assigned.remove(&pid) {
            cores.iter().for_each(|&c| self.load[c] -= 1);
        }
    }

    fn out_of_colors(&mut self, pid: usize) -> bool {
        if !self.widen {
            return false;
        }
        let (last_pid, vpn) = self.last;
        if let Some(o) = &mut self.pollute {
            let listed =
                last_pid == pid && o.by_pid.get(&pid).is_some_and(|(p, _)| p.contains(&vpn));
            if listed && !o.full {
                o.full = true;
                return true;
            }
            if let Some((_, outside)) = o.by_pid.get_mut(&pid) {
                let all = ColorSet::all(outside.colors());
                if *outside != all {
                    *outside = all;
                    return true;
                }
                return false;
            }
        }
        match self.assigned.get_mut(&pid) {
            Some((colors, _)) if *colors != ColorSet::all(colors.colors()) => {
                *colors = ColorSet::all(colors.colors());
                true
            }
            _ => false,
        }
    }

    fn allowed_colors(&mut self, pid: usize, vpn: u64) -> &ColorSet {
        self.last = (pid, vpn);
        if let Some((pages, outside)) = self.pollute.as_ref().and_then(|o| o.by_pid.get(&pid)) {
            return if pages.contains(&vpn) && !self.pollute.as_ref().is_some_and(|o| o.full) {
                &self.pollute.as_ref().expect("checked").buffer
            } else {
                outside
            };
        }
        &self.assigned.get(&pid).expect("process_created first").0
    }
}

impl StaticSections {
    /// COLORIS 3.2's placement of a new process (the module's documentation).
    fn place(&mut self, p: &ProcessInfo) -> Placement {
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

    /// Regression: a pin from the config was replaced by the least-loaded core's in silence. It is
    /// kept now, and the process gets its pinned core's section.
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

    /// Regression (static/coloris at 0.11-0.16x linux on `examples/robustness/mt-sharing-*`): a
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

    /// Regression: on a machine of two chips of one core each (the PowerPC 970FX preset), every
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
            pmu_counters: None,
            pmu_events: 0,
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

    fn one_chip(colors: u64) -> MachineInfo {
        MachineInfo {
            cores: 2,
            chips: 1,
            colors,
            inner_colors: 1,
            llc_miss_penalty: 0,
            page_move_cycles: 0,
            llc_size: colors * 4096 * 8,
            llc_ways: 8,
            line_size: 64,
            page_size: 4096,
            pmu_counters: None,
            pmu_events: 0,
        }
    }

    /// The offline pollute set (`oracle:pollute`): a listed page of a process takes the
    /// buffer's colors, every other page its process's colors without them; a process with no
    /// listed page is kept off the buffer too (ROCS 4: normal pages never use the buffer).
    #[test]
    fn offline_pollute_set_places_listed_pages_in_the_buffer_and_others_outside() {
        let cfg = StaticConfig {
            pollute_colors: 2,
            pollute: vec![PolluteSet {
                process: "stream".into(),
                pages: vec![7, 9],
            }],
            ..Default::default()
        };
        let mut s = StaticSections::configured(&cfg, &one_chip(16)).unwrap();
        s.check_processes(&["stream".into(), "other".into()])
            .unwrap();
        let info = |pid, name: &str| ProcessInfo {
            pid,
            name: name.into(),
            colors: Some(ColorSet::all(16)),
            pinned: None,
            threads: 1,
        };
        s.process_created(&info(0, "stream"));
        s.process_created(&info(1, "other"));
        let buffer: Vec<u64> = (14..16).collect();
        let outside: Vec<u64> = (0..14).collect();
        assert_eq!(s.allowed_colors(0, 7).iter().collect::<Vec<_>>(), buffer);
        assert_eq!(s.allowed_colors(0, 9).iter().collect::<Vec<_>>(), buffer);
        assert_eq!(s.allowed_colors(0, 8).iter().collect::<Vec<_>>(), outside);
        assert_eq!(s.allowed_colors(1, 7).iter().collect::<Vec<_>>(), outside);
    }

    #[test]
    fn offline_pollute_set_bad_input_names_the_field() {
        let m = one_chip(16);
        let pages = |process: &str| {
            vec![PolluteSet {
                process: process.into(),
                pages: vec![1],
            }]
        };
        let no_buffer = StaticConfig {
            pollute_colors: 0,
            pollute: pages("a"),
            ..Default::default()
        };
        let e = StaticSections::configured(&no_buffer, &m).unwrap_err();
        assert!(e.to_string().contains("policy.static.pollute"), "{e}");
        let whole = StaticConfig {
            pollute_colors: 16,
            ..Default::default()
        };
        let e = StaticSections::configured(&whole, &m).unwrap_err();
        assert!(e.to_string().contains("pollute_colors"), "{e}");
        let unknown = StaticConfig {
            pollute_colors: 1,
            pollute: pages("nobody"),
            ..Default::default()
        };
        let s = StaticSections::configured(&unknown, &m).unwrap();
        let e = s.check_processes(&["a".into()]).unwrap_err();
        assert!(e.to_string().contains("\"nobody\" does not exist"), "{e}");
    }

    /// `widen_when_out_of_memory` (the oracles' runs): a listed page that finds the buffer full
    /// goes outside it, a process out of its own colors gets every color; without it the
    /// colors stay fixed and the fault fails.
    #[test]
    fn offline_sets_widen_only_when_asked() {
        let m = one_chip(16);
        let info = ProcessInfo {
            pid: 0,
            name: "p".into(),
            colors: Some(ColorSet::range(16, 0, 4).unwrap()),
            pinned: None,
            threads: 1,
        };
        let mut fixed = StaticSections::configured(&StaticConfig::default(), &m).unwrap();
        fixed.process_created(&info);
        assert!(!fixed.out_of_colors(0));
        let widen = StaticConfig {
            widen_when_out_of_memory: true,
            ..Default::default()
        };
        let mut s = StaticSections::configured(&widen, &m).unwrap();
        s.process_created(&info);
        assert_eq!(s.allowed_colors(0, 1).len(), 4);
        assert!(s.out_of_colors(0));
        assert_eq!(s.allowed_colors(0, 1).len(), 16);
        assert!(!s.out_of_colors(0), "nothing left to widen");

        let buffered = StaticConfig {
            pollute_colors: 2,
            pollute: vec![PolluteSet {
                process: "p".into(),
                pages: vec![5],
            }],
            widen_when_out_of_memory: true,
        };
        let mut s = StaticSections::configured(&buffered, &m).unwrap();
        s.process_created(&ProcessInfo {
            colors: Some(ColorSet::all(16)),
            ..info
        });
        assert_eq!(s.allowed_colors(0, 5).iter().collect::<Vec<_>>(), [14, 15]);
        assert!(s.out_of_colors(0), "the buffer is full");
        assert_eq!(
            s.allowed_colors(0, 5).len(),
            14,
            "the listed page goes outside it"
        );
    }
}
