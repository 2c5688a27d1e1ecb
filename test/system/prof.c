/* SPDX-License-Identifier: MIT */
/* prof.c - the sampling heap profiler, read by real consumers: google-pprof (Debian's
 * google-perftools) and jeprof (libjemalloc-dev), which ./bootstrap installs.
 *
 * The workloads are test/system/prof_probe, run in fresh processes with TIDE_CONF=prof:on,...,
 * once built as it is (no frame pointers: tide takes stacks with backtrace()) and once
 * with -fno-omit-frame-pointer (tide follows the frame pointers).  Shares are checked
 * against what the probe allocated; sampling makes them estimates, so the bounds leave
 * about four standard deviations at the rates used. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include "support.h"

#define ARRAY_SIZE_TT(a) (sizeof(a) / sizeof((a)[0]))

/* ARGV (ARGV[0] a path, or a name searched in $PATH) with TIDE_CONF=CONF (NULL: none) and
 * ENV; stdout and stderr captured; killed as hung after 10 minutes. */
static struct tt_child run(const char *const *argv, const char *conf, const char *const *env)
{
    struct tt_child_spec spec = { .path = argv[0], .argv = argv, .conf = conf, .env = env, .timeout_s = 600 };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run %s: %s", argv[0], strerror(errno));
    return c;
}

/* The probe PROBE in MODE with ARG, TIDE_CONF=CONF; it must succeed. */
static struct tt_child probe(const char *probe_path, const char *conf, const char *mode, const char *arg)
{
    struct tt_child r = run((const char *[]){ probe_path, mode, arg, NULL }, conf, NULL);
    char how[128];
    cr_assert(tt_child_exited(&r, 0), "%s %s %s (TIDE_CONF=%s) %s:\n%s", probe_path, mode, arg, conf,
              tt_child_how(&r, how, sizeof how), r.err);
    return r;
}

struct probe_stats {
    unsigned long long samples, live, walks, backtraces, dumps, reused;
};

static struct probe_stats probe_stats(const char *out)
{
    struct probe_stats s = { 0 };
    const char *l = strstr(out, "samples ");
    cr_assert(l && sscanf(l, "samples %llu live %llu walks %llu backtraces %llu dumps %llu reused %llu", &s.samples,
                          &s.live, &s.walks, &s.backtraces, &s.dumps, &s.reused) == 6,
              "the probe printed no statistics:\n%s", out);
    return s;
}

/* TOOL (google-pprof or jeprof) --text [OPTION] PROGRAM PROFILE: its output. */
static char *pprof_text(const char *tool, const char *program, const char *profile, const char *option)
{
    const char *argv[8] = { tool, "--text" };
    int n = 2;
    if (option)
        argv[n++] = option;
    argv[n++] = program;
    argv[n++] = profile;
    argv[n] = NULL;
    struct tt_child r = run(argv, NULL, NULL);
    char how[128];
    cr_assert(tt_child_exited(&r, 0), "%s --text %s %s %s (is it installed? ./bootstrap installs "
              "google-perftools and libjemalloc-dev):\n%s%s", tool, program, profile,
              tt_child_how(&r, how, sizeof how), r.out, r.err);
    /* Nothing in use: the readers print nothing at all (and exit 0). */
    cr_assert(strstr(r.out, "Total:") || r.out[strspn(r.out, " \n")] == '\0', "%s printed no total:\n%s\n%s", tool,
              r.out, r.err);
    cr_assert(!strstr(r.err, "rror") && !strstr(r.err, "WARN"), "%s complained:\n%s", tool, r.err);
    char *out = r.out;
    r.out = NULL;
    tt_child_free(&r);
    return out;
}

/* From --text output: the total in MB ... */
static double text_total(const char *text)
{
    const char *t = strstr(text, "Total:");
    if (!t)
        return 0; /* (pprof_text checked that the output is empty) */
    double mb = -1;
    cr_assert(t && sscanf(t, "Total: %lf MB", &mb) == 1, "no total in:\n%s", text);
    return mb;
}

/* ... FUNC's cumulative MB (0 when it is not listed) ... */
static double text_cum(const char *text, const char *func)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double flat, fp, sp, cum, cp;
        char name[256];
        if (sscanf(l, "%lf %lf%% %lf%% %lf %lf%% %255s", &flat, &fp, &sp, &cum, &cp, name) == 6 &&
            strcmp(name, func) == 0)
            return cum;
    }
    return 0;
}

