/* SPDX-License-Identifier: MIT */
/*
 * kv.c - a key-value store's life as the kernel sees its heap (issue 37): per phase, what
 * the allocator keeps resident, how much of it is on transparent huge pages, what a fork
 * of the process costs, and how long a fresh block takes to allocate and write.  And
 * --mode=tlb: random reads over a large heap of small objects, in ns per read.
 *
 * --mode=life (the default), one key after another:
 *  fill       keys 0, 1, ... each given a value of --min to --max bytes (default 16 B - 4 KiB,
 *             log-uniform: a power-of-two range chosen uniformly, then a size uniform in
 *             it), allocated and written whole, until --bytes (default 1 GiB) are live;
 *  free       a random --free-pct % (60) of the keys deleted, in random order;
 *  overwrite  a random --overwrite-pct % (30) of the keys left, in random order, each
 *             given a larger value (1.5 - 2 x its size): the new block allocated and
 *             written whole, then the old one freed.  Not realloc: a store builds the new
 *             value from the request before it drops the old one (Redis creates the value
 *             object of a SET while it parses the command and frees the old value when it
 *             replaces it), so its allocator sees malloc, then free, never realloc;
 *  idle       --idle-ms (3000) with no allocator call: clock_nanosleep;
 *  after      --after-ops (10000) SETs of random keys left, each a new value of the
 *             fill's sizes, then the old one freed: the calls at which an allocator that
 *             purges only when called gives memory back (jemalloc's decay runs every
 *             1000 allocator events).
 * At the end of each phase, outside its time: Rss, AnonHugePages and LazyFree from
 * /proc/self/smaps_rollup, the VMA count (tide's range's under tide, found through a weak
 * tide_ranges; the process's otherwise), the minor faults of the phase (getrusage), then
 * --forks (3) forks of the process, whose child _exits at once: the median time until
 * fork returns in the parent (fork_ms: copying the page tables, which huge pages shrink
 * 512-fold) and until waitpid returns (fork_wait_ms: also the child's exit, which tears
 * them down).  A fork leaves the parent's pages write-protected: in the next phase the
 * first write to each page takes a fault, as after a store's snapshot (during a real
 * one, a copy of the page).  An allocator that writes to fewer pages takes fewer of
 * them: jemalloc's free writes its metadata, glibc's and tide's the freed block itself;
 * minflt shows them.  --forks=0: phases without forks.
 *
 * Touch latency (fill, overwrite): for every SET, the time from just before its first
 * malloc to just after the last byte of its blocks is written, i.e. allocating and first
 * writing a fresh block.  Every page fault the block costs falls in that window, whether
 * the allocator takes it (a header or metadata on a fresh page: glibc writes a size
 * field after the block) or the caller's write does; so does a purged page faulted back.
 * A 4 KiB fault costs about a microsecond; a 2 MiB one zeroes 512 times as much, 512
 * times less often, and direct compaction can stall it for milliseconds: they show in
 * p99, p99.9 and max (reported in microseconds, nearest rank).  Each sample includes one
 * clock read (clock_ns).
 *
 * --shape=redis stores each key as Redis 7.0 does: per SET the value object (one embstr
 * block of len + 20 bytes up to 44 bytes; above, an sds of len + 4 or 6 bytes, then a
 * 16-byte robj), the key's sds ("key:%010u", 18 bytes) and a 24-byte dict entry, plus the
 * dict's table of entry pointers, doubled when it is full: the new table is calloc'd in
 * the SET that fills the old one; moving the entries and freeing the old table (Redis's
 * incremental rehash) count in the phase's time but in no SET's latency.  A DEL frees the
 * value, the key and the entry.  --min and --max bound the value; --bytes counts every
 * block but the table.  The command's own buffers (query buffer, argv) are not modelled.
 *
 * --mode=tlb: --bytes (1 GiB) of --object-byte blocks (64), each allocated and written
 * whole, then a cycle through --chain (1048576) of them, one picked at random in each
 * 1/chain of the allocation order (so every part of the heap is on it) and linked in a
 * random order; then --reads (chain: one lap) dependent loads follow it: ns per read.  Each
 * load waits for the one before, so a TLB miss (a page-table walk: the page tables of
 * 1 GiB of 4 KiB pages are 2 MiB, of 2 MiB pages 4 KiB) adds to every read's latency
 * instead of overlapping the next.  Nothing is freed: the process exits.
 *
 * The program's own arrays are mmap'd (never the allocator under test) with
 * MADV_NOHUGEPAGE, so AnonHugePages is the allocator's alone; book_kib says how much of
 * the RSS they are.  Contents are checked at the end (every byte of every value; the
 * chain and every object under --mode=tlb): a block that lost its contents exits 2.
 * --threads=2 (the default; a store has background threads: Redis's bio threads) starts
 * a second thread that makes no allocator call (tide's default background:auto starts
 * its purger only in a multithreaded program, as bench/idle explains).  -w PERCENT scales
 * --bytes (and --chain).  Prints "key value" lines; phase figures as PHASE_KEY.
 * Usage: kv [--mode=life|tlb] [--bytes=BYTES] [-w PERCENT] [--min=BYTES] [--max=BYTES]
 *           [--shape=flat|redis] [--free-pct=P] [--overwrite-pct=P] [--idle-ms=MS]
 *           [--after-ops=N] [--forks=N] [--object=BYTES] [--chain=N] [--reads=N]
 *           [--seed=N] [--threads=1|2]                  (BYTES: k, m, g suffixes)
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tide.h"

#include "bench.h"
#include "probe.h"
#include "rng.h"

/* Resolve to the preloaded libtide when there is one, and stay NULL otherwise. */
extern int tide_conf_get(const char *key, char *buf, size_t len) __attribute__((weak));
extern size_t tide_ranges(uintptr_t (*out)[2], size_t max) __attribute__((weak));

