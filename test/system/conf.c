/* SPDX-License-Identifier: MIT */
/* conf.c - where tide's settings come from, and in which order: the program's
 * tide_malloc_conf (in each link form), the system's file (still obeyed by a setuid
 * program, which ignores TIDE_CONF), TIDE_CONF; TIDE_CONF's syntax; mallopt.
 *
 * Settings are read once at start-up, so each case runs a build of test/system/conf_probe
 * in a fresh process and reads what it prints.  The probes built with PROBE_DEFAULT define
 * tide_malloc_conf = "purge:none,decay_ms:5,remap_max:7". */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tide.h"

#define PROBE(name) PROBE_DIR "/" name
/* The configuration matrix's variant (test/support/support.h) is one more TIDE_CONF
 * before each probe's own: a test of where settings come from and in which order sees it. */
#define SOURCES_PREMISE "it checks where settings come from; the variant's TIDE_CONF would be one more source"

/* Runs PATH KEY... with TIDE_CONF=CONF (NULL: none) and LD_PRELOAD=PRELOAD (NULL: none);
 * it must exit 0. */
static void run(struct tt_child *c, const char *path, const char *conf, const char *preload,
                const char *const *args)
{
    const char *argv[16] = { path };
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    struct tt_child_spec spec = { .path = path, .argv = argv, .conf = conf, .preload = preload };
    cr_assert(tt_child_run(&spec, c) == 0, "cannot run %s: %s", path, strerror(errno));
    char how[128];
    cr_assert(tt_child_exited(c, 0), "%s (TIDE_CONF=%s) %s:\n%s%s", path, conf ? conf : "(none)",
              tt_child_how(c, how, sizeof how), c->out, c->err);
}

static const char *const keys3[] = { "purge", "decay_ms", "remap_max", NULL };

/* PATH's purge, decay_ms and remap_max are WANT ("purge=...\ndecay_ms=...\nremap_max=...\n"),
 * and it printed nothing on stderr. */
static void expect3(const char *path, const char *conf, const char *preload, const char *want)
{
    struct tt_child c;
    run(&c, path, conf, preload, keys3);
    cr_expect_str_eq(c.out, want, "%s with TIDE_CONF=%s:\n%s", path, conf ? conf : "(none)", c.out);
    cr_expect_str_eq(c.err, "", "%s with TIDE_CONF=%s printed:\n%s", path, conf ? conf : "(none)", c.err);
    tt_child_free(&c);
}

#define DEFAULTS "purge=dontneed\ndecay_ms=1000\nremap_max=1\n"
#define COMPILED "purge=none\ndecay_ms=5\nremap_max=7\n"

/* ---- the program's tide_malloc_conf ------------------------------------------------ */

Test(conf, program_default_with_ltide)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    expect3(PROBE("conf_probe"), NULL, NULL, COMPILED);
    /* TIDE_CONF comes after it, key by key */
    expect3(PROBE("conf_probe"), "decay_ms:9", NULL, "purge=none\ndecay_ms=9\nremap_max=7\n");
    expect3(PROBE("conf_probe_plain"), NULL, NULL, DEFAULTS);
}

Test(conf, program_default_with_libtide_a)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    expect3(PROBE("conf_probe_static"), NULL, NULL, COMPILED);
    expect3(PROBE("conf_probe_static"), "remap_max:3", NULL, "purge=none\ndecay_ms=5\nremap_max=3\n");
}

Test(conf, program_default_under_ld_preload_needs_rdynamic)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    /* -rdynamic: the program exports it, the loader binds libtide.so's weak reference */
    expect3(PROBE("conf_probe_preload"), NULL, TIDE_SO, COMPILED);
    expect3(PROBE("conf_probe_preload"), "decay_ms:9", TIDE_SO, "purge=none\ndecay_ms=9\nremap_max=7\n");
    /* without it the definition is not in the dynamic symbol table: tide cannot see it
     * (what tide(3) says) */
    expect3(PROBE("conf_probe_hidden"), NULL, TIDE_SO, DEFAULTS);
}

Test(conf, program_default_is_checked_as_tide_conf_is)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    /* the warnings name the source */
    struct tt_child c;
    run(&c, PROBE("conf_probe"), "decay_ms:bad", NULL, keys3);
    cr_expect_str_eq(c.out, COMPILED);
    cr_expect(strstr(c.err, "tide: TIDE_CONF: bad value 'bad' for decay_ms (accepted: an integer from -1 to "
                            "86400000); keeping decay_ms:5\n") != NULL,
              "%s", c.err);
    tt_child_free(&c);
}

