/*!
cachecolor's native trace format: a versioned file header, then zstd-compressed blocks of up to
`BLOCK_RECORDS` records, each with an xxh3-64 checksum, then an end marker carrying the total
record count. `docs/trace-format.md` is the byte-exact specification; this comment is the map.

```text
file   = header block* end
header = "CCTRACE\0" version:u16 flags:u16 meta_len:u32 meta[meta_len] xxh3(header so far):u64
block  = "CCBK" n:u32 raw_len:u32 comp_len:u32 xxh3(n,raw_len,comp_len,payload):u64 payload
end    = "CCEN" 0:u32 total_records:u64 xxh3(0,total_records):u64          (then end of file)
```
All integers are little-endian. A block's payload decompresses (zstd) to `raw_len` bytes that
hold its `n` records in columns, so that each column compresses well and decodes in a tight
loop (DESIGN.md principle 5):

```text
addr_len:u32 size_esc:u32 icount_esc:u32 threads:u32      column directory (counts)
tag[n]     kind (bits 0-1) | privileged (bit 2) | address width class (bits 3-5) | new thread (bit 6)
           | syscall identity follows (bit 7; version 2; reserved, must be 0, in version 1)
offset[n]  address & 63 (byte within the 64-byte line)
size[n]    size, or 255 = the next u16 of the size escapes
icount[n]  icount, or 255 = the next u32 of the icount escapes
addr[addr_len]  per record, zigzag(line - previous line of the same stream) in 0,1,2,3,4,5,6
                or 8 little-endian bytes (the width class); streams: instruction / data
size escapes (u16 each), icount escapes (u32 each), new thread ids (u32 each),
syscall identities (u32 each, version 2: one per record with tag bit 7, `Record::syscall`)
```
Version 2 (Nellans et al. issue: the syscall identity of a privileged run) only adds tag bit 7
and the syscall column at the end of the raw block; the directory is unchanged (the column's
length is the count of tags with bit 7). Version 1 files read as before (bit 7 must be 0).
Predictors (previous line per stream, current thread = 0) restart at every block, so a block
decodes on its own.

Version 3 (for attribution) defines header flag bit 0, `FLAG_PCS`: every block then ends
with a PC column, one u64 per data record (kind other than ifetch): the address of the
instruction that made the access (0 = unknown; an ifetch's PC is its own address) XOR the
address of the block's latest ifetch before it (0 if none), so that the PC of a captured data
record, which is its instruction's fetch just before it, is stored as 0. A writer
without PCs still writes version 2, so older readers keep reading what they can.

Contract:
- A writer that is dropped without `finish` leaves a file without an end marker, which a reader
  reports as truncated: a crash never passes for a complete trace.
- A reader never panics and never trusts a length before checking it against a limit
  (`MAX_BLOCK_RECORDS`, `MAX_METADATA_BYTES`, the per-record maximum encoded size); every error is
  a `TraceError` carrying the byte offset where the problem was found. Reading is block at a
  time, so memory does not grow with trace length. After an error the reader keeps returning it.
*/
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use super::{FoldedFetches, Kind, Progress, Record, RecordSource, BLOCK_RECORDS};
use crate::error::{Error, TraceError};

mod fold;
mod reader;
use fold::decode_folding;
pub use reader::TraceReader;

/// The first 8 bytes of every native trace.
pub const MAGIC: [u8; 8] = *b"CCTRACE\0";
/// The format version this code writes and reads.
pub const VERSION: u16 = 3;
/// The version written when the records carry no PC column (readable by older cachecolors).
pub const VERSION_WITHOUT_PCS: u16 = 2;
/// Header flag (version 3): every block ends with the PC column of its data records.
pub const FLAG_PCS: u16 = 1;
/// The oldest version this code still reads.
pub const MIN_VERSION: u16 = 1;
/// Marker that starts a block of records.
pub const BLOCK_MAGIC: [u8; 4] = *b"CCBK";
/// Marker that starts the end record.
pub const END_MAGIC: [u8; 4] = *b"CCEN";
/// Most records a reader accepts in one block (the writer uses `BLOCK_RECORDS`).
pub const MAX_BLOCK_RECORDS: usize = 1 << 20;
/// Longest metadata string a reader accepts.
pub const MAX_METADATA_BYTES: usize = 1 << 20;
/// zstd level used by the writer (1 is the fastest to write and decodes as fast as any).
pub const ZSTD_LEVEL: i32 = 1;