#define MAX_FORKS 64
#define MAX_RANGES 32
#define EMBSTR_MAX 44 /* Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT */
#define KEY_SDS 18    /* sdshdr8 (3) + "key:" + 10 digits + NUL */

static struct {
    bool tlb, redis;
    size_t bytes, min, max, object;
    unsigned percent, free_pct, overwrite_pct, forks, threads;
    long idle_ms;
    uint64_t after_ops, chain, reads, seed;
} opt = {
    .bytes = (size_t)1 << 30, .min = 16, .max = 4096, .object = 64, .percent = 100,
    .free_pct = 60, .overwrite_pct = 30, .forks = 3, .threads = 2, .idle_ms = 3000,
    .after_ops = 10000, .chain = 1u << 20, .seed = 1,
};

/* ------------------------------------------------------------ the process itself ---- */

static size_t book_bytes; /* mmap'd for the program's own arrays */

/* The program's arrays: never from the allocator under test, never on huge pages. */
static void *book_alloc(size_t bytes)
{
    bytes = (bytes + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "kv: mmap of %zu bytes for the program's arrays failed\n", bytes);
        exit(1);
    }
    madvise(p, bytes, MADV_NOHUGEPAGE);
    book_bytes += bytes;
    return p;
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct mem {
    long rss_kib, anon_huge_kib, lazyfree_kib;
};

/* From smaps_rollup, with no allocator call. */
static void read_mem(struct mem *m)
{
    char buf[4096];
    if (probe_read_file("/proc/self/smaps_rollup", buf, sizeof buf) <= 0) {
        fprintf(stderr, "kv: cannot read /proc/self/smaps_rollup\n");
        exit(1);
    }
    m->rss_kib = probe_field(buf, "Rss:");
    m->anon_huge_kib = probe_field(buf, "AnonHugePages:");
    m->lazyfree_kib = probe_field(buf, "LazyFree:");
    if (m->rss_kib < 0 || m->anon_huge_kib < 0 || m->lazyfree_kib < 0) {
        fprintf(stderr, "kv: no Rss, AnonHugePages or LazyFree in smaps_rollup\n");
        exit(1);
    }
}

/* tide's range's VMAs under tide, the process's otherwise. */
static long count_vmas(void)
{
    if (tide_ranges) {
        uintptr_t ranges[MAX_RANGES][2];
        size_t n = tide_ranges(ranges, MAX_RANGES);
        long inside = -1;
        if (probe_maps_count((const uintptr_t(*)[2])ranges, n < MAX_RANGES ? n : MAX_RANGES,
                             &inside) < 0)
            return -1;
        return inside;
    }
    return probe_maps_count(NULL, 0, NULL);
}

static long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median times of --forks forks whose child exits at once: until fork returns in the
 * parent, and until waitpid returns. */
static void time_forks(double *fork_ms, double *wait_ms)
{
    double f[MAX_FORKS], w[MAX_FORKS];
    unsigned n = opt.forks;
    *fork_ms = *wait_ms = -1;
    if (n == 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        uint64_t t1 = now_ns();
        if (pid < 0) {
            fprintf(stderr, "kv: fork: %s\n", strerror(errno));
            exit(1);
        }
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        uint64_t t2 = now_ns();
        f[i] = (double)(t1 - t0) * 1e-6;
        w[i] = (double)(t2 - t0) * 1e-6;
    }
    qsort(f, n, sizeof f[0], compare_doubles);
    qsort(w, n, sizeof w[0], compare_doubles);
    *fork_ms = f[n / 2];
    *wait_ms = w[n / 2];
}