/* ... and FUNC's flat MB and flat percentage (0 when it is not listed). */
static double text_flat(const char *text, const char *func, double *pct)
{
    *pct = 0;
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        double flat, fp, sp, cum, cp;
        char name[256];
        if (sscanf(l, "%lf %lf%% %lf%% %lf %lf%% %255s", &flat, &fp, &sp, &cum, &cp, name) == 6 &&
            strcmp(name, func) == 0) {
            *pct = fp;
            return flat;
        }
    }
    return 0;
}

static void tmpdir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/tide-prof-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}


/* The names of DIR's files that start with PREFIX and end with SUFFIX, sorted. */
static int list_files(const char *dir, const char *prefix, const char *suffix, char names[][256], int max)
{
    DIR *d = opendir(dir);
    cr_assert(d, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l >= pl + sl && strncmp(e->d_name, prefix, pl) == 0 && strcmp(e->d_name + l - sl, suffix) == 0 && n < max)
            snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
    return n;
}

static const char *const probes[] = { PROF_PROBE, PROF_PROBE_FP };

/* ---- the test: two call sites in known proportions ------------------------------ */

static void expect_share(const char *text, const char *tool, const char *func, double want, const char *what)
{
    double pct;
    double mb = text_flat(text, func, &pct);
    cr_expect(pct >= want * 0.9 && pct <= want * 1.1, "%s, %s: %s has %.1f%% (%.1f MB) of the live heap, want %.0f%% "
              "+- 10%%:\n%s", what, tool, func, pct, mb, want, text);
}

Test(prof, two_call_sites_in_known_shares_read_by_google_pprof_and_jeprof, .timeout = 600)
{
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        char dir[64], path[128];
        tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/shares.heap", dir);
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:64k", "shares", path);
        struct probe_stats s = probe_stats(r.out);
        const char *what = i ? "frame pointers" : "no frame pointers";
        /* How the stacks were taken: frame pointers where the program has them. */
        if (i)
            cr_expect_geq(s.walks * 10, s.samples * 9, "%s: %llu of %llu stacks by frame pointers", what, s.walks,
                          s.samples);
        else
            cr_expect_geq((s.backtraces + s.reused) * 10, s.samples * 9,
                          "%s: %llu of %llu stacks unwound, %llu recognised", what, s.backtraces, s.samples,
                          s.reused);
        const char *tools[] = { "google-pprof", "jeprof" };
        for (size_t t = 0; t < 2; t++) {
            char *text = pprof_text(tools[t], probes[i], path, NULL);
            double total = text_total(text);
            cr_expect(total >= 360 && total <= 440, "%s, %s: total %.1f MB, 400 MiB live:\n%s", what, tools[t], total,
                      text);
            expect_share(text, tools[t], "alloc_big", 75, what);
            expect_share(text, tools[t], "alloc_small", 25, what);
            double bp, sp, big = text_flat(text, "alloc_big", &bp), small = text_flat(text, "alloc_small", &sp);
            tt_report("prof: %s, %s --text: total %.1f MB, alloc_big %.1f MB (%.1f%%), alloc_small %.1f MB (%.1f%%); "
                      "%llu samples, %llu by frame pointers, %llu unwound, %llu recognised",
                      what, tools[t], total, big, bp, small, sp, s.samples, s.walks, s.backtraces, s.reused);
            if (t == 0 && i == 0)
                tt_report("prof: google-pprof --text output:\n%s", text);
            free(text);
        }
        tt_child_free(&r);
        tt_rmtree(dir);
    }
}

/* ---- every entry point: the stack starts at its caller ------------------------------------ */

