/*
 * cachecolor_heap.c -- the guest-side half of heap objects by allocation site (issue 22).
 *
 * QEMU 7.2's plugin API cannot read guest registers or memory, so the plugin cannot see
 * malloc's size argument or its return value. This small shared object is preloaded into the
 * guest program only (qemu's `-E LD_PRELOAD=...`, which sets the guest's environment, so QEMU
 * itself is not preloaded); it wraps malloc, calloc, realloc and free and reports each call
 * with a system call whose number no kernel has (CC_HEAP_SYSCALL). QEMU answers it with ENOSYS
 * (the guest never sees the answer: errno is not touched, the call is made with inline
 * assembly), and the plugin's syscall callback sees its arguments in the calling thread's order:
 *     (op, pointer, size, caller, old pointer)
 * op: CC_HEAP_LOADED (once, at load: the shim is in), CC_HEAP_ALLOC (malloc, calloc: pointer,
 * size, caller), CC_HEAP_REALLOC (pointer, size, caller, old pointer), CC_HEAP_FREE (pointer,
 * caller). caller is __builtin_return_address(0): the return address in the code that called
 * the allocator (annotate resolves the call instruction just before it).
 *
 * The real allocator is glibc's, under the names it exports for exactly this
 * (__libc_malloc, ...), so no dlsym (which can itself allocate) is needed. Run natively, the
 * reports get ENOSYS from the kernel and nothing else happens.
 *
 * What it does not see: allocations that bypass these four entry points (posix_memalign,
 * aligned_alloc, memalign, valloc, mmap, a program's own allocator, a statically linked
 * program, where LD_PRELOAD does not apply); those bytes stay attributed to their mapping.
 *
 * Built by build.rs for the host (the guest must be the host's architecture; x86-64 and
 * aarch64 have the system call sequence below).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

/* Keep in step with qemu-plugin/cachecolor_trace.c. */
#define CC_HEAP_SYSCALL 0xCC00L
enum { CC_HEAP_LOADED = 0, CC_HEAP_ALLOC = 1, CC_HEAP_REALLOC = 2, CC_HEAP_FREE = 3 };

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

#define EXPORT __attribute__((visibility("default")))

static inline void report(long op, uintptr_t ptr, uintptr_t size, uintptr_t caller, uintptr_t old)
{
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = (long)caller;
    register long r8 __asm__("r8") = (long)old;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(CC_HEAP_SYSCALL), "D"(op), "S"(ptr), "d"(size), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    (void)ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = CC_HEAP_SYSCALL;
    register long x0 __asm__("x0") = op;
    register long x1 __asm__("x1") = (long)ptr;
    register long x2 __asm__("x2") = (long)size;
    register long x3 __asm__("x3") = (long)caller;
    register long x4 __asm__("x4") = (long)old;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
#else
#error "cachecolor_heap.c: no system call sequence for this architecture"
#endif
}

__attribute__((constructor)) static void cc_heap_loaded(void)
{
    report(CC_HEAP_LOADED, 0, 0, 0, 0);
}

EXPORT void *malloc(size_t size)
{
    void *p = __libc_malloc(size);
    if (p) {
        report(CC_HEAP_ALLOC, (uintptr_t)p, size, (uintptr_t)__builtin_return_address(0), 0);
    }
    return p;
}

EXPORT void *calloc(size_t n, size_t size)
{
    void *p = __libc_calloc(n, size);
    if (p) {
        report(CC_HEAP_ALLOC, (uintptr_t)p, n * size, (uintptr_t)__builtin_return_address(0), 0);
    }
    return p;
}

EXPORT void *realloc(void *old, size_t size)
{
    void *p = __libc_realloc(old, size);
    if (p || size == 0) {
        report(CC_HEAP_REALLOC, (uintptr_t)p, size, (uintptr_t)__builtin_return_address(0),
               (uintptr_t)old);
    }
    return p;
}

EXPORT void free(void *p)
{
    if (p) {
        report(CC_HEAP_FREE, (uintptr_t)p, 0, (uintptr_t)__builtin_return_address(0), 0);
    }
    __libc_free(p);
}
