/* SPDX-License-Identifier: MIT */
/* conf.c - tide's settings, from three sources read in order at start-up, each entry
 * overriding the same key's earlier value: the program's tide_malloc_conf, the system's
 * file (TIDE_CONF_FILE, $(sysconfdir)/tide.conf) and the TIDE_CONF variable.
 *
 * A table describes every key: its type, limits, default and meaning.  A bad entry
 * gets one warning that names its source, the entry and what is accepted, and the key
 * keeps the value it had before the entry (the default, or an earlier source's), as the
 * warning says. */
#include "conf.h"

#include <errno.h>
#include <string.h>
#include <limits.h>

#include "os.h"
#include "report.h"
#include "util.h"

conf_t conf = {
    .purge = PURGE_DONTNEED,
    .decay_ms = 1000,
    .background = BACKGROUND_AUTO,
    .arenas = 0,
    .tcache = 1,
    .thp = THP_AUTO,
    .stats = 0,
    .stats_file = "",
    .verbose = 0,
    .remap = 1,
    .remap_max = 1,
    .remap_threshold = 1 << 20,
    .prof = 0,
    .prof_sample = 512 << 10,
    .prof_final = 0,
    .prof_interval = 0,
    .prof_prefix = "tide",
    .guard = 0,
    .guard_quarantine = 4 << 20,
    .guard_sample = 0,
};

/* CONF_MODE: an enum whose first two names are off and on, which also takes the words
 * of a boolean (the key was a boolean before it had more values). */
/* CONF_STRING: text of fewer than CONF_PREFIX_MAX bytes (no comma), in STR. */
typedef enum { CONF_BOOL, CONF_ENUM, CONF_MODE, CONF_INT, CONF_SIZE, CONF_STRING } conf_type_t;

typedef struct conf_key_s {
    const char *name;
    conf_type_t type;
    void *value;              /* a long; CONF_STRING: char[CONF_PREFIX_MAX] */
    long min, max;
    const char *const *names; /* CONF_ENUM, CONF_MODE: value i is names[i] */
    bool runtime;             /* settable with tide_conf_set() */
    const char *def;
    const char *help;
} conf_key_t;

/* Where an entry comes from, for its warnings: "TIDE_CONF", "tide_malloc_conf" or the
 * file's path (LINE > 0: "PATH:LINE"). */
typedef struct conf_src_s {
    const char *name;
    unsigned line;
    bool at_start; /* start-up; else tide_conf_set() */
    bool lines;    /* the file's syntax: newlines, # comments, blanks around entries */
} conf_src_t;

static const char *const purge_names[] = { "none", "dontneed", "free", NULL };
static const char *const background_names[] = { "off", "on", "auto", NULL };
static const char *const stats_names[] = { "off", "on", "json", NULL };
static const char *const thp_names[] = { "off", "on", "auto", NULL };

/* The build writes tide(3)'s list of keys from this table (man/gen_conf_keys.c): a help
 * text is also a sentence of the manual. */
