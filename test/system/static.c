/* SPDX-License-Identifier: MIT */
/* static.c - tide in a static program: gcc -static with src/.libs/libtide.a, as a user
 * links it.
 *
 * The programs are built here, at check time, from the sources of other suites' probes
 * (test/system/prof_probe.c, guard_probe.c, test/api/static_names.c), with the compiler and
 * flags the tree was configured with; the linker's messages are kept, since libtide.a
 * must not make a static link warn (glibc's dlopen does: "Using 'dlopen' in statically
 * linked applications requires at runtime the shared libraries...").  A static program
 * starts without a dynamic loader: libc allocates before its unwind tables are registered
 * (crtbeginT's frame_dummy, a constructor), and libgcc's unwinder aborts where it finds
 * none; prof:on and guard_sample must still work, with stacks from frame pointers and
 * from the unwinder linked into the program.  Skipped only where static glibc (libc.a,
 * from libc6-dev) is missing. */
#include "support.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#ifndef TIDE_CC
#define TIDE_CC "cc"
#endif
#ifndef TIDE_STATIC_FLAGS
#define TIDE_STATIC_FLAGS "-O2 -g"
#endif

static char dir[64];

static void tmpdir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide-static-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}


/* sh -c CMD, output captured. */
static struct tt_child sh(const char *cmd, const char *conf)
{
    const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
    struct tt_child_spec spec = { .path = "/bin/sh", .argv = argv, .conf = conf, .timeout_s = 600, .silence_s = 120 };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run sh -c %s: %s", cmd, strerror(errno));
    return c;
}

/* Skip unless the compiler can link a static program (libc.a: libc6-dev). */
static void need_static_glibc(void)
{
    struct tt_child c = sh(TIDE_CC " -print-file-name=libc.a", NULL);
    char *nl = strchr(c.out, '\n');
    if (nl)
        *nl = '\0';
    struct stat st;
    bool there = tt_child_exited(&c, 0) && c.out[0] == '/' && stat(c.out, &st) == 0;
    char path[256];
    snprintf(path, sizeof path, "%s", c.out);
    tt_child_free(&c);
    if (!there)
        cr_skip_test("static glibc is not installed (" TIDE_CC " -print-file-name=libc.a says \"%s\"; Debian: "
                     "libc6-dev): no static program to test",
                     path);
}

/* Link SOURCES (paths under the source tree's test/) into DIR/NAME with gcc -static and
 * libtide.a, EXTRA flags added: the link must succeed without a word about libtide or
 * dlopen.  The program's path goes to OUT. */
static void build(const char *name, const char *sources, const char *extra, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", dir, name);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && " TIDE_CC " -static " TIDE_STATIC_FLAGS " %s -fno-builtin -I'%s/include' -I'%s/support' %s "
             "'%s' -pthread -o '%s'",
             TIDE_TEST_SRCDIR, extra, TIDE_TOP_SRCDIR, TIDE_TEST_SRCDIR, sources, TIDE_STATIC_LIB, out);
    struct tt_child c = sh(cmd, NULL);
    char how[128];
    cr_assert(tt_child_exited(&c, 0), "the static link %s:\n%s\n%s%s", tt_child_how(&c, how, sizeof how), cmd, c.out,
              c.err);
    cr_expect(!strstr(c.err, "dlopen") && !strstr(c.err, "libtide"),
              "the static link of %s warned about libtide.a:\n%s", name, c.err);
    if (c.err[0])
        cr_log_info("the static link of %s said:\n%s", name, c.err);
    tt_child_free(&c);
}

/* PROGRAM ARGS with TIDE_CONF=CONF: it must exit 0, silent on stderr. */
static struct tt_child run_ok(const char *program, const char *args, const char *conf)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec '%s' %s", program, args);
    struct tt_child c = sh(cmd, conf);
    char how[128];
    cr_assert(tt_child_exited(&c, 0), "%s %s (TIDE_CONF=%s) %s:\n%s%s", program, args, conf,
              tt_child_how(&c, how, sizeof how), c.out, c.err);
    cr_expect_str_empty(c.err, "%s %s (TIDE_CONF=%s) wrote on stderr:\n%s", program, args, conf, c.err);
    return c;
}

/* ---- the link, and the default settings --------------------------------------------------- */

/* static_names links libtide.a into a program with names of its own; here linked fully
 * static (its own suite links it with libtool's -static, libtide.a into a dynamic
 * program).  It checks tide's allocations, threads, constructor and destructor itself. */
Test(static, a_static_program_links_without_warnings_and_allocates_with_the_defaults, .timeout = 300)
{
    need_static_glibc();
    tmpdir();
    char prog[256];
    build("static_names", "api/static_names.c support/child.c", "", prog, sizeof prog);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec '%s'", prog);
    struct tt_child c = sh(cmd, NULL);
    char how[128];
    cr_expect(tt_child_exited(&c, 0), "static_names %s:\n%s%s", tt_child_how(&c, how, sizeof how), c.out, c.err);
    cr_expect(strstr(c.out, "static_names: ok:") || strstr(c.err, "static_names: ok:"), "static_names said:\n%s%s", c.out, c.err);
    cr_log_info("static_names, static:\n%s%s", c.out, c.err);
    tt_child_free(&c);
    tt_rmtree(dir);
}

