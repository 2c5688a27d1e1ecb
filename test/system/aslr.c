/* SPDX-License-Identifier: MIT */
/*
 * aslr.c - where the heap starts is random enough to guess at no better than 1 in 2^28.
 *
 * test/system/aslr_probe runs 1,000 times; each run prints its range's base and its first
 * malloc(64).  The addresses' page numbers are tested bit by bit: a bit counts as random
 * when it was set in 40-60% of the runs (a fair bit leaves that band once in about 10^9
 * tries: 6 standard deviations).  The first block needs 28 such bits, no two runs may
 * share a first block, and the first block is at one of hundreds of offsets from the base, not a fixed one.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "child.h"
#include "support.h"

#define RUNS 1000

static unsigned random_bits(const uintptr_t *v, size_t n)
{
    unsigned bits = 0;
    for (unsigned b = 12; b < 48; b++) {
        size_t ones = 0;
        for (size_t i = 0; i < n; i++)
            ones += (v[i] >> b) & 1;
        bits += ones * 10 >= n * 4 && ones * 10 <= n * 6;
    }
    return bits;
}

static int cmp(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static size_t distinct(uintptr_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    size_t d = n > 0;
    for (size_t i = 1; i < n; i++)
        d += v[i] != v[i - 1];
    return d;
}

Test(aslr, the_first_block_has_28_random_bits, .timeout = 600)
{
    static uintptr_t base[RUNS], first[RUNS], offset[RUNS];
    /* A short run's 100 still show every random bit (each stays constant over them with
     * odds of 2^-99); the offsets' bound scales with the runs. */
    const int runs = (int)tt_rounds(RUNS);
    for (int i = 0; i < runs; i++) {
        struct tt_child_spec spec = { .path = ASLR_PROBE, .timeout_s = 60 };
        struct tt_child c;
        cr_assert_eq(tt_child_run(&spec, &c), 0, "cannot run %s", ASLR_PROBE);
        unsigned long b = 0, p = 0;
        cr_assert(tt_child_exited(&c, 0) && sscanf(c.out, "%lx %lx", &b, &p) == 2, "run %d: %s", i, c.out);
        base[i] = b;
        first[i] = p;
        offset[i] = p - b;
        tt_child_free(&c);
    }
    unsigned bits_first = random_bits(first, (size_t)runs), bits_base = random_bits(base, (size_t)runs);
    size_t d_first = distinct(first, (size_t)runs), d_base = distinct(base, (size_t)runs),
           d_off = distinct(offset, (size_t)runs);
    cr_log_info("aslr: %d runs: first malloc(64) %u random bits, %zu distinct; range base %u random bits, %zu "
                "distinct; %zu distinct offsets from the base",
                runs, bits_first, d_first, bits_base, d_base, d_off);
    fprintf(stderr,
            "[tide-test] aslr: %d runs: first malloc(64): %u random bits, %zu distinct; range base: %u random bits, "
            "%zu distinct; first block - base: %zu distinct\n",
            runs, bits_first, d_first, bits_base, d_base, d_off);
    cr_expect_geq(bits_first, 28, "the first malloc(64) has %u random bits", bits_first);
    cr_expect_eq(d_first, (size_t)runs, "two of %d runs had their first malloc(64) at one address", runs);
    cr_expect_gt(d_off, (size_t)runs * 256 / RUNS, "the first block sits at one of %zu offsets from the base in %d runs",
                 d_off, runs);
}