Test(prof, every_entry_point_records_its_callers_stack, .timeout = 300)
{
    static const char *const funcs[] = { "call_malloc",   "call_calloc",        "call_realloc", "call_reallocarray",
                                         "call_memalign", "call_aligned_alloc", "call_valloc",  "call_posix_memalign",
                                         "call_pvalloc",  "call_realloc_grow",
                                         /* operator new's eight forms */
                                         "call_new", "call_new_array", "call_new_nothrow", "call_new_array_nothrow",
                                         "call_new_aligned", "call_new_array_aligned", "call_new_aligned_nothrow",
                                         "call_new_array_aligned_nothrow" };
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        char dir[64], path[128];
        tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/entries.heap", dir);
        /* Every allocation sampled, with weight 1: the figures are exact. */
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:1", "entries", path);
        struct probe_stats s = probe_stats(r.out);
        unsigned long long how = i ? s.walks : s.backtraces + s.reused;
        cr_expect_geq(how * 10, s.samples * 9, "%s: %llu of %llu stacks by %s", probes[i], how, s.samples,
                      i ? "frame pointers" : "backtrace()");
        char *text = pprof_text("google-pprof", probes[i], path, NULL);
        double sum = 0;
        for (size_t f = 0; f < ARRAY_SIZE_TT(funcs); f++) {
            double pct, mb = text_flat(text, funcs[f], &pct);
            cr_expect(mb >= 3.95 && mb <= 4.05, "%s: %s holds %.2f MB, want 4.0 (its own allocations, not a tide "
                      "frame's):\n%s", probes[i], funcs[f], mb, text);
            sum += mb;
        }
        double total = text_total(text);
        cr_expect(total - sum < 0.5, "%s: %.1f of %.1f MB elsewhere than the call_ functions:\n%s", probes[i],
                  total - sum, total, text);
        cr_expect(!strstr(text, " tide_") && !strstr(text, "_slow") && !strstr(text, "prof_"),
                  "%s: a frame of tide's own in the profile:\n%s", probes[i], text);
        tt_report("prof: %s: each entry point's 4 MiB at its caller; total %.1f MB", probes[i], total);
        free(text);
        tt_child_free(&r);
        tt_rmtree(dir);
    }
}

/* ---- a stack recognised again --------------------------------------------------------------- */

/* Without frame pointers a stack unwound once is recognised by its return addresses in
 * place: two callers of one function, called in turns from one place, differ only in the
 * second of them, and each keeps its own share. */
Test(prof, siblings_that_differ_in_one_return_address_keep_their_own_stacks, .timeout = 300)
{
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        char dir[64], path[128];
        tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/siblings.heap", dir);
        /* Every allocation sampled, with weight 1: the figures are exact. */
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:1", "siblings", path);
        struct probe_stats s = probe_stats(r.out);
        /* Built with a sanitizer, the probe without frame pointers has them in some frames
         * (main's), and a chain of them from make_block's caller's caller is taken for the
         * whole stack: a known limit of frame-pointer walks in mixed code, not what this
         * test is about. */
        bool mixed = i == 0 && s.walks > 0;
        if (i == 0 && !mixed) /* each stack unwound about once, then recognised */
            cr_expect(s.reused * 10 >= s.samples * 9 && s.backtraces < 100,
                      "no frame pointers: %llu samples, %llu unwound, %llu recognised", s.samples, s.backtraces,
                      s.reused);
        char *text = pprof_text("google-pprof", probes[i], path, NULL);
        double a = text_cum(text, "sibling_a"), b = text_cum(text, "sibling_b");
        if (mixed)
            tt_report("prof: %s: %llu of %llu stacks by frame pointers (mixed code): siblings not checked",
                      probes[i], s.walks, s.samples);
        else
            cr_expect(a >= 3.95 && a <= 4.05 && b >= 1.95 && b <= 2.05,
                      "%s: sibling_a holds %.2f MB (want 4.0), sibling_b %.2f MB (want 2.0):\n%s", probes[i], a, b,
                      text);
        tt_report("prof: %s: siblings %.2f / %.2f MB; %llu samples, %llu unwound, %llu recognised", probes[i], a, b,
                  s.samples, s.backtraces, s.reused);
        free(text);
        tt_child_free(&r);
        tt_rmtree(dir);
    }
}

/* The allocations tide made while it started (the profiler's own set-up among them) come
 * before sampling can start; the program's first ones must still be sampled. */
Test(prof, the_programs_first_allocations_are_sampled, .timeout = 60)
{
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:1", "first", "");
        struct probe_stats s = probe_stats(r.out);
        cr_expect_geq(s.samples, 64, "%s: 64 blocks of 1 KiB, every one due, %llu sampled", probes[i], s.samples);
        tt_child_free(&r);
    }
}

/* Sampled blocks carry their record in their own extent, small ones promoted to the
 * smallest large class and cached ones taken from the thread cache: to the program they
 * must be what any block of the size is (the probe checks, and that no record outlives its
 * block), and misuse of them is caught as of any other. */
Test(prof, sampled_blocks_are_blocks_like_any_other, .timeout = 120)
{
    tt_skip_under("background:on", "background:on starts the purger thread during the run, and glibc allocates its thread data with malloc: a sampled record more");
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:1", "blocks", "");
        struct probe_stats s = probe_stats(r.out);
        cr_expect_geq(s.samples, 4 * 9 * 3, "%s: every block due, %llu sampled", probes[i], s.samples);
        tt_child_free(&r);
    }
}