/* ---- the heap profiler ------------------------------------------------------------------ */

/* google-pprof --text PROGRAM PROFILE. */
static char *pprof_text(const char *program, const char *profile)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec google-pprof --text '%s' '%s'", program, profile);
    struct tt_child r = sh(cmd, NULL);
    char how[128];
    cr_assert(tt_child_exited(&r, 0), "google-pprof --text %s %s %s (./bootstrap installs google-perftools):\n%s%s",
              program, profile, tt_child_how(&r, how, sizeof how), r.out, r.err);
    cr_assert(strstr(r.out, "Total:"), "google-pprof printed no total:\n%s\n%s", r.out, r.err);
    char *out = r.out;
    r.out = NULL;
    tt_child_free(&r);
    return out;
}

/* FUNC's flat MB and percentage in --text output (0 when it is not listed). */
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

/* test/system/prof_probe, static, without frame pointers (the unwinder libgcc_eh linked
 * into the program) and with them: the shares of its two call sites as google-pprof reads
 * them, each entry point's 4 MiB at its caller, samples from the program's first
 * allocations on (libc's own come before its unwind tables are registered), and a final
 * profile at exit. */
Test(static, prof_on_profiles_a_static_program, .timeout = 600)
{
    need_static_glibc();
    static const struct {
        const char *name, *flags, *how;
    } builds[] = { { "prof_probe", "", "no frame pointers" },
                   { "prof_probe_fp", "-fno-omit-frame-pointer", "frame pointers" } };
    for (size_t b = 0; b < 2; b++) {
        tmpdir();
        char prog[256], args[512], conf[512];
        build(builds[b].name, "system/prof_probe.c", builds[b].flags, prog, sizeof prog);
        const char *how = builds[b].how;

        snprintf(args, sizeof args, "shares '%s/shares.heap'", dir);
        snprintf(conf, sizeof conf, "prof:on,prof_sample:64k,prof_final:on,prof_prefix:%s/final", dir);
        struct tt_child r = run_ok(prog, args, conf);
        struct probe_stats s = probe_stats(r.out);
        if (b)
            cr_expect_geq(s.walks * 10, s.samples * 9, "%s: %llu of %llu stacks by frame pointers", how, s.walks,
                          s.samples);
        else
            cr_expect_geq((s.backtraces + s.reused) * 10, s.samples * 9, "%s: %llu of %llu stacks unwound, %llu "
                          "recognised", how, s.backtraces, s.samples, s.reused);
        snprintf(args, sizeof args, "%s/shares.heap", dir);
        char *text = pprof_text(prog, args);
        double bp, sp, big = text_flat(text, "alloc_big", &bp), small = text_flat(text, "alloc_small", &sp);
        cr_expect(bp >= 75 * 0.9 && bp <= 75 * 1.1 && sp >= 25 * 0.9 && sp <= 25 * 1.1,
                  "%s: alloc_big %.1f%% (want 75), alloc_small %.1f%% (want 25) of the live heap:\n%s", how, bp, sp,
                  text);
        cr_expect(strstr(text, " shares_thread\n"), "%s: the threads' own function is not in the stacks:\n%s", how,
                  text);
        tt_report("static: %s: alloc_big %.1f MB (%.1f%%), alloc_small %.1f MB (%.1f%%); %llu samples, %llu by frame "
                  "pointers, %llu unwound, %llu recognised",
                  how, big, bp, small, sp, s.samples, s.walks, s.backtraces, s.reused);
        if (b == 0)
            tt_report("static: google-pprof --text output:\n%s", text);
        free(text);
        tt_child_free(&r);
        /* The final profile (prof_final, at exit, after the program's destructors began). */
        DIR *d = opendir(dir);
        cr_assert(d);
        int finals = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            finals += strncmp(e->d_name, "final.", 6) == 0 && strstr(e->d_name, ".f.heap") != NULL;
        closedir(d);
        cr_expect_eq(finals, 1, "%s: %d final profiles in %s", how, finals, dir);

        snprintf(args, sizeof args, "entries '%s/entries.heap'", dir);
        r = run_ok(prog, args, "prof:on,prof_sample:1");
        snprintf(args, sizeof args, "%s/entries.heap", dir);
        text = pprof_text(prog, args);
        static const char *const funcs[] = { "call_malloc",   "call_calloc",        "call_realloc",
                                             "call_reallocarray", "call_memalign", "call_aligned_alloc",
                                             "call_valloc",  "call_posix_memalign", "call_pvalloc",
                                             "call_realloc_grow" };
        for (size_t f = 0; f < sizeof funcs / sizeof funcs[0]; f++) {
            double pct, mb = text_flat(text, funcs[f], &pct);
            cr_expect(mb >= 3.95 && mb <= 4.05, "%s: %s holds %.2f MB, want 4.0:\n%s", how, funcs[f], mb, text);
        }
        cr_expect(!strstr(text, " tide_") && !strstr(text, "_slow") && !strstr(text, "prof_"),
                  "%s: a frame of tide's own in the profile:\n%s", how, text);
        free(text);
        tt_child_free(&r);

        /* Every allocation sampled from the first, libc's start-up among them. */
        r = run_ok(prog, "first", "prof:on,prof_sample:1");
        s = probe_stats(r.out);
        cr_expect_geq(s.samples, 64, "%s: 64 blocks of 1 KiB, every one due, %llu sampled", how, s.samples);
        tt_child_free(&r);
        tt_rmtree(dir);
    }
}

