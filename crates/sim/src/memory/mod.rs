/*!
Physical memory and page-frame allocators.

`PhysicalMemory` owns the frames of a machine's RAM: who holds each frame (free, a process's
address space, or the kernel), and the allocator that picks frames on page faults. Every
allocator takes the set of colors the policy allows (DESIGN.md: the fault path passes the
policy's color set) and returns a frame; a color is `pfn mod colors` of the last-level cache
(COLORIS section 2, eq. 1; per slice for a sliced LLC).

The allocators (one file each):
- `buddy`: Linux's binary buddy system with per-CPU lists of order-0 frames; `aged` fragments
  it the way a long-running system is (thesis section 3.2, Figure 3.3: Linux places pages
  with no regard to color, and once free memory is scattered that is random placement).
  Like Linux it does not place by color: asking it for a strict subset of colors is an error.
- `random`: a uniformly random free frame among the allowed colors (the thesis's model of
  section 3.2, eq. 3.1-3.2).
- `sequential`: the lowest-numbered free frame among the allowed colors.
- `bin-hopping`: Kessler and Hill's bin hopping: each address space's successive faults take
  successive colors (ROCS section 4: "round-robin is used between the lists, emulating
  bin-hopping").
- `color-pool`: COLORIS's color-aware page allocator (section 3.1): a pool of per-color free
  lists, colors picked round-robin among the process's assigned colors, refilled with frames
  of arbitrary colors from the buddy system when none of them has a frame, frees kept in the
  pool up to a per-list cap and returned to the buddy system beyond it.
- `contiguous`: perfect coloring: virtual page `v` of an address space gets the `v`-th allowed
  color (cyclically), as a physically contiguous allocation would.

Allocation happens on page faults, not per reference, so allocators are trait objects.
Invariant (DESIGN.md principle 4): a frame is never owned twice and never leaks:
`check_invariants` compares the ownership table with every frame each allocator holds free.
*/
mod bin_hopping;
mod buddy;
mod color_pool;
mod contiguous;
mod random;
mod sequential;

pub use bin_hopping::BinHopping;
pub use buddy::Buddy;
pub use color_pool::ColorPool;
pub use contiguous::Contiguous;
pub use random::RandomFrames;
pub use sequential::Sequential;

use crate::config::Size;
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};

/// A physical frame number.
pub type Pfn = u64;

/// A set of page colors of one cache (a bit per color).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ColorSet {
    colors: u64,
    bits: Vec<u64>,
}

impl ColorSet {
    /// The empty set over `colors` colors.
    pub fn empty(colors: u64) -> Self {
        ColorSet {
            colors,
            bits: vec![0; colors.div_ceil(64) as usize],
        }
    }

    /// Every color.
    pub fn all(colors: u64) -> Self {
        let mut s = Self::empty(colors);
        for c in 0..colors {
            s.insert(c);
        }
        s
    }

    /// The given colors; a color outside `0..colors` is an error naming it.
    pub fn of(colors: u64, set: impl IntoIterator<Item = u64>) -> Result<Self, ConfigError> {
        let mut s = Self::empty(colors);
        for c in set {
            if c >= colors {
                return Err(ConfigError::new(
                    "colors",
                    format!(
                        "color {c} does not exist: this cache has colors 0..={}",
                        colors - 1
                    ),
                ));
            }
            s.insert(c);
        }
        Ok(s)
    }

    /// Colors `start..end`.
    pub fn range(colors: u64, start: u64, end: u64) -> Result<Self, ConfigError> {
        Self::of(colors, start..end)
    }

    pub fn colors(&self) -> u64 {
        self.colors
    }

    #[inline]
    pub fn contains(&self, c: u64) -> bool {
        c < self.colors && self.bits[(c / 64) as usize] >> (c % 64) & 1 == 1
    }

    pub fn insert(&mut self, c: u64) {
        assert!(c < self.colors, "color {c} of {}", self.colors);
        self.bits[(c / 64) as usize] |= 1 << (c % 64);
    }

    pub fn remove(&mut self, c: u64) {
        if c < self.colors {
            self.bits[(c / 64) as usize] &= !(1 << (c % 64));
        }
    }

