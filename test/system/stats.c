/* SPDX-License-Identifier: MIT */
/* stats.c - the statistics as a user reads them: stats:on and stats:json at exit, labelled
 * with the pid, the program, the version and the effective settings; stats_file and its
 * %p; the per-class counts against a known sequence of allocations; verbose:on's line;
 * malloc_info's XML against tide_stats_get; tide_stats_print_cb; the wrapper's --stats
 * options.  JSON and XML are read by python3's own parsers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"
#include "tide.h"

static char tmpdir[] = "/tmp/tide-stats-XXXXXX";

static void make_dir(void) { cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno)); }

static void remove_dir(void) { tt_rmtree(tmpdir); }

TestSuite(stats, .init = make_dir, .fini = remove_dir);

/* Run PATH ARGV with TIDE_CONF=CONF; the probe must exit 0. */
static void run_ok(struct tt_child *c, const char *conf, const char *const *argv)
{
    struct tt_child_spec spec = { .path = argv[0], .argv = argv, .conf = conf };
    const char *env[] = { "TIDE_LIB=" TIDE_LIB, NULL };
    if (strcmp(argv[0], TIDE_WRAPPER) == 0)
        spec.env = env;
    cr_assert(tt_child_run(&spec, c) == 0, "cannot run %s: %s", argv[0], strerror(errno));
    char how[128];
    cr_assert(tt_child_exited(c, 0), "%s %s; stderr:\n%s", argv[1] ? argv[1] : argv[0], tt_child_how(c, how, sizeof how),
              c->err);
}

/* python3 -c SCRIPT ARGS... with INPUT on stdin: it must exit 0 (its asserts say why not). */
static void python_ok(const char *what, const char *script, const char *input, const char *const *args)
{
    const char *argv[16] = { "python3", "-c", script };
    for (int i = 0; args && args[i] && i < 12; i++)
        argv[i + 3] = args[i];
    struct tt_child_spec spec = { .path = "python3", .argv = argv, .input = input ? input : "" };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run python3: %s", strerror(errno));
    char how[128];
    cr_expect(tt_child_exited(&c, 0), "%s: python3 %s:\n%s\ninput:\n%.3000s", what, tt_child_how(&c, how, sizeof how),
              c.err, input ? input : "");
    tt_child_free(&c);
}

static long pid_of(const struct tt_child *c)
{
    long pid = 0;
    cr_assert(sscanf(c->out, "pid=%ld", &pid) == 1, "the probe printed no pid: %s", c->out);
    return pid;
}

/* Every key of TIDE_CONF=help, in its order: what the settings must list. */
static const char *const keys[] = { "purge", "decay_ms", "background", "arenas", "tcache", "thp", "stats",
                                    "stats_file", "verbose", "remap", "remap_max", "remap_threshold", "prof",
                                    "prof_sample", "prof_final", "prof_interval", "prof_prefix", "guard",
                                    "guard_quarantine", "guard_sample", NULL };

/* The checks of one JSON report (argv[1]: the pid, argv[2]: the program). */
static const char json_check[] =
    "import json, sys\n"
    "d = json.loads(sys.stdin.read())\n"
    "assert d['pid'] == int(sys.argv[1]), d['pid']\n"
    "assert d['program'] == sys.argv[2], d['program']\n"
    "assert d['version'] == '" TIDE_VERSION "', d['version']\n"
    "keys = sys.argv[3].split(',')\n"
    "assert list(d['settings']) == keys, list(d['settings'])\n"
    "assert d['settings']['decay_ms'] == '250' and d['settings']['stats'] == 'json', d['settings']\n"
    "for k in ('mapped', 'active', 'allocated', 'dirty', 'madvise_dontneed_calls', 'nslabs'):\n"
    "    assert isinstance(d[k], int), k\n"
    "cl = d['classes']\n"
    "assert len(cl) >= 35 and [c['class'] for c in cl] == list(range(len(cl)))\n"
    "assert all(c['current'] == c['nmalloc'] - c['nfree'] and c['bytes'] == c['current'] * c['size'] for c in cl)\n"
    "assert sum(c['bytes'] for c in cl) <= d['allocated']\n"
    "assert sum(c['slabs'] for c in cl) == d['nslabs'], (sum(c['slabs'] for c in cl), d['nslabs'])\n"
    "assert any(c['nmalloc'] > 0 for c in cl)\n";

