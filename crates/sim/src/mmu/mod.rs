/*!
Virtual memory: page tables whose tables are real simulated frames, and TLBs.

A page walk reads one entry per level, and each entry lives at a physical address inside a
table frame that `memory::PhysicalMemory` handed out (held by the kernel), so the system can
send every walk read through the caches: page tables compete for cache space like data does,
and a polluter slows a co-runner's walks (ROCS section 6.4, where TLB-miss stalls fell from
443 to 136 cycles per walk once pollution was contained).

- `page_table`: x86-64-style radix tables (4 levels of 512 entries by default, configurable),
  present/accessed/dirty bits, a software "recolor at next fault" bit (COLORIS section 3.3,
  lazy recoloring). 2 MiB mappings are not there yet (they need a contiguous-block request
  from the allocators, which comes with the system engine).
- `tlb`: a set-associative LRU TLB of (address space, virtual page, page size) entries, with
  per-page and per-address-space invalidation for shootdowns; per core the system keeps an L1
  dTLB, an L1 iTLB and an L2 TLB of these.
*/
mod page_table;
mod tlb;

pub use page_table::{AddressSpace, PageTableConfig, Pte, Walk, WalkOutcome, ENTRIES};
pub use tlb::{Tlb, TlbConfig, Translation};
