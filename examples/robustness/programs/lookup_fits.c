/*
 * A reused table lookup that fits the LLC (robustness matrix, issue 19; docs/rocs.md
 * "Robustness matrix"): each step reads one 8-byte entry of a 160 KiB table at a pseudo-random
 * index. On the PowerPC 970FX (32 KiB L1D, 512 KiB L2) almost every read misses the L1 and hits
 * the L2: nothing pollutes, nothing is worth moving, so every policy should leave it as `linux`
 * does. Written for the matrix, not tuned to any policy.
 *
 *   cc -O2 -o lookup_fits lookup_fits.c && ./lookup_fits [STEPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TABLE_BYTES (160u << 10)

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    const size_t n = TABLE_BYTES / sizeof(uint64_t);
    uint64_t *table = NULL;
    if (posix_memalign((void **)&table, 4096, TABLE_BYTES) != 0) {
        perror("posix_memalign");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        table[i] = i * 2654435761u;
    uint64_t x = 88172645463325252ull; /* xorshift64: the index stays in registers */
    uint64_t sum = 0;
    for (long i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sum += table[x % n];
    }
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