static void keys_csv(char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; keys[i]; i++)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? "," : "", keys[i]);
}

Test(stats, json_at_exit_parses_with_pid_program_version_settings_and_classes, .timeout = 60)
{
    struct tt_child c;
    run_ok(&c, "stats:json,decay_ms:250", (const char *[]){ STATS_PROBE, "noop", NULL });
    char pid[24], csv[512];
    snprintf(pid, sizeof pid, "%ld", pid_of(&c));
    keys_csv(csv, sizeof csv);
    cr_expect(c.err[0] == '{' && strchr(c.err, '\n') == c.err + c.errlen - 1, "one JSON line on stderr:\n%s", c.err);
    python_ok("stats:json", json_check, c.err, (const char *[]){ pid, "stats_probe", csv, NULL });
    tt_child_free(&c);
}

Test(stats, text_at_exit_is_headed_by_pid_program_and_version_and_lists_settings_and_classes, .timeout = 60)
{
    struct tt_child c;
    run_ok(&c, "stats:on,decay_ms:250", (const char *[]){ STATS_PROBE, "noop", NULL });
    char want[128];
    snprintf(want, sizeof want, "tide statistics: pid %ld, program stats_probe, version " TIDE_VERSION "\n", pid_of(&c));
    cr_expect(strncmp(c.err, want, strlen(want)) == 0, "want the header \"%s\", got:\n%s", want, c.err);
    for (int i = 0; keys[i]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  setting %-16s ", keys[i]);
        cr_expect(strstr(c.err, line) != NULL, "no setting line for %s:\n%s", keys[i], c.err);
    }
    cr_expect(strstr(c.err, "\n  setting decay_ms         250\n") != NULL, "%s", c.err);
    cr_expect(strstr(c.err, "\n  class   size      nmalloc        nfree") != NULL, "no class table:\n%s", c.err);
    tt_child_free(&c);
}

/* Counted at the bins (refills and flushes): without thread caches each malloc and free is
 * one region out and back, so the counts are exact.  Under prof:on (the matrix) an
 * allocation the heap profiler samples is promoted out of its class (SIZE is below a
 * page): the class counts the others, n less the samples the probe made, which nothing
 * else allocates between its first two snapshots to make. */
static const char classes_check[] =
    "import json, sys\n"
    "n, size, exact = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == 'exact'\n"
    "s = [json.loads(l) for l in sys.stdin.read().splitlines()]\n"
    "assert len(s) == 3, len(s)\n"
    "samples = s[1]['prof_samples'] - s[0]['prof_samples']\n"
    "assert samples == 0 or s[0]['settings']['prof'] == 'on', ('samples without the profiler', samples)\n"
    "assert s[2]['prof_samples'] == s[1]['prof_samples'], ('frees sampled', s[1]['prof_samples'], s[2]['prof_samples'])\n"
    "assert s[1]['nmalloc_large'] - s[0]['nmalloc_large'] == samples, ('promoted samples', samples, s[0]['nmalloc_large'], s[1]['nmalloc_large'])\n"
    "n -= samples\n"
    "c = [next(x for x in r['classes'] if x['size'] >= size) for r in s]\n"
    "assert c[0]['size'] == c[1]['size'] == c[2]['size']\n"
    "sz = c[0]['size']\n"
    "d_malloc = c[1]['nmalloc'] - c[0]['nmalloc']\n"
    "assert c[1]['current'] - c[0]['current'] == n, ('current', c[0], c[1])\n"
    "assert c[1]['bytes'] - c[0]['bytes'] == n * sz\n"
    "assert c[1]['slabs'] >= c[0]['slabs'] + 1 and c[1]['slabs_made'] > c[0]['slabs_made'], (c[0], c[1])\n"
    "assert c[2]['current'] == c[0]['current'], ('current after the frees', c[0], c[2])\n"
    "assert c[2]['nfree'] - c[1]['nfree'] >= n\n"
    "if exact:\n"
    "    assert d_malloc == n, ('nmalloc', d_malloc, n)\n"
    "    assert c[1]['nfree'] == c[0]['nfree'], ('nfree while allocating', c[0], c[1])\n"
    "    assert c[2]['nfree'] - c[1]['nfree'] == n, ('nfree', c[1], c[2])\n"
    "    assert c[1]['fills'] - c[0]['fills'] == n and c[2]['flushes'] - c[1]['flushes'] == n\n"
    "else:\n"
    "    assert d_malloc >= n and c[1]['fills'] - c[0]['fills'] < n, ('batched refills', c[0], c[1])\n"
    "others = [(a, b) for a, b in zip(s[0]['classes'], s[1]['classes']) if a['size'] != sz and a['nmalloc'] != b['nmalloc']]\n"
    "assert not others, ('other classes moved', others)\n";

