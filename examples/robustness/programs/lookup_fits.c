/*
 * A reused table lookup that fits the LLC (robustness matrix, issue 19; docs/rocs.md
 * "Robustness matrix"): each step reads one 8-byte entry of a table (160 KiB unless the second
 * argument gives its KiB; lookup_just_fits.toml runs it at 496 KiB, 97% of the LLC) at a
 * pseudo-random index. On the PowerPC 970FX (32 KiB L1D, 512 KiB L2) almost every read misses
 * the L1 and hits the L2: nothing pollutes, nothing is worth moving, so every policy should
 * leave it as `linux` does. Written for the matrix, not tuned to any policy.
 *
 *   cc -O2 -o lookup_fits lookup_fits.c && ./lookup_fits [STEPS [TABLE_KIB]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    const size_t table_bytes = (size_t)(argc > 2 ? atol(argv[2]) : 160) << 10;
    const size_t n = table_bytes / sizeof(uint64_t);
    uint64_t *table = NULL;
    if (n == 0 || posix_memalign((void **)&table, 4096, table_bytes) != 0) {
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
