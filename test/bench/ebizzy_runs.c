/* SPDX-License-Identifier: MIT */
/*
 * ebizzy_runs.c - bench/ebizzy really runs: one-second runs under glibc, tide and
 * every peer allocator installed (with --random and --realloc), the fixed choices of
 * ebizzy 0.3 by default and reproducible ones with --random=SEED, parseable --json, and
 * tide's counters found through the weak tide_stats_get of a preloaded library.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

#include "run.h"

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define SHORT_RUN "-S", "1", "-t", "2", "-s", "1048576"

static const char *next_line(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : NULL;
}

/* The value after "KEY " at the start of a line of text, or NULL. */
static const char *line_value(const char *text, const char *key)
{
    size_t n = strlen(key);
    for (const char *line = text; line && *line; line = next_line(line))
        if (strncmp(line, key, n) == 0 && line[n] == ' ')
            return line + n + 1;
    return NULL;
}

/* The number after "KEY": in a JSON text (NULL and non-numbers fail the test). */
static double json_number(const char *json, const char *key)
{
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *p = strstr(json, pattern);
    cr_assert(p != NULL, "no \"%s\" in %s", key, json);
    char *end;
    double v = strtod(p + strlen(pattern), &end);
    cr_assert(end != p + strlen(pattern), "\"%s\" is not a number in %s", key, json);
    return v;
}

/* A successful run's text output: every figure present and plausible. */
static void expect_text_report(const struct run_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d; stderr:\n%s", r->status, r->err);
    unsigned long long records_per_s = 0;
    cr_assert_eq(sscanf(r->out, "%llu records/s\n", &records_per_s), 1,
                 "first line is not 'N records/s':\n%s", r->out);
    cr_expect_gt(records_per_s, 0);
    double real = -1, user = -1, sys = -1;
    long peak = -1, vmas = -1;
    cr_assert(line_value(r->out, "real") && sscanf(line_value(r->out, "real"), "%lf s", &real));
    cr_assert(line_value(r->out, "user") && sscanf(line_value(r->out, "user"), "%lf s", &user));
    cr_assert(line_value(r->out, "sys") && sscanf(line_value(r->out, "sys"), " %lf s", &sys));
    cr_expect(real >= 1.0 && real < 5.0, "real %.2f s for -S 1", real);
    /* No minimum: a busy machine may give the 2 threads little CPU in their second.  Never
     * more than the 2 threads and the main one could have used in the window. */
    cr_expect(user >= 0 && sys >= 0 && user + sys > 0 && user + sys <= 3 * real, "user %.2f sys %.2f real %.2f",
              user, sys, real);
    cr_assert(sscanf(line_value(r->out, "peak_rss"), "%ld KiB", &peak) == 1, "%s", r->out);
    cr_assert(sscanf(line_value(r->out, "vmas"), "%ld", &vmas) == 1, "%s", r->out);
    cr_expect_gt(peak, 1024, "peak RSS %ld KiB with 10 MiB of chunks", peak);
    cr_expect_gt(vmas, 5);
    cr_expect(line_value(r->out, "allocator") != NULL, "%s", r->out);
}

Test(ebizzy_runs, one_second_under_glibc, .timeout = 30)
{
    struct run_result r;
    run_ebizzy(&r, NULL, NULL, ARGS(SHORT_RUN));
    expect_text_report(&r);
    cr_expect(strstr(line_value(r.out, "allocator"), "libc.so") != NULL, "%s", r.out);
    cr_expect_null(line_value(r.out, "tide"), "tide counters without tide:\n%s", r.out);
    run_result_free(&r);
}

/* Whether libtide exports malloc (nm from binutils, which ./bootstrap installs). */
static bool tide_exports_malloc(void)
{
    struct run_result nm;
    run_program(&nm, ARGS("nm", "-D", "--defined-only", TIDE_LIB), NULL, NULL, NULL);
    cr_assert_eq(nm.status, 0, "nm -D %s failed:\n%s", TIDE_LIB, nm.err);
    bool found = strstr(nm.out, " T malloc\n") || strstr(nm.out, " W malloc\n") ||
                 strstr(nm.out, " i malloc\n");
    run_result_free(&nm);
    return found;
}

