/*!
End-to-end tests of `cachecolor_capture::capture` on tiny C programs compiled here with `cc`.

Each array program writes an array of N 8-byte elements, reads it back, and writes the array's
address range to a file named on its command line, so the test can count the 8-byte stores and
loads that fall in that range. Run under both back ends (a test is skipped, with a message, when
its tool is not installed). Also covered: distinct thread ids for a 2-thread program under QEMU;
QEMU's two modes (fetches expanded by the reader, instructions counted by the plugin) agreeing
record for record; fork, exec and exit with a thread still running; a failing or crashing
program keeping its trace; `max_records`; `#!` scripts; clear errors for a missing program.

`capture_speed` (ignored by default) measures records/s on a program making ~10 M random loads:
    cargo test -p cachecolor-capture --release -- --ignored --nocapture capture_speed
(`CAPTURE_SPEED_N` sets the number of loads, `CAPTURE_SPEED_ONLY=qemu|lackey` one back end,
`CAPTURE_SPEED_IFETCH=true|false` one ifetch setting.)
*/
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::symbol_range;

use cachecolor_capture::{capture, Backend, CaptureError, CaptureOptions, CaptureSummary};
use cachecolor_sim::trace::native::TraceReader;
use cachecolor_sim::trace::{collect, Kind, Record};

const ARRAY_PROG: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile uint64_t *a = aligned_alloc(64, (size_t)n * 8);
    for (long i = 0; i < n; i++) a[i] = (uint64_t)i;
    uint64_t s = 0;
    for (long i = 0; i < n; i++) s += a[i];
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "%lu %lu %lu\n", (unsigned long)(uintptr_t)a, (unsigned long)(uintptr_t)(a + n),
            (unsigned long)s);
    fclose(f);
    if (argc > 3 && argv[3][0] == 's') *(volatile int *)(uintptr_t)8 = 1; /* SIGSEGV */
    return argc > 3 ? atoi(argv[3]) : 0;
}
"#;

const THREADS_PROG: &str = r#"
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static long n;
static void *work(void *p) {
    volatile uint64_t *a = p;
    for (long i = 0; i < n; i++) a[i] = (uint64_t)i;
    return NULL;
}
int main(int argc, char **argv) {
    n = atol(argv[1]);
    uint64_t *a = aligned_alloc(64, (size_t)n * 8), *b = aligned_alloc(64, (size_t)n * 8);
    pthread_t t1, t2;
    pthread_create(&t1, NULL, work, a);
    pthread_create(&t2, NULL, work, b);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "%lu %lu %lu %lu\n", (unsigned long)(uintptr_t)a, (unsigned long)(uintptr_t)(a + n),
            (unsigned long)(uintptr_t)b, (unsigned long)(uintptr_t)(b + n));
    fclose(f);
    return 0;
}
"#;

/// Forks a child that writes its own array, exec's `true` in a grandchild, and exits while a
/// thread is still running: the capture must end cleanly with the parent's records only.
const FORK_PROG: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void *spin(void *p) {
    volatile uint64_t *x = p;
    /* Still running at exit. The yield lets Valgrind's one-thread-at-a-time scheduler reach
       the exiting thread promptly (a tight loop kept lackey spinning for minutes). */
    for (;;) { (*x)++; sched_yield(); }
    return NULL;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile uint64_t *a = aligned_alloc(64, (size_t)n * 8);
    volatile uint64_t *c = aligned_alloc(64, (size_t)n * 8);
    pid_t pid = fork();
    if (pid == 0) {
        for (long i = 0; i < n; i++) c[i] = (uint64_t)i;
        if (fork() == 0) execl("/bin/true", "true", (char *)NULL);
        wait(NULL);
        _exit(0);
    }
    for (long i = 0; i < n; i++) a[i] = (uint64_t)i;
    waitpid(pid, NULL, 0);
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "%lu %lu %lu %lu\n", (unsigned long)(uintptr_t)a, (unsigned long)(uintptr_t)(a + n),
            (unsigned long)(uintptr_t)c, (unsigned long)(uintptr_t)(c + n));
    fclose(f);
    uint64_t counter = 0;
    pthread_t t;
    pthread_create(&t, NULL, spin, (void *)&counter);
    while (counter < 1000) sched_yield();
    exit(0); /* with the spinning thread still running */
}
"#;