static const conf_key_t conf_keys[] = {
    { "purge", CONF_ENUM, &conf.purge, 0, 2, purge_names, true, "dontneed",
      "how free pages go back to the kernel: none, dontneed (MADV_DONTNEED), free (MADV_FREE)" },
    { "decay_ms", CONF_INT, &conf.decay_ms, -1, 86400000, NULL, true, "1000",
      "how long a freed page stays resident before it is purged; 0 = at once, -1 = never" },
    { "background", CONF_MODE, &conf.background, 0, 2, background_names, true, "auto",
      "a background thread purges decayed pages of an idle process: on, off, or auto (only once the "
      "program has a second thread; a single-threaded one purges from its own calls)" },
    { "arenas", CONF_INT, &conf.arenas, 0, 1024, NULL, false, "0",
      "number of arenas; 0 = 4 per CPU" },
    { "tcache", CONF_BOOL, &conf.tcache, 0, 1, NULL, false, "on",
      "per-thread caches of small and medium objects" },
    { "thp", CONF_MODE, &conf.thp, 0, 2, thp_names, true, "auto",
      "transparent huge pages: auto (where the system's THP setting is madvise or always: MADV_HUGEPAGE on "
      "the whole heap once 64 MiB are in use, so that new 2 MiB units fault in as huge pages, and "
      "MADV_NOHUGEPAGE once a purge splits a unit in use; dense units collapsed with MADV_COLLAPSE; free "
      "pages go back as with off), on (MADV_HUGEPAGE on the whole heap, purged in whole 2 MiB units: "
      "faster forks, more memory), off (4 KiB pages)" },
    { "stats", CONF_MODE, &conf.stats, 0, 2, stats_names, true, "off",
      "print statistics at exit, labelled with the pid, the program, tide's version and the effective "
      "settings: off, on (text), json (one JSON object); on stderr, or into stats_file" },
    { "stats_file", CONF_STRING, conf.stats_file, 0, 0, NULL, false, "",
      "with stats, the file the statistics go to at exit instead of stderr, created or truncated; "
      "%p in it is the pid, %% a percent sign" },
    { "verbose", CONF_BOOL, &conf.verbose, 0, 1, NULL, false, "off",
      "print one line at start-up on stderr: the pid, the program, tide's version and every key's "
      "effective value" },
    { "remap", CONF_BOOL, &conf.remap, 0, 1, NULL, true, "on",
      "large realloc moves pages with mremap instead of copying" },
    { "remap_max", CONF_INT, &conf.remap_max, 0, 4096, NULL, true, "1",
      "moved blocks that may be live at once: tide's range stays within 1 + 2 x remap_max VMAs" },
    { "remap_threshold", CONF_SIZE, &conf.remap_threshold, 64 << 10, (long)1 << 40, NULL, true, "1m",
      "smallest block whose realloc may move pages with mremap (bytes; k, m, g, t suffixes)" },
    { "prof", CONF_BOOL, &conf.prof, 0, 1, NULL, false, "off",
      "the sampling heap profiler: records the call stacks of sampled allocations, for "
      "tide_prof_dump(), prof_final and prof_interval (read the dumps with google-pprof or jeprof)" },
    { "prof_sample", CONF_SIZE, &conf.prof_sample, 1, (long)1 << 40, NULL, false, "512k",
      "with prof:on, the mean bytes allocated between two samples (exponential intervals, drawn per "
      "thread; bytes, k, m, g, t suffixes)" },
    { "prof_final", CONF_BOOL, &conf.prof_final, 0, 1, NULL, false, "off",
      "with prof:on, dump the heap profile at exit, to PREFIX.PID.SEQ.f.heap" },
    { "prof_interval", CONF_SIZE, &conf.prof_interval, 0, (long)1 << 50, NULL, false, "0",
      "with prof:on, dump a profile to PREFIX.PID.SEQ.iN.heap each time the sampled live heap grows "
      "by this many bytes past its size at the last such dump; 0 = never (bytes, k, m, g, t suffixes)" },
    { "prof_prefix", CONF_STRING, conf.prof_prefix, 0, 0, NULL, false, "tide",
      "where dumps go: PREFIX.PID.SEQ.KIND.heap (KIND f at exit, iN by prof_interval, mN by "
      "tide_prof_dump(NULL)); a path, relative to the working directory or absolute" },
    { "guard", CONF_BOOL, &conf.guard, 0, 1, NULL, true, "off",
      "a guard page (MADV_GUARD_INSTALL: no VMA) after every slab and large block made from now on, and "
      "freed large blocks kept as guards for a while (guard_quarantine)" },
    { "guard_quarantine", CONF_SIZE, &conf.guard_quarantine, 0, (long)1 << 40, NULL, true, "4m",
      "bytes of freed large blocks (and, apart, of sampled blocks) kept as guards before their pages are "
      "reused, oldest out first" },
    { "guard_sample", CONF_SIZE, &conf.guard_sample, 0, (long)1 << 40, NULL, true, "0",
      "one allocation of at most 64 KiB in about this many bytes gets pages of its own, ending at a guard "
      "page, and is held as a guard when freed; a SIGSEGV there is explained; 0 = off" },
};

/* One warning line: "tide: SOURCE: WHAT 'VAL' for KEY (accepted: ACCEPTED); keeping KEPT",
 * or, without VAL, "tide: SOURCE: WHAT 'KEY' (ACCEPTED)"; KEY NULL: "tide: SOURCE: WHAT". */