Test(prof, a_sampled_block_freed_twice_aborts, .timeout = 60)
{
    struct tt_child r = run((const char *[]){ probes[0], "blocks", "double", NULL }, "prof:on,prof_sample:1", NULL);
    char how[128];
    cr_expect(tt_child_signalled(&r, SIGABRT), "the probe %s (stderr: %s)", tt_child_how(&r, how, sizeof how), r.err);
    cr_expect(strncmp(r.err, "tide: free(): double free 0x", 28) == 0, "stderr was \"%s\"", r.err);
    tt_child_free(&r);
}

/* A small sample's block freed by another thread than the one that sampled it stays with
 * the profiler for the next sample: 800 samples of blocks handed to a thread that frees
 * them took 800 blocks from the page heap before (under its lock, in oversubscribed
 * bench/churn 5 % of the time). */
Test(prof, samples_freed_by_another_thread_reuse_their_blocks, .timeout = 120)
{
    tt_skip_under("guard:on", "guard:on holds freed large blocks in its quarantine: they are not reused at once");
    struct tt_child r = probe(PROF_PROBE, "prof:on,prof_sample:1", "handoff", "");
    unsigned long long large = 0, samples = 0;
    cr_assert(sscanf(r.out, "large %llu samples %llu", &large, &samples) == 2, "the probe printed \"%s\"", r.out);
    cr_expect_geq(samples, 800, "%llu samples, not every allocation", samples);
    cr_expect_leq(large, 16, "the page heap handed out %llu large blocks for %llu samples", large, samples);
    tt_child_free(&r);
}

/* A sample of a small class of a page or more stays a region of its slab, its record apart
 * and its page marked, rather than a block of 16 KiB of its own: on bench/churn (4-14 KiB
 * samples) the promoted blocks' pages were faulted in 240 times more a run than without the
 * profiler.  No large block may be handed out for them, the heap must check sound while
 * they are live, every record must go with its block (whichever thread frees it, and
 * through realloc), and misuse of them must be caught as of any other block. */
Test(prof, samples_of_a_page_or_more_stay_in_their_slab, .timeout = 120)
{
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:1", "inslab", "");
        unsigned long long large = 9, samples = 0, live = 0, after = 9;
        int check = -1;
        cr_assert(sscanf(r.out, "large %llu samples %llu live %llu after %llu check %d", &large, &samples, &live,
                         &after, &check) == 5,
                  "%s printed \"%s\" (stderr: %s)", probes[i], r.out, r.err);
        cr_expect_geq(samples, 128, "%s: %llu samples of 128 blocks, every one due", probes[i], samples);
        cr_expect_geq(live, 128, "%s: %llu records live while the 128 blocks were", probes[i], live);
        cr_expect_eq(large, 0, "%s: the page heap handed out %llu large blocks for them", probes[i], large);
        cr_expect_eq(after, 0, "%s: %llu records outlived their blocks", probes[i], after);
        cr_expect_eq(check, 0, "%s: tide_check() returned %d with them live", probes[i], check);
        tt_child_free(&r);
    }
    /* (The cleared key's and the released slab's cases are of a block a thread cache took
     * twice: their own tcache:on.  Those are reported at a pop, a return to the slab or the
     * slab's return to the page heap, whichever meets the copy first: "tide: " and then
     * ERR anywhere, as test/api/hardening checks its unsampled cases.) */
    static const struct {
        const char *how, *err, *conf;
    } misuse[] = { { "double", "tide: free(): double free 0x", "prof:on,prof_sample:1" },
                   { "interior", "tide: free(): invalid pointer 0x", "prof:on,prof_sample:1" },
                   { "cleared", "(): double free 0x", "prof:on,prof_sample:1,tcache:on" },
                   { "released", "(): double free 0x", "prof:on,prof_sample:1,tcache:on" } };
    for (size_t i = 0; i < ARRAY_SIZE_TT(misuse); i++) {
        struct tt_child r = run((const char *[]){ PROF_PROBE, "inslab", misuse[i].how, NULL }, misuse[i].conf, NULL);
        char how[128];
        cr_expect(tt_child_signalled(&r, SIGABRT), "%s: the probe %s (stderr: %s)", misuse[i].how,
                  tt_child_how(&r, how, sizeof how), r.err);
        bool anywhere = misuse[i].err[0] == '(';
        cr_expect(anywhere ? strncmp(r.err, "tide: ", 6) == 0 && strstr(r.err, misuse[i].err) != NULL
                           : strncmp(r.err, misuse[i].err, strlen(misuse[i].err)) == 0,
                  "%s: stderr was \"%s\"", misuse[i].how, r.err);
        tt_child_free(&r);
    }
}

