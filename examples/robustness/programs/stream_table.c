/*
 * A stream beside a reused table (robustness matrix, issue 19; the shape ROCS 3.2.2 targets):
 * each step reads the next line of a 4 MiB array (one double per 128-byte line, swept in order
 * and never reused within the cache) and one double of a 256 KiB table at a pseudo-random index.
 * On the PowerPC 970FX (512 KiB L2) the stream evicts the table; the pollute buffer is meant to
 * keep the stream's pages out of the table's way. Written for the matrix, not tuned to any
 * policy (art_like.c in examples/rocs/programs/ is the art-sized one).
 *
 *   cc -O2 -o stream_table stream_table.c && ./stream_table [STEPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define STREAM_BYTES (4u << 20)
#define TABLE_BYTES (256u << 10)
#define LINE (128 / sizeof(double))

static double *array(size_t bytes, size_t stride) {
    double *d = NULL;
    if (posix_memalign((void **)&d, 4096, bytes) != 0) {
        perror("posix_memalign");
        exit(1);
    }
    for (size_t i = 0; i < bytes / sizeof(double); i += stride) /* only what is read */
        d[i] = (double)(i & 1023);
    return d;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    double *stream = array(STREAM_BYTES, LINE), *table = array(TABLE_BYTES, 1);
    const size_t n_stream = STREAM_BYTES / sizeof(double), n_table = TABLE_BYTES / sizeof(double);
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    size_t s = 0;
    double sum = 0.0;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += stream[s] + table[x % n_table];
        s += LINE;
        if (s >= n_stream)
            s = 0;
    }
    printf("sum %f\n", sum);
    return 0;
}