    pub fn len(&self) -> u64 {
        self.bits.iter().map(|w| w.count_ones() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|&w| w == 0)
    }

    pub fn is_full(&self) -> bool {
        self.len() == self.colors
    }

    /// The colors in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.colors).filter(|&c| self.contains(c))
    }

    /// The first color at or after `from` (cyclically) in the set.
    pub fn next_from(&self, from: u64) -> Option<u64> {
        (0..self.colors)
            .map(|k| (from + k) % self.colors)
            .find(|&c| self.contains(c))
    }
}

/// One page-frame request from the fault path.
#[derive(Debug, Clone, Copy)]
pub struct AllocRequest<'a> {
    /// Colors the policy allows for this page.
    pub allowed: &'a ColorSet,
    /// The CPU taking the fault (per-CPU lists).
    pub cpu: usize,
    /// The faulting address space.
    pub asid: u32,
    /// The faulting virtual page number.
    pub vpn: u64,
}

/// A page-frame allocator (mechanism only: which colors are allowed is the policy's call).
pub trait FrameAllocator: std::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// Whether it places by color (honours `AllocRequest::allowed`).
    fn places_by_color(&self) -> bool {
        true
    }
    /// A free frame of an allowed color, or `None` if it has none.
    fn alloc(&mut self, req: &AllocRequest) -> Option<Pfn>;
    /// Take back a frame from `alloc`.
    fn free(&mut self, pfn: Pfn, cpu: usize);
    /// Frames it holds free right now (for the ownership check; order unspecified).
    fn free_frames(&self) -> Vec<Pfn>;
    /// An aligned block of 2^order frames (huge pages), if this allocator can give one.
    fn alloc_block(&mut self, _order: u32) -> Option<Pfn> {
        None
    }
    /// Whether `alloc_block` is supported at all.
    fn gives_blocks(&self) -> bool {
        false
    }
    /// Take back a block from `alloc_block`.
    fn free_block(&mut self, pfn: Pfn, order: u32) {
        for p in pfn..pfn + (1 << order) {
            self.free(p, 0);
        }
    }
}

crate::registry! {
    /// The allocators a config can name (`[memory] allocator`): the registry
    /// (`crate::registry`), one line per allocator.
    #[derive(Default)]
    pub enum AllocatorKind (field = "memory.allocator", what = "allocator", plural = "allocators") {
        #[default]
        Buddy = "buddy",
        Random = "random",
        Sequential = "sequential",
        BinHopping = "bin-hopping",
        ColorPool = "color-pool",
        Contiguous = "contiguous",
    }
}

fn default_ram() -> Size {
    Size(1 << 30)
}
fn default_aged_held() -> f64 {
    0.25
}
fn default_pool_cap() -> u32 {
    64
}
fn default_pcp_batch() -> u32 {
    31
}

/// `[memory]` in a config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// RAM size (a multiple of the page size).
    #[serde(default = "default_ram")]
    pub ram: Size,
    #[serde(default)]
    pub allocator: AllocatorKind,
    /// Buddy (and the buddy under color-pool): start fragmented like a long-running system.
    #[serde(default)]
    pub aged: bool,
    /// With `aged`: the fraction of RAM that stays held by the rest of the system.
    #[serde(default = "default_aged_held")]
    pub aged_held: f64,
    /// Buddy: order-0 frames moved between a CPU's list and the buddy lists at a time (Linux's
    /// `pcp->batch`; a list holds at most 6 batches, Linux's `high`).
    #[serde(default = "default_pcp_batch")]
    pub pcp_batch: u32,
    /// Color-pool: frames a per-color list keeps on free before returning them to the buddy
    /// system.
    #[serde(default = "default_pool_cap")]
    pub pool_cap: u32,
    /// Color-pool: the memory pool's size (COLORIS section 4: 1 GiB, so each of 64 colors
    /// gives at most 16 MiB): the most the pool draws from the buddy system, net of what it
    /// returns. A process that needs a frame of its colors when the pool is at this size and
    /// has none of them is out of memory in its colors. Default: no bound but RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_size: Option<Size>,
    /// Seed of the random allocator and of aging.
    #[serde(default)]
    pub seed: u64,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            ram: default_ram(),
            allocator: AllocatorKind::default(),
            aged: false,
            aged_held: default_aged_held(),
            pcp_batch: default_pcp_batch(),
            pool_cap: default_pool_cap(),
            pool_size: None,
            seed: 0,
        }
    }
}

