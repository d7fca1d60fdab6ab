//! Radix page tables stored in simulated frames (see the module doc of `mmu`).
use crate::error::ConfigError;
use crate::memory::{AllocRequest, ColorSet, MemoryError, Owner, Pfn, PhysicalMemory};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn default_levels() -> u32 {
    4
}

/// Shape of the page tables (`[mmu]` in a config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageTableConfig {
    /// Levels of tables (x86-64: 4; 5 with LA57).
    #[serde(default = "default_levels")]
    pub levels: u32,
}

impl Default for PageTableConfig {
    fn default() -> Self {
        PageTableConfig { levels: 4 }
    }
}

/// Entries per table (a 4 KiB table of 8-byte entries).
pub const ENTRIES: u64 = 512;
const ENTRY_BITS: u32 = 9;
const ENTRY_BYTES: u64 = 8;

/// A page-table entry: a frame number and flag bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pte(u64);

impl Pte {
    pub const PRESENT: u64 = 1;
    pub const ACCESSED: u64 = 1 << 1;
    pub const DIRTY: u64 = 1 << 2;
    /// Software bit: the page is to be recolored at its next fault (COLORIS lazy recoloring).
    pub const RECOLOR: u64 = 1 << 3;
    /// A leaf one level above the last: it maps a huge page of `ENTRIES` pages (x86's PS bit).
    pub const HUGE: u64 = 1 << 4;
    const PFN_SHIFT: u32 = 12;

    pub fn new(pfn: Pfn, flags: u64) -> Self {
        Pte(pfn << Self::PFN_SHIFT | flags)
    }
    pub fn pfn(self) -> Pfn {
        self.0 >> Self::PFN_SHIFT
    }
    pub fn has(self, flag: u64) -> bool {
        self.0 & flag != 0
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    fn set(&mut self, flag: u64, on: bool) {
        if on {
            self.0 |= flag
        } else {
            self.0 &= !flag
        }
    }
}

/// What a walk found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkOutcome {
    /// Mapped to this frame; `huge` if through a huge-page entry (the frame is the one holding
    /// the page asked for, inside the huge page's block).
    Mapped { pfn: Pfn, huge: bool },
    /// No present mapping; `recolor` if the entry was unmapped for lazy recoloring and still
    /// holds the old frame.
    Fault { recolor: bool },
}

/// One page walk: the physical addresses of the entries it read (top level first), which the
/// system sends through the caches, and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    pub reads: Vec<u64>,
    pub outcome: WalkOutcome,
}

/// One address space's page tables.
#[derive(Debug)]
pub struct AddressSpace {
    asid: u32,
    levels: u32,
    page_shift: u32,
    root: Pfn,
    /// Table frame -> its entries.
    tables: BTreeMap<Pfn, Box<[Pte]>>,
    mapped_pages: u64,
    /// Table frames allocated since the kernel last took them (to be zeroed: `take_new_tables`).
    new_tables: Vec<Pfn>,
}

impl AddressSpace {
    /// New empty tables (one root frame, taken from `memory` as a kernel frame).
    pub fn new(
        asid: u32,
        config: &PageTableConfig,
        memory: &mut PhysicalMemory,
        page_size: u64,
    ) -> Result<Self, MemoryError> {
        assert!((2..=5).contains(&config.levels), "checked by validate");
        let mut s = AddressSpace {
            asid,
            levels: config.levels,
            page_shift: page_size.trailing_zeros(),
            root: 0,
            tables: BTreeMap::new(),
            mapped_pages: 0,
            new_tables: Vec::new(),
        };
        s.root = s.new_table(memory, 0)?;
        Ok(s)
    }

    /// Check a config's table shape.
    pub fn validate(config: &PageTableConfig) -> Result<(), ConfigError> {
        if !(2..=5).contains(&config.levels) {
            return Err(ConfigError::new(
                "mmu.levels",
                format!("{} levels: allowed 2..=5", config.levels),
            ));
        }
        Ok(())
    }

    pub fn asid(&self) -> u32 {
        self.asid
    }

    /// Frames holding this space's tables.
    pub fn table_frames(&self) -> usize {
        self.tables.len()
    }

    /// The table frames allocated since the last call: a kernel zeroes a table page before
    /// it links it in (Linux allocates them with `__GFP_ZERO`).
    pub fn take_new_tables(&mut self) -> Vec<Pfn> {
        std::mem::take(&mut self.new_tables)
    }

