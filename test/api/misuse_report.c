/* SPDX-License-Identifier: MIT */
/* misuse_report.c - every misuse tide can catch cheaply is reported in one exact line, then
 * abort().
 *
 * Each case runs test/api/misuse_helper in a child process (with its own TIDE_CONF where the
 * case needs one), reads the addresses it names on stdout and everything it writes on
 * stderr through pipes, and checks that it died of SIGABRT after printing exactly the line
 * tide's report.c formats:  "tide: <func>(): <what> 0x<address>".  A case that tide lets
 * pass fails here: it is a bug to report, not a test to weaken. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "support.h"

#ifndef MISUSE_HELPER
#define MISUSE_HELPER "test/api/misuse_helper"
#endif

typedef struct outcome_s {
    int status;
    char *out, *err;
    void *ptr[4];
    int nptr;
} outcome_t;

/* Run the helper for CASE with TIDE_CONF=CONF (NULL: unset); a helper silent for 30 s is
 * killed as hung. */
static void run_case(const char *c, const char *conf, outcome_t *o)
{
    memset(o, 0, sizeof *o);
    const char *argv[] = { MISUSE_HELPER, c, NULL };
    struct tt_child_spec spec = { .path = MISUSE_HELPER, .argv = argv, .conf = conf, .silence_s = 30 };
    struct tt_child ch;
    cr_assert(tt_child_run(&spec, &ch) == 0, "cannot run %s: %s", MISUSE_HELPER, strerror(errno));
    cr_assert(!ch.hung, "%s: the helper hung (stdout: %s, stderr: %s)", c, ch.out, ch.err);
    o->status = ch.status;
    o->out = ch.out;
    o->err = ch.err;
    for (char *l = o->out; (l = strstr(l, "ptr ")) != NULL && o->nptr < 4; l += 4)
        o->ptr[o->nptr++] = (void *)strtoull(l + 4, NULL, 16);
}

/* CASE must abort with exactly "tide: FUNC(): WHAT 0x<the helper's first address>" and,
 * when AFTER is not NULL, " (AFTER)". */
static void expect_report_after(const char *c, const char *conf, const char *func, const char *what,
                                const char *after)
{
    outcome_t o;
    run_case(c, conf, &o);
    cr_assert(o.nptr >= 1 && strstr(o.out, "go\n"), "%s: the helper did not get to the misuse (stdout: %s, stderr: %s)",
              c, o.out, o.err);
    char want[256];
    snprintf(want, sizeof want, "tide: %s(): %s %p%s%s%s\n", func, what, o.ptr[0], after ? " (" : "",
             after ? after : "", after ? ")" : "");
    cr_expect(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGABRT,
              "%s: expected SIGABRT, got %s %d (stdout: %s)", c, WIFSIGNALED(o.status) ? "signal" : "exit status",
              WIFSIGNALED(o.status) ? WTERMSIG(o.status) : WEXITSTATUS(o.status), o.out);
    cr_expect_str_eq(o.err, want, "%s: expected exactly the line %s", c, want);
    cr_log_info("%s%s%s: %s", c, conf ? " with TIDE_CONF=" : "", conf ? conf : "", o.err);
}

/* CASE is not a misuse: it must run to its end, silently. */
static void expect_clean(const char *c, const char *conf)
{
    outcome_t o;
    run_case(c, conf, &o);
    cr_expect(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0 && strstr(o.out, "survived"),
              "%s: expected a clean exit, got status %#x (stdout: %s, stderr: %s)", c, o.status, o.out, o.err);
    cr_expect_str_eq(o.err, "", "%s: expected nothing on stderr", c);
}

static void expect_report(const char *c, const char *conf, const char *func, const char *what)
{
    expect_report_after(c, conf, func, what, NULL);
}

#define REPORT(name, conf, func, what) \
    Test(misuse_report, name, .timeout = 60) { expect_report(#name, conf, func, what); }
/* A double free with other frees between is found where the block is taken next: here a
 * refill finds that the block, back in its slab, was freed since (tide(3), DIAGNOSTICS).
 * (Not under the configuration matrix's tcache:off, test/support/support.h: without a
 * cache, free() finds it at once, as double_free_small_nocache shows.) */
#define REPORT_AT_REFILL(name) \
    Test(misuse_report, name, .timeout = 60) \
    { \
        tt_skip_under("tcache:off", "with no thread cache free() finds the double free at once"); \
        expect_report_after(#name, NULL, "malloc", "double free", "freed twice, or never allocated"); \
    }

/* Double frees. */
REPORT(double_free_small, NULL, "free", "double free")
REPORT_AT_REFILL(double_free_small_flushed)
REPORT(double_free_small_nocache, "tcache:off", "free", "double free")
REPORT(double_free_cached_large, NULL, "free", "double free")
REPORT(double_free_large, "purge:none", "free", "double free")
REPORT_AT_REFILL(double_free_other_thread)

/* Pointers tide never handed out. */
REPORT(invalid_free_stack, NULL, "free", "invalid pointer")
REPORT(invalid_free_mmap, NULL, "free", "invalid pointer")
REPORT(invalid_free_wild, NULL, "free", "invalid pointer")
REPORT(invalid_free_page_map, NULL, "free", "invalid pointer")
REPORT(invalid_free_guard, NULL, "free", "invalid pointer")
REPORT(realloc_invalid_stack, NULL, "realloc", "invalid pointer")
REPORT(usable_size_invalid, NULL, "malloc_usable_size", "invalid pointer")

/* Interior pointers: caught at once (a 16-aligned one inside a small object too, since the
 * page map gives the slab's start to the fast path). */
REPORT(interior_small_8, NULL, "free", "invalid pointer")
REPORT(interior_small_1, NULL, "free", "invalid pointer")
REPORT(interior_small_16, NULL, "free", "invalid pointer")
REPORT(interior_large_4096, NULL, "free", "invalid pointer")
REPORT(interior_large_16, NULL, "free", "invalid pointer")
REPORT(interior_large_last_page, NULL, "free", "invalid pointer")
REPORT(interior_cached_large_4096, NULL, "free", "invalid pointer")

/* Use after free through realloc: tide reports it as it does for a large block, a
 * "double free" from realloc(). */
REPORT(realloc_freed_small, NULL, "realloc", "double free")
REPORT(realloc_freed_small_grow, NULL, "realloc", "double free")
REPORT(realloc_freed_cached_large, NULL, "realloc", "double free")
REPORT(realloc_freed_large, "purge:none", "realloc", "double free")

/* Sized frees with the wrong size or alignment. */
REPORT(free_sized_wrong_small, NULL, "free_sized", "size does not match the allocation of")
REPORT(free_sized_wrong_large, NULL, "free_sized", "size does not match the allocation of")
REPORT(free_sized_too_small, NULL, "free_sized", "size does not match the allocation of")
REPORT(free_aligned_sized_wrong_size, NULL, "free_aligned_sized", "size does not match the allocation of")
REPORT(free_aligned_sized_wrong_alignment, NULL, "free_aligned_sized", "alignment does not match the allocation of")

/* Not misuse: these must not abort. */
Test(misuse_report, free_sized_after_shrink, .timeout = 60) { expect_clean("free_sized_after_shrink", NULL); }
Test(misuse_report, free_sized_thp, .timeout = 60) { expect_clean("free_sized_thp", "thp:on"); }
Test(misuse_report, bad_alignments, .timeout = 60) { expect_clean("bad_alignments", NULL); }
