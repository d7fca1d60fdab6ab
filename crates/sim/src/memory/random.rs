//! A uniformly random free frame among the allowed colors: the thesis's model of an OS that
//! places pages with no regard to color (section 3.2; eq. 3.1 and 3.2 assume each page lands
//! in each bin with probability 1/B).
use super::{AllocRequest, ColorLists, FrameAllocator, Pfn};
use crate::rng::SplitMix64;

#[derive(Debug, Clone)]
pub struct RandomFrames {
    lists: ColorLists,
    rng: SplitMix64,
}

impl RandomFrames {
    pub fn new(frames: u64, colors: u64, seed: u64) -> Self {
        RandomFrames {
            lists: ColorLists::full(frames, colors),
            rng: SplitMix64::new(seed ^ 0x5A4D),
        }
    }
}

impl FrameAllocator for RandomFrames {
    fn name(&self) -> &'static str {
        "random"
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        // Uniform over frames, not colors: pick the r-th free frame of the allowed colors.
        let total: u64 = req.allowed.iter().map(|c| self.lists.len(c) as u64).sum();
        if total == 0 {
            return None;
        }
        let mut r = self.rng.below(total);
        for c in req.allowed.iter() {
            let n = self.lists.len(c) as u64;
            if r < n {
                let list = self.lists.list_mut(c);
                return Some(list.swap_remove(r as usize));
            }
            r -= n;
        }
        unreachable!("r < total")
    }

    fn free(&mut self, pfn: Pfn, _cpu: usize) {
        self.lists.push(pfn);
    }

    fn free_frames(&self) -> Vec<Pfn> {
        self.lists.all()
    }
}
