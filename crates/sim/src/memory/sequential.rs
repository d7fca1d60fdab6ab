//! The lowest-numbered free frame among the allowed colors: what a fresh, unfragmented system
//! hands out to one process faulting in order.
use super::{AllocRequest, FrameAllocator, Pfn};
use std::collections::BTreeSet;

#[derive(Debug, Clone)]
pub struct Sequential {
    colors: u64,
    /// Free frames per color, ordered.
    free: Vec<BTreeSet<Pfn>>,
}

impl Sequential {
    pub fn new(frames: u64, colors: u64) -> Self {
        let mut free = vec![BTreeSet::new(); colors as usize];
        for pfn in 0..frames {
            free[(pfn % colors) as usize].insert(pfn);
        }
        Sequential { colors, free }
    }
}

impl FrameAllocator for Sequential {
    fn name(&self) -> &'static str {
        "sequential"
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        let c = req
            .allowed
            .iter()
            .filter_map(|c| self.free[c as usize].first().map(|&p| (p, c)))
            .min()?
            .1;
        self.free[c as usize].pop_first()
    }

    fn free(&mut self, pfn: Pfn, _cpu: usize) {
        self.free[(pfn % self.colors) as usize].insert(pfn);
    }

    fn free_frames(&self) -> Vec<Pfn> {
        self.free.iter().flatten().copied().collect()
    }
}
