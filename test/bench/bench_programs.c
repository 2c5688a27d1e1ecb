/* SPDX-License-Identifier: MIT */
/*
 * bench_programs.c - bench/realloc, bench/idle, bench/prodcons, bench/purge_floor, bench/kv
 * and the workload shapes (churn, larson, powers) really run, briefly, under glibc and
 * tide: they exit 0, print every "key value" line run.py reads, find tide's counters and ranges
 * through their weak references, the idle benchmark sees tide give a freed burst back to
 * the kernel within its idle period, and prodcons delivers every block in order in each
 * placement (a lost wake-up would hang it).
 */
#include "config.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>

#include "run.h"

#define MiB (1024.0 * 1024.0)

static void run_bench(struct run_result *r, const char *path, const char *preload,
                      const char *extra_env, const char *const args[])
{
    run_with_args(r, path, preload, extra_env, args);
    cr_assert(!preload_missing(r), "%s", r->err);
    cr_assert_eq(r->status, 0, "%s exited %d; stderr:\n%s", path, r->status, r->err);
}

/* The text after "KEY " at the start of a line, or NULL. */
static const char *value_of(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, n) == 0 && line[n] == ' ')
            return line + n + 1;
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return NULL;
}

/* The number on KEY's line; a missing key or a non-number fails the test. */
static double number(const char *text, const char *key)
{
    const char *v = value_of(text, key);
    cr_assert(v != NULL, "no '%s' line in:\n%s", key, text);
    char *end;
    double x = strtod(v, &end);
    cr_assert(end != v && (*end == '\n' || *end == '\0'), "'%s' is not a number in:\n%s", key,
              text);
    return x;
}

/* ---- bench/realloc ---- */

static void expect_realloc_report(const char *out, const char *mode, double calls, bool tide)
{
    cr_assert(value_of(out, "mode") && !strncmp(value_of(out, "mode"), mode, strlen(mode)),
              "%s", out);
    cr_expect_eq(number(out, "complete"), 1, "%s", out);
    cr_expect_eq(number(out, "pages_bad"), 0, "%s", out);
    cr_expect_eq(number(out, "realloc_calls"), calls, "%s", out);
    double total = number(out, "total_s"), inside = number(out, "realloc_s");
    cr_expect(inside >= 0 && inside <= total && total < 30, "%s", out);
    cr_expect_gt(number(out, "peak_rss_kib"), 16 * 1024, "%s", out);
    double start = number(out, "vmas_start"), peak = number(out, "vmas_peak"),
           after = number(out, "vmas_after_free");
    cr_expect(start >= 1 && peak >= 1 && after >= 1, "%s", out);
    const char *scope = value_of(out, "vmas_scope");
    cr_assert(scope != NULL, "%s", out);
    if (!tide) {
        cr_expect(!strncmp(scope, "process", 7), "%s", out);
        cr_expect_null(value_of(out, "remap_moves"), "tide counters without tide:\n%s", out);
        cr_expect(strstr(value_of(out, "allocator"), "libc.so") != NULL, "%s", out);
        return;
    }
    cr_expect(!strncmp(scope, "tide", 4), "%s", out);
    /* Every growth of a large block is counted once: in place, moved or copied. */
    cr_expect_eq(number(out, "remap_in_place") + number(out, "remap_moves") +
                 number(out, "remap_copies"), calls, "%s", out);
    cr_expect_eq(after, start, "tide's range is not back to its VMAs:\n%s", out);
    cr_expect_leq(peak, 3, "more than 1 + 2 x remap_max VMAs:\n%s", out);
}

#define REALLOC_ARGS(mode, ...) ((const char *const[]){ "--mode=" mode, __VA_ARGS__, NULL })
/* 1 MiB -> 64 MiB: 6 doublings, 1008 steps of 64 KiB; the pair: 2 x 240 steps to 16 MiB. */
#define DOUBLE_ARGS REALLOC_ARGS("double", "--max=64m")
#define STEP_ARGS REALLOC_ARGS("step", "--step=65536", "--max=64m")
#define PAIR_ARGS REALLOC_ARGS("pair", "--step=65536", "--max=16m")

