/*
 * The demo program of `cachecolor demo`: transpose an N x N matrix of doubles, naively or in
 * 8 x 8 blocks, so that the simulated caches show why blocking matters.
 *
 *   transpose naive|blocked [N]      (N defaults to 512, a multiple of 8)
 *
 * Naive: dst[j][i] = src[i][j] row by row. The loads walk src sequentially (one miss per 64-byte
 * line), but the stores walk a column of dst: N lines 8*N bytes apart. With N = 512 that stride
 * is 4 KiB, so every store of a column falls into the same set of a 4 KiB-per-way L1 (e.g.
 * 32 KiB 8-way, 48 KiB 12-way) and evicts the column's earlier lines before the next column
 * could reuse them: nearly every store misses in L1.
 *
 * Blocked: the same copy done one 8 x 8 tile at a time. A tile touches 8 source lines and 8
 * destination lines, each used for 8 consecutive elements, so after the first touch of each
 * line the rest of the tile hits in L1: about one miss per 8 stores.
 *
 * Both variants first initialise src (N*N sequential stores) and finish by summing the
 * diagonal of dst (so the compiler keeps the work); only the transpose differs. Build with
 * -O2 -fno-tree-vectorize so that each element is exactly one load and one store.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TILE 8

static void transpose_naive(double *dst, const double *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            dst[j * n + i] = src[i * n + j];
}

static void transpose_blocked(double *dst, const double *src, size_t n) {
    for (size_t ii = 0; ii < n; ii += TILE)
        for (size_t jj = 0; jj < n; jj += TILE)
            for (size_t i = ii; i < ii + TILE; i++)
                for (size_t j = jj; j < jj + TILE; j++)
                    dst[j * n + i] = src[i * n + j];
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "naive") != 0 && strcmp(argv[1], "blocked") != 0)) {
        fprintf(stderr, "usage: %s naive|blocked [N]\n", argv[0]);
        return 2;
    }
    size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 512;
    if (n == 0 || n % TILE != 0 || n > 8192) {
        fprintf(stderr, "N must be a positive multiple of %d, at most 8192\n", TILE);
        return 2;
    }
    double *src = aligned_alloc(4096, n * n * sizeof(double));
    double *dst = aligned_alloc(4096, n * n * sizeof(double));
    if (!src || !dst) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t k = 0; k < n * n; k++)
        src[k] = (double)k;

    if (strcmp(argv[1], "naive") == 0)
        transpose_naive(dst, src, n);
    else
        transpose_blocked(dst, src, n);

    double trace = 0;
    for (size_t k = 0; k < n; k++)
        trace += dst[k * n + k];
    printf("%s transpose of %zux%zu doubles: trace %.0f\n", argv[1], n, n, trace);
    free(src);
    free(dst);
    return 0;
}
