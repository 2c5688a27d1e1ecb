/* SPDX-License-Identifier: MIT */
/*
 * support.h - the helpers tide's suites share, and (child.h) the one child runner.
 *
 * Everything here is independent of tide's internals: the size-class table is
 * recomputed from the documented rule, byte patterns are derived from a seed, and
 * figures (RSS, VMAs) are read from /proc.  The unit tests (test/unit) are the ones that
 * look inside.
 *
 * The suites built with $(tide_test_cppflags) (TIDE_TEST_DUAL) have two build modes (see
 * test/local.mk); every other program that includes this links libtide:
 *   default                 the suites link with src/libtide.la, so every malloc in the
 *                           test process (Criterion's runner included) is tide's;
 *   make check TEST_ALLOC=glibc
 *                           the suites link without libtide (TIDE_TEST_GLIBC is defined),
 *                           to check the tests themselves against glibc's malloc.
 *                           The tide_ twins then map to the plain names and tests that
 *                           need tide's own interface (tide_ranges, tide_stats_get, the
 *                           exact misuse messages) skip or relax what only tide promises.
 */
#ifndef TIDE_TEST_SUPPORT_H
#define TIDE_TEST_SUPPORT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* gettid, strsignal, reallocarray */
#endif
#ifdef TIDE_TEST_DUAL
#include "alloc_mode.h" /* generated: defines TIDE_TEST_GLIBC in glibc mode */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <tide.h>

#include "child.h"

/* ------------------------------------------------------------------------------------
 * The allocator's interface as a table, so that every API test runs once through the
 * plain names and once through the tide_ twins.
 * ---------------------------------------------------------------------------------- */

/* glibc 2.36 declares neither free_sized nor free_aligned_sized (C23); tide exports both. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);

#ifdef TIDE_TEST_GLIBC
static inline void glibc_free_sized(void *p, size_t n) { (void)n; free(p); }
static inline void glibc_free_aligned_sized(void *p, size_t a, size_t n) { (void)a; (void)n; free(p); }
#define free_sized glibc_free_sized
#define free_aligned_sized glibc_free_aligned_sized
#define tide_malloc malloc
#define tide_free free
#define tide_calloc calloc
#define tide_realloc realloc
#define tide_reallocarray reallocarray
#define tide_posix_memalign posix_memalign
#define tide_aligned_alloc aligned_alloc
#define tide_memalign memalign
#define tide_valloc valloc
#define tide_pvalloc pvalloc
#define tide_malloc_usable_size malloc_usable_size
#define tide_free_sized glibc_free_sized
#define tide_free_aligned_sized glibc_free_aligned_sized
#define tide_malloc_trim malloc_trim
#define tide_mallinfo2 mallinfo2
#define tide_malloc_stats malloc_stats
#endif

struct api {
    const char *name;
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable)(void *);
    void (*free_sized)(void *, size_t);
    void (*free_aligned_sized)(void *, size_t, size_t);
    int (*malloc_trim)(size_t);
    struct mallinfo2 (*mallinfo2)(void);
    void (*malloc_stats)(void);
};

static const struct api api_plain = {
    "plain", malloc, free, calloc, realloc, reallocarray, posix_memalign, aligned_alloc,
    memalign, valloc, pvalloc, malloc_usable_size, free_sized, free_aligned_sized,
    malloc_trim, mallinfo2, malloc_stats,
};
static const struct api api_tide = {
    "tide_", tide_malloc, tide_free, tide_calloc, tide_realloc, tide_reallocarray,
    tide_posix_memalign, tide_aligned_alloc, tide_memalign, tide_valloc, tide_pvalloc,
    tide_malloc_usable_size, tide_free_sized, tide_free_aligned_sized, tide_malloc_trim,
    tide_mallinfo2, tide_malloc_stats,
};
static const struct api *const apis[] = {&api_plain, &api_tide};
#define NAPIS (sizeof(apis) / sizeof(apis[0]))

/* ------------------------------------------------------------------------------------
 * Size classes, recomputed from the documented rule: 16-byte quantum, 4 classes per
 * doubling (jemalloc, lg_quantum 4); small up to 14336, large cached classes up to
 * 65536, whole 4 KiB pages above.
 * ---------------------------------------------------------------------------------- */