Test(bench_realloc, under_glibc, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, REALLOC_PATH, NULL, NULL, DOUBLE_ARGS);
    expect_realloc_report(r.out, "double", 6, false);
    run_result_free(&r);
    run_bench(&r, REALLOC_PATH, NULL, NULL, STEP_ARGS);
    expect_realloc_report(r.out, "step", 1008, false);
    run_result_free(&r);
    run_bench(&r, REALLOC_PATH, NULL, NULL, PAIR_ARGS);
    expect_realloc_report(r.out, "pair", 480, false);
    run_result_free(&r);
}

Test(bench_realloc, under_tide, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, REALLOC_PATH, TIDE_LIB, NULL, DOUBLE_ARGS);
    expect_realloc_report(r.out, "double", 6, true);
    run_result_free(&r);
    run_bench(&r, REALLOC_PATH, TIDE_LIB, NULL, STEP_ARGS);
    expect_realloc_report(r.out, "step", 1008, true);
    run_result_free(&r);
    /* The pair is built so that each block is in the other's way. */
    run_bench(&r, REALLOC_PATH, TIDE_LIB, NULL, PAIR_ARGS);
    expect_realloc_report(r.out, "pair", 480, true);
    cr_expect_geq(number(r.out, "remap_moves") + number(r.out, "remap_copies"), 1,
                  "no growth of the pair was blocked:\n%s", r.out);
    run_result_free(&r);
}

Test(bench_realloc, stops_at_the_time_limit, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, REALLOC_PATH, NULL, NULL,
              REALLOC_ARGS("step", "--step=4096", "--max=1g", "--time-limit=0.05"));
    cr_expect_eq(number(r.out, "complete"), 0, "%s", r.out);
    cr_expect_lt(number(r.out, "reached_bytes"), 1024 * MiB, "%s", r.out);
    cr_expect_eq(number(r.out, "pages_bad"), 0, "%s", r.out);
    run_result_free(&r);
}

Test(bench_realloc, bad_arguments, .timeout = 10)
{
    static const char *const bad[][3] = {
        { "--mode=triple", NULL, NULL }, { "--step=0", NULL, NULL },
        { "--max=12x", NULL, NULL },     { "--step=1000", NULL, NULL },
        { "--time-limit=-1", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = { REALLOC_PATH, bad[i][0], NULL };
        struct run_result r;
        run_program(&r, argv, NULL, NULL, NULL);
        cr_expect_eq(r.status, 1, "%s: exit %d", bad[i][0], r.status);
        cr_expect(strstr(r.err, "realloc") != NULL, "%s: %s", bad[i][0], r.err);
        run_result_free(&r);
    }
}

/* ---- bench/idle ---- */

#define IDLE_SHORT "--idle-ms=100", "--burst=64m", "--live=16m"

static void expect_idle_report(const char *out, long idle_ms)
{
    cr_expect_eq(number(out, "live_bad"), 0, "%s", out);
    cr_expect_eq(number(out, "burst_bytes"), 64 * MiB, "%s", out);
    cr_expect_gt(number(out, "rss_peak_kib"), 64 * 1024, "the burst was not touched:\n%s", out);
    cr_expect_geq(number(out, "rss_peak_kib"), number(out, "nolazy_peak_kib"), "%s", out);
    cr_expect_geq(number(out, "rss_idle_kib"), number(out, "nolazy_idle_kib"), "%s", out);
    cr_expect_geq(number(out, "nolazy_idle_kib"), 16 * 1024, "the live heap left:\n%s", out);
    cr_expect(number(out, "retouch_s") >= 0 && number(out, "burst_s") > 0, "%s", out);
    const char *series = value_of(out, "series");
    cr_assert(series != NULL, "%s", out);
    long ms, rss, nolazy;
    cr_expect_eq(sscanf(series, "0:%ld:%ld", &rss, &nolazy), 2, "%s", series);
    const char *last = strrchr(series, ',');
    cr_assert(last != NULL, "one sample only: %s", series);
    cr_expect_eq(sscanf(last, ",%ld:%ld:%ld", &ms, &rss, &nolazy), 3, "%s", series);
    cr_expect_eq(ms, idle_ms, "the last sample is not at the end of the idle period: %s", series);
}

Test(bench_idle, under_glibc, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, IDLE_PATH, NULL, NULL, ((const char *const[]){ IDLE_SHORT, NULL }));
    expect_idle_report(r.out, 100);
    cr_expect_null(value_of(r.out, "tide_purge"), "%s", r.out);
    run_result_free(&r);
}

