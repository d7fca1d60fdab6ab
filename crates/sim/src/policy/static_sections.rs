//! Fixed color sets (COLORIS section 3.2, "static" page color management): the colors are cut
//! into one contiguous section per core; a process with colors of its own in the config keeps
//! them, any other gets the section of the least-loaded core (fewest processes assigned, lowest
//! core on ties) and is pinned to that core.
use super::{Placement, Policy, ProcessInfo};
use crate::memory::ColorSet;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct StaticSections {
    sections: Vec<ColorSet>,
    load: Vec<usize>,
    assigned: BTreeMap<usize, (ColorSet, Option<usize>)>,
}

impl StaticSections {
    pub fn new(cores: usize, colors: u64) -> Self {
        let cores = cores.max(1);
        let per = (colors / cores as u64).max(1);
        let sections = (0..cores as u64)
            .map(|c| {
                let start = (c * per).min(colors - 1);
                let end = if c == cores as u64 - 1 {
                    colors
                } else {
                    ((c + 1) * per).min(colors)
                };
                ColorSet::range(colors, start, end.max(start + 1)).expect("in range")
            })
            .collect();
        StaticSections {
            sections,
            load: vec![0; cores],
            assigned: BTreeMap::new(),
        }
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
}
