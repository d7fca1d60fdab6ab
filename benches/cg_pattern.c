/* The benchmark's two traces as a program, for cachegrind (benches/run.py).

   usage: cg_pattern uniform|sequential N
   Maps 64 MiB at 0x200000000 (the traces' base) and makes N 8-byte loads from it:
   - uniform: address 0x200000000 + 8 * (z >> 41), z = splitmix64(seed 1) output i, i.e. state
     = 1 + (i + 1) * 0x9E3779B97F4A7C15 and the standard finaliser (ANCHORS.md);
   - sequential: address 0x200000000 + 8 * i.
   The loads are the only data references inside the loops (everything else stays in
   registers), each on a line marked LOAD so run.py can read that line's counts from
   cachegrind's per-line output. Compile with -O2 -fno-tree-vectorize -g. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static uint64_t __attribute__((noinline)) uniform(const uint64_t *a, long n) {
    uint64_t s = 0;
    for (long i = 0; i < n; i++) {
        uint64_t z = 1 + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        s += a[z >> 41]; /* LOAD uniform */
    }
    return s;
}

static uint64_t __attribute__((noinline)) sequential(const uint64_t *a, long n) {
    uint64_t s = 0;
    for (long i = 0; i < n; i++) {
        s += a[i]; /* LOAD sequential */
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s uniform|sequential N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    void *want = (void *)0x200000000ul;
    uint64_t *a = mmap(want, 64ul << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (a != want) {
        perror("mmap at 0x200000000");
        return 1;
    }
    uint64_t s = strcmp(argv[1], "uniform") == 0 ? uniform(a, n) : sequential(a, n);
    printf("%llu\n", (unsigned long long)s);
    return 0;
}