/* Samples taken by 12 threads (more than the profiler's 8 shards of counts) and freed by 12
 * others: the freeing threads' counts are taken off in shards the sampling threads never
 * used, and the profile must still add up, to what was held before the frees and to
 * nothing after. */
Test(prof, samples_freed_by_other_threads_balance_across_shards, .timeout = 300)
{
    char dir[64], held[128], freed[128];
    tmpdir(dir, sizeof dir);
    struct tt_child r = probe(PROF_PROBE, "prof:on,prof_sample:16k", "crossfree", dir);
    snprintf(held, sizeof held, "%s/held.heap", dir);
    snprintf(freed, sizeof freed, "%s/freed.heap", dir);
    char *before = pprof_text("google-pprof", PROF_PROBE, held, NULL);
    char *after = pprof_text("google-pprof", PROF_PROBE, freed, NULL);
    char *alloc = pprof_text("google-pprof", PROF_PROBE, freed, "--alloc_space");
    double pct, mb_held = text_flat(before, "cross_alloc", &pct), mb_left = text_flat(after, "cross_alloc", &pct),
                mb_all = text_flat(alloc, "cross_alloc", &pct);
    /* 12 x 2 MiB (pprof's MB are MiB), at about 1,500 samples: within 10 %. */
    cr_expect(mb_held >= 24 * 0.9 && mb_held <= 24 * 1.1, "held: cross_alloc %.1f MB, not 24:\n%s", mb_held,
              before);
    cr_expect_eq(mb_left, 0, "all freed, cross_alloc still holds %.1f MB:\n%s", mb_left, after);
    cr_expect(mb_all >= 24 * 0.9 && mb_all <= 24 * 1.1, "--alloc_space: cross_alloc %.1f MB, not 24:\n%s",
              mb_all, alloc);
    tt_report("prof: 12 threads' samples freed by 12 others: %.1f MB held, %.1f MB left, %.1f MB allocated", mb_held,
              mb_left, mb_all);
    free(before);
    free(after);
    free(alloc);
    tt_child_free(&r);
    tt_rmtree(dir);
}

/* ---- fork and threads ----------------------------------------------------------------------- */

Test(prof, fork_children_and_their_threads_are_profiled, .timeout = 600)
{
    char dir[64], conf[256], prefix[128];
    tmpdir(dir, sizeof dir);
    snprintf(prefix, sizeof prefix, "%s/p", dir);
    snprintf(conf, sizeof conf, "prof:on,prof_sample:16k,prof_final:on,prof_prefix:%s", prefix);
    struct tt_child r = probe(PROF_PROBE, conf, "fork", "");
    /* Every process dumped at exit: 20 children and the parent. */
    static char names[64][256];
    int n = list_files(dir, "p.", ".f.heap", names, 64);
    cr_expect_eq(n, 21, "%d final profiles in %s (20 children and the parent):\n%s", n, dir, r.out);
    /* The last child: its thread's 32 MiB, and the parent's 32 MiB it inherited. */
    const char *last = NULL;
    for (const char *l = r.out; (l = strstr(l, "child ")) != NULL; l++)
        last = l;
    cr_assert(last, "the probe printed no child:\n%s", r.out);
    int child = atoi(last + 6);
    char pat[64], file[512];
    snprintf(pat, sizeof pat, "p.%d.", child);
    int m = list_files(dir, pat, ".f.heap", names, 64);
    cr_assert_eq(m, 1, "child %d left %d final profiles", child, m);
    snprintf(file, sizeof file, "%s/%s", dir, names[0]);
    char *text = pprof_text("google-pprof", PROF_PROBE, file, NULL);
    double pct, inherited = text_flat(text, "alloc_before_fork", &pct), own = text_flat(text, "alloc_in_child_thread", &pct);
    cr_expect(own >= 32 * 0.85 && own <= 32 * 1.15, "child %d: its thread's 32 MiB shows as %.1f MB:\n%s", child, own,
              text);
    cr_expect(inherited >= 32 * 0.85 && inherited <= 32 * 1.15,
              "child %d: the 32 MiB it inherited shows as %.1f MB:\n%s", child, inherited, text);
    tt_report("prof: fork child %d (%s): alloc_in_child_thread %.1f MB, alloc_before_fork %.1f MB", child, names[0],
              own, inherited);
    free(text);
    /* The parent freed its blocks before it exited. */
    const char *pl = strstr(r.out, "parent ");
    cr_assert(pl, "the probe printed no parent:\n%s", r.out);
    snprintf(pat, sizeof pat, "p.%d.", atoi(pl + 7));
    m = list_files(dir, pat, ".f.heap", names, 64);
    cr_assert_eq(m, 1, "the parent left %d final profiles", m);
    snprintf(file, sizeof file, "%s/%s", dir, names[0]);
    text = pprof_text("google-pprof", PROF_PROBE, file, NULL);
    double gone = text_flat(text, "alloc_before_fork", &pct);
    cr_expect_eq(gone, 0, "the parent freed its 32 MiB, its final profile shows %.1f MB:\n%s", gone, text);
    free(text);
    tt_child_free(&r);
    tt_rmtree(dir);
}

