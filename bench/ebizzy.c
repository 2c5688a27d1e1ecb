/* SPDX-License-Identifier: MIT */
/*
 * ebizzy.c - a clone of ebizzy 0.3 (Valerie Henson, 2006-2007), written from the
 * description in the team's notes, plus a few extensions for tide's benchmarks.
 *
 * Worker threads repeatedly pick a chunk of memory, copy it into a freshly allocated
 * buffer, search the copy for a key and free the buffer: one large malloc and free per
 * "record".  The figure that matters is how the allocator's purge policy meets the
 * kernel: returning the freed buffer at once means faulting every page of the next copy.
 *
 * By default the clone makes the same fixed "random" choices as ebizzy 0.3 (chunk 0,
 * key 0, 8-byte copies with -R) so that its numbers compare with published ones.
 * It never links libtide; the allocator under test is chosen with LD_PRELOAD.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tide.h"

#include "probe.h"
#include "rng.h"

/* Resolves to the preloaded libtide when there is one, and stays NULL otherwise. */
extern int tide_stats_get(tide_stats_t *out, size_t stats_size) __attribute__((weak));

typedef uint64_t record_t; /* a chunk is an array of records holding their own index */
#define RECORD_SIZE sizeof(record_t)
#define FORK_SAMPLES 7

static struct options {
    unsigned threads;   /* -t */
    unsigned chunks;    /* -n */
    size_t chunk_size;  /* -s */
    unsigned seconds;   /* -S */
    bool random_size;   /* -R */
    bool always_mmap;   /* -m */
    bool never_mmap;    /* -M */
    bool protect;       /* -p */
    bool holes;         /* -P */
    bool touch_only;    /* -T */
    bool byte_copy;     /* -l */
    bool linear_search; /* -z */
    int verbose;        /* -v, -vv, -vvv */
    bool random;        /* --random */
    uint64_t seed;
    size_t realloc_step; /* --realloc, 0 = off */
    bool time_fork;      /* --fork */
    bool json;           /* --json */
} opt = {
    .chunks = 10,
    .chunk_size = 524288,
    .seconds = 10,
};

enum { PHASE_WAIT, PHASE_RUN, PHASE_STOP };
static atomic_int phase = PHASE_WAIT;

static record_t **chunks;
static size_t page_size;

struct worker {
    pthread_t thread;
    unsigned index;
    rng_t rng;
    uint64_t records;
} __attribute__((aligned(64))); /* no false sharing between the workers' counters */

/* ---------------------------------------------------------------- command line ---- */

static unsigned default_threads(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? 2 * (unsigned)cpus : 2;
}

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: ebizzy [options]\n"
            "  -t N   worker threads (default: 2 x online CPUs = %u)\n"
            "  -n N   number of source chunks (default 10)\n"
            "  -s N   chunk size in bytes, at least 8 (default 524288)\n"
            "  -S N   seconds to run (default 10)\n"
            "  -R     copy a random-sized prefix of the chunk instead of all of it\n"
            "  -m     bypass the allocator: every buffer is its own mmap/munmap\n"
            "  -M     glibc only: mallopt(M_MMAP_MAX, 0) (not with -m)\n"
            "  -p     after setup, mprotect(PROT_READ) every even-numbered chunk\n"
            "  -P     during setup, put a one-page hole after each chunk, then free the holes\n"
            "  -T     only touch one byte per page of each buffer (no copy, no search)\n"
            "  -l     copy with a byte loop instead of memcpy\n"
            "  -z     linear search instead of binary search\n"
            "  -v     more output (-vv per-thread counts, -vvv a line per record)\n"
            "extensions (not in ebizzy 0.3):\n"
            "  --random[=SEED]  real, seeded per-thread choices of chunk, key and -R size\n"
            "                   (default: ebizzy 0.3's fixed choices: chunk 0, key 0,\n"
            "                   8-byte copies with -R; no SEED: seeded from the clock)\n"
            "  --realloc=STEP   build each copy by growing it with realloc, STEP bytes at a\n"
            "                   time, copying each step's slice in (not with -m)\n"
            "  --fork           at the end, time fork() of the process (median of %d)\n"
            "  --json           print one JSON object with every figure on stdout\n"
            "  --help           print this text\n"
            "Always reported: records/s, real, user and sys seconds of the timed window,\n"
            "peak RSS, the VMA count, the malloc provider and, under tide, its purge counters.\n",
            default_threads(), FORK_SAMPLES);
}

