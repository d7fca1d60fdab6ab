/*
 * cachecolor_trace.c -- QEMU user-mode TCG plugin that streams the guest program's executed
 * code and memory references as fixed-size binary records into a pipe, for cachecolor-capture
 * (crates/capture/src/qemu.rs) to turn into a native cachecolor trace.
 *
 * Built by crates/capture/build.rs into a shared object that the Rust crate embeds and writes to
 * a temporary file at run time; qemu loads it with
 *     qemu-x86_64 -cpu max -plugin /tmp/.../cachecolor-trace.so,out=FIFO,ifetch=on PROGRAM ARGS
 *
 * Arguments (QEMU passes each `-plugin` option after the file name as "key=value"):
 *   out=PATH      file or FIFO to write to (opened for writing at install, created if absent;
 *                 required unless fd= is given)
 *   fd=N          an already-open file descriptor to write to instead
 *   ifetch=on|off on (default): describe blocks so the reader can emit instruction fetches;
 *                 off: count instructions here and send only loads and stores
 *   bufrecs=N     records buffered per vCPU before a write (default 8192 = 128 KiB)
 *   syscalls=on|off  off (default): nothing about system calls is sent; on: every system call's
 *                 entry (number and its first three arguments) and return (its value) is sent
 *                 in the thread's stream (SYSCALL, SYSARG, SYSRET below)
 *   maps=PATH     memory map log (issue 22): the process's /proc/self/maps is read at install
 *                 (QEMU's own mappings, before the guest is loaded), at the first translated
 *                 block (the guest's program, loader and stack) and after every successful
 *                 mmap, munmap, mremap, mprotect, brk, shmat, shmdt and clone; each change is
 *                 appended to PATH as a diff against the previous read and marked in the
 *                 calling thread's stream by a MAPS record (below). Guest addresses are host
 *                 addresses here: user-mode QEMU for a 64-bit guest on a 64-bit host runs with
 *                 guest_base 0 (checked: the guest's emulated /proc/self/maps shows the host's
 *                 addresses), so the host's view of the process covers the guest's mappings.
 *                 The log (text, one event then its lines):
 *                     @ SEQ EVENT RET ARG      EVENT install, start or a system call's name;
 *                                              RET its return value, ARG (hex) clone's stack
 *                                              or start's first guest block address
 *                     -LINE / +LINE            a /proc/self/maps line gone / new
 *   heap=PATH     the guest runs with the heap shim PATH (cachecolor_heap.c) preloaded, which
 *                 reports each malloc/calloc/realloc/free as a system call of number
 *                 CC_HEAP_SYSCALL (no kernel has it; QEMU answers ENOSYS); its arguments are
 *                 sent in the thread's stream as HEAPARG records and a HEAP record (below),
 *                 whether or not the thread is recording yet (skip=: a block allocated before
 *                 the region is live in it), and the call is otherwise not sent (no SYSCALL).
 *                 The shim's own code is not traced: blocks translated in its mappings (found
 *                 in /proc/self/maps by PATH; needs maps=) get no callbacks, so its
 *                 instructions and stack references are left out, as if the program had
 *                 called the C library's allocator directly
 *   skip=N        fast-forward: send nothing about execution until the guest (all threads
 *                 together) has executed N instructions, counted per executed block (so the
 *                 region starts within one block of N; a block left early by a fault counts
 *                 whole); then each thread starts recording at its next block (default 0).
 *                 TB definitions and THREAD records are still sent while skipping (the reader
 *                 needs them); the skipped instructions appear nowhere in the stream.
 *   bbv=N         basic-block vectors (SimPoint: Sherwood et al., ASPLOS 2002, section 3): for
 *                 every N instructions the guest (all threads together) executes, append one
 *                 line to bbvout=PATH in SimPoint's .bb format, "T:ID:COUNT :ID:COUNT ...",
 *                 COUNT the instructions executed in basic block ID (1, 2, ... in translation
 *                 order; a block is its start address and length) during that interval. The
 *                 intervals count while skipping too (a region is chosen from them before it
 *                 is captured); a last interval shorter than N is not written. With several
 *                 threads the counts of blocks running while another thread closes an
 *                 interval may land in the next one.
 *   bbvout=PATH   where the vectors go (required with bbv=; created, truncated)
 *
 * Why blocks, not one record per instruction: an instruction-fetch record per executed
 * instruction would dominate the stream (~90% of records) and cost a callback each. Instead the
 * plugin describes each translation block (TB) once, when it is translated, and then reports
 * only "TB t started on vCPU v" plus the memory accesses, each tagged with the index of its
 * instruction in the TB. The reader expands that into exactly one ifetch per executed
 * instruction, in order, with the loads/stores after their instruction's fetch, and derives exact
 * instruction counts. (An instruction that faults mid-block -- a guest SIGSEGV handler, say --
 * still has the rest of its block's fetches reported, the one known inexactness.)
 *
 * QEMU 7.2 quirk handled here: when the translator gives up on a block's last instruction
 * because it would cross into the next page (the instruction then starts the next block), the
 * plugin's view of the block still lists it, truncated. Its callbacks never run, so a block whose
 * last instruction starts within 16 bytes of a page end is flagged (TBDEF size = 1) and that
 * instruction gets an exec callback that reports CONFIRM; the reader counts the instruction only
 * when confirmed.
 *
 * With ifetch=off the plugin does that bookkeeping itself (per vCPU: the current TB's counted
 * instructions, a cursor and the instructions not yet credited) and sends neither TB
 * definitions nor TBEXEC records: each LOAD/STORE carries in `idx` the number of instructions
 * the thread retired since its previous record (capped at 65535 per record, the rest carried
 * to the next), which halves the stream.
 *
 * Wire format (host byte order; the reader is always on the same host): 16-byte records
 *     struct cc_rec { uint64_t addr; uint32_t vcpu; uint8_t kind; uint8_t size; uint16_t idx; }
 *   LOAD (0) / STORE (1): addr = virtual address, size = bytes, idx = index of the instruction
 *                    in the TB the vCPU is executing (ifetch=off: instructions since the
 *                    thread's previous record)
 *   HELLO  (0xF0)    first record: addr = CC_MAGIC, vcpu = CC_FORMAT_VERSION,
 *                    size = bit 0 ifetch=on, bit 1 syscalls=on; idx = guest architecture
 *                    (0 unknown, 1 x86_64, 2 aarch64: the syscall numbering)
 *   THREAD (0xF1)    vCPU `vcpu` was (re)created: a new guest thread now uses that index
 *   TBDEF  (0xF2)    TB number `addr` has `vcpu` instructions, described by the `vcpu` INSN
 *                    records that follow it immediately; size = 1 if its last instruction
 *                    counts only when CONFIRMed
 *   INSN   (0xF3)    one instruction of the TB being defined: addr = vaddr, size = bytes
 *   TBEXEC (0xF4)    vCPU `vcpu` starts executing TB number `addr`
 *   CONFIRM (0xF5)   vCPU `vcpu` reached the (flagged) last instruction of TB number `addr`
 *   SYSCALL (0xF6)   vCPU `vcpu` enters system call number `addr`; the three SYSARG records of
 *                    the same vCPU that follow it (not necessarily adjacent in the stream:
 *                    other threads' chunks may come between) carry its arguments
 *   SYSARG (0xF7)    argument number `idx` (1..3) of the vCPU's pending system call = `addr`
 *   SYSRET (0xF8)    the vCPU's pending system call returned `addr` (an int64 as u64); a call
 *                    that never returns (exit, a successful execve) has no SYSRET
 *   MAPS   (0xF9)    vCPU `vcpu`'s system call just changed the memory map: the change is
 *                    event number `addr` of the maps= log (written before this record)
 *   HEAPARG (0xFA)   argument number `idx` (1 size, 2 caller, 3 old pointer) of the vCPU's next
 *                    HEAP record = `addr`
 *   HEAP   (0xFB)    vCPU `vcpu`'s allocator call (heap=on): addr = pointer, size = op (0 shim
 *                    loaded, 1 malloc/calloc, 2 realloc, 3 free), after its three HEAPARGs
 *   END    (0xFF)    last record, written at exit: addr = number of records before it (HELLO
 *                    included), so the reader can tell a complete stream from a cut one
 * TB numbers are dense (0, 1, 2, ...) in translation order; a TB's definition always precedes
 * the first record that uses it.
 *
 * Concurrency: in user mode every guest thread is a host thread with its own vCPU index. Each
 * vCPU appends to its own buffer (no locking on the hot path); a full buffer is written with one
 * write() under a global mutex, so records of different threads interleave in chunks of
 * `bufrecs` records, never inside a record. TB definitions go to a shared buffer (under the
 * mutex) that is written before any vCPU buffer, which keeps every definition ahead of its uses
 * even when a TB translated by one thread is run by another. Buffers are flushed when a thread
 * calls exit or execve, when its vCPU index is reused, and at process exit (atexit callback),
 * which also writes END. A forked child process (guest fork) stops tracing: it closes its copy of
 * the stream and drops the records it inherited, so the trace covers the initial process only.
 * A write error (the reader went away) disables tracing silently; the reader notices the
 * missing END.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu-plugin-api.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define CC_MAGIC 0x4543415254434343ULL /* "CCCTRACE" read as little-endian bytes */
