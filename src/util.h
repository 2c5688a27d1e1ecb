/* SPDX-License-Identifier: MIT */
/* util.h - small helpers every tide module uses: branch hints, sizes, alignment. */
#ifndef TIDE_UTIL_H
#define TIDE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ThreadSanitizer build (configure --enable-tsan): gcc says __SANITIZE_THREAD__, clang
 * __has_feature(thread_sanitizer). */
#if defined(__SANITIZE_THREAD__)
#define TIDE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TIDE_TSAN 1
#endif
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define TIDE_EXPORT __attribute__((visibility("default")))
/* On a test hook, in the builds that have one (fault injection): exported too, but no name
 * of tide's interface, nor in the release library (tools/check_exports.py). */
#define TIDE_TEST_EXPORT __attribute__((visibility("default")))
/* On the declaration of a variable the fast paths read: one RIP-relative load, no GOT. */
#define TIDE_HIDDEN __attribute__((visibility("hidden")))
#define TIDE_NOINLINE __attribute__((noinline))
#define TIDE_INLINE static inline __attribute__((always_inline))
#define TIDE_COLD __attribute__((cold, noinline))
#define TIDE_CACHELINE 64
#define TIDE_ALIGNED_CL __attribute__((aligned(TIDE_CACHELINE)))
/* On malloc's and free's definitions: each starts a cache line.  Left where the linker
 * put them they moved with every change elsewhere in the library, and bench/pairs' time
 * with them, by 2-4 % for the same instructions (free at 0x...c00 or 0x...f70). */
#define TIDE_FAST_ENTRY __attribute__((aligned(TIDE_CACHELINE)))
/* On the functions a sampled allocation runs through (the profiler's, prof.h): in one
 * place, ahead of the rest of the code.  Between two samples a program evicts them
 * (bench/pairs' batch streams 520 KiB through a 512 KiB L2), and a sample then fetches
 * its code again; packed together, that row ran 1.6 % faster with prof:on (100
 * alternating runs), and the same with it off. */
#define TIDE_SAMPLE_PATH __attribute__((section(".text.hot.tide_sample")))

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* tide is built for 4 KiB base pages (x86_64, aarch64 with 4K); checked at start-up. */
#define LG_PAGE 12
#define PAGE ((size_t)1 << LG_PAGE)
#define PAGE_MASK (PAGE - 1)
#define LG_HUGEPAGE 21
#define HUGEPAGE ((size_t)1 << LG_HUGEPAGE)

/* The largest block tide will try to map: half of x86_64's user address space.  Larger
 * requests fail at once with ENOMEM instead of reserving absurd page maps. */
#define TIDE_MAX_BLOCK ((size_t)1 << 46)

/* The smallest alignment every allocation has. */
#define LG_QUANTUM 4
#define QUANTUM ((size_t)1 << LG_QUANTUM)

#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define IS_POW2(x) ((x) != 0 && ((x) & ((x) - 1)) == 0)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* Relaxed atomics for counters and published words; plain loads in the generated code. */
#define ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ATOMIC_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define ATOMIC_SUB(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_RELAXED)
#define ATOMIC_LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ATOMIC_STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static inline size_t pages_of(size_t bytes) { return (bytes + PAGE_MASK) >> LG_PAGE; }
static inline unsigned lg_floor(size_t x) { return 63u - (unsigned)__builtin_clzl(x); }

#endif