/* ---- guard_sample ------------------------------------------------------------------------- */

/* The frames of the report's section after HEADER (up to the next "tide:" line), as
 * backtrace_symbols_fd writes them in a static program ("[0xADDR]"), given to addr2line:
 * whether one of them is in FUNC. */
static bool frames_name(const char *prog, const char *report, const char *header, const char *func, char *names,
                        size_t cap)
{
    const char *s = strstr(report, header);
    if (!s)
        return false;
    s += strlen(header);
    const char *end = strstr(s, "tide:");
    if (!end)
        end = s + strlen(s);
    char cmd[4096];
    int n = snprintf(cmd, sizeof cmd, "exec addr2line -f -e '%s'", prog);
    for (const char *p = s; (p = strstr(p, "[0x")) != NULL && p < end; p++) {
        unsigned long long a = strtoull(p + 1, NULL, 16);
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " 0x%llx", a - 1); /* a return address: its call */
        if ((size_t)n >= sizeof cmd - 32)
            break;
    }
    struct tt_child c = sh(cmd, NULL);
    snprintf(names, cap, "%s", c.out);
    bool found = false;
    for (const char *l = c.out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        found |= strncmp(l, func, strlen(func)) == 0 && l[strlen(func)] == '\n';
    tt_child_free(&c);
    return found;
}

/* test/system/guard_probe, static, with guard_sample:1 (every allocation sampled, libc's
 * start-up among them): a sampled block's overflow and use after free are reported as with
 * the shared library, the backtraces of its malloc and free taken by the unwinder linked
 * into the program (a static program has no dynamic symbols: the frames are addresses,
 * which addr2line names). */
Test(static, guard_sample_reports_a_static_programs_block, .timeout = 300)
{
    need_static_glibc();
    tmpdir();
    char prog[256];
    build("guard_probe", "system/guard_probe.c", "", prog, sizeof prog);
    static const struct {
        const char *c, *kind;
        size_t at;
        bool freed;
    } cases[] = { { "sample_overflow", "overflow past", 96, false }, { "sample_uaf", "use after free of", 8, true } };
    for (size_t i = 0; i < 2; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "exec '%s' %s", prog, cases[i].c);
        struct tt_child c = sh(cmd, "guard_sample:1");
        char how[128], want[256];
        cr_expect(tt_child_signalled(&c, SIGSEGV), "%s: expected death by SIGSEGV, it %s:\n%s%s", cases[i].c,
                  tt_child_how(&c, how, sizeof how), c.out, c.err);
        void *ptr = NULL, *at = NULL;
        const char *l = strstr(c.out, "ptr ");
        if (l)
            ptr = (void *)strtoull(l + 4, NULL, 16);
        l = strstr(c.out, "\nat ");
        if (l)
            at = (void *)strtoull(l + 4, NULL, 16);
        cr_assert(ptr && at, "%s: the probe did not get to the access:\n%s%s", cases[i].c, c.out, c.err);
        snprintf(want, sizeof want, "tide: SIGSEGV at %p: %s the block %p of 96 bytes\n", at, cases[i].kind, ptr);
        cr_expect(!strncmp(c.err, want, strlen(want)), "%s: the report must start with\n%s\nit was\n%s", cases[i].c,
                  want, c.err);
        char names[4096];
        cr_expect(frames_name(prog, c.err, "\ntide: the block was allocated at:\n", "alloc_victim", names,
                              sizeof names),
                  "%s: the allocation backtrace does not hold alloc_victim:\n%s\naddr2line:\n%s", cases[i].c, c.err,
                  names);
        if (cases[i].freed)
            cr_expect(frames_name(prog, c.err, "\ntide: and freed at:\n", "free_victim", names, sizeof names),
                      "%s: the free backtrace does not hold free_victim:\n%s\naddr2line:\n%s", cases[i].c, c.err,
                      names);
        cr_log_info("%s, static, guard_sample:1:\n%s", cases[i].c, c.err);
        tt_child_free(&c);
    }
    tt_rmtree(dir);
}
