/*!
One memory reference as every part of cachecolor sees it: which thread made it, what kind it is,
whether it ran in privileged (kernel) mode, its size, its address and how many instructions
retired since the thread's previous record (so a timing model can charge compute cycles).

An access that spans two cache lines is split by the cache hierarchy, not here: a record keeps
what the program did.
*/
use serde::{Deserialize, Serialize};

/// What a reference does. `Modify` is a read-modify-write of one location (Valgrind lackey's
/// `M`, an x86 `add [mem], reg`): one cache access that leaves the line dirty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Kind {
    Load = 0,
    Store = 1,
    IFetch = 2,
    Modify = 3,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Load, Kind::Store, Kind::IFetch, Kind::Modify];

    #[inline]
    pub fn from_u8(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::Load),
            1 => Some(Kind::Store),
            2 => Some(Kind::IFetch),
            3 => Some(Kind::Modify),
            _ => None,
        }
    }

    #[inline]
    pub fn is_write(self) -> bool {
        matches!(self, Kind::Store | Kind::Modify)
    }

    #[inline]
    pub fn is_instruction(self) -> bool {
        matches!(self, Kind::IFetch)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Load => "load",
            Kind::Store => "store",
            Kind::IFetch => "ifetch",
            Kind::Modify => "modify",
        }
    }
}

/// One memory reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    /// Address (virtual for captured and synthetic traces; the simulated MMU translates it).
    pub addr: u64,
    /// Thread that made the reference (a small dense id; the capture assigns them in order).
    pub thread: u32,
    /// Instructions retired by this thread since its previous record (0 if unknown).
    pub icount: u32,
    /// Bytes accessed (at least 1).
    pub size: u16,
    pub kind: Kind,
    /// True when the reference was made in privileged (kernel) mode.
    pub privileged: bool,
    /// Syscall identity (the paper's AState stand-in, Nellans et al. section 4.2), set on the
    /// FIRST record of a privileged run and 0 everywhere else (0 = none). Packing: bits 31-22
    /// the syscall number (0..=1023), bits 21-0 a hash of its arguments folded to 22 bits
    /// (`pack_syscall`). A privileged run is a maximal stretch of one thread's records with
    /// `privileged` set; its length is the sum of their `icount`s.
    pub syscall: u32,
}

// The syscall identity lives in what was padding: a record stays 24 bytes.
const _: () = assert!(std::mem::size_of::<Record>() == 24);

/// Bits of the syscall number in `Record::syscall`.
pub const SYSCALL_NUMBER_BITS: u32 = 10;
/// Bits of the argument hash in `Record::syscall`.
pub const SYSCALL_ARGS_BITS: u32 = 32 - SYSCALL_NUMBER_BITS;

/// Pack a syscall number (taken modulo 1024) and a 64-bit hash of its arguments into the
/// `Record::syscall` word: number in the top 10 bits, the argument hash XOR-folded to 22 bits
/// below. The result is never 0 (0 means "no syscall identity"): a word that would be 0 (number
/// 0 with a folded hash of 0) becomes 1.
pub fn pack_syscall(number: u32, args_hash: u64) -> u32 {
    let mask = (1u64 << SYSCALL_ARGS_BITS) - 1;
    let mut h = args_hash;
    let mut folded = 0u64;
    while h != 0 {
        folded ^= h & mask;
        h >>= SYSCALL_ARGS_BITS;
    }
    let w = ((number & ((1 << SYSCALL_NUMBER_BITS) - 1)) << SYSCALL_ARGS_BITS) | folded as u32;
    w.max(1)
}

/// The syscall number of a packed `Record::syscall` word.
pub fn syscall_number(word: u32) -> u32 {
    word >> SYSCALL_ARGS_BITS
}

impl Record {
    #[inline]
    pub fn new(kind: Kind, addr: u64, size: u16) -> Self {
        Record {
            addr,
            thread: 0,
            icount: 0,
            size,
            kind,
            privileged: false,
            syscall: 0,
        }
    }

    #[inline]
    pub fn load(addr: u64) -> Self {
        Record::new(Kind::Load, addr, 8)
    }

    #[inline]
    pub fn store(addr: u64) -> Self {
        Record::new(Kind::Store, addr, 8)
    }
}