Test(bench_idle, under_tide, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, IDLE_PATH, TIDE_LIB, "TIDE_CONF=purge:none",
              ((const char *const[]){ IDLE_SHORT, NULL }));
    expect_idle_report(r.out, 100);
    cr_expect(value_of(r.out, "tide_purge") && !strncmp(value_of(r.out, "tide_purge"), "none", 4),
              "the policy in force is not reported:\n%s", r.out);
    /* Nothing purged: the freed burst is still resident. */
    cr_expect_gt(number(r.out, "nolazy_idle_kib"), number(r.out, "nolazy_peak_kib") - 8 * 1024,
                 "%s", r.out);
    run_result_free(&r);
}

/* With a 100 ms decay, tide's background purger gives the burst back while the process
 * is idle.  The idle period is 5 x decay_ms: with one equal to decay_ms, the last sample
 * would race the purger (the last blocks are freed just before the idle period starts).
 * --threads=2: the default background:auto starts the purger in a multithreaded program. */
Test(bench_idle, tide_purges_while_idle, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, IDLE_PATH, TIDE_LIB, "TIDE_CONF=purge:dontneed,decay_ms:100",
              ((const char *const[]){ "--idle-ms=500", "--burst=64m", "--live=16m", "--threads=2", NULL }));
    expect_idle_report(r.out, 500);
    const double peak = number(r.out, "nolazy_peak_kib"), idle = number(r.out, "nolazy_idle_kib");
    cr_expect_geq(peak - idle, 32 * 1024,
                  "RSS-LazyFree fell by only %.0f KiB of a 64 MiB burst:\n%s", peak - idle, r.out);
    run_result_free(&r);
}

/* Single-threaded, the default background:auto starts no purger: the burst stays while
 * the process is idle (it goes at the process's next calls). */
Test(bench_idle, tide_single_threaded_keeps_the_burst_while_idle, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, IDLE_PATH, TIDE_LIB, "TIDE_CONF=purge:dontneed,decay_ms:100",
              ((const char *const[]){ "--idle-ms=500", "--burst=64m", "--live=16m", "--threads=1", NULL }));
    expect_idle_report(r.out, 500);
    cr_expect_eq(number(r.out, "threads"), 1, "%s", r.out);
    cr_expect_gt(number(r.out, "nolazy_idle_kib"), number(r.out, "nolazy_peak_kib") - 8 * 1024, "%s", r.out);
    run_result_free(&r);
}

Test(bench_idle, bad_arguments, .timeout = 10)
{
    static const char *const bad[] = { "--threads=3", "--threads=0", "--min=3000", "--burst=1q" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = { IDLE_PATH, bad[i], NULL };
        struct run_result r;
        run_program(&r, argv, NULL, NULL, NULL);
        cr_expect_eq(r.status, 1, "%s: exit %d", bad[i], r.status);
        cr_expect(strstr(r.err, bad[i][2] == 't' ? "--threads" : "-") != NULL, "%s: %s", bad[i], r.err);
        run_result_free(&r);
    }
}

/* ---- bench/prodcons ---- */