/* ---- one size, sampled by its class's countdown ----------------------------------------------- */

/* The malloc fast path counts allocations of each class, not bytes, and a sampled block is
 * weighed by its class's usable size: the totals must still estimate the bytes and blocks
 * the program asked for, whether the request fills its class (48, 1024), falls short of it
 * (40 in 48, 1000 in 1024) or is of a class a slab holds only 2 of (14336).  32 MiB at
 * prof_sample:16k: about 2,000 samples, the estimate's standard error about 2 %. */
Test(prof, blocks_of_one_size_are_estimated_without_bias, .timeout = 300)
{
    char dir[64], arg[160];
    tmpdir(dir, sizeof dir);
    static const size_t sizes[] = { 40, 48, 1000, 1024, 14336 };
    for (size_t i = 0; i < ARRAY_SIZE_TT(sizes); i++) {
        snprintf(arg, sizeof arg, "%zu:%s/class%zu.heap", sizes[i], dir, sizes[i]);
        struct tt_child r = probe(PROF_PROBE, "prof:on,prof_sample:16k", "class", arg);
        char *raw = tt_read_file(strchr(arg, ':') + 1, NULL);
        cr_assert(raw, "no profile at %s", strchr(arg, ':') + 1);
        unsigned long long count, bytes;
        cr_assert(sscanf(raw, "heap profile: %llu: %llu [", &count, &bytes) == 2, "the header:\n%.300s", raw);
        double want_count = (double)((32u << 20) / sizes[i]), want_bytes = want_count * (double)sizes[i];
        cr_expect(bytes >= want_bytes * 0.85 && bytes <= want_bytes * 1.15,
                  "%zu-byte blocks: %.0f bytes live, the profile says %llu", sizes[i], want_bytes, bytes);
        cr_expect(count >= want_count * 0.85 && count <= want_count * 1.15,
                  "%zu-byte blocks: %.0f live, the profile says %llu", sizes[i], want_count, count);
        tt_report("prof: %zu-byte blocks: %llu bytes in %llu blocks estimated, %.0f in %.0f live (%.3f)", sizes[i],
                  bytes, count, want_bytes, want_count, (double)bytes / want_bytes);
        free(raw);
        tt_child_free(&r);
    }
    tt_rmtree(dir);
}

/* ---- nothing live ------------------------------------------------------------------------------ */

Test(prof, a_profile_with_nothing_live_is_valid, .timeout = 300)
{
    char dir[64], path[128];
    tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.heap", dir);
    struct tt_child r = probe(PROF_PROBE, "prof:on,prof_sample:1g", "empty", path);
    char *raw = tt_read_file(path, NULL);
    cr_assert(raw, "no profile at %s", path);
    static const char header[] = "heap profile: 0: 0 [0: 0] @ heapprofile\n";
    cr_expect(strncmp(raw, header, sizeof header - 1) == 0, "the header:\n%.300s", raw);
    cr_expect(strstr(raw, "\nMAPPED_LIBRARIES:\n"), "no mappings:\n%.2000s", raw);
    free(raw);
    const char *tools[] = { "google-pprof", "jeprof" };
    for (size_t t = 0; t < 2; t++) {
        char *text = pprof_text(tools[t], PROF_PROBE, path, NULL);
        cr_expect_eq(text_total(text), 0, "%s: an empty profile totals %.1f MB:\n%s", tools[t], text_total(text), text);
        free(text);
    }
    tt_child_free(&r);
    /* Everything freed: nothing in use, all of it in the cumulative counts. */
    snprintf(path, sizeof path, "%s/freed.heap", dir);
    r = probe(PROF_PROBE, "prof:on,prof_sample:64k", "freed", path);
    char *inuse = pprof_text("google-pprof", PROF_PROBE, path, NULL);
    char *alloc = pprof_text("google-pprof", PROF_PROBE, path, "--alloc_space");
    double pct, live = text_flat(inuse, "alloc_and_free", &pct), all = text_flat(alloc, "alloc_and_free", &pct);
    cr_expect_eq(live, 0, "64 MiB freed, %.1f MB still in use:\n%s", live, inuse);
    cr_expect(all >= 64 * 0.9 && all <= 64 * 1.1, "64 MiB allocated in all, --alloc_space says %.1f MB:\n%s", all,
              alloc);
    tt_report("prof: freed: alloc_and_free in use %.1f MB, allocated %.1f MB", live, all);
    free(inuse);
    free(alloc);
    tt_child_free(&r);
    tt_rmtree(dir);
}

