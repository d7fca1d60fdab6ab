//! Fixed color sets (COLORIS section 3.2, "static" page color management): the colors are cut
//! into one contiguous section per core; a process with colors of its own in the config keeps
//! them, any other gets the section of the least-loaded core (fewest processes assigned, lowest
//! core on ties) and is pinned to that core. A process the config pins keeps its pin and gets
//! the section of its first pinned core (issue 19, defect 6: the config is honoured, never
//! overridden in silence; COLORIS 3.2 places a *new* process, the config has placed this one).
use super::{Placement, Policy, ProcessInfo};
use crate::memory::ColorSet;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct StaticSections {
    sections: Vec<ColorSet>,
    load: Vec<usize>,
    assigned: BTreeMap<usize, (ColorSet, Option<usize>)>,
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

impl StaticSections {
    pub fn new(cores: usize, colors: u64) -> Self {
        let all: Vec<u64> = (0..colors).collect();
        Self::from_sections(sections(cores, colors, &all))
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

    /// The colors `process_created` gave `pid`, and the core it was pinned to (None when the
    /// config gave the colors).
    pub(crate) fn assignment(&self, pid: usize) -> Option<(&ColorSet, Option<usize>)> {
        self.assigned.get(&pid).map(|(c, core)| (c, *core))
    }
}

impl Policy for StaticSections {
    fn name(&self) -> &'static str {
        "static"
    }

    fn process_created(&mut self, p: &ProcessInfo) -> Placement {
        if let Some(colors) = &p.colors {
            self.assigned.insert(p.pid, (colors.clone(), None));
            return Placement::default();
        }
        if let Some(&core) = p
            .pinned
            .as_ref()
            .and_then(|v| v.first())
            .filter(|&&c| c < self.load.len())
        {
            // Pinned by the config: keep the pin, take that core's section.
            self.load[core] += 1;
            self.assigned
                .insert(p.pid, (self.sections[core].clone(), Some(core)));
            return Placement::default();
        }
        let core = (0..self.load.len())
            .min_by_key(|&c| (self.load[c], c))
            .expect("at least one core");
        self.load[core] += 1;
        self.assigned
            .insert(p.pid, (self.sections[core].clone(), Some(core)));
        Placement {
            pin: Some(vec![core]),
        }
    }

    fn process_exited(&mut self, pid: usize) {
        if let Some((_, Some(core))) = self.assigned.remove(&pid) {
            self.load[core] -= 1;
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
        };
        assert_eq!(s.process_created(&pinned), Placement::default());
        assert_eq!(s.assignment(0).unwrap().1, Some(3));
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
}
