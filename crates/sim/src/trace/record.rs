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