/* ---- the system's file -------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdir(dir, 0755);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "creat %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    cr_assert_eq(write(fd, text, n), (ssize_t)n);
    close(fd);
    chmod(path, 0644);
}

static char suid_dir[512], suid_path[600];

static void file_cleanup(void)
{
    unlink(CONF_FILE);
    rmdir(CONF_FILE); /* the case that made it a directory */
    if (suid_path[0])
        unlink(suid_path);
    if (suid_dir[0])
        rmdir(suid_dir);
}

/* A directory that may hold a setuid file (not mounted nosuid), or false. */
static bool make_suid_dir(void)
{
    const char *bases[] = { PROBE_DIR, "/tmp", "/var/tmp" };
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        struct statvfs vfs;
        if (statvfs(bases[i], &vfs) != 0 || (vfs.f_flag & ST_NOSUID))
            continue;
        snprintf(suid_dir, sizeof suid_dir, "%s/tide-suid-XXXXXX", bases[i]);
        if (mkdtemp(suid_dir) && chmod(suid_dir, 0755) == 0)
            return true;
    }
    suid_dir[0] = '\0';
    return false;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *data = tt_read_file(from, &n);
    cr_assert(data, "cannot read %s", from);
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL, 0755);
    cr_assert(fd >= 0, "creat %s: %s", to, strerror(errno));
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
    free(data);
}

/* One test for everything that writes the file: the tests of a suite run in parallel. */
Test(conf, system_file, .timeout = 60, .fini = file_cleanup)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    const char *probe = PROBE("conf_probe_file");
    unlink(CONF_FILE);
    /* no file: nothing said */
    expect3(probe, NULL, NULL, COMPILED);

    /* after the program's default, before TIDE_CONF; comments, blank lines, blanks,
     * values in any case */
    write_file(CONF_FILE, "# tide's settings for this system\n"
                          "\n"
                          "decay_ms:6\n"
                          "  remap_max : 8 , thp:ON   # huge pages\n");
    struct tt_child c;
    run(&c, probe, NULL, NULL, (const char *[]){ "purge", "decay_ms", "remap_max", "thp", NULL });
    cr_expect_str_eq(c.out, "purge=none\ndecay_ms=6\nremap_max=8\nthp=on\n");
    cr_expect_str_eq(c.err, "");
    tt_child_free(&c);
    expect3(probe, "remap_max:9", NULL, "purge=none\ndecay_ms=6\nremap_max=9\n");

    /* a bad entry: a warning that names the file and the line, and what is kept */
    write_file(CONF_FILE, "decay_ms:6\n\ndecay_ms:soon,purge:free\n");
    run(&c, probe, NULL, NULL, keys3);
    cr_expect_str_eq(c.out, "purge=free\ndecay_ms=6\nremap_max=7\n");
    char want[1024];
    snprintf(want, sizeof want,
             "tide: %s:3: bad value 'soon' for decay_ms (accepted: an integer from -1 to 86400000); keeping "
             "decay_ms:6\n",
             CONF_FILE);
    cr_expect_str_eq(c.err, want);
    tt_child_free(&c);

    /* too long: its whole lines up to the limit are read, and it says so */
    char *big = malloc(20000);
    strcpy(big, "decay_ms:6\n");
    while (strlen(big) < 10000)
        strcat(big, "# a long comment, to make the file longer than tide reads ...........\n");
    strcat(big, "remap_max:8\n");
    write_file(CONF_FILE, big);
    free(big);
    run(&c, probe, NULL, NULL, keys3);
    cr_expect_str_eq(c.out, "purge=none\ndecay_ms=6\nremap_max=7\n");
    snprintf(want, sizeof want, "tide: %s: longer than 8192 bytes; only its whole lines up to there are read\n",
             CONF_FILE);
    cr_expect_str_eq(c.err, want);
    tt_child_free(&c);

    /* unreadable: one line with the file and strerror's text */
    unlink(CONF_FILE);
    cr_assert_eq(mkdir(CONF_FILE, 0755), 0, "mkdir %s: %s", CONF_FILE, strerror(errno));
    run(&c, probe, NULL, NULL, keys3);
    cr_expect_str_eq(c.out, COMPILED);
    snprintf(want, sizeof want, "tide: %s: cannot read it: Is a directory\n", CONF_FILE);
    cr_expect_str_eq(c.err, want);
    tt_child_free(&c);
    rmdir(CONF_FILE);

    /* A setuid program: the file is root's and counts, TIDE_CONF is the caller's and does not. */
    write_file(CONF_FILE, "decay_ms:6\n");
    if (geteuid() != 0)
        cr_skip_test("not root: cannot make a setuid program of another user (make check as root runs this)");
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
        cr_skip_test("no_new_privs is set: the kernel ignores setuid bits in this process tree");
    if (!make_suid_dir())
        cr_skip_test("no directory for a setuid file");
    snprintf(suid_path, sizeof suid_path, "%s/conf_probe_file", suid_dir);
    copy_file(probe, suid_path);
    struct passwd *pw = getpwnam("nobody");
    uid_t uid = pw ? pw->pw_uid : 65534;
    gid_t gid = pw ? pw->pw_gid : 65534;
    if (chown(suid_path, uid, gid) != 0)
        cr_skip_test("chown(%s): %s", suid_path, strerror(errno));
    cr_assert_eq(chmod(suid_path, 04755), 0, "chmod: %s", strerror(errno));
    if (access(CONF_FILE, R_OK) != 0)
        cr_skip_test("%s is not readable", CONF_FILE);
    run(&c, suid_path, "remap_max:9,purge:free", NULL, keys3);
    cr_expect_str_eq(c.out, "purge=none\ndecay_ms=6\nremap_max=7\n", "a setuid program:\n%s", c.out);
    cr_expect_str_eq(c.err, "");
    tt_child_free(&c);
    tt_report("conf: a setuid program (euid %u) read %s and ignored TIDE_CONF", (unsigned)uid, CONF_FILE);
}