Test(stats, per_class_counts_follow_a_known_sequence_without_thread_caches, .timeout = 60)
{
    struct tt_child c;
    run_ok(&c, "tcache:off", (const char *[]){ STATS_PROBE, "classes", "1000", "200", NULL });
    python_ok("tcache:off", classes_check, c.out, (const char *[]){ "1000", "200", "exact", NULL });
    tt_child_free(&c);
}

Test(stats, per_class_counts_follow_a_known_sequence_through_thread_caches, .timeout = 60)
{
    tt_skip_under("tcache:off", "it counts what goes through the thread caches, which tcache:off turns off");
    struct tt_child c;
    run_ok(&c, NULL, (const char *[]){ STATS_PROBE, "classes", "1000", "200", NULL });
    python_ok("tcache:on", classes_check, c.out, (const char *[]){ "1000", "200", "batched", NULL });
    tt_child_free(&c);
}

Test(stats, stats_file_expands_pid_and_percent, .timeout = 60)
{
    char conf[256], path[512];
    snprintf(conf, sizeof conf, "stats:json,decay_ms:250,stats_file:%s/s.%%p.100%%%%.json", tmpdir);
    struct tt_child c;
    run_ok(&c, conf, (const char *[]){ STATS_PROBE, "noop", NULL });
    long pid = pid_of(&c);
    cr_expect_eq(c.errlen, 0, "nothing on stderr with stats_file:\n%s", c.err);
    snprintf(path, sizeof path, "%s/s.%ld.100%%.json", tmpdir, pid);
    char *json = tt_read_file(path, NULL);
    cr_assert(json, "no file %s", path);
    char spid[24], csv[512];
    snprintf(spid, sizeof spid, "%ld", pid);
    keys_csv(csv, sizeof csv);
    python_ok("stats_file", json_check, json, (const char *[]){ spid, "stats_probe", csv, NULL });
    free(json);
    tt_child_free(&c);
}

Test(stats, stats_file_that_cannot_be_created_says_why_in_one_line, .timeout = 60)
{
    struct tt_child c;
    run_ok(&c, "stats:on,stats_file:/nonexistent-dir/s.%p", (const char *[]){ STATS_PROBE, "noop", NULL });
    char want[128];
    snprintf(want, sizeof want, "tide: cannot write the statistics to /nonexistent-dir/s.%ld: No such file or directory\n",
             pid_of(&c));
    cr_expect_str_eq(c.err, want);
    tt_child_free(&c);
}