/// Bytes of a block header and of the end record.
const BLOCK_HEADER_BYTES: usize = 24;
/// Fixed part of the file header before the metadata.
const FILE_HEADER_FIXED: usize = 16;
/// Column directory at the start of a raw block.
const DIRECTORY_BYTES: usize = 16;
/// Largest encoding of one record: 4 fixed columns + 8 address + 2 size + 4 icount + 4 thread
/// + 4 syscall.
const MAX_RECORD_BYTES: usize = 26;
/// Version 3 with `FLAG_PCS`: 8 more bytes per record for its PC.
const MAX_RECORD_BYTES_WITH_PCS: usize = MAX_RECORD_BYTES + 8;
/// Address granularity of the delta coding (bytes): lines, with the offset in its own column.
const LINE_SHIFT: u32 = 6;
const OFFSET_MASK: u64 = (1 << LINE_SHIFT) - 1;
/// Escape value in the one-byte size and icount columns.
const ESCAPE: u8 = 255;

const TAG_PRIVILEGED: u8 = 1 << 2;
const TAG_WIDTH_SHIFT: u32 = 3;
const TAG_NEW_THREAD: u8 = 1 << 6;
/// Version 2: a syscall identity for this record follows in the syscall column (version 1:
/// reserved, must be 0).
const TAG_SYSCALL: u8 = 1 << 7;
/// Byte width of each address width class.
const WIDTHS: [usize; 8] = [0, 1, 2, 3, 4, 5, 6, 8];
/// Mask of the bytes of each address width class.
const MASKS: [u64; 8] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    u64::MAX,
];
/// Width class for a value needing `i` bytes.
const CLASS_FOR_BYTES: [u8; 9] = [0, 1, 2, 3, 4, 5, 6, 7, 7];

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Most bytes a compressed payload of `raw_len` bytes may take (zstd's own bound is below it).
fn max_compressed_len(raw_len: usize) -> usize {
    raw_len + raw_len / 64 + 1024
}

// ---------------------------------------------------------------------------------------------
// Block encoding

// The writer's blocks must be readable.
const _: () = assert!(BLOCK_RECORDS <= MAX_BLOCK_RECORDS);

/// Column buffers reused from block to block by the writer.
#[derive(Default)]
struct Encoder {
    addr: Vec<u8>,
    size_esc: Vec<u8>,
    icount_esc: Vec<u8>,
    threads: Vec<u8>,
    syscalls: Vec<u8>,
}

impl Encoder {
    /// Encode `records` (at most `MAX_BLOCK_RECORDS`) into `raw`, replacing its contents.
    /// With `pcs` (one per record), the PC column of the data records is appended (version 3).
    fn encode(&mut self, records: &[Record], pcs: Option<&[u64]>, raw: &mut Vec<u8>) {
        let n = records.len();
        // Addresses are written as whole 8-byte words, each advancing by its width only; the
        // buffer keeps its length between blocks so it is zeroed once, not per block.
        if self.addr.len() < 8 * n + 8 {
            self.addr.resize(8 * n + 8, 0);
        }
        let mut pa = 0usize;
        self.size_esc.clear();
        self.icount_esc.clear();
        self.threads.clear();
        self.syscalls.clear();
        raw.clear();
        raw.resize(DIRECTORY_BYTES + 4 * n, 0);
        let (dir, cols) = raw.split_at_mut(DIRECTORY_BYTES);
        let (tags, rest) = cols.split_at_mut(n);
        let (offsets, rest) = rest.split_at_mut(n);
        let (sizes, icounts) = rest.split_at_mut(n);

        let mut prev_line = [0u64; 2];
        let mut thread = 0u32;
        for (i, r) in records.iter().enumerate() {
            let stream = (r.kind == Kind::IFetch) as usize;
            let line = r.addr >> LINE_SHIFT;
            let delta = zigzag(line.wrapping_sub(prev_line[stream]) as i64);
            prev_line[stream] = line;
            let class = CLASS_FOR_BYTES[(64 - delta.leading_zeros() as usize).div_ceil(8)];
            self.addr[pa..pa + 8].copy_from_slice(&delta.to_le_bytes());
            pa += WIDTHS[class as usize];

            let mut tag = r.kind as u8 | (class << TAG_WIDTH_SHIFT);
            if r.privileged {
                tag |= TAG_PRIVILEGED;
            }
            if r.syscall != 0 {
                tag |= TAG_SYSCALL;
                self.syscalls.extend_from_slice(&r.syscall.to_le_bytes());
            }
            if r.thread != thread {
                tag |= TAG_NEW_THREAD;
                thread = r.thread;
                self.threads.extend_from_slice(&thread.to_le_bytes());
            }
            tags[i] = tag;
            offsets[i] = (r.addr & OFFSET_MASK) as u8;
            sizes[i] = if r.size < ESCAPE as u16 {
                r.size as u8
            } else {
                self.size_esc.extend_from_slice(&r.size.to_le_bytes());
                ESCAPE
            };
            icounts[i] = if r.icount < ESCAPE as u32 {
                r.icount as u8
            } else {
                self.icount_esc.extend_from_slice(&r.icount.to_le_bytes());
                ESCAPE
            };
        }
        let counts = [
            pa,
            self.size_esc.len() / 2,
            self.icount_esc.len() / 4,
            self.threads.len() / 4,
        ];
        for (slot, count) in dir.chunks_exact_mut(4).zip(counts) {
            slot.copy_from_slice(&(count as u32).to_le_bytes());
        }
        raw.extend_from_slice(&self.addr[..pa]);
        raw.extend_from_slice(&self.size_esc);
        raw.extend_from_slice(&self.icount_esc);
        raw.extend_from_slice(&self.threads);
        raw.extend_from_slice(&self.syscalls);
        if let Some(pcs) = pcs {
            debug_assert_eq!(pcs.len(), n);
            // XOR with the block's latest fetch: a captured data record follows the fetch of its
            // own instruction, so its word is 0 and the column costs zstd almost nothing.
            let mut last_fetch = 0u64;
            for (r, pc) in records.iter().zip(pcs) {
                if r.kind == Kind::IFetch {
                    last_fetch = r.addr;
                } else {
                    raw.extend_from_slice(&(pc ^ last_fetch).to_le_bytes());
                }
            }
        }
    }
}

/// Decode a raw block of `n` records into `out` (cleared first). `raw` must be followed by at
/// least 8 readable bytes (the reader pads its buffer) so that addresses load as whole words.
/// Errors describe what is inconsistent; the caller adds the block and its offset.
///
/// A first pass checks the tags and escape counts against the column directory, so that the
/// second, hot pass cannot run past a column and needs no error path of its own.
/// With `pcs`, the block ends with the PC column (version 3, `FLAG_PCS`), decoded into one PC
/// per record (an ifetch's own address).
fn decode(
    raw: &[u8],
    raw_len: usize,
    n: usize,
    version: u16,
    out: &mut Vec<Record>,
    mut pcs: Option<&mut Vec<u64>>,
    mut fold: Option<&mut FoldedFetches>,
) -> Result<(), String> {
    debug_assert!(raw.len() >= raw_len + 8);
    out.clear();
    if let Some(p) = pcs.as_deref_mut() {
        p.clear();
    }
    if let Some(f) = fold.as_deref_mut() {
        f.clear();
    }
    if raw_len < DIRECTORY_BYTES + 4 * n {
        return Err(format!("{raw_len} bytes cannot hold {n} records"));
    }
    let dir = |i: usize| u32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap()) as usize;
    let (addr_len, n_size_esc, n_icount_esc, n_threads) = (dir(0), dir(1), dir(2), dir(3));
    let fixed_end = DIRECTORY_BYTES + 4 * n;
    // Records carrying a syscall identity (tag bit 7): a u32 each in the last column.
    let n_syscalls = count_bytes(&raw[DIRECTORY_BYTES..DIRECTORY_BYTES + n], |t| {
        t & TAG_SYSCALL != 0
    });
    if version < 2 && n_syscalls > 0 {
        return Err("a record has the reserved tag bit set".to_string());
    }
    // Records whose PC is in the PC column: every one but the ifetches (kind 2).
    let n_pcs = if pcs.is_some() {
        n - count_bytes(&raw[DIRECTORY_BYTES..DIRECTORY_BYTES + n], |t| {
            t & 3 == Kind::IFetch as u8
        })
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
    let addr_end = fixed_end + addr_len;
    let size_esc = &raw[addr_end..addr_end + 2 * n_size_esc];
    let icount_end = addr_end + 2 * n_size_esc + 4 * n_icount_esc;
    let icount_esc = &raw[addr_end + 2 * n_size_esc..icount_end];
    let threads_end = icount_end + 4 * n_threads;
    let threads = &raw[icount_end..threads_end];
    let syscalls_end = raw_len - 8 * n_pcs;
    let syscalls = &raw[threads_end..syscalls_end];

    // Pass 1: validate, so pass 2 stays inside every column. Written as narrow reductions over
    // chunks so the compiler vectorises them: width = class, except class 7 is 8 bytes wide.
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
    let escaped = |col: &[u8]| count_bytes(col, |b| b == ESCAPE);
    // The spec: `offset = addr & 63`. A byte of 64-255 would OR into the line bits and decode a
    // different address than was written, so it is corruption.
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

    // Pass 2: the common case, kept small enough to live in registers: escaped sizes and
    // icounts come out as 255 and threads as 0 here, and are patched by pass 3 if present.
    // The PCs (version 3) are decoded in the same pass, from the address just decoded, so the
    // records are not read back.
    let addr = &raw[fixed_end..addr_end + 8];
    // The PC column and the 8 bytes of padding after it: a load at the column's end (made for
    // an ifetch, whose value is not used) stays in bounds.
    let column = if pcs.is_some() {
        &raw[syscalls_end..raw_len + 8]
    } else {
        &[]
    };
    let columns = Columns {
        tags,
        offsets,
        sizes,
        icounts,
        addr,
        pcs: column,
    };
    match (pcs, fold.as_deref_mut()) {
        (Some(pcs), None) => decode_records::<true>(columns, out, pcs),
        (None, None) => decode_records::<false>(columns, out, &mut Vec::new()),
        (Some(pcs), Some(f)) => decode_folding::<true>(columns, out, pcs, f),
        (None, Some(f)) => decode_folding::<false>(columns, out, &mut Vec::new(), f),
    }
    // Where fetches were folded out, a marked record's place among the records given is found
    // from its place among the encoded ones (folded fetches carry no marks).
    let given = fold.as_deref().map(|f| &f.columns[..]);
    let at = |i: usize| match given {
        Some(cols) => cols.partition_point(|&c| (c as usize) < i),
        None => i,
    };

    // Pass 3: escapes and threads, only for blocks that have them. Pass 1 counted the escapes
    // and thread ids, so each value iterator yields exactly one item per marked record.
    if n_size_esc > 0 {
        let mut values = size_esc.chunks_exact(2);
        for_each_marked(
            sizes,
            |b| b == ESCAPE,
            |i| {
                if let (Some(r), Some(v)) = (out.get_mut(at(i)), values.next()) {
                    r.size = u16::from_le_bytes([v[0], v[1]]);
                }
            },
        );
    }
    if n_icount_esc > 0 {
        let mut values = icount_esc.chunks_exact(4);
        for_each_marked(
            icounts,
            |b| b == ESCAPE,
            |i| {
                if let (Some(r), Some(v)) = (out.get_mut(at(i)), values.next()) {
                    r.icount = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                }
            },
        );
    }
    if n_threads > 0 {
        // Fill each run of records with its thread; runs of thread 0 are already right.
        let mut values = threads.chunks_exact(4);
        let records_given = out.len();
        let (mut start, mut thread) = (0usize, 0u32);
        let mut fill = |end: usize, thread: u32| {
            if thread != 0 {
                out[start..end].iter_mut().for_each(|r| r.thread = thread);
            }
            start = end;
        };
        for_each_marked(
            tags,
            |t| t & TAG_NEW_THREAD != 0,
            |i| {
                fill(at(i), thread);
                if let Some(v) = values.next() {
                    thread = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                }
            },
        );
        fill(records_given, thread);
    }
    if n_syscalls > 0 {
        let mut values = syscalls.chunks_exact(4);
        for_each_marked(
            tags,
            |t| t & TAG_SYSCALL != 0,
            |i| {
                if let (Some(r), Some(v)) = (out.get_mut(at(i)), values.next()) {
                    r.syscall = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                }
            },
        );
    }
    Ok(())
}

/// Pass 2's state through a block's address column: its cursor and the previous line of each
/// stream (instruction, data), as the writer's predictors left them.
#[derive(Default)]
struct Lines {
    at: usize,
    data: u64,
    inst: u64,
}

impl Lines {
    /// The next encoded record with `tag`, byte within its line `off`, size and icount bytes
    /// `s` and `c` (escapes are patched by pass 3), its line delta read from the address
    /// column `addr` (followed by 8 readable bytes). Without a branch on the kind.
    #[inline(always)]
    fn record(&mut self, tag: u8, off: u8, s: u8, c: u8, addr: &[u8]) -> Record {
        let kind = match tag & 3 {
            0 => Kind::Load,
            1 => Kind::Store,
            2 => Kind::IFetch,
            _ => Kind::Modify,
        };
        let class = ((tag >> TAG_WIDTH_SHIFT) & 7) as usize;
        let word = u64::from_le_bytes(addr[self.at..self.at + 8].try_into().unwrap());
        self.at += WIDTHS[class];
        let delta = unzigzag(word & MASKS[class]) as u64;
        let is_inst = kind == Kind::IFetch;
        let line = if is_inst { self.inst } else { self.data }.wrapping_add(delta);
        self.inst = if is_inst { line } else { self.inst };
        self.data = if is_inst { self.data } else { line };
        Record {
            addr: (line << LINE_SHIFT) | off as u64,
            thread: 0,
            icount: c as u32,
            size: s as u16,
            kind,
            privileged: tag & TAG_PRIVILEGED != 0,
            syscall: 0,
        }
    }
}

/// A block's columns as pass 2 of `decode` reads them: `addr` is the address column followed by
/// 8 readable bytes; `pcs` (with PCs) the PC column followed by 8 readable bytes, else empty.
#[derive(Clone, Copy)]
struct Columns<'a> {
    tags: &'a [u8],
    offsets: &'a [u8],
    sizes: &'a [u8],
    icounts: &'a [u8],
    addr: &'a [u8],
    pcs: &'a [u8],
}