static int cpus_allowed(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

static void expect_prodcons_runs(const char *preload)
{
    static const char *const placements[] = { "any", "pairs", "split" };
    for (size_t i = 0; i < sizeof placements / sizeof placements[0]; i++) {
        if (i > 0 && cpus_allowed() < 2)
            break; /* pinned placements need 2 CPUs */
        /* 1% of the work: 400,000 blocks, ~100 batches of each ring, several sleeps. */
        const char *args[] = { "-w", "1", "-p", placements[i], NULL };
        struct run_result r;
        run_bench(&r, PRODCONS_PATH, preload, NULL, args);
        cr_expect_eq(number(r.out, "blocks"), 400000, "%s", r.out);
        cr_expect(!strncmp(value_of(r.out, "placement"), placements[i], strlen(placements[i])),
                  "%s", r.out);
        double t = number(r.out, "elapsed_s");
        cr_expect(t > 0 && t < 30, "%s", r.out);
        cr_expect_gt(number(r.out, "peak_rss_kib"), 0, "%s", r.out);
        run_result_free(&r);
    }
}

Test(bench_prodcons, under_glibc, .timeout = 120) { expect_prodcons_runs(NULL); }

Test(bench_prodcons, under_tide, .timeout = 120) { expect_prodcons_runs(TIDE_LIB); }

Test(bench_prodcons, bad_arguments, .timeout = 10)
{
    static const char *const bad[][3] = {
        { "-p", "sideways", NULL }, { "-w", "0", NULL }, { "extra", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = { PRODCONS_PATH, bad[i][0], bad[i][1], NULL };
        struct run_result r;
        run_program(&r, argv, NULL, NULL, NULL);
        cr_expect_eq(r.status, 1, "%s %s: exit %d", bad[i][0], bad[i][1], r.status);
        cr_expect(strstr(r.err, "prodcons") != NULL || strstr(r.err, "-w") != NULL,
                  "%s: %s", bad[i][0], r.err);
        run_result_free(&r);
    }
}

/* ---- bench/purge_floor ---- */

Test(bench_purge_floor, every_setting, .timeout = 60)
{
    static const char *const advices[] = { "none", "dontneed", "free" };
    static const char *const thps[] = { "off", "on" };
    for (size_t a = 0; a < 3; a++)
        for (size_t t = 0; t < 2; t++) {
            char advice[32], thp[16];
            snprintf(advice, sizeof advice, "--advice=%s", advices[a]);
            snprintf(thp, sizeof thp, "--thp=%s", thps[t]);
            const char *args[] = { advice, thp, "--threads=2", "--seconds=0.1", NULL };
            struct run_result r;
            run_bench(&r, PURGE_FLOOR_PATH, NULL, NULL, args);
            double rate = number(r.out, "records_per_s"), purges = number(r.out, "purges"),
                   bytes = number(r.out, "purged_bytes");
            cr_expect_gt(rate, 0, "%s %s:\n%s", advice, thp, r.out);
            if (a == 0) {
                cr_expect_eq(purges, 0, "%s", r.out);
            } else {
                cr_expect_gt(purges, 0, "%s", r.out);
                /* 5 MiB: every page, or with huge pages its 2 whole 2 MiB units. */
                double per = t ? 4 * MiB : 5 * MiB;
                cr_expect_eq(bytes, purges * per, "%s %s:\n%s", advice, thp, r.out);
            }
            run_result_free(&r);
        }
}

Test(bench_purge_floor, bad_arguments, .timeout = 10)
{
    static const char *const bad[] = { "--advice=cold", "--thp=maybe", "--threads=0",
                                       "--seconds=-1", "--chunk=0", "extra" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = { PURGE_FLOOR_PATH, bad[i], NULL };
        struct run_result r;
        run_program(&r, argv, NULL, NULL, NULL);
        cr_expect_eq(r.status, 1, "%s: exit %d", bad[i], r.status);
        cr_expect(strstr(r.err, "purge_floor") != NULL, "%s: %s", bad[i], r.err);
        run_result_free(&r);
    }
}

/* ---- the workload shapes: bench/churn, bench/larson, bench/powers ---- */

/* PATH with ARGS under PRELOAD (NULL: glibc) exits 0 and prints every line run.py reads,
 * and its malloc came from the library preloaded.  R keeps the output (caller frees). */
static void expect_shape_runs(struct run_result *r, const char *path, const char *preload,
                              const char *const args[])
{
    run_bench(r, path, preload, NULL, args);
    double t = number(r->out, "elapsed_s");
    cr_expect(t > 0 && t < 60, "%s:\n%s", path, r->out);
    cr_expect_geq(number(r->out, "csw"), 0, "%s:\n%s", path, r->out);
    cr_expect_gt(number(r->out, "peak_rss_kib"), 0, "%s:\n%s", path, r->out);
    const char *provider = value_of(r->out, "allocator");
    cr_assert(provider != NULL, "%s:\n%s", path, r->out);
    cr_expect(strstr(provider, preload ? "libtide" : "libc.so") != NULL, "%s:\n%s", path, r->out);
}

static void expect_shapes(const char *preload)
{
    static const char *const threads[] = { "1", "2", "8", "16" };
    static const char *const paths[] = { CHURN_PATH, LARSON_PATH, POWERS_PATH };
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            const char *args[] = { "-w", "1", "-t", threads[t], NULL };
            struct run_result r;
            expect_shape_runs(&r, paths[p], preload, args);
            run_result_free(&r);
        }
}

Test(bench_shapes, under_glibc, .timeout = 120) { expect_shapes(NULL); }

Test(bench_shapes, under_tide, .timeout = 120) { expect_shapes(TIDE_LIB); }

/* --sized frees through the sized free the allocator has: tide's free_sized, and plain
 * free under glibc 2.36, which has none. */
Test(bench_shapes, larson_sized_finds_the_sized_free, .timeout = 60)
{
    const char *args[] = { "-w", "1", "--sized", NULL };
    struct run_result r;
    expect_shape_runs(&r, LARSON_PATH, TIDE_LIB, args);
    cr_expect(!strncmp(value_of(r.out, "free_fn"), "free_sized\n", 11), "%s", r.out);
    run_result_free(&r);
    expect_shape_runs(&r, LARSON_PATH, NULL, args);
    cr_expect(!strncmp(value_of(r.out, "free_fn"), "free\n", 5), "%s", r.out);
    run_result_free(&r);
}

Test(bench_shapes, bad_arguments, .timeout = 10)
{
    static const char *const paths[] = { CHURN_PATH, LARSON_PATH, POWERS_PATH };
    static const char *const bad[][3] = {
        { "-t", "0", NULL }, { "-t", "65", NULL }, { "-w", "0", NULL }, { "extra", NULL, NULL },
    };
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            const char *argv[] = { paths[p], bad[i][0], bad[i][1], NULL };
            struct run_result r;
            run_program(&r, argv, NULL, NULL, NULL);
            cr_expect_eq(r.status, 1, "%s %s %s: exit %d", paths[p], bad[i][0], bad[i][1],
                         r.status);
            cr_expect(r.err[0] != '\0', "%s %s: no message", paths[p], bad[i][0]);
            run_result_free(&r);
        }
}