#define CC_FORMAT_VERSION 3u

enum {
    CC_LOAD = 0,
    CC_STORE = 1,
    CC_HELLO = 0xF0,
    CC_THREAD = 0xF1,
    CC_TBDEF = 0xF2,
    CC_INSN = 0xF3,
    CC_TBEXEC = 0xF4,
    CC_CONFIRM = 0xF5,
    CC_SYSCALL = 0xF6,
    CC_SYSARG = 0xF7,
    CC_SYSRET = 0xF8,
    CC_MAPS = 0xF9,
    CC_HEAPARG = 0xFA,
    CC_HEAP = 0xFB,
    CC_END = 0xFF,
};

struct cc_rec {
    uint64_t addr;
    uint32_t vcpu;
    uint8_t kind;
    uint8_t size;
    uint16_t idx;
};
_Static_assert(sizeof(struct cc_rec) == 16, "cc_rec must be 16 bytes");

struct vbuf {
    struct cc_rec *recs;
    uint32_t n;
    uint32_t cap;
    /* ifetch=off bookkeeping of the vCPU owning this buffer */
    uint32_t tb_n;    /* instructions of the current TB that count (last one once confirmed) */
    uint32_t tb_full; /* all instructions of the current TB */
    uint32_t cursor;  /* instructions of the current TB already credited */
    uint64_t pending; /* instructions retired but not yet credited to a record */
};

