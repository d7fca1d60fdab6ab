/*
 * qemu-plugin-api.h -- the part of QEMU's TCG plugin API (plugin API version 1, as in
 * QEMU 6.0 .. 8.2, checked against QEMU 7.2's include/qemu/qemu-plugin.h and the symbols
 * exported by Debian's qemu-x86_64 7.2) that cachecolor's trace plugin uses.
 *
 * Why this file exists: Debian's qemu-user 7.2 supports `-plugin` but ships neither plugins nor
 * the header, so the declarations are written here, by hand, from the documented ABI. Every
 * declaration must keep QEMU 7.2's exact types, argument order and enum values, because the
 * plugin is dlopen()ed by the qemu-<arch> executable and calls into it through these symbols
 * (exported by the executable, resolved at load time: the plugin links against nothing). A few closely related calls the plugin does not
 * use today (per-instruction exec callbacks, qemu_plugin_outs) are declared for convenience.
 *
 * Facts this relies on (all as in QEMU 7.2):
 *   - a plugin exports `int qemu_plugin_version` (QEMU_PLUGIN_VERSION = 1) and
 *     `int qemu_plugin_install(qemu_plugin_id_t, const qemu_info_t *, int argc, char **argv)`;
 *   - enum qemu_plugin_cb_flags: NO_REGS = 0, R_REGS = 1, RW_REGS = 2;
 *   - enum qemu_plugin_mem_rw:   R = 1, W = 2, RW = 3;
 *   - qemu_plugin_meminfo_t is a uint32_t decoded only through qemu_plugin_mem_size_shift() and
 *     qemu_plugin_mem_is_store() (its bit layout is private to QEMU and changed across versions);
 *   - in user mode, the vcpu_index passed to callbacks identifies the guest thread.
 *
 * This is a clean-room declaration list (no QEMU code is copied); QEMU itself is GPL-2.0-or-later
 * and the plugin API is its documented external interface.
 */
#ifndef CACHECOLOR_QEMU_PLUGIN_API_H
#define CACHECOLOR_QEMU_PLUGIN_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* The plugin API version this plugin is built against (QEMU 7.2 accepts min 0 .. cur 1). */
#define QEMU_PLUGIN_VERSION 1

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;

typedef struct qemu_info_t {
    const char *target_name; /* guest architecture, e.g. "x86_64", "aarch64" */
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;   /* opaque: a translation block being translated */
struct qemu_plugin_insn; /* opaque: one guest instruction of such a block */

enum qemu_plugin_cb_flags {
    QEMU_PLUGIN_CB_NO_REGS = 0,
    QEMU_PLUGIN_CB_R_REGS = 1,
    QEMU_PLUGIN_CB_RW_REGS = 2,
};

enum qemu_plugin_mem_rw {
    QEMU_PLUGIN_MEM_R = 1,
    QEMU_PLUGIN_MEM_W = 2,
    QEMU_PLUGIN_MEM_RW = 3,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_simple_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
                                          uint64_t vaddr, void *userdata);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index,
                                              int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
                                              uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7,
                                              uint64_t a8);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_idx,
                                                  int64_t num, int64_t ret);

/* Exported by the plugin. */
extern QEMU_PLUGIN_EXPORT int qemu_plugin_version;
QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv);

/* Provided by QEMU. */
void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_exit_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
                                            qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t id,
                                              qemu_plugin_vcpu_syscall_ret_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);

/* Prints only when qemu runs with `-d plugin`. */
void qemu_plugin_outs(const char *string);

#endif /* CACHECOLOR_QEMU_PLUGIN_API_H */