/* ---- bench/kv ---- */

/* 4 MiB of keys, a 20 ms idle, 200 SETs after it, one fork per phase. */
#define KV_TINY "--bytes=4m", "--idle-ms=20", "--after-ops=200", "--forks=1"

static const char *const kv_phases[] = { "fill", "free", "overwrite", "idle", "after" };

/* The number on PHASE_KEY's line. */
static double kv_number(const char *out, const char *phase, const char *key)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", phase, key);
    return number(out, name);
}

/* Every line run.py reads, and the counts the phases must have. */
static void expect_kv_life(const char *out, const char *shape, bool forks, bool tide)
{
    cr_assert(value_of(out, "mode") && value_of(out, "shape") && value_of(out, "allocator") &&
              value_of(out, "vmas_scope"), "%s", out);
    cr_expect(!strncmp(value_of(out, "mode"), "life\n", 5), "%s", out);
    cr_expect(!strncmp(value_of(out, "shape"), shape, strlen(shape)), "%s", out);
    cr_expect_eq(number(out, "bad"), 0, "%s", out);
    const double keys = number(out, "keys");
    cr_assert_gt(keys, 1000, "%s", out);
    static const char *const always[] = { "ops", "s", "live_bytes", "blocks", "rss_kib",
                                          "anon_huge_kib", "lazyfree_kib", "vmas", "minflt" };
    for (size_t p = 0; p < 5; p++) {
        for (size_t k = 0; k < sizeof always / sizeof always[0]; k++)
            kv_number(out, kv_phases[p], always[k]);
        cr_expect_geq(kv_number(out, kv_phases[p], "rss_kib") * 1024,
                      kv_number(out, kv_phases[p], "live_bytes"), "%s", out);
        char name[64];
        snprintf(name, sizeof name, "%s_fork_ms", kv_phases[p]);
        if (!forks) {
            cr_expect_null(value_of(out, name), "forks without --forks:\n%s", out);
            continue;
        }
        const double fork = kv_number(out, kv_phases[p], "fork_ms");
        cr_expect(fork > 0 && kv_number(out, kv_phases[p], "fork_wait_ms") >= fork, "%s", out);
    }
    /* 60% of the keys deleted, 30% of the rest overwritten, 200 SETs after the idle. */
    const unsigned long n = (unsigned long)keys, nfree = n * 60 / 100;
    cr_expect_eq(kv_number(out, "fill", "ops"), n, "%s", out);
    cr_expect_eq(kv_number(out, "free", "ops"), nfree, "%s", out);
    cr_expect_eq(kv_number(out, "overwrite", "ops"), (n - nfree) * 30 / 100, "%s", out);
    cr_expect_eq(kv_number(out, "idle", "ops"), 0, "%s", out);
    cr_expect_eq(kv_number(out, "after", "ops"), 200, "%s", out);
    cr_expect_geq(kv_number(out, "fill", "live_bytes"), 4 * MiB, "%s", out);
    cr_expect_lt(kv_number(out, "free", "live_bytes"), kv_number(out, "fill", "live_bytes"),
                 "%s", out);
    cr_expect_gt(kv_number(out, "overwrite", "live_bytes"), kv_number(out, "free", "live_bytes"),
                 "larger values did not grow the live bytes:\n%s", out);
    /* The touch percentiles of the fill and the overwrite, in order. */
    static const char *const touched[] = { "fill", "overwrite" };
    for (size_t p = 0; p < 2; p++) {
        double p50 = kv_number(out, touched[p], "touch_p50_us"),
               p99 = kv_number(out, touched[p], "touch_p99_us"),
               p999 = kv_number(out, touched[p], "touch_p999_us"),
               max = kv_number(out, touched[p], "touch_max_us");
        cr_expect(0 < p50 && p50 <= p99 && p99 <= p999 && p999 <= max, "%s", out);
    }
    cr_expect_null(value_of(out, "free_touch_p50_us"), "%s", out);
    cr_expect(!strncmp(value_of(out, "vmas_scope"), tide ? "tide" : "process", 4), "%s", out);
    if (tide)
        cr_expect_eq(kv_number(out, "fill", "vmas"), 1, "tide's heap is not one VMA:\n%s", out);
    cr_expect(strstr(value_of(out, "allocator"), tide ? "libtide" : "libc.so") != NULL, "%s", out);
}