/* ---- prof_interval ---------------------------------------------------------------------------- */

Test(prof, interval_dumps_follow_the_heaps_growth, .timeout = 300)
{
    char dir[64], conf[256], pid_prefix[64];
    tmpdir(dir, sizeof dir);
    snprintf(conf, sizeof conf, "prof:on,prof_sample:64k,prof_interval:8m,prof_prefix:%s/g", dir);
    struct tt_child r = probe(PROF_PROBE, conf, "grow", "64");
    static char names[64][256];
    int n = list_files(dir, "g.", ".heap", names, 64);
    /* 64 MiB as sampled (+- 3%): one dump each 8 MiB, 8 +- 1. */
    cr_expect(n >= 6 && n <= 9, "%d interval dumps for 64 MiB at prof_interval:8m", n);
    cr_assert_gt(n, 0);
    int pid = atoi(names[0] + 2);
    snprintf(pid_prefix, sizeof pid_prefix, "g.%d.", pid);
    for (int i = 0; i < n; i++) {
        char want[64];
        snprintf(want, sizeof want, ".i%d.heap", i);
        bool found = false;
        for (int j = 0; j < n; j++)
            found |= strncmp(names[j], pid_prefix, strlen(pid_prefix)) == 0 && strstr(names[j], want);
        cr_expect(found, "no dump named PREFIX.%d.SEQ%s among %d", pid, want, n);
    }
    struct probe_stats s = probe_stats(r.out);
    cr_expect_eq(s.dumps, (unsigned long long)n, "the statistics count %llu dumps, %d files", s.dumps, n);
    char last[512];
    snprintf(last, sizeof last, "%s/%s", dir, names[n - 1]);
    char *text = pprof_text("google-pprof", PROF_PROBE, last, NULL);
    double pct, grown = text_flat(text, "grow_heap", &pct);
    cr_expect_gt(grown, 40, "the last interval dump:\n%s", text);
    tt_report("prof: prof_interval:8m, 64 MiB: %d dumps, the last with grow_heap %.1f MB", n, grown);
    free(text);
    tt_child_free(&r);
    tt_rmtree(dir);
}

/* ---- under load ---------------------------------------------------------------------------------- */

Test(prof, records_balance_under_threads_realloc_and_dumps, .timeout = 600)
{
    for (size_t i = 0; i < ARRAY_SIZE_TT(probes); i++) {
        char dir[64], path[128];
        tmpdir(dir, sizeof dir);
        snprintf(path, sizeof path, "%s/stress.heap", dir);
        struct tt_child r = probe(probes[i], "prof:on,prof_sample:4k", "stress", path);
        struct probe_stats s = probe_stats(r.out);
        char *text = pprof_text("google-pprof", probes[i], path, NULL);
        double pct, left = text_flat(text, "stress_work", &pct);
        cr_expect_eq(left, 0, "%s: everything was freed, stress_work still holds %.1f MB:\n%s", probes[i], left, text);
        cr_expect_gt(s.samples, 1000, "%s: %llu samples", probes[i], s.samples);
        tt_report("prof: stress (%s): %llu samples, %llu live at the end, %llu dumps", probes[i], s.samples, s.live,
                  s.dumps);
        free(text);
        tt_child_free(&r);
        tt_rmtree(dir);
    }
}

/* ---- off, and the wrapper ------------------------------------------------------------------------- */

/* In a folder of its own: a fixed name in /tmp was written by another run of this suite
 * (under prof:on, in another tree or variant) at the same time. */