static void conf_warn(const conf_src_t *src, const char *what, const char *key, size_t keylen, const char *val,
                      size_t vallen, const char *accepted, const char *kept)
{
    char k[64], v[64], where[CONF_PREFIX_MAX + 32];
    size_t kl = MIN(keylen, sizeof k - 1), vl = MIN(vallen, sizeof v - 1);
    if (key)
        memcpy(k, key, kl);
    k[key ? kl : 0] = '\0';
    if (val)
        memcpy(v, val, vl);
    v[val ? vl : 0] = '\0';
    size_t wl = MIN(strlen(src->name), sizeof where - 24);
    memcpy(where, src->name, wl);
    where[wl] = '\0';
    if (src->line) {
        where[wl++] = ':';
        report_fmt_u64(where + wl, src->line, 0);
    }
    if (val) {
        const char *pieces[] = { where, ": ", what, " '", v, "' for ", k,
                                 " (accepted: ", accepted, "); keeping ", kept };
        report_line(pieces, ARRAY_SIZE(pieces));
    } else if (key) {
        const char *pieces[] = { where, ": ", what, " '", k, "' (", accepted, ")" };
        report_line(pieces, ARRAY_SIZE(pieces));
    } else {
        const char *pieces[] = { where, ": ", what };
        report_line(pieces, ARRAY_SIZE(pieces));
    }
}

static bool parse_long(const char *s, size_t n, long *out, bool size_suffix)
{
    bool neg = false;
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    if (i == n)
        return false;
    unsigned long v = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (unsigned long)LONG_MAX / 10)
            return false;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (i < n && size_suffix && i + 1 == n) {
        unsigned shift = 0;
        switch (s[i] | 0x20) {
        case 'k': shift = 10; break;
        case 'm': shift = 20; break;
        case 'g': shift = 30; break;
        case 't': shift = 40; break;
        default: return false;
        }
        if (v > ((unsigned long)LONG_MAX >> shift))
            return false;
        v <<= shift;
        i++;
    }
    if (i != n || v > (unsigned long)LONG_MAX)
        return false;
    *out = neg ? -(long)v : (long)v;
    return true;
}

static bool word_is(const char *s, size_t n, const char *w) { return strlen(w) == n && memcmp(s, w, n) == 0; }

/* Values are words in any case (purge:FREE, thp:On); keys are exact. */
static bool word_is_ci(const char *s, size_t n, const char *w)
{
    if (strlen(w) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] | 0x20 : s[i]) != w[i])
            return false;
    return true;
}

/* The words of a boolean, as jemalloc's true/false and the usual on/off, yes/no, 1/0. */
static const char *const bool_on[] = { "on", "true", "yes", "1", NULL };
static const char *const bool_off[] = { "off", "false", "no", "0", NULL };

static bool word_in(const char *s, size_t n, const char *const *words)
{
    for (size_t i = 0; words[i]; i++)
        if (word_is_ci(s, n, words[i]))
            return true;
    return false;
}

static const conf_key_t *conf_find(const char *key, size_t keylen)
{
    for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++)
        if (word_is(key, keylen, conf_keys[i].name))
            return &conf_keys[i];
    return NULL;
}

static void accepted_text(const conf_key_t *k, char *buf, size_t cap)
{
    char lo[24], hi[24];
    switch (k->type) {
    case CONF_BOOL:
        strcpy(buf, "on, off, yes, no, true, false, 1, 0");
        return;
    case CONF_STRING:
        strcpy(buf, "text without a comma, shorter than 256 bytes");
        return;
    case CONF_ENUM:
    case CONF_MODE:
        buf[0] = '\0';
        for (size_t i = 0; k->names[i]; i++) {
            if (i)
                strcat(buf, ", ");
            strcat(buf, k->names[i]);
        }
        if (k->type == CONF_MODE)
            strcat(buf, ", yes, no, true, false, 1, 0");
        return;
    default: {
        report_fmt_u64(lo + 1, (uint64_t)(k->min < 0 ? -k->min : k->min), 0);
        lo[0] = '-';
        report_fmt_u64(hi, (uint64_t)k->max, 0);
        size_t n = 0;
        const char *parts[] = { "an integer from ", k->min < 0 ? lo : lo + 1, " to ", hi,
                                k->type == CONF_SIZE ? " (k, m, g, t suffixes)" : "" };
        for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
            size_t l = strlen(parts[i]);
            if (n + l >= cap)
                break;
            memcpy(buf + n, parts[i], l);
            n += l;
        }
        buf[n] = '\0';
    }
    }
}

