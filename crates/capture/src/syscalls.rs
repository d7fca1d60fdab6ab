/*!
System calls of a qemu-user capture as privileged records (`--syscalls`; Nellans et al.'s
privileged runs in a captured trace).

QEMU in user mode emulates system calls itself: no kernel code runs under the plugin, so the
kernel's instructions and its own data are not visible. What is known for certain is the
system call (number, arguments, return value) and the user memory the kernel must read or
write for it. Each returned system call becomes one privileged run of the calling thread:

1. a *marker*: a privileged 64-byte store to the thread's kernel stack (`KSTACK_BASE +
   thread * KSTACK_BYTES`, a synthetic address outside any user mapping), standing for the
   register save (`pt_regs`) every system call entry does; it carries the run's identity
   `pack_syscall(number, hash(a1, a2))`: the number and the first two arguments, as the
   paper's AState (section 4.2: PSTATE, g0, g1 = number, i0, i1 = first two arguments);
2. the kernel's accesses to the user buffer the call names, one record per 64-byte line
   touched (size = the bytes of the buffer in that line): stores for calls that copy to user
   space, loads for calls that copy from it ([`buffer`] is the table).

Every record has `icount` 1: the kernel's instructions are unknown, and one per access is a
lower bound (a copy loop moves a line in about 8 instructions; entry and exit take hundreds).
So a run's length in instructions is its number of records. A call that does not return
(exit, exit_group, a successful execve) gives no records: the plugin reports the return only.
Syscall numbers are the guest's: x86_64 and aarch64 have a buffer table; on another guest every
call gets the marker only.
*/
use cachecolor_sim::trace::{pack_syscall, Kind, Record};

/// Synthetic kernel stack region (below 2^47, away from the synthetic workloads' kernel
/// regions at 0x6000_0000_0000 and 0x6800_0000_0000).
pub(crate) const KSTACK_BASE: u64 = 0x6c00_0000_0000;
/// Bytes of kernel stack per thread (Linux x86_64: 16 KiB).
pub(crate) const KSTACK_BYTES: u64 = 16 << 10;

/// Guest architectures (the plugin's HELLO `idx`).
pub(crate) const ARCH_X86_64: u16 = 1;
pub(crate) const ARCH_AARCH64: u16 = 2;

/// Which argument names a user buffer and how long it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Len {
    /// The return value (bytes transferred), when positive.
    Ret,
    /// A fixed size, when the call succeeded (returned 0).
    Fixed(u64),
}

/// The user buffer a system call reads (`Kind::Load`) or writes (`Kind::Store`): (argument
/// number 1-3 holding its address, its length, direction). `None`: no buffer in this table.
pub(crate) fn buffer(arch: u16, number: i64) -> Option<(usize, Len, Kind)> {
    use Kind::{Load, Store};
    // struct stat is 144 bytes on x86_64 and 128 on aarch64; struct timespec 16;
    // struct utsname 6 x 65 = 390.
    match (arch, number) {
        // read, pread64, recvfrom, getdents64, readlink: the kernel stores `ret` bytes.
        (ARCH_X86_64, 0 | 17 | 45 | 217 | 89) => Some((2, Len::Ret, Store)),
        (ARCH_AARCH64, 63 | 67 | 207 | 61) => Some((2, Len::Ret, Store)),
        (ARCH_AARCH64, 78) => Some((3, Len::Ret, Store)), // readlinkat
        // write, pwrite64, sendto: the kernel loads `ret` bytes.
        (ARCH_X86_64, 1 | 18 | 44) => Some((2, Len::Ret, Load)),
        (ARCH_AARCH64, 64 | 68 | 206) => Some((2, Len::Ret, Load)),
        // stat, fstat, lstat / fstat; newfstatat (buffer in argument 3).
        (ARCH_X86_64, 4..=6) => Some((2, Len::Fixed(144), Store)),
        (ARCH_X86_64, 262) => Some((3, Len::Fixed(144), Store)),
        (ARCH_AARCH64, 80) => Some((2, Len::Fixed(128), Store)),
        (ARCH_AARCH64, 79) => Some((3, Len::Fixed(128), Store)),
        // getrandom(buf, len): `ret` bytes stored at argument 1.
        (ARCH_X86_64, 318) | (ARCH_AARCH64, 278) => Some((1, Len::Ret, Store)),
        // clock_gettime(clock, tp), uname(buf).
        (ARCH_X86_64, 228) | (ARCH_AARCH64, 113) => Some((2, Len::Fixed(16), Store)),
        (ARCH_X86_64, 63) | (ARCH_AARCH64, 160) => Some((1, Len::Fixed(390), Store)),
        _ => None,
    }
}

