/*
 * An art-shaped program (ROCS section 3.2.2, Figure 3) to capture with `cachecolor trace` and
 * run under `rocs` (examples/rocs/programs/art_like.toml): each step reads the next element of two
 * streaming arrays (1 MiB each, one double per 64 bytes, swept in order, never reused within the
 * cache) and one element of a reused 320 KiB array at a pseudo-random index. It prints where its
 * arrays are, so a test can tell which pages rocs put in the pollute buffer.
 *
 *   cc -O2 -o art_like art_like.c && ./art_like [STEPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define STREAM_BYTES (1u << 20)
#define REUSED_BYTES (320u << 10)
#define STRIDE (64 / sizeof(double))

static double *array(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) {
        perror("posix_memalign");
        exit(1);
    }
    double *d = p;
    for (size_t i = 0; i < bytes / sizeof(double); i++)
        d[i] = (double)(i & 1023);
    return d;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 2500000;
    double *bus = array(STREAM_BYTES), *tds = array(STREAM_BYTES);
    double *f1_layer = array(REUSED_BYTES);
    printf("bus %p %u\ntds %p %u\nf1_layer %p %u\n", (void *)bus, STREAM_BYTES, (void *)tds,
           STREAM_BYTES, (void *)f1_layer, REUSED_BYTES);
    fflush(stdout);
    const size_t n_stream = STREAM_BYTES / sizeof(double), n_reused = REUSED_BYTES / sizeof(double);
    uint64_t x = 88172645463325252ull; /* xorshift64: the random index stays in registers */
    size_t s = 0;
    double sum = 0.0;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += bus[s] + tds[s] + f1_layer[x % n_reused];
        s += STRIDE;
        if (s >= n_stream)
            s = 0;
    }
    printf("sum %f\n", sum);
    return 0;
}
