/* SPDX-License-Identifier: MIT */
/* prof_math.c - the heap profiler's numbers: the exponential intervals between samples
 * (drawn ahead, from a per-thread generator), the countdowns that run them out (in bytes,
 * and per small class in allocations, in the thread cache's words), and the logarithm and
 * the exponential they and the records' weights (prof_record.c) need, without libm. */
#include "prof_internal.h"

#include "conf.h"
#include "os.h"

/* ---- numbers: libc and pthreads only, so no libm --------------------------------- */

/* A sample pays for its interval (a logarithm) and, when its size is not a class's, its
 * weight (an exponential): fixed polynomials, with no division in a loop (the series
 * summed term by term cost 150-170 instructions each, as much as the rest of a sample). */
TIDE_SAMPLE_PATH double prof_ln(double x) /* x > 0, normal */
{
    union {
        double d;
        uint64_t u;
    } v = { x };
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
    double m = v.d; /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* ln m = 2 atanh(z) = 2z (1 + z^2/3 + z^4/5 + ...), |z| <= 0.172: six terms leave out
     * less than 1e-10 of it, far below what an interval's length needs.  Summed in pairs
     * (Estrin's scheme), not in one chain of twelve multiply-adds: each sample waits for
     * this, and the chain took longer than the rest of the sample's arithmetic. */
    double z = (m - 1) / (m + 1), z2 = z * z, z4 = z2 * z2;
    double s01 = 1 + z2 * (1.0 / 3), s23 = 1.0 / 5 + z2 * (1.0 / 7), s45 = 1.0 / 9 + z2 * (1.0 / 11);
    double s = s01 + z4 * (s23 + z4 * s45);
    return 2 * z * s + e * 0.6931471805599453;
}

/* 2^(-j/32), j = 0..31. */
static const double prof_exp2_neg32[32] = {
    1.0, 0.9785720620877001, 0.9576032806985737, 0.93708381705515,
    0.9170040432046712, 0.8973545375015536, 0.8781260801866497, 0.859309649061239,
    0.8408964152537145, 0.8228777390769825, 0.8052451659746271, 0.7879904225539432,
    0.7711054127039704, 0.7545822137967114, 0.7384130729697497, 0.7225904034885233,
    0.7071067811865476, 0.691954940981916, 0.6771277734684463, 0.6626183215798707,
    0.6484197773255048, 0.6345254785958666, 0.620928906036742, 0.6076236799902345,
    0.5946035575013605, 0.5818624293887887, 0.5693943173783458, 0.5571933712979462,
    0.5452538663326288, 0.5335702003384118, 0.5221368912137069, 0.5109485743270583,
};

/* 1 - exp(-x), x >= 0, to within 1e-13 of itself (1.2e-14 at worst, test/unit/prof_math),
 * tiny x too: the weight of a block whose size is no class's.  Seven terms of a series in
 * something below 1/32, where the series in x itself took up to eighteen terms (some 100
 * instructions a sample of a large block, a sixth of what the sample cost). */
TIDE_SAMPLE_PATH double prof_one_minus_exp_neg(double x)
{
    if (!(x < 40))
        return 1; /* exp(-40) is below half an ulp of 1 */
    if (x < 1.0 / 32) {
        /* x (1 - x/2! + x^2/3! - ... + x^6/7!): what is left out is below x^7/8!, 1e-15 of it. */
        double y = -x;
        double s = (((((y * (1.0 / 5040) + 1.0 / 720) * y + 1.0 / 120) * y + 1.0 / 24) * y + 1.0 / 6) * y + 0.5) * y +
                   1;
        return x * s;
    }
    /* exp(-x) = 2^-(n div 32) 2^-((n mod 32)/32) exp(-f), n = floor(32 x / ln 2), f < ln 2 / 32:
     * the first factor in the exponent, the second from the table, the third in seven
     * terms (what is left out is below f^7/7!, 5e-16). */
    int n = (int)(x * (32 / 0.6931471805599453));
    double y = n * 0.02166084939249829 - x; /* -f */
    double e = (((((y * (1.0 / 720) + 1.0 / 120) * y + 1.0 / 24) * y + 1.0 / 6) * y + 0.5) * y + 1) * y + 1;
    union {
        double d;
        uint64_t u;
    } scale = { .u = (uint64_t)(1023 - (n >> 5)) << 52 };
    return 1 - e * prof_exp2_neg32[n & 31] * scale.d;
}

TIDE_SAMPLE_PATH static uint64_t prof_random(void)
{
    prof_tls_t *t = &prof_tls;
    if (!t->rng)
        t->rng = (os_random_seed() ^ ((uintptr_t)t * 0x9E3779B97F4A7C15u)) | 1;
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 0x2545F4914F6CDD1Du;
}

/* An exponentially distributed number of mean 1.  They are drawn PROF_DRAWS at a time:
 * between two samples the program runs long enough to evict this code and its
 * constants, and only one sample in PROF_DRAWS brings them back (at the default rate, a
 * countdown's running out and its draw, with no sample taken, took bench/pairs' batch
 * 2 % longer when each draw was made as it was needed). */
TIDE_SAMPLE_PATH static double prof_exponential(void)
{
    prof_tls_t *t = &prof_tls;
    if (unlikely(t->ndraws == 0)) {
        for (unsigned i = 0; i < PROF_DRAWS; i++) {
            double u = (double)((prof_random() >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
            t->draws[i] = -prof_ln(u);
        }
        t->ndraws = PROF_DRAWS;
    }
    return t->draws[--t->ndraws];
}

/* An exponentially distributed interval of mean prof_sample bytes. */
TIDE_SAMPLE_PATH static int64_t prof_draw(void)
{
    double d = prof_exponential() * prof_set.rate;
    return d < 1 ? 1 : d > 4e18 ? (int64_t)4e18 : (int64_t)d;
}

/* Each small class's scale of the interval and weight (prof_internal.h), set at start-up. */
prof_class_t prof_class[SC_NSMALL];

/* ---- the countdown ---------------------------------------------------------------- */

TIDE_SAMPLE_PATH bool prof_fire(void)
{
    tcache_t *tc = &tcache_tls;
    /* Ready first: only a profiler that is on gets ready. */
    if (unlikely(!ATOMIC_LOAD_ACQ(&prof_set.ready))) {
        /* off: never again; starting up: look again later */
        tc->prof_left = !ATOMIC_LOAD(&conf.prof) ? INT64_MAX : (int64_t)(64 * KiB);
        return false;
    }
    prof_tls_t *t = &prof_tls;
    if (!t->armed) {
        /* A thread's first countdown starts at its first allocation. */
        t->armed = 1;
        tc->prof_left += prof_draw();
        if (tc->prof_left >= 0)
            return false;
    }
    /* The next interval starts after this block (a Poisson process has no memory). */
    tc->prof_left = prof_draw();
    return !t->busy;
}

_Static_assert(SC_NSMALL <= 64, "armed_classes has a bit for each small class");

/* A class's countdown, for a thread that never samples: 2^46 allocations. */
#define PROF_CLASS_NEVER ((int64_t)1 << 46)

/* How many allocations of class CLS (SIZE bytes) up to and including the next one
 * sampled: N = ceil(E / SIZE) for an exponential interval E of mean prof_sample, geometric
 * with P(N > k) = exp(-k SIZE / prof_sample), which is what the byte countdown's interval
 * gives a run of blocks of SIZE bytes. */
TIDE_SAMPLE_PATH static int64_t prof_draw_count(unsigned cls)
{
    double d = prof_exponential() * prof_class[cls].scale;
    if (!(d < (double)PROF_CLASS_NEVER))
        return PROF_CLASS_NEVER;
    int64_t n = (int64_t)d;
    n += (double)n < d;
    return n > 1 ? n : 1;
}

TIDE_SAMPLE_PATH bool prof_class_fire(unsigned cls)
{
    tcache_t *tc = &tcache_tls;
    int64_t left; /* allocations to let by before the next sample */
    bool fire = false;
    if (unlikely(!ATOMIC_LOAD_ACQ(&prof_set.ready))) {
        /* off: never again; starting up: look again later */
        left = !ATOMIC_LOAD(&conf.prof) ? PROF_CLASS_NEVER : (int64_t)(64 * KiB / sc_size[cls]);
    } else {
        prof_tls_t *t = &prof_tls;
        int64_t n = prof_draw_count(cls);
        if (!(t->armed_classes & ((uint64_t)1 << cls))) {
            /* A thread's first countdown of a class starts at its first allocation of it:
             * this one, the first of N. */
            t->armed_classes |= (uint64_t)1 << cls;
            if (n > 1) {
                tcache_set_countdown(tc, cls, n - 2);
                return false;
            }
            n = prof_draw_count(cls);
        }
        fire = !t->busy;
        left = n - 1;
    }
    tcache_set_countdown(tc, cls, left);
    return fire;
}
