/*
 * The programs `cachecolor validate` runs natively and captures (docs/validation.md): small
 * kernels with generated inputs, each chosen by its first argument, sized by the others.
 *
 *   cc -O2 -o kernels kernels.c
 *   ./kernels KERNEL BYTES STEPS [4k|huge]
 *
 * KERNEL is one of
 *   chase      Cachetest's pointer chase (thesis 004 section 4.2.1, 4.2.3): one 64-byte line
 *              per element, a uniformly random cyclic permutation (Sattolo), STEPS dependent loads
 *   lookup     STEPS independent random 8-byte reads of a BYTES table (xorshift index in registers)
 *   stream     STEPS passes summing a BYTES array of doubles in address order
 *   lines      STEPS passes reading one 8-byte word of every 64-byte line of BYTES, in order
 *   copy       STEPS passes of b[i] = a[i] + 1 over two BYTES/2 arrays
 *   matmul     C = A B on n x n doubles (3 n^2 * 8 = BYTES), STEPS repetitions, i-k-j order
 *   transpose  B = A^T of an n x n float matrix (2 n^2 * 4 = BYTES), naive, STEPS times
 *   sort       qsort of BYTES / 4 random 32-bit keys (STEPS: rounds, each on fresh keys)
 *   sieve      Eratosthenes' sieve over BYTES flags (one byte each), STEPS times
 *   bsearch    STEPS binary searches of random keys in a sorted BYTES array of 32-bit keys
 *   compute    STEPS rounds of an integer hash mix: no memory traffic beyond the stack
 *
 * The buffers come from one mmap with MADV_NOHUGEPAGE (4 KiB pages, as the simulator's default
 * placement) or, with `huge`, 2 MiB aligned with MADV_HUGEPAGE (transparent huge pages in
 * "madvise" mode); each kernel's initialisation touches its pages. Every kernel prints a checksum so the compiler keeps its work.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static int huge = 0;

static void *buffer(size_t bytes) {
    size_t align = (size_t)2 << 20;
    size_t len = (bytes + align - 1) / align * align;
    char *raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    /* Not cleared with memset: the kernels' own initialisation touches every page, and a
       `rep stosb` memset is one record per byte under QEMU (a trace of the clearing, not the
       kernel). */
    (void)bytes;
    return p;
}

static uint64_t rng = 88172645463325252ull;
static inline uint64_t xorshift(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

struct line {
    struct line *next;
    uint64_t pad[7];
};

static uint64_t chase(size_t bytes, long steps) {
    size_t n = bytes / sizeof(struct line);
    if (n < 2)
        n = 2;
    struct line *l = buffer(n * sizeof(struct line));
    uint32_t *order = malloc(n * sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        order[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) { /* Sattolo: one cycle through every line */
        size_t j = xorshift() % i;
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        l[order[i]].next = &l[order[(i + 1) % n]];
    free(order);
    struct line *p = &l[0];
    for (long i = 0; i < steps; i++)
        p = p->next;
    return (uint64_t)(p - l);
}

static uint64_t lookup(size_t bytes, long steps) {
    size_t n = bytes / 8;
    uint64_t *t = buffer(n * 8);
    for (size_t i = 0; i < n; i++)
        t[i] = i * 2654435761u;
    uint64_t sum = 0, x = 12345;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += t[x % n];
    }
    return sum;
}

static uint64_t stream(size_t bytes, long steps) {
    size_t n = bytes / 8;
    double *a = buffer(n * 8);
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i & 1023);
    double s = 0;
    for (long r = 0; r < steps; r++)
        for (size_t i = 0; i < n; i++)
            s += a[i];
    return (uint64_t)s;
}

static uint64_t lines(size_t bytes, long steps) {
    size_t n = bytes / 8;
    uint64_t *a = buffer(n * 8);
    for (size_t i = 0; i < n; i += 8)
        a[i] = i;
    uint64_t s = 0;
    for (long r = 0; r < steps; r++)
        for (size_t i = 0; i < n; i += 8)
            s += a[i];
    return s;
}

static uint64_t copy(size_t bytes, long steps) {
    size_t n = bytes / 16;
    double *a = buffer(n * 8), *b = buffer(n * 8);
    for (size_t i = 0; i < n; i++)
        a[i] = (double)(i & 1023);
    for (long r = 0; r < steps; r++)
        for (size_t i = 0; i < n; i++)
            b[i] = a[i] + 1.0;
    return (uint64_t)b[n / 2];
}

static uint64_t matmul(size_t bytes, long steps) {
    size_t n = 8;
    while (3 * (n + 8) * (n + 8) * 8 <= bytes)
        n += 8;
    double *a = buffer(n * n * 8), *b = buffer(n * n * 8), *c = buffer(n * n * 8);
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7);
        b[i] = (double)(i % 5);
    }
    for (long r = 0; r < steps; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < n; k++) {
                double x = a[i * n + k];
                for (size_t j = 0; j < n; j++)
                    c[i * n + j] += x * b[k * n + j];
            }
    return (uint64_t)c[n * n / 2];
}