/// Who holds a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Free,
    /// An address space (process).
    Space(u32),
    /// The kernel (page tables) or the rest of the system (aging).
    Kernel,
}

const FREE: u32 = 0;
const KERNEL: u32 = u32::MAX;

/// Why a frame could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error("out of memory: no free frame in the {allowed} allowed colors ({free} frames free in all colors, {total} in RAM)")]
    OutOfFrames { allowed: u64, free: u64, total: u64 },
    #[error("the `{allocator}` allocator does not place pages by color, but this page may only use {allowed} of {colors} colors; use one of random, sequential, bin-hopping, color-pool, contiguous")]
    ColorsUnsupported {
        allocator: &'static str,
        allowed: u64,
        colors: u64,
    },
    #[error("the allowed color set is empty")]
    NoColors,
    #[error("the `{allocator}` allocator cannot hand out huge pages (aligned blocks of frames); use buddy or color-pool")]
    BlocksUnsupported { allocator: &'static str },
    #[error("out of memory: no free aligned block of {frames} frames for a huge page ({free} frames free)")]
    NoBlock { frames: u64, free: u64 },
}

/// The frames of a machine and the allocator that hands them out.
#[derive(Debug)]
pub struct PhysicalMemory {
    frames: u64,
    colors: u64,
    /// Per frame: FREE, KERNEL, or asid + 1.
    owner: Vec<u32>,
    free: u64,
    allocator: Box<dyn FrameAllocator>,
    /// Modelled page contents: one checksum per frame (0 when free). A page's first touch
    /// stamps it, a copy carries it over, so a recolor that loses or mixes up contents is
    /// caught by `System`'s content check.
    content: Vec<u64>,
}

impl PhysicalMemory {
    /// RAM of `config.ram` bytes in pages of `page_size`, colored for a cache of `colors`
    /// colors, with `cpus` per-CPU lists.
    pub fn new(
        config: &MemoryConfig,
        page_size: u64,
        colors: u64,
        cpus: usize,
    ) -> Result<Self, ConfigError> {
        let ram = config.ram.0;
        if ram == 0 || !ram.is_multiple_of(page_size) {
            return Err(ConfigError::new(
                "memory.ram",
                format!("{ram} bytes is not a positive multiple of the page size ({page_size})"),
            ));
        }
        let frames = ram / page_size;
        if frames > u32::MAX as u64 {
            return Err(ConfigError::new(
                "memory.ram",
                format!("{frames} frames: at most 2^32 frames are supported"),
            ));
        }
        if frames < colors {
            return Err(ConfigError::new(
                "memory.ram",
                format!("{frames} frames cannot cover the cache's {colors} colors once"),
            ));
        }
        if !(0.0..0.95).contains(&config.aged_held) {
            return Err(ConfigError::new(
                "memory.aged_held",
                format!("{}: allowed 0 <= aged_held < 0.95", config.aged_held),
            ));
        }
        if config.pcp_batch == 0 || config.pool_cap == 0 {
            return Err(ConfigError::new(
                "memory",
                "pcp_batch and pool_cap must be at least 1",
            ));
        }
        let pool_frames = match config.pool_size {
            Some(size) if size.0 < page_size * colors || !size.0.is_multiple_of(page_size) => {
                return Err(ConfigError::new(
                    "memory.pool_size",
                    format!(
                        "{} bytes: the pool must be a multiple of the page size ({page_size}) holding at least one page of each of the {colors} colors",
                        size.0
                    ),
                ))
            }
            Some(size) => Some(size.0 / page_size),
            None => None,
        };
        let cpus = cpus.max(1);
        let mut owner = vec![FREE; frames as usize];
        let buddy = |owner: &mut Vec<u32>| {
            let mut b = Buddy::new(frames, cpus, config.pcp_batch);
            if config.aged {
                for pfn in b.age(config.aged_held, config.seed) {
                    owner[pfn as usize] = KERNEL;
                }
            }
            b
        };
        let allocator: Box<dyn FrameAllocator> = match config.allocator {
            AllocatorKind::Buddy => Box::new(buddy(&mut owner)),
            AllocatorKind::ColorPool => Box::new(ColorPool::new(
                buddy(&mut owner),
                colors,
                config.pool_cap as usize,
                pool_frames,
            )),
            AllocatorKind::Random => Box::new(RandomFrames::new(frames, colors, config.seed)),
            AllocatorKind::Sequential => Box::new(Sequential::new(frames, colors)),
            AllocatorKind::BinHopping => Box::new(BinHopping::new(frames, colors)),
            AllocatorKind::Contiguous => Box::new(Contiguous::new(frames, colors)),
        };
        let held = owner.iter().filter(|&&o| o != FREE).count() as u64;
        Ok(PhysicalMemory {
            frames,
            colors,
            owner,
            free: frames - held,
            allocator,
            content: vec![0; frames as usize],
        })
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn colors(&self) -> u64 {
        self.colors
    }

    pub fn free_frames(&self) -> u64 {
        self.free
    }

    pub fn allocator_name(&self) -> &'static str {
        self.allocator.name()
    }