/* ------------------------------------------------------------------- latencies ---- */

static uint32_t *lat; /* one sample per SET of the phase, in ns */
static size_t nlat;

static inline void record(uint64_t t0, uint64_t t1)
{
    uint64_t d = t1 - t0;
    lat[nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/* The K-th smallest of A[0..N) (0-based), reordering A (quickselect). */
static uint32_t select_kth(uint32_t *a, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t pivot = a[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < pivot)
                i++;
            while (a[j] > pivot)
                j--;
            if (i <= j) {
                uint32_t t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return a[k];
    }
    return a[k];
}

/* Nearest rank: the smallest sample with at least P of them at or below it, in us. */
static double percentile_us(double p)
{
    size_t rank = (size_t)(p * (double)nlat + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > nlat)
        rank = nlat;
    return select_kth(lat, nlat, rank - 1) * 1e-3;
}

/* --------------------------------------------------------------------- phases ---- */

enum { FILL, FREE, OVERWRITE, IDLE, AFTER, NPHASES };
static const char *const phase_name[NPHASES] = { "fill", "free", "overwrite", "idle", "after" };

struct phase {
    uint64_t ops;
    double seconds;
    uint64_t live_bytes, blocks;
    struct mem mem;
    long vmas, minflt;
    double fork_ms, fork_wait_ms;
    bool touch; /* the latencies below were measured */
    double p50, p99, p999, max;
};
static struct phase phases[NPHASES];

static uint64_t live_bytes, live_blocks;

static void *xmalloc(size_t size)
{
    void *p = malloc(size);
    if (!p) {
        fprintf(stderr, "kv: malloc(%zu) failed\n", size);
        exit(1);
    }
    live_bytes += size;
    live_blocks++;
    return p;
}

static void xfree(void *p, size_t size)
{
    free(p);
    live_bytes -= size;
    live_blocks--;
}

static uint64_t phase_t0;
static long phase_flt0;

static void phase_start(void)
{
    nlat = 0;
    phase_flt0 = minor_faults();
    phase_t0 = now_ns();
}

/* The phase's time stops here; the probes and forks that follow are outside it. */
static void phase_end(int which, uint64_t ops, bool touch)
{
    struct phase *ph = &phases[which];
    ph->seconds = (double)(now_ns() - phase_t0) * 1e-9;
    ph->minflt = minor_faults() - phase_flt0;
    ph->ops = ops;
    ph->live_bytes = live_bytes;
    ph->blocks = live_blocks;
    read_mem(&ph->mem);
    ph->vmas = count_vmas();
    ph->touch = touch && nlat > 0;
    if (ph->touch) {
        ph->p50 = percentile_us(0.50);
        ph->p99 = percentile_us(0.99);
        ph->p999 = percentile_us(0.999);
        uint32_t max = 0;
        for (size_t i = 0; i < nlat; i++)
            max = lat[i] > max ? lat[i] : max;
        ph->max = max * 1e-3;
    }
    time_forks(&ph->fork_ms, &ph->fork_wait_ms);
}

/* ---------------------------------------------------------------------- values ---- */

static unsigned lg_floor(size_t x)
{
    unsigned lg = 0;
    while (x >>= 1)
        lg++;
    return lg;
}

/* Log-uniform in [min, max): a power-of-two range chosen uniformly, then a size uniform
 * in it. */
static size_t value_size(rng_t *rng)
{
    unsigned lo = lg_floor(opt.min), hi = lg_floor(opt.max);
    unsigned e = lo + (unsigned)rng_below(rng, hi - lo);
    return ((size_t)1 << e) + (size_t)rng_below(rng, (uint64_t)1 << e);
}

/* A larger value: 1.5 - 2 x the old size. */
static size_t larger_size(rng_t *rng, size_t old)
{
    return old + old / 2 + (size_t)rng_below(rng, old / 2 + 1);
}

/* The byte every byte of key K's value of SIZE bytes holds: never 0 (a page lost to a
 * fresh zero page cannot pass), and a new value of a key gets another one (its size
 * differs), so a stale block cannot pass for the current one. */
static inline unsigned char tag(uint64_t k, size_t size)
{
    return (unsigned char)(((uint32_t)k * 0x9e3779b1u + (uint32_t)size * 0x85ebca6bu) >> 24) | 1;
}

static uint32_t *vsize; /* per key: its value's length; 0 once deleted */
static void **slot;     /* per key: flat: the value block; redis: the dict entry */
static uint32_t *perm;  /* the keys in random order: the first free_pct % are deleted */
static uint64_t nkeys;

/* Redis 7.0's objects (server.h, dict.h, sds.h), 64-bit. */
struct robj {
    uint32_t type_encoding_lru;
    int32_t refcount;
    unsigned char *ptr; /* the sds's data */
};
struct entry {
    unsigned char *key; /* the key sds's data */
    struct robj *val;
    struct entry *next;
};
enum { OBJ_EMBSTR = 1, OBJ_RAW = 2 };

static size_t sds_header(size_t len)
{
    return len < 256 ? 3 : len < 65536 ? 5 : 9;
}

static void sds_write(unsigned char *s, size_t hdr, size_t len, unsigned char fill)
{
    memset(s, (int)(len & 0xff), hdr - 1); /* len and alloc fields */
    s[hdr - 1] = (unsigned char)hdr;       /* flags */
    memset(s + hdr, fill, len);
    s[hdr + len] = 0;
}

/* A Redis string object holding key K's value of LEN bytes (createStringObject). */
static struct robj *new_robj(uint64_t k, size_t len)
{
    unsigned char t = tag(k, len);
    if (len <= EMBSTR_MAX) {
        struct robj *o = xmalloc(sizeof *o + 3 + len + 1);
        unsigned char *s = (unsigned char *)(o + 1);
        sds_write(s, 3, len, t);
        o->type_encoding_lru = OBJ_EMBSTR;
        o->refcount = 1;
        o->ptr = s + 3;
        return o;
    }
    size_t hdr = sds_header(len);
    unsigned char *s = xmalloc(hdr + len + 1);
    sds_write(s, hdr, len, t);
    struct robj *o = xmalloc(sizeof *o);
    o->type_encoding_lru = OBJ_RAW;
    o->refcount = 1;
    o->ptr = s + hdr;
    return o;
}

static void free_robj(struct robj *o, size_t len)
{
    if (o->type_encoding_lru == OBJ_EMBSTR) {
        xfree(o, sizeof *o + 3 + len + 1);
        return;
    }
    size_t hdr = sds_header(len);
    xfree(o->ptr - hdr, hdr + len + 1);
    xfree(o, sizeof *o);
}

/* The dict's table (in the heap under test): entry pointers indexed by key, doubled when
 * full; while a doubling is pending, the new table is allocated but the entries not yet
 * moved. */
static struct entry **table, **old_table;
static uint64_t table_size, old_table_size;

/* Redis's rehash, done outside any SET's latency. */
static void finish_rehash(void)
{
    if (!old_table)
        return;
    memcpy(table, old_table, old_table_size * sizeof *table);
    xfree(old_table, old_table_size * sizeof *table);
    old_table = NULL;
}

/* SET of a new key K (fill): its blocks, allocated and written; timed. */
static void set_new_key(uint64_t k, size_t len)
{
    uint64_t t0 = now_ns();
    if (!opt.redis) {
        unsigned char *p = xmalloc(len);
        memset(p, tag(k, len), len);
        slot[k] = p;
        record(t0, now_ns());
        return;
    }
    struct robj *val = new_robj(k, len);
    unsigned char *key = xmalloc(KEY_SDS);
    sds_write(key, 3, KEY_SDS - 4, 0);
    memcpy(key + 3, "key:", 4);
    for (uint64_t i = 13, x = k; i >= 4; i--, x /= 10) /* "%010u" */
        key[3 + i] = (unsigned char)('0' + x % 10);
    if (k >= table_size) { /* full: calloc the next table (dictExpand) */
        uint64_t size = table_size ? 2 * table_size : 4;
        struct entry **t = calloc(size, sizeof *t);
        if (!t) {
            fprintf(stderr, "kv: calloc of a %" PRIu64 "-entry table failed\n", size);
            exit(1);
        }
        live_bytes += size * sizeof *t;
        live_blocks++;
        old_table = table, old_table_size = table_size;
        table = t, table_size = size;
    }
    struct entry *e = xmalloc(sizeof *e);
    e->key = key + 3;
    e->val = val;
    e->next = NULL;
    table[k] = e;
    slot[k] = e;
    record(t0, now_ns());
    finish_rehash();
}

/* SET of key K, which exists, to a value of LEN bytes: the new value object, then the
 * old one freed.  Timed until the new one is written. */
static void set_existing_key(uint64_t k, size_t len)
{
    uint64_t t0 = now_ns();
    if (!opt.redis) {
        unsigned char *p = xmalloc(len);
        memset(p, tag(k, len), len);
        record(t0, now_ns());
        xfree(slot[k], vsize[k]);
        slot[k] = p;
    } else {
        struct robj *val = new_robj(k, len);
        record(t0, now_ns());
        struct entry *e = table[k];
        free_robj(e->val, vsize[k]);
        e->val = val;
    }
    vsize[k] = (uint32_t)len;
}

/* DEL of key K. */
static void delete_key(uint64_t k)
{
    if (!opt.redis) {
        xfree(slot[k], vsize[k]);
    } else {
        struct entry *e = table[k];
        table[k] = NULL;
        free_robj(e->val, vsize[k]);
        xfree(e->key - 3, KEY_SDS);
        xfree(e, sizeof *e);
    }
    slot[k] = NULL;
    vsize[k] = 0;
}

static bool bytes_are(const unsigned char *p, unsigned char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != c)
            return false;
    return true;
}

/* Whether key K (live) still holds what was written. */
static bool key_intact(uint64_t k)
{
    size_t len = vsize[k];
    if (!opt.redis)
        return bytes_are(slot[k], tag(k, len), len);
    struct entry *e = slot[k];
    if (table[k] != e || !e->val || e->val->refcount != 1)
        return false;
    char want[16];
    snprintf(want, sizeof want, "key:%010" PRIu64, k);
    if (memcmp(e->key, want, 14) != 0 || e->key[14] != 0)
        return false;
    const unsigned char *s = e->val->ptr;
    return s[-1] == sds_header(len) && bytes_are(s, tag(k, len), len) && s[len] == 0;
}

static void sleep_ms(long ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L)
        t.tv_sec++, t.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
        ;
}

