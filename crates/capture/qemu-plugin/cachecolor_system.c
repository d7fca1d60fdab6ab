/*
 * cachecolor_system.c -- QEMU *system-mode* TCG plugin for full-system capture
 * (`cachecolor trace capture --system`, crates/capture/src/system.rs): streams every instruction
 * and memory reference the guest's one vCPU executes -- kernel and user code alike -- between
 * two magic instructions that the guest's launcher executes, in the same 16-byte record stream
 * as the user-mode plugin (cachecolor_trace.c, whose header comment specifies the records), so
 * the same decoder (src/stream.rs) turns it into per-instruction fetches and exact instruction
 * counts.
 *
 * Built by crates/capture/build.rs into `cachecolor_system.so`, embedded in the crate, written
 * to a private temporary directory at run time and loaded with
 *     qemu-system-x86_64 -smp 1 ... -plugin /tmp/.../cachecolor-system.so,out=FIFO
 *
 * The region: boot and shutdown are not traced. The guest's launcher (guest/cc_run.c) executes
 * `xchg %bx,%bx` (66 87 db, the Bochs "magic breakpoint", an architectural no-op compilers never
 * emit) in user mode right before it execs the program, and `xchg %cx,%cx` (66 87 c9) in user
 * mode once the program has exited. Only these encodings at user addresses (below
 * 0x800000000000) count. Start sends a TBEXEC for the block holding the magic instruction (so the
 * few instructions of that block before it are in the trace: at most one block); stop writes
 * the END record, flushes and closes the stream, so the reader finishes while the guest shuts
 * down. Outside the region the per-block and per-access callbacks still run (QEMU 7.2's API
 * cannot remove them) but emit nothing; block definitions (TBDEF/INSN) are always sent, since a
 * block translated during boot may run inside the region.
 *
 * Privilege: QEMU 7.2's plugin API exposes no CPU mode. On x86-64 Linux the kernel runs only
 * from the upper half of the address space (user code cannot execute there), so the reader
 * derives privilege from the fetch address (src/system.rs); this plugin sends plain virtual
 * addresses.
 *
 * Threads: the guest has one vCPU (-smp 1) and TCG runs it on one host thread, so one buffer
 * in stream order suffices and no lock is taken; records carry vCPU 0, and the reader gives
 * each its guest task (src/tasks.rs).
 *
 * Arguments: out=PATH (required), bufrecs=N (records per write, default 8192).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "qemu-plugin-api.h"

/* Declared here rather than in qemu-plugin-api.h (shared with the user-mode plugin): QEMU 7.2's
 * `const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn)`. */
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define CC_MAGIC 0x4543415254434343ULL
#define CC_FORMAT_VERSION 3u
#define USER_TOP 0x0000800000000000ULL

enum {
    CC_LOAD = 0,
    CC_STORE = 1,
    CC_HELLO = 0xF0,
    CC_TBDEF = 0xF2,
    CC_INSN = 0xF3,
    CC_TBEXEC = 0xF4,
    CC_CONFIRM = 0xF5,
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

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static struct cc_rec *buf;
static uint32_t buf_n, buf_cap = 8192;
static int out_fd = -1;
static int open_stream = 0;        /* 0 once stopped, closed or broken */
static volatile int recording = 0; /* inside the region */
static int started = 0;
static uint64_t written = 0;
static uint64_t next_tb = 0;

static void write_all(const void *data, size_t len)
{
    const char *p = data;
    while (len > 0 && open_stream) {
        ssize_t w = write(out_fd, p, len);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            open_stream = 0; /* reader gone */
            recording = 0;
            return;
        }
        p += w;
        len -= (size_t)w;
    }
}

static void flush(void)
{
    if (buf_n > 0) {
        write_all(buf, (size_t)buf_n * sizeof(struct cc_rec));
        written += buf_n;
        buf_n = 0;
    }
}

static inline void emit(uint64_t addr, uint8_t kind, uint8_t size, uint16_t idx, uint32_t n)
{
    buf[buf_n++] = (struct cc_rec){ .addr = addr, .vcpu = n, .kind = kind, .size = size,
                                    .idx = idx };
    if (unlikely(buf_n >= buf_cap)) {
        flush();
    }
}

static void finish(void)
{
    if (open_stream) {
        flush();
        struct cc_rec end = { .addr = written, .kind = CC_END };
        write_all(&end, sizeof(end));
        written++;
    }
    open_stream = 0;
    recording = 0;
    if (out_fd >= 0) {
        close(out_fd);
        out_fd = -1;
    }
}

static void on_tb_exec(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    if (unlikely(recording)) {
        emit((uint64_t)(uintptr_t)udata, CC_TBEXEC, 0, 0, 0);
    }
}