Test(stats, verbose_prints_one_line_of_effective_settings_at_start, .timeout = 60)
{
    struct tt_child c;
    run_ok(&c, "verbose:on,decay_ms:250,purge:free", (const char *[]){ STATS_PROBE, "noop", NULL });
    char want[256];
    snprintf(want, sizeof want,
             "tide: pid %ld, program stats_probe, version " TIDE_VERSION ", settings purge:free,decay_ms:250,", pid_of(&c));
    cr_expect(strncmp(c.err, want, strlen(want)) == 0, "want \"%s...\", got:\n%s", want, c.err);
    cr_expect(strchr(c.err, '\n') == c.err + c.errlen - 1, "one line:\n%s", c.err);
    for (int i = 0; keys[i]; i++) {
        char kv[64];
        snprintf(kv, sizeof kv, ",%s:", keys[i]);
        cr_expect(i == 0 || strstr(c.err, kv), "no %s in the verbose line:\n%s", keys[i], c.err);
    }
    cr_expect(strstr(c.err, ",verbose:on,") != NULL, "%s", c.err);
    tt_child_free(&c);
}

static const char info_check[] =
    "import sys, xml.etree.ElementTree as ET\n"
    "root = ET.parse(sys.argv[1]).getroot()\n"
    "n = dict(l.split('=') for l in sys.stdin.read().split())\n"
    "n = {k: int(v) for k, v in n.items()}\n"
    "assert n['r'] == 0 and n['bad'] == -1 and n['bad_errno'] == 22, n\n"
    "assert root.tag == 'malloc' and root.get('version') == '1'\n"
    "heaps = root.findall('heap')\n"
    "assert len(heaps) == n['narenas'] and [int(h.get('nr')) for h in heaps] == list(range(len(heaps)))\n"
    "def tot(e, t):\n"
    "    x = e.find(\"total[@type='%s']\" % t)\n"
    "    return int(x.get('count')), int(x.get('size'))\n"
    "def sysv(e, tag, t):\n"
    "    return int(e.find(\"%s[@type='%s']\" % (tag, t)).get('size'))\n"
    "hc = hs = 0\n"
    "for h in heaps:\n"
    "    sizes = h.find('sizes').findall('size')\n"
    "    c, s = tot(h, 'rest')\n"
    "    assert c == sum(int(x.get('count')) for x in sizes) and s == sum(int(x.get('total')) for x in sizes)\n"
    "    assert all(int(x.get('from')) <= int(x.get('to')) for x in sizes)\n"
    "    assert s <= sysv(h, 'system', 'current') == sysv(h, 'aspace', 'total')\n"
    "    hc += c; hs += s\n"
    "rc, rs = tot(root, 'rest')\n"
    "assert rc == hc and rs == hs + n['free_pages'], (rc, hc, rs, hs, n)\n"
    "mc, ms = tot(root, 'mmap')\n"
    "assert mc == n['large'] and mc >= 1 and ms >= 1 << 20, (mc, ms, n)\n"
    "assert sysv(root, 'system', 'current') == n['mapped'] == sysv(root, 'aspace', 'total'), n\n"
    "assert sum(sysv(h, 'system', 'current') for h in heaps) + ms <= n['mapped']\n"
    "assert tot(root, 'fast') == (0, 0)\n";

Test(stats, malloc_info_writes_well_formed_xml_whose_totals_match_tide_stats_get, .timeout = 60)
{
    char path[512];
    snprintf(path, sizeof path, "%s/info.xml", tmpdir);
    struct tt_child c;
    run_ok(&c, NULL, (const char *[]){ STATS_PROBE, "info", path, NULL });
    char *xml = tt_read_file(path, NULL);
    cr_assert(xml && strncmp(xml, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 43) == 0, "%s", xml);
    free(xml);
    python_ok("malloc_info", info_check, c.out, (const char *[]){ path, NULL });
    tt_child_free(&c);
}

/* ---- in this process: the callback -------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n;
    int calls;
} grow_t;

/* It allocates: no lock of tide's may be held while it runs. */
static void append(void *arg, const char *s)
{
    grow_t *g = arg;
    size_t l = strlen(s);
    g->s = realloc(g->s, g->n + l + 1);
    cr_assert(g->s);
    memcpy(g->s + g->n, s, l + 1);
    g->n += l;
    g->calls++;
}