/// How many of `bytes` satisfy `test`: counted in `u8` lanes, 255 bytes at a time, so the loop
/// vectorises (a `filter().count()` took nine host instructions a byte).
#[inline]
fn count_bytes(bytes: &[u8], test: impl Fn(u8) -> bool) -> usize {
    bytes
        .chunks(255)
        .map(|c| c.iter().fold(0u8, |k, &b| k + test(b) as u8) as usize)
        .sum()
}

/// `n` unwritten slots after the records in `out` and (with `PCS`) after the PCs in `pcs`,
/// for pass 2 to write by index before setting the lengths.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn spare_slots<'a, const PCS: bool>(
    out: &'a mut Vec<Record>,
    pcs: &'a mut Vec<u64>,
    n: usize,
) -> (
    &'a mut [std::mem::MaybeUninit<Record>],
    &'a mut [std::mem::MaybeUninit<u64>],
) {
    out.reserve(n);
    let pc_slots: &mut [std::mem::MaybeUninit<u64>] = if PCS {
        pcs.reserve(n);
        &mut pcs.spare_capacity_mut()[..n]
    } else {
        &mut []
    };
    (&mut out.spare_capacity_mut()[..n], pc_slots)
}

/// Pass 2 of `decode`: append one record per tag to `out` (and with `PCS`, its PC to `pcs`).
/// Pass 1 proved that the address widths sum to the column's length and that the PC column
/// holds one word per data record, so every load below is in bounds (the slices are still
/// indexed with checks: a corrupt block panics nowhere because pass 1 rejected it).
///
/// Written without a branch on the kind: the previous line of each stream, the latest fetch
/// and the PC column's cursor are selected arithmetically, so a trace's mix of ifetches and
/// data records costs no mispredictions.
#[inline(always)]
fn decode_records<const PCS: bool>(cols: Columns, out: &mut Vec<Record>, pcs: &mut Vec<u64>) {
    let n = cols.tags.len();
    let (start, pc_start) = (out.len(), pcs.len());
    let (records, pc_slots) = spare_slots::<PCS>(out, pcs, n);
    let mut lines = Lines::default();
    let (mut pc_at, mut last_fetch) = (0usize, 0u64);
    for (i, ((((&tag, &off), &s), &c), slot)) in cols
        .tags
        .iter()
        .zip(cols.offsets)
        .zip(cols.sizes)
        .zip(cols.icounts)
        .zip(records.iter_mut())
        .enumerate()
    {
        let r = lines.record(tag, off, s, c, cols.addr);
        let (is_inst, address) = (r.kind == Kind::IFetch, r.addr);
        slot.write(r);
        if PCS {
            // A data record's word is its PC XOR the block's latest fetch before it.
            let word = u64::from_le_bytes(cols.pcs[pc_at..pc_at + 8].try_into().unwrap());
            last_fetch = if is_inst { address } else { last_fetch };
            pc_slots[i].write(if is_inst { address } else { word ^ last_fetch });
            pc_at += 8 * (!is_inst) as usize;
        }
    }
    // SAFETY: the loop wrote each of the `n` reserved slots (one per tag; `records` and
    // `pc_slots` are `n` long).
    unsafe {
        out.set_len(start + n);
        if PCS {
            pcs.set_len(pc_start + n);
        }
    }
}