/* The bytes key K's blocks take (the table aside). */
static size_t key_bytes(size_t len)
{
    if (!opt.redis)
        return len;
    size_t val = len <= EMBSTR_MAX ? sizeof(struct robj) + 3 + len + 1
                                   : sds_header(len) + len + 1 + sizeof(struct robj);
    return val + KEY_SDS + sizeof(struct entry);
}

static void print_phases(void)
{
    for (int i = 0; i < NPHASES; i++) {
        const struct phase *ph = &phases[i];
        const char *n = phase_name[i];
        printf("%s_ops %" PRIu64 "\n", n, ph->ops);
        printf("%s_s %.6f\n", n, ph->seconds);
        if (ph->ops)
            printf("%s_ops_per_s %.0f\n", n, (double)ph->ops / ph->seconds);
        printf("%s_live_bytes %" PRIu64 "\n", n, ph->live_bytes);
        printf("%s_blocks %" PRIu64 "\n", n, ph->blocks);
        printf("%s_rss_kib %ld\n", n, ph->mem.rss_kib);
        printf("%s_anon_huge_kib %ld\n", n, ph->mem.anon_huge_kib);
        printf("%s_lazyfree_kib %ld\n", n, ph->mem.lazyfree_kib);
        printf("%s_vmas %ld\n", n, ph->vmas);
        printf("%s_minflt %ld\n", n, ph->minflt);
        if (ph->fork_ms >= 0) {
            printf("%s_fork_ms %.4f\n", n, ph->fork_ms);
            printf("%s_fork_wait_ms %.4f\n", n, ph->fork_wait_ms);
        }
        if (ph->touch) {
            printf("%s_touch_p50_us %.3f\n", n, ph->p50);
            printf("%s_touch_p99_us %.3f\n", n, ph->p99);
            printf("%s_touch_p999_us %.3f\n", n, ph->p999);
            printf("%s_touch_max_us %.3f\n", n, ph->max);
        }
    }
}