Test(stats, print_cb_hands_every_piece_to_the_callback_which_may_allocate)
{
    grow_t all = { 0 }, bare = { 0 }, text = { 0 };
    tide_stats_print_cb(append, &all, "J");
    tide_stats_print_cb(append, &bare, "Jgb");
    tide_stats_print_cb(append, &text, NULL);
    cr_assert(all.calls >= 1 && bare.calls >= 1 && text.calls >= 1);
    cr_expect(strstr(all.s, "\"settings\":{") && strstr(all.s, "\"classes\":["), "%s", all.s);
    cr_expect(!strstr(bare.s, "\"settings\"") && !strstr(bare.s, "\"classes\"") && strstr(bare.s, "\"mapped\":"),
              "g and b leave out the settings and the classes: %s", bare.s);
    /* the program: the last part of argv[0] (Criterion's worker renames it) */
    char *cmdline = tt_read_file("/proc/self/cmdline", NULL), want[256];
    cr_assert(cmdline);
    const char *prog = strrchr(cmdline, '/') ? strrchr(cmdline, '/') + 1 : cmdline;
    snprintf(want, sizeof want, "tide statistics: pid %ld, program %s, ", (long)getpid(), prog);
    free(cmdline);
    cr_expect(strncmp(text.s, want, strlen(want)) == 0, "%s", text.s);
    python_ok("tide_stats_print_cb J", "import json, sys; d = json.loads(sys.stdin.read()); assert d['settings']",
              all.s, NULL);
    free(all.s);
    free(bare.s);
    free(text.s);
}

/* ---- the wrapper -------------------------------------------------------------------------- */

Test(stats, wrapper_stats_json_and_stats_file_label_each_process, .timeout = 60)
{
    char file[512], script[1024];
    snprintf(file, sizeof file, "%s/w.%%p.json", tmpdir);
    /* three processes: the shell and two probes */
    snprintf(script, sizeof script, "%s noop; %s noop; true", STATS_PROBE, STATS_PROBE);
    struct tt_child c;
    run_ok(&c, "decay_ms:250",
           (const char *[]){ TIDE_WRAPPER, "--stats=json", "--stats-file", file, "--", "sh", "-c", script, NULL });
    cr_expect_eq(c.errlen, 0, "nothing on stderr:\n%s", c.err);
    char csv[512];
    keys_csv(csv, sizeof csv);
    int probes = 0;
    for (const char *l = c.out; (l = strstr(l, "pid=")) != NULL; l++) {
        long pid = strtol(l + 4, NULL, 10);
        char path[512], spid[24];
        snprintf(path, sizeof path, "%s/w.%ld.json", tmpdir, pid);
        char *json = tt_read_file(path, NULL);
        cr_assert(json, "no %s", path);
        snprintf(spid, sizeof spid, "%ld", pid);
        python_ok("tide --stats=json --stats-file", json_check, json, (const char *[]){ spid, "stats_probe", csv, NULL });
        free(json);
        probes++;
    }
    cr_expect_eq(probes, 2);
    tt_child_free(&c);

    /* --stats-file alone: text */
    snprintf(file, sizeof file, "%s/t.%%p", tmpdir);
    run_ok(&c, NULL, (const char *[]){ TIDE_WRAPPER, "--stats-file", file, "--", STATS_PROBE, "noop", NULL });
    char path[512];
    snprintf(path, sizeof path, "%s/t.%ld", tmpdir, pid_of(&c));
    char *text = tt_read_file(path, NULL);
    cr_assert(text && strncmp(text, "tide statistics: pid ", 21) == 0, "%s: %s", path, text);
    free(text);
    tt_child_free(&c);
}

Test(stats, wrapper_rejects_an_unknown_stats_format, .timeout = 30)
{
    const char *argv[] = { TIDE_WRAPPER, "--stats=xml", "--", "true", NULL };
    const char *env[] = { "TIDE_LIB=" TIDE_LIB, NULL };
    struct tt_child_spec spec = { .path = TIDE_WRAPPER, .argv = argv, .env = env };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    cr_expect(tt_child_exited(&c, 2));
    cr_expect_str_eq(c.err, "tide: --stats: text or json, not xml\n");
    tt_child_free(&c);
}
