//! Perfect coloring: virtual page `v` gets the `(v mod n)`-th of the `n` allowed colors, as a
//! physically contiguous allocation would (thesis section 3.2: "if all physical frames are
//! allocated in a contiguous manner, perfect cache coverage would be achieved"). When that
//! color has no free frame, the next allowed color that has one is used.
use super::{AllocRequest, ColorLists, FrameAllocator, Pfn};

#[derive(Debug, Clone)]
pub struct Contiguous {
    lists: ColorLists,
}

impl Contiguous {
    pub fn new(frames: u64, colors: u64) -> Self {
        Contiguous {
            lists: ColorLists::full(frames, colors),
        }
    }
}

impl FrameAllocator for Contiguous {
    fn name(&self) -> &'static str {
        "contiguous"
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        let n = req.allowed.len();
        if n == 0 {
            return None;
        }
        let allowed: Vec<u64> = req.allowed.iter().collect();
        let first = (req.vpn % n) as usize;
        let c = (0..allowed.len())
            .map(|k| allowed[(first + k) % allowed.len()])
            .find(|&c| self.lists.len(c) > 0)?;
        self.lists.pop(c)
    }

    fn free(&mut self, pfn: Pfn, _cpu: usize) {
        self.lists.push(pfn);
    }

    fn free_frames(&self) -> Vec<Pfn> {
        self.lists.all()
    }
}
