/*!
Decoder of the QEMU plugin's binary stream (format specified in qemu-plugin/cachecolor_trace.c)
into cachecolor records.

The plugin describes each translation block (TB) once (TBDEF + INSN records), then reports
"vCPU v starts TB t" (TBEXEC) and each load/store tagged with the index of its instruction in
the TB. Per vCPU, the decoder keeps the TB being executed and a cursor: a load/store of
instruction k first emits the ifetches of instructions cursor..=k (when ifetches are wanted),
then itself; the next TBEXEC (or THREAD, END, end of stream) emits the rest of the block. So
the output has exactly one ifetch per executed instruction, each before its instruction's data
accesses, and `icount` is exact: 1 on ifetches and 0 on data records when ifetches are recorded,
otherwise the number of instructions since the thread's previous record. A TB flagged in its
definition (last instruction possibly abandoned by QEMU 7.2's translator at a page end) counts
that instruction only after a CONFIRM record from the vCPU. (Checked against a plugin variant
recording one ifetch per executed instruction: identical record sequences on `ls` and
`python3 -c pass`, 44 M records.)

System calls (plugin `syscalls=on`, HELLO flag bit 1): SYSCALL (number) and three SYSARG
records of a vCPU open its pending call; at its SYSRET the decoder first accounts for the rest
of the vCPU's TB (the syscall instruction ends it) and then appends the call's privileged
records (`syscalls::records`: a kernel-stack marker carrying the identity, then the user buffer
accesses the call implies), so they follow the user code that made the call, in the thread's
order.

With ifetches off, the plugin does this bookkeeping itself (HELLO size = 0) and sends only
loads/stores whose `idx` field is already the instruction count; the decoder passes them on.

One record per guest memory operation: QEMU 7.2's x86 translator has no memory operation wider
than 8 bytes, so the plugin sees a 16-byte SSE access as two 8-byte callbacks at `a` and `a+8`,
a 32-byte AVX one as four (an `fxsave` as many). The decoder merges them back: a load or store
whose instruction is the one of the vCPU's previous data record -- same `idx` with nothing else
of that vCPU in between (ifetch=on: the instruction's index in the executing TB; ifetch=off:
`idx` = 0, no instruction retired since that record), of the same kind, starting where that
record ends -- extends it, up to `MAX_MERGED` bytes (beyond, a new record starts). So each
guest instruction's memory operation is one record with its real size, as cachegrind and lackey
(VEX keeps vector accesses whole) count them. The merged record may cross a line or a page;
every consumer splits it by line (and the whole-system MMU by page), as for any record.
Distinct operands of one instruction stay apart: a load and a store (`add [m], r`, `movs`) differ
in kind, and two loads are contiguous only by accident (`cmps` of adjacent buffers, which then
reads as one access). The held record is written before anything else the vCPU emits, so each
thread's order is unchanged; records of other vCPUs may pass it (threads interleave in chunks).

Thread ids: vCPU indices become dense ids in order of first output; a THREAD marker (a guest
thread created, possibly reusing the index of one that exited) gives that vCPU a fresh id.
The END record's count is checked against the records received (`complete`).

Every inconsistency (unknown kind, TB used before being defined, definition out of order, a
huge vCPU index) is an error naming the record's position: the stream comes from our own
plugin, so a mismatch means a version skew or a foreign writer, never something to guess around.
*/
use cachecolor_sim::trace::{Kind, Record};

use crate::syscalls;

use crate::sink::Counts;

/// Wire format constants; keep in step with qemu-plugin/cachecolor_trace.c.
pub(crate) const REC_BYTES: usize = 16;
pub(crate) const MAGIC: u64 = 0x4543_4152_5443_4343; // "CCCTRACE" as little-endian bytes
pub(crate) const FORMAT_VERSION: u32 = 3;
pub(crate) const K_LOAD: u8 = 0;
pub(crate) const K_STORE: u8 = 1;
pub(crate) const K_HELLO: u8 = 0xF0;
pub(crate) const K_THREAD: u8 = 0xF1;
pub(crate) const K_TBDEF: u8 = 0xF2;
pub(crate) const K_INSN: u8 = 0xF3;
pub(crate) const K_TBEXEC: u8 = 0xF4;
pub(crate) const K_CONFIRM: u8 = 0xF5;
pub(crate) const K_SYSCALL: u8 = 0xF6;
pub(crate) const K_SYSARG: u8 = 0xF7;
pub(crate) const K_SYSRET: u8 = 0xF8;
/// A system call changed the memory map: event `addr` of the plugin's maps= log (memmap.rs).
pub(crate) const K_MAPS: u8 = 0xF9;
pub(crate) const K_HEAPARG: u8 = 0xFA;
pub(crate) const K_HEAP: u8 = 0xFB;
pub(crate) const K_END: u8 = 0xFF;
/// Largest vCPU index accepted (QEMU's are small and dense; a bigger one means corruption).
const MAX_VCPU: u32 = 1 << 20;
/// Most instructions a TB may have (TCG's limit is 512).
const MAX_TB_INSNS: u32 = 1 << 16;
/// Largest merged access: 64 bytes, the widest single data operand of x86-64 (an AVX-512
/// register, one cache line). Bigger runs of pieces (`fxsave`'s 512 bytes) become 64-byte
/// records; cachegrind cuts such accesses to 64 bytes, lackey to 512.
pub(crate) const MAX_MERGED: u16 = 64;

