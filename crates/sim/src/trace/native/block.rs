//! A decompressed block's columns, checked once (`Layout::check`, pass 1 of the decoder), and
//! its records visited one at a time from the columns (`RawBlock::for_each`) instead of
//! written out as `Record`s and read back: what a consumer that looks at each record once
//! (attribution) needs, without the 24-byte record per reference and the PC column's copy.

use super::*;

/// Where each column of a raw block lies, checked against the tags (pass 1 of `decode`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Layout {
    pub n: usize,
    /// End of the fixed columns (tags, offsets, sizes, icounts) and of the address column.
    pub fixed_end: usize,
    pub addr_end: usize,
    pub n_size_esc: usize,
    pub n_icount_esc: usize,
    pub n_threads: usize,
    pub n_syscalls: usize,
    /// Start of the PC column (the block's end when it has none).
    pub syscalls_end: usize,
    pub raw_len: usize,
}

impl Layout {
    /// Check the column directory of a raw block of `n` records against its tags and escape
    /// counts (with `pcs`: the PC column ends the block), so that a pass over the columns
    /// cannot run past one and needs no error path of its own. `raw` must be followed by at
    /// least 8 readable bytes.
    pub fn check(
        raw: &[u8],
        raw_len: usize,
        n: usize,
        version: u16,
        pcs: bool,
    ) -> Result<Layout, String> {
        debug_assert!(raw.len() >= raw_len + 8);
        if raw_len < DIRECTORY_BYTES + 4 * n {
            return Err(format!("{raw_len} bytes cannot hold {n} records"));
        }
        let dir = |i: usize| u32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap()) as usize;
        let (addr_len, n_size_esc, n_icount_esc, n_threads) = (dir(0), dir(1), dir(2), dir(3));
        let fixed_end = DIRECTORY_BYTES + 4 * n;
        // Records carrying a syscall identity (tag bit 7): a u32 each in the last column.
        let n_syscalls: usize = raw[DIRECTORY_BYTES..DIRECTORY_BYTES + n]
            .chunks(255)
            .map(|c| c.iter().fold(0u8, |k, &t| k + (t >> 7)) as usize)
            .sum();
        if version < 2 && n_syscalls > 0 {
            return Err("a record has the reserved tag bit set".to_string());
        }
        // Records whose PC is in the PC column: every one but the ifetches (kind 2).
        let n_pcs = if pcs {
            raw[DIRECTORY_BYTES..DIRECTORY_BYTES + n]
                .iter()
                .filter(|&&t| t & 3 != Kind::IFetch as u8)
                .count()
        } else {
            0
        };
        let expected = fixed_end as u64
            + addr_len as u64
            + 2 * n_size_esc as u64
            + 4 * n_icount_esc as u64
            + 4 * n_threads as u64
            + 4 * n_syscalls as u64
            + 8 * n_pcs as u64;
        if expected != raw_len as u64 {
            return Err(format!(
                "column directory describes {expected} bytes but the block holds {raw_len}"
            ));
        }
        let tags = &raw[DIRECTORY_BYTES..DIRECTORY_BYTES + n];
        let offsets = &raw[DIRECTORY_BYTES + n..DIRECTORY_BYTES + 2 * n];
        let sizes = &raw[DIRECTORY_BYTES + 2 * n..DIRECTORY_BYTES + 3 * n];
        let icounts = &raw[DIRECTORY_BYTES + 3 * n..fixed_end];

        // Written as narrow reductions over chunks so the compiler vectorises them: width =
        // class, except class 7 is 8 bytes wide.
        let (mut widths, mut new_threads) = (0usize, 0usize);
        for chunk in tags.chunks(4096) {
            // u16 lanes cannot overflow: at most 4096 x 8.
            let (mut class_sum, mut wide, mut changes) = (0u16, 0u16, 0u16);
            for &tag in chunk {
                let class = ((tag >> TAG_WIDTH_SHIFT) & 7) as u16;
                class_sum += class;
                wide += (class == 7) as u16;
                changes += ((tag & TAG_NEW_THREAD) != 0) as u16;
            }
            widths += class_sum as usize + wide as usize;
            new_threads += changes as usize;
        }
        let escaped = |col: &[u8]| -> usize {
            col.chunks(255)
                .map(|c| c.iter().fold(0u8, |n, &b| n + (b == ESCAPE) as u8) as usize)
                .sum()
        };
        // The spec: `offset = addr & 63`. A byte of 64-255 would OR into the line bits and
        // decode a different address than was written, so it is corruption.
        if offsets.iter().fold(0u8, |m, &o| m | o) > OFFSET_MASK as u8 {
            return Err("an offset byte is above 63 (the byte within a 64-byte line)".to_string());
        }
        if widths != addr_len
            || new_threads != n_threads
            || escaped(sizes) != n_size_esc
            || escaped(icounts) != n_icount_esc
        {
            return Err("column lengths do not match the records that use them".to_string());
        }
        Ok(Layout {
            n,
            fixed_end,
            addr_end: fixed_end + addr_len,
            n_size_esc,
            n_icount_esc,
            n_threads,
            n_syscalls,
            syscalls_end: raw_len - 8 * n_pcs,
            raw_len,
        })
    }

    pub fn tags<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[DIRECTORY_BYTES..DIRECTORY_BYTES + self.n]
    }
    pub fn offsets<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[DIRECTORY_BYTES + self.n..DIRECTORY_BYTES + 2 * self.n]
    }
    pub fn sizes<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[DIRECTORY_BYTES + 2 * self.n..DIRECTORY_BYTES + 3 * self.n]
    }
    pub fn icounts<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[DIRECTORY_BYTES + 3 * self.n..self.fixed_end]
    }
    /// The address column and the 8 bytes after it (whole-word loads stay in bounds).
    pub fn addresses<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.fixed_end..self.addr_end + 8]
    }
    fn icount_esc_start(&self) -> usize {
        self.addr_end + 2 * self.n_size_esc
    }
    fn threads_start(&self) -> usize {
        self.icount_esc_start() + 4 * self.n_icount_esc
    }
    pub fn size_escapes<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.addr_end..self.icount_esc_start()]
    }
    pub fn icount_escapes<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.icount_esc_start()..self.threads_start()]
    }
    pub fn threads<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.threads_start()..self.threads_start() + 4 * self.n_threads]
    }
    pub fn syscalls<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.threads_start() + 4 * self.n_threads..self.syscalls_end]
    }
    /// The PC column and the 8 bytes after it (a load at its end, made for an ifetch whose
    /// value is not used, stays in bounds).
    pub fn pc_column<'a>(&self, raw: &'a [u8]) -> &'a [u8] {
        &raw[self.syscalls_end..self.raw_len + 8]
    }
}