/* KEY:VAL from SRC; 0, or EINVAL (warned) or EPERM (a start-up key at run time). */
static int conf_set_src(const conf_src_t *src, const char *key, size_t keylen, const char *val, size_t vallen)
{
    const conf_key_t *k = conf_find(key, keylen);
    if (!k) {
        char keys[512] = "keys:";
        for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++) {
            strcat(keys, i ? ", " : " ");
            strcat(keys, conf_keys[i].name);
        }
        conf_warn(src, "unknown key", key, keylen, NULL, 0, keys, NULL);
        return EINVAL;
    }
    if (!src->at_start && !k->runtime)
        return EPERM;
    long v = 0;
    bool ok = false;
    switch (k->type) {
    case CONF_MODE:
    case CONF_BOOL:
        if (word_in(val, vallen, bool_on))
            v = 1, ok = true;
        else if (word_in(val, vallen, bool_off))
            v = 0, ok = true;
        if (ok || k->type == CONF_BOOL)
            break;
        __attribute__((fallthrough)); /* a mode's other names */
    case CONF_ENUM:
        for (long i = 0; k->names[i]; i++)
            if (word_is_ci(val, vallen, k->names[i]))
                v = i, ok = true;
        break;
    case CONF_INT:
    case CONF_SIZE:
        ok = parse_long(val, vallen, &v, k->type == CONF_SIZE) && v >= k->min && v <= k->max;
        break;
    case CONF_STRING:
        /* Empty only where the default is ("stats_file:": back to stderr). */
        if ((vallen == 0 && k->def[0] != '\0') || vallen >= CONF_PREFIX_MAX || memchr(val, '\0', vallen))
            break;
        memcpy(k->value, val, vallen);
        ((char *)k->value)[vallen] = '\0';
        return 0;
    }
    if (!ok) {
        char acc[128], kept[CONF_PREFIX_MAX + 64];
        accepted_text(k, acc, sizeof acc);
        size_t n = strlen(k->name);
        memcpy(kept, k->name, n);
        kept[n] = ':';
        if (conf_get(k->name, kept + n + 1, sizeof kept - n - 1) != 0)
            kept[n + 1] = '\0';
        conf_warn(src, "bad value", k->name, strlen(k->name), val, vallen, acc, kept);
        return EINVAL;
    }
    ATOMIC_STORE((long *)k->value, v);
    return 0;
}

int conf_set(const char *key, size_t keylen, const char *val, size_t vallen, bool at_start)
{
    const conf_src_t src = { "TIDE_CONF", 0, at_start, false };
    return conf_set_src(&src, key, keylen, val, vallen);
}

static bool conf_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* One entry, [S, S + N): "key:value" or "help".  Returns 1 if it was bad. */
static int conf_entry(const conf_src_t *src, const char *s, size_t n)
{
    if (src->lines) {
        while (n && conf_blank(*s))
            s++, n--;
        while (n && conf_blank(s[n - 1]))
            n--;
    }
    const char *colon = memchr(s, ':', n);
    if (n == 0) {
        /* "a:1,,b:2" or "a:1,": harmless, but maybe not what was meant */
        conf_warn(src, "empty entry (a comma too many); ignored", NULL, 0, NULL, 0, NULL, NULL);
        return 1;
    }
    if (word_is(s, n, "help")) {
        conf_print_help();
        return 0;
    }
    if (!colon) {
        conf_warn(src, "missing ':value' after", s, n, NULL, 0, "entries are key:value", NULL);
        return 1;
    }
    size_t kl = (size_t)(colon - s);
    const char *v = colon + 1;
    size_t vl = n - kl - 1;
    if (src->lines) {
        while (kl && conf_blank(s[kl - 1]))
            kl--;
        while (vl && conf_blank(*v))
            v++, vl--;
    }
    return conf_set_src(src, s, kl, v, vl) != 0;
}

/* Comma-separated entries in [S, S + N).  Returns the bad ones. */
static int conf_entries(const conf_src_t *src, const char *s, size_t n)
{
    int bad = 0;
    if (n == 0)
        return 0;
    for (;;) {
        const char *end = memchr(s, ',', n);
        size_t len = end ? (size_t)(end - s) : n;
        bad += conf_entry(src, s, len);
        if (!end)
            return bad;
        n -= len + 1;
        s = end + 1;
    }
}

int conf_parse(const char *s, bool at_start)
{
    const conf_src_t src = { "TIDE_CONF", 0, at_start, false };
    return conf_entries(&src, s, strlen(s));
}

#ifdef TIDE_CONF_FILE
/* The file's syntax: entries separated by commas or newlines; from '#' to the end of
 * its line is a comment; blank lines and blanks around entries, keys and values are
 * ignored.  Read into a static buffer (nothing may allocate yet), whole lines only. */