Test(bench_kv, under_glibc, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, KV_PATH, NULL, NULL, ((const char *const[]){ KV_TINY, NULL }));
    expect_kv_life(r.out, "flat", true, false);
    /* flat: one block per key */
    cr_expect_eq(number(r.out, "fill_blocks"), number(r.out, "keys"), "%s", r.out);
    cr_expect_null(value_of(r.out, "tide_thp"), "%s", r.out);
    run_result_free(&r);
}

Test(bench_kv, under_tide, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, KV_PATH, TIDE_LIB, "TIDE_CONF=thp:on", ((const char *const[]){ KV_TINY, NULL }));
    expect_kv_life(r.out, "flat", true, true);
    const char *thp = value_of(r.out, "tide_thp");
    cr_expect(thp && !strncmp(thp, "on\n", 3), "the setting in force is not reported:\n%s", r.out);
    run_result_free(&r);
}

/* Redis's objects: an entry, a key and one or two value blocks per key, and the table. */
Test(bench_kv, redis_shape, .timeout = 60)
{
    const char *preloads[] = { NULL, TIDE_LIB };
    for (size_t i = 0; i < 2; i++) {
        struct run_result r;
        run_bench(&r, KV_PATH, preloads[i], NULL,
                  ((const char *const[]){ KV_TINY, "--shape=redis", NULL }));
        expect_kv_life(r.out, "redis", true, i == 1);
        const double keys = number(r.out, "keys"), blocks = number(r.out, "fill_blocks");
        cr_expect(blocks >= 3 * keys + 1 && blocks <= 4 * keys + 1, "%s", r.out);
        run_result_free(&r);
    }
}

