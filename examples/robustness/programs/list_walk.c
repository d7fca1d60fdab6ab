/*
 * A pointer chase (robustness matrix, issue 19): a singly linked list of 3072 64-byte nodes
 * (192 KiB) in one random cycle (Sattolo's shuffle), walked node after node. Each load's address
 * depends on the previous one, so it is latency-bound; the list fits the LLC of the PowerPC
 * 970FX (512 KiB) but not its L1 (32 KiB). Nothing to gain for a policy alone or beside another
 * program that fits. Written for the matrix, not tuned to any policy.
 *
 *   cc -O2 -o list_walk list_walk.c && ./list_walk [STEPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NODES 3072

struct node {
    struct node *next;
    uint64_t payload[7]; /* 64 bytes a node */
};

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 1000000;
    struct node *nodes = NULL;
    if (posix_memalign((void **)&nodes, 4096, NODES * sizeof(struct node)) != 0) {
        perror("posix_memalign");
        return 1;
    }
    static uint32_t order[NODES];
    for (uint32_t i = 0; i < NODES; i++)
        order[i] = i;
    uint64_t x = 88172645463325252ull; /* xorshift64 */
    for (uint32_t i = NODES - 1; i > 0; i--) { /* Sattolo: one cycle through every node */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t j = (uint32_t)(x % i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (uint32_t i = 0; i < NODES; i++) {
        nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];
        nodes[order[i]].payload[0] = i;
    }
    struct node *p = &nodes[order[0]];
    uint64_t sum = 0;
    for (long i = 0; i < steps; i++) {
        sum += p->payload[0];
        p = p->next;
    }
    printf("sum %llu\n", (unsigned long long)sum);
    return 0;
}