#define TT_PAGE 4096u
#define TT_SMALL_MAX 14336u
#define TT_LARGE_CLASS_MAX 65536u

static inline size_t tt_round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

static inline int tt_floor_log2(size_t x) { return 63 - __builtin_clzl(x); }

/* The usable size malloc(n) must report, for n <= SIZE_MAX - 4096. */
static inline size_t tt_class_of(size_t n)
{
    if (n <= 16)
        return 16;
    if (n <= 64)
        return tt_round_up(n, 16);
    if (n <= TT_LARGE_CLASS_MAX) {
        int lg = tt_floor_log2(n - 1); /* n lies in (2^lg, 2^(lg+1)] */
        return tt_round_up(n, (size_t)1 << (lg - 2));
    }
    return tt_round_up(n, TT_PAGE);
}

/* Fills OUT with every class up to 65536 in increasing order; returns how many. */
static inline size_t tt_classes(size_t *out, size_t max)
{
    size_t k = 0;
    for (size_t c = 16; c <= TT_LARGE_CLASS_MAX && k < max; c = tt_class_of(c + 1))
        out[k++] = c;
    return k;
}

static inline bool tt_is_pow2(size_t x) { return x && !(x & (x - 1)); }

/* Remove DIR (a test's temporary folder from mkdtemp) and the files in it; nothing if it
 * is gone already. */
static inline void tt_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The system's THP setting, the word in brackets of its sysfs file: "always", "madvise",
 * "never", or "absent" where the file is. */
static inline const char *tt_thp_setting(void)
{
    char buf[128];
    int fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return "absent";
    buf[n] = '\0';
    return strstr(buf, "[always]") ? "always" : strstr(buf, "[madvise]") ? "madvise" : "never";
}

/* Keep the calling thread on CPU (-1: the one it runs on now); 0 on success.  A cache
 * refills from the arena of the CPU its thread runs on, so a test that counts one arena's
 * slabs must not move between CPUs, which a busy machine makes it do. */
static inline int tt_pin_cpu(int cpu)
{
    if (cpu < 0)
        cpu = sched_getcpu();
    if (cpu < 0)
        return -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* ------------------------------------------------------------------------------------
 * Random numbers (splitmix64; deterministic per seed) and sizes.
 * ---------------------------------------------------------------------------------- */
static inline uint64_t tt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct { uint64_t s; } tt_rng;

static inline uint64_t tt_next(tt_rng *r) { return tt_mix64(r->s += 0x9e3779b97f4a7c15ull); }
static inline uint64_t tt_below(tt_rng *r, uint64_t n) { return tt_next(r) % n; }

/* Log-uniform in [1, max]: a uniform power of two, then uniform inside that octave. */
static inline size_t tt_log_uniform(tt_rng *r, size_t max)
{
    int top = tt_floor_log2(max);
    int b = (int)tt_below(r, (uint64_t)top + 1);
    size_t lo = (size_t)1 << b;
    size_t n = lo + (size_t)tt_below(r, lo);
    return n > max ? max : n;
}

/* ------------------------------------------------------------------------------------
 * Byte patterns: word i of a buffer holds mix(seed) + i * golden, so that a shifted,
 * swapped or zeroed range is detected; the tail uses the bytes of the next word.
 * ---------------------------------------------------------------------------------- */
#define TT_GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t tt_seed(const void *p, size_t n)
{
    return tt_mix64((uint64_t)(uintptr_t)p * 31 + n);
}

/* The byte the pattern puts at offset I. */
static inline unsigned char tt_pattern_byte(size_t i, uint64_t seed)
{
    uint64_t w = tt_mix64(seed) + (uint64_t)(i / 8) * TT_GOLDEN;
    return (unsigned char)(w >> (8 * (i % 8)));
}

/* Writes the pattern's bytes FROM..TO-1 at the same offsets of P (so that a buffer can be
 * extended and still hold one pattern). */
static inline void tt_fill_range(void *p, size_t from, size_t to, uint64_t seed)
{
    unsigned char *b = p;
    size_t i = from;
    for (; i < to && i % 8; i++)
        b[i] = tt_pattern_byte(i, seed);
    uint64_t w = tt_mix64(seed) + (uint64_t)(i / 8) * TT_GOLDEN;
    for (; i + 8 <= to; i += 8, w += TT_GOLDEN)
        memcpy(b + i, &w, 8);
    for (; i < to; i++)
        b[i] = tt_pattern_byte(i, seed);
}

static inline void tt_fill(void *p, size_t n, uint64_t seed) { tt_fill_range(p, 0, n, seed); }

/* Returns the offset of the first wrong byte, or SIZE_MAX when P[0..n) holds the pattern. */
static inline size_t tt_check(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    uint64_t w = tt_mix64(seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8, w += TT_GOLDEN) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        if (v != w)
            break;
    }
    for (; i < n; i++, w += (i % 8 == 0) ? TT_GOLDEN : 0) {
        unsigned char e = (unsigned char)(w >> (8 * (i % 8)));
        if (b[i] != e)
            return i;
    }
    return SIZE_MAX;
}

