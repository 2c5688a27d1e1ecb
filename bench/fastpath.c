/* SPDX-License-Identifier: MIT */
/*
 * fastpath.c - K iterations of free(malloc(64)), for instruction counting under
 * callgrind: run.py runs it with two values of K and divides the difference of the
 * totals by the difference of K, which cancels start-up and leaves the cost of one
 * malloc+free pair, plus the loop's own 9 instructions (the same for every allocator).
 * No NULL check: it would only add to that constant, and free(NULL) is harmless.
 * Usage: fastpath K
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fastpath K\n");
        return 1;
    }
    const uint64_t k = bench_parse_count(argv[1], "K");
    for (uint64_t i = 0; i < k; i++) {
        void *p = malloc(64);
        bench_escape(p); /* the pair must really happen */
        free(p);
    }
    return 0;
}