const NONE: u32 = u32::MAX;

/// Per-vCPU decoding state.
#[derive(Clone, Copy)]
struct VState {
    /// Dense thread id, or NONE until the vCPU's first output record.
    thread: u32,
    /// First instruction (index into `insn_addr`) of the TB being executed; NONE if none.
    start: u32,
    /// Instructions of that TB that count (its last one only once confirmed, if flagged),
    /// all of them, and how many have been accounted for.
    n: u32,
    full: u32,
    cursor: u32,
    /// Instructions executed but not yet credited to a record (ifetches off).
    pending: u32,
    /// The system call entered and not yet returned (number, or -1), and its arguments 1-3.
    sys: i64,
    sys_args: [u64; 3],
    /// Arguments 1-3 (size, caller, old pointer) of the vCPU's next HEAP record.
    heap_args: [u64; 3],
    /// The vCPU's last data record, not yet emitted (pieces of its instruction's access may
    /// follow), with the `idx` it arrived with.
    held: Option<(Record, u32)>,
}

const FRESH: VState = VState {
    thread: NONE,
    start: NONE,
    n: 0,
    full: 0,
    cursor: 0,
    pending: 0,
    sys: -1,
    sys_args: [0; 3],
    heap_args: [0; 3],
    held: None,
};

/// One allocator call the heap shim reported (plugin `heap=on`; qemu-plugin/cachecolor_heap.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapCall {
    /// 0 the shim was loaded, 1 malloc/calloc, 2 realloc, 3 free.
    pub op: u8,
    pub ptr: u64,
    pub size: u64,
    /// Return address in the code that called the allocator.
    pub caller: u64,
    /// realloc's old pointer.
    pub old: u64,
    /// Position in the output vector `decode` was filling: the first record after the call.
    pub at: usize,
}

pub(crate) struct Decoder {
    ifetch: bool,
    /// The plugin counts instructions itself (ifetch=off): `idx` is the icount.
    counted: bool,
    /// The plugin sends system calls (syscalls=on), and the guest architecture (their numbering).
    syscalls: bool,
    arch: u16,
    /// Stream records consumed, markers included.
    received: u64,
    hello: bool,
    /// (END's count, records received before END).
    end: Option<(u64, u64)>,
    vcpus: Vec<VState>,
    next_thread: u32,
    /// TB number -> (first instruction, count, last instruction needs confirmation).
    tbs: Vec<(u32, u32, bool)>,
    insn_addr: Vec<u64>,
    insn_size: Vec<u8>,
    /// INSN records still expected for the TB being defined.
    def_left: u32,
    /// Records emitted since the last `take_counts`, by kind.
    counts: Counts,
    /// MAPS marks not yet taken: (event number, length of the output vector when it came).
    marks: Vec<(u64, usize)>,
    /// Allocator calls not yet taken.
    heap: Vec<HeapCall>,
}

impl Decoder {
    pub(crate) fn new(ifetch: bool) -> Self {
        Decoder {
            ifetch,
            counted: false,
            syscalls: false,
            arch: 0,
            received: 0,
            hello: false,
            end: None,
            vcpus: Vec::new(),
            next_thread: 0,
            tbs: Vec::new(),
            insn_addr: Vec::new(),
            insn_size: Vec::new(),
            def_left: 0,
            counts: Counts::default(),
            marks: Vec::new(),
            heap: Vec::new(),
        }
    }

    /// The kinds of the records emitted since the previous call.
    pub(crate) fn take_counts(&mut self) -> Counts {
        std::mem::take(&mut self.counts)
    }

    /// The MAPS marks since the previous call: (event, position in the output vector `decode`
    /// was filling: the index of the first record after the change).
    pub(crate) fn take_marks(&mut self) -> Vec<(u64, usize)> {
        std::mem::take(&mut self.marks)
    }

    /// The allocator calls since the previous call (positions as for `take_marks`).
    pub(crate) fn take_heap(&mut self) -> Vec<HeapCall> {
        std::mem::take(&mut self.heap)
    }