/// One block of a native trace as read (decompressed, its checksum and columns checked), not
/// yet decoded: `TraceReader::next_raw_block` fills it, `for_each` visits its records.
#[derive(Default)]
pub struct RawBlock {
    pub(super) raw: Vec<u8>,
    pub(super) layout: Layout,
    /// Whether the block ends with a PC column (version 3, `FLAG_PCS`).
    pub(super) pcs: bool,
}

impl RawBlock {
    /// An empty block (filled by `TraceReader::next_raw_block`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Records in the block.
    pub fn len(&self) -> usize {
        self.layout.n
    }

    pub fn is_empty(&self) -> bool {
        self.layout.n == 0
    }

    /// Call `f(record, pc)` for each record of the block in order, with the record and PC
    /// `TraceReader::next_block` and `block_pcs` give (the PC 0 when the trace has none). The
    /// columns are read in one pass: the record is built where `f` can keep it in registers;
    /// escaped sizes and icounts, thread changes and syscall identities come from their
    /// columns as their tags (or escape bytes) say, each a branch that is rarely taken.
    #[inline(always)]
    pub fn for_each(&self, mut f: impl FnMut(&Record, u64)) {
        if self.layout.n == 0 {
            return;
        }
        let (l, raw) = (&self.layout, &self.raw[..]);
        let (tags, offsets, sizes, icounts) =
            (l.tags(raw), l.offsets(raw), l.sizes(raw), l.icounts(raw));
        let addr = l.addresses(raw);
        let (size_esc, icount_esc) = (l.size_escapes(raw), l.icount_escapes(raw));
        let (threads, syscalls) = (l.threads(raw), l.syscalls(raw));
        let column = if self.pcs { l.pc_column(raw) } else { &[][..] };
        let (mut pa, mut prev_data, mut prev_inst) = (0usize, 0u64, 0u64);
        let (mut pc_at, mut last_fetch) = (0usize, 0u64);
        let (mut at_size, mut at_icount, mut at_thread, mut at_syscall) = (0, 0, 0, 0);
        let mut thread = 0u32;
        let u32_at = |c: &[u8], i: usize| u32::from_le_bytes(c[i..i + 4].try_into().unwrap());
        for (((&tag, &off), &s), &c) in tags.iter().zip(offsets).zip(sizes).zip(icounts) {
            let kind = match tag & 3 {
                0 => Kind::Load,
                1 => Kind::Store,
                2 => Kind::IFetch,
                _ => Kind::Modify,
            };
            let class = ((tag >> TAG_WIDTH_SHIFT) & 7) as usize;
            let word = u64::from_le_bytes(addr[pa..pa + 8].try_into().unwrap());
            pa += WIDTHS[class];
            let delta = unzigzag(word & MASKS[class]) as u64;
            let is_inst = kind == Kind::IFetch;
            let line = if is_inst { prev_inst } else { prev_data }.wrapping_add(delta);
            prev_inst = if is_inst { line } else { prev_inst };
            prev_data = if is_inst { prev_data } else { line };
            let address = (line << LINE_SHIFT) | off as u64;
            if tag & TAG_NEW_THREAD != 0 {
                thread = u32_at(threads, at_thread);
                at_thread += 4;
            }
            let size = if s == ESCAPE {
                at_size += 2;
                u16::from_le_bytes([size_esc[at_size - 2], size_esc[at_size - 1]])
            } else {
                s as u16
            };
            let icount = if c == ESCAPE {
                at_icount += 4;
                u32_at(icount_esc, at_icount - 4)
            } else {
                c as u32
            };
            let syscall = if tag & TAG_SYSCALL != 0 {
                at_syscall += 4;
                u32_at(syscalls, at_syscall - 4)
            } else {
                0
            };
            let pc = if self.pcs {
                // A data record's word is its PC XOR the block's latest fetch before it.
                let word = u64::from_le_bytes(column[pc_at..pc_at + 8].try_into().unwrap());
                last_fetch = if is_inst { address } else { last_fetch };
                pc_at += 8 * (!is_inst) as usize;
                if is_inst {
                    address
                } else {
                    word ^ last_fetch
                }
            } else {
                0
            };
            let rec = Record {
                addr: address,
                thread,
                icount,
                size,
                kind,
                privileged: tag & TAG_PRIVILEGED != 0,
                syscall,
            };
            f(&rec, pc);
        }
    }
}