    #[inline]
    pub fn color_of(&self, pfn: Pfn) -> u64 {
        pfn % self.colors
    }

    pub fn owner(&self, pfn: Pfn) -> Owner {
        match self.owner[pfn as usize] {
            FREE => Owner::Free,
            KERNEL => Owner::Kernel,
            a => Owner::Space(a - 1),
        }
    }

    /// A frame for `req`, recorded as held by `owner`.
    pub fn alloc(&mut self, req: &AllocRequest, owner: Owner) -> Result<Pfn, MemoryError> {
        if req.allowed.is_empty() {
            return Err(MemoryError::NoColors);
        }
        if !req.allowed.is_full() && !self.allocator.places_by_color() {
            return Err(MemoryError::ColorsUnsupported {
                allocator: self.allocator.name(),
                allowed: req.allowed.len(),
                colors: self.colors,
            });
        }
        let pfn = self.allocator.alloc(req).ok_or(MemoryError::OutOfFrames {
            allowed: req.allowed.len(),
            free: self.free,
            total: self.frames,
        })?;
        let slot = &mut self.owner[pfn as usize];
        assert_eq!(
            *slot,
            FREE,
            "{} handed out frame {pfn:#x}, which is already held",
            self.allocator.name()
        );
        debug_assert!(req.allowed.contains(pfn % self.colors) || !self.allocator.places_by_color());
        *slot = Self::owner_code(owner);
        self.free -= 1;
        Ok(pfn)
    }

    fn owner_code(owner: Owner) -> u32 {
        match owner {
            Owner::Free => panic!("allocating a frame to nobody"),
            Owner::Kernel => KERNEL,
            Owner::Space(a) => a
                .checked_add(1)
                .filter(|&v| v != KERNEL)
                .expect("asid range"),
        }
    }

    /// Give back a held frame.
    pub fn free(&mut self, pfn: Pfn, cpu: usize) {
        let slot = &mut self.owner[pfn as usize];
        assert_ne!(*slot, FREE, "frame {pfn:#x} freed twice");
        *slot = FREE;
        self.content[pfn as usize] = 0;
        self.free += 1;
        self.allocator.free(pfn, cpu);
    }

    /// An aligned block of 2^order frames for a huge page, held by `owner`.
    pub fn alloc_block(&mut self, order: u32, owner: Owner) -> Result<Pfn, MemoryError> {
        if !self.allocator.gives_blocks() {
            return Err(MemoryError::BlocksUnsupported {
                allocator: self.allocator.name(),
            });
        }
        let n = 1u64 << order;
        let pfn = self
            .allocator
            .alloc_block(order)
            .ok_or(MemoryError::NoBlock {
                frames: n,
                free: self.free,
            })?;
        assert_eq!(pfn % n, 0, "block {pfn:#x} is not aligned to {n} frames");
        let code = Self::owner_code(owner);
        for p in pfn..pfn + n {
            let slot = &mut self.owner[p as usize];
            assert_eq!(*slot, FREE, "block frame {p:#x} is already held");
            *slot = code;
        }
        self.free -= n;
        Ok(pfn)
    }