    /// True when the stream's END record arrived and its count matched.
    pub(crate) fn complete(&self) -> bool {
        matches!(self.end, Some((n, before)) if n == before)
    }

    /// True when the plugin sends system calls.
    #[cfg(test)]
    pub(crate) fn syscalls(&self) -> bool {
        self.syscalls
    }

    /// Threads that produced at least one record.
    pub(crate) fn threads(&self) -> u32 {
        self.next_thread
    }

    /// Decode whole records from `bytes` (a multiple of 16 long) into `out` until `out` holds
    /// at least `limit` records or the input is used up. Returns the bytes consumed.
    pub(crate) fn decode(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<Record>,
        limit: usize,
    ) -> Result<usize, String> {
        let mut used = 0;
        for c in bytes.chunks_exact(REC_BYTES) {
            if out.len() >= limit {
                break;
            }
            self.record(c, out)?;
            used += REC_BYTES;
            self.received += 1;
        }
        Ok(used)
    }

    /// Emit whatever the vCPUs still owe (the tails of the TBs they were executing): call once
    /// the stream has ended.
    pub(crate) fn finish(&mut self, out: &mut Vec<Record>) {
        for v in 0..self.vcpus.len() {
            self.finish_tb(v, out);
        }
    }

    #[inline]
    fn record(&mut self, c: &[u8], out: &mut Vec<Record>) -> Result<(), String> {
        let addr = u64::from_ne_bytes(c[0..8].try_into().unwrap());
        let vcpu = u32::from_ne_bytes(c[8..12].try_into().unwrap());
        let kind = c[12];
        let size = c[13];
        let idx = u16::from_ne_bytes([c[14], c[15]]) as u32;
        let at = self.received;

        if self.def_left > 0 {
            if kind != K_INSN {
                return Err(format!("record {at}: a TB definition is cut short"));
            }
            self.insn_addr.push(addr);
            self.insn_size.push(size);
            self.def_left -= 1;
            return Ok(());
        }
        if !self.hello {
            return self.hello(addr, vcpu, kind, size, idx as u16);
        }
        if self.end.is_some() {
            return Err(format!("record {at} follows the end record"));
        }
        match kind {
            K_LOAD | K_STORE => {
                let v = self.vcpu(vcpu, at)?;
                let kind = if kind == K_STORE {
                    Kind::Store
                } else {
                    Kind::Load
                };
                let size = size.max(1) as u16;
                if let Some((h, held_idx)) = &mut self.vcpus[v].held {
                    let same_insn = if self.counted {
                        idx == 0
                    } else {
                        *held_idx == idx
                    };
                    if same_insn
                        && h.kind == kind
                        && h.addr.wrapping_add(h.size as u64) == addr
                        && h.size + size <= MAX_MERGED
                    {
                        h.size += size;
                        return Ok(());
                    }
                }
                self.release_held(v, out);
                let icount = if self.counted {
                    idx
                } else {
                    self.advance(v, idx + 1, out);
                    std::mem::take(&mut self.vcpus[v].pending)
                };
                let thread = self.thread_of(v);
                let r = Record {
                    addr,
                    thread,
                    icount,
                    size,
                    kind,
                    privileged: false,
                    syscall: 0,
                };
                self.vcpus[v].held = Some((r, idx));
            }
            K_TBEXEC => {
                let v = self.vcpu(vcpu, at)?;
                let Some(&(start, n, confirm)) = self.tbs.get(addr as usize) else {
                    return Err(format!("record {at}: TB {addr} runs before it is defined"));
                };
                self.finish_tb(v, out);
                let st = &mut self.vcpus[v];
                st.start = start;
                st.full = n;
                st.n = n - confirm as u32;
                st.cursor = 0;
            }
            K_CONFIRM => {
                let v = self.vcpu(vcpu, at)?;
                let st = &mut self.vcpus[v];
                st.n = st.full;
            }
            K_TBDEF => {
                if addr != self.tbs.len() as u64 {
                    return Err(format!(
                        "record {at}: TB {addr} defined where TB {} was expected",
                        self.tbs.len()
                    ));
                }
                if vcpu == 0 || vcpu > MAX_TB_INSNS {
                    return Err(format!("record {at}: TB {addr} has {vcpu} instructions"));
                }
                let start = u32::try_from(self.insn_addr.len())
                    .map_err(|_| format!("record {at}: more than 4 G instructions translated"))?;
                self.tbs.push((start, vcpu, size & 1 != 0));
                self.def_left = vcpu;
            }
            K_THREAD => {
                let v = self.vcpu(vcpu, at)?;
                self.finish_tb(v, out);
                self.vcpus[v] = FRESH;
            }
            K_SYSCALL => {
                let v = self.vcpu(vcpu, at)?;
                let st = &mut self.vcpus[v];
                st.sys = addr as i64;
                st.sys_args = [0; 3];
            }
            K_SYSARG => {
                let v = self.vcpu(vcpu, at)?;
                if !(1..=3).contains(&idx) {
                    return Err(format!("record {at}: system call argument {idx}"));
                }
                self.vcpus[v].sys_args[idx as usize - 1] = addr;
            }
            K_SYSRET => {
                let v = self.vcpu(vcpu, at)?;
                let st = self.vcpus[v];
                if st.sys < 0 {
                    return Err(format!(
                        "record {at}: a system call returns that never started"
                    ));
                }
                self.vcpus[v].sys = -1;
                self.finish_tb(v, out);
                let thread = self.thread_of(v);
                let (l, s) =
                    syscalls::records(self.arch, st.sys, st.sys_args, addr as i64, thread, out);
                self.counts.loads += l;
                self.counts.stores += s;
            }
            K_MAPS => {
                // After the system call's instruction, like its SYSRET's records.
                let v = self.vcpu(vcpu, at)?;
                self.finish_tb(v, out);
                self.marks.push((addr, out.len()));
            }
            K_HEAPARG => {
                let v = self.vcpu(vcpu, at)?;
                if !(1..=3).contains(&idx) {
                    return Err(format!("record {at}: heap call argument {idx}"));
                }
                self.vcpus[v].heap_args[idx as usize - 1] = addr;
            }
            K_HEAP => {
                // The shim's report is a system call instruction: it ends the TB, so the
                // block's fetches come first, as for MAPS.
                let v = self.vcpu(vcpu, at)?;
                self.finish_tb(v, out);
                if size > 3 {
                    return Err(format!("record {at}: heap call of unknown kind {size}"));
                }
                let [bytes, caller, old] = std::mem::take(&mut self.vcpus[v].heap_args);
                self.heap.push(HeapCall {
                    op: size,
                    ptr: addr,
                    size: bytes,
                    caller,
                    old,
                    at: out.len(),
                });
            }
            K_END => {
                self.finish(out);
                self.end = Some((addr, at));
            }
            K_INSN => return Err(format!("record {at}: instruction outside a TB definition")),
            k => return Err(format!("record {at} has unknown kind {k:#x}")),
        }
        Ok(())
    }

