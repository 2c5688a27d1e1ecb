/* SPDX-License-Identifier: MIT */
/* guard.c - guard:on and guard_sample: a guard page after blocks and slabs, freed blocks
 * held as guards, and the report tide's SIGSEGV handler prints.
 *
 * Each fault case runs test/system/guard_probe in a child with its TIDE_CONF, reads the
 * block and the address it touches from its stdout, and checks that it died of SIGSEGV
 * after tide printed its report: the exact first line (address, overflow or use after
 * free, block, size) and, for a sampled block, backtraces that name the probe's
 * alloc_victim and free_victim.  The VMA case runs the same workload with guard:on and
 * without it and compares /proc/self/maps.  The quarantine cases run in this process.
 * Nothing here measures time: the children have a hang detector only. */
#include "support.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>

#ifndef GUARD_PROBE
#define GUARD_PROBE "test/system/guard_probe"
#endif
#define MIN(a, b) ((a) < (b) ? (a) : (b))

typedef struct outcome_s {
    struct tt_child ch;
    void *ptr, *at; /* the last ones the probe named */
    bool went;
} outcome_t;

static void run_probe(const char *c, const char *conf, outcome_t *o)
{
    memset(o, 0, sizeof *o);
    const char *argv[] = { GUARD_PROBE, c, NULL };
    struct tt_child_spec spec = { .path = GUARD_PROBE, .argv = argv, .conf = conf, .silence_s = 60 };
    cr_assert(tt_child_run(&spec, &o->ch) == 0, "cannot run %s: %s", GUARD_PROBE, strerror(errno));
    cr_assert(!o->ch.hung, "%s: the probe hung (stdout: %s, stderr: %s)", c, o->ch.out, o->ch.err);
    for (char *l = o->ch.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "ptr ", 4))
            o->ptr = (void *)strtoull(l + 4, NULL, 16);
        else if (!strncmp(l, "at ", 3))
            o->at = (void *)strtoull(l + 3, NULL, 16);
        else if (!strncmp(l, "go\n", 3))
            o->went = true;
    }
    cr_assert(o->went && o->ptr && o->at, "%s: the probe did not get to the access (stdout: %s, stderr: %s)", c,
              o->ch.out, o->ch.err);
}

/* The line after LINE in TEXT (or NULL). */
static const char *line_after(const char *text, const char *line)
{
    const char *l = strstr(text, line);
    return l ? l + strlen(line) : NULL;
}

/* CASE must die of SIGSEGV, having printed first exactly
 * "tide: SIGSEGV at <at>: <kind> the block <ptr> of <size> bytes". */
static void expect_fault(const char *c, const char *conf, const char *kind, size_t size, outcome_t *o)
{
    run_probe(c, conf, o);
    char how[128], want[256];
    cr_expect(tt_child_signalled(&o->ch, SIGSEGV), "%s: expected death by SIGSEGV, it %s (stdout: %s, stderr: %s)", c,
              tt_child_how(&o->ch, how, sizeof how), o->ch.out, o->ch.err);
    cr_expect(!strstr(o->ch.out, "survived"), "%s: the access did not fault", c);
    snprintf(want, sizeof want, "tide: SIGSEGV at %p: %s the block %p of %zu bytes\n", o->at, kind, o->ptr, size);
    cr_expect(!strncmp(o->ch.err, want, strlen(want)), "%s: the report must start with\n%s\nit was\n%s", c, want,
              o->ch.err);
    cr_log_info("%s with TIDE_CONF=%s:\n%s", c, conf ? conf : "", o->ch.err);
}

static void expect_no_backtraces(const char *c, const outcome_t *o)
{
    cr_expect(strstr(o->ch.err, "\ntide: no backtraces: the block was not sampled (guard_sample)\n"),
              "%s: expected the line saying the block was not sampled:\n%s", c, o->ch.err);
}

/* The report's backtraces: its malloc's names alloc_victim, its free's (FREED) free_victim. */
static void expect_backtraces(const char *c, const outcome_t *o, bool freed)
{
    const char *a = line_after(o->ch.err, "\ntide: the block was allocated at:\n");
    const char *f = line_after(o->ch.err, "\ntide: and freed at:\n");
    cr_expect(a != NULL, "%s: no allocation backtrace in\n%s", c, o->ch.err);
    if (a) {
        const char *end = f ? f : a + strlen(a);
        const char *v = strstr(a, "(alloc_victim+");
        cr_expect(v && v < end, "%s: the allocation backtrace does not name alloc_victim:\n%s", c, o->ch.err);
    }
    if (freed) {
        cr_expect(f && strstr(f, "(free_victim+"), "%s: no free backtrace naming free_victim in\n%s", c, o->ch.err);
    } else {
        cr_expect(f == NULL, "%s: a free backtrace for a live block:\n%s", c, o->ch.err);
    }
}