    /// Pages mapped (present or awaiting recolor).
    pub fn mapped_pages(&self) -> u64 {
        self.mapped_pages
    }

    fn new_table(&mut self, memory: &mut PhysicalMemory, vpn: u64) -> Result<Pfn, MemoryError> {
        let all = ColorSet::all(memory.colors());
        let req = AllocRequest {
            allowed: &all,
            cpu: 0,
            asid: self.asid,
            vpn,
        };
        let pfn = memory.alloc(&req, Owner::Kernel)?;
        self.tables.insert(
            pfn,
            vec![Pte::default(); ENTRIES as usize].into_boxed_slice(),
        );
        self.new_tables.push(pfn);
        Ok(pfn)
    }

    /// Index into the table at `level` (0 = root) for virtual page `vpn`.
    fn index(&self, vpn: u64, level: u32) -> u64 {
        (vpn >> (ENTRY_BITS * (self.levels - 1 - level))) & (ENTRIES - 1)
    }

    fn entry_addr(&self, table: Pfn, index: u64) -> u64 {
        (table << self.page_shift) + index * ENTRY_BYTES
    }

    /// Walk for virtual page `vpn`, setting the accessed bit (and dirty for a write) of the
    /// leaf entry it maps through, as a hardware walker does.
    pub fn walk(&mut self, vpn: u64, write: bool) -> Walk {
        let mut reads = Vec::with_capacity(self.levels as usize);
        let mut table = self.root;
        for level in 0..self.levels {
            let i = self.index(vpn, level);
            reads.push(self.entry_addr(table, i));
            let last = level == self.levels - 1;
            let e = &mut self.tables.get_mut(&table).expect("table frame")[i as usize];
            if last {
                if !e.has(Pte::PRESENT) {
                    return Walk {
                        reads,
                        outcome: WalkOutcome::Fault {
                            recolor: e.has(Pte::RECOLOR),
                        },
                    };
                }
                e.set(Pte::ACCESSED, true);
                if write {
                    e.set(Pte::DIRTY, true);
                }
                return Walk {
                    reads,
                    outcome: WalkOutcome::Mapped {
                        pfn: e.pfn(),
                        huge: false,
                    },
                };
            }
            if e.has(Pte::HUGE) {
                e.set(Pte::ACCESSED, true);
                if write {
                    e.set(Pte::DIRTY, true);
                }
                return Walk {
                    reads,
                    outcome: WalkOutcome::Mapped {
                        pfn: e.pfn() + (vpn & (ENTRIES - 1)),
                        huge: true,
                    },
                };
            }
            if !e.has(Pte::PRESENT) {
                return Walk {
                    reads,
                    outcome: WalkOutcome::Fault { recolor: false },
                };
            }
            table = e.pfn();
        }
        unreachable!("the last level returns")
    }

    /// The table holding the leaf entry of `vpn` at `leaf_level`, allocating missing tables.
    fn leaf_table(
        &mut self,
        memory: &mut PhysicalMemory,
        vpn: u64,
        leaf_level: u32,
    ) -> Result<Pfn, MemoryError> {
        let mut table = self.root;
        for level in 0..leaf_level {
            let i = self.index(vpn, level) as usize;
            let e = self.tables[&table][i];
            table = if e.has(Pte::PRESENT) {
                e.pfn()
            } else {
                let t = self.new_table(memory, vpn)?;
                self.tables.get_mut(&table).expect("table")[i] = Pte::new(t, Pte::PRESENT);
                t
            };
        }
        Ok(table)
    }

    /// Map 4 KiB page `vpn` to frame `pfn` (tables it needs are allocated from `memory`).
    pub fn map(
        &mut self,
        memory: &mut PhysicalMemory,
        vpn: u64,
        pfn: Pfn,
    ) -> Result<(), MemoryError> {
        let leaf = self.levels - 1;
        let t = self.leaf_table(memory, vpn, leaf)?;
        let i = self.index(vpn, leaf) as usize;
        let e = &mut self.tables.get_mut(&t).expect("table")[i];
        assert!(!e.has(Pte::PRESENT), "page {vpn:#x} is already mapped");
        *e = Pte::new(pfn, Pte::PRESENT);
        self.mapped_pages += 1;
        Ok(())
    }

