/* SPDX-License-Identifier: MIT */
/*
 * preload.c - real programs with LD_PRELOAD=libtide.so behave as without it.
 *
 * python3 (with pymalloc and with PYTHONMALLOC=malloc), sort (in memory and with temp
 * files and two threads), gcc (compile, assemble, link; the produced program is run too)
 * and git (init, add, commit, branch, merge, log, cat-file, blame, gc, fsck, archive) run
 * twice on the same deterministic input, once plain and once with libtide preloaded;
 * stdout, stderr, exit status and the files they produce must be identical.
 *
 * That tide was really in use is checked in every process the preloaded run started: a
 * probe library preloaded after libtide (test/system/preload_probe.c) records which library
 * defines the malloc the process calls, whether libtide is mapped, and whether a fresh
 * malloc() lies inside tide_ranges().  python3 also reports its own /proc/self/maps.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

#ifdef TIDE_TEST_GLIBC
#define PRELOAD TIDE_PROBE_SO /* glibc mode: only the probe, which must then see glibc */
#else
#define PRELOAD TIDE_SO " " TIDE_PROBE_SO
#endif

struct run {
    char *out, *err;
    size_t outlen, errlen;
    int status;
};

static char workdir[256];

static void make_workdir(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(workdir, sizeof workdir, "%s/tide-preload-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(workdir), "mkdtemp(%s): %s", workdir, strerror(errno));
    struct stat st;
    cr_assert(stat(TIDE_PROBE_SO, &st) == 0, "the probe %s is missing: %s", TIDE_PROBE_SO, strerror(errno));
#ifndef TIDE_TEST_GLIBC
    cr_assert(stat(TIDE_SO, &st) == 0, "%s is missing: %s", TIDE_SO, strerror(errno));
#endif
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

static void remove_workdir(void)
{
    if (workdir[0])
        nftw(workdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static char *path_in(const char *name)
{
    char *p = malloc(strlen(workdir) + strlen(name) + 2);
    sprintf(p, "%s/%s", workdir, name);
    return p;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "fopen(%s): %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/*
 * Runs ARGV (searched in PATH) in CWD with stdin from STDIN_PATH (or /dev/null), with the
 * environment of the test plus LC_ALL=C, TZ=UTC and EXTRA (NULL-terminated "K=V"), and
 * with libtide and the probe preloaded when PRELOADED (the probe writing to PROBE_OUT).
 */
static struct run run_prog(const char *const *argv, const char *cwd, const char *stdin_path, bool preloaded,
                           const char *probe_out, const char *const *extra)
{
    const char *env[32] = {"LC_ALL=C", "TZ=UTC"};
    size_t k = 2;
    for (size_t i = 0; extra && extra[i] && k < 30; i++)
        env[k++] = extra[i];
    char probe_env[512];
    snprintf(probe_env, sizeof probe_env, "TIDE_PROBE_OUT=%s", preloaded ? probe_out : "");
    env[k++] = preloaded ? probe_env : "TIDE_PROBE_OUT";
    struct tt_child_spec spec = {.path = argv[0], .argv = argv, .preload = preloaded ? PRELOAD : NULL, .env = env,
                                 .cwd = cwd, .stdin_path = stdin_path};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run %s: %s", argv[0], strerror(errno));
    return (struct run){c.out, c.err, c.outlen, c.errlen, c.status};
}

static void free_run(struct run *r)
{
    free(r->out);
    free(r->err);
}

static char *describe(const struct run *r)
{
    static char buf[160];
    if (WIFEXITED(r->status))
        snprintf(buf, sizeof buf, "exit status %d", WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
        snprintf(buf, sizeof buf, "killed by signal %d (%s)", WTERMSIG(r->status), strsignal(WTERMSIG(r->status)));
    else
        snprintf(buf, sizeof buf, "wait status %#x", r->status);
    return buf;
}

/* Offset of the first difference of two buffers (SIZE_MAX if equal). */
static size_t first_diff(const char *a, size_t la, const char *b, size_t lb)
{
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return i;
    return la == lb ? SIZE_MAX : n;
}

/* Both runs succeeded and said the same thing. */
static void assert_same(const char *what, const struct run *plain, const struct run *tide)
{
    cr_assert(WIFEXITED(plain->status) && WEXITSTATUS(plain->status) == 0,
              "%s without libtide failed (%s); stderr: %.2000s", what, describe(plain), plain->err);
    cr_assert(WIFEXITED(tide->status) && WEXITSTATUS(tide->status) == 0,
              "%s with libtide preloaded failed (%s); stderr: %.2000s", what, describe(tide), tide->err);
    size_t d = first_diff(plain->out, plain->outlen, tide->out, tide->outlen);
    cr_assert(d == SIZE_MAX,
              "%s: stdout differs at byte %zu (%zu vs %zu bytes)\n  without: ...%.200s\n  with tide: ...%.200s", what,
              d, plain->outlen, tide->outlen, plain->out + (d > 40 ? d - 40 : 0), tide->out + (d > 40 ? d - 40 : 0));
    d = first_diff(plain->err, plain->errlen, tide->err, tide->errlen);
    cr_assert(d == SIZE_MAX, "%s: stderr differs at byte %zu\n  without: %.500s\n  with tide: %.500s", what, d,
              plain->err, tide->err);
}

static void assert_same_files(const char *what, const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = tt_read_file(a, &la), *y = tt_read_file(b, &lb);
    cr_assert(x && y, "%s: %s or %s is missing", what, a, b);
    size_t d = first_diff(x, la, y, lb);
    cr_assert(d == SIZE_MAX, "%s: %s and %s differ at byte %zu (%zu vs %zu bytes)", what, a, b, d, la, lb);
    free(x);
    free(y);
}

/* NAME is one of the '-' or '.' separated words of the basename of EXE: "ld" matches
 * x86_64-linux-gnu-ld.bfd, "gcc" matches x86_64-linux-gnu-gcc-12. */
static bool exe_is(const char *exe, const char *name)
{
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    size_t n = strlen(name);
    for (const char *w = base; *w;) {
        size_t len = strcspn(w, "-.");
        if (len == n && strncmp(w, name, n) == 0)
            return true;
        w += len;
        if (*w)
            w++;
    }
    return false;
}

/*
 * Every process of the preloaded run left a probe line saying tide served its malloc;
 * each name in MUST (NULL-terminated) is among the probed executables (see exe_is).
 * Returns the number of lines.
 */
static int assert_probed(const char *what, const char *probe_out, const char *const *must)
{
    char *s = tt_read_file(probe_out, NULL);
    cr_assert(s && *s, "%s: no process of the preloaded run recorded anything: was the probe (and libtide) loaded?",
              what);
    enum { MAXL = 4096 };
    static char *exes[MAXL];
    int lines = 0;
    for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n")) {
#ifdef TIDE_TEST_GLIBC
        cr_assert(strstr(l, "libc.so") && strstr(l, "in_tide=-1"), "%s: glibc mode, but: %s", what, l);
#else
        cr_assert(strstr(l, "malloc=" TIDE_SO) && strstr(l, "maps_libtide=1") && strstr(l, "in_tide=1"),
                  "%s: a process of the preloaded run did not allocate with tide: %s", what, l);
#endif
        char *exe = strstr(l, "exe=");
        if (exe && lines < MAXL) {
            exe += 4;
            exe[strcspn(exe, " ")] = 0;
            exes[lines] = exe;
        }
        lines++;
    }
    for (size_t i = 0; must && must[i]; i++) {
        bool seen = false;
        for (int k = 0; k < lines && k < MAXL && !seen; k++)
            seen = exe_is(exes[k], must[i]);
        cr_assert(seen, "%s: no process named %s was probed in the preloaded run", what, must[i]);
    }
    free(s);
    return lines;
}

/* ==================================================================================== */

static void python_run(const char *pymalloc)
{
    make_workdir();
    char *probe = path_in("probe"), *maps_plain = path_in("maps-plain"), *maps_tide = path_in("maps-tide");
    const char *script = TIDE_TEST_SRCDIR "/system/preload_py.py";
    char pm[64];
    snprintf(pm, sizeof pm, "PYTHONMALLOC=%s", pymalloc);
    const char *extra[] = {"PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1", pm, NULL};
    const char *argv_plain[] = {"python3", script, maps_plain, NULL};
    const char *argv_tide[] = {"python3", script, maps_tide, NULL};
    struct run a = run_prog(argv_plain, workdir, NULL, false, NULL, extra);
    struct run b = run_prog(argv_tide, workdir, NULL, true, probe, extra);
    char what[64];
    snprintf(what, sizeof what, "python3 (PYTHONMALLOC=%s)", pymalloc);
    assert_same(what, &a, &b);
    char *m = tt_read_file(maps_tide, NULL);
#ifdef TIDE_TEST_GLIBC
    cr_assert(m && strcmp(m, "libtide mapped: no\n") == 0, "%s: %s", what, m);
#else
    cr_assert(m && strcmp(m, "libtide mapped: yes\n") == 0, "%s: python's /proc/self/maps: %s", what, m);
#endif
    free(m);
    const char *must[] = {"python3", NULL};
    int n = assert_probed(what, probe, must);
    tt_report("preload: %s: %zu bytes of identical output, %d process(es) probed", what, a.outlen, n);
    free_run(&a);
    free_run(&b);
    remove_workdir();
}

Test(preload, python3_pymalloc, .timeout = 180) { python_run("pymalloc"); }
Test(preload, python3_malloc, .timeout = 180) { python_run("malloc"); }

Test(preload, sort, .timeout = 180)
{
    make_workdir();
    /* 300,000 lines of words and numbers, from a fixed seed */
    char *input = path_in("input"), *probe = path_in("probe"), *tmp = path_in("tmp");
    cr_assert_eq(mkdir(tmp, 0700), 0);
    size_t cap = 16 << 20, len = 0;
    char *buf = malloc(cap);
    tt_rng r = {2024};
    static const char *const words[] = {"apple", "Banana", "cherry", "date", "elder", "fig", "grape", "honeydew",
                                        "kiwi", "lemon", "mango", "nectarine", "olive", "papaya", "quince"};
    for (int i = 0; i < 300000; i++) {
        int nw = 1 + (int)tt_below(&r, 4);
        for (int w = 0; w < nw; w++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s", w ? " " : "", words[tt_below(&r, 15)]);
        len += (size_t)snprintf(buf + len, cap - len, " %" PRIu64 " %" PRIu64 "\n", tt_below(&r, 100000),
                                tt_below(&r, 1000));
    }
    write_file(input, buf, len);
    free(buf);

    char tflag[300];
    snprintf(tflag, sizeof tflag, "-T%s", tmp);
    const char *const cmds[][10] = {
        {"sort", NULL},
        {"sort", "-r", "-k2,2n", "-k1,1", NULL},
        {"sort", "-u", "-t", " ", "-k1,1", "-s", NULL},
        {"sort", "-S", "256K", "--parallel=2", tflag, "-k3,3n", "-k1,1r", NULL}, /* temp files, merges, threads */
    };
    for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
        struct run a = run_prog(cmds[c], workdir, input, false, NULL, NULL);
        struct run b = run_prog(cmds[c], workdir, input, true, probe, NULL);
        char what[160];
        snprintf(what, sizeof what, "sort command %zu (%s %s %s ...)", c, cmds[c][0], cmds[c][1] ? cmds[c][1] : "",
                 cmds[c][1] && cmds[c][2] ? cmds[c][2] : "");
        assert_same(what, &a, &b);
        if (c != 2) /* all but the -u one keep every line */
            cr_assert_eq(a.outlen, len, "%s: output is %zu bytes, input %zu", what, a.outlen, len);
        free_run(&a);
        free_run(&b);
    }
    const char *must[] = {"sort", NULL};
    int probed = assert_probed("sort", probe, must);
    tt_report("preload: sort: 4 commands over %zu bytes gave identical output, %d process(es) probed", len, probed);
    remove_workdir();
}

Test(preload, gcc, .timeout = 180)
{
    make_workdir();
    char *probe = path_in("probe");
    const char *src = TIDE_TEST_SRCDIR "/system/preload_input.c";
    /* Both runs in the same directory with the same command lines (-g records the
     * directory); the plain run's outputs are renamed before the preloaded run. */
    const char *const steps[][12] = {
        {"gcc", "-O2", "-g", "-Wall", "-c", src, "-o", "input.o", NULL},
        {"gcc", "-O2", "-S", src, "-o", "input.s", NULL},
        {"gcc", "-O2", "-g", src, "-o", "input", NULL},
    };
    const char *outputs[] = {"input.o", "input.s", "input"};
    for (size_t s = 0; s < 3; s++) {
        char what[64];
        snprintf(what, sizeof what, "gcc step %zu (-> %s)", s, outputs[s]);
        char *out = path_in(outputs[s]), plain[400];
        snprintf(plain, sizeof plain, "%s.plain", out);
        struct run a = run_prog(steps[s], workdir, NULL, false, NULL, NULL);
        cr_assert_eq(rename(out, plain), 0, "%s: %s was not produced (%s); stderr: %.2000s", what, out, describe(&a),
                     a.err);
        struct run b = run_prog(steps[s], workdir, NULL, true, probe, NULL);
        assert_same(what, &a, &b);
        assert_same_files(what, plain, out);
        free_run(&a);
        free_run(&b);
        free(out);
    }
    /* and the two programs compute the same */
    char *pa = path_in("input.plain"), *pb = path_in("input");
    const char *ra[] = {pa, NULL}, *rb[] = {pb, NULL};
    struct run a = run_prog(ra, workdir, NULL, false, NULL, NULL);
    struct run b = run_prog(rb, workdir, NULL, false, NULL, NULL);
    assert_same("the compiled program", &a, &b);
    cr_assert(a.outlen > 0 && strstr(a.out, "distinct words"), "the compiled program printed: %s", a.out);
    free_run(&a);
    free_run(&b);
    const char *must[] = {"gcc", "cc1", "as", "collect2", "ld", NULL};
    int n = assert_probed("gcc", probe, must);
    tt_report("preload: gcc: object, assembly and executable byte-identical, program output identical; %d "
              "process(es) probed (gcc, cc1, as, collect2, ld)", n);
    remove_workdir();
}

Test(preload, git, .timeout = 180)
{
    make_workdir();
    char *probe = path_in("probe");
    char dir_plain[300], dir_tide[300];
    snprintf(dir_plain, sizeof dir_plain, "%s/plain", workdir);
    snprintf(dir_tide, sizeof dir_tide, "%s/tide", workdir);
    cr_assert_eq(mkdir(dir_plain, 0700), 0);
    cr_assert_eq(mkdir(dir_tide, 0700), 0);
    const char *script = TIDE_TEST_SRCDIR "/system/preload_git.sh";
    const char *aa[] = {"sh", script, dir_plain, NULL}, *ab[] = {"sh", script, dir_tide, NULL};
    struct run a = run_prog(aa, workdir, NULL, false, NULL, NULL);
    struct run b = run_prog(ab, workdir, NULL, true, probe, NULL);
    assert_same("git (test/system/preload_git.sh)", &a, &b);
    cr_assert(strstr(a.out, "fsck ok"), "git fsck did not pass: %.2000s", a.out);
    const char *must[] = {"git", "seq", "sed", NULL};
    int n = assert_probed("git", probe, must);
    tt_report("preload: git: %zu bytes of identical output (log, cat-file, blame, gc, fsck, archive); %d process(es) "
              "probed",
              a.outlen, n);
    free_run(&a);
    free_run(&b);
    remove_workdir();
}

/* ---- a C++ program: its operators new and delete are tide's ------------------------------- */

/* test/system/cxx_probe (linked with libstdc++, not with tide) with libtide preloaded when
 * PRELOADED; its stdout, stderr and status in *C. */
static void run_cxx_probe(const char *mode, bool preloaded, struct tt_child *c)
{
    const char *argv[] = {CXX_PROBE, mode, NULL};
    struct tt_child_spec spec = {.path = CXX_PROBE, .argv = argv, .preload = preloaded ? TIDE_SO : NULL,
                                 .timeout_s = 60};
    cr_assert(tt_child_run(&spec, c) == 0, "cannot run %s: %s", CXX_PROBE, strerror(errno));
}

Test(preload, cxx_operators_new_and_delete_are_tides, .timeout = 120)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode: the operators are libstdc++'s");
#endif
    struct tt_child c;
    char how[128];
    /* Without tide, each of the twenty is libstdc++'s: the probe sees what the linker did. */
    run_cxx_probe("ops", false, &c);
    cr_assert(tt_child_exited(&c, 0), "cxx_probe ops %s:\n%s", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(!strstr(c.out, "libtide") && strstr(c.out, "bind _Znwm ") && strstr(c.out, "libstdc++"),
              "cxx_probe without tide:\n%s", c.out);
    tt_child_free(&c);

    run_cxx_probe("ops", true, &c);
    cr_assert(tt_child_exited(&c, 0), "cxx_probe ops (preloaded) %s:\n%s", tt_child_how(&c, how, sizeof how), c.err);
    int bound = 0;
    for (const char *l = c.out; (l = strstr(l, "bind ")) != NULL; l++) {
        const char *nl = strchr(l, '\n');
        int len = nl ? (int)(nl - l) : (int)strlen(l);
        cr_expect(memmem(l, (size_t)len, "/libtide.so", 11) != NULL, "not tide's: %.*s", len, l);
        bound++;
    }
    cr_expect(bound == 20, "%d operators listed, want 20:\n%s", bound, c.out);
    unsigned in = 0, all = 0;
    const char *b = strstr(c.out, "blocks ");
    cr_expect(b && sscanf(b, "blocks %u/%u in tide", &in, &all) == 2 && all >= 300 && in == all,
              "new's blocks not all tide's:\n%s", c.out);
    cr_expect(strstr(c.out, "aligned yes\n") && strstr(c.out, "large +1 -1\n"), "cxx_probe:\n%s", c.out);
    tt_report("preload: cxx_probe with libtide preloaded:\n%s", c.out);
    tt_child_free(&c);

    /* A sized delete reaches tide's free_sized, whose size check aborts. */
    run_cxx_probe("wrong_size", true, &c);
    static const char want[] = "tide: free_sized(): size does not match the allocation of 0x";
    cr_expect(tt_child_signalled(&c, SIGABRT) && strncmp(c.err, want, strlen(want)) == 0,
              "cxx_probe wrong_size (preloaded) %s, stderr:\n%s", tt_child_how(&c, how, sizeof how), c.err);
    tt_child_free(&c);

    run_cxx_probe("bad_alloc", true, &c);
    cr_expect(tt_child_exited(&c, 0) && strcmp(c.out, "bad_alloc\nnullptr\n") == 0,
              "cxx_probe bad_alloc (preloaded) %s:\n%s%s", tt_child_how(&c, how, sizeof how), c.out, c.err);
    tt_child_free(&c);
}