/* ---- TIDE_CONF's syntax --------------------------------------------------------------- */

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* TIDE_CONF=CONF: the probe prints WANT for KEY... and warns in WARNINGS lines, each
 * holding SAYS (NULL: no check). */
static void expect_conf(const char *conf, const char *const *keys, const char *want, int warnings, const char *says)
{
    struct tt_child c;
    run(&c, PROBE("conf_probe_plain"), conf, NULL, keys);
    cr_expect_str_eq(c.out, want, "TIDE_CONF=%s:\n%s", conf, c.out);
    cr_expect_eq(count_lines(c.err), warnings, "TIDE_CONF=%s: %d warnings wanted, got:\n%s", conf, warnings, c.err);
    if (says)
        cr_expect(strstr(c.err, says) != NULL, "TIDE_CONF=%s: no \"%s\" in:\n%s", conf, says, c.err);
    tt_child_free(&c);
}

Test(conf, a_bad_value_keeps_the_value_before_and_says_which)
{
    /* it used to say "keeping the default" and keep 10 */
    expect_conf("decay_ms:10,decay_ms:abc", (const char *[]){ "decay_ms", NULL }, "decay_ms=10\n", 1,
                "bad value 'abc' for decay_ms (accepted: an integer from -1 to 86400000); keeping decay_ms:10\n");
    expect_conf("decay_ms:abc", (const char *[]){ "decay_ms", NULL }, "decay_ms=1000\n", 1, "; keeping decay_ms:1000\n");
    expect_conf("purge:free,purge:often", (const char *[]){ "purge", NULL }, "purge=free\n", 1,
                "bad value 'often' for purge (accepted: none, dontneed, free); keeping purge:free\n");
}

Test(conf, words_in_any_case_and_yes_no)
{
    tt_skip_under(NULL, SOURCES_PREMISE);
    expect_conf("purge:FREE,thp:yes,background:ON,stats:No,remap:False,tcache:TRUE",
                (const char *[]){ "purge", "thp", "background", "stats", "remap", "tcache", NULL },
                "purge=free\nthp=on\nbackground=on\nstats=off\nremap=off\ntcache=on\n", 0, NULL);
    expect_conf("thp:ON,purge:DontNeed,background:Auto", (const char *[]){ "thp", "purge", "background", NULL },
                "thp=on\npurge=dontneed\nbackground=auto\n", 0, NULL);
    /* keys stay exact */
    expect_conf("PURGE:free", (const char *[]){ "purge", NULL }, "purge=dontneed\n", 1, "unknown key 'PURGE'");
}