    /// Map the huge page of `ENTRIES` pages starting at `vpn` (a multiple of `ENTRIES`) to the
    /// aligned block of frames starting at `pfn`, with one entry a level above the last.
    pub fn map_huge(
        &mut self,
        memory: &mut PhysicalMemory,
        vpn: u64,
        pfn: Pfn,
    ) -> Result<(), MemoryError> {
        assert!(
            vpn.is_multiple_of(ENTRIES) && pfn.is_multiple_of(ENTRIES),
            "huge pages are aligned"
        );
        let level = self.levels - 2;
        let t = self.leaf_table(memory, vpn, level)?;
        let i = self.index(vpn, level) as usize;
        let e = &mut self.tables.get_mut(&t).expect("table")[i];
        assert!(
            e.is_empty(),
            "the huge page at {vpn:#x} overlaps small pages already mapped"
        );
        *e = Pte::new(pfn, Pte::PRESENT | Pte::HUGE | Pte::ACCESSED);
        self.mapped_pages += ENTRIES;
        Ok(())
    }

    /// Every mapped page (present or awaiting recolor): (first vpn, entry, huge), in vpn order.
    pub fn mappings(&self) -> Vec<(u64, Pte, bool)> {
        let mut out = Vec::new();
        let mut stack = vec![(self.root, 0u32, 0u64)];
        while let Some((table, level, prefix)) = stack.pop() {
            let last = level == self.levels - 1;
            for (i, &e) in self.tables[&table].iter().enumerate() {
                let vpn = prefix << ENTRY_BITS | i as u64;
                if e.is_empty() {
                    continue;
                }
                if last {
                    out.push((vpn, e, false));
                } else if e.has(Pte::HUGE) {
                    out.push((vpn << ENTRY_BITS, e, true));
                } else if e.has(Pte::PRESENT) {
                    stack.push((e.pfn(), level + 1, vpn));
                }
            }
        }
        out.sort_unstable_by_key(|m| m.0);
        out
    }

    fn leaf_mut(&mut self, vpn: u64) -> Option<&mut Pte> {
        let mut table = self.root;
        for level in 0..self.levels - 1 {
            let e = self.tables[&table][self.index(vpn, level) as usize];
            if !e.has(Pte::PRESENT) || e.has(Pte::HUGE) {
                return None;
            }
            table = e.pfn();
        }
        let i = self.index(vpn, self.levels - 1) as usize;
        self.tables.get_mut(&table).map(|t| &mut t[i])
    }

    /// Set the accessed (and for a write, dirty) bit of small page `vpn`: what the walk retried
    /// after a fault does (its reads are not simulated again; the fault's cost covers them).
    pub fn touch(&mut self, vpn: u64, write: bool) {
        if let Some(e) = self.leaf_mut(vpn) {
            e.set(Pte::ACCESSED, true);
            if write {
                e.set(Pte::DIRTY, true);
            }
        }
    }

    /// The leaf entry of 4 KiB page `vpn`, if its tables exist.
    pub fn pte(&mut self, vpn: u64) -> Option<Pte> {
        self.leaf_mut(vpn).map(|e| *e)
    }

    /// Remove the mapping of `vpn`; returns its frame (the caller frees it and shoots down TLBs).
    pub fn unmap(&mut self, vpn: u64) -> Option<Pfn> {
        let e = self.leaf_mut(vpn)?;
        if !e.has(Pte::PRESENT) && !e.has(Pte::RECOLOR) {
            return None;
        }
        let pfn = e.pfn();
        *e = Pte::default();
        self.mapped_pages -= 1;
        Some(pfn)
    }

    /// Lazy recoloring (COLORIS section 3.3): clear the present bit and set the software bit;
    /// the entry keeps its frame, so the fault handler can copy from it. Returns false if the
    /// page is not mapped.
    pub fn mark_for_recolor(&mut self, vpn: u64) -> bool {
        match self.leaf_mut(vpn) {
            Some(e) if e.has(Pte::PRESENT) => {
                e.set(Pte::PRESENT, false);
                e.set(Pte::RECOLOR, true);
                true
            }
            _ => false,
        }
    }

    /// Complete a recolor: point `vpn` at `new` and make it present again (the caller copied the
    /// contents, freed the old frame and shot down TLBs). Returns the old frame.
    pub fn remap(&mut self, vpn: u64, new: Pfn) -> Option<Pfn> {
        let e = self.leaf_mut(vpn)?;
        if !(e.has(Pte::PRESENT) || e.has(Pte::RECOLOR)) {
            return None;
        }
        let old = e.pfn();
        let keep = e.0 & (Pte::ACCESSED | Pte::DIRTY);
        *e = Pte::new(new, Pte::PRESENT | keep);
        Some(old)
    }