const RANDOM_PROG: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    size_t sz = (size_t)1 << 22;
    volatile uint64_t *a = calloc(sz, 8);
    uint64_t x = 88172645463325252ULL, s = 0;
    for (long i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        s += a[x & (sz - 1)];
    }
    printf("%lu\n", (unsigned long)s);
    return 0;
}
"#;

fn tmpdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cc-capture-test.")
        .tempdir()
        .unwrap()
}

fn compile(dir: &Path, name: &str, src: &str, extra: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&c)
        .args(extra)
        .output()
        .expect("cc must be installed to run these tests");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn available(backend: Backend) -> bool {
    let tool = match backend {
        Backend::Qemu => format!("qemu-{}", host_qemu_arch()),
        _ => "valgrind".to_string(),
    };
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED: {tool} is not installed");
    }
    ok
}

fn host_qemu_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86" => "i386",
        a => a,
    }
}

fn read_trace(p: &Path) -> (Vec<Record>, String) {
    let mut r = TraceReader::open(p).expect("trace opens");
    let meta = r.metadata().to_string();
    (collect(&mut r).expect("trace reads"), meta)
}

fn range_file(p: &Path) -> Vec<u64> {
    std::fs::read_to_string(p)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn in_range(r: &Record, lo: u64, hi: u64) -> bool {
    r.addr >= lo && r.addr < hi
}

fn opts(backend: Backend, ifetch: bool) -> CaptureOptions {
    CaptureOptions {
        backend,
        ifetch,
        max_records: None,
        syscalls: false,
        skip_instructions: 0,
        pcs: true,
        ..CaptureOptions::default()
    }
}

fn run_array(backend: Backend, ifetch: bool, n: u64) -> (CaptureSummary, Vec<Record>, u64, u64) {
    let dir = tmpdir();
    let exe = compile(dir.path(), "array", ARRAY_PROG, &[]);
    let out = dir.path().join("array.cctrace");
    let rng = dir.path().join("range.txt");
    let mut calls = 0u64;
    let mut last = 0u64;
    let summary = capture(
        exe.to_str().unwrap(),
        &[n.to_string(), rng.display().to_string()],
        &out,
        &opts(backend, ifetch),
        &mut |r| {
            calls += 1;
            assert!(r >= last, "progress went backwards");
            last = r;
        },
    )
    .unwrap_or_else(|e| panic!("{backend} capture failed: {e}"));
    assert!(calls >= 1, "progress was never reported");
    assert_eq!(last, summary.records);
    let (recs, meta) = read_trace(&out);
    assert_eq!(recs.len() as u64, summary.records);
    assert!(
        meta.contains(&format!("\"backend\":\"{}\"", backend.name())),
        "{meta}"
    );
    assert!(
        meta.contains("range.txt"),
        "metadata lacks the command line: {meta}"
    );
    let v = range_file(&rng);
    assert_eq!(
        v[2],
        n * (n - 1) / 2,
        "the traced program computed a wrong sum"
    );
    // No temporary files left beside the output.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    (summary, recs, v[0], v[1])
}

fn check_array(backend: Backend, ifetch: bool) {
    if !available(backend) {
        return;
    }
    let n = 10_000u64;
    let (s, recs, lo, hi) = run_array(backend, ifetch, n);
    let stores = recs
        .iter()
        .filter(|r| r.kind.is_write() && r.size == 8 && in_range(r, lo, hi))
        .count() as u64;
    let loads = recs
        .iter()
        .filter(|r| {
            matches!(r.kind, Kind::Load | Kind::Modify) && r.size == 8 && in_range(r, lo, hi)
        })
        .count() as u64;
    assert!(
        stores >= n,
        "{backend}: {stores} 8-byte stores to the array, expected >= {n}"
    );
    assert!(
        loads >= n,
        "{backend}: {loads} 8-byte loads from the array, expected >= {n}"
    );
    // Every element stored and loaded.
    let mut seen = vec![0u8; n as usize];
    for r in recs.iter().filter(|r| in_range(r, lo, hi)) {
        seen[((r.addr - lo) / 8) as usize] |= if r.kind.is_write() { 1 } else { 2 };
    }
    assert!(
        seen.iter().all(|&b| b == 3),
        "{backend}: some element was not both stored and loaded"
    );

    let ifetches = recs.iter().filter(|r| r.kind == Kind::IFetch).count() as u64;
    assert_eq!(ifetches, s.ifetches);
    if ifetch {
        assert!(ifetches > 2 * n, "{backend}: only {ifetches} ifetches");
    } else {
        assert_eq!(
            ifetches, 0,
            "{backend}: ifetches recorded although disabled"
        );
    }
    // Instruction counts are carried either way: at least one instruction per array access.
    let icount: u64 = recs.iter().map(|r| r.icount as u64).sum();
    assert!(icount >= 2 * n, "{backend}: icount total {icount}");
    assert_eq!(s.loads + s.stores + s.ifetches + s.modifies, s.records);
    assert_eq!(s.exit_code, 0);
    assert!(s.complete, "{backend}: stream incomplete");
    assert!(!s.truncated);
    assert_eq!(s.backend, backend);
    assert!(s.threads >= 1);
    eprintln!(
        "{backend} ifetch={ifetch}: {} records ({} L, {} S, {} I, {} M) in {:.2}s",
        s.records, s.loads, s.stores, s.ifetches, s.modifies, s.seconds
    );
}

#[test]
fn qemu_array_with_ifetch() {
    check_array(Backend::Qemu, true);
}

#[test]
fn qemu_array_without_ifetch() {
    check_array(Backend::Qemu, false);
}

#[test]
fn lackey_array_with_ifetch() {
    check_array(Backend::Lackey, true);
}

#[test]
fn lackey_array_without_ifetch() {
    check_array(Backend::Lackey, false);
}

#[test]
fn qemu_threads_get_distinct_ids() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmpdir();
    let exe = compile(dir.path(), "threads", THREADS_PROG, &["-pthread"]);
    let out = dir.path().join("t.cctrace");
    let rng = dir.path().join("range.txt");
    let n = 20_000u64;
    let s = capture(
        exe.to_str().unwrap(),
        &[n.to_string(), rng.display().to_string()],
        &out,
        &opts(Backend::Qemu, false),
        &mut |_| {},
    )
    .unwrap();
    let (recs, _) = read_trace(&out);
    let v = range_file(&rng);
    let threads_of = |lo: u64, hi: u64| {
        let mut t: Vec<u32> = recs
            .iter()
            .filter(|r| r.kind == Kind::Store && in_range(r, lo, hi))
            .map(|r| r.thread)
            .collect();
        let count = t.len() as u64;
        t.sort();
        t.dedup();
        (t, count)
    };
    let (ta, na) = threads_of(v[0], v[1]);
    let (tb, nb) = threads_of(v[2], v[3]);
    assert!(na >= n && nb >= n, "stores: {na}, {nb}");
    assert_eq!(ta.len(), 1, "array a written by threads {ta:?}");
    assert_eq!(tb.len(), 1, "array b written by threads {tb:?}");
    assert_ne!(ta[0], tb[0], "both threads got id {}", ta[0]);
    assert_ne!(ta[0], 0, "the worker has the main thread's id");
    assert!(s.threads >= 3, "{} threads", s.threads);
    assert!(s.complete);
}

