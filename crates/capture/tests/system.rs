/*!
Full-system capture (src/system.rs) end to end: boot the packaged kernel under
qemu-system-x86_64 and capture a C program that walks a generated file tree (opendir, readdir,
fstatat, open, read, close in a loop), then check the trace against what the guest kernel
itself says and against the kernel's own symbol map:

- the privileged share of the trace's instructions matches the program's stime / (utime +
  stime) from the guest's /proc/PID/stat (tick-sampled: with `-icount` every tick is the same
  number of instructions, so the ticks are a sample of instructions; the tolerance is three
  binomial standard deviations of that sample plus two percentage points for what the trace
  holds and the program's accounting does not: the launcher's wait, interrupts, the idle loop);
- privileged instruction fetches fall in the kernel's text as the guest's /proc/kallsyms gives
  it (Debian's /boot/System.map is a placeholder) or in the module area; user fetches and user loads/stores stay below the user-space top.

Bad input, each one line and nothing left behind (no temporary directory, no QEMU process, no
output file): a program whose loader is missing in the guest, a file that is not a kernel, a
guest that does not boot within its timeout, an image larger than the guest memory, and
--max-records (a success, truncated, QEMU killed).

Every test skips, saying why, when qemu-system-x86_64, busybox or a kernel image is missing
(`make tools` installs them as root). The tests share one temporary directory and run one at a
time (a lock), so "nothing left behind" can be checked exactly.
*/
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::symbol_range;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use cachecolor_capture::system::{check_system, locate_kernel, KERNEL_BASE};
use cachecolor_capture::{capture_system, CaptureError, SystemOptions};
use cachecolor_sim::trace::native::TraceReader;
use cachecolor_sim::trace::{collect, Kind};

const USER_TOP: u64 = 0x0000_8000_0000_0000;

const WALK_PROG: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static unsigned char buf[4096];
static long files, bytes;
static unsigned long sum; /* user-mode work per byte read, so both modes have a real share */
static void walk(const char *path) {
    DIR *d = opendir(path);
    if (!d) { perror(path); exit(3); }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st)) { perror(p); exit(4); }
        if (S_ISDIR(st.st_mode)) { walk(p); continue; }
        int fd = open(p, O_RDONLY);
        if (fd < 0) { perror(p); exit(5); }
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) {
            bytes += n;
            for (int k = 0; k < 3; k++)
                for (ssize_t i = 0; i < n; i++) sum = sum * 31 + buf[i];
        }
        close(fd);
        files++;
    }
    closedir(d);
}
int main(int argc, char **argv) {
    int rounds = atoi(argv[2]);
    for (int r = 0; r < rounds; r++) walk(argv[1]);
    printf("walked %ld files, %ld bytes (%lx)\n", files, bytes, sum);
    return 0;
}
"#;

/// The shared temporary directory (TMPDIR for every capture here) and the lock.
fn setup() -> Option<(MutexGuard<'static, ()>, &'static Path)> {
    static LOCK: Mutex<()> = Mutex::new(());
    static TMP: OnceLock<PathBuf> = OnceLock::new();
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(e) = check_system(None) {
        eprintln!("skipped: full-system capture cannot run here: {e}");
        return None;
    }
    let tmp = TMP.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("cc-system-test.{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // SAFETY: set once, under the lock, before any capture of this process reads it.
        std::env::set_var("TMPDIR", &d);
        d
    });
    Some((guard, tmp.as_path()))
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
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Nothing of a capture is left: no temporary entry besides `keep`, no QEMU child.
fn assert_clean(tmp: &Path, keep: &[&Path]) {
    let left: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if let Some(rest) = stat.rsplit_once(") ") {
            let ppid = rest.1.split_whitespace().nth(1).unwrap_or("");
            assert!(
                !(ppid == me && stat.contains("(qemu-system")),
                "a QEMU process was left running: {stat}"
            );
        }
    }
}