Test(ebizzy_runs, one_second_under_tide, .timeout = 30)
{
    struct run_result r;
    run_ebizzy(&r, TIDE_LIB, NULL, ARGS(SHORT_RUN));
    cr_assert(!preload_missing(&r), "%s", r.err);
    expect_text_report(&r);
    /* Once libtide has a malloc, the preloaded one must be what ebizzy calls. */
    if (tide_exports_malloc())
        cr_expect(strstr(line_value(r.out, "allocator"), "libtide") != NULL,
                  "libtide exports malloc, but ebizzy's came from elsewhere:\n%s", r.out);
    else
        cr_log_info("libtide does not export malloc yet: ebizzy ran on glibc's");
    run_result_free(&r);
}

/* -vvv prints "thread T chunk C copy SIZE key K" for every record. */
struct record_line {
    unsigned thread, chunk;
    size_t copy;
    unsigned long long key;
};

static size_t record_lines(const char *out, struct record_line *lines, size_t max)
{
    size_t n = 0;
    for (const char *p = out; p && *p && n < max; p = next_line(p)) {
        struct record_line l;
        if (sscanf(p, "thread %u chunk %u copy %zu key %llu", &l.thread, &l.chunk, &l.copy,
                   &l.key) == 4)
            lines[n++] = l;
    }
    return n;
}

#define BIG_CHUNK 67108864 /* 64 MiB copies: few enough records for -vvv */