static int run_life(void)
{
    rng_t sizes, order, growth, after;
    rng_seed(&sizes, opt.seed, 0);
    rng_seed(&order, opt.seed, 1);
    rng_seed(&growth, opt.seed, 2);
    rng_seed(&after, opt.seed, 3);

    /* The keys and their sizes, drawn first so that the arrays fit exactly. */
    rng_t count = sizes;
    uint64_t total = 0;
    nkeys = 0;
    while (total < opt.bytes) {
        total += key_bytes(value_size(&count));
        nkeys++;
    }
    if (nkeys > UINT32_MAX) {
        fprintf(stderr, "kv: more than 2^32 keys: raise --min or lower --bytes\n");
        return 1;
    }
    vsize = book_alloc(nkeys * sizeof *vsize);
    slot = book_alloc(nkeys * sizeof *slot);
    perm = book_alloc(nkeys * sizeof *perm);
    const uint64_t nfree = nkeys * opt.free_pct / 100;
    const uint64_t nover = (nkeys - nfree) * opt.overwrite_pct / 100;
    const uint64_t nlat_max = nkeys > opt.after_ops ? nkeys : opt.after_ops;
    lat = book_alloc(nlat_max * sizeof *lat);
    for (uint64_t k = 0; k < nkeys; k++)
        vsize[k] = (uint32_t)value_size(&sizes);
    for (uint64_t i = 0; i < nkeys; i++) { /* Fisher-Yates */
        uint64_t j = rng_below(&order, i + 1);
        perm[i] = perm[j];
        perm[j] = (uint32_t)i;
    }
    /* One clock read, the floor of every latency sample. */
    uint64_t c0 = now_ns();
    for (int i = 0; i < 1000; i++)
        (void)now_ns();
    const double clock_ns = (double)(now_ns() - c0) / 1001;

    phase_start();
    for (uint64_t k = 0; k < nkeys; k++)
        set_new_key(k, vsize[k]);
    phase_end(FILL, nkeys, true);

    phase_start();
    for (uint64_t i = 0; i < nfree; i++)
        delete_key(perm[i]);
    phase_end(FREE, nfree, false);

    phase_start();
    for (uint64_t i = nfree; i < nfree + nover; i++)
        set_existing_key(perm[i], larger_size(&growth, vsize[perm[i]]));
    phase_end(OVERWRITE, nover, true);

    phase_start();
    sleep_ms(opt.idle_ms);
    phase_end(IDLE, 0, false);

    phase_start();
    const uint64_t nleft = nkeys - nfree;
    for (uint64_t i = 0; i < opt.after_ops && nleft; i++)
        set_existing_key(perm[nfree + rng_below(&after, nleft)], value_size(&after));
    phase_end(AFTER, nleft ? opt.after_ops : 0, false);

    /* Every live key, every byte.  Nothing is freed: the process exits. */
    uint64_t bad = 0;
    for (uint64_t i = nfree; i < nkeys; i++) {
        uint64_t k = perm[i];
        if (!key_intact(k) && bad++ < 5)
            fprintf(stderr, "kv: key %" PRIu64 " (%" PRIu32 " bytes) lost its contents\n", k,
                    vsize[k]);
    }

    printf("mode life\n");
    printf("shape %s\n", opt.redis ? "redis" : "flat");
    printf("keys %" PRIu64 "\n", nkeys);
    printf("value_min %zu\n", opt.min);
    printf("value_max %zu\n", opt.max);
    printf("idle_ms %ld\n", opt.idle_ms);
    printf("forks %u\n", opt.forks);
    printf("clock_ns %.1f\n", clock_ns);
    print_phases();
    printf("bad %" PRIu64 "\n", bad);
    return bad ? 2 : 0;
}

