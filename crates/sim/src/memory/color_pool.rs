//! COLORIS's color-aware page allocator (section 3.1, Figure 4): a pool of per-color free
//! lists in front of the buddy system. A request from an address space takes the next of its
//! allowed colors in round-robin order that has a frame in the pool; when none has, the pool
//! is refilled from the buddy system "with new pages of arbitrary colors" (a block of one page
//! per color when the buddy lists have one, smaller blocks otherwise). A freed frame goes back
//! to its color's list unless that list already holds `cap` frames, in which case it returns
//! to the buddy system. With a pool size (`[memory] pool_size`, COLORIS section 4's 1 GiB
//! pool) the pool draws at most that many frames from the buddy system (net of what it gives
//! back), so a process whose colors are used up is out of memory in its colors (and COLORIS's
//! `ALLOC_COLORS` widens them, section 3.2) even while the buddy system has frames.
//!
//! A request that allows every color constrains nothing: there is no color to pick, and the
//! frame it gets is the one Linux's page allocator gives an uncolored process, the buddy
//! system's order-0 path through the per-CPU lists (`Buddy::alloc`), not the pool's
//! round-robin over colors (the round-robin is bin hopping, a placement `linux` never has). Such
//! frames bypass the pool and its size bound and go back to the buddy system's per-CPU lists when
//! freed.
use super::buddy::{Buddy, MAX_ORDER};
use super::{AllocRequest, ColorLists, FrameAllocator, Pfn};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct ColorPool {
    buddy: Buddy,
    pool: ColorLists,
    cap: usize,
    /// Per address space: where its round-robin over colors continues.
    next: BTreeMap<u32, u64>,
    /// log2 of the block that covers every color once (capped at the buddy's largest order).
    refill_order: u32,
    /// The most frames the pool may draw from the buddy system (None: no bound).
    limit: Option<u64>,
    /// Frames drawn from the buddy system and not given back.
    drawn: u64,
    /// One bit per frame: handed out by the uncolored path (`Buddy::alloc`), not the pool.
    uncolored: Vec<u64>,
}

impl ColorPool {
    pub fn new(buddy: Buddy, colors: u64, cap: usize, limit: Option<u64>) -> Self {
        let words = buddy.frames().div_ceil(64) as usize;
        ColorPool {
            uncolored: vec![0; words],
            buddy,
            pool: ColorLists::empty(colors),
            cap,
            next: BTreeMap::new(),
            refill_order: colors.next_power_of_two().trailing_zeros().min(MAX_ORDER),
            limit,
            drawn: 0,
        }
    }

    /// Move one block of frames from the buddy system into the pool; false if it has none.
    fn refill(&mut self) -> bool {
        self.refill_from_lists() || (self.buddy.drain_pcp() && self.refill_from_lists())
    }

    fn refill_from_lists(&mut self) -> bool {
        for k in (0..=self.refill_order).rev() {
            if self.limit.is_some_and(|l| self.drawn + (1 << k) > l) {
                continue;
            }
            if let Some(pfn) = self.buddy.alloc_order(k) {
                for p in pfn..pfn + (1 << k) {
                    self.pool.push(p);
                }
                self.drawn += 1 << k;
                return true;
            }
        }
        false
    }

    /// Frames of `color` held in the pool's list (not in the buddy system).
    pub fn pooled(&self, color: u64) -> usize {
        self.pool.len(color)
    }
}

impl FrameAllocator for ColorPool {
    fn name(&self) -> &'static str {
        "color-pool"
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        if req.allowed.is_full() {
            // Out of buddy frames, the pool's own frames still serve it (below).
            if let Some(pfn) = self.buddy.alloc(req) {
                self.uncolored[(pfn / 64) as usize] |= 1 << (pfn % 64);
                return Some(pfn);
            }
        }
        let colors = self.pool.colors();
        let start = *self.next.get(&req.asid).unwrap_or(&0);
        loop {
            let found = (0..colors)
                .map(|k| (start + k) % colors)
                .find(|&c| req.allowed.contains(c) && self.pool.len(c) > 0);
            if let Some(c) = found {
                self.next.insert(req.asid, (c + 1) % colors);
                return self.pool.pop(c);
            }
            if !self.refill() {
                return None;
            }
        }
    }

    fn free(&mut self, pfn: Pfn, cpu: usize) {
        let bit = 1u64 << (pfn % 64);
        let word = &mut self.uncolored[(pfn / 64) as usize];
        if *word & bit != 0 {
            *word &= !bit;
            self.buddy.free(pfn, cpu);
            return;
        }
        if self.pool.len(pfn % self.pool.colors()) < self.cap {
            self.pool.push(pfn);
        } else {
            self.buddy.free_order(pfn, 0);
            self.drawn -= 1;
        }
    }

    fn gives_blocks(&self) -> bool {
        true
    }

    /// Huge pages come straight from the buddy system: a 2 MiB block spans every color, so
    /// the pool's per-color lists have nothing to add.
    fn alloc_block(&mut self, order: u32) -> Option<Pfn> {
        self.buddy.alloc_order(order)
    }

    fn free_block(&mut self, pfn: Pfn, order: u32) {
        self.buddy.free_order(pfn, order)
    }

    fn free_frames(&self) -> Vec<Pfn> {
        let mut v = self.pool.all();
        v.extend(self.buddy.free_frames());
        v
    }
}