static void on_confirm(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    if (unlikely(recording)) {
        emit((uint64_t)(uintptr_t)udata, CC_CONFIRM, 0, 0, 0);
    }
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)vcpu;
    if (unlikely(recording)) {
        uint8_t kind = qemu_plugin_mem_is_store(info) ? CC_STORE : CC_LOAD;
        uint8_t size = (uint8_t)(1u << qemu_plugin_mem_size_shift(info));
        emit(vaddr, kind, size, (uint16_t)(uintptr_t)udata, 0);
    }
}

static void on_start(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    if (open_stream && !started) {
        started = 1;
        recording = 1;
        /* The block's own TBEXEC ran before this callback, while not recording. */
        emit((uint64_t)(uintptr_t)udata, CC_TBEXEC, 0, 0, 0);
    }
}

static void on_stop(unsigned int vcpu, void *udata)
{
    (void)vcpu, (void)udata;
    if (recording) {
        finish();
    }
}

static int last_needs_confirmation(size_t n, uint64_t last_vaddr)
{
    return n >= 2 && (last_vaddr >> 12) != ((last_vaddr + 15) >> 12);
}

static int is_magic(const struct qemu_plugin_insn *insn, uint8_t modrm)
{
    if (qemu_plugin_insn_size(insn) != 3 || qemu_plugin_insn_vaddr(insn) >= USER_TOP) {
        return 0;
    }
    const uint8_t *b = qemu_plugin_insn_data(insn);
    return b && b[0] == 0x66 && b[1] == 0x87 && b[2] == modrm;
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0 || n > 0xFFFF || !open_stream) {
        return;
    }
    uint64_t number = next_tb++;
    /* TBDEF goes first; its INSN records follow without any other record in between, so the
     * buffer is flushed first if they would not fit. */
    if (buf_n + n + 1 > buf_cap) {
        flush();
    }
    uint64_t last_vaddr = 0;
    uint32_t def_at = buf_n++;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        size_t size = qemu_plugin_insn_size(insn);
        last_vaddr = qemu_plugin_insn_vaddr(insn);
        buf[buf_n++] = (struct cc_rec){
            .addr = last_vaddr, .kind = CC_INSN, .size = (uint8_t)(size > 255 ? 255 : size),
        };
    }
    int confirm = last_needs_confirmation(n, last_vaddr);
    buf[def_at] = (struct cc_rec){
        .addr = number, .vcpu = (uint32_t)n, .kind = CC_TBDEF, .size = (uint8_t)confirm,
    };
    if (buf_n >= buf_cap) {
        flush();
    }

    void *tbno = (void *)(uintptr_t)number;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS, tbno);
    if (confirm) {
        qemu_plugin_register_vcpu_insn_exec_cb(qemu_plugin_tb_get_insn(tb, n - 1), on_confirm,
                                               QEMU_PLUGIN_CB_NO_REGS, tbno);
    }
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (is_magic(insn, 0xdb)) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_start, QEMU_PLUGIN_CB_NO_REGS, tbno);
        } else if (is_magic(insn, 0xc9)) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_stop, QEMU_PLUGIN_CB_NO_REGS, tbno);
        }
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(uintptr_t)i);
    }
}

static void on_exit_all(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    finish();
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    const char *out_path = NULL;
    if (!info->system_emulation) {
        fprintf(stderr, "cachecolor-system: only QEMU system mode is supported\n");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strncmp(a, "out=", 4)) {
            out_path = a + 4;
        } else if (!strncmp(a, "bufrecs=", 8)) {
            long n = atol(a + 8);
            if (n < 1024 || n > (1L << 24)) {
                fprintf(stderr, "cachecolor-system: bufrecs=%s: expected 1024 .. 16777216\n",
                        a + 8);
                return -1;
            }
            buf_cap = (uint32_t)n;
        } else {
            fprintf(stderr, "cachecolor-system: unknown argument '%s'\n", a);
            return -1;
        }
    }
    if (!out_path) {
        fprintf(stderr, "cachecolor-system: missing out=PATH argument\n");
        return -1;
    }
    buf = malloc((size_t)(buf_cap + 0x10001) * sizeof(struct cc_rec));
    if (!buf) {
        fprintf(stderr, "cachecolor-system: out of memory\n");
        return -1;
    }
    out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
        fprintf(stderr, "cachecolor-system: cannot open %s: %s\n", out_path, strerror(errno));
        return -1;
    }
    open_stream = 1;
    emit(CC_MAGIC, CC_HELLO, 1 /* ifetch=on */, 1 /* x86_64 */, CC_FORMAT_VERSION);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
    qemu_plugin_register_atexit_cb(id, on_exit_all, NULL);
    return 0;
}