/* Print what is wrong (unless fmt is NULL), then the usage, and exit 1. */
static void __attribute__((noreturn, format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fputs("ebizzy: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    print_usage(stderr);
    exit(1);
}

/* A positive decimal integer no larger than max; anything else is a usage error. */
static uint64_t parse_count(const char *arg, uint64_t max, const char *name)
{
    char *end;
    if (arg[0] < '0' || arg[0] > '9')
        usage_error("%s: invalid value '%s'", name, arg);
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (errno || *end || v > max)
        usage_error("%s: invalid value '%s'", name, arg);
    if (v == 0)
        usage_error("%s must not be 0", name);
    return v;
}

enum { OPT_RANDOM = 256, OPT_REALLOC, OPT_FORK, OPT_JSON, OPT_HELP };

static void parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "random", optional_argument, NULL, OPT_RANDOM },
        { "realloc", required_argument, NULL, OPT_REALLOC },
        { "fork", no_argument, NULL, OPT_FORK },
        { "json", no_argument, NULL, OPT_JSON },
        { "help", no_argument, NULL, OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    bool seeded = false;
    int c;

    opt.threads = default_threads();
    while ((c = getopt_long(argc, argv, "t:n:s:S:RmMpPTlzv", longopts, NULL)) != -1) {
        switch (c) {
        case 't': opt.threads = (unsigned)parse_count(optarg, 65536, "-t"); break;
        case 'n': opt.chunks = (unsigned)parse_count(optarg, UINT32_MAX, "-n"); break;
        case 's': opt.chunk_size = (size_t)parse_count(optarg, SIZE_MAX, "-s"); break;
        case 'S': opt.seconds = (unsigned)parse_count(optarg, 1000000, "-S"); break;
        case 'R': opt.random_size = true; break;
        case 'm': opt.always_mmap = true; break;
        case 'M': opt.never_mmap = true; break;
        case 'p': opt.protect = true; break;
        case 'P': opt.holes = true; break;
        case 'T': opt.touch_only = true; break;
        case 'l': opt.byte_copy = true; break;
        case 'z': opt.linear_search = true; break;
        case 'v': opt.verbose++; break;
        case OPT_RANDOM:
            opt.random = true;
            if (optarg) {
                char *end;
                errno = 0;
                opt.seed = strtoull(optarg, &end, 0);
                if (errno || !*optarg || *end || optarg[0] == '-')
                    usage_error("invalid seed '%s'", optarg);
                seeded = true;
            }
            break;
        case OPT_REALLOC:
            opt.realloc_step = (size_t)parse_count(optarg, SIZE_MAX, "--realloc");
            break;
        case OPT_FORK: opt.time_fork = true; break;
        case OPT_JSON: opt.json = true; break;
        case OPT_HELP:
            print_usage(stdout);
            exit(0);
        default: /* getopt has already named the bad option */
            usage_error(NULL);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (opt.chunk_size < RECORD_SIZE)
        usage_error("-s %zu: a chunk must hold at least one 8-byte record", opt.chunk_size);
    if (opt.always_mmap && opt.never_mmap)
        usage_error("-m and -M cannot be used together");
    if (opt.always_mmap && opt.realloc_step)
        usage_error("--realloc needs the allocator: it cannot be used with -m");
    if (opt.random && !seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        opt.seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid();
    }
}

/* ------------------------------------------------------------------- buffers ---- */

static void __attribute__((noreturn)) die_alloc(const char *call, size_t size)
{
    fprintf(stderr, "ebizzy: %s of %zu bytes failed: %s\n", call, size, strerror(errno));
    exit(1);
}

static void *buffer_alloc(size_t size)
{
    if (opt.always_mmap) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            die_alloc("mmap", size);
        return p;
    }
    void *p = malloc(size);
    if (!p)
        die_alloc("malloc", size);
    return p;
}

static void buffer_free(void *p, size_t size)
{
    if (opt.always_mmap)
        munmap(p, size);
    else
        free(p);
}

/* Bytes [from, to) of a copy: copied from the chunk, or with -T one byte written per page. */
static void fill(char *copy, const char *src, size_t from, size_t to)
{
    if (opt.touch_only) {
        for (size_t i = (from + page_size - 1) / page_size * page_size; i < to; i += page_size)
            copy[i] = 1;
    } else if (!opt.byte_copy) {
        memcpy(copy + from, src + from, to - from);
    } else {
        for (size_t i = from; i < to; i++) {
            copy[i] = src[i];
            /* Hide i from the optimiser so that -l stays a byte loop (no memcpy, no SIMD). */
            __asm__("" : "+r"(i));
        }
    }
}

/* --realloc: grow the copy step by step, filling each new slice as it arrives. */
static char *build_by_realloc(const char *src, size_t size)
{
    char *copy = NULL;
    for (size_t off = 0; off < size;) {
        size_t end = size - off > opt.realloc_step ? off + opt.realloc_step : size;
        char *grown = realloc(copy, end);
        if (!grown)
            die_alloc("realloc", end);
        copy = grown;
        fill(copy, src, off, end);
        off = end;
    }
    return copy;
}

/* ------------------------------------------------------------------- records ---- */

static int compare_records(const void *a, const void *b)
{
    record_t x = *(const record_t *)a, y = *(const record_t *)b;
    return (x > y) - (x < y);
}

static const record_t *find_key(const record_t *records, size_t n, record_t key)
{
    if (!opt.linear_search)
        return bsearch(&key, records, n, RECORD_SIZE, compare_records);
    for (size_t i = 0; i < n; i++)
        if (records[i] == key)
            return &records[i];
    return NULL;
}

/* A choice in [0, n).  ebizzy 0.3's generator multiplies a state that starts at 0, so
 * every choice it makes is 0; the default keeps that so that the numbers compare. */
static inline uint64_t choose(struct worker *w, uint64_t n)
{
    return opt.random ? rng_below(&w->rng, n) : 0;
}

static void run_record(struct worker *w)
{
    const unsigned chunk = (unsigned)choose(w, opt.chunks);
    const size_t size = opt.random_size
        ? (choose(w, opt.chunk_size / RECORD_SIZE) + 1) * RECORD_SIZE
        : opt.chunk_size;
    const char *src = (const char *)chunks[chunk];
    char *copy;

    if (opt.realloc_step) {
        copy = build_by_realloc(src, size);
    } else {
        copy = buffer_alloc(size);
        fill(copy, src, 0, size);
    }

    if (!opt.touch_only) {
        const size_t n = size / RECORD_SIZE;
        const record_t key = choose(w, n);
        if (opt.verbose > 2)
            fprintf(opt.json ? stderr : stdout, "thread %u chunk %u copy %zu key %" PRIu64 "\n",
                    w->index, chunk, size, key);
        if (!find_key((const record_t *)copy, n, key)) {
            fprintf(stderr, "Couldn't find key %" PRIu64 "\n", key);
            exit(1);
        }
    } else if (opt.verbose > 2) {
        fprintf(opt.json ? stderr : stdout, "thread %u chunk %u copy %zu\n", w->index, chunk, size);
    }
    /* Make the -T writes observable so that they are not dropped as dead stores. */
    __asm__ volatile("" : : "r"(copy) : "memory");
    buffer_free(copy, size);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t records = 0;

    while (atomic_load_explicit(&phase, memory_order_acquire) == PHASE_WAIT)
        sched_yield(); /* more workers than CPUs must not starve the main thread */
    while (atomic_load_explicit(&phase, memory_order_relaxed) == PHASE_RUN) {
        run_record(w);
        records++;
    }
    w->records = records;
    return NULL;
}

/* --------------------------------------------------------------------- setup ---- */

static void protect_read_only(void *p, size_t size)
{
    /* A malloc'd chunk is not page-aligned: protect the whole pages inside it. */
    uintptr_t lo = ((uintptr_t)p + page_size - 1) & ~(uintptr_t)(page_size - 1);
    uintptr_t hi = ((uintptr_t)p + size) & ~(uintptr_t)(page_size - 1);
    if (hi > lo && mprotect((void *)lo, hi - lo, PROT_READ) != 0) {
        fprintf(stderr, "ebizzy: mprotect: %s\n", strerror(errno));
        exit(1);
    }
}

static void setup(void)
{
    const size_t nrecords = opt.chunk_size / RECORD_SIZE;
    void **holes = NULL;

    chunks = malloc(opt.chunks * sizeof *chunks);
    if (!chunks)
        die_alloc("malloc", opt.chunks * sizeof *chunks);
    if (opt.holes && !(holes = malloc(opt.chunks * sizeof *holes)))
        die_alloc("malloc", opt.chunks * sizeof *holes);

    for (unsigned i = 0; i < opt.chunks; i++) {
        chunks[i] = buffer_alloc(opt.chunk_size);
        for (size_t r = 0; r < nrecords; r++)
            chunks[i][r] = r;
        if (holes)
            holes[i] = buffer_alloc(page_size);
    }
    if (holes) {
        for (unsigned i = 0; i < opt.chunks; i++)
            buffer_free(holes[i], page_size);
        free(holes);
    }
    if (opt.protect)
        for (unsigned i = 0; i < opt.chunks; i += 2)
            protect_read_only(chunks[i], opt.chunk_size);
}

/* ------------------------------------------------------------------- measure ---- */

struct results {
    uint64_t records;
    double real, user, sys;
    long peak_rss_kib, vmas;
    const char *allocator;
    double fork_ms[FORK_SAMPLES], fork_median_ms; /* fork_median_ms < 0: not measured */
    bool have_tide;
    tide_stats_t tide;
    size_t tide_size; /* bytes of tide that the library filled in */
};

static double timeval_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void run_workers(struct worker *workers, struct results *res)
{
    struct rusage ru0, ru1;
    struct timespec deadline;

    for (unsigned i = 0; i < opt.threads; i++) {
        workers[i].index = i;
        rng_seed(&workers[i].rng, opt.seed, i);
        int err = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
        if (err) {
            fprintf(stderr, "ebizzy: pthread_create: %s\n", strerror(err));
            exit(1);
        }
    }

    getrusage(RUSAGE_SELF, &ru0);
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    const double start = probe_now();
    atomic_store_explicit(&phase, PHASE_RUN, memory_order_release);
    deadline.tv_sec += opt.seconds;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
        ;
    atomic_store_explicit(&phase, PHASE_STOP, memory_order_relaxed);
    for (unsigned i = 0; i < opt.threads; i++)
        pthread_join(workers[i].thread, NULL);
    /* After the joins: every record counted was finished inside the window. */
    res->real = probe_now() - start;
    getrusage(RUSAGE_SELF, &ru1);

    res->records = 0;
    for (unsigned i = 0; i < opt.threads; i++)
        res->records += workers[i].records;
    res->user = timeval_s(ru1.ru_utime) - timeval_s(ru0.ru_utime);
    res->sys = timeval_s(ru1.ru_stime) - timeval_s(ru0.ru_stime);
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Cost of fork() in the parent: it copies the page tables and walks every VMA. */
static void time_fork(struct results *res)
{
    double sorted[FORK_SAMPLES];
    for (int i = 0; i < FORK_SAMPLES; i++) {
        double t0 = probe_now();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        res->fork_ms[i] = (probe_now() - t0) * 1e3;
        if (pid < 0) {
            fprintf(stderr, "ebizzy: fork: %s\n", strerror(errno));
            exit(1);
        }
        waitpid(pid, NULL, 0);
        sorted[i] = res->fork_ms[i];
    }
    qsort(sorted, FORK_SAMPLES, sizeof sorted[0], compare_doubles);
    res->fork_median_ms = sorted[FORK_SAMPLES / 2];
}

static void read_tide_stats(struct results *res)
{
    memset(&res->tide, 0, sizeof res->tide);
    res->have_tide = tide_stats_get && tide_stats_get(&res->tide, sizeof res->tide) == 0;
    /* An older libtide fills fewer fields: report only those it knows. */
    res->tide_size = res->tide.size && res->tide.size < sizeof res->tide
        ? (size_t)res->tide.size : sizeof res->tide;
}

/* -------------------------------------------------------------------- report ---- */

/* tide's counters, in the order they are reported. */
static const struct tide_field {
    const char *name;
    size_t offset;
} tide_fields[] = {
#define FIELD(name, member) { name, offsetof(tide_stats_t, member) }
    FIELD("madvise_dontneed_calls", madvise_calls[0]),
    FIELD("madvise_dontneed_bytes", madvise_bytes[0]),
    FIELD("madvise_free_calls", madvise_calls[1]),
    FIELD("madvise_free_bytes", madvise_bytes[1]),
    FIELD("madvise_hugepage_calls", madvise_calls[2]),
    FIELD("madvise_hugepage_bytes", madvise_bytes[2]),
    FIELD("process_madvise_calls", process_madvise_calls),
    FIELD("process_madvise_bytes", process_madvise_bytes),
    FIELD("purges", purges),
    FIELD("purged_bytes", purged_bytes),
    FIELD("mapped", mapped),
    FIELD("active", active),
    FIELD("allocated", allocated),
    FIELD("dirty", dirty),
    FIELD("lazy", lazy),
    FIELD("clean", clean),
    FIELD("metadata", metadata),
    FIELD("resident", resident),
    FIELD("lazyfree_est", lazyfree_est),
    FIELD("nranges", nranges),
    FIELD("vmas", vmas),
    FIELD("nmalloc_large", nmalloc_large),
    FIELD("nfree_large", nfree_large),
    FIELD("nslabs", nslabs),
    FIELD("grows", grows),
    FIELD("remap_moves", remap_moves),
    FIELD("remap_heals", remap_heals),
    FIELD("remap_copies", remap_copies),
    FIELD("remap_in_place", remap_in_place),
    FIELD("remap_live", remap_live),
    FIELD("narenas", narenas),
    FIELD("nthreads", nthreads),
#undef FIELD
};
#define TIDE_PURGE_FIELDS 10 /* the first ten entries above, also printed as text */

static bool tide_field_get(const struct results *res, size_t i, uint64_t *value)
{
    if (tide_fields[i].offset + sizeof(uint64_t) > res->tide_size)
        return false;
    memcpy(value, (const char *)&res->tide + tide_fields[i].offset, sizeof *value);
    return true;
}

static void print_text(const struct results *res)
{
    printf("%" PRIu64 " records/s\n", (uint64_t)((double)res->records / res->real));
    printf("real %5.2f s\n", res->real);
    printf("user %5.2f s\n", res->user);
    printf("sys  %5.2f s\n", res->sys);
    printf("peak_rss %ld KiB\n", res->peak_rss_kib);
    printf("vmas %ld\n", res->vmas);
    printf("allocator %s\n", res->allocator);
    if (res->fork_median_ms >= 0)
        printf("fork %.3f ms (median of %d)\n", res->fork_median_ms, FORK_SAMPLES);
    if (res->have_tide) {
        /* Pairs of tide_fields[] entries: a count, then its bytes. */
        static const char *const labels[TIDE_PURGE_FIELDS / 2] = {
            "madvise_dontneed", "madvise_free", "madvise_hugepage", "process_madvise", "purges",
        };
        for (size_t i = 0; i < TIDE_PURGE_FIELDS; i += 2) {
            uint64_t count, bytes;
            if (tide_field_get(res, i, &count) && tide_field_get(res, i + 1, &bytes))
                printf("tide %s %" PRIu64 " %s %" PRIu64 " B\n", labels[i / 2], count,
                       i + 2 == TIDE_PURGE_FIELDS ? "passes" : "calls", bytes);
        }
    }
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const struct results *res)
{
    printf("{\"program\": \"ebizzy-0.3-clone\"");
    printf(", \"threads\": %u, \"chunks\": %u, \"chunk_size\": %zu, \"seconds\": %u",
           opt.threads, opt.chunks, opt.chunk_size, opt.seconds);
    printf(", \"random_size\": %s, \"always_mmap\": %s, \"never_mmap\": %s",
           opt.random_size ? "true" : "false", opt.always_mmap ? "true" : "false",
           opt.never_mmap ? "true" : "false");
    printf(", \"protect\": %s, \"holes\": %s, \"touch_only\": %s, \"byte_copy\": %s",
           opt.protect ? "true" : "false", opt.holes ? "true" : "false",
           opt.touch_only ? "true" : "false", opt.byte_copy ? "true" : "false");
    printf(", \"linear_search\": %s, \"realloc_step\": %zu",
           opt.linear_search ? "true" : "false", opt.realloc_step);
    if (opt.random)
        printf(", \"random\": true, \"seed\": %" PRIu64, opt.seed);
    else
        printf(", \"random\": false, \"seed\": null");
    printf(", \"records\": %" PRIu64 ", \"records_per_s\": %.1f", res->records,
           (double)res->records / res->real);
    printf(", \"real_s\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f", res->real, res->user,
           res->sys);
    printf(", \"peak_rss_kib\": %ld, \"vmas\": %ld, \"allocator\": ", res->peak_rss_kib,
           res->vmas);
    json_string(res->allocator);
    if (res->fork_median_ms >= 0) {
        printf(", \"fork_ms\": %.4f, \"fork_samples_ms\": [", res->fork_median_ms);
        for (int i = 0; i < FORK_SAMPLES; i++)
            printf("%s%.4f", i ? ", " : "", res->fork_ms[i]);
        printf("]");
    } else {
        printf(", \"fork_ms\": null");
    }
    if (res->have_tide) {
        printf(", \"tide\": {");
        const char *sep = "";
        for (size_t i = 0; i < sizeof tide_fields / sizeof tide_fields[0]; i++) {
            uint64_t v;
            if (tide_field_get(res, i, &v)) {
                printf("%s\"%s\": %" PRIu64, sep, tide_fields[i].name, v);
                sep = ", ";
            }
        }
        printf("}");
    } else {
        printf(", \"tide\": null");
    }
    printf("}\n");
}

static void print_banner(void)
{
    FILE *out = opt.json ? stderr : stdout;
    fprintf(out, "ebizzy 0.3 clone: %u threads, %u chunks of %zu bytes, %u s\n", opt.threads,
            opt.chunks, opt.chunk_size, opt.seconds);
    fprintf(out, "copy: %s%s%s%s, search: %s, buffers: %s%s%s\n",
            opt.touch_only ? "touch one byte per page" : opt.byte_copy ? "byte loop" : "memcpy",
            opt.random_size ? ", random size" : "", opt.realloc_step ? ", grown by realloc" : "",
            opt.protect ? ", even chunks read-only" : "",
            opt.touch_only ? "none" : opt.linear_search ? "linear" : "binary",
            opt.always_mmap ? "mmap" : "malloc", opt.never_mmap ? " (M_MMAP_MAX 0)" : "",
            opt.holes ? ", holes after chunks" : "");
    if (opt.realloc_step)
        fprintf(out, "realloc step: %zu bytes\n", opt.realloc_step);
    if (opt.random)
        fprintf(out, "choices: random, seed %" PRIu64 "\n", opt.seed);
    else
        fprintf(out, "choices: fixed as in ebizzy 0.3 (chunk 0, key 0)\n");
    fprintf(out, "allocator: %s\n", probe_malloc_provider());
}

int main(int argc, char **argv)
{
    parse_options(argc, argv);
    page_size = (size_t)sysconf(_SC_PAGESIZE);

    if (opt.never_mmap && mallopt(M_MMAP_MAX, 0) != 1)
        fprintf(stderr, "ebizzy: mallopt(M_MMAP_MAX, 0) failed (not glibc's malloc?)\n");
    if (opt.verbose)
        print_banner();

    setup();

    /* Aligned by hand: ebizzy makes no aligned allocation, and neither does the clone. */
    const size_t workers_size = opt.threads * sizeof(struct worker) + 63;
    char *workers_mem = malloc(workers_size);
    if (!workers_mem)
        die_alloc("malloc", workers_size);
    memset(workers_mem, 0, workers_size);
    struct worker *workers = (struct worker *)(((uintptr_t)workers_mem + 63) & ~(uintptr_t)63);

    struct results res = { .fork_median_ms = -1 };
    run_workers(workers, &res);
    if (opt.verbose > 1)
        for (unsigned i = 0; i < opt.threads; i++)
            fprintf(opt.json ? stderr : stdout, "thread %u: %" PRIu64 " records\n", i,
                    workers[i].records);

    if (opt.time_fork)
        time_fork(&res);
    res.peak_rss_kib = probe_peak_rss_kib();
    res.vmas = probe_vma_count();
    res.allocator = probe_malloc_provider();
    read_tide_stats(&res);

    if (opt.json)
        print_json(&res);
    else
        print_text(&res);
    return fflush(stdout) == 0 ? 0 : 1;
}