Test(bench_kv, without_forks, .timeout = 60)
{
    struct run_result r;
    run_bench(&r, KV_PATH, TIDE_LIB, NULL,
              ((const char *const[]){ "--bytes=4m", "--idle-ms=1", "--after-ops=200",
                                      "--forks=0", "--threads=1", NULL }));
    expect_kv_life(r.out, "flat", false, true);
    cr_expect_eq(number(r.out, "threads"), 1, "%s", r.out);
    run_result_free(&r);
}

/* --mode=tlb: 65536 blocks of 64 bytes, a chain through 1000 of them, one lap of reads. */
Test(bench_kv, tlb_mode, .timeout = 60)
{
    const char *preloads[] = { NULL, TIDE_LIB };
    for (size_t i = 0; i < 2; i++) {
        struct run_result r;
        run_bench(&r, KV_PATH, preloads[i], NULL,
                  ((const char *const[]){ "--mode=tlb", "--bytes=4m", "--chain=1000", NULL }));
        const char *out = r.out;
        cr_assert(value_of(out, "mode") != NULL, "%s", out);
        cr_expect(!strncmp(value_of(out, "mode"), "tlb\n", 4), "%s", out);
        cr_expect_eq(number(out, "bad"), 0, "%s", out);
        cr_expect_eq(number(out, "objects"), 65536, "%s", out);
        cr_expect_eq(number(out, "heap_bytes"), 4 * MiB, "%s", out);
        cr_expect_eq(number(out, "chain"), 1000, "%s", out);
        cr_expect_eq(number(out, "reads"), 1000, "%s", out);
        cr_expect_gt(number(out, "ns_per_read"), 0, "%s", out);
        cr_expect_geq(number(out, "rss_kib") * 1024, 4 * MiB, "%s", out);
        static const char *const keys[] = { "read_s", "alloc_s", "alloc_minflt", "read_minflt",
                                            "anon_huge_kib", "vmas", "object_bytes" };
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            number(out, keys[k]);
        run_result_free(&r);
    }
}

Test(bench_kv, bad_arguments, .timeout = 10)
{
    static const char *const bad[] = { "--mode=fast", "--shape=tree", "--min=3000",
                                       "--max=8",     "--free-pct=101", "--forks=65",
                                       "--object=12", "--threads=3",  "--bytes=1q", "extra" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = { KV_PATH, bad[i], NULL };
        struct run_result r;
        run_program(&r, argv, NULL, NULL, NULL);
        cr_expect_eq(r.status, 1, "%s: exit %d", bad[i], r.status);
        cr_expect(strstr(r.err, "kv") != NULL, "%s: %s", bad[i], r.err);
        run_result_free(&r);
    }
}