    fn hello(
        &mut self,
        addr: u64,
        version: u32,
        kind: u8,
        flags: u8,
        arch: u16,
    ) -> Result<(), String> {
        if kind != K_HELLO || addr != MAGIC {
            return Err(
                "the stream does not start with the plugin's header; is another \
                        program writing to the FIFO?"
                    .into(),
            );
        }
        if version != FORMAT_VERSION {
            return Err(format!(
                "the plugin speaks stream format {version}, this library {FORMAT_VERSION}"
            ));
        }
        let blocks = flags & 1 != 0;
        if self.ifetch && !blocks {
            return Err("the plugin was started with ifetch=off".into());
        }
        self.counted = !blocks;
        self.syscalls = flags & 2 != 0;
        self.arch = arch;
        self.hello = true;
        Ok(())
    }

    #[inline]
    fn vcpu(&mut self, vcpu: u32, at: u64) -> Result<usize, String> {
        let v = vcpu as usize;
        if v >= self.vcpus.len() {
            if vcpu >= MAX_VCPU {
                return Err(format!("record {at} has vCPU index {vcpu}"));
            }
            self.vcpus.resize(v + 1, FRESH);
        }
        Ok(v)
    }

    #[inline]
    fn thread_of(&mut self, v: usize) -> u32 {
        let st = &mut self.vcpus[v];
        if st.thread == NONE {
            st.thread = self.next_thread;
            self.next_thread += 1;
        }
        st.thread
    }

    /// Account for the instructions of vCPU `v`'s TB up to (not including) index `upto`.
    #[inline]
    fn advance(&mut self, v: usize, upto: u32, out: &mut Vec<Record>) {
        let st = self.vcpus[v];
        if st.start == NONE || upto <= st.cursor {
            return;
        }
        let upto = upto.min(st.n);
        if self.ifetch {
            let thread = self.thread_of(v);
            let (a, b) = ((st.start + st.cursor) as usize, (st.start + upto) as usize);
            self.counts.ifetches += (b - a) as u64;
            out.extend(self.insn_addr[a..b].iter().zip(&self.insn_size[a..b]).map(
                |(&addr, &size)| Record {
                    addr,
                    thread,
                    icount: 1,
                    size: size.max(1) as u16,
                    kind: Kind::IFetch,
                    privileged: false,
                    syscall: 0,
                },
            ));
        } else {
            let st = &mut self.vcpus[v];
            st.pending = st.pending.saturating_add(upto - st.cursor);
        }
        self.vcpus[v].cursor = upto;
    }