/* vCPU indices below MAX_VCPUS get their own buffer; any others share one, under the lock. */
#define MAX_VCPUS 65536

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static struct vbuf *bufs[MAX_VCPUS];
static struct vbuf overflow_buf; /* under out_lock */
static struct vbuf def_buf;      /* TB definitions not yet written; under out_lock */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int out_fd = -1;
static volatile int active = 0; /* 0 once the stream is closed, broken or in a forked child */
static uint32_t buf_cap = 8192;
static int describe_blocks = 1; /* ifetch=on */
static int send_syscalls = 0;   /* syscalls=on */
static int heap_on = 0;         /* heap=PATH */
static char heap_shim[4096];    /* its path, as /proc/self/maps shows it */
static volatile uint64_t shim_lo = 0, shim_hi = 0; /* its mappings, once loaded */
/* Keep in step with qemu-plugin/cachecolor_heap.c: a number no kernel has. */
#define CC_HEAP_SYSCALL 0xCC00
static uint16_t guest_arch = 0; /* HELLO idx: 1 x86_64, 2 aarch64 */
static uint64_t written_records = 0; /* under out_lock */
static uint64_t next_tb = 0;         /* under out_lock */
static int64_t sys_exit = -1, sys_execve = -1, sys_execveat = -1;
/* skip=N: instructions still to fast-forward (all threads), whether the region has begun, and
 * per vCPU whether that thread has started recording (at a block start, so its first record is
 * a TBEXEC and never a load of a block the reader has not seen it enter). */
static int skipping = 0;
static int64_t skip_left = 0;
static volatile int skip_done = 0;
static uint8_t vcpu_on[MAX_VCPUS];

/* bbv=N: the basic blocks seen (by start address and length, in an open-addressing table and
 * by id), the instructions executed so far and the vector file. Blocks are allocated once and
 * never freed (a TB's callback holds its block); the table and the list only grow, under
 * bbv_lock; the hot path touches a block's counter and the total with atomics. */
struct bbv_block {
    uint64_t pc;
    uint32_t n;
    uint32_t id;
    uint64_t count; /* instructions in the current interval (atomic) */
};
static uint64_t bbv_interval = 0;
static FILE *bbv_file = NULL;
static pthread_mutex_t bbv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bbv_block **bbv_table = NULL;
static size_t bbv_cap = 0;
static struct bbv_block **bbv_list = NULL;
static size_t bbv_n = 0, bbv_list_cap = 0;
static uint64_t bbv_total = 0; /* instructions executed (atomic) */
static uint64_t bbv_written = 0; /* intervals written, under bbv_lock */

/* maps=PATH (issue 22): the memory-map log, the last /proc/self/maps read (its lines, sorted by
 * address as the kernel gives them), the next event number and the guest's system call numbers
 * that change the map. All under maps_lock. */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static int maps_fd = -1;
static char *maps_prev = NULL;
static size_t maps_prev_len = 0;
static uint64_t maps_seq = 0;
static volatile int maps_started = 0;
enum { M_MMAP, M_MUNMAP, M_MREMAP, M_MPROTECT, M_BRK, M_SHMAT, M_SHMDT, M_CLONE, M_N };
static const char *const maps_call_name[M_N] = {
    "mmap", "munmap", "mremap", "mprotect", "brk", "shmat", "shmdt", "clone",
};
static int64_t maps_call_num[M_N] = { -1, -1, -1, -1, -1, -1, -1, -1 };
static uint64_t clone_stack[MAX_VCPUS]; /* clone's child stack, from its entry to its return */

/* Should `vcpu`'s execution be recorded now? (Always, without skip=.) */
static inline int rec_on(unsigned int vcpu)
{
    return likely(!skipping) || vcpu >= MAX_VCPUS || vcpu_on[vcpu];
}

static void write_locked(const void *data, size_t len)
{
    const char *p = data;
    while (len > 0 && active) {
        ssize_t w = write(out_fd, p, len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            active = 0; /* reader gone: stop tracing, let the program run on */
            return;
        }
        p += w;
        len -= (size_t)w;
    }
}

static void write_buf_locked(struct vbuf *b)
{
    if (b->n > 0) {
        write_locked(b->recs, (size_t)b->n * sizeof(struct cc_rec));
        written_records += b->n;
        b->n = 0;
    }
}

/* Write a vCPU's buffer, preceded by any TB definitions it may refer to. */
static void flush_locked(struct vbuf *b)
{
    write_buf_locked(&def_buf);
    write_buf_locked(b);
}

static void flush(struct vbuf *b)
{
    pthread_mutex_lock(&out_lock);
    flush_locked(b);
    pthread_mutex_unlock(&out_lock);
}

static int alloc_buf(struct vbuf *b, uint32_t cap)
{
    b->recs = malloc((size_t)cap * sizeof(struct cc_rec));
    b->n = 0;
    b->cap = b->recs ? cap : 0;
    return b->recs ? 0 : -1;
}

static struct vbuf *new_buf(unsigned int vcpu)
{
    struct vbuf *b = calloc(1, sizeof(*b));
    if (!b || alloc_buf(b, buf_cap)) {
        free(b);
        fprintf(stderr, "cachecolor-trace: out of memory; tracing stopped\n");
        active = 0;
        return NULL;
    }
    __atomic_store_n(&bufs[vcpu], b, __ATOMIC_RELEASE);
    return b;
}

