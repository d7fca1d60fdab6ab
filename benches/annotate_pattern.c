/* The program `benches/annotate_speed.py` annotates with cachegrind and with cachecolor: a hash
   table probed at random (1 MiB: reused, missing D1) beside an 8 MiB array scanned once per
   round (missing every level), the own-program case a new user tries first. Usage: PROGRAM ROUNDS. */
#include <stdio.h>
#include <stdlib.h>
#define SLOTS (64 * 1024)
#define SCAN (1024 * 1024)   /* longs: 8 MiB */
struct slot { unsigned long key, value; };
struct slot table[SLOTS];
long scan[SCAN];
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 4;
    unsigned long x = 1, s = 0;
    for (int r = 0; r < rounds; r++) {
        for (long i = 0; i < SLOTS; i++) {
            x = x * 6364136223846793005ul + 1442695040888963407ul;
            struct slot *t = &table[(x >> 33) % SLOTS];
            t->value += i; s += t->key;
        }
        for (long i = 0; i < SCAN; i += 1) s += scan[i];
    }
    printf("%lu\n", s);
    return 0;
}
