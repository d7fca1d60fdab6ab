/* Host memory probe for benches/run.py: ns per load over a buffer of a given size.

   usage: host_latency BYTES LOADS
   Prints two numbers: ns per *dependent* load (a pointer chase through one random cycle over
   the buffer's 64-byte lines: pure latency) and ns per *independent* load (random lines, the
   next address not depending on the last load: what overlapping misses achieve). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t bytes = strtoull(argv[1], 0, 10), loads = strtoull(argv[2], 0, 10);
    size_t lines = bytes / 64, stride = 64 / sizeof(uint64_t);
    uint64_t *buf = aligned_alloc(4096, lines * 64);
    uint32_t *perm = malloc(lines * sizeof *perm);
    if (!buf || !perm) return 1;
    for (size_t i = 0; i < lines; i++) perm[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle through every line */
        size_t j = next() % i;
        uint32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (size_t i = 0; i < lines; i++) buf[i * stride] = (uint64_t)perm[i] * stride;
    free(perm);
    uint64_t p = 0;
    for (size_t i = 0; i < lines; i++) p = buf[p]; /* warm */
    double t0 = now();
    for (size_t i = 0; i < loads; i++) p = buf[p];
    double dep = (now() - t0) / loads * 1e9;
    /* Independent: the line numbers are drawn beforehand and read sequentially (the hardware
       prefetcher streams them), so the timed loop is one random load and an add per step. */
    uint32_t *idx = malloc(loads * sizeof *idx);
    if (!idx) return 1;
    for (size_t i = 0; i < loads; i++) idx[i] = (uint32_t)(next() % lines);
    uint64_t s = 0;
    t0 = now();
    for (size_t i = 0; i < loads; i++) s += buf[(size_t)idx[i] * stride];
    double ind = (now() - t0) / loads * 1e9;
    printf("%.2f %.2f %llu\n", dep, ind, (unsigned long long)(p + s) & 1);
    return 0;
}