Test(conf, a_t_suffix_for_terabytes)
{
    expect_conf("remap_threshold:1t,guard_quarantine:1T", (const char *[]){ "remap_threshold", "guard_quarantine", NULL },
                "remap_threshold=1099511627776\nguard_quarantine=1099511627776\n", 0, NULL);
    expect_conf("remap_threshold:2t", (const char *[]){ "remap_threshold", NULL }, "remap_threshold=1048576\n", 1,
                "(accepted: an integer from 65536 to 1099511627776 (k, m, g, t suffixes)); keeping remap_threshold:1048576");
}

Test(conf, an_empty_value_or_entry_warns_once)
{
    expect_conf("decay_ms:", (const char *[]){ "decay_ms", NULL }, "decay_ms=1000\n", 1,
                "bad value '' for decay_ms");
    expect_conf("decay_ms:10,", (const char *[]){ "decay_ms", NULL }, "decay_ms=10\n", 1,
                "tide: TIDE_CONF: empty entry (a comma too many); ignored\n");
    expect_conf("decay_ms:10,,purge:free", (const char *[]){ "decay_ms", "purge", NULL }, "decay_ms=10\npurge=free\n",
                1, "empty entry");
    expect_conf("", (const char *[]){ "decay_ms", NULL }, "decay_ms=1000\n", 0, NULL);
}

Test(conf, tide_conf_set_takes_the_same_words)
{
    char buf[32];
    cr_assert_eq(tide_conf_set("purge", "FREE"), 0);
    cr_assert_eq(tide_conf_get("purge", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "free");
    cr_assert_eq(tide_conf_set("thp", "Yes"), 0);
    cr_assert_eq(tide_conf_get("thp", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "on");
    cr_assert_eq(tide_conf_set("thp", "no"), 0);
    cr_assert_eq(tide_conf_set("remap_threshold", "1t"), 0);
    cr_assert_eq(tide_conf_get("remap_threshold", buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "1099511627776");
}

/* ---- mallopt -------------------------------------------------------------------------- */

Test(mallopt, ignored_parameters_return_0)
{
    static const struct {
        int param, value;
        const char *name;
    } ignored[] = {
        { M_MXFAST, 64, "M_MXFAST" },           { M_TRIM_THRESHOLD, 1 << 20, "M_TRIM_THRESHOLD" },
        { M_TOP_PAD, 1 << 20, "M_TOP_PAD" },    { M_MMAP_THRESHOLD, 1 << 20, "M_MMAP_THRESHOLD" },
        { M_MMAP_MAX, 0, "M_MMAP_MAX" },        { M_CHECK_ACTION, 3, "M_CHECK_ACTION" },
        { M_PERTURB, 0xa5, "M_PERTURB" },       { M_ARENA_TEST, 2, "M_ARENA_TEST" },
        { M_ARENA_MAX, 0, "M_ARENA_MAX 0" },    { M_ARENA_MAX, -1, "M_ARENA_MAX -1" },
        { 12345, 1, "an unknown parameter" },
    };
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        cr_expect_eq(mallopt(ignored[i].param, ignored[i].value), 0, "mallopt(%s, %d) must say it did nothing",
                     ignored[i].name, ignored[i].value);
    cr_expect_eq(mallopt(M_ARENA_MAX, 4), 1);
    cr_expect_eq(tide_mallopt(M_ARENA_MAX, 2), 1);
}

Test(mallopt, arena_max_puts_new_threads_on_the_first_arenas, .timeout = 30)
{
    tt_skip_under("arenas:1", "it compares two threads on two arenas with M_ARENA_MAX 1; arenas:1 has one arena");
    struct tt_child c;
    /* without it, the two threads take two arenas, each cutting a slab */
    run(&c, PROBE("conf_probe_plain"), "tcache:off", NULL, (const char *[]){ "slabs", "0", NULL });
    cr_expect_str_eq(c.out, "mallopt=-1 slabs=2\n");
    tt_child_free(&c);
    /* with M_ARENA_MAX 1 they share the first arena, and its slab */
    run(&c, PROBE("conf_probe_plain"), "tcache:off", NULL, (const char *[]){ "slabs", "1", NULL });
    cr_expect_str_eq(c.out, "mallopt=1 slabs=1\n");
    tt_child_free(&c);
}
