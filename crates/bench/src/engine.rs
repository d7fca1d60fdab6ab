//! The execution engine (thesis 4.2.1, Algorithm 4.2.1): a pointer-chasing loop with exactly
//! one load per iteration, the count, the completion flag, the index and the base in registers.
//!
//! The loop is written in assembly (`global_asm!`, x86-64 and AArch64) so the one load is
//! guaranteed by construction, not left to the optimiser:
//!
//! ```text
//! cc_chase_loop_begin:                      x86-64              AArch64
//!     idx = base[idx]                       mov eax,[rdi+rax*4] ldr w5,[x0,w5,uxtw #2]
//!     count += 1                            add rcx,1           add x4,x4,#1
//!     while notDone (a register)            test rdx,rdx / jnz  cbnz x2, begin
//! cc_chase_loop_end:
//! ```
//!
//! Time-bounded mode, as the thesis does it: the completion flag lives in a register (rdx /
//! x2) and a timer signal clears it in the interrupted context's saved registers, so the
//! measured loop has no flag load and no extra memory traffic. The timer (`timer_create`,
//! `SIGEV_THREAD_ID`, so several pinned threads each get their own, all armed to the same
//! absolute deadline for co-runs) fires at the deadline and then every millisecond: the handler
//! clears the flag only when the interrupted instruction is inside the loop (between the two
//! labels), so a signal that lands just before the loop starts is harmless and the next one
//! ends it. Count-bounded mode runs exactly `n` loads (`cc_chase_count`).
//!
//! Other architectures get a portable Rust loop (volatile loads, the deadline checked every
//! 4096 loads), reported as `engine: "portable"`.

use std::time::Duration;

use crate::Error;

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".p2align 6",
    ".globl cc_chase_timed",
    "cc_chase_timed:",
    // rdi = base (u32 array), esi = start slot, rdx = flag (non-zero: run), rcx = out final slot
    "    mov r8, rcx",
    "    xor ecx, ecx",
    "    mov eax, esi",
    ".globl cc_chase_loop_begin",
    "cc_chase_loop_begin:",
    "    mov eax, dword ptr [rdi + rax*4]",
    "    add rcx, 1",
    "    test rdx, rdx",
    "    jnz cc_chase_loop_begin",
    ".globl cc_chase_loop_end",
    "cc_chase_loop_end:",
    "    mov dword ptr [r8], eax",
    "    mov rax, rcx",
    "    ret",
    ".p2align 6",
    ".globl cc_chase_count",
    "cc_chase_count:",
    // rdi = base, esi = start slot, rdx = n; returns the final slot
    "    mov eax, esi",
    "    test rdx, rdx",
    "    jz cc_chase_count_end",
    ".globl cc_chase_count_begin",
    "cc_chase_count_begin:",
    "    mov eax, dword ptr [rdi + rax*4]",
    "    sub rdx, 1",
    "    jnz cc_chase_count_begin",
    ".globl cc_chase_count_end",
    "cc_chase_count_end:",
    "    ret",
);

#[cfg(target_arch = "aarch64")]
std::arch::global_asm!(
    ".text",
    ".p2align 6",
    ".globl cc_chase_timed",
    "cc_chase_timed:",
    // x0 = base, w1 = start slot, x2 = flag, x3 = out final slot
    "    mov x4, xzr",
    "    mov w5, w1",
    ".globl cc_chase_loop_begin",
    "cc_chase_loop_begin:",
    "    ldr w5, [x0, w5, uxtw #2]",
    "    add x4, x4, #1",
    "    cbnz x2, cc_chase_loop_begin",
    ".globl cc_chase_loop_end",
    "cc_chase_loop_end:",
    "    str w5, [x3]",
    "    mov x0, x4",
    "    ret",
    ".p2align 6",
    ".globl cc_chase_count",
    "cc_chase_count:",
    "    mov w5, w1",
    "    cbz x2, cc_chase_count_end",
    ".globl cc_chase_count_begin",
    "cc_chase_count_begin:",
    "    ldr w5, [x0, w5, uxtw #2]",
    "    subs x2, x2, #1",
    "    b.ne cc_chase_count_begin",
    ".globl cc_chase_count_end",
    "cc_chase_count_end:",
    "    mov w0, w5",
    "    ret",
);

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
extern "C" {
    fn cc_chase_timed(base: *const u32, start: u32, flag: u64, out: *mut u32) -> u64;
    fn cc_chase_count(base: *const u32, start: u32, n: u64) -> u32;
    static cc_chase_loop_begin: u8;
    static cc_chase_loop_end: u8;
}