/* The byte the pattern puts at offset I (for messages). */
static inline unsigned tt_expected_byte(size_t i, uint64_t seed) { return tt_pattern_byte(i, seed); }

/* Offset of the first nonzero byte, or SIZE_MAX. */
static inline size_t tt_first_nonzero(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        if (v)
            break;
    }
    for (; i < n; i++)
        if (b[i])
            return i;
    return SIZE_MAX;
}

/* ------------------------------------------------------------------------------------
 * /proc figures.
 * ---------------------------------------------------------------------------------- */

/* Reads a whole (small) file into a malloc'd, NUL-terminated buffer; NULL on error. */
static inline char *tt_read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

/* VmRSS of this process in KiB, or -1. */
static inline long tt_rss_kib(void)
{
    char *s = tt_read_file("/proc/self/status", NULL);
    long kib = -1;
    if (s) {
        char *l = strstr(s, "\nVmRSS:");
        if (l)
            kib = strtol(l + 7, NULL, 10);
        free(s);
    }
    return kib;
}

/* A field of /proc/self/smaps_rollup (e.g. "LazyFree:") in KiB, or -1. */
static inline long tt_rollup_kib(const char *field)
{
    char *s = tt_read_file("/proc/self/smaps_rollup", NULL);
    long kib = -1;
    if (s) {
        char *l = strstr(s, field);
        if (l)
            kib = strtol(l + strlen(field), NULL, 10);
        free(s);
    }
    return kib;
}

/* Counts the lines of /proc/self/maps, those overlapping tide's ranges, and how many of
 * those carry tide's name ("[anon:tide]", on a kernel that names mappings). */
struct tt_vmas {
    int total;
    int tide;
    size_t nranges;
    int named;
};

static inline struct tt_vmas tt_count_vmas(void)
{
    struct tt_vmas v = {0, 0, 0, 0};
    uintptr_t r[64][2];
    size_t nr = 0;
#ifndef TIDE_TEST_GLIBC
    nr = tide_ranges(r, 64);
#endif
    v.nranges = nr;
    if (nr > 64)
        nr = 64;
    char *maps = tt_read_file("/proc/self/maps", NULL);
    if (!maps)
        return (struct tt_vmas){-1, -1, nr, -1};
    for (char *l = maps; *l;) {
        char *nl = strchr(l, '\n');
        uintptr_t lo = 0, hi = 0;
        if (sscanf(l, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2) {
            v.total++;
            for (size_t i = 0; i < nr; i++)
                if (lo < r[i][1] && r[i][0] < hi) {
                    v.tide++;
                    v.named += nl && nl - l >= 12 && memcmp(nl - 12, " [anon:tide]", 12) == 0;
                    break;
                }
        }
        if (!nl)
            break;
        l = nl + 1;
    }
    free(maps);
    return v;
}

/* Whether the kernel names anonymous mappings (PR_SET_VMA_ANON_NAME: Linux 5.17+ built
 * with CONFIG_ANON_VMA_NAME), asked on a page of the test's own. */
static inline bool tt_kernel_names_vmas(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    int r = prctl(0x53564d41 /* PR_SET_VMA */, 0 /* PR_SET_VMA_ANON_NAME */, (unsigned long)p, 4096UL,
                  (unsigned long)"tide-test");
    munmap(p, 4096);
    return r == 0;
}

/* True when [p, p+n) lies inside one of tide's ranges (always true in glibc mode). */
static inline bool tt_in_tide(const void *p, size_t n)
{
#ifdef TIDE_TEST_GLIBC
    (void)p;
    (void)n;
    return true;
#else
    uintptr_t r[64][2];
    size_t nr = tide_ranges(r, 64);
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < nr && i < 64; i++)
        if (a >= r[i][0] && a < r[i][1] && n <= r[i][1] - a)
            return true;
    return false;
#endif
}