/* Append one record for `vcpu`. Only the thread that runs `vcpu` calls this for its index. */
static inline void emit(unsigned int vcpu, uint64_t addr, uint8_t kind, uint8_t size, uint16_t idx)
{
    struct vbuf *b;
    if (likely(vcpu < MAX_VCPUS)) {
        b = bufs[vcpu];
        if (unlikely(!b)) {
            b = new_buf(vcpu);
            if (!b) {
                return;
            }
        }
    } else {
        pthread_mutex_lock(&out_lock);
        b = &overflow_buf;
    }
    struct cc_rec *r = &b->recs[b->n];
    r->addr = addr;
    r->vcpu = vcpu;
    r->kind = kind;
    r->size = size;
    r->idx = idx;
    if (likely(vcpu < MAX_VCPUS)) {
        if (unlikely(++b->n == b->cap)) {
            flush(b);
        }
    } else {
        if (++b->n == b->cap) {
            flush_locked(b);
        }
        pthread_mutex_unlock(&out_lock);
    }
}

static void flush_vcpu(unsigned int vcpu)
{
    if (vcpu < MAX_VCPUS) {
        struct vbuf *b = __atomic_load_n(&bufs[vcpu], __ATOMIC_ACQUIRE);
        if (b) {
            flush(b);
        }
    }
}

/* ---- memory map (maps=PATH) ---- */

/* The whole of /proc/self/maps, NUL-terminated (malloc'd; NULL on failure). */
static char *read_self_maps(size_t *len)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

static void maps_write(const char *p, size_t len)
{
    while (len > 0 && maps_fd >= 0) {
        ssize_t w = write(maps_fd, p, len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            close(maps_fd);
            maps_fd = -1;
            return;
        }
        p += w;
        len -= (size_t)w;
    }
}

static void maps_line(char sign, const char *line, const char *end)
{
    maps_write(&sign, 1);
    maps_write(line, (size_t)(end - line));
    maps_write("\n", 1);
}

/* heap=PATH: the address range of the shim's mappings in the map `maps` (all lines naming it;
 * the loader maps it as one reservation), once it is there. */
static void heap_shim_find(const char *maps)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t plen = strlen(heap_shim);
    for (const char *l = maps; *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (n > plen && !memcmp(l + n - plen, heap_shim, plen) && l[n - plen - 1] == ' ') {
            char *dash = NULL;
            uint64_t a = strtoull(l, &dash, 16);
            uint64_t b = dash && *dash == '-' ? strtoull(dash + 1, NULL, 16) : 0;
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
        l = e ? e + 1 : l + n;
    }
    if (hi > lo) {
        shim_lo = lo;
        __atomic_store_n(&shim_hi, hi, __ATOMIC_RELEASE);
    }
}

/* Read the map again and log what changed since the previous read, as event `event`; returns
 * the event's number, or 0 when nothing changed (an event with no lines is logged only for brk
 * and clone, whose values matter by themselves). Under maps_lock. */
static uint64_t maps_log_locked(const char *event, int64_t ret, uint64_t arg, int always)
{
    size_t len = 0;
    char *now = read_self_maps(&len);
    if (!now || maps_fd < 0) {
        free(now);
        return 0;
    }
    if (heap_on && !shim_hi) {
        heap_shim_find(now);
    }
    const char *o = maps_prev ? maps_prev : "", *oe = o + maps_prev_len;
    const char *c = now, *ce = now + len;
    uint64_t seq = maps_seq;
    int header = 0;
    while (o < oe || c < ce) {
        const char *ol = o < oe ? memchr(o, '\n', (size_t)(oe - o)) : NULL;
        const char *cl = c < ce ? memchr(c, '\n', (size_t)(ce - c)) : NULL;
        ol = o < oe ? (ol ? ol : oe) : NULL;
        cl = c < ce ? (cl ? cl : ce) : NULL;
        int cmp;
        if (!ol) {
            cmp = 1;
        } else if (!cl) {
            cmp = -1;
        } else {
            unsigned long long os = strtoull(o, NULL, 16), cs = strtoull(c, NULL, 16);
            if (os != cs) {
                cmp = os < cs ? -1 : 1;
            } else if (ol - o == cl - c && !memcmp(o, c, (size_t)(ol - o))) {
                cmp = 0;
            } else {
                cmp = 2; /* same start, changed */
            }
        }
        if (cmp != 0 && !header) {
            char h[160];
            int hn = snprintf(h, sizeof h, "@ %llu %s %lld %llx\n", (unsigned long long)seq, event,
                              (long long)ret, (unsigned long long)arg);
            maps_write(h, (size_t)hn);
            header = 1;
        }
        if (cmp == 0) {
            o = ol + 1, c = cl + 1;
        } else if (cmp == -1) {
            maps_line('-', o, ol), o = ol + 1;
        } else if (cmp == 1) {
            maps_line('+', c, cl), c = cl + 1;
        } else {
            maps_line('-', o, ol), o = ol + 1;
            maps_line('+', c, cl), c = cl + 1;
        }
    }
    if (!header && always) {
        char h[160];
        int hn = snprintf(h, sizeof h, "@ %llu %s %lld %llx\n", (unsigned long long)seq, event,
                          (long long)ret, (unsigned long long)arg);
        maps_write(h, (size_t)hn);
        header = 1;
    }
    free(maps_prev);
    maps_prev = now;
    maps_prev_len = len;
    if (!header) {
        return 0;
    }
    maps_seq++;
    return seq;
}

/* The guest's first block is being translated: QEMU has loaded the program, its loader and its
 * stack. Log them (event 1, `start`, with the block's guest address, which the reader checks
 * lies in one of them: guest addresses are host addresses; the install-time read was event 0). */