#[test]
fn file_walk_privileged_share_matches_the_guest_accounting() {
    let Some((_g, tmp)) = setup() else { return };
    let work = tempfile::tempdir_in(tmp).unwrap();
    let prog = compile(work.path(), "walk", WALK_PROG, &[]);
    // The tree: 24 directories of 24 files of 0..3 KiB.
    let tree = work.path().join("tree");
    for d in 0..24 {
        let dir = tree.join(format!("d{d}")).join("sub");
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..24 {
            std::fs::write(dir.join(format!("f{f}")), vec![b'x'; (d * 24 + f) % 3000]).unwrap();
        }
    }
    let out = work.path().join("walk.cctrace");
    let opts = SystemOptions {
        guest_files: vec![tree.clone()],
        ..SystemOptions::default()
    };
    let (summary, guest) = capture_system(
        &prog.to_string_lossy(),
        &[tree.to_string_lossy().into_owned(), "8".into()],
        &out,
        &opts,
        &mut |_| {},
    )
    .unwrap();
    assert!(summary.complete && !summary.truncated, "{summary:?}");
    assert!(
        guest.output.contains("walked 4608 files"),
        "the program's output: {:?}",
        guest.output
    );

    let recs = collect(&mut TraceReader::open(&out).unwrap()).unwrap();
    assert_eq!(recs.len() as u64, summary.records);
    let (mut insns, mut kinsns) = (0u64, 0u64);
    let (mut in_text, mut in_modules) = (0u64, 0u64);
    let (mut kdata, mut kdata_user) = (0u64, 0u64);
    let (text0, text1) = guest
        .kernel_text
        .expect("the guest's /proc/kallsyms names _stext and _etext");
    for r in &recs {
        if r.kind == Kind::IFetch {
            insns += 1;
            if r.privileged {
                kinsns += 1;
                assert!(r.addr >= KERNEL_BASE);
                if (text0..text1).contains(&r.addr) {
                    in_text += 1;
                } else if r.addr >= 0xffff_ffff_c000_0000 {
                    in_modules += 1;
                }
            } else {
                assert!(r.addr < USER_TOP, "user fetch at {:#x}", r.addr);
            }
        } else if r.privileged {
            kdata += 1;
            kdata_user += u64::from(r.addr < USER_TOP);
        } else {
            assert!(r.addr < USER_TOP, "user-mode access to {:#x}", r.addr);
            // (Interrupt delivery's stores to the kernel's entry stack are privileged by their
            // address: src/system.rs, mark_privilege.)
        }
    }
    let share = kinsns as f64 / insns as f64;
    let (ut, st) = (guest.utime.unwrap(), guest.stime.unwrap());
    let ticks = (ut + st) as f64;
    let guest_share = st as f64 / ticks;
    let tol = 3.0 * (guest_share * (1.0 - guest_share) / ticks).sqrt() + 0.02;
    eprintln!(
        "{} records, {insns} instructions, privileged {:.3}; guest utime {ut} stime {st} \
         ({:.3}, +-{tol:.3}); kernel text {:.4}, modules {:.4}; kernel data refs to user {:.3}; \
         boot {:.1} s, run {:.1} s",
        recs.len(),
        share,
        guest_share,
        in_text as f64 / kinsns as f64,
        in_modules as f64 / kinsns as f64,
        kdata_user as f64 / kdata as f64,
        guest.boot_seconds,
        guest.run_seconds
    );
    assert!(ticks >= 20.0, "too few ticks to compare ({ut} + {st})");
    assert!(
        (share - guest_share).abs() <= tol,
        "privileged share {share:.3} vs the guest's stime share {guest_share:.3} (+-{tol:.3})"
    );
    // Kernel code is the kernel's text (or a module's); nothing privileged runs elsewhere but
    // the few entry trampolines and BPF/ftrace stubs outside both.
    assert!(
        (in_text + in_modules) as f64 >= 0.999 * kinsns as f64,
        "privileged fetches in text {in_text} + modules {in_modules} of {kinsns}"
    );
    // read() copies file contents to the user buffer: the kernel touches user addresses.
    assert!(kdata_user > 0 && kdata_user < kdata);
    drop(work);
    assert_clean(tmp, &[]);
}

