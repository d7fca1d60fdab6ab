/*
 * A small matrix multiply (robustness matrix, issue 19): C = A x B for 100 x 100 doubles
 * (three 80 KB matrices, 240 KB in all), the naive i-j-k loop, repeated REPS times. A and B are
 * first touched in one loop, interleaved, as the 200 x 200 multiply of issue 19 defect 7 was
 * (sequential frames then give each matrix every other color). It fits the 512 KiB LLC of the
 * PowerPC 970FX: nothing to gain for a policy. Written for the matrix, not tuned to any policy.
 *
 *   cc -O2 -o matmul matmul.c && ./matmul [REPS]
 */
#include <stdio.h>
#include <stdlib.h>

#define N 100

static double a[N][N] __attribute__((aligned(4096)));
static double b[N][N] __attribute__((aligned(4096)));
static double c[N][N] __attribute__((aligned(4096)));

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            a[i][j] = (double)(i + j) / N;
            b[i][j] = (double)(i - j) / N;
        }
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                double s = 0.0;
                for (int k = 0; k < N; k++)
                    s += a[i][k] * b[k][j];
                c[i][j] = s + r;
            }
    double sum = 0.0;
    for (int i = 0; i < N; i++)
        sum += c[i][i];
    printf("sum %f\n", sum);
    return 0;
}