/// Which loop measured: "asm-x86_64", "asm-aarch64" or "portable".
pub const ENGINE: &str = if cfg!(target_arch = "x86_64") {
    "asm-x86_64"
} else if cfg!(target_arch = "aarch64") {
    "asm-aarch64"
} else {
    "portable"
};

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
extern "C" fn on_timer(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext_t to an SA_SIGINFO handler; only the saved
    // flag register is written, and only when the thread was inside the loop.
    unsafe {
        let uc = ctx as *mut libc::ucontext_t;
        let begin = &cc_chase_loop_begin as *const u8 as u64;
        let end = &cc_chase_loop_end as *const u8 as u64;
        #[cfg(target_arch = "x86_64")]
        {
            let pc = (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as u64;
            if pc >= begin && pc < end {
                (*uc).uc_mcontext.gregs[libc::REG_RDX as usize] = 0;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            let pc = (*uc).uc_mcontext.pc;
            if pc >= begin && pc < end {
                (*uc).uc_mcontext.regs[2] = 0;
            }
        }
    }
}

fn timer_signal() -> libc::c_int {
    libc::SIGRTMIN() + 5
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn install_handler() -> Result<(), Error> {
    static ONCE: std::sync::Once = std::sync::Once::new();
    static mut RESULT: i32 = 0;
    ONCE.call_once(|| {
        // SAFETY: installing a handler that only edits the saved context.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_timer as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            RESULT = libc::sigaction(timer_signal(), &sa, std::ptr::null_mut());
        }
    });
    // SAFETY: written once inside call_once, read after it.
    if unsafe { RESULT } != 0 {
        return Err(Error::Unsupported(
            "engine: cannot install the timer signal handler".into(),
        ));
    }
    Ok(())
}

/// `clock` now, in ns.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in ns.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A per-thread timer firing at an absolute CLOCK_MONOTONIC deadline, then every millisecond.
struct ThreadTimer(libc::timer_t);

impl ThreadTimer {
    fn arm(deadline_ns: u64) -> Result<ThreadTimer, Error> {
        // SAFETY: plain timer API calls with valid pointers.
        unsafe {
            let mut sev: libc::sigevent = std::mem::zeroed();
            sev.sigev_notify = libc::SIGEV_THREAD_ID;
            sev.sigev_signo = timer_signal();
            sev.sigev_notify_thread_id = libc::gettid();
            let mut t: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut t) != 0 {
                return Err(Error::Unsupported(format!(
                    "engine: timer_create failed: {}",
                    std::io::Error::last_os_error()
                )));
            }
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                },
                it_value: libc::timespec {
                    tv_sec: (deadline_ns / 1_000_000_000) as _,
                    tv_nsec: (deadline_ns % 1_000_000_000) as _,
                },
            };
            if libc::timer_settime(t, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut()) != 0 {
                libc::timer_delete(t);
                return Err(Error::Unsupported(format!(
                    "engine: timer_settime failed: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok(ThreadTimer(t))
        }
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: created by timer_create.
        unsafe { libc::timer_delete(self.0) };
    }
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub accesses: u64,
    pub elapsed_ns: u64,
    /// CPU time of the thread over the run: on a shared machine the wall-clock time includes
    /// the time other tasks held the core, the CPU time does not.
    pub cpu_ns: u64,
    /// The slot the chase ended on (keeps the loads observable).
    pub last: u32,
}

impl Run {
    pub fn ns_per_access(&self) -> f64 {
        self.elapsed_ns as f64 / self.accesses.max(1) as f64
    }
    pub fn cpu_ns_per_access(&self) -> f64 {
        self.cpu_ns as f64 / self.accesses.max(1) as f64
    }
    pub fn accesses_per_second(&self) -> f64 {
        self.accesses as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// Chase from `start` until the absolute deadline (CLOCK_MONOTONIC ns). `before` / `after` run
/// just outside the loop (counter enable / disable).
///
/// # Safety
/// `base` must hold a closed chain through `start` (every element a valid slot).
pub unsafe fn chase_until(
    base: *const u32,
    start: u32,
    deadline_ns: u64,
    before: &mut dyn FnMut(),
    after: &mut dyn FnMut(),
) -> Result<Run, Error> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        install_handler()?;
        let mut last = 0u32;
        let _timer = ThreadTimer::arm(deadline_ns)?;
        before();
        let c0 = thread_cpu_ns();
        let t0 = now_ns();
        let n = cc_chase_timed(base, start, 1, &mut last);
        let t1 = now_ns();
        let c1 = thread_cpu_ns();
        after();
        Ok(Run {
            accesses: n,
            elapsed_ns: t1 - t0,
            cpu_ns: c1 - c0,
            last,
        })
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        before();
        let c0 = thread_cpu_ns();
        let t0 = now_ns();
        let mut i = start;
        let mut n = 0u64;
        while now_ns() < deadline_ns {
            for _ in 0..4096 {
                i = base.add(i as usize).read_volatile();
            }
            n += 4096;
        }
        let t1 = now_ns();
        let c1 = thread_cpu_ns();
        after();
        Ok(Run {
            accesses: n,
            elapsed_ns: t1 - t0,
            cpu_ns: c1 - c0,
            last: i,
        })
    }
}

/// Chase for `dur` from now.
///
/// # Safety
/// As `chase_until`.
pub unsafe fn chase_for(base: *const u32, start: u32, dur: Duration) -> Result<Run, Error> {
    chase_until(
        base,
        start,
        now_ns() + dur.as_nanos() as u64,
        &mut || {},
        &mut || {},
    )
}

/// Exactly `n` loads from `start`; returns the run with the final slot.
///
/// # Safety
/// As `chase_until`.
pub unsafe fn chase_count(base: *const u32, start: u32, n: u64) -> Run {
    let c0 = thread_cpu_ns();
    let t0 = now_ns();
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    let last = cc_chase_count(base, start, n);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let last = {
        let mut i = start;
        for _ in 0..n {
            i = base.add(i as usize).read_volatile();
        }
        i
    };
    let elapsed_ns = now_ns() - t0;
    Run {
        accesses: n,
        elapsed_ns,
        cpu_ns: thread_cpu_ns() - c0,
        last,
    }
}

/// The CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins the calling thread to one CPU; restores the previous mask on drop (the engine runs on
/// the caller's thread, e.g. Python's main thread, which must not stay pinned).
pub struct Pin {
    old: libc::cpu_set_t,
}

impl Pin {
    pub fn to(cpu: usize) -> Result<Pin, Error> {
        let allowed = allowed_cpus();
        if !allowed.contains(&cpu) {
            return Err(Error::BadInput(format!(
                "core: CPU {cpu} does not exist or is not available to this process (available: {})",
                cpu_list(&allowed)
            )));
        }
        // SAFETY: affinity calls with valid sets.
        unsafe {
            let mut old: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old);
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(Error::Unsupported(format!(
                    "core: cannot pin to CPU {cpu}: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok(Pin { old })
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        // SAFETY: restoring the saved mask.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old) };
    }
}

/// "0-3,6" style.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{AllocOptions, BinGeometry, Buffer, BufferKind};
    use crate::chain::{install, Pattern};

    fn small() -> (Buffer, crate::chain::Chain) {
        let g = BinGeometry {
            cache_size: 32 << 10,
            ways: 8,
        };
        let b = Buffer::allocate(
            BufferKind::Naive,
            16 << 10,
            g,
            AllocOptions {
                reserve_hugepages: false,
            },
        )
        .unwrap();
        let c = install(&b, 16 << 10, Pattern::Uniform, 1.0, 5).unwrap();
        (b, c)
    }

    #[test]
    fn count_mode_does_one_load_per_iteration() {
        // n iterations follow the chain exactly n steps: after one whole loop (length loads)
        // the chase is back at the start, after length - 1 it is not, and the final slot after
        // k loads equals a software walk of k steps.
        let (b, c) = small();
        let base = b.base() as *const u32;
        unsafe {
            assert_eq!(chase_count(base, c.start, c.length as u64).last, c.start);
            assert_ne!(
                chase_count(base, c.start, c.length as u64 - 1).last,
                c.start
            );
            assert_eq!(
                chase_count(base, c.start, 3 * c.length as u64).last,
                c.start
            );
            let mut i = c.start;
            for _ in 0..37 {
                i = base.add(i as usize).read();
            }
            assert_eq!(chase_count(base, c.start, 37).last, i);
            assert_eq!(chase_count(base, c.start, 0).last, c.start);
        }
    }

    #[test]
    fn timed_mode_stops_and_its_count_matches_its_position() {
        let (b, c) = small();
        let base = b.base() as *const u32;
        let r = unsafe { chase_for(base, c.start, Duration::from_millis(20)).unwrap() };
        assert!(r.accesses > 0);
        // The loop's count and its final position agree: accesses mod length steps from start.
        let k = r.accesses % c.length as u64;
        assert_eq!(unsafe { chase_count(base, c.start, k).last }, r.last);
    }

    #[test]
    fn timer_before_the_loop_is_harmless() {
        // A deadline already in the past: the first signal may land before the loop; the
        // periodic re-fire still ends it.
        let (b, c) = small();
        let r = unsafe {
            chase_until(
                b.base() as *const u32,
                c.start,
                now_ns() - 1_000_000,
                &mut || {},
                &mut || {},
            )
            .unwrap()
        };
        assert!(r.accesses >= 1);
    }

    /// The instructions between each loop's begin and end labels in an objdump / llvm-objdump
    /// disassembly (instruction lines are the ones with a tab), by begin label.
    fn loop_bodies(text: &str) -> Vec<(&'static str, Vec<&str>)> {
        [
            ("<cc_chase_loop_begin>:", "<cc_chase_loop_end>:"),
            ("<cc_chase_count_begin>:", "<cc_chase_count_end>:"),
        ]
        .into_iter()
        .map(|(begin, end)| {
            let a = text
                .find(begin)
                .unwrap_or_else(|| panic!("{begin} not in the binary"));
            let b = a + text[a..].find(end).unwrap();
            let body = text[a + begin.len()..b]
                .lines()
                .map(str::trim)
                .filter(|l| l.contains('\t'))
                .collect();
            (begin, body)
        })
        .collect()
    }

    /// The loop body between the labels holds exactly one instruction with a memory operand,
    /// read from the compiled binary with objdump (skipped with a note if objdump is missing).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn compiled_loop_has_exactly_one_load() {
        let exe = std::env::current_exe().unwrap();
        let Ok(out) = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(&exe)
            .output()
        else {
            eprintln!("objdump not found: loop disassembly check skipped");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        for (begin, body) in loop_bodies(&text) {
            let mem: Vec<&&str> = body.iter().filter(|l| l.contains('(')).collect();
            assert_eq!(mem.len(), 1, "{begin}: {body:?}");
            assert!(
                mem[0].contains("mov") && mem[0].contains("(%rdi,%rax,4)"),
                "{mem:?}"
            );
            let back = body.last().unwrap();
            assert!(
                (back.contains("jne") || back.contains("jnz"))
                    && back.contains(begin.trim_end_matches(':')),
                "{body:?}"
            );
            assert!(body.len() <= 4, "{body:?}");
        }
    }

    /// The arm64 loops, which no arm64 machine here compiles: their exact text (the aarch64
    /// `global_asm!` block of this file) is assembled with `llvm-mc`, linked with the toolchain's
    /// `rust-lld` into a static program that chases a random 200-slot chain 1,000 steps in count
    /// mode and then one step in timed mode with the flag already clear, and run under
    /// `qemu-aarch64`: its exit status is the final slot, compared with the same walk done here.
    /// The linked loops are then disassembled: one load per iteration, as on x86-64. Skipped
    /// with a note when a tool is missing (`make` installs qemu-user; llvm-mc comes with LLVM).
    #[test]
    fn arm64_loops_assemble_and_run_under_qemu() {
        let src = include_str!("engine.rs");
        let start = src
            .find("#[cfg(target_arch = \"aarch64\")]\nstd::arch::global_asm!(")
            .unwrap();
        let block = &src[start..start + src[start..].find("\n);").unwrap()];
        let asm: Vec<&str> = block
            .lines()
            .skip(2)
            .map(str::trim)
            .filter(|l| l.starts_with('"'))
            .map(|l| l.trim_end_matches(',').trim_matches('"'))
            .collect();
        assert!(
            asm.len() > 20 && asm.iter().any(|l| l.contains("ldr w5")),
            "{asm:?}"
        );
        let n = 200usize;
        let mut order: Vec<usize> = (0..n).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..n).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let mut chain = vec![0u32; n];
        for k in 0..n {
            chain[order[k]] = order[(k + 1) % n] as u32;
        }
        let mut slot = 0usize;
        for _ in 0..1000 {
            slot = chain[slot] as usize;
        }
        let expect = chain[slot];
        let words: Vec<String> = chain.iter().map(u32::to_string).collect();
        let program = format!(
            "{}\n.text\n.globl _start\n_start:\n\
             adrp x0, chain\nadd x0, x0, :lo12:chain\nmov w1, #0\nmov x2, #1000\nbl cc_chase_count\n\
             mov w19, w0\nadrp x0, chain\nadd x0, x0, :lo12:chain\nmov w1, w19\nmov x2, #0\n\
             adrp x3, out\nadd x3, x3, :lo12:out\nbl cc_chase_timed\ncmp x0, #1\nb.ne fail\n\
             adrp x3, out\nadd x3, x3, :lo12:out\nldr w0, [x3]\nmov x8, #93\nsvc #0\n\
             fail:\nmov x0, #255\nmov x8, #93\nsvc #0\n\
             .data\n.p2align 2\nout: .word 0\nchain: .word {}\n",
            asm.join("\n"),
            words.join(",")
        );
        let dir = std::env::temp_dir().join(format!("cc-arm64-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (s_file, o_file, exe) = (dir.join("t.s"), dir.join("t.o"), dir.join("t"));
        std::fs::write(&s_file, program).unwrap();
        let sysroot = std::process::Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let lld = std::path::Path::new(&sysroot)
            .join("lib/rustlib")
            .join(format!("{}-unknown-linux-gnu", std::env::consts::ARCH))
            .join("bin/rust-lld");
        let run = |cmd: &mut std::process::Command| cmd.output().ok();
        let steps = [
            run(std::process::Command::new("llvm-mc")
                .args(["--triple=aarch64-linux-gnu", "-filetype=obj", "-o"])
                .arg(&o_file)
                .arg(&s_file)),
            run(std::process::Command::new(&lld)
                .args(["-flavor", "gnu", "-static", "-o"])
                .arg(&exe)
                .arg(&o_file)),
        ];
        if steps.iter().any(Option::is_none) {
            eprintln!("llvm-mc or rust-lld not found: arm64 loop check skipped");
            return;
        }
        for out in steps.into_iter().flatten() {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let Some(out) = run(std::process::Command::new("qemu-aarch64").arg(&exe)) else {
            eprintln!("qemu-aarch64 not found: arm64 loop check skipped");
            return;
        };
        assert_eq!(
            out.status.code(),
            Some(expect as i32),
            "exit status = final slot of the arm64 walk (255: the timed loop did not stop after one load with the flag clear)"
        );
        let dis = std::process::Command::new("llvm-objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(&exe)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&dis.stdout);
        for (begin, body) in loop_bodies(&text) {
            let loads: Vec<&&str> = body.iter().filter(|l| l.contains("ldr")).collect();
            assert_eq!(loads.len(), 1, "{begin}: {body:?}");
            assert!(!body.iter().any(|l| l.contains("str")), "{body:?}");
            assert!(body.len() <= 3, "{body:?}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn pinning_checks_the_core_and_restores() {
        let before = allowed_cpus();
        {
            let _p = Pin::to(before[0]).unwrap();
            assert_eq!(allowed_cpus(), vec![before[0]]);
        }
        assert_eq!(allowed_cpus(), before);
        let e = Pin::to(100_000).err().unwrap().to_string();
        assert!(e.contains("does not exist"), "{e}");
        assert_eq!(cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }
}