static void maps_start(uint64_t first_pc)
{
    pthread_mutex_lock(&maps_lock);
    if (!maps_started) {
        maps_log_locked("start", 0, first_pc, 1);
        maps_started = 1;
    }
    pthread_mutex_unlock(&maps_lock);
}

/* ---- basic-block vectors (bbv=) ---- */

static uint64_t bbv_hash(uint64_t pc, uint32_t n)
{
    uint64_t h = (pc ^ ((uint64_t)n << 48)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The block starting at `pc` with `n` instructions (created on first sight); NULL when out of
 * memory (the block is then not counted). */
static struct bbv_block *bbv_block_for(uint64_t pc, uint32_t n)
{
    pthread_mutex_lock(&bbv_lock);
    if (2 * (bbv_n + 1) > bbv_cap) {
        size_t cap = bbv_cap ? 2 * bbv_cap : 1 << 14;
        struct bbv_block **t = calloc(cap, sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&bbv_lock);
            return NULL;
        }
        for (size_t i = 0; i < bbv_n; i++) {
            struct bbv_block *b = bbv_list[i];
            size_t j = bbv_hash(b->pc, b->n) & (cap - 1);
            while (t[j]) {
                j = (j + 1) & (cap - 1);
            }
            t[j] = b;
        }
        free(bbv_table);
        bbv_table = t;
        bbv_cap = cap;
    }
    size_t j = bbv_hash(pc, n) & (bbv_cap - 1);
    while (bbv_table[j] && !(bbv_table[j]->pc == pc && bbv_table[j]->n == n)) {
        j = (j + 1) & (bbv_cap - 1);
    }
    struct bbv_block *b = bbv_table[j];
    if (!b) {
        if (bbv_n == bbv_list_cap) {
            size_t cap = bbv_list_cap ? 2 * bbv_list_cap : 1 << 13;
            struct bbv_block **l = realloc(bbv_list, cap * sizeof *l);
            if (!l) {
                pthread_mutex_unlock(&bbv_lock);
                return NULL;
            }
            bbv_list = l;
            bbv_list_cap = cap;
        }
        b = calloc(1, sizeof *b);
        if (b) {
            b->pc = pc;
            b->n = n;
            b->id = (uint32_t)(bbv_n + 1);
            bbv_list[bbv_n++] = b;
            bbv_table[j] = b;
        }
    }
    pthread_mutex_unlock(&bbv_lock);
    return b;
}

/* Write the intervals the total has completed: the first gets the blocks' counts, any further
 * one (a block longer than the interval) is empty. */
static void bbv_write_upto(uint64_t intervals)
{
    pthread_mutex_lock(&bbv_lock);
    while (bbv_written < intervals && bbv_file) {
        fputc('T', bbv_file);
        for (size_t i = 0; i < bbv_n; i++) {
            uint64_t c = __atomic_exchange_n(&bbv_list[i]->count, 0, __ATOMIC_RELAXED);
            if (c) {
                fprintf(bbv_file, ":%u:%llu ", bbv_list[i]->id, (unsigned long long)c);
            }
        }
        fputc('\n', bbv_file);
        bbv_written++;
    }
    /* the program may be killed at any time once the region is captured */
    if (bbv_file) {
        fflush(bbv_file);
    }
    pthread_mutex_unlock(&bbv_lock);
}

static void on_tb_bbv(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    struct bbv_block *b = udata;
    __atomic_add_fetch(&b->count, b->n, __ATOMIC_RELAXED);
    uint64_t after = __atomic_add_fetch(&bbv_total, b->n, __ATOMIC_RELAXED);
    if (unlikely(after / bbv_interval != (after - b->n) / bbv_interval)) {
        bbv_write_upto(after / bbv_interval);
    }
}

/* ---- execution-time callbacks (hot) ---- */

/* skip=N only, registered before a block's other callbacks: count the block's `udata`
 * instructions towards the fast-forward, and switch this vCPU on once the region has begun. */
static void on_tb_skip(unsigned int vcpu, void *udata)
{
    if (vcpu >= MAX_VCPUS || vcpu_on[vcpu]) {
        return;
    }
    if (!skip_done) {
        int64_t n = (int64_t)(uintptr_t)udata;
        if (__atomic_sub_fetch(&skip_left, n, __ATOMIC_RELAXED) > 0) {
            return;
        }
        skip_done = 1;
    }
    vcpu_on[vcpu] = 1;
}

static void on_tb_exec(unsigned int vcpu, void *udata)
{
    if (likely(active) && rec_on(vcpu)) {
        emit(vcpu, (uint64_t)(uintptr_t)udata, CC_TBEXEC, 0, 0);
    }
}

static void on_confirm(unsigned int vcpu, void *udata)
{
    if (likely(active) && rec_on(vcpu)) {
        emit(vcpu, (uint64_t)(uintptr_t)udata, CC_CONFIRM, 0, 0);
    }
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    if (likely(active) && rec_on(vcpu)) {
        uint8_t kind = qemu_plugin_mem_is_store(info) ? CC_STORE : CC_LOAD;
        uint8_t size = (uint8_t)(1u << qemu_plugin_mem_size_shift(info));
        emit(vcpu, vaddr, kind, size, (uint16_t)(uintptr_t)udata);
    }
}

/* ifetch=off: the buffer holding `vcpu`'s bookkeeping (NULL for the rare shared one). */
static inline struct vbuf *count_buf(unsigned int vcpu)
{
    if (unlikely(vcpu >= MAX_VCPUS)) {
        return NULL;
    }
    struct vbuf *b = bufs[vcpu];
    return likely(b != NULL) ? b : new_buf(vcpu);
}

/* ifetch=off: udata = (instructions << 1) | last-needs-confirmation. */
static void on_tb_exec_count(unsigned int vcpu, void *udata)
{
    struct vbuf *b;
    if (likely(active) && rec_on(vcpu) && likely((b = count_buf(vcpu)) != NULL)) {
        uintptr_t u = (uintptr_t)udata;
        if (b->cursor < b->tb_n) {
            b->pending += b->tb_n - b->cursor;
        }
        b->tb_full = (uint32_t)(u >> 1);
        b->tb_n = b->tb_full - (uint32_t)(u & 1);
        b->cursor = 0;
    }
}

static void on_confirm_count(unsigned int vcpu, void *udata)
{
    struct vbuf *b;
    (void)udata;
    if (likely(active) && rec_on(vcpu) && likely((b = count_buf(vcpu)) != NULL)) {
        b->tb_n = b->tb_full;
    }
}

static void on_mem_count(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
                         void *udata)
{
    if (likely(active) && rec_on(vcpu)) {
        uint8_t kind = qemu_plugin_mem_is_store(info) ? CC_STORE : CC_LOAD;
        uint8_t size = (uint8_t)(1u << qemu_plugin_mem_size_shift(info));
        uint16_t icount = 0;
        struct vbuf *b = count_buf(vcpu);
        if (likely(b != NULL)) {
            uint32_t upto = (uint32_t)(uintptr_t)udata + 1;
            if (upto > b->tb_n) {
                upto = b->tb_n;
            }
            if (upto > b->cursor) {
                b->pending += upto - b->cursor;
                b->cursor = upto;
            }
            icount = b->pending > 0xFFFF ? 0xFFFF : (uint16_t)b->pending;
            b->pending -= icount;
        }
        emit(vcpu, vaddr, kind, size, icount);
    }
}

/* ---- translation-time and lifecycle callbacks ---- */

static int last_needs_confirmation(size_t n, uint64_t last_vaddr)
{
    /* Could the last instruction be one the translator abandoned at a page end? */
    return n >= 2 && (last_vaddr >> 12) != ((last_vaddr + 15) >> 12);
}

static void on_tb_trans_count(struct qemu_plugin_tb *tb, size_t n)
{
    struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
    int confirm = last_needs_confirmation(n, qemu_plugin_insn_vaddr(last));
    if (skipping) {
        /* A flagged last instruction usually does not run here: count it out. */
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_skip, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)(n - (size_t)confirm));
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec_count, QEMU_PLUGIN_CB_NO_REGS,
                                         (void *)(uintptr_t)((n << 1) | (size_t)confirm));
    if (confirm) {
        qemu_plugin_register_vcpu_insn_exec_cb(last, on_confirm_count, QEMU_PLUGIN_CB_NO_REGS,
                                               NULL);
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem_count, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, (void *)(uintptr_t)i);
    }
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0 || n > 0xFFFF || !active) {
        return;
    }
    if (unlikely(!maps_started) && maps_fd >= 0) {
        maps_start(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0)));
    }
    if (heap_on) {
        /* the heap shim's own code: not the program's, left out (heap=) */
        uint64_t pc = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0));
        uint64_t hi = __atomic_load_n(&shim_hi, __ATOMIC_ACQUIRE);
        if (pc < hi && pc >= shim_lo) {
            return;
        }
    }
    if (bbv_interval) {
        struct bbv_block *b = bbv_block_for(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, 0)),
                                            (uint32_t)n);
        if (b) {
            qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_bbv, QEMU_PLUGIN_CB_NO_REGS, b);
        }
    }
    if (!describe_blocks) {
        on_tb_trans_count(tb, n);
        return;
    }
    pthread_mutex_lock(&out_lock);
    uint64_t number = next_tb++;
    if (def_buf.n + n + 1 > def_buf.cap) {
        write_buf_locked(&def_buf);
        if (n + 1 > def_buf.cap) {
            free(def_buf.recs);
            if (alloc_buf(&def_buf, (uint32_t)(n + 1))) {
                active = 0;
                pthread_mutex_unlock(&out_lock);
                return;
            }
        }
    }
    struct cc_rec *r = &def_buf.recs[def_buf.n];
    struct cc_rec *def = r++;
    uint64_t last_vaddr = 0;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        last_vaddr = qemu_plugin_insn_vaddr(insn);
        *r++ = (struct cc_rec){
            .addr = last_vaddr,
            .kind = CC_INSN,
            .size = (uint8_t)(size > 255 ? 255 : size),
        };
    }
    int confirm = last_needs_confirmation(n, last_vaddr);
    *def = (struct cc_rec){
        .addr = number, .vcpu = (uint32_t)n, .kind = CC_TBDEF, .size = (uint8_t)confirm,
    };
    def_buf.n += (uint32_t)(n + 1);
    pthread_mutex_unlock(&out_lock);

    if (skipping) {
        /* A flagged last instruction usually does not run here: count it out. */
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_skip, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)(n - (size_t)confirm));
    }
    if (confirm) {
        qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, n - 1), on_confirm,
                                               QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)number);
    }

    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                         (void *)(uintptr_t)number);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(uintptr_t)i);
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (!active) {
        return;
    }
    /* A reused index: whatever the previous thread left belongs before the new thread's
     * records. (In user mode this runs in the parent thread, before the new one starts.) */
    flush_vcpu(vcpu);
    if (vcpu < MAX_VCPUS && bufs[vcpu]) {
        struct vbuf *b = bufs[vcpu];
        b->tb_n = b->tb_full = b->cursor = 0;
        b->pending = 0;
    }
    emit(vcpu, 0, CC_THREAD, 0, 0);
}