    /// Emit vCPU `v`'s held data record, if any.
    #[inline]
    fn release_held(&mut self, v: usize, out: &mut Vec<Record>) {
        if let Some((r, _)) = self.vcpus[v].held.take() {
            match r.kind {
                Kind::Store => self.counts.stores += 1,
                _ => self.counts.loads += 1,
            }
            out.push(r);
        }
    }

    /// Account for the rest of vCPU `v`'s TB (after its held data record).
    fn finish_tb(&mut self, v: usize, out: &mut Vec<Record>) {
        self.release_held(v, out);
        let n = self.vcpus[v].n;
        self.advance(v, n, out);
        self.vcpus[v].start = NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(addr: u64, vcpu: u32, kind: u8, size: u8, idx: u16) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&addr.to_ne_bytes());
        b[8..12].copy_from_slice(&vcpu.to_ne_bytes());
        b[12] = kind;
        b[13] = size;
        b[14..16].copy_from_slice(&idx.to_ne_bytes());
        b
    }

    /// HELLO; TB 0 = 3 instructions at 0x100 (sizes 2,3,4); TB 1 = 1 instruction at 0x200;
    /// TB 2 = 2 instructions at 0xFF0, the last to be confirmed.
    fn prologue() -> Vec<u8> {
        let mut v = Vec::new();
        for r in [
            rec(MAGIC, FORMAT_VERSION, K_HELLO, 1, 0),
            rec(0, 0, K_THREAD, 0, 0),
            rec(0, 3, K_TBDEF, 0, 0),
            rec(0x100, 0, K_INSN, 2, 0),
            rec(0x102, 0, K_INSN, 3, 0),
            rec(0x105, 0, K_INSN, 4, 0),
            rec(1, 1, K_TBDEF, 0, 0),
            rec(0x200, 0, K_INSN, 5, 0),
            rec(2, 2, K_TBDEF, 1, 0),
            rec(0xFF0, 0, K_INSN, 3, 0),
            rec(0xFF3, 0, K_INSN, 7, 0),
        ] {
            v.extend_from_slice(&r);
        }
        v
    }

    fn body() -> Vec<u8> {
        let mut v = Vec::new();
        for r in [
            rec(0, 0, K_TBEXEC, 0, 0),
            rec(0x9000, 0, K_STORE, 8, 1), // instruction 1 stores
            rec(0x9008, 0, K_LOAD, 4, 1),  // ... and loads
            rec(0, 2, K_THREAD, 0, 0),
            rec(1, 2, K_TBEXEC, 0, 0),
            rec(0xA000, 2, K_LOAD, 8, 0),
            rec(1, 0, K_TBEXEC, 0, 0), // vCPU 0 leaves TB 0 (instruction 2 still owed)
            rec(0, 2, K_THREAD, 0, 0), // vCPU 2 reused by a new thread
            rec(1, 2, K_TBEXEC, 0, 0),
            rec(2, 3, K_TBEXEC, 0, 0), // flagged TB, last instruction not confirmed
            rec(2, 3, K_TBEXEC, 0, 0), // again, and this time it is
            rec(2, 3, K_CONFIRM, 0, 0),
            rec(0x7000, 3, K_LOAD, 2, 1),
        ] {
            v.extend_from_slice(&r);
        }
        v
    }

    /// (addr, thread, kind, size, icount) of each record.
    type Summary = Vec<(u64, u32, Kind, u16, u32)>;

    fn run(ifetch: bool, end: bool) -> (Decoder, Summary) {
        let mut bytes = prologue();
        bytes.extend(body());
        if end {
            let n = (bytes.len() / 16) as u64;
            bytes.extend_from_slice(&rec(n, 0, K_END, 0, 0));
        }
        let mut d = Decoder::new(ifetch);
        let mut out = Vec::new();
        // Feed in small pieces with a small limit to exercise resumption.
        let mut pos = 0;
        while pos < bytes.len() {
            let piece = &bytes[pos..(pos + 48).min(bytes.len())];
            let limit = out.len() + 2;
            let used = d.decode(piece, &mut out, limit).unwrap();
            pos += used;
        }
        if !end {
            d.finish(&mut out);
        }
        assert_eq!(d.take_counts(), Counts::of(&out));
        let got = out
            .iter()
            .map(|r| (r.addr, r.thread, r.kind, r.size, r.icount))
            .collect();
        (d, got)
    }

    #[test]
    fn expands_blocks_into_ifetches_in_order() {
        let (d, got) = run(true, true);
        assert_eq!(
            got,
            vec![
                (0x100, 0, Kind::IFetch, 2, 1),
                (0x102, 0, Kind::IFetch, 3, 1),
                (0x9000, 0, Kind::Store, 8, 0),
                (0x200, 1, Kind::IFetch, 5, 1),
                // A data record waits for the vCPU's next record (pieces of its access may
                // follow): other threads' records can pass it, its own thread's cannot.
                (0x9008, 0, Kind::Load, 4, 0),
                (0x105, 0, Kind::IFetch, 4, 1), // the tail of TB 0, when vCPU 0 moves on
                (0xA000, 1, Kind::Load, 8, 0),
                (0xFF0, 2, Kind::IFetch, 3, 1), // unconfirmed run of TB 2: first instruction only
                (0xFF0, 2, Kind::IFetch, 3, 1), // confirmed run: both
                (0xFF3, 2, Kind::IFetch, 7, 1),
                (0x200, 0, Kind::IFetch, 5, 1), // vCPU 0's TB 1 (at END)
                (0x200, 3, Kind::IFetch, 5, 1), // the new thread on vCPU 2 (at END)
                (0x7000, 2, Kind::Load, 2, 0),  // vCPU 3's held load (at END)
            ]
        );
        assert_eq!(d.threads(), 4);
        assert!(d.complete());
    }

    #[test]
    fn without_ifetches_icount_is_exact() {
        let (d, got) = run(false, false);
        assert_eq!(
            got,
            vec![
                (0x9000, 0, Kind::Store, 8, 2), // instructions 0 and 1
                (0x9008, 0, Kind::Load, 4, 0),  // same instruction
                (0xA000, 1, Kind::Load, 8, 1),
                (0x7000, 2, Kind::Load, 2, 3), // 1 unconfirmed run + 2 confirmed
            ]
        );
        assert_eq!(d.threads(), 3);
        assert!(!d.complete(), "no END record was sent");
    }

    #[test]
    fn counted_mode_passes_icounts_through() {
        let mut bytes = Vec::new();
        for r in [
            rec(MAGIC, FORMAT_VERSION, K_HELLO, 0, 0),
            rec(0, 0, K_THREAD, 0, 0),
            rec(0x10, 0, K_LOAD, 8, 7),
            rec(0x20, 1, K_STORE, 4, 3),
            rec(0x30, 0, K_STORE, 2, 0),
        ] {
            bytes.extend_from_slice(&r);
        }
        bytes.extend_from_slice(&rec(5, 0, K_END, 0, 0));
        let mut d = Decoder::new(false);
        let mut out = Vec::new();
        d.decode(&bytes, &mut out, 100).unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|r| (r.addr, r.thread, r.kind, r.size, r.icount))
            .collect();
        assert_eq!(
            got,
            vec![
                (0x10, 0, Kind::Load, 8, 7),
                (0x30, 0, Kind::Store, 2, 0),
                (0x20, 1, Kind::Store, 4, 3), // held until the end
            ]
        );
        assert!(d.complete());
        assert_eq!(d.take_counts(), Counts::of(&out));
        // A decoder that wants ifetches refuses a counted stream.
        let mut d = Decoder::new(true);
        assert!(d
            .decode(&bytes, &mut out, 100)
            .unwrap_err()
            .contains("ifetch=off"));
    }

    #[test]
    fn a_returned_system_call_becomes_a_privileged_run_after_its_instruction() {
        // TB 0 (3 instructions); instruction 2 is the syscall: read(3, 0x9010, 100) = 60.
        let mut bytes = prologue();
        bytes[13] = 3; // HELLO: ifetch=on, syscalls=on
        bytes[14..16].copy_from_slice(&crate::syscalls::ARCH_X86_64.to_ne_bytes());
        for r in [
            rec(0, 0, K_TBEXEC, 0, 0),
            rec(0, 0, K_SYSCALL, 0, 0),
            rec(3, 0, K_SYSARG, 0, 1),
            rec(1, 1, K_TBEXEC, 0, 0), // another thread's records in between
            rec(0x9010, 0, K_SYSARG, 0, 2),
            rec(100, 0, K_SYSARG, 0, 3),
            rec(60, 0, K_SYSRET, 0, 0),
        ] {
            bytes.extend_from_slice(&r);
        }
        let mut d = Decoder::new(true);
        let mut out = Vec::new();
        d.decode(&bytes, &mut out, 1000).unwrap();
        assert!(d.syscalls());
        assert_eq!(d.take_counts(), Counts::of(&out));
        let got: Vec<_> = out
            .iter()
            .map(|r| (r.addr, r.kind, r.size, r.privileged, r.icount))
            .collect();
        assert_eq!(
            got,
            vec![
                (0x100, Kind::IFetch, 2, false, 1),
                (0x102, Kind::IFetch, 3, false, 1),
                (0x105, Kind::IFetch, 4, false, 1), // the syscall instruction
                (crate::syscalls::KSTACK_BASE, Kind::Store, 64, true, 1),
                (0x9010, Kind::Store, 48, true, 1),
                (0x9040, Kind::Store, 12, true, 1), // 60 bytes stored in all
            ]
        );
        assert_eq!(
            cachecolor_sim::trace::syscall_number(out[3].syscall),
            0,
            "the marker carries read's identity"
        );
        assert!(out[4..].iter().all(|r| r.syscall == 0));
        // A return without an entry is a broken stream.
        let mut bad = prologue();
        bad.extend_from_slice(&rec(0, 0, K_SYSRET, 0, 0));
        let mut d = Decoder::new(true);
        assert!(d
            .decode(&bad, &mut out, 1000)
            .unwrap_err()
            .contains("never started"));
    }

    /// Heap sites: the shim's report comes after its TB's fetches and the held data record, in the
    /// thread's order, and adds no record of its own.
    #[test]
    fn a_heap_call_is_placed_after_its_blocks_records() {
        let mut bytes = prologue();
        for r in [
            rec(0, 0, K_TBEXEC, 0, 0),
            rec(0x9000, 0, K_STORE, 8, 1),
            rec(64, 0, K_HEAPARG, 0, 1),
            rec(0x401234, 0, K_HEAPARG, 0, 2),
            rec(0, 0, K_HEAPARG, 0, 3),
            rec(0x5000, 0, K_HEAP, 1, 0),
            rec(1, 0, K_TBEXEC, 0, 0),
        ] {
            bytes.extend_from_slice(&r);
        }
        let mut d = Decoder::new(true);
        let mut out = Vec::new();
        d.decode(&bytes, &mut out, usize::MAX).unwrap();
        d.finish(&mut out);
        // TB 0's three fetches and the store, then the call, then TB 1's fetch
        assert_eq!(out.len(), 5);
        assert_eq!(
            d.take_heap(),
            [HeapCall {
                op: 1,
                ptr: 0x5000,
                size: 64,
                caller: 0x401234,
                old: 0,
                at: 4,
            }]
        );
        let mut bad = prologue();
        bad.extend_from_slice(&rec(0x5000, 0, K_HEAP, 9, 0));
        assert!(Decoder::new(true)
            .decode(&bad, &mut Vec::new(), usize::MAX)
            .is_err());
    }

    fn decode_all(ifetch: bool, bytes: &[u8]) -> Summary {
        let mut d = Decoder::new(ifetch);
        let mut out = Vec::new();
        // One record per call: a held piece must survive the caller draining `out`.
        let mut pos = 0;
        while pos < bytes.len() {
            pos += d
                .decode(
                    &bytes[pos..(pos + 16).min(bytes.len())],
                    &mut out,
                    usize::MAX,
                )
                .unwrap();
        }
        d.finish(&mut out);
        assert_eq!(d.take_counts(), Counts::of(&out));
        out.iter()
            .map(|r| (r.addr, r.thread, r.kind, r.size, r.icount))
            .collect()
    }

    /// QEMU 7.2 gives a 16-byte SSE access as two 8-byte callbacks and a 32-byte AVX one as four;
    /// the trace must hold one record of the real size per operation.
    #[test]
    fn vector_access_split_into_8_byte_pieces_is_one_record() {
        let mut bytes = prologue();
        for r in [
            rec(0, 0, K_TBEXEC, 0, 0),
            rec(0x9000, 0, K_LOAD, 8, 0), // instruction 0: movdqu (two pieces)
            rec(0x9008, 0, K_LOAD, 8, 0),
            rec(0, 1, K_THREAD, 0, 0), // another thread's chunk comes between ...
            rec(1, 1, K_TBEXEC, 0, 0),
            rec(0xB000, 1, K_STORE, 8, 0),
            rec(0xA000, 0, K_STORE, 8, 1), // ... instruction 1: vmovdqu ymm store (four)
            rec(0xA008, 0, K_STORE, 8, 1),
            rec(0xA010, 0, K_STORE, 8, 1),
            rec(0xA018, 0, K_STORE, 8, 1),
            rec(0xA020, 0, K_STORE, 8, 2), // instruction 2: contiguous, but its own access
            rec(0xA028, 0, K_LOAD, 8, 2),  // a load after a store: two operands
            rec(0, 0, K_TBEXEC, 0, 0),     // TB 0 again: a new execution of instruction 0
            rec(0xA030, 0, K_LOAD, 8, 0),
            rec(0xC000, 0, K_LOAD, 8, 0), // not contiguous (cmps-like): apart
        ] {
            bytes.extend_from_slice(&r);
        }
        assert_eq!(
            decode_all(true, &bytes),
            vec![
                (0x100, 0, Kind::IFetch, 2, 1),
                (0x200, 1, Kind::IFetch, 5, 1),
                (0x9000, 0, Kind::Load, 16, 0),
                (0x102, 0, Kind::IFetch, 3, 1),
                (0xA000, 0, Kind::Store, 32, 0),
                (0x105, 0, Kind::IFetch, 4, 1),
                (0xA020, 0, Kind::Store, 8, 0),
                (0xA028, 0, Kind::Load, 8, 0),
                (0x100, 0, Kind::IFetch, 2, 1),
                (0xA030, 0, Kind::Load, 8, 0),
                (0xC000, 0, Kind::Load, 8, 0),
                (0x102, 0, Kind::IFetch, 3, 1), // the rest of TB 0, at the end
                (0x105, 0, Kind::IFetch, 4, 1),
                (0xB000, 1, Kind::Store, 8, 0),
            ]
        );
    }

    /// Pieces merge up to 64 bytes (an `fxsave` becomes 64-byte records), and across a page
    /// boundary (the consumers split records by line and page).
    #[test]
    fn merged_access_stops_at_64_bytes_and_may_cross_a_page() {
        let mut bytes = prologue();
        bytes.extend_from_slice(&rec(1, 0, K_TBEXEC, 0, 0));
        for i in 0..9u64 {
            bytes.extend_from_slice(&rec(0xFC0 + 8 * i, 0, K_STORE, 8, 0));
        }
        assert_eq!(
            decode_all(true, &bytes)[1..],
            [
                (0xFC0, 0, Kind::Store, 64, 0),
                (0x1000, 0, Kind::Store, 8, 0)
            ]
        );
        let mut bytes = prologue();
        bytes.extend_from_slice(&rec(1, 0, K_TBEXEC, 0, 0));
        bytes.extend_from_slice(&rec(0x1FF8, 0, K_LOAD, 8, 0));
        bytes.extend_from_slice(&rec(0x2000, 0, K_LOAD, 8, 0));
        assert_eq!(
            decode_all(true, &bytes)[1..],
            [(0x1FF8, 0, Kind::Load, 16, 0)]
        );
    }

    /// ifetch=off: the plugin's `idx` is the instruction count since the thread's previous
    /// record, so 0 means "the same instruction".
    #[test]
    fn counted_stream_merges_pieces_of_one_instruction() {
        let mut bytes = Vec::new();
        for r in [
            rec(MAGIC, FORMAT_VERSION, K_HELLO, 0, 0),
            rec(0x10, 0, K_LOAD, 8, 7),
            rec(0x18, 0, K_LOAD, 8, 0), // same instruction
            rec(0x20, 0, K_LOAD, 8, 1), // the next one
            rec(0x28, 0, K_STORE, 8, 0),
        ] {
            bytes.extend_from_slice(&r);
        }
        assert_eq!(
            decode_all(false, &bytes),
            vec![
                (0x10, 0, Kind::Load, 16, 7),
                (0x20, 0, Kind::Load, 8, 1),
                (0x28, 0, Kind::Store, 8, 0),
            ]
        );
    }

    #[test]
    fn rejects_foreign_or_inconsistent_streams() {
        let mut out = Vec::new();
        let mut d = Decoder::new(true);
        assert!(d.decode(&rec(1, 2, 3, 4, 5), &mut out, 100).is_err());

        let mut d = Decoder::new(true);
        assert!(d
            .decode(&rec(MAGIC, 1, K_HELLO, 0, 0), &mut out, 100)
            .unwrap_err()
            .contains("format"));

        let mut bytes = rec(MAGIC, FORMAT_VERSION, K_HELLO, 1, 0).to_vec();
        bytes.extend_from_slice(&rec(7, 0, K_TBEXEC, 0, 0));
        let mut d = Decoder::new(true);
        assert!(d
            .decode(&bytes, &mut out, 100)
            .unwrap_err()
            .contains("before it is defined"));

        let mut bytes = rec(MAGIC, FORMAT_VERSION, K_HELLO, 1, 0).to_vec();
        bytes.extend_from_slice(&rec(0, 2, K_TBDEF, 0, 0));
        bytes.extend_from_slice(&rec(0x10, 0, K_INSN, 1, 0));
        bytes.extend_from_slice(&rec(0, 0, K_TBEXEC, 0, 0));
        let mut d = Decoder::new(true);
        assert!(d
            .decode(&bytes, &mut out, 100)
            .unwrap_err()
            .contains("cut short"));

        let mut bytes = rec(MAGIC, FORMAT_VERSION, K_HELLO, 1, 0).to_vec();
        bytes.extend_from_slice(&rec(3, 0, K_END, 0, 0)); // claims 3 records before it; 1 came
        let mut d = Decoder::new(true);
        d.decode(&bytes, &mut out, 100).unwrap();
        assert!(!d.complete());
    }
}