/* ---- guard:on ------------------------------------------------------------------------ */

Test(guard, on_catches_a_write_one_byte_past_a_large_block, .timeout = 120)
{
    outcome_t o;
    expect_fault("large_overflow", "guard:on", "overflow past", 256 << 10, &o);
    expect_no_backtraces("large_overflow", &o);
}

Test(guard, on_catches_a_read_after_free_of_a_large_block, .timeout = 120)
{
    outcome_t o;
    expect_fault("large_uaf", "guard:on", "use after free of", 256 << 10, &o);
    expect_no_backtraces("large_uaf", &o);
}

Test(guard, on_holds_a_freed_block_of_a_cached_class, .timeout = 120)
{
    outcome_t o;
    expect_fault("cached_large_uaf", "guard:on", "use after free of", 20480, &o);
}

Test(guard, on_catches_a_write_past_the_last_object_of_a_slab, .timeout = 120)
{
    outcome_t o;
    expect_fault("slab_overflow", "guard:on", "overflow past", 4096, &o);
}

Test(guard, the_guard_page_follows_a_block_realloc_grew, .timeout = 120)
{
    outcome_t o;
    expect_fault("realloc_grow_overflow", "guard:on", "overflow past", 512 << 10, &o);
}

Test(guard, the_guard_page_follows_a_block_realloc_shrank, .timeout = 120)
{
    outcome_t o;
    expect_fault("realloc_shrink_overflow", "guard:on", "overflow past", 128 << 10, &o);
}

Test(guard, without_it_the_write_past_a_large_block_goes_unseen, .timeout = 120)
{
    tt_skip_under("guard:on", "it compares with guard off, and the variant's guard:on is in every child's TIDE_CONF");
    /* The test's own control: the same write with guard off lands on the next page. */
    outcome_t o;
    run_probe("large_overflow", NULL, &o);
    cr_expect(tt_child_exited(&o.ch, 0) && strstr(o.ch.out, "survived"), "expected a clean exit: %s", o.ch.err);
}

/* ---- guard_sample ---------------------------------------------------------------------- */

Test(guard, sample_catches_a_write_one_byte_past_a_sampled_block, .timeout = 120)
{
    outcome_t o;
    expect_fault("sample_overflow", "guard_sample:1", "overflow past", 96, &o);
    expect_backtraces("sample_overflow", &o, false);
}

Test(guard, sample_catches_a_read_after_free_of_a_sampled_block, .timeout = 120)
{
    outcome_t o;
    expect_fault("sample_uaf", "guard_sample:1", "use after free of", 96, &o);
    expect_backtraces("sample_uaf", &o, true);
}

Test(guard, sample_with_guard_on_too, .timeout = 120)
{
    outcome_t o;
    expect_fault("sample_uaf", "guard:on,guard_sample:1", "use after free of", 96, &o);
    expect_backtraces("sample_uaf", &o, true);
}