#[test]
fn bad_input_is_one_line_and_leaves_nothing() {
    let Some((_g, tmp)) = setup() else { return };
    let work = tempfile::tempdir_in(tmp).unwrap();
    let out = work.path().join("x.cctrace");
    let hello = compile(
        work.path(),
        "hello",
        "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n",
        &[],
    );
    let one_line = |e: &CaptureError| {
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    };
    let keep = [work.path()];

    // Not a kernel: QEMU refuses it at once.
    let junk = work.path().join("junk-kernel");
    std::fs::write(&junk, vec![0u8; 4096]).unwrap();
    let e = capture_system(
        &hello.to_string_lossy(),
        &[],
        &out,
        &SystemOptions {
            kernel: Some(junk.clone()),
            ..SystemOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    let s = one_line(&e);
    assert!(
        s.contains("did not boot") && s.contains("junk-kernel"),
        "{s}"
    );
    assert!(!out.exists());
    assert_clean(tmp, &keep);

    // A kernel that does not boot in time.
    let e = capture_system(
        &hello.to_string_lossy(),
        &[],
        &out,
        &SystemOptions {
            boot_timeout: Duration::from_millis(300),
            ..SystemOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    let s = one_line(&e);
    assert!(s.contains("did not start the program within"), "{s}");
    assert!(!out.exists());
    assert_clean(tmp, &keep);

    // An image larger than the guest memory allows.
    let e = capture_system(
        &hello.to_string_lossy(),
        &[],
        &out,
        &SystemOptions {
            memory_mib: 64,
            ..SystemOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    let s = one_line(&e);
    assert!(s.contains("more than the 64 MiB allowed"), "{s}");
    assert!(!out.exists());
    assert_clean(tmp, &keep);

    // A program whose loader the guest does not have (ldd cannot name it either).
    let orphan = compile(
        work.path(),
        "orphan",
        "int main(void) { return 0; }\n",
        &["-Wl,--dynamic-linker=/opt/cachecolor-missing/ld.so"],
    );
    let e = capture_system(
        &orphan.to_string_lossy(),
        &[],
        &out,
        &SystemOptions::default(),
        &mut |_| {},
    )
    .unwrap_err();
    let s = one_line(&e);
    assert!(
        s.contains("the guest cannot run") && s.contains("No such file or directory"),
        "{s}"
    );
    assert!(!out.exists());
    assert_clean(tmp, &keep);

    // --max-records: stops early, a success marked truncated; QEMU is killed.
    let (summary, guest) = capture_system(
        &hello.to_string_lossy(),
        &[],
        &out,
        &SystemOptions {
            max_records: Some(200_000),
            ..SystemOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(summary.truncated && !summary.complete, "{summary:?}");
    assert_eq!(summary.records, 200_000);
    assert_eq!(guest.utime, None);
    let recs = collect(&mut TraceReader::open(&out).unwrap()).unwrap();
    assert_eq!(recs.len(), 200_000);
    drop(work);
    assert_clean(tmp, &[]);
}

#[test]
fn the_newest_boot_kernel_is_found() {
    let Some((_g, _tmp)) = setup() else { return };
    let k = locate_kernel(None).unwrap();
    assert!(k.to_string_lossy().contains("vmlinuz-"), "{}", k.display());
}

const FORK_PROG: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static volatile unsigned long sink;
/* Each process runs its own function, so the test knows whose user code a fetch is. */
__attribute__((noinline)) void parent_work(void) {
    for (unsigned long i = 0; i < 300000; i++) sink += i * 7;
    for (int k = 0; k < 200; k++) getppid();
}
__attribute__((noinline)) void child_work(void) {
    for (unsigned long i = 0; i < 300000; i++) sink += i * 5;
    for (int k = 0; k < 200; k++) getppid();
}
int main(void) {
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        child_work();
        printf("child pid=%d\n", getpid());
        return 0;
    }
    parent_work();
    waitpid(c, NULL, 0);
    printf("parent pid=%d child=%d\n", getpid(), c);
    return 0;
}
"#;

/// Every record carries its guest task. A program forks; each process runs its own function. The
/// trace's thread numbers must separate them exactly (every user fetch of `parent_work` in one
/// task, of `child_work` in another), the pids the metadata gives them must be the ones the program
/// itself printed (getpid in the guest), the child's parent the program, both marked as the
/// program, and the per-task instruction counts the trace's own. Then the whole-system simulator
/// runs the trace, kernel references included.
#[test]
fn every_record_carries_its_guest_task() {
    let Some((_g, tmp)) = setup() else { return };
    let work = tempfile::tempdir_in(tmp).unwrap();
    let prog = compile(work.path(), "forky", FORK_PROG, &["-no-pie"]);
    let out = work.path().join("forky.cctrace");
    let (summary, guest) = capture_system(
        &prog.to_string_lossy(),
        &[],
        &out,
        &SystemOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    assert!(summary.complete, "{summary:?}");
    let num = |key: &str| -> u32 {
        let at = guest
            .output
            .find(key)
            .unwrap_or_else(|| panic!("{key} in {:?}", guest.output));
        guest.output[at + key.len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (parent_pid, child_pid) = (num("parent pid="), num("child="));
    assert_eq!(num("child pid="), child_pid);

    let reader = TraceReader::open(&out).unwrap();
    let meta: serde_json::Value = serde_json::from_str(reader.metadata()).unwrap();
    let recs = collect(&mut TraceReader::open(&out).unwrap()).unwrap();
    let ident = &meta["task_identity"];
    assert_eq!(ident["pids"], true, "{ident}");
    let tasks = meta["tasks"].as_array().unwrap();
    assert_eq!(tasks.len() as u64, ident["tasks"].as_u64().unwrap());
    let by_pid = |pid: u32| {
        tasks
            .iter()
            .find(|t| t["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} in {tasks:?}"))
    };
    let (parent, child) = (by_pid(parent_pid), by_pid(child_pid));
    assert_eq!(parent["thread"], 0, "the program is task 0");
    assert_eq!(parent["comm"], "forky");
    assert_eq!(child["parent"], parent_pid);
    assert_eq!(child["tgid"], child_pid);
    assert!(parent["program"] == true && child["program"] == true);
    let (pt, ct) = (
        parent["thread"].as_u64().unwrap() as u32,
        child["thread"].as_u64().unwrap() as u32,
    );

    let (p0, p1) = symbol_range(&prog, "parent_work");
    let (c0, c1) = symbol_range(&prog, "child_work");
    let mut insns = vec![[0u64; 2]; tasks.len()];
    let (mut in_parent, mut in_child) = (0u64, 0u64);
    for r in &recs {
        insns[r.thread as usize][usize::from(r.privileged)] += u64::from(r.icount);
        if r.kind == Kind::IFetch && !r.privileged {
            if (p0..p1).contains(&r.addr) {
                assert_eq!(r.thread, pt, "parent_work fetched by task {}", r.thread);
                in_parent += 1;
            } else if (c0..c1).contains(&r.addr) {
                assert_eq!(r.thread, ct, "child_work fetched by task {}", r.thread);
                in_child += 1;
            }
        }
    }
    assert!(
        in_parent > 300_000 && in_child > 300_000,
        "{in_parent} {in_child}"
    );
    for (n, t) in tasks.iter().enumerate() {
        assert_eq!(t["thread"], n);
        assert_eq!(t["user_instructions"], insns[n][0], "task {n}");
        assert_eq!(t["kernel_instructions"], insns[n][1], "task {n}");
        // Kernel threads and the idle task never run user code and are not the program.
        if t["user_instructions"] == 0 {
            assert_eq!(t["program"], false, "{t}");
        }
    }
    eprintln!(
        "{} records, {} tasks, {} switches: {}",
        recs.len(),
        tasks.len(),
        ident["switches"],
        serde_json::to_string(tasks).unwrap()
    );

    // The whole-system simulator runs the trace as one process whose privileged references are
    // the kernel's: the kernel's upper-half addresses are translated (address_check.rs), every
    // invariant holds (each page keeps its contents, frames owned once), and it retires the
    // trace's instructions and references.
    let config = cachecolor_sim::system::system_config_from_toml(&format!(
        "[machine]\npreset = \"xeon-e5506\"\n[machine.hierarchy]\ncores = 1\n\
         [memory]\nram = \"1GiB\"\n[[processes]]\nname = \"forky\"\n\
         [[processes.threads]]\ntrace = {:?}\n",
        out.to_string_lossy()
    ))
    .unwrap();
    let mut sys = cachecolor_sim::system::System::new(&config).unwrap();
    sys.run().unwrap();
    let rep = sys.report();
    assert!(
        rep.invariants.is_empty(),
        "{:?}",
        &rep.invariants[..rep.invariants.len().min(5)]
    );
    let instructions: u64 = recs.iter().map(|r| u64::from(r.icount)).sum();
    assert_eq!(rep.processes[0].instructions, instructions);
    assert_eq!(rep.processes[0].references, recs.len() as u64);
    drop(work);
    assert_clean(tmp, &[]);
}

/// The web-server workload in small: BusyBox httpd answers three BusyBox wget requests on loopback
/// inside the guest (the shell, the server forking per connection, the clients: many
/// short-lived processes, so reused task structs). Every task switch of the trace must match
/// the guest's own scheduler events (pids labelled), every client and server process must be
/// a descendant of the program with its own task, and each client ran user code.
#[test]
fn web_server_on_loopback_labels_every_task() {
    let Some((_g, tmp)) = setup() else { return };
    let work = tempfile::tempdir_in(tmp).unwrap();
    let www = work.path().join("www");
    std::fs::create_dir_all(&www).unwrap();
    for i in 0..3 {
        std::fs::write(
            www.join(format!("p{i}.html")),
            vec![b'a' + i as u8; 2000 * (i + 1)],
        )
        .unwrap();
    }
    let out = work.path().join("httpd.cctrace");
    let script = format!(
        "ifconfig lo 127.0.0.1 up || exit 2; httpd -f -p 127.0.0.1:8080 -h {} & sleep 0.2; n=0; \
         for i in 0 1 2; do wget -q -O /dev/null http://127.0.0.1:8080/p$i.html && n=$((n+1)); done; \
         kill $!; echo \"served $n of 3\"; test $n = 3",
        www.display()
    );
    let opts = SystemOptions {
        guest_files: vec![www.clone()],
        ..SystemOptions::default()
    };
    let (summary, guest) =
        capture_system("/bin/sh", &["-c".into(), script], &out, &opts, &mut |_| {}).unwrap();
    assert!(summary.complete, "{summary:?}");
    assert!(guest.output.contains("served 3 of 3"), "{:?}", guest.output);
    let meta: serde_json::Value =
        serde_json::from_str(TraceReader::open(&out).unwrap().metadata()).unwrap();
    assert_eq!(
        meta["task_identity"]["pids"], true,
        "{}",
        meta["task_identity"]
    );
    let tasks = meta["tasks"].as_array().unwrap();
    assert_eq!(summary.threads as usize, tasks.len());
    let shell = tasks[0]["pid"].clone();
    let named = |c: &str| tasks.iter().filter(|t| t["comm"] == c).collect::<Vec<_>>();
    let (wgets, httpds) = (named("wget"), named("httpd"));
    assert_eq!(wgets.len(), 3, "{tasks:?}");
    assert!(
        httpds.len() >= 4,
        "the server and a process per connection: {tasks:?}"
    );
    for t in wgets.iter().chain(&httpds) {
        assert_eq!(t["program"], true, "{t}");
    }
    for w in &wgets {
        assert_eq!(w["parent"], shell, "{w}");
        assert!(w["user_instructions"].as_u64().unwrap() > 0, "{w}");
    }
    eprintln!(
        "{} records, {} tasks, {} switches",
        summary.records,
        tasks.len(),
        meta["task_identity"]["switches"]
    );
    drop(work);
    assert_clean(tmp, &[]);
}