/* ------------------------------------------------------------------- --mode=tlb ---- */

static int run_tlb(void)
{
    const size_t nobj = opt.bytes / opt.object;
    if (nobj < 2) {
        fprintf(stderr, "kv: --bytes must hold at least 2 objects\n");
        return 1;
    }
    const uint64_t chain = opt.chain < nobj ? opt.chain : nobj;
    const uint64_t reads = opt.reads ? opt.reads : chain;
    unsigned char **obj = book_alloc(nobj * sizeof *obj);
    uint32_t *pick = book_alloc(chain * sizeof *pick);
    uint32_t *next = book_alloc(chain * sizeof *next);
    rng_t rng;
    rng_seed(&rng, opt.seed, 4);

    const long flt0 = minor_faults();
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < nobj; i++) {
        obj[i] = xmalloc(opt.object);
        memset(obj[i], tag(i, opt.object), opt.object);
    }
    const double alloc_s = (double)(now_ns() - t0) * 1e-9;
    const long alloc_flt = minor_faults() - flt0;

    /* One object in each 1/chain of the allocation order, linked in a single random cycle
     * (Sattolo's shuffle). */
    for (uint64_t j = 0; j < chain; j++) {
        uint64_t lo = j * nobj / chain, hi = (j + 1) * nobj / chain;
        pick[j] = (uint32_t)(lo + rng_below(&rng, hi - lo));
        next[j] = (uint32_t)j;
    }
    for (uint64_t i = chain - 1; i > 0; i--) {
        uint64_t j = rng_below(&rng, i);
        uint32_t t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    for (uint64_t j = 0; j < chain; j++)
        memcpy(obj[pick[j]], &obj[pick[next[j]]], sizeof(void *));

    struct mem mem;
    read_mem(&mem);
    const long vmas = count_vmas();

    const long flt1 = minor_faults();
    void *p = obj[pick[0]];
    t0 = now_ns();
    for (uint64_t r = 0; r < reads; r++)
        p = *(void **)p;
    const uint64_t t1 = now_ns();
    bench_escape(p);
    const long chase_flt = minor_faults() - flt1;

    /* The cycle closes after exactly `chain` steps, through the objects picked, whose
     * other bytes are intact; and every object's last byte is its own. */
    uint64_t bad = 0, steps = 0;
    void *start = obj[pick[0]];
    p = start;
    do {
        p = *(void **)p;
        steps++;
    } while (p != start && steps <= chain);
    if (steps != chain) {
        fprintf(stderr, "kv: the chain closed after %" PRIu64 " steps, not %" PRIu64 "\n", steps,
                chain);
        bad++;
    }
    for (uint64_t j = 0; j < chain; j++) {
        const unsigned char *o = obj[pick[j]];
        if (!bytes_are(o + sizeof(void *), tag(pick[j], opt.object), opt.object - sizeof(void *))
            && bad++ < 5)
            fprintf(stderr, "kv: object %" PRIu32 " lost its contents\n", pick[j]);
    }
    for (size_t i = 0; i < nobj; i++)
        if (obj[i][opt.object - 1] != tag(i, opt.object) && bad++ < 5)
            fprintf(stderr, "kv: object %zu lost its last byte\n", i);

    printf("mode tlb\n");
    printf("objects %zu\n", nobj);
    printf("object_bytes %zu\n", opt.object);
    printf("heap_bytes %zu\n", nobj * opt.object);
    printf("chain %" PRIu64 "\n", chain);
    printf("reads %" PRIu64 "\n", reads);
    printf("alloc_s %.6f\n", alloc_s);
    printf("alloc_minflt %ld\n", alloc_flt);
    printf("read_s %.6f\n", (double)(t1 - t0) * 1e-9);
    printf("ns_per_read %.3f\n", (double)(t1 - t0) / (double)reads);
    printf("read_minflt %ld\n", chase_flt);
    printf("rss_kib %ld\n", mem.rss_kib);
    printf("anon_huge_kib %ld\n", mem.anon_huge_kib);
    printf("vmas %ld\n", vmas);
    printf("bad %" PRIu64 "\n", bad);
    return bad ? 2 : 0;
}

