/*!
Linux's binary buddy allocator (mm/page_alloc.c in outline): free blocks of 2^order frames in
one list per order (orders 0..=10, so the largest block is 4 MiB of 4 KiB pages), a request
taking the head block of the smallest order that fits and splitting it (the upper halves go
back on the lists), a free merging with its buddy while the buddy is free, and per-CPU lists
of order-0 frames refilled and drained `batch` frames at a time (Linux's `pcp->batch`; a list
is drained above `high` = 6 batches). Lists are LIFO as Linux's are: a freed frame is the next
one handed out.

`age` models a system that has been up a long time (thesis section 3.2, Figure 3.3): every
frame is allocated once, a fraction stays held by the rest of the system at random places,
and the others are freed in random order, so free memory is scattered and order-0 requests
land on frames with no relation to their color.
*/
use super::{AllocRequest, FrameAllocator, Pfn};
use crate::rng::SplitMix64;

pub const MAX_ORDER: u32 = 10;
const NONE: u64 = u64::MAX;
const NOT_FREE: u8 = u8::MAX;

#[derive(Debug, Clone)]
pub struct Buddy {
    frames: u64,
    /// Head block of each order's free list.
    heads: Vec<u64>,
    /// Doubly linked free lists through the first frame of each free block.
    next: Vec<u64>,
    prev: Vec<u64>,
    /// The order of the free block a frame heads, or NOT_FREE.
    order_of: Vec<u8>,
    /// Per-CPU order-0 lists (top = next handed out).
    pcp: Vec<Vec<Pfn>>,
    batch: usize,
    high: usize,
}

impl Buddy {
    /// All of `frames` free, as the largest aligned blocks, lowest addresses first.
    pub fn new(frames: u64, cpus: usize, batch: u32) -> Self {
        let mut b = Buddy {
            frames,
            heads: vec![NONE; MAX_ORDER as usize + 1],
            next: vec![NONE; frames as usize],
            prev: vec![NONE; frames as usize],
            order_of: vec![NOT_FREE; frames as usize],
            pcp: vec![Vec::new(); cpus.max(1)],
            batch: batch as usize,
            high: 6 * batch as usize,
        };
        let mut blocks = Vec::new();
        let mut pfn = 0;
        while pfn < frames {
            let mut k = MAX_ORDER;
            while pfn % (1 << k) != 0 || pfn + (1 << k) > frames {
                k -= 1;
            }
            blocks.push((pfn, k));
            pfn += 1 << k;
        }
        // Pushed highest first so each list's head is its lowest block.
        for &(pfn, k) in blocks.iter().rev() {
            b.push(pfn, k);
        }
        b
    }

