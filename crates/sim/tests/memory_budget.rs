//! The memory budget's estimate (`cachecolor_sim::limits::system_bytes`) against what a system
//! really allocates, counted by this test binary's global allocator: the estimate must be an
//! upper bound of the peak heap of building, running and reporting a system (RAM under every
//! allocator, many processes, generated and trace-fed threads), and not a wild one (within 4x
//! of what each term measures), so that the budget neither lets an abort through nor refuses
//! what fits.
use std::alloc::{GlobalAlloc, Layout, System as SystemAlloc};
use std::sync::atomic::{AtomicUsize, Ordering};

use cachecolor_sim::cache::Hierarchy;
use cachecolor_sim::limits::{hierarchy_state, system_bytes};
use cachecolor_sim::system::{system_config_from_toml, System, SystemConfig};
use cachecolor_sim::trace::native::TraceWriter;
use cachecolor_sim::trace::Record;

mod common;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only counts are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { SystemAlloc.alloc(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::SeqCst) + l.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { SystemAlloc.alloc_zeroed(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::SeqCst) + l.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { SystemAlloc.dealloc(p, l) };
        CURRENT.fetch_sub(l.size(), Ordering::SeqCst);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { SystemAlloc.realloc(p, l, new) };
        if !q.is_null() {
            // Both blocks exist for a moment: count the new one before dropping the old.
            let now = CURRENT.fetch_add(new, Ordering::SeqCst) + new;
            PEAK.fetch_max(now, Ordering::SeqCst);
            CURRENT.fetch_sub(l.size(), Ordering::SeqCst);
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The machine every system here runs on: two cores (a trace-fed and a generated thread side by
/// side), the tests' small L1D and LLC.
fn machine() -> String {
    common::two_level_machine(2)
}

fn processes(n: usize, thread: &str) -> String {
    (0..n)
        .map(|i| format!("\n[[processes]]\nname = \"p{i}\"\n[[processes.threads]]\n{thread}\n"))
        .collect()
}

fn generated(references: u64) -> String {
    format!("workload = {{ seed = 1, phases = [{{ pattern = \"uniform\", footprint = \"64KiB\", references = {references} }}] }}")
}

/// Peak heap (bytes above what was live before) of building, running and reporting `config`.
fn peak_of(config: &SystemConfig) -> u128 {
    let base = CURRENT.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    {
        let mut s = System::new(config).expect("the config is valid");
        s.run().expect("the run succeeds");
        let r = s.report();
        assert!(r.invariants.is_empty(), "{:?}", r.invariants);
    }
    (PEAK.load(Ordering::SeqCst) - base) as u128
}

fn estimate(config: &SystemConfig) -> cachecolor_sim::limits::SystemBytes {
    let h = Hierarchy::new(&config.machine.hierarchy).unwrap();
    let hc = h.config().clone();
    system_bytes(config, hierarchy_state(&hc), hc.page_size.0)
}

fn config(text: &str) -> SystemConfig {
    system_config_from_toml(text).unwrap()
}

// One test (not one per case): the counters are global to the binary, and the harness runs
// tests on parallel threads.
#[test]
fn the_memory_estimate_bounds_the_peak_heap_and_is_not_wild() {
    // Every case is measured and printed before the verdict (`--nocapture` shows the numbers).
    let mut wrong = Vec::new();
    let mut check = |ok: bool, what: String| {
        eprintln!("{} {what}", if ok { "ok " } else { "BAD" });
        if !ok {
            wrong.push(what);
        }
    };
    // RAM under every allocator: 1 GiB against 64 MiB isolates the per-frame cost.
    for allocator in [
        "buddy",
        "color-pool",
        "random",
        "sequential",
        "bin-hopping",
        "contiguous",
    ] {
        let text = |ram: &str| {
            format!(
                "{}[memory]\nram = \"{ram}\"\nallocator = \"{allocator}\"\n{}",
                machine(),
                processes(1, &generated(2000))
            )
        };
        let (small, big) = (config(&text("64MiB")), config(&text("1GiB")));
        let (m_small, m_big) = (peak_of(&small), peak_of(&big));
        let (e_small, e_big) = (estimate(&small), estimate(&big));
        check(
            m_big <= e_big.total(),
            format!("{allocator}: peak {m_big} <= estimate {}", e_big.total()),
        );
        let (measured, estimated) = (m_big - m_small, e_big.ram - e_small.ram);
        check(
            measured <= estimated && estimated <= 4 * measured,
            format!(
                "{allocator}: 1 GiB - 64 MiB of RAM measured {measured}, estimated {estimated}"
            ),
        );
    }
    // Processes and generated threads: 400 against 100 isolates the per-process cost (the
    // time series included: with a tick of 1,000 cycles it is at its bound).
    let text = |n: usize| {
        format!(
            "{}[memory]\nram = \"256MiB\"\n[scheduler]\ntick = 1000\n{}",
            machine(),
            processes(n, &generated(3000))
        )
    };
    let (few, many) = (config(&text(100)), config(&text(400)));
    let (m_few, m_many) = (peak_of(&few), peak_of(&many));
    let (e_few, e_many) = (estimate(&few), estimate(&many));
    check(
        m_many <= e_many.total(),
        format!(
            "400 processes: peak {m_many} <= estimate {}",
            e_many.total()
        ),
    );
    let measured = m_many - m_few;
    let estimated = (e_many.processes + e_many.threads) - (e_few.processes + e_few.threads);
    check(
        measured <= estimated && estimated <= 4 * measured,
        format!("300 processes more: measured {measured}, estimated {estimated}"),
    );
    // Trace-fed threads: each has its own reader and buffers.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.cctrace");
    let mut w = TraceWriter::create(&trace, "").unwrap();
    for i in 0..200_000u64 {
        w.write(&Record::load(i * 64 % (1 << 20))).unwrap();
    }
    w.finish().unwrap();
    let thread = format!("trace = \"{}\"", trace.display());
    let text = |n: usize| {
        format!(
            "{}[memory]\nram = \"256MiB\"\n{}",
            machine(),
            processes(n, &thread)
        )
    };
    let (few, many) = (config(&text(4)), config(&text(16)));
    let (m_few, m_many) = (peak_of(&few), peak_of(&many));
    let (e_few, e_many) = (estimate(&few), estimate(&many));
    check(
        m_many <= e_many.total(),
        format!(
            "16 trace-fed threads: peak {m_many} <= estimate {}",
            e_many.total()
        ),
    );
    let measured = m_many - m_few;
    let estimated = (e_many.processes + e_many.threads) - (e_few.processes + e_few.threads);
    check(
        measured <= estimated && estimated <= 4 * measured,
        format!("12 trace-fed threads more: measured {measured}, estimated {estimated}"),
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
}