    /// Give back a block from `alloc_block`.
    pub fn free_block(&mut self, pfn: Pfn, order: u32) {
        for p in pfn..pfn + (1 << order) {
            let slot = &mut self.owner[p as usize];
            assert_ne!(*slot, FREE, "frame {p:#x} freed twice");
            *slot = FREE;
            self.content[p as usize] = 0;
        }
        self.free += 1 << order;
        self.allocator.free_block(pfn, order);
    }

    /// The modelled contents of `pfn` (see the field's doc).
    pub fn content(&self, pfn: Pfn) -> u64 {
        self.content[pfn as usize]
    }

    /// Stamp a freshly faulted page's contents.
    pub fn stamp(&mut self, pfn: Pfn, checksum: u64) {
        self.content[pfn as usize] = checksum;
    }

    /// Copy a page's contents (the copy of a recolor).
    pub fn copy_page(&mut self, from: Pfn, to: Pfn) {
        self.content[to as usize] = self.content[from as usize];
    }

    /// Every frame is either held (per the ownership table) or free in the allocator, exactly
    /// once. Returns the violations found.
    pub fn check_invariants(&self) -> Vec<String> {
        let mut bad = Vec::new();
        let mut seen = vec![false; self.frames as usize];
        let free = self.allocator.free_frames();
        for &pfn in &free {
            if pfn >= self.frames {
                bad.push(format!("free frame {pfn:#x} is beyond RAM"));
                continue;
            }
            if std::mem::replace(&mut seen[pfn as usize], true) {
                bad.push(format!(
                    "frame {pfn:#x} is free twice in {}",
                    self.allocator.name()
                ));
            }
            if self.owner[pfn as usize] != FREE {
                bad.push(format!("frame {pfn:#x} is both held and free"));
            }
        }
        let held = self.owner.iter().filter(|&&o| o != FREE).count() as u64;
        if held + free.len() as u64 != self.frames {
            bad.push(format!(
                "{held} frames held + {} free != {} in RAM: frames leaked",
                free.len(),
                self.frames
            ));
        }
        if free.len() as u64 != self.free {
            bad.push(format!(
                "free count {} but the allocator holds {}",
                self.free,
                free.len()
            ));
        }
        bad
    }
}

/// Per-color stacks of free frames, shared by the color-placing allocators.
#[derive(Debug, Clone)]
pub(crate) struct ColorLists {
    lists: Vec<Vec<Pfn>>,
}

impl ColorLists {
    /// Every frame of `frames`, each in its color's list, lowest frame on top.
    pub fn full(frames: u64, colors: u64) -> Self {
        let mut lists = vec![Vec::new(); colors as usize];
        for pfn in (0..frames).rev() {
            lists[(pfn % colors) as usize].push(pfn);
        }
        ColorLists { lists }
    }

    pub fn empty(colors: u64) -> Self {
        ColorLists {
            lists: vec![Vec::new(); colors as usize],
        }
    }

    pub fn colors(&self) -> u64 {
        self.lists.len() as u64
    }

    pub fn len(&self, color: u64) -> usize {
        self.lists[color as usize].len()
    }

    pub fn pop(&mut self, color: u64) -> Option<Pfn> {
        self.lists[color as usize].pop()
    }

    pub fn push(&mut self, pfn: Pfn) {
        let c = pfn % self.colors();
        self.lists[c as usize].push(pfn);
    }

    pub fn list_mut(&mut self, color: u64) -> &mut Vec<Pfn> {
        &mut self.lists[color as usize]
    }

    pub fn all(&self) -> Vec<Pfn> {
        self.lists.iter().flatten().copied().collect()
    }
}

#[cfg(test)]
mod tests;