/// The two QEMU modes (blocks expanded by the reader, or instructions counted in the plugin)
/// agree: same data records, and the instruction counts of one are the ifetches of the other.
#[test]
fn qemu_modes_agree() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmpdir();
    let exe = compile(dir.path(), "array", ARRAY_PROG, &[]);
    let rng = dir.path().join("range.txt");
    let args = ["3000".to_string(), rng.display().to_string()];
    let run = |ifetch: bool| {
        let out = dir.path().join(format!("m{ifetch}.cctrace"));
        capture(
            exe.to_str().unwrap(),
            &args,
            &out,
            &opts(Backend::Qemu, ifetch),
            &mut |_| {},
        )
        .unwrap();
        read_trace(&out).0
    };
    let with = run(true);
    let without = run(false);
    // Fold each ifetch into the icount of the next data record.
    let mut folded = Vec::new();
    let mut pending = 0u32;
    for r in &with {
        if r.kind == Kind::IFetch {
            pending += r.icount;
        } else {
            folded.push(Record {
                icount: r.icount + pending,
                ..*r
            });
            pending = 0;
        }
    }
    assert_eq!(folded.len(), without.len());
    assert!(folded == without, "the two modes disagree");
}

#[test]
fn fork_exec_and_exit_with_running_thread() {
    for backend in [Backend::Qemu, Backend::Lackey] {
        if !available(backend) {
            continue;
        }
        let dir = tmpdir();
        let exe = compile(dir.path(), "fork", FORK_PROG, &["-pthread"]);
        let out = dir.path().join("f.cctrace");
        let rng = dir.path().join("range.txt");
        let n = 5000u64;
        let s = capture(
            exe.to_str().unwrap(),
            &[n.to_string(), rng.display().to_string()],
            &out,
            &opts(backend, false),
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
        let (recs, _) = read_trace(&out);
        let v = range_file(&rng);
        let stores = |lo, hi| {
            recs.iter()
                .filter(|r| r.kind.is_write() && in_range(r, lo, hi))
                .count() as u64
        };
        assert!(
            stores(v[0], v[1]) >= n,
            "{backend}: the parent's stores are missing"
        );
        // (malloc itself may touch a few words of c's range while carving it out.)
        let c = stores(v[2], v[3]);
        assert!(
            c < n / 10,
            "{backend}: the forked child was traced ({c} stores to its array)"
        );
        assert!(s.complete, "{backend}: stream incomplete");
        if backend == Backend::Qemu {
            assert!(s.threads >= 2, "{backend}: {} threads", s.threads);
        }
    }
}

#[test]
fn missing_program_is_a_clear_error_and_out_is_untouched() {
    let dir = tmpdir();
    let out = dir.path().join("keep.cctrace");
    std::fs::write(&out, b"precious").unwrap();
    for backend in [Backend::Auto, Backend::Qemu, Backend::Lackey] {
        let e = capture(
            "/no/such/program",
            &[],
            &out,
            &opts(backend, true),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(matches!(e, CaptureError::ProgramNotFound { .. }), "{e:?}");
        assert!(e.to_string().contains("/no/such/program"), "{e}");
        let e = capture(
            "no-such-program-on-path",
            &[],
            &out,
            &opts(backend, true),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
    }
    let e = capture(
        "/etc/hostname",
        &[],
        &out,
        &CaptureOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(e, CaptureError::NotExecutable { .. }), "{e:?}");
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
}

#[test]
fn backend_names_parse() {
    assert_eq!(Backend::parse("QEMU").unwrap(), Backend::Qemu);
    assert_eq!(Backend::parse("lackey").unwrap(), Backend::Lackey);
    assert_eq!("auto".parse::<Backend>().unwrap(), Backend::Auto);
    let e = Backend::parse("pin").unwrap_err().to_string();
    assert!(e.contains("auto, qemu, lackey") && e.contains("pin"), "{e}");
}

#[test]
fn failing_program_keeps_its_trace() {
    for backend in [Backend::Qemu, Backend::Lackey] {
        if !available(backend) {
            continue;
        }
        let dir = tmpdir();
        let exe = compile(dir.path(), "array", ARRAY_PROG, &[]);
        let out = dir.path().join("f.cctrace");
        let rng = dir.path().join("range.txt");
        let e = capture(
            exe.to_str().unwrap(),
            &["100".into(), rng.display().to_string(), "3".into()],
            &out,
            &opts(backend, false),
            &mut |_| {},
        )
        .unwrap_err();
        match &e {
            CaptureError::ProgramFailed { code, summary } => {
                assert_eq!(*code, 3);
                assert_eq!(summary.exit_code, 3);
                assert!(summary.records > 0);
                let (recs, _) = read_trace(&out);
                assert_eq!(recs.len() as u64, summary.records);
            }
            other => panic!("{backend}: {other:?}"),
        }
        assert!(e.to_string().contains("status 3"), "{e}");
        assert!(
            e.summary().unwrap().complete,
            "{backend}: a plain exit(3) lost records"
        );

        // Death by signal: status 128 + 11, trace kept.
        let e = capture(
            exe.to_str().unwrap(),
            &["100".into(), rng.display().to_string(), "segv".into()],
            &out,
            &opts(backend, true),
            &mut |_| {},
        )
        .unwrap_err();
        let s = e.summary().unwrap_or_else(|| panic!("{backend}: {e:?}"));
        assert_eq!(s.exit_code, 139, "{backend}: {e}");
        assert!(s.records > 0);
        // Capture metadata: the kept trace says itself how the program ended.
        let (_, meta) = read_trace(&out);
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        assert_eq!(meta["exit_code"], 139, "{backend}: {meta}");
        assert_eq!(meta["complete"], s.complete, "{backend}: {meta}");
        assert_eq!(meta["truncated"], false, "{backend}: {meta}");
        eprintln!("{backend}: SIGSEGV -> {e} (complete: {})", s.complete);
    }
}

#[test]
fn max_records_truncates_and_stops_the_program() {
    for backend in [Backend::Qemu, Backend::Lackey] {
        if !available(backend) {
            continue;
        }
        let dir = tmpdir();
        let exe = compile(dir.path(), "random", RANDOM_PROG, &[]);
        let out = dir.path().join("m.cctrace");
        let started = std::time::Instant::now();
        let s = capture(
            exe.to_str().unwrap(),
            // Far more references than the limit: the kill must cut the run short.
            &["1000000000".into()],
            &out,
            &CaptureOptions {
                backend,
                ifetch: true,
                max_records: Some(50_000),
                syscalls: false,
                skip_instructions: 0,
                pcs: true,
                ..CaptureOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(s.truncated);
        assert_eq!(s.records, 50_000);
        assert!(
            started.elapsed().as_secs() < 60,
            "the program was not stopped"
        );
        let (recs, _) = read_trace(&out);
        assert_eq!(recs.len(), 50_000);
    }
}

#[test]
fn shell_script_runs_its_interpreter_under_qemu() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmpdir();
    let script = dir.path().join("hello.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.path().join("s.cctrace");
    let s = capture(
        script.to_str().unwrap(),
        &[],
        &out,
        &opts(Backend::Qemu, false),
        &mut |_| {},
    )
    .unwrap();
    assert!(s.records > 1000, "{} records", s.records);
}

/// Records/s of each back end on ~10 M random loads (ignored: slow, run by hand).
#[test]
#[ignore]
fn capture_speed() {
    let dir = tmpdir();
    let exe = compile(dir.path(), "random", RANDOM_PROG, &["-O2"]);
    let n: u64 = std::env::var("CAPTURE_SPEED_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    for (backend, ifetch) in [
        (Backend::Qemu, true),
        (Backend::Qemu, false),
        (Backend::Lackey, true),
        (Backend::Lackey, false),
    ] {
        let only = std::env::var("CAPTURE_SPEED_ONLY").unwrap_or_default();
        let only_ifetch = std::env::var("CAPTURE_SPEED_IFETCH").unwrap_or_default();
        if !only_ifetch.is_empty() && only_ifetch != ifetch.to_string() {
            continue;
        }
        if !only.is_empty() && only != backend.name() {
            continue;
        }
        if !available(backend) {
            continue;
        }
        let out = dir.path().join("speed.cctrace");
        let s = capture(
            exe.to_str().unwrap(),
            &[n.to_string()],
            &out,
            &opts(backend, ifetch),
            &mut |_| {},
        )
        .unwrap();
        let bytes = std::fs::metadata(&out).unwrap().len();
        eprintln!(
            "SPEED {backend:6} ifetch={ifetch:5}: {:>11} records ({:>10} loads) in {:7.2}s = {:6.2} M records/s, trace {:.1} MB ({:.2} B/record)",
            s.records,
            s.loads,
            s.seconds,
            s.records_per_second() / 1e6,
            bytes as f64 / 1e6,
            bytes as f64 / s.records as f64
        );
        std::fs::remove_file(&out).unwrap();
    }
}

const SYSCALL_PROG: &str = r#"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char buf[4096] __attribute__((aligned(64)));
int main(int argc, char **argv) {
    (void)argc;
    int fd = open(argv[1], O_RDONLY);
    long n = (long)read(fd, buf + 16, 1000);
    close(fd);
    char line[128];
    int len = snprintf(line, sizeof line, "%lu %ld %lu", (unsigned long)(uintptr_t)(buf + 16), n,
                       (unsigned long)(uintptr_t)line);
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    long w = (long)write(out, line, (size_t)len);
    close(out);
    return w == len ? 0 : 1;
}
"#;

/// `--syscalls` under QEMU: a read of 1000 bytes and a write of a line become privileged runs
/// whose first record carries the syscall identity and whose accesses cover exactly the user
/// buffers (stores for read, loads for write); user records stay unprivileged. Lackey rejects
/// the option.
#[test]
fn qemu_syscalls_become_privileged_runs_over_the_user_buffers() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmpdir();
    let exe = compile(dir.path(), "sys", SYSCALL_PROG, &[]);
    let input = dir.path().join("in.txt");
    std::fs::write(&input, vec![b'x'; 4000]).unwrap();
    let range = dir.path().join("range.txt");
    let out = dir.path().join("sys.cctrace");
    let args = [
        input.to_string_lossy().into_owned(),
        range.to_string_lossy().into_owned(),
    ];
    let o = CaptureOptions {
        syscalls: true,
        ..opts(Backend::Qemu, true)
    };
    capture(exe.to_str().unwrap(), &args, &out, &o, &mut |_| {}).unwrap();
    let (recs, meta) = read_trace(&out);
    assert!(meta.contains("\"syscalls\":true"), "{meta}");
    let text = std::fs::read_to_string(&range).unwrap();
    let v: Vec<u64> = text
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    let (buf, n, line) = (v[0], v[1], v[2]);
    assert_eq!(n, 1000);
    let len = text.len() as u64;
    // Split into privileged runs (one thread): each starts with the kernel-stack marker.
    let mut runs: Vec<Vec<Record>> = Vec::new();
    let mut prev = false;
    for r in &recs {
        if r.privileged {
            if !prev || r.syscall != 0 {
                runs.push(Vec::new());
            }
            runs.last_mut().unwrap().push(*r);
        } else {
            assert_eq!(r.syscall, 0, "identities only on privileged records");
        }
        prev = r.privileged;
    }
    assert!(
        runs.len() >= 5,
        "open, read, close, open, write, ...: {}",
        runs.len()
    );
    for run in &runs {
        assert_ne!(run[0].syscall, 0, "a run starts with its identity");
        assert_eq!((run[0].kind, run[0].size), (Kind::Store, 64));
        assert!(run[1..].iter().all(|r| r.syscall == 0 && r.icount == 1));
    }
    let number = |r: &Vec<Record>| cachecolor_sim::trace::syscall_number(r[0].syscall);
    let covered = |run: &Vec<Record>, kind: Kind| -> (u64, u64, u64) {
        let data = &run[1..];
        assert!(data.iter().all(|r| r.kind == kind), "{data:?}");
        let bytes = data.iter().map(|r| r.size as u64).sum();
        (
            data[0].addr,
            data.last().map(|r| r.addr + r.size as u64).unwrap(),
            bytes,
        )
    };
    let read = runs
        .iter()
        .find(|r| number(r) == 0 && r.len() > 1 && r[1].addr == buf)
        .expect("the program's read (the loader's reads of libc come first)");
    assert_eq!(covered(read, Kind::Store), (buf, buf + 1000, 1000));
    assert_eq!(
        read.len(),
        1 + 16,
        "1000 bytes from offset 16 of a line: 16 lines"
    );
    let write = runs.iter().find(|r| number(r) == 1).expect("the write");
    assert_eq!(covered(write, Kind::Load), (line, line + len, len));

    // Lackey cannot see system calls.
    if available(Backend::Lackey) {
        let o = CaptureOptions {
            syscalls: true,
            ..opts(Backend::Lackey, true)
        };
        let e = capture(exe.to_str().unwrap(), &args, &out, &o, &mut |_| {}).unwrap_err();
        assert!(matches!(e, CaptureError::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("--syscalls"), "{e}");
    }
}

/// Attribution: two functions, one that stores to the array and one that loads it, each kept out of
/// line so its instructions sit at the addresses its symbol gives. Non-PIE, so the symbol table's
/// addresses are the run-time ones under both back ends.
const PCS_PROG: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void fill(volatile uint64_t *a, long n) {
    for (long i = 0; i < n; i++) a[i] = (uint64_t)i;
}
__attribute__((noinline)) uint64_t total(volatile uint64_t *a, long n) {
    uint64_t s = 0;
    for (long i = 0; i < n; i++) s += a[i];
    return s;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    volatile uint64_t *a = aligned_alloc(64, (size_t)n * 8);
    fill(a, n);
    uint64_t s = total(a, n);
    FILE *f = fopen(argv[2], "w");
    fprintf(f, "%lu %lu %lu\n", (unsigned long)(uintptr_t)a, (unsigned long)(uintptr_t)(a + n),
            (unsigned long)s);
    fclose(f);
    return 0;
}
"#;

/// The records and PCs of a native trace (PCs empty when it has none), and its version.
fn read_trace_with_pcs(p: &Path) -> (Vec<Record>, Vec<u64>, u16) {
    use cachecolor_sim::trace::RecordSource;
    let mut r = TraceReader::open(p).expect("trace opens");
    let (mut recs, mut pcs, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    while r.next_block(&mut buf).expect("trace reads") {
        recs.extend_from_slice(&buf);
        pcs.extend_from_slice(r.block_pcs());
    }
    (recs, pcs, r.version())
}

fn check_pcs_are_the_instructions_that_access(backend: Backend) {
    if !available(backend) {
        return;
    }
    let dir = tmpdir();
    let exe = compile(dir.path(), "pcs", PCS_PROG, &["-no-pie", "-fno-pie"]);
    let (fill, total) = (symbol_range(&exe, "fill"), symbol_range(&exe, "total"));
    let out = dir.path().join("pcs.cctrace");
    let rng = dir.path().join("range.txt");
    let n = 2000u64;
    let args = [n.to_string(), rng.to_string_lossy().into_owned()];
    capture(
        exe.to_str().unwrap(),
        &args,
        &out,
        &opts(backend, true),
        &mut |_| {},
    )
    .unwrap();
    let (recs, pcs, version) = read_trace_with_pcs(&out);
    assert_eq!(
        (version, pcs.len()),
        (3, recs.len()),
        "{backend}: one PC per record"
    );
    let v = range_file(&rng);
    let (mut stores, mut loads) = (0, 0);
    for (r, &pc) in recs.iter().zip(&pcs) {
        if r.kind == Kind::IFetch {
            assert_eq!(pc, r.addr, "{backend}: an ifetch's PC is its address");
            continue;
        }
        assert_ne!(
            pc, 0,
            "{backend}: every data record of a capture has a PC: {r:?}"
        );
        if in_range(r, v[0], v[1]) {
            let (lo, hi, count) = match r.kind {
                Kind::Store => (fill.0, fill.1, &mut stores),
                _ => (total.0, total.1, &mut loads),
            };
            assert!(
                (lo..hi).contains(&pc),
                "{backend}: {r:?} made at {pc:#x}, outside its function [{lo:#x}, {hi:#x})"
            );
            *count += 1;
        }
    }
    assert_eq!(
        (stores, loads),
        (n, n),
        "{backend}: every array access seen"
    );
    // Without fetches there is no PC to give: the trace stays version 2, without the column.
    capture(
        exe.to_str().unwrap(),
        &args,
        &out,
        &opts(backend, false),
        &mut |_| {},
    )
    .unwrap();
    let (recs, pcs, version) = read_trace_with_pcs(&out);
    assert!(!recs.is_empty());
    assert_eq!(
        (version, pcs.len()),
        (2, 0),
        "{backend}: --no-ifetch has no PCs"
    );
}

#[test]
fn qemu_pcs_are_the_instructions_that_access() {
    check_pcs_are_the_instructions_that_access(Backend::Qemu);
}

#[test]
fn lackey_pcs_are_the_instructions_that_access() {
    check_pcs_are_the_instructions_that_access(Backend::Lackey);
}

/// Maps, touches and unmaps a region `n` times (each at the address the kernel picks), writing
/// each region's address to the file named by argv[2].
const MAPS_PROG: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    FILE *f = fopen(argv[2], "w");
    unsigned long s = 0;
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)(i % 4 + 1) << 16;
        volatile char *p = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return 1;
        for (size_t k = 0; k < len; k += 4096) p[k] = (char)i;
        s += p[len - 4096];
        fprintf(f, "%lu %lu\n", (unsigned long)p, (unsigned long)len);
        munmap((void *)p, len);
    }
    char *h = malloc(1 << 20);   /* above the mmap threshold: its own mapping */
    for (int k = 0; k < (1 << 20); k += 4096) h[k] = 1;
    fprintf(f, "%lu %lu\n", (unsigned long)h, 1ul << 20);
    fclose(f);
    printf("%lu\n", s + h[4096]);
    return 0;
}
"#;

/// The trace's memory map follows the program's mmap/munmap: every data record of the program lies
/// in a mapping of the map that existed at that record, each region the program reports lies in an
/// anonymous mapping alive while it was touched, and the program's own file (PIE, at QEMU's base)
/// and the loader's stack are named.
#[test]
fn qemu_memory_map_follows_mmap_and_munmap() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmpdir();
    let exe = compile(dir.path(), "maps", MAPS_PROG, &["-fPIE", "-pie"]);
    let out = dir.path().join("maps.cctrace");
    let rng = dir.path().join("regions.txt");
    let n = 40u64;
    capture(
        exe.to_str().unwrap(),
        &[n.to_string(), rng.display().to_string()],
        &out,
        &opts(Backend::Qemu, true),
        &mut |_| {},
    )
    .unwrap();
    let (recs, meta) = read_trace(&out);
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    let map = &meta["memory_map"];
    assert_eq!(map["version"], 1, "{map}");
    let maps: Vec<(u64, u64, u64, Option<u64>, String, String)> = map["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let (s, e) = (m["start"].as_u64().unwrap(), m["end"].as_u64().unwrap());
            let (path, kind) = (
                m["path"].as_str().unwrap().to_string(),
                m["kind"].as_str().unwrap().to_string(),
            );
            m["live"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    (
                        s,
                        e,
                        l[0].as_u64().unwrap(),
                        l[1].as_u64(),
                        path.clone(),
                        kind.clone(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let alive = |addr: u64, at: u64| {
        maps.iter()
            .filter(|m| m.0 <= addr && addr < m.1 && m.2 <= at && m.3.is_none_or(|t| at < t))
            .collect::<Vec<_>>()
    };
    let canon = std::fs::canonicalize(&exe).unwrap();
    let prog = maps
        .iter()
        .find(|m| m.4 == canon.to_str().unwrap())
        .expect("the program is mapped");
    assert!(prog.0 >= 0x4000000000, "PIE at QEMU's base: {:#x}", prog.0);
    assert!(
        maps.iter().any(|m| m.5 == "stack"),
        "the main stack is named"
    );
    let mut outside = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        // code and data alike
        if alive(r.addr, i as u64).is_empty() {
            outside.push((i, r.addr));
        }
    }
    assert!(
        outside.is_empty(),
        "{} references outside every live mapping, first {:x?}",
        outside.len(),
        &outside[..outside.len().min(5)]
    );
    // Every reported region: its stores fall in an anonymous mapping alive then.
    let v = range_file(&rng);
    for pair in v.chunks(2) {
        let (lo, len) = (pair[0], pair[1]);
        let touched: Vec<usize> = recs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.kind == Kind::Store && in_range(r, lo, lo + len))
            .map(|(i, _)| i)
            .collect();
        assert!(
            touched.len() as u64 >= len / 4096,
            "region {lo:#x}: {} stores",
            touched.len()
        );
        for i in touched {
            let m = alive(lo, i as u64);
            assert!(
                m.iter().any(|m| m.4.is_empty() && m.1 >= lo + len),
                "region {lo:#x}+{len:#x} at record {i}: {m:?}"
            );
        }
    }
}
