/* SPDX-License-Identifier: MIT */
/*
 * rng.h - a small, fast, seedable generator for the benchmarks (xoshiro256**, seeded
 * through splitmix64).  Every program draws its choices from it with a fixed or given
 * seed, so each allocator sees exactly the same sequence of requests.
 */
#ifndef TIDE_BENCH_RNG_H
#define TIDE_BENCH_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s[4];
} rng_t;

static inline uint64_t rng_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Independent streams for the same seed: one per (seed, stream) pair, e.g. per thread. */
static inline void rng_seed(rng_t *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ rng_splitmix64(&stream);
    for (int i = 0; i < 4; i++)
        r->s[i] = rng_splitmix64(&x);
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return result;
}

/* Uniform in [0, n) for n >= 1 (multiply-shift; the bias is below 2^-32 for n < 2^32). */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

#endif