    /// Clear the accessed bits of every mapped 4 KiB page and return how many entries were
    /// visited and the pages whose bit was set (COLORIS Redistribution scans these).
    pub fn scan_and_clear_accessed(&mut self) -> (u64, Vec<u64>) {
        let mut visited = 0;
        let mut hot = Vec::new();
        let root = self.root;
        let mut stack = vec![(root, 0u32, 0u64)];
        while let Some((table, level, prefix)) = stack.pop() {
            let last = level == self.levels - 1;
            for i in 0..ENTRIES {
                let vpn = prefix << ENTRY_BITS | i;
                let e = self.tables.get_mut(&table).expect("table")[i as usize];
                if e.is_empty() {
                    continue;
                }
                if last || e.has(Pte::HUGE) {
                    visited += 1;
                    if e.has(Pte::ACCESSED) {
                        hot.push(if last { vpn } else { vpn << ENTRY_BITS });
                        self.tables.get_mut(&table).expect("table")[i as usize]
                            .set(Pte::ACCESSED, false);
                    }
                } else if e.has(Pte::PRESENT) {
                    stack.push((e.pfn(), level + 1, vpn));
                }
            }
        }
        hot.sort_unstable();
        (visited, hot)
    }

    /// Tear down: every mapped frame and every table frame goes back to `memory`.
    pub fn destroy(mut self, memory: &mut PhysicalMemory) {
        let mut stack = vec![(self.root, 0u32)];
        while let Some((table, level)) = stack.pop() {
            let entries = self.tables.remove(&table).expect("table");
            for e in entries.iter() {
                let mapped = e.has(Pte::PRESENT) || e.has(Pte::RECOLOR);
                if !mapped {
                    continue;
                }
                if level == self.levels - 1 {
                    memory.free(e.pfn(), 0);
                } else if e.has(Pte::HUGE) {
                    memory.free_block(e.pfn(), ENTRY_BITS);
                } else {
                    stack.push((e.pfn(), level + 1));
                }
            }
            memory.free(table, 0);
        }
        debug_assert!(self.tables.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Size;
    use crate::memory::{AllocatorKind, MemoryConfig};

    fn memory() -> PhysicalMemory {
        let cfg = MemoryConfig {
            ram: Size(64 << 20),
            allocator: AllocatorKind::Sequential,
            ..MemoryConfig::default()
        };
        PhysicalMemory::new(&cfg, 4096, 16, 1).unwrap()
    }

    fn data_frame(m: &mut PhysicalMemory, vpn: u64) -> Pfn {
        let all = ColorSet::all(m.colors());
        let req = AllocRequest {
            allowed: &all,
            cpu: 0,
            asid: 1,
            vpn,
        };
        m.alloc(&req, Owner::Space(1)).unwrap()
    }

    #[test]
    fn walks_read_one_entry_per_level_from_kernel_frames() {
        let mut m = memory();
        let mut s = AddressSpace::new(1, &PageTableConfig::default(), &mut m, 4096).unwrap();
        assert_eq!(s.table_frames(), 1);
        let vpns = [0u64, 1, 511, 512, 1 << 18, (1 << 27) + 5];
        let mut frames = Vec::new();
        for &v in &vpns {
            let p = data_frame(&mut m, v);
            s.map(&mut m, v, p).unwrap();
            frames.push(p);
        }
        // vpn 0, 1, 511 share all tables; 512 needs a new last-level table; 1 << 18 a new
        // level-2 and level-3 table; 1 << 27 new tables below the root.
        assert_eq!(s.table_frames(), 1 + 3 + 1 + 2 + 3);
        for (&v, &p) in vpns.iter().zip(&frames) {
            let w = s.walk(v, false);
            assert_eq!(
                w.outcome,
                WalkOutcome::Mapped {
                    pfn: p,
                    huge: false
                }
            );
            assert_eq!(w.reads.len(), 4);
            for (level, &addr) in w.reads.iter().enumerate() {
                assert_eq!(m.owner(addr / 4096), Owner::Kernel, "level {level}");
                assert_eq!(addr % 8, 0);
            }
            assert!(s.pte(v).unwrap().has(Pte::ACCESSED));
            assert!(!s.pte(v).unwrap().has(Pte::DIRTY));
        }
        s.walk(vpns[0], true);
        assert!(s.pte(vpns[0]).unwrap().has(Pte::DIRTY));
        // An unmapped page whose tables exist faults after reading all four levels; one far
        // away faults at the root.
        assert_eq!(
            s.walk(2, false).outcome,
            WalkOutcome::Fault { recolor: false }
        );
        assert_eq!(s.walk(2, false).reads.len(), 4);
        assert_eq!(s.walk(1 << 35, false).reads.len(), 1);
        let bad = m.check_invariants();
        assert!(bad.is_empty(), "{bad:?}");
        s.destroy(&mut m);
        assert_eq!(
            m.free_frames(),
            m.frames(),
            "destroy frees data and table frames"
        );
        assert!(m.check_invariants().is_empty());
    }

    #[test]
    fn lazy_recolor_faults_and_remaps() {
        let mut m = memory();
        let mut s = AddressSpace::new(1, &PageTableConfig::default(), &mut m, 4096).unwrap();
        let old = data_frame(&mut m, 7);
        s.map(&mut m, 7, old).unwrap();
        s.walk(7, true);
        assert!(s.mark_for_recolor(7));
        assert!(!s.mark_for_recolor(8), "unmapped pages cannot be marked");
        assert_eq!(
            s.walk(7, false).outcome,
            WalkOutcome::Fault { recolor: true }
        );
        let new = data_frame(&mut m, 7);
        assert_eq!(s.remap(7, new), Some(old));
        m.free(old, 0);
        assert_eq!(
            s.walk(7, false).outcome,
            WalkOutcome::Mapped {
                pfn: new,
                huge: false
            }
        );
        assert!(
            s.pte(7).unwrap().has(Pte::DIRTY),
            "remap keeps the dirty bit"
        );
        assert_eq!(s.unmap(7), Some(new));
        m.free(new, 0);
        assert_eq!(s.mapped_pages(), 0);
        s.destroy(&mut m);
        assert_eq!(m.free_frames(), m.frames());
    }

    #[test]
    fn access_bit_scan_reports_and_clears() {
        let mut m = memory();
        let mut s = AddressSpace::new(2, &PageTableConfig { levels: 3 }, &mut m, 4096).unwrap();
        for v in [3u64, 600, 9000] {
            let p = data_frame(&mut m, v);
            s.map(&mut m, v, p).unwrap();
        }
        s.walk(600, false);
        s.walk(9000, false);
        assert_eq!(s.scan_and_clear_accessed(), (3, vec![600, 9000]));
        assert_eq!(s.scan_and_clear_accessed(), (3, vec![]));
        s.walk(3, false);
        assert_eq!(s.scan_and_clear_accessed(), (3, vec![3]));
        s.destroy(&mut m);
        assert_eq!(m.free_frames(), m.frames());
        assert!(AddressSpace::validate(&PageTableConfig { levels: 7 }).is_err());
    }

    #[test]
    fn huge_pages_map_one_level_up_beside_small_pages() {
        let cfg = MemoryConfig {
            ram: Size(64 << 20),
            allocator: AllocatorKind::Buddy,
            ..MemoryConfig::default()
        };
        let mut m = PhysicalMemory::new(&cfg, 4096, 16, 1).unwrap();
        let mut s = AddressSpace::new(3, &PageTableConfig::default(), &mut m, 4096).unwrap();
        let block = m.alloc_block(9, Owner::Space(3)).unwrap();
        s.map_huge(&mut m, 1024, block).unwrap();
        let small = data_frame(&mut m, 5);
        s.map(&mut m, 5, small).unwrap();
        let w = s.walk(1024 + 77, true);
        assert_eq!(
            w.outcome,
            WalkOutcome::Mapped {
                pfn: block + 77,
                huge: true
            }
        );
        assert_eq!(w.reads.len(), 3, "a huge page's walk stops a level early");
        assert_eq!(s.mapped_pages(), 513);
        let maps = s.mappings();
        assert_eq!(maps.len(), 2);
        assert_eq!((maps[0].0, maps[0].2), (5, false));
        assert_eq!((maps[1].0, maps[1].2), (1024, true));
        assert!(maps[1].1.has(Pte::DIRTY));
        assert!(
            !s.mark_for_recolor(1024 + 3),
            "huge pages are not recolored"
        );
        assert_eq!(s.scan_and_clear_accessed(), (2, vec![1024]));
        s.walk(5, false);
        assert_eq!(s.scan_and_clear_accessed(), (2, vec![5]));
        s.destroy(&mut m);
        assert_eq!(m.free_frames(), m.frames(), "the block goes back whole");
        assert!(m.check_invariants().is_empty());
    }
}