Test(ebizzy_runs, fixed_choices_by_default, .timeout = 30)
{
    struct run_result r;
    run_ebizzy(&r, NULL, NULL, ARGS("-vvv", "-S", "1", "-t", "1", "-n", "3", "-s", "67108864"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    static struct record_line lines[100000];
    size_t n = record_lines(r.out, lines, 100000);
    cr_assert_gt(n, 0, "no per-record lines with -vvv:\n%.2000s", r.out);
    for (size_t i = 0; i < n; i++)
        cr_assert(lines[i].chunk == 0 && lines[i].key == 0 && lines[i].copy == BIG_CHUNK,
                  "record %zu: chunk %u copy %zu key %llu, ebizzy 0.3 always picks chunk 0, "
                  "key 0 and copies the whole chunk", i, lines[i].chunk, lines[i].copy,
                  lines[i].key);
    run_result_free(&r);
}

/* With -R, ebizzy 0.3 copies exactly one record every time.  Millions of records a second
 * would mean gigabytes of -vvv output: read the first thousand lines through head,
 * whose exit stops ebizzy with SIGPIPE. */
Test(ebizzy_runs, fixed_choices_with_R, .timeout = 30)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' -R -vvv -S 1 -t 1 | head -n 1000", EBIZZY_PATH);
    struct run_result r;
    run_program(&r, ARGS("sh", "-c", cmd), NULL, NULL, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    static struct record_line lines[1000];
    size_t n = record_lines(r.out, lines, 1000);
    cr_assert_geq(n, 900, "only %zu per-record lines:\n%.2000s", n, r.out);
    for (size_t i = 0; i < n; i++)
        cr_assert(lines[i].chunk == 0 && lines[i].key == 0 && lines[i].copy == 8,
                  "record %zu: chunk %u copy %zu key %llu, ebizzy 0.3 -R always copies "
                  "8 bytes of chunk 0 and looks for key 0", i, lines[i].chunk, lines[i].copy,
                  lines[i].key);
    run_result_free(&r);
}

/* Copies of up to 8 MiB: a few hundred records in the second on this 2-CPU machine at
 * load 7 (with 64 MiB copies, 9 or 10 against the 8 wanted), far fewer than -vvv could
 * not print. */
#define RANDOM_CHUNK 8388608

Test(ebizzy_runs, random_choices_are_seeded, .timeout = 30)
{
    static struct record_line a[100000], b[100000];
    struct run_result ra, rb;
    const char *const args[] = { "--random=42", "-R", "-vvv", "-S", "1", "-t", "1", "-n", "4",
                                 "-s", "8388608", NULL };
    run_ebizzy(&ra, NULL, NULL, args);
    run_ebizzy(&rb, NULL, NULL, args);
    cr_assert_eq(ra.status, 0, "%s", ra.err);
    cr_assert_eq(rb.status, 0, "%s", rb.err);
    size_t na = record_lines(ra.out, a, 100000), nb = record_lines(rb.out, b, 100000);
    cr_assert_geq(na, 8, "only %zu records in a second", na);
    cr_assert_geq(nb, 8, "only %zu records in a second", nb);

    bool chunks_differ = false, sizes_differ = false;
    for (size_t i = 0; i < na; i++) {
        cr_assert(a[i].chunk < 4 && a[i].copy >= 8 && a[i].copy <= RANDOM_CHUNK &&
                  a[i].copy % 8 == 0 && a[i].key < a[i].copy / 8,
                  "record %zu out of range: chunk %u copy %zu key %llu", i, a[i].chunk,
                  a[i].copy, a[i].key);
        chunks_differ |= a[i].chunk != a[0].chunk;
        sizes_differ |= a[i].copy != a[0].copy;
    }
    cr_expect(chunks_differ && sizes_differ, "--random made the same choice every time");
    /* The same seed gives the same sequence (the count differs with the timing). */
    for (size_t i = 0; i < (na < nb ? na : nb); i++)
        cr_assert(a[i].chunk == b[i].chunk && a[i].copy == b[i].copy && a[i].key == b[i].key,
                  "record %zu differs between two runs with --random=42", i);
    run_result_free(&ra);
    run_result_free(&rb);
}

Test(ebizzy_runs, json_parses, .timeout = 30)
{
    struct run_result r;
    run_ebizzy(&r, NULL, NULL, ARGS(SHORT_RUN, "--json", "--fork"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(r.out[0] == '{' && strchr(r.out, '\n') == r.out + strlen(r.out) - 1 &&
              r.out[strlen(r.out) - 2] == '}', "not one JSON object on one line:\n%s", r.out);
    cr_expect_gt(json_number(r.out, "records"), 0);
    cr_expect_gt(json_number(r.out, "records_per_s"), 0);
    double real = json_number(r.out, "real_s");
    cr_expect(real >= 1.0 && real < 5.0, "real_s %f", real);
    cr_expect_geq(json_number(r.out, "user_s"), 0);
    cr_expect_geq(json_number(r.out, "sys_s"), 0);
    cr_expect_gt(json_number(r.out, "peak_rss_kib"), 1024);
    cr_expect_gt(json_number(r.out, "vmas"), 5);
    cr_expect_gt(json_number(r.out, "fork_ms"), 0);
    cr_expect_eq(json_number(r.out, "threads"), 2);
    cr_expect_eq(json_number(r.out, "chunk_size"), 1048576);
    cr_expect(strstr(r.out, "\"tide\": null") != NULL, "tide counters without tide");

    /* And a real JSON parser agrees. */
    static const char check[] =
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "keys = ['records', 'records_per_s', 'real_s', 'user_s', 'sys_s', 'peak_rss_kib',\n"
        "        'vmas', 'fork_ms', 'threads', 'chunks', 'chunk_size', 'seconds']\n"
        "bad = [k for k in keys if type(d.get(k)) not in (int, float)]\n"
        "assert not bad, 'not numbers: %s' % bad\n"
        "assert len(d['fork_samples_ms']) == 7 and d['tide'] is None\n"
        "assert isinstance(d['allocator'], str) and d['random'] is False\n"
        "print('ok')\n";
    struct run_result py;
    run_program(&py, ARGS("python3", "-c", check), NULL, NULL, r.out);
    if (py.status == -1)
        cr_log_info("python3 is not installed: JSON checked by hand only");
    else
        cr_expect(py.status == 0 && strcmp(py.out, "ok\n") == 0,
                  "python3 rejects the JSON:\n%s\n%s", r.out, py.err);
    run_result_free(&py);
    run_result_free(&r);
}

/* The clone's weak tide_stats_get must bind to a preloaded library that defines it. */
Test(ebizzy_runs, tide_counters_through_weak_symbol, .timeout = 30)
{
    struct run_result r;
    run_ebizzy(&r, STUB_LIB, NULL, ARGS(SHORT_RUN));
    cr_assert(!preload_missing(&r), "%s", r.err);
    expect_text_report(&r);
    cr_expect(strstr(r.out, "tide madvise_dontneed 11 calls 45056 B\n") &&
              strstr(r.out, "tide madvise_free 22 calls 90112 B\n") &&
              strstr(r.out, "tide process_madvise 3 calls 0 B\n") &&
              strstr(r.out, "tide purges 33 passes 135168 B\n"),
              "the stub's counters are missing:\n%s", r.out);
    run_result_free(&r);

    run_ebizzy(&r, STUB_LIB, NULL, ARGS(SHORT_RUN, "--json"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *tide = strstr(r.out, "\"tide\": {");
    cr_assert(tide != NULL, "no tide object:\n%s", r.out);
    cr_expect_eq(json_number(tide, "madvise_dontneed_calls"), 11);
    cr_expect_eq(json_number(tide, "madvise_free_bytes"), 90112);
    cr_expect_eq(json_number(tide, "purges"), 33);
    cr_expect_eq(json_number(tide, "vmas"), 4);
    run_result_free(&r);
}

/* A library with a shorter tide_stats_t: only the fields it filled are reported. */
Test(ebizzy_runs, tide_counters_of_an_older_library, .timeout = 30)
{
    char env[64];
    snprintf(env, sizeof env, "STUB_TIDE_STATS_SIZE=%zu", offsetof(tide_stats_t, madvise_bytes));
    struct run_result r;
    run_ebizzy(&r, STUB_LIB, env, ARGS(SHORT_RUN, "--json"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *tide = strstr(r.out, "\"tide\": {");
    cr_assert(tide != NULL, "no tide object:\n%s", r.out);
    cr_expect_eq(json_number(tide, "madvise_free_calls"), 22);
    cr_expect_eq(json_number(tide, "vmas"), 4);
    cr_expect_null(strstr(tide, "madvise_dontneed_bytes"), "a field beyond the size:\n%s", tide);
    cr_expect_null(strstr(tide, "purges"), "a field beyond the size:\n%s", tide);
    run_result_free(&r);
}

/* ---- --random and --realloc under every allocator that is installed ---- */

struct allocator {
    const char *preload;  /* NULL: glibc; a bare soname is found like any library */
    const char *provider; /* must appear in the "allocator" line; NULL: not checked */
};

static void run_under(struct allocator a, const char *const args[])
{
    struct run_result r;
    run_ebizzy(&r, a.preload, NULL, args);
    if (preload_missing(&r) && a.preload && a.preload[0] != '/')
        cr_skip_test("%s is not installed", a.preload);
    cr_assert(!preload_missing(&r), "%s", r.err);
    expect_text_report(&r);
    if (a.provider)
        cr_expect(strstr(line_value(r.out, "allocator"), a.provider) != NULL,
                  "malloc did not come from %s:\n%s", a.provider, r.out);
    run_result_free(&r);
}

#define RANDOM_ARGS ARGS("--random", "-R", "-S", "1", "-t", "2")
#define REALLOC_ARGS ARGS("--realloc=4096", SHORT_RUN)
/* tide's provider is not checked: until its malloc lands, the library is a placeholder. */
#define ALLOCATOR_TESTS(name, preload, provider)                                   \
    Test(ebizzy_allocators, random_##name, .timeout = 30)                          \
    {                                                                              \
        run_under((struct allocator){ preload, provider }, RANDOM_ARGS);           \
    }                                                                              \
    Test(ebizzy_allocators, realloc_##name, .timeout = 30)                         \
    {                                                                              \
        run_under((struct allocator){ preload, provider }, REALLOC_ARGS);          \
    }

ALLOCATOR_TESTS(glibc, NULL, "libc.so")
ALLOCATOR_TESTS(jemalloc, "libjemalloc.so.2", "libjemalloc.so.2")
ALLOCATOR_TESTS(tcmalloc, "libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so.4")
ALLOCATOR_TESTS(mimalloc, "libmimalloc.so.2", "libmimalloc.so.2")
ALLOCATOR_TESTS(tide, TIDE_LIB, NULL)