    /// Frames it manages (RAM).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    fn push(&mut self, pfn: Pfn, k: u32) {
        let head = self.heads[k as usize];
        self.next[pfn as usize] = head;
        self.prev[pfn as usize] = NONE;
        if head != NONE {
            self.prev[head as usize] = pfn;
        }
        self.heads[k as usize] = pfn;
        self.order_of[pfn as usize] = k as u8;
    }

    fn unlink(&mut self, pfn: Pfn, k: u32) {
        let (p, n) = (self.prev[pfn as usize], self.next[pfn as usize]);
        if p == NONE {
            self.heads[k as usize] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.order_of[pfn as usize] = NOT_FREE;
    }

    /// A block of 2^k frames from the buddy lists (not the per-CPU lists).
    pub fn alloc_order(&mut self, k: u32) -> Option<Pfn> {
        let j = (k..=MAX_ORDER).find(|&j| self.heads[j as usize] != NONE)?;
        let pfn = self.heads[j as usize];
        self.unlink(pfn, j);
        let mut j = j;
        while j > k {
            j -= 1;
            self.push(pfn + (1 << j), j);
        }
        Some(pfn)
    }

    /// Return a block of 2^k frames to the buddy lists, merging with free buddies.
    pub fn free_order(&mut self, mut pfn: Pfn, mut k: u32) {
        while k < MAX_ORDER {
            let buddy = pfn ^ (1 << k);
            if buddy >= self.frames || self.order_of[buddy as usize] != k as u8 {
                break;
            }
            self.unlink(buddy, k);
            pfn = pfn.min(buddy);
            k += 1;
        }
        self.push(pfn, k);
    }

    /// Fragment like a long-running system (see the module doc); returns the frames left held
    /// by the rest of the system.
    pub fn age(&mut self, held_fraction: f64, seed: u64) -> Vec<Pfn> {
        let mut all = Vec::with_capacity(self.frames as usize);
        while let Some(pfn) = self.alloc_order(0) {
            all.push(pfn);
        }
        let mut rng = SplitMix64::new(seed ^ 0xA9ED);
        for i in (1..all.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            all.swap(i, j);
        }
        let held = (all.len() as f64 * held_fraction) as usize;
        for &pfn in &all[held..] {
            self.free_order(pfn, 0);
        }
        all.truncate(held);
        all
    }

    /// Return every per-CPU list's frames to the buddy lists (Linux's `drain_all_pages`, which
    /// the allocator's slow path calls before giving up); false if the lists were empty.
    pub fn drain_pcp(&mut self) -> bool {
        let frames: Vec<Pfn> = self.pcp.iter_mut().flat_map(std::mem::take).collect();
        let any = !frames.is_empty();
        for p in frames {
            self.free_order(p, 0);
        }
        any
    }

    /// Free blocks per order (for tests and reports).
    pub fn free_blocks(&self) -> Vec<usize> {
        (0..=MAX_ORDER)
            .map(|k| {
                let mut n = 0;
                let mut p = self.heads[k as usize];
                while p != NONE {
                    n += 1;
                    p = self.next[p as usize];
                }
                n
            })
            .collect()
    }
}

impl FrameAllocator for Buddy {
    fn name(&self) -> &'static str {
        "buddy"
    }

    fn places_by_color(&self) -> bool {
        false
    }

    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn> {
        let cpu = req.cpu % self.pcp.len();
        if self.pcp[cpu].is_empty() {
            // Refill: the first frame taken is handed out first (Linux's rmqueue_bulk order).
            let mut got = Vec::with_capacity(self.batch);
            for _ in 0..self.batch {
                match self.alloc_order(0) {
                    Some(p) => got.push(p),
                    None => break,
                }
            }
            got.reverse();
            self.pcp[cpu] = got;
        }
        if let Some(p) = self.pcp[cpu].pop() {
            return Some(p);
        }
        // This CPU's list and the buddy lists are empty: take from another CPU's list.
        let other = self.pcp.iter().position(|l| !l.is_empty())?;
        self.pcp[other].pop()
    }

    fn free(&mut self, pfn: Pfn, cpu: usize) {
        let cpu = cpu % self.pcp.len();
        self.pcp[cpu].push(pfn);
        if self.pcp[cpu].len() > self.high {
            // Drain the coldest `batch` frames (the bottom of the stack) to the buddy lists.
            let cold: Vec<Pfn> = self.pcp[cpu].drain(..self.batch).collect();
            for p in cold {
                self.free_order(p, 0);
            }
        }
    }

    fn gives_blocks(&self) -> bool {
        true
    }

    fn alloc_block(&mut self, order: u32) -> Option<Pfn> {
        self.alloc_order(order)
    }

    fn free_block(&mut self, pfn: Pfn, order: u32) {
        self.free_order(pfn, order)
    }

    fn free_frames(&self) -> Vec<Pfn> {
        let mut out: Vec<Pfn> = self.pcp.iter().flatten().copied().collect();
        for k in 0..=MAX_ORDER {
            let mut p = self.heads[k as usize];
            while p != NONE {
                out.extend(p..p + (1 << k));
                p = self.next[p as usize];
            }
        }
        out
    }
}