static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (active) {
        flush_vcpu(vcpu);
    }
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id, (void)a6, (void)a7, (void)a8;
    if (heap_on && num == CC_HEAP_SYSCALL) {
        /* the heap shim's report: (op, pointer, size, caller, old pointer) */
        if (likely(active)) {
            emit(vcpu, a3, CC_HEAPARG, 0, 1);
            emit(vcpu, a4, CC_HEAPARG, 0, 2);
            emit(vcpu, a5, CC_HEAPARG, 0, 3);
            emit(vcpu, a2, CC_HEAP, (uint8_t)a1, 0);
        }
        return;
    }
    if (maps_fd >= 0 && num == maps_call_num[M_CLONE] && vcpu < MAX_VCPUS) {
        clone_stack[vcpu] = a2;
    }
    if (send_syscalls && likely(active) && rec_on(vcpu)) {
        emit(vcpu, (uint64_t)num, CC_SYSCALL, 0, 0);
        emit(vcpu, a1, CC_SYSARG, 0, 1);
        emit(vcpu, a2, CC_SYSARG, 0, 2);
        emit(vcpu, a3, CC_SYSARG, 0, 3);
    }
    /* A thread about to exit, or the process about to replace its image: write out what this
     * thread has so nothing is lost (execve closes the stream: O_CLOEXEC). */
    if (active && (num == sys_exit || num == sys_execve || num == sys_execveat)) {
        flush_vcpu(vcpu);
    }
}

