/* SPDX-License-Identifier: MIT */
/*
 * prof_math.c - the profiler's logarithm (src/prof_math.c, prof_ln), which draws every
 * sampling interval without libm, against libm's log: over the values an interval is
 * drawn from (k / 2^53, k = 1 .. 2^53) and over the whole range of normal doubles.  And
 * its 1 - exp(-x) (prof_one_minus_exp_neg), a block's probability of being sampled,
 * against libm's -expm1(-x), from sizes far below the sampling rate to far above it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "support.h"

#include "prof.h"

/* Relative to the larger of |log x| and 1e-3 (a value near 1 has a tiny logarithm; an
 * interval's length is what is compared, and 1e-10 of it is far below what matters). */
static double rel_error(double x)
{
    double want = log(x), got = prof_ln(x);
    double scale = fabs(want) > 1e-3 ? fabs(want) : 1e-3;
    return fabs(got - want) / scale;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Du;
}

Test(prof_math, the_logarithm_of_every_kind_of_uniform_draw_is_exact_to_1e_10)
{
    uint64_t s = 0x9E3779B97F4A7C15u;
    double worst = 0, at = 0;
    for (int i = 0; i < 2000000; i++) {
        /* As src/prof_math.c draws it: (k + 1) / 2^53, and with K's low bits cleared by half the
         * draws, so that values near 1, near 2^-53 and at powers of two come up. */
        uint64_t k = rng_next(&s) >> 11;
        if (i & 1)
            k &= ~(((uint64_t)1 << (i % 53)) - 1);
        double u = (double)(k + 1) * (1.0 / 9007199254740992.0);
        double e = rel_error(u);
        if (e > worst) {
            worst = e;
            at = u;
        }
    }
    cr_assert_leq(worst, 1e-10, "prof_ln(%a) is off by %g of log's", at, worst);
    cr_assert_eq(prof_ln(1.0), 0.0);
    cr_assert_leq(rel_error(1.0 / 9007199254740992.0), 1e-12);
}

Test(prof_math, the_logarithm_holds_over_every_exponent)
{
    uint64_t s = 12345;
    for (int ex = -1020; ex <= 1020; ex++) {
        for (int i = 0; i < 200; i++) {
            double m = 1 + (double)(rng_next(&s) >> 11) * (1.0 / 9007199254740992.0);
            double x = ldexp(m, ex);
            cr_assert_leq(rel_error(x), 1e-10, "prof_ln(%a) = %a, log: %a", x, prof_ln(x), log(x));
        }
    }
}

/* The worst relative error of 1 - exp(-x) over X from 2^-40 to 64: each binade in 4,000
 * random points, and the ends of the pieces the function is made of (1/32, where the
 * series gives way to the table; 40, past which it is 1) with their neighbours. */
Test(prof_math, one_minus_exp_is_exact_to_1e_13_from_tiny_to_huge_sizes)
{
    uint64_t s = 777;
    double worst = 0, at = 0;
    for (int ex = -40; ex <= 6; ex++) {
        for (int i = 0; i < 4000; i++) {
            double x = ldexp(1 + (double)(rng_next(&s) >> 11) * (1.0 / 9007199254740992.0), ex);
            double want = -expm1(-x), err = fabs(prof_one_minus_exp_neg(x) - want) / want;
            if (err > worst)
                worst = err, at = x;
        }
    }
    const double edges[] = { 1.0 / 32, 40, 0.6931471805599453 / 32, 0.6931471805599453, 0.5, 1 };
    for (unsigned i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        const double xs[] = { nextafter(edges[i], 0), edges[i], nextafter(edges[i], 100) };
        for (unsigned k = 0; k < 3; k++) {
            double want = -expm1(-xs[k]), err = fabs(prof_one_minus_exp_neg(xs[k]) - want) / want;
            if (err > worst)
                worst = err, at = xs[k];
        }
    }
    cr_assert_leq(worst, 1e-13, "prof_one_minus_exp_neg(%a) is off by %g of -expm1's", at, worst);
    cr_assert_eq(prof_one_minus_exp_neg(0.0), 0.0);
    cr_assert_eq(prof_one_minus_exp_neg(1000.0), 1.0);
}