Test(guard, sample_takes_about_one_allocation_in_n_bytes, .timeout = 120)
{
    /* 32 MiB each way at guard_sample:128k: 256 samples expected, about 16 either side
     * (the intervals are exponential); the bounds are many times that. */
    const char *argv[] = { GUARD_PROBE, "rate", NULL };
    struct tt_child_spec spec = { .path = GUARD_PROBE, .argv = argv, .conf = "guard_sample:128k", .silence_s = 60 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    cr_assert(tt_child_exited(&ch, 0), "stderr: %s", ch.err);
    unsigned long small = 0, large = 0;
    cr_assert(sscanf(ch.out, "sampled small %lu large %lu", &small, &large) == 2, "stdout: %s", ch.out);
    cr_log_info("guard_sample:128k sampled %lu of 32 MiB of 64-byte objects, %lu of 32 MiB of 32 KiB blocks", small,
                large);
    cr_expect(small >= 128 && small <= 400, "%lu samples in 32 MiB of small objects", small);
    cr_expect(large >= 128 && large <= 400, "%lu samples in 32 MiB of 32 KiB blocks", large);
}

Test(guard, a_sampled_block_is_right_aligned_and_usable, .timeout = 120)
{
    const char *argv[] = { GUARD_PROBE, "sample_usable", NULL };
    struct tt_child_spec spec = { .path = GUARD_PROBE, .argv = argv, .conf = "guard_sample:1", .silence_s = 60 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    cr_expect(tt_child_exited(&ch, 0), "stderr: %s", ch.err);
    cr_expect(strstr(ch.out, "usable 112 aligned 1\nsurvived\n"), "stdout: %s", ch.out);
    cr_expect_str_eq(ch.err, "");
}

static void expect_handler(const char *conf, const char *want)
{
    const char *argv[] = { GUARD_PROBE, "handler", NULL };
    struct tt_child_spec spec = { .path = GUARD_PROBE, .argv = argv, .conf = conf, .silence_s = 60 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    cr_expect(tt_child_exited(&ch, 0), "stderr: %s", ch.err);
    cr_expect_str_eq(ch.out, want, "TIDE_CONF=%s", conf ? conf : "");
}

Test(guard, the_handler_is_installed_only_for_the_guard_keys, .timeout = 120)
{
    tt_skip_under("guard:on", "it compares with guard off, and the variant's guard:on is in every child's TIDE_CONF");
    expect_handler(NULL, "handler default\n");
    expect_handler("guard:off,guard_sample:0", "handler default\n");
    expect_handler("guard:on", "handler siginfo\n");
    expect_handler("guard_sample:1m", "handler siginfo\n");
}

Test(guard, the_handler_chains_to_the_programs_for_other_faults, .timeout = 120)
{
    outcome_t o;
    run_probe("chain_other", NULL, &o);
    cr_expect(tt_child_exited(&o.ch, 42) && strstr(o.ch.out, "program handler\n"),
              "the program's handler did not get the fault (stdout: %s, stderr: %s)", o.ch.out, o.ch.err);
    cr_expect_str_eq(o.ch.err, "", "tide reported a fault that is not its own");
}

Test(guard, the_handler_reports_then_hands_on_to_the_programs, .timeout = 120)
{
    tt_skip_under("guard:on", "it compares with guard off, and the variant's guard:on is in every child's TIDE_CONF");
    outcome_t o;
    run_probe("chain_tide", NULL, &o);
    char want[256];
    snprintf(want, sizeof want, "tide: SIGSEGV at %p: overflow past the block %p of 96 bytes\n", o.at, o.ptr);
    cr_expect(!strncmp(o.ch.err, want, strlen(want)), "expected the report, got: %s", o.ch.err);
    cr_expect(tt_child_exited(&o.ch, 42) && strstr(o.ch.out, "program handler\n"),
              "the program's handler did not get the fault after tide's report (stdout: %s)", o.ch.out);
}

/* ---- double frees of held blocks ---------------------------------------------------------- */

static void expect_double_free(const char *c, const char *conf)
{
    outcome_t o;
    memset(&o, 0, sizeof o);
    const char *argv[] = { GUARD_PROBE, c, NULL };
    struct tt_child_spec spec = { .path = GUARD_PROBE, .argv = argv, .conf = conf, .silence_s = 60 };
    cr_assert(tt_child_run(&spec, &o.ch) == 0);
    void *p = NULL;
    const char *l = strstr(o.ch.out, "ptr ");
    if (l)
        p = (void *)strtoull(l + 4, NULL, 16);
    char want[128];
    snprintf(want, sizeof want, "tide: free(): double free %p\n", p);
    cr_expect(tt_child_signalled(&o.ch, SIGABRT), "%s: expected SIGABRT (stdout: %s)", c, o.ch.out);
    cr_expect_str_eq(o.ch.err, want);
}

Test(guard, a_second_free_of_a_held_block_is_a_double_free, .timeout = 120)
{
    expect_double_free("double_free_held", "guard:on");
}

Test(guard, a_second_free_of_a_sampled_block_is_a_double_free, .timeout = 120)
{
    expect_double_free("double_free_sampled", "guard_sample:1");
}

/* ---- no VMA cost ------------------------------------------------------------------------- */

typedef struct vma_counts_s {
    int process[2], tide[2];
    unsigned long meta[2], guard_bytes[2], held[2], sampled[2];
} vma_counts_t;

static vma_counts_t vma_run(const char *conf)
{
    const char *argv[] = { GUARD_PROBE, "vmas", NULL };
    struct tt_child_spec spec = {
        .path = GUARD_PROBE, .argv = argv, .conf = conf, .silence_s = 120, .fixed_layout = true
    };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    char how[128];
    cr_assert(tt_child_exited(&ch, 0), "vmas with TIDE_CONF=%s %s: %s", conf ? conf : "", tt_child_how(&ch, how, sizeof how),
              ch.err);
    vma_counts_t v;
    memset(&v, 0, sizeof v);
    const char *phase[] = { "live:", "freed:" };
    for (int i = 0; i < 2; i++) {
        const char *l = strstr(ch.out, phase[i]);
        cr_assert(l && sscanf(l + strlen(phase[i]), " process %d tide %d meta %lu guard_bytes %lu held %lu sampled %lu",
                              &v.process[i], &v.tide[i], &v.meta[i], &v.guard_bytes[i], &v.held[i], &v.sampled[i]) == 6,
                  "bad output: %s", ch.out);
    }
    cr_assert(strstr(ch.out, "check 0\n"), "tide_check() failed: %s", ch.err);
    cr_log_info("TIDE_CONF=%s: %s", conf ? conf : "", ch.out);
    return v;
}

/* tide's own VMAs must be the same every time.  The process's count also depends on
 * where the kernel put the libraries: with a randomised layout, an anonymous mapping of
 * someone else's (libstdc++'s bss, the sanitizer runtime's) lands next to another one in
 * some runs and merges with it, one VMA either way (52 to 54 VMAs in runs of the UBSan
 * build with the same TIDE_CONF), where guard pages that split would cost hundreds.  So
 * the probe runs with a fixed layout; where the kernel refuses that, a pair of runs whose
 * process counts differ is run again, up to 5 times. */
Test(guard, on_costs_no_vma, .timeout = 600)
{
    tt_skip_under("guard:on", "it compares with guard off, and the variant's guard:on is in every child's TIDE_CONF");
    bool same = false;
    for (int attempt = 0; attempt < 5 && !same; attempt++) {
        vma_counts_t off = vma_run(NULL), on = vma_run("guard:on");
        /* The guards were there: after every slab and block, and the freed blocks held. */
        cr_expect(off.guard_bytes[0] == 0 && off.held[1] == 0);
        cr_expect(on.guard_bytes[0] >= 400 * 4096, "guard:on made %lu bytes of guard pages", on.guard_bytes[0]);
        cr_expect(on.held[1] > 0, "guard:on held no freed block");
        same = true;
        for (int i = 0; i < 2; i++) {
            cr_expect_eq(on.tide[i], off.tide[i], "%s: tide's range is %d VMAs with guard:on, %d without",
                         i ? "freed" : "live", on.tide[i], off.tide[i]);
            cr_expect_eq(on.meta[i], off.meta[i]);
            if (on.process[i] != off.process[i]) {
                cr_log_info("attempt %d, %s: the process has %d VMAs with guard:on, %d without", attempt,
                            i ? "freed" : "live", on.process[i], off.process[i]);
                same = false;
            }
        }
    }
    cr_expect(same, "the process's VMA count differed between guard:on and off in 5 pairs of runs");
}

Test(guard, sample_costs_no_vma_in_the_heap, .timeout = 300)
{
    /* (The process's own count grows by the unwinder backtrace() loads: libgcc_s.) */
    vma_counts_t off = vma_run(NULL), on = vma_run("guard_sample:4096");
    cr_expect(on.sampled[0] > 0, "nothing was sampled");
    for (int i = 0; i < 2; i++) {
        cr_expect_eq(on.tide[i], off.tide[i], "%s: tide's range is %d VMAs with guard_sample, %d without",
                     i ? "freed" : "live", on.tide[i], off.tide[i]);
        cr_expect_eq(on.meta[i], off.meta[i]);
    }
}

/* ---- the quarantine, in a child of this process (no other thread allocates there) ----- */

static int quarantine_child(void *arg)
{
    (void)arg;
    TT_CHILD_CHECK(tide_conf_set("guard", "on") == 0 && tide_conf_set("guard_quarantine", "1m") == 0, "conf");
    enum { N = 12, SZ = 256 << 10 };
    const size_t each = SZ + 4096; /* the block and its guard page */
    static char *v[N];
    for (int i = 0; i < N; i++)
        v[i] = malloc(SZ);
    tide_stats_t s0 = tt_stats(), s;
    TT_CHILD_CHECK(s0.guard_bytes >= N * 4096, "guard bytes %lu for %d blocks", (unsigned long)s0.guard_bytes, N);
    free(v[0]);
    s = tt_stats();
    TT_CHILD_CHECK(s.held == s0.held + each, "one block freed: %lu held, %lu before", (unsigned long)s.held,
                   (unsigned long)s0.held);
    /* Held, its pages are not handed out again. */
    char *again = malloc(SZ);
    TT_CHILD_CHECK(again + SZ <= v[0] || again >= v[0] + each, "a held block's pages were handed out (%p)",
                   (void *)again);
    free(again);
    for (int i = 1; i < N; i++) {
        free(v[i]);
        s = tt_stats();
        TT_CHILD_CHECK(s.held <= 1 << 20, "the quarantine holds %lu bytes, more than its 1 MiB", (unsigned long)s.held);
    }
    /* First in, first out: the last three freed are the ones held. */
    TT_CHILD_CHECK(s.held == 3 * each, "the last three blocks (%zu bytes) should be held: %lu", 3 * each,
                   (unsigned long)s.held);
    static char *w[N];
    for (int i = 0; i < N; i++) {
        w[i] = malloc(SZ);
        for (int k = N - 3; k < N; k++)
            TT_CHILD_CHECK(w[i] + SZ <= v[k] || w[i] >= v[k] + each, "block %d, held, was handed out again", k);
    }
    for (int i = 0; i < N; i++)
        free(w[i]);
    char why[256];
    TT_CHILD_CHECK(tt_heap_sound(why, sizeof why), "after the quarantine: %s", why);
    /* With no room, the next free gives back what is held. */
    TT_CHILD_CHECK(tide_conf_set("guard_quarantine", "0") == 0, "conf");
    free(malloc(SZ));
    s = tt_stats();
    TT_CHILD_CHECK(s.held == 0, "guard_quarantine:0 still holds %lu bytes", (unsigned long)s.held);
    TT_CHILD_CHECK(tt_heap_sound(why, sizeof why), "after the quarantine was emptied: %s", why);
    return 0;
}

Test(guard, quarantine_holds_freed_blocks_first_in_first_out_within_its_bound, .timeout = 120)
{
    struct tt_child_spec spec = { .fn = quarantine_child, .silence_s = 60 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    char how[128];
    cr_expect(tt_child_exited(&ch, 0), "the child %s:\n%s", tt_child_how(&ch, how, sizeof how), ch.err);
}

/* A held block comes back as clean pages: they must read as zero, its padding included
 * (an aligned block's extent runs on past its guard page to its alignment). */
static int released_reads_zero_child(void *arg)
{
    (void)arg;
    TT_CHILD_CHECK(tide_conf_set("purge", "none") == 0 && tide_conf_set("guard", "on") == 0 &&
                       tide_conf_set("guard_quarantine", "128k") == 0,
                   "conf");
    /* Dirty pages full of 0xaa for the aligned blocks to be carved from. */
    char *big = malloc(8 << 20);
    memset(big, 0xaa, 8 << 20);
    free(big);
    enum { N = 60 };
    static void *a[N];
    for (int i = 0; i < N; i++)
        a[i] = aligned_alloc(64 << 10, 64 << 10);
    /* Each free holds its block and gives the one before back (the bound is one extent). */
    for (int i = 0; i < N; i++)
        free(a[i]);
    /* calloc trusts clean pages to be zero: take all the free space there is. */
    static unsigned char *c[200];
    for (int i = 0; i < 200; i++) {
        c[i] = calloc(1, 100 << 10);
        TT_CHILD_CHECK(c[i] != NULL, "calloc");
        for (size_t k = 0; k < 100 << 10; k++)
            TT_CHILD_CHECK(c[i][k] == 0, "calloc(100 KiB) #%d = %p: byte %zu is %#x", i, (void *)c[i], k, c[i][k]);
    }
    for (int i = 0; i < 200; i++)
        free(c[i]);
    return 0;
}

Test(guard, a_held_block_comes_back_as_zero_pages, .timeout = 120)
{
    struct tt_child_spec spec = { .fn = released_reads_zero_child, .silence_s = 60 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0);
    char how[128];
    cr_expect(tt_child_exited(&ch, 0), "the child %s:\n%s", tt_child_how(&ch, how, sizeof how), ch.err);
}

static void conf_set(const char *k, const char *v) { cr_assert(tide_conf_set(k, v) == 0, "tide_conf_set(%s, %s)", k, v); }

Test(guard, guarded_blocks_keep_their_data_through_realloc, .timeout = 120)
{
    conf_set("guard", "on");
    tt_rng r = { 7 };
    char *p = malloc(100 << 10);
    size_t n = 100 << 10;
    memset(p, 0x5a, n);
    for (int i = 0; i < 200; i++) {
        size_t m = (1 + tt_below(&r, 600)) << 10;
        p = realloc(p, m);
        cr_assert(p);
        for (size_t k = 0; k < MIN(n, m); k += 997)
            cr_assert_eq((unsigned char)p[k], 0x5a, "byte %zu changed after realloc %zu -> %zu", k, n, m);
        memset(p, 0x5a, m);
        n = m;
    }
    free(p);
    tt_assert_heap_ok("after guarded reallocs");
}