static void on_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, int64_t ret)
{
    (void)id;
    if (heap_on && num == CC_HEAP_SYSCALL) {
        return;
    }
    if (send_syscalls && likely(active) && rec_on(vcpu)) {
        emit(vcpu, (uint64_t)ret, CC_SYSRET, 0, 0);
    }
    if (maps_fd >= 0 && likely(active) && (ret >= 0 || ret < -4095)) {
        for (int m = 0; m < M_N; m++) {
            if (num == maps_call_num[m]) {
                uint64_t arg = m == M_CLONE && vcpu < MAX_VCPUS ? clone_stack[vcpu] : 0;
                pthread_mutex_lock(&maps_lock);
                uint64_t seq = maps_log_locked(maps_call_name[m], ret, arg,
                                               m == M_BRK || m == M_CLONE);
                pthread_mutex_unlock(&maps_lock);
                if (seq) {
                    emit(vcpu, seq, CC_MAPS, 0, 0);
                }
                break;
            }
        }
    }
}

static void on_exit_all(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    pthread_mutex_lock(&out_lock);
    if (active) {
        write_buf_locked(&def_buf);
        for (unsigned int v = 0; v < MAX_VCPUS; v++) {
            struct vbuf *b = __atomic_load_n(&bufs[v], __ATOMIC_ACQUIRE);
            if (b) {
                write_buf_locked(b);
            }
        }
        write_buf_locked(&overflow_buf);
        struct cc_rec end = { .addr = written_records, .vcpu = 0, .kind = CC_END };
        write_locked(&end, sizeof(end));
        written_records++;
        active = 0;
    }
    if (out_fd >= 0) {
        close(out_fd);
        out_fd = -1;
    }
    pthread_mutex_unlock(&out_lock);
    pthread_mutex_lock(&bbv_lock);
    if (bbv_file) {
        fclose(bbv_file); /* the last, partial interval is not written */
        bbv_file = NULL;
    }
    pthread_mutex_unlock(&bbv_lock);
}

/* ---- guest fork: only the initial process is traced ---- */

static void atfork_prepare(void)
{
    pthread_mutex_lock(&bbv_lock);
    pthread_mutex_lock(&out_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&out_lock);
    pthread_mutex_unlock(&bbv_lock);
}

static void atfork_child(void)
{
    active = 0;
    bbv_file = NULL; /* the parent's: a forked child writes no vectors */
    if (maps_fd >= 0) {
        close(maps_fd);
        maps_fd = -1;
    }
    if (out_fd >= 0) {
        close(out_fd);
        out_fd = -1;
    }
    pthread_mutex_unlock(&out_lock);
    pthread_mutex_unlock(&bbv_lock);
}