Test(prof, dump_without_the_profiler_fails_with_enoent)
{
    tt_skip_under("prof:on", "it needs the profiler off");
    char dir[64], path[96];
    tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/never.heap", dir);
    errno = 0;
    cr_expect_eq(tide_prof_dump(path), -1);
    cr_expect_eq(errno, ENOENT);
    cr_expect_eq(access(path, F_OK), -1, "a file was written");
    tt_rmtree(dir);
}

Test(prof, dump_reports_the_error_of_writing, .timeout = 60)
{
    const char *argv[] = { PROF_PROBE, "empty", "/nonexistent-dir/x.heap", NULL };
    struct tt_child r = run(argv, "prof:on", NULL);
    char how[128];
    cr_expect(tt_child_exited(&r, 2), "the probe %s", tt_child_how(&r, how, sizeof how));
    cr_expect(strstr(r.err, "No such file or directory"), "the probe's error:\n%s", r.err);
    tt_child_free(&r);
}

/* A profile that cannot be written (here into a folder that does not exist) gets one line
 * naming the file and why, in words ("errno 2" before). */
Test(prof, a_profile_that_cannot_be_written_says_why_in_words, .timeout = 60)
{
    char lib[600];
    snprintf(lib, sizeof lib, "TIDE_LIB=%s", TIDE_SO);
    const char *argv[] = { TIDE_WRAPPER, "--prof", "/nonexistent-dir/x", "--", PROF_PROBE, "grow", "1", NULL };
    struct tt_child r = run(argv, NULL, (const char *[]){ lib, NULL });
    char how[128];
    cr_expect(tt_child_exited(&r, 0), "tide --prof %s:\n%s", tt_child_how(&r, how, sizeof how), r.err);
    static const char head[] = "tide: cannot write the heap profile /nonexistent-dir/x.",
                      tail[] = ".f.heap: No such file or directory\n";
    size_t n = strlen(r.err);
    cr_expect(strncmp(r.err, head, sizeof head - 1) == 0 && n > sizeof tail &&
                  strcmp(r.err + n - (sizeof tail - 1), tail) == 0 && strchr(r.err, '\n') == r.err + n - 1,
              "want one line \"%s...%s\", got:\n%s", head, tail, r.err);
    tt_child_free(&r);
}

Test(prof, wrapper_profiles_with_prof_and_says_how_to_read_it, .timeout = 120)
{
    char dir[64], prefix[128], lib[600];
    tmpdir(dir, sizeof dir);
    snprintf(prefix, sizeof prefix, "%s/w", dir);
    snprintf(lib, sizeof lib, "TIDE_LIB=%s", TIDE_SO);
    /* 16 MiB in samples of 16 KiB on average: about 1,000 samples, so the estimate is within
     * a few percent (at the default 512 KiB, about 32 samples: off by a third one run in
     * twenty or so). */
    const char *argv[] = { TIDE_WRAPPER, "-c", "prof_sample:16k", "--prof", prefix, "--", PROF_PROBE, "grow", "16", NULL };
    struct tt_child r = run(argv, NULL, (const char *[]){ lib, NULL });
    char how[128];
    cr_assert(tt_child_exited(&r, 0), "tide --prof %s:\n%s", tt_child_how(&r, how, sizeof how), r.err);
    static char names[8][256];
    int n = list_files(dir, "w.", ".f.heap", names, 8);
    cr_assert_eq(n, 1, "%d final profiles under %s", n, prefix);
    char file[512];
    snprintf(file, sizeof file, "%s/%s", dir, names[0]);
    char *text = pprof_text("google-pprof", PROF_PROBE, file, NULL);
    double pct, mb = text_flat(text, "grow_heap", &pct);
    cr_expect(mb >= 16 * 0.7 && mb <= 16 * 1.3, "tide --prof: grow_heap %.1f MB of 16:\n%s", mb, text);
    free(text);
    tt_child_free(&r);
    tt_rmtree(dir);
    struct tt_child h = run((const char *[]){ TIDE_WRAPPER, "--help", NULL }, NULL, NULL);
    cr_expect(tt_child_exited(&h, 0), "tide --help %s", tt_child_how(&h, how, sizeof how));
    cr_expect(strstr(h.out, "--prof") && strstr(h.out, "google-pprof") && strstr(h.out, "jeprof"),
              "tide --help must say how to profile and how to read the dumps:\n%s", h.out);
    tt_child_free(&h);
}