/* ----------------------------------------------------------------------- main ---- */

/* The second thread of --threads=2: it makes no allocator call of its own. */
static pthread_mutex_t waiter_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t waiter_cv = PTHREAD_COND_INITIALIZER;
static int waiter_done;

static void *waiter(void *arg)
{
    pthread_mutex_lock(&waiter_mu);
    while (!waiter_done)
        pthread_cond_wait(&waiter_cv, &waiter_mu);
    pthread_mutex_unlock(&waiter_mu);
    return arg;
}

static void usage(void)
{
    fprintf(stderr, "usage: kv [--mode=life|tlb] [--bytes=BYTES] [-w PERCENT] [--min=BYTES] "
                    "[--max=BYTES] [--shape=flat|redis] [--free-pct=P] [--overwrite-pct=P] "
                    "[--idle-ms=MS] [--after-ops=N] [--forks=N] [--object=BYTES] [--chain=N] "
                    "[--reads=N] [--seed=N] [--threads=1|2]\n");
    exit(1);
}

static void fail(const char *what)
{
    fprintf(stderr, "kv: %s\n", what);
    exit(1);
}

/* A count that may be 0. */
static uint64_t parse_count0(const char *arg, const char *what)
{
    return strcmp(arg, "0") == 0 ? 0 : bench_parse_count(arg, what);
}

