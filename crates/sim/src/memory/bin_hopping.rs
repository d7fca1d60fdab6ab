//! Kessler and Hill's bin hopping: an address space's successive page faults take successive
//! colors (bins), skipping colors the policy does not allow and colors with no free frame.
//! ROCS (section 4) uses it between the allowed per-color lists.
use super::{AllocRequest, ColorLists, FrameAllocator, Pfn};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct BinHopping {
    lists: ColorLists,
    /// Per address space: the color its next fault starts from.
    next: BTreeMap<u32, u64>,
}

impl BinHopping {
    pub fn new(frames: u64, colors: u64) -> Self {
        BinHopping {
            lists: ColorLists::full(frames, colors),
            next: BTreeMap::new(),
        }
    }
}

impl FrameAllocator for BinHopping {
    fn name(&self) -> &'static str {
        "bin-hopping"
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        let colors = self.lists.colors();
        let start = *self.next.get(&req.asid).unwrap_or(&0);
        let c = (0..colors)
            .map(|k| (start + k) % colors)
            .find(|&c| req.allowed.contains(c) && self.lists.len(c) > 0)?;
        self.next.insert(req.asid, (c + 1) % colors);
        self.lists.pop(c)
    }

    fn free(&mut self, pfn: Pfn, _cpu: usize) {
        self.lists.push(pfn);
    }

    fn free_frames(&self) -> Vec<Pfn> {
        self.lists.all()
    }
}