/// The argument hash of the identity: the first two arguments (the paper's i0, i1), mixed.
pub(crate) fn args_hash(a1: u64, a2: u64) -> u64 {
    let mut x = a1 ^ a2.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Append the privileged records of one returned system call of `thread` to `out` (module
/// comment). Returns the number of loads and stores appended.
pub(crate) fn records(
    arch: u16,
    number: i64,
    args: [u64; 3],
    ret: i64,
    thread: u32,
    out: &mut Vec<Record>,
) -> (u64, u64) {
    let priv_rec = |kind, addr, size: u64| Record {
        addr,
        thread,
        icount: 1,
        size: size as u16,
        kind,
        privileged: true,
        syscall: 0,
    };
    let mut marker = priv_rec(Kind::Store, KSTACK_BASE + thread as u64 * KSTACK_BYTES, 64);
    marker.syscall = pack_syscall(number as u32, args_hash(args[0], args[1]));
    out.push(marker);
    let (mut loads, mut stores) = (0u64, 1u64);
    let Some((arg, len, kind)) = buffer(arch, number) else {
        return (loads, stores);
    };
    let len = match len {
        Len::Ret if ret > 0 => ret as u64,
        Len::Fixed(n) if ret == 0 => n,
        _ => 0,
    };
    let start = args[arg - 1];
    let end = start.saturating_add(len);
    let mut a = start;
    while a < end {
        let line_end = (a | 63).saturating_add(1).min(end);
        out.push(priv_rec(kind, a, line_end - a));
        if kind == Kind::Load {
            loads += 1;
        } else {
            stores += 1;
        }
        a = line_end;
    }
    (loads, stores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachecolor_sim::trace::syscall_number;

    #[test]
    fn a_read_stores_the_bytes_it_returned_line_by_line() {
        let mut out = Vec::new();
        // read(3, 0x1030, 4096) = 100: bytes 0x1030..0x1094, three lines.
        let (l, s) = records(ARCH_X86_64, 0, [3, 0x1030, 4096], 100, 2, &mut out);
        assert_eq!((l, s), (0, 4));
        let m = out[0];
        assert!(m.privileged && m.kind == Kind::Store && m.size == 64);
        assert_eq!(m.addr, KSTACK_BASE + 2 * KSTACK_BYTES);
        assert_eq!(syscall_number(m.syscall), 0);
        assert_ne!(m.syscall, 0);
        let rest: Vec<_> = out[1..].iter().map(|r| (r.addr, r.size, r.kind)).collect();
        assert_eq!(
            rest,
            vec![
                (0x1030, 16, Kind::Store),
                (0x1040, 64, Kind::Store),
                (0x1080, 20, Kind::Store)
            ]
        );
        assert!(out
            .iter()
            .all(|r| r.privileged && r.icount == 1 && r.thread == 2));
        assert!(
            out[1..].iter().all(|r| r.syscall == 0),
            "identity on the first record only"
        );
    }

    #[test]
    fn writes_load_stat_stores_failures_and_unknown_calls_mark_only() {
        let mut out = Vec::new();
        assert_eq!(
            records(ARCH_X86_64, 1, [1, 0x2000, 64], 64, 0, &mut out),
            (1, 1)
        );
        assert_eq!((out[1].kind, out[1].size), (Kind::Load, 64));
        out.clear();
        // newfstatat(dirfd, path, statbuf, flags) = 0: 144 bytes at argument 3.
        records(ARCH_X86_64, 262, [0, 0x5000, 0x7000], 0, 0, &mut out);
        let bytes: u64 = out[1..].iter().map(|r| r.size as u64).sum();
        assert_eq!((out[1].addr, bytes), (0x7000, 144));
        out.clear();
        // A failed read (-EBADF) and an unknown call: the marker only.
        assert_eq!(
            records(ARCH_X86_64, 0, [99, 0x1000, 10], -9, 0, &mut out),
            (0, 1)
        );
        assert_eq!(
            records(ARCH_X86_64, 39, [0, 0, 0], 1234, 0, &mut out),
            (0, 1)
        );
        assert_eq!(
            records(0, 0, [3, 0x1000, 10], 10, 0, &mut out),
            (0, 1),
            "unknown guest"
        );
        assert_eq!(out.len(), 3);
        // Same number and first two arguments, same identity; another argument, another one.
        let id = |a1, a2| pack_syscall(0, args_hash(a1, a2));
        assert_eq!(id(3, 0x1000), id(3, 0x1000));
        assert_ne!(id(3, 0x1000), id(4, 0x1000));
        assert_ne!(id(3, 0x1000), id(3, 0x2000));
    }
}