int main(int argc, char **argv)
{
    enum { O_MODE = 256, O_BYTES, O_MIN, O_MAX, O_SHAPE, O_FREE, O_OVER, O_IDLE, O_AFTER,
           O_FORKS, O_OBJECT, O_CHAIN, O_READS, O_SEED, O_THREADS };
    static const struct option longopts[] = {
        { "mode", required_argument, NULL, O_MODE },
        { "bytes", required_argument, NULL, O_BYTES },
        { "min", required_argument, NULL, O_MIN },
        { "max", required_argument, NULL, O_MAX },
        { "shape", required_argument, NULL, O_SHAPE },
        { "free-pct", required_argument, NULL, O_FREE },
        { "overwrite-pct", required_argument, NULL, O_OVER },
        { "idle-ms", required_argument, NULL, O_IDLE },
        { "after-ops", required_argument, NULL, O_AFTER },
        { "forks", required_argument, NULL, O_FORKS },
        { "object", required_argument, NULL, O_OBJECT },
        { "chain", required_argument, NULL, O_CHAIN },
        { "reads", required_argument, NULL, O_READS },
        { "seed", required_argument, NULL, O_SEED },
        { "threads", required_argument, NULL, O_THREADS },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "w:", longopts, NULL)) != -1) {
        switch (c) {
        case 'w': opt.percent = (unsigned)bench_parse_count(optarg, "-w"); break;
        case O_MODE:
            if (strcmp(optarg, "life") && strcmp(optarg, "tlb"))
                fail("--mode: life or tlb");
            opt.tlb = optarg[0] == 't';
            break;
        case O_BYTES: opt.bytes = bench_parse_bytes(optarg, "kv", "--bytes"); break;
        case O_MIN: opt.min = bench_parse_bytes(optarg, "kv", "--min"); break;
        case O_MAX: opt.max = bench_parse_bytes(optarg, "kv", "--max"); break;
        case O_SHAPE:
            if (strcmp(optarg, "flat") && strcmp(optarg, "redis"))
                fail("--shape: flat or redis");
            opt.redis = optarg[0] == 'r';
            break;
        case O_FREE: opt.free_pct = (unsigned)parse_count0(optarg, "--free-pct"); break;
        case O_OVER: opt.overwrite_pct = (unsigned)parse_count0(optarg, "--overwrite-pct"); break;
        case O_IDLE: opt.idle_ms = (long)parse_count0(optarg, "--idle-ms"); break;
        case O_AFTER: opt.after_ops = parse_count0(optarg, "--after-ops"); break;
        case O_FORKS: opt.forks = (unsigned)parse_count0(optarg, "--forks"); break;
        case O_OBJECT: opt.object = bench_parse_bytes(optarg, "kv", "--object"); break;
        case O_CHAIN: opt.chain = bench_parse_count(optarg, "--chain"); break;
        case O_READS: opt.reads = bench_parse_count(optarg, "--reads"); break;
        case O_SEED: opt.seed = bench_parse_count(optarg, "--seed"); break;
        case O_THREADS: opt.threads = (unsigned)bench_parse_count(optarg, "--threads"); break;
        default: usage();
        }
    }
    if (optind < argc)
        usage();
    if ((opt.min & (opt.min - 1)) || (opt.max & (opt.max - 1)) || opt.min >= opt.max)
        fail("--min and --max must be powers of two, --min < --max");
    if (opt.max > ((size_t)1 << 30))
        fail("--max: at most 1g");
    if (opt.free_pct > 100 || opt.overwrite_pct > 100)
        fail("--free-pct and --overwrite-pct: 0 to 100");
    if (opt.forks > MAX_FORKS)
        fail("--forks: at most 64");
    if (opt.object < 16 || opt.object % sizeof(void *))
        fail("--object: a multiple of 8, at least 16");
    if (opt.threads != 1 && opt.threads != 2)
        fail("--threads must be 1 or 2");
    opt.bytes = bench_scaled(opt.bytes, opt.percent);
    opt.chain = bench_scaled(opt.chain, opt.percent);
    if (opt.tlb && opt.bytes / opt.object > UINT32_MAX)
        fail("--bytes / --object: at most 2^32 objects");

    pthread_t waiter_thread;
    if (opt.threads == 2 && pthread_create(&waiter_thread, NULL, waiter, NULL) != 0)
        fail("pthread_create failed");

    int status = opt.tlb ? run_tlb() : run_life();

    if (opt.threads == 2) {
        pthread_mutex_lock(&waiter_mu);
        waiter_done = 1;
        pthread_cond_signal(&waiter_cv);
        pthread_mutex_unlock(&waiter_mu);
        pthread_join(waiter_thread, NULL);
    }
    if (status == 1)
        return 1;
    printf("threads %u\n", opt.threads);
    printf("seed %" PRIu64 "\n", opt.seed);
    printf("book_kib %zu\n", book_bytes / 1024);
    printf("vmas_scope %s\n", tide_ranges ? "tide" : "process");
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    if (tide_conf_get) {
        static const char *const keys[] = { "thp", "purge", "decay_ms", "background" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            char value[64];
            if (tide_conf_get(keys[i], value, sizeof value) == 0)
                printf("tide_%s %s\n", keys[i], value);
        }
    }
    printf("allocator %s\n", probe_malloc_provider());
    if (status == 2)
        fprintf(stderr, "kv: blocks lost their contents\n");
    if (fflush(stdout) != 0)
        return 1;
    return status;
}