/* tide_check(): tide's own walk of its heap, verifying its invariants (0 = sound; it
 * prints the first broken one on stderr).  Always 0 in glibc mode. */
static inline int tt_heap_check(void)
{
#ifdef TIDE_TEST_GLIBC
    return 0;
#else
    return tide_check();
#endif
}

/* tide's statistics now (zeros in glibc mode). */
static inline tide_stats_t tt_stats(void)
{
    tide_stats_t s;
    memset(&s, 0, sizeof s);
#ifndef TIDE_TEST_GLIBC
    tide_stats_get(&s, sizeof s);
#endif
    return s;
}

/* Whether tide_check() passes and the statistics reconcile (active + dirty + lazy + clean
 * + metadata = mapped, and allocated <= active); when not, WHY says what is wrong.  Always
 * true in glibc mode.  Allocates nothing. */
static inline bool tt_heap_sound(char *why, size_t cap)
{
#ifndef TIDE_TEST_GLIBC
    if (tide_check() != 0) {
        snprintf(why, cap, "tide_check() failed (it printed why on stderr)");
        return false;
    }
    tide_stats_t s = tt_stats();
    if (s.active + s.dirty + s.lazy + s.clean + s.held + s.metadata != s.mapped) {
        snprintf(why, cap, "the statistics do not reconcile: %lu + %lu + %lu + %lu + %lu != %lu",
                 (unsigned long)s.active, (unsigned long)s.dirty, (unsigned long)s.lazy, (unsigned long)s.clean,
                 (unsigned long)s.metadata, (unsigned long)s.mapped);
        return false;
    }
    if (s.allocated > s.active) {
        snprintf(why, cap, "allocated %lu > active %lu", (unsigned long)s.allocated, (unsigned long)s.active);
        return false;
    }
#endif
    (void)why, (void)cap;
    return true;
}

/* In a Criterion test: the heap is sound (tt_heap_sound), WHEN saying at which step. */
#define tt_assert_heap_ok(when)                                                        \
    do {                                                                               \
        char tt_why_[256];                                                             \
        cr_assert(tt_heap_sound(tt_why_, sizeof tt_why_), "%s %s", tt_why_, (when));   \
    } while (0)

/* In a Criterion test: FN_(ARG_) run in a forked child (killed as hung after TIMEOUT_S_)
 * must exit 0; otherwise what it wrote on stderr (TT_CHILD_CHECK's line) is the message. */
#define tt_assert_child_ok(fn_, arg_, timeout_s_)                                      \
    do {                                                                               \
        struct tt_child_spec tt_spec_ = {.fn = (fn_), .arg = (arg_), .timeout_s = (timeout_s_)}; \
        struct tt_child tt_c_;                                                         \
        cr_assert(tt_child_run(&tt_spec_, &tt_c_) == 0, "fork: %s", strerror(errno));  \
        char tt_how_[128];                                                             \
        cr_assert(tt_child_exited(&tt_c_, 0), "the child %s:\n%s",                     \
                  tt_child_how(&tt_c_, tt_how_, sizeof tt_how_), tt_c_.err);           \
        tt_child_free(&tt_c_);                                                         \
    } while (0)