static int conf_parse_file(const char *path)
{
    static char buf[CONF_FILE_MAX + 1];
    size_t len = 0;
    bool truncated = false;
    int err = os_read_file(path, buf, sizeof buf - 1, &len, &truncated);
    conf_src_t src = { path, 0, true, true };
    if (err) {
        if (err != ENOENT) { /* no file is the normal case */
            char eb[24];
            const char *pieces[] = { path, ": cannot read it: ", report_strerror(err, eb) };
            report_line(pieces, ARRAY_SIZE(pieces));
        }
        return err != ENOENT;
    }
    if (truncated) {
        char lim[24];
        report_fmt_u64(lim, CONF_FILE_MAX, 0);
        const char *pieces[] = { path, ": longer than ", lim, " bytes; only its whole lines up to there are read" };
        report_line(pieces, ARRAY_SIZE(pieces));
        while (len && buf[len - 1] != '\n')
            len--;
    }
    int bad = 0;
    for (size_t i = 0; i < len;) {
        const char *line = buf + i, *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t)(nl - line) : len - i;
        i += n + 1;
        src.line++;
        const char *hash = memchr(line, '#', n);
        if (hash)
            n = (size_t)(hash - line);
        size_t b = 0;
        while (b < n && conf_blank(line[b]))
            b++;
        if (b < n) /* a line with something on it */
            bad += conf_entries(&src, line, n);
    }
    return bad;
}
#endif

/* The program's own default: it defines `const char *tide_malloc_conf = "...";`.  A weak
 * reference, NULL when no one defines it; for libtide.so the dynamic linker finds the
 * program's definition if the program exports it, which the link editor does by itself
 * when it links the program with -ltide, and -rdynamic does for a program that gets
 * tide through LD_PRELOAD only (tide(3)). */
extern const char *tide_malloc_conf __attribute__((weak, visibility("default")));

void conf_init(void)
{
    extern char **environ;
    static const char var[] = "TIDE_CONF=";
    if (&tide_malloc_conf && tide_malloc_conf) {
        const conf_src_t src = { "tide_malloc_conf", 0, true, false };
        conf_entries(&src, tide_malloc_conf, strlen(tide_malloc_conf));
    }
#ifdef TIDE_CONF_FILE
    /* Root's file: obeyed by setuid programs too. */
    conf_parse_file(TIDE_CONF_FILE);
#endif
    /* In a setuid or setgid program TIDE_CONF is the caller's, not the program's: it is
     * ignored, silently (no warning, no help), as glibc ignores its tunables there. */
    if (!environ || os_secure())
        return;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, var, sizeof var - 1) == 0) {
            conf_parse(*e + sizeof var - 1, true);
            return;
        }
    }
}

int conf_get(const char *key, char *buf, size_t len)
{
    const conf_key_t *k = conf_find(key, strlen(key));
    if (!k || len == 0)
        return EINVAL;
    long v = k->type == CONF_STRING ? 0 : ATOMIC_LOAD((long *)k->value);
    char tmp[32];
    const char *s;
    switch (k->type) {
    case CONF_STRING:
        s = k->value;
        break;
    case CONF_BOOL:
        s = v ? "on" : "off";
        break;
    case CONF_ENUM:
    case CONF_MODE:
        s = k->names[v];
        break;
    default:
        if (v < 0) {
            tmp[0] = '-';
            report_fmt_u64(tmp + 1, (uint64_t)-v, 0);
        } else {
            report_fmt_u64(tmp, (uint64_t)v, 0);
        }
        s = tmp;
    }
    if (strlen(s) + 1 > len)
        return ERANGE;
    strcpy(buf, s);
    return 0;
}

const char *conf_key_name(size_t i) { return i < ARRAY_SIZE(conf_keys) ? conf_keys[i].name : NULL; }

void conf_print_help(void)
{
    static const char head[] = "tide: TIDE_CONF=\"key:value,key:value\"; the keys:\n";
    os_write_stderr(head, sizeof head - 1);
    for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++) {
        const conf_key_t *k = &conf_keys[i];
        char acc[128], line[512];
        accepted_text(k, acc, sizeof acc);
        size_t n = 0;
        const char *parts[] = { "  ", k->name, " (default ", k->def, "; ", acc, ")\n      ", k->help,
                                k->runtime ? "\n" : " [TIDE_CONF only]\n" };
        for (size_t j = 0; j < ARRAY_SIZE(parts); j++) {
            size_t l = MIN(strlen(parts[j]), sizeof line - n);
            memcpy(line + n, parts[j], l);
            n += l;
        }
        os_write_stderr(line, n);
    }
}