/// Call `f(i)` for each index whose byte satisfies `marked`, in order. Rare marks are the common
/// case, so 32-byte chunks are tested as a whole first (a loop the compiler vectorises).
#[inline]
fn for_each_marked(col: &[u8], marked: impl Fn(u8) -> bool, mut f: impl FnMut(usize)) {
    for (c, chunk) in col.chunks(32).enumerate() {
        if chunk.iter().fold(false, |any, &b| any | marked(b)) {
            for (j, &b) in chunk.iter().enumerate() {
                if marked(b) {
                    f(32 * c + j);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writer

/// Writes a native trace: records are buffered and written a block at a time. Call `finish` to
/// write the last block and the end marker; a trace without its end marker reads as truncated.
pub struct TraceWriter<W: Write> {
    w: W,
    pending: Vec<Record>,
    /// Version 3 with `FLAG_PCS`: the PC of each pending record.
    pcs: Option<Vec<u64>>,
    encoder: Encoder,
    compressor: zstd::bulk::Compressor<'static>,
    raw: Vec<u8>,
    comp: Vec<u8>,
    written: u64,
}

impl TraceWriter<BufWriter<File>> {
    /// Create (or truncate) the file at `path` and write the header.
    pub fn create(path: &Path, metadata: &str) -> Result<Self, Error> {
        let file = File::create(path).map_err(|e| {
            Error::Io(io::Error::new(
                e.kind(),
                format!("cannot create {}: {e}", path.display()),
            ))
        })?;
        TraceWriter::new(BufWriter::with_capacity(1 << 20, file), metadata)
    }
}

/// The file header for `metadata` (magic, version, length, metadata, checksum), as
/// [`TraceWriter::new`] writes it. A writer of a seekable file may rewrite it in place once the
/// trace is complete with metadata of the same length (the capture records how the program
/// ended this way: `cachecolor_capture`).
pub fn file_header(metadata: &str) -> Vec<u8> {
    file_header_with(metadata, false)
}

/// [`file_header`] of a trace whose records carry PCs (`with_pcs`: version 3, `FLAG_PCS`) or
/// not (version 2).
pub fn file_header_with(metadata: &str, with_pcs: bool) -> Vec<u8> {
    let (version, flags) = if with_pcs {
        (VERSION, FLAG_PCS)
    } else {
        (VERSION_WITHOUT_PCS, 0)
    };
    let mut header = Vec::with_capacity(FILE_HEADER_FIXED + metadata.len() + 8);
    header.extend_from_slice(&MAGIC);
    header.extend_from_slice(&version.to_le_bytes());
    header.extend_from_slice(&flags.to_le_bytes());
    header.extend_from_slice(&(metadata.len() as u32).to_le_bytes());
    header.extend_from_slice(metadata.as_bytes());
    let sum = xxh3_64(&header);
    header.extend_from_slice(&sum.to_le_bytes());
    header
}

impl<W: Write> TraceWriter<W> {
    /// Write the file header (with `metadata`, e.g. the command that produced the trace) to `w`.
    pub fn new(w: W, metadata: &str) -> Result<Self, Error> {
        TraceWriter::new_with(w, metadata, false)
    }

    /// A writer whose records carry the PC of the instruction that made them (version 3,
    /// `FLAG_PCS`): give them with `write_with_pc`; `write` records a PC of 0 (unknown).
    pub fn with_pcs(w: W, metadata: &str) -> Result<Self, Error> {
        TraceWriter::new_with(w, metadata, true)
    }

    /// `new` (`with_pcs` false) or `with_pcs`.
    pub fn new_with(mut w: W, metadata: &str, with_pcs: bool) -> Result<Self, Error> {
        if metadata.len() > MAX_METADATA_BYTES {
            return Err(Error::Trace(TraceError::new(format!(
                "trace metadata is {} bytes; at most {MAX_METADATA_BYTES} are allowed",
                metadata.len()
            ))));
        }
        w.write_all(&file_header_with(metadata, with_pcs))?;
        Ok(TraceWriter {
            w,
            pending: Vec::with_capacity(BLOCK_RECORDS),
            pcs: with_pcs.then(|| Vec::with_capacity(BLOCK_RECORDS)),
            encoder: Encoder::default(),
            compressor: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
            raw: Vec::new(),
            comp: Vec::new(),
            written: 0,
        })
    }

    /// Buffer one record; a block is written when `BLOCK_RECORDS` are buffered.
    #[inline]
    pub fn write(&mut self, r: &Record) -> Result<(), Error> {
        self.write_with_pc(r, 0)
    }

    /// Buffer one record made by the instruction at `pc` (kept only by a `with_pcs` writer).
    #[inline]
    pub fn write_with_pc(&mut self, r: &Record, pc: u64) -> Result<(), Error> {
        self.pending.push(*r);
        if let Some(pcs) = &mut self.pcs {
            pcs.push(pc);
        }
        if self.pending.len() >= BLOCK_RECORDS {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Does this writer keep PCs (`with_pcs`)?
    pub fn has_pcs(&self) -> bool {
        self.pcs.is_some()
    }

    /// Buffer many records, writing blocks as they fill.
    pub fn write_all(&mut self, rs: &[Record]) -> Result<(), Error> {
        self.write_all_with_pcs(rs, None)
    }

    /// Buffer many records with their PCs (`pcs`, one per record; `None`: unknown, 0), writing
    /// blocks as they fill.
    pub fn write_all_with_pcs(
        &mut self,
        mut rs: &[Record],
        mut pcs: Option<&[u64]>,
    ) -> Result<(), Error> {
        if let Some(p) = pcs {
            assert_eq!(p.len(), rs.len(), "one PC per record");
        }
        while !rs.is_empty() {
            let take = (BLOCK_RECORDS - self.pending.len()).min(rs.len());
            self.pending.extend_from_slice(&rs[..take]);
            if let Some(kept) = &mut self.pcs {
                match pcs {
                    Some(p) => {
                        kept.extend_from_slice(&p[..take]);
                        pcs = Some(&p[take..]);
                    }
                    None => kept.resize(kept.len() + take, 0),
                }
            }
            rs = &rs[take..];
            if self.pending.len() >= BLOCK_RECORDS {
                self.flush_block()?;
            }
        }
        Ok(())
    }

    /// Records accepted so far (written or buffered).
    pub fn records_written(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Write the last block and the end marker, flush, and hand back the inner writer.
    pub fn finish(mut self) -> Result<W, Error> {
        self.flush_block()?;
        let mut end = [0u8; BLOCK_HEADER_BYTES];
        end[..4].copy_from_slice(&END_MAGIC);
        end[8..16].copy_from_slice(&self.written.to_le_bytes());
        let sum = xxh3_64(&end[4..16]);
        end[16..].copy_from_slice(&sum.to_le_bytes());
        self.w.write_all(&end)?;
        self.w.flush()?;
        Ok(self.w)
    }

    fn flush_block(&mut self) -> Result<(), Error> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let n = self.pending.len();
        self.encoder
            .encode(&self.pending, self.pcs.as_deref(), &mut self.raw);
        self.comp.clear();
        self.comp
            .reserve(zstd::zstd_safe::compress_bound(self.raw.len()));
        self.compressor
            .compress_to_buffer(&self.raw, &mut self.comp)?;

        let mut header = [0u8; BLOCK_HEADER_BYTES];
        header[..4].copy_from_slice(&BLOCK_MAGIC);
        header[4..8].copy_from_slice(&(n as u32).to_le_bytes());
        header[8..12].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        header[12..16].copy_from_slice(&(self.comp.len() as u32).to_le_bytes());
        let sum = block_checksum(&header[4..16], &self.comp);
        header[16..].copy_from_slice(&sum.to_le_bytes());
        self.w.write_all(&header)?;
        self.w.write_all(&self.comp)?;
        self.written += n as u64;
        self.pending.clear();
        if let Some(pcs) = &mut self.pcs {
            pcs.clear();
        }
        Ok(())
    }
}

/// xxh3-64 of a block header's count and length fields followed by its payload.
fn block_checksum(fields: &[u8], payload: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(fields);
    h.update(payload);
    h.digest()
}

#[cfg(test)]
mod tests;