/* ------------------------------------------------------------------------------------
 * Failures seen in threads other than Criterion's: Criterion's assertions must run on
 * the test's own thread, so workers record the first failure and stop; the test thread
 * then asserts on it.
 * ---------------------------------------------------------------------------------- */
static char tt_failure[1024];
static atomic_int tt_failed;

static inline void tt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tt_fail(const char *fmt, ...)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&tt_failed, &expected, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tt_failure, sizeof tt_failure, fmt, ap);
    va_end(ap);
}

static inline bool tt_has_failed(void) { return atomic_load_explicit(&tt_failed, memory_order_relaxed); }

/* Prints a figure where `make check` keeps it: the test's log (test/<kind>/<suite>.log). */
#define tt_report(...)                                                                 \
    do {                                                                               \
        fprintf(stderr, "[tide-test] " __VA_ARGS__);                                   \
        fputc('\n', stderr);                                                           \
        fflush(stderr);                                                                \
    } while (0)

/* ------------------------------------------------------------------------------------
 * The configuration matrix (docs/testing.md): `make check` runs the api, unit and system
 * suites again with TIDE_CONF set to each variant of test/local.mk's TIDE_MATRIX, and the
 * programs they run in children get it too (child.h).  A test whose premise a variant
 * excludes says so first thing, with the reason:
 *     tt_skip_under("tcache:off", "counts the objects the thread cache holds");
 * It is then skipped (cr_skip_test), and the matrix reports it, whenever this process's
 * TIDE_CONF sets one of the listed key:value entries (a comma-separated list, each
 * written as tide prints it); a NULL list skips it under any TIDE_CONF at all, for a
 * test about where settings come from.  A test that fails under a variant because tide
 * is wrong there is a bug to fix, not a premise.
 * ---------------------------------------------------------------------------------- */

/* The entry of LIST that this process's TIDE_CONF sets (the last entry of a key wins, as
 * in tide), copied into BUF; NULL when none.  LIST NULL: "any TIDE_CONF" when TIDE_CONF
 * is set at all. */
static inline const char *tt_variant_sets(const char *list, char *buf, size_t cap)
{
    const char *conf = getenv("TIDE_CONF");
    if (!conf || !*conf)
        return NULL;
    if (!list) {
        snprintf(buf, cap, "any TIDE_CONF");
        return buf;
    }
    for (const char *l = list; *l;) {
        size_t n = strcspn(l, ","), k = strcspn(l, ":");
        const char *val = NULL; /* the value TIDE_CONF gives the key l[0..k) */
        size_t vlen = 0;
        if (k < n) {
            for (const char *c = conf; *c;) {
                size_t m = strcspn(c, ",");
                if (m > k && c[k] == ':' && strncmp(c, l, k) == 0) {
                    val = c + k + 1;
                    vlen = m - k - 1;
                }
                c += m + (c[m] == ',');
            }
        }
        if (val && vlen == n - k - 1 && strncmp(val, l + k + 1, vlen) == 0) {
            snprintf(buf, cap, "%.*s", (int)n, l);
            return buf;
        }
        l += n + (l[n] == ',');
    }
    return NULL;
}

#define tt_skip_under(list, why)                                                       \
    do {                                                                               \
        char tt_entry_[128];                                                           \
        if (tt_variant_sets((list), tt_entry_, sizeof tt_entry_))                      \
            cr_skip_test("under %s: %s", tt_entry_, (why));                            \
    } while (0)

/* A short run: TIDE_TEST_SHORT is set, as the configuration matrix and the UBSan copy set
 * it (test/local.mk, test/ubsan.mk).  The default run keeps the rounds that hunt rare
 * interleavings; the reruns check what their configuration or build changes, on the same
 * 2 CPUs.  tt_rounds: the rounds of a long loop, N, or N / 10 (at least 1) in a short run. */
static inline bool tt_short(void)
{
    const char *s = getenv("TIDE_TEST_SHORT");
    return s && *s;
}

static inline long tt_rounds(long n) { return tt_short() ? (n + 9) / 10 : n; }

#endif /* TIDE_TEST_SUPPORT_H */
