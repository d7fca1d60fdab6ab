/*!
Which instruction set the simulator's hot loops use on this host, decided once at run time.

The crates are compiled for baseline x86-64 (SSE2: every x86-64 CPU), so one wheel runs
everywhere. The lean cache engine's loop (`cache/hierarchy/lean.rs`, `run_block_lean`) also
exists in a copy compiled with AVX2, BMI1/2, LZCNT and POPCNT (every x86-64 CPU since Haswell and
Zen 1); `avx2()` picks that copy when the CPU has those features. Both copies compute the same
thing (the tag scans give the same masks), which `tests/isa.rs` checks by forcing the baseline.

Contract: `avx2()` is true only if the CPU supports every feature the copy is compiled with and
the baseline has not been forced, by `CACHECOLOR_ISA=baseline` in the environment (read once, at
the first call) or by `force_baseline(true)` (tests, benchmarks).
*/
use std::sync::atomic::{AtomicU8, Ordering};

/// 0: not decided yet; 1: baseline; 2: AVX2 copy.
static STATE: AtomicU8 = AtomicU8::new(0);
/// Set by `force_baseline`.
static FORCED: AtomicU8 = AtomicU8::new(0);

/// Whether the CPU has every feature the fast copy is compiled with (independent of forcing).
pub fn cpu_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("popcnt")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the hot loops take their AVX2 copy (see the module's contract).
#[inline]
pub fn avx2() -> bool {
    if FORCED.load(Ordering::Relaxed) != 0 {
        return false;
    }
    match STATE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let env_baseline = std::env::var("CACHECOLOR_ISA").is_ok_and(|v| v == "baseline");
            let fast = cpu_has_avx2() && !env_baseline;
            STATE.store(if fast { 2 } else { 1 }, Ordering::Relaxed);
            fast
        }
    }
}

/// Force the baseline copy (`true`) or go back to the CPU's choice (`false`).
pub fn force_baseline(on: bool) {
    FORCED.store(on as u8, Ordering::Relaxed);
}

/// The instruction set `avx2()` picks, by name: "avx2" or "baseline".
pub fn name() -> &'static str {
    if avx2() {
        "avx2"
    } else {
        "baseline"
    }
}