/* ---- install ---- */

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    const char *out_path = NULL;
    int fd = -1;

    if (info->system_emulation) {
        fprintf(stderr, "cachecolor-trace: only QEMU user mode (qemu-<arch>) is supported\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        /* QEMU < 6.1 style "arg=key=value" is accepted too. */
        if (!strncmp(a, "arg=", 4)) {
            a += 4;
        }
        const char *eq = strchr(a, '=');
        if (!eq) {
            fprintf(stderr, "cachecolor-trace: bad argument '%s' (expected key=value)\n", a);
            return -1;
        }
        size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        if (klen == 3 && !strncmp(a, "out", 3)) {
            out_path = v;
        } else if (klen == 2 && !strncmp(a, "fd", 2)) {
            fd = atoi(v);
        } else if (klen == 6 && !strncmp(a, "ifetch", 6)) {
            if (!strcmp(v, "on")) {
                describe_blocks = 1;
            } else if (!strcmp(v, "off")) {
                describe_blocks = 0;
            } else {
                fprintf(stderr, "cachecolor-trace: ifetch=%s: expected on or off\n", v);
                return -1;
            }
        } else if (klen == 8 && !strncmp(a, "syscalls", 8)) {
            if (!strcmp(v, "on")) {
                send_syscalls = 1;
            } else if (!strcmp(v, "off")) {
                send_syscalls = 0;
            } else {
                fprintf(stderr, "cachecolor-trace: syscalls=%s: expected on or off\n", v);
                return -1;
            }
        } else if (klen == 4 && !strncmp(a, "heap", 4)) {
            if (!*v || strlen(v) >= sizeof heap_shim) {
                fprintf(stderr, "cachecolor-trace: heap=%s: expected the shim's path\n", v);
                return -1;
            }
            strcpy(heap_shim, v);
            heap_on = 1;
        } else if (klen == 7 && !strncmp(a, "bufrecs", 7)) {
            long n = atol(v);
            if (n < 1 || n > (1L << 24)) {
                fprintf(stderr, "cachecolor-trace: bufrecs=%s: expected 1 .. 16777216\n", v);
                return -1;
            }
            buf_cap = (uint32_t)n;
        } else if (klen == 4 && !strncmp(a, "maps", 4)) {
            maps_fd = open(v, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0600);
            if (maps_fd < 0) {
                fprintf(stderr, "cachecolor-trace: cannot open %s: %s\n", v, strerror(errno));
                return -1;
            }
        } else if (klen == 4 && !strncmp(a, "skip", 4)) {
            char *end = NULL;
            errno = 0;
            long long n = strtoll(v, &end, 10);
            if (errno || end == v || *end || n < 0) {
                fprintf(stderr, "cachecolor-trace: skip=%s: expected a number of instructions >= 0\n", v);
                return -1;
            }
            skip_left = (int64_t)n;
            skipping = n > 0;
        } else if (klen == 3 && !strncmp(a, "bbv", 3)) {
            char *end = NULL;
            errno = 0;
            long long n = strtoll(v, &end, 10);
            if (errno || end == v || *end || n < 1) {
                fprintf(stderr, "cachecolor-trace: bbv=%s: expected an interval of instructions >= 1\n", v);
                return -1;
            }
            bbv_interval = (uint64_t)n;
        } else if (klen == 6 && !strncmp(a, "bbvout", 6)) {
            bbv_file = fopen(v, "we");
            if (!bbv_file) {
                fprintf(stderr, "cachecolor-trace: cannot open %s: %s\n", v, strerror(errno));
                return -1;
            }
        } else {
            fprintf(stderr, "cachecolor-trace: unknown argument '%s'\n", a);
            return -1;
        }
    }
    if (out_path) {
        fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "cachecolor-trace: cannot open %s: %s\n", out_path, strerror(errno));
            return -1;
        }
    } else if (fd >= 0) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    } else {
        fprintf(stderr, "cachecolor-trace: missing out=PATH (or fd=N) argument\n");
        return -1;
    }
    out_fd = fd;
    if (!bbv_interval != !bbv_file) {
        fprintf(stderr, "cachecolor-trace: bbv=N and bbvout=PATH go together\n");
        return -1;
    }

    if (alloc_buf(&overflow_buf, buf_cap) || alloc_buf(&def_buf, 1 << 16)) {
        fprintf(stderr, "cachecolor-trace: out of memory\n");
        return -1;
    }

    /* Guest syscall numbers at which this thread's buffer must be written out. */
    const char *t = info->target_name ? info->target_name : "";
    if (!strcmp(t, "x86_64")) {
        sys_exit = 60, sys_execve = 59, sys_execveat = 322;
        guest_arch = 1;
        static const int64_t x86_64_maps[M_N] = { 9, 11, 25, 10, 12, 30, 67, 56 };
        memcpy(maps_call_num, x86_64_maps, sizeof x86_64_maps);
    } else if (!strcmp(t, "aarch64") || !strcmp(t, "riscv64") || !strcmp(t, "loongarch64")) {
        sys_exit = 93, sys_execve = 221, sys_execveat = 281;
        guest_arch = !strcmp(t, "aarch64") ? 2 : 0;
        /* the generic (asm-generic/unistd.h) numbering these three share */
        static const int64_t generic_maps[M_N] = { 222, 215, 216, 226, 214, 196, 197, 220 };
        memcpy(maps_call_num, generic_maps, sizeof generic_maps);
    } else if (!strcmp(t, "i386")) {
        sys_exit = 1, sys_execve = 11, sys_execveat = 358;
    }

    active = 1;
    struct cc_rec hello = {
        .addr = CC_MAGIC, .vcpu = CC_FORMAT_VERSION, .kind = CC_HELLO,
        .size = (uint8_t)(describe_blocks | (send_syscalls << 1)), .idx = guest_arch,
    };
    pthread_mutex_lock(&out_lock);
    write_locked(&hello, sizeof(hello));
    written_records++;
    pthread_mutex_unlock(&out_lock);

    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    if (heap_on && maps_fd < 0) {
        fprintf(stderr, "cachecolor-trace: heap= needs maps= (the shim is found by the map)\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    if (maps_fd >= 0) {
        /* event 0: QEMU's own mappings, before the guest is loaded */
        pthread_mutex_lock(&maps_lock);
        maps_log_locked("install", 0, 0, 1);
        pthread_mutex_unlock(&maps_lock);
    }
    if (send_syscalls || maps_fd >= 0) {
        qemu_plugin_register_vcpu_syscall_ret_cb(id, on_syscall_ret);
    }
    qemu_plugin_register_atexit_cb(id, on_exit_all, NULL);
    return 0;
}