static uint64_t transpose(size_t bytes, long steps) {
    size_t n = 16;
    while (2 * (n + 16) * (n + 16) * 4 <= bytes)
        n += 16;
    float *a = buffer(n * n * 4), *b = buffer(n * n * 4);
    for (size_t i = 0; i < n * n; i++)
        a[i] = (float)(i & 255);
    for (long r = 0; r < steps; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                b[j * n + i] = a[i * n + j] + (float)r;
    return (uint64_t)b[n + 1];
}

static int cmp_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

static uint64_t sort(size_t bytes, long steps) {
    size_t n = bytes / 4;
    uint32_t *k = buffer(n * 4);
    uint64_t sum = 0;
    for (long r = 0; r < steps; r++) {
        for (size_t i = 0; i < n; i++)
            k[i] = (uint32_t)xorshift();
        qsort(k, n, 4, cmp_u32);
        sum += k[n / 2];
    }
    return sum;
}

static uint64_t sieve(size_t bytes, long steps) {
    unsigned char *f = buffer(bytes);
    uint64_t count = 0;
    for (long r = 0; r < steps; r++) {
        memset(f, 1, bytes);
        for (size_t i = 2; i * i < bytes; i++)
            if (f[i])
                for (size_t j = i * i; j < bytes; j += i)
                    f[j] = 0;
        for (size_t i = 2; i < bytes; i++)
            count += f[i];
    }
    return count;
}

static uint64_t bsearch_keys(size_t bytes, long steps) {
    size_t n = bytes / 4;
    uint32_t *k = buffer(n * 4);
    for (size_t i = 0; i < n; i++)
        k[i] = (uint32_t)(i * 3);
    uint64_t found = 0;
    for (long s = 0; s < steps; s++) {
        uint32_t key = (uint32_t)(xorshift() % (3 * n));
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (k[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        found += lo < n && k[lo] == key;
    }
    return found;
}

static uint64_t compute(size_t bytes, long steps) {
    (void)bytes;
    uint64_t h = 1469598103934665603ull;
    for (long i = 0; i < steps; i++) {
        h ^= (uint64_t)i;
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s KERNEL BYTES STEPS [4k|huge]\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[2], NULL, 0);
    long steps = atol(argv[3]);
    huge = argc > 4 && strcmp(argv[4], "huge") == 0;
    static const struct {
        const char *name;
        uint64_t (*run)(size_t, long);
    } kernels[] = {
        {"chase", chase}, {"lookup", lookup}, {"stream", stream}, {"lines", lines}, {"copy", copy},
        {"matmul", matmul}, {"transpose", transpose}, {"sort", sort}, {"sieve", sieve},
        {"bsearch", bsearch_keys}, {"compute", compute},
    };
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(argv[1], kernels[i].name) == 0) {
            printf("%s %llu\n", argv[1], (unsigned long long)kernels[i].run(bytes, steps));
            return 0;
        }
    fprintf(stderr, "%s: unknown kernel %s\n", argv[0], argv[1]);
    return 2;
}
