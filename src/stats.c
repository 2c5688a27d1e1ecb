/* SPDX-License-Identifier: MIT */
/* stats.c - statistics that reconcile:
 *   active + dirty + lazy + clean + held + metadata == mapped,   allocated <= active. */
#include "stats.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "conf.h"
#include "extent.h"
#include "guard.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "region.h"
#include "large.h"
#include "meta.h"
#include "report.h"
#include "size_class.h"
#include "tcache.h"

void stats_collect(tide_stats_t *s, bool expensive)
{
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    extent_stats_t ph;
    arena_stats_t ar;
    arenas_stats(&ar);
    extent_stats(&ph);
    meta_stats_t ms;
    meta_stats(&ms);
    /* The heap's pages, its page map, and the metadata range. */
    size_t heap_mapped = ATOMIC_LOAD(&region.heap_mapped), pm_mapped = ATOMIC_LOAD(&region.pm_mapped);
    s->mapped = heap_mapped + pm_mapped + ms.mapped;
    s->active = ph.active;
    s->dirty = ph.dirty;
    s->lazy = ph.lazy;
    s->clean = ph.clean;
    s->metadata = pm_mapped + ms.mapped + ph.reserved;
    /* Guard pages are active (blocks hold them) but never handed out. */
    s->allocated = ar.allocated + (ph.active - ph.slab_bytes - ph.large_guards);
    s->guard_bytes = ph.guards;
    s->held = ph.held;
    guard_stats_t gs;
    guard_stats(&gs);
    s->sampled = gs.sampled;
    s->sampled_live = gs.sampled_live;
    s->lazyfree_est = ph.lazy;
    s->nranges = ATOMIC_LOAD(&region.nranges);
    s->nmalloc_large = ph.nlarge_alloc;
    s->nfree_large = ph.nlarge_free;
    s->nslabs = ph.nslabs;
    s->nslabs_made = ar.nslabs_made;
    s->nslabs_empty = ar.nslabs_empty;
    for (int a = 0; a < OS_ADV_COUNT; a++) {
        s->madvise_calls[a] = ATOMIC_LOAD(&os_counters.madvise_calls[a]);
        s->madvise_bytes[a] = ATOMIC_LOAD(&os_counters.madvise_bytes[a]);
    }
    s->process_madvise_calls = ATOMIC_LOAD(&os_counters.process_madvise_calls);
    s->process_madvise_bytes = ATOMIC_LOAD(&os_counters.process_madvise_bytes);
    purge_stats_t ps;
    purge_stats(&ps);
    s->purges = ps.passes;
    s->purged_bytes = ps.purged_bytes;
    s->grows = ATOMIC_LOAD(&os_counters.map_calls);
    large_stats_t rs;
    large_stats(&rs);
    s->remap_moves = rs.moves;
    s->remap_heals = rs.heals;
    s->remap_copies = rs.copies;
    s->remap_in_place = rs.in_place;
    s->remap_live = rs.live;
    s->remap_vmas = rs.vmas;
    s->remap_vmas_peak = rs.vmas_peak;
    s->narenas = narenas;
    tcache_stats_t ts;
    tcache_stats(&ts);
    s->nthreads = ts.nthreads;
    s->named = os_named();
    prof_stats_t pf;
    prof_stats(&pf);
    s->prof_samples = pf.samples;
    s->prof_live_samples = pf.live_samples;
    s->prof_stacks = pf.stacks;
    s->prof_frame_walks = pf.frame_walks;
    s->prof_backtraces = pf.backtraces;
    s->prof_stacks_reused = pf.reused;
    s->prof_dumps = pf.dumps;
    if (expensive) {
        s->resident = region_resident();
        long v = region_vmas();
        s->vmas = v < 0 ? 0 : (uint64_t)v;
        uintptr_t chunks[32][2];
        unsigned n = meta_chunks(chunks, 32);
        for (unsigned i = 0; i < n && i < 32; i++) {
            long m = os_count_vmas(chunks[i][0], chunks[i][1]);
            s->meta_vmas += m < 0 ? 0 : (uint64_t)m;
        }
    }
}

/* ---- printing ------------------------------------------------------------------------
 *
 * Everything is gathered first (each layer takes and drops its own locks), then printed
 * with no lock held, through a buffer on the stack handed to a writer in NUL-terminated
 * pieces: stderr, a file, or a caller's callback (which may allocate, or even print the
 * statistics again).  Nothing allocates: snprintf of integers and strings does not.  The
 * buffer holds a whole report as printed at exit, so that it goes out in one write and
 * the reports of processes that end together do not mix. */

typedef struct stats_out_s {
    void (*write)(void *arg, const char *s);
    void *arg;
    size_t n;
    char buf[16384];
} stats_out_t;

static void stats_flush(stats_out_t *o)
{
    if (o->n) {
        o->buf[o->n] = '\0';
        o->write(o->arg, o->buf);
        o->n = 0;
    }
}

static void stats_putn(stats_out_t *o, const char *s, size_t len)
{
    while (len) {
        if (o->n == sizeof o->buf - 1)
            stats_flush(o);
        size_t k = MIN(len, sizeof o->buf - 1 - o->n);
        memcpy(o->buf + o->n, s, k);
        o->n += k;
        s += k;
        len -= k;
    }
}

__attribute__((format(printf, 2, 3))) static void stats_put(stats_out_t *o, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        stats_putn(o, line, MIN((size_t)n, sizeof line - 1));
}

/* S as a JSON string, quotes included. */
static void stats_put_json_str(stats_out_t *o, const char *s)
{
    stats_putn(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            stats_putn(o, e, 2);
        } else if (c < 0x20) {
            stats_put(o, "\\u%04x", c);
        } else {
            stats_putn(o, s, 1);
        }
    }
    stats_putn(o, "\"", 1);
}

static void stats_write_stderr(void *arg, const char *s)
{
    (void)arg;
    os_write_stderr(s, strlen(s));
}

#define STATS_FIELDS(X)                                                                        \
    X(mapped) X(active) X(allocated) X(dirty) X(lazy) X(clean) X(metadata) X(resident)         \
    X(lazyfree_est) X(nranges) X(vmas) X(nmalloc_large) X(nfree_large) X(nslabs)               \
    X(process_madvise_calls) X(process_madvise_bytes) X(purges) X(purged_bytes) X(grows)       \
    X(remap_moves) X(remap_heals) X(remap_copies) X(remap_in_place) X(remap_live) X(narenas)  \
    X(nthreads) X(remap_vmas) X(remap_vmas_peak) X(meta_vmas) X(named) X(prof_samples) X(prof_live_samples)   \
    X(prof_stacks) X(prof_frame_walks) X(prof_backtraces) X(prof_dumps) X(nslabs_made) X(nslabs_empty) \
    X(prof_stacks_reused) X(guard_bytes) X(held) X(sampled) X(sampled_live)

/* Who is printing: "pid 1234, program gcc, version 0.1.0" in the text form. */
typedef struct stats_who_s {
    long pid;
    char program[128];
} stats_who_t;

static void stats_who(stats_who_t *w)
{
    w->pid = os_getpid();
    os_program_name(w->program, sizeof w->program);
}

static void stats_print_to(stats_out_t *o, bool json, bool settings, bool classes)
{
    tide_stats_t s;
    stats_collect(&s, true);
    bin_stats_t bins[SC_NSMALL];
    arenas_bin_stats(ARENA_ALL, bins);
    stats_who_t w;
    stats_who(&w);
    char val[CONF_PREFIX_MAX];
    static const char *const adv[] = { "dontneed", "free", "hugepage" };
    static const char *const thp_mode[] = { "off", "on", "auto" };
    static const char *const thp_advice[] = { "none", "hugepage", "nohugepage" };
    extent_huge_stats_t h;
    extent_huge_stats(&h);
    if (json) {
        /* One object: who, the settings, the counters of tide_stats_t by their names, the
         * classes. */
        stats_put(o, "{\"version\":\"%s\",\"pid\":%ld,\"program\":", TIDE_VERSION, w.pid);
        stats_put_json_str(o, w.program);
        if (settings) {
            stats_put(o, ",\"settings\":{");
            const char *k;
            for (size_t i = 0; (k = conf_key_name(i)) != NULL; i++) {
                if (conf_get(k, val, sizeof val) != 0)
                    continue;
                stats_put(o, "%s\"%s\":", i ? "," : "", k);
                stats_put_json_str(o, val);
            }
            stats_put(o, "}");
        }
#define X(f) stats_put(o, ",\"%s\":%llu", #f, (unsigned long long)s.f);
        STATS_FIELDS(X)
#undef X
        for (int a = 0; a < 3; a++)
            stats_put(o, ",\"madvise_%s_calls\":%llu,\"madvise_%s_bytes\":%llu", adv[a],
                      (unsigned long long)s.madvise_calls[a], adv[a], (unsigned long long)s.madvise_bytes[a]);
        stats_put(o, ",\"thp\":{\"mode\":\"%s\",\"active\":%s,\"advice\":\"%s\",\"dense\":%llu,\"metadata\":%llu,\"failed\":%llu}",
                  thp_mode[h.mode], h.active ? "true" : "false", thp_advice[h.advice],
                  (unsigned long long)h.collapsed, (unsigned long long)h.meta, (unsigned long long)h.failed);
        if (classes) {
            stats_put(o, ",\"classes\":[");
            for (unsigned c = 0; c < SC_NSMALL; c++) {
                const bin_stats_t *b = &bins[c];
                stats_put(o,
                          "%s{\"class\":%u,\"size\":%u,\"nmalloc\":%llu,\"nfree\":%llu,\"current\":%llu,"
                          "\"bytes\":%llu,\"slabs\":%llu,\"slabs_made\":%llu,\"slabs_empty\":%llu,"
                          "\"fills\":%llu,\"flushes\":%llu}",
                          c ? "," : "", c, (unsigned)sc_size[c], (unsigned long long)b->nmalloc,
                          (unsigned long long)b->nfree, (unsigned long long)b->live,
                          (unsigned long long)(b->live * sc_size[c]), (unsigned long long)b->nslabs,
                          (unsigned long long)b->nslabs_made, (unsigned long long)b->nslabs_empty,
                          (unsigned long long)b->nfills, (unsigned long long)b->nflushes);
            }
            stats_put(o, "]");
        }
        stats_put(o, "}\n");
        return;
    }
    stats_put(o, "tide statistics: pid %ld, program %s, version %s\n", w.pid, w.program, TIDE_VERSION);
    if (settings) {
        const char *k;
        for (size_t i = 0; (k = conf_key_name(i)) != NULL; i++)
            if (conf_get(k, val, sizeof val) == 0)
                stats_put(o, "  setting %-16s %s\n", k, val);
    }
#define X(f) stats_put(o, "  %-22s %llu\n", #f, (unsigned long long)s.f);
    STATS_FIELDS(X)
#undef X
    for (int a = 0; a < 3; a++)
        stats_put(o, "  madvise %-14s %llu calls, %llu bytes\n", adv[a], (unsigned long long)s.madvise_calls[a],
                  (unsigned long long)s.madvise_bytes[a]);
    /* Huge pages: the mode, and under auto what the system allowed and what was done. */
    static const char *const setting[] = { "never", "madvise", "always" };
    if (h.mode == THP_AUTO && h.active)
        stats_put(o, "  thp                    auto: huge pages (system THP %s), heap advice %s: %llu dense units and %llu "
                     "of metadata collapsed, %llu failed\n",
                  setting[h.setting], thp_advice[h.advice], (unsigned long long)h.collapsed,
                  (unsigned long long)h.meta, (unsigned long long)h.failed);
    else if (h.mode == THP_AUTO)
        stats_put(o, "  thp                    auto: off (%s)\n",
                  h.refused ? "the kernel refused MADV_COLLAPSE" : "the system's THP setting is never");
    else
        stats_put(o, "  thp                    %s\n", h.mode == THP_ON ? "on: MADV_HUGEPAGE on the whole heap" : "off");
    /* Where the heap is, as /proc/PID/maps writes it. */
    unsigned nr = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < nr; i++)
        stats_put(o, "  range %-16u %lx-%lx %s\n", i, (unsigned long)region.ranges[i].pm_lo,
                  (unsigned long)ATOMIC_LOAD(&region.ranges[i].end),
                  s.named ? "[anon:" REGION_NAME "]" : "(unnamed: the kernel has no anon VMA names)");
    if (classes) {
        /* The classes that have had a slab; regions counted as they leave and come back to
         * the slabs (to and from the threads' caches, or the program under tcache:off). */
        stats_put(o, "  %5s %6s %12s %12s %10s %12s %7s %8s %10s %10s\n", "class", "size", "nmalloc", "nfree",
                  "current", "bytes", "slabs", "made", "fills", "flushes");
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            const bin_stats_t *b = &bins[c];
            if (!b->nslabs_made)
                continue;
            stats_put(o, "  %5u %6u %12llu %12llu %10llu %12llu %7llu %8llu %10llu %10llu\n", c, (unsigned)sc_size[c],
                      (unsigned long long)b->nmalloc, (unsigned long long)b->nfree, (unsigned long long)b->live,
                      (unsigned long long)(b->live * sc_size[c]), (unsigned long long)b->nslabs,
                      (unsigned long long)b->nslabs_made, (unsigned long long)b->nfills,
                      (unsigned long long)b->nflushes);
        }
    }
}

void stats_print_cb(void (*write)(void *arg, const char *s), void *arg, const char *opts)
{
    stats_out_t o;
    o.write = write ? write : stats_write_stderr;
    o.arg = arg;
    o.n = 0;
    bool json = false, settings = true, classes = true;
    for (const char *p = opts ? opts : ""; *p; p++) {
        if (*p == 'J')
            json = true;
        else if (*p == 'g')
            settings = false;
        else if (*p == 'b')
            classes = false;
    }
    stats_print_to(&o, json, settings, classes);
    stats_flush(&o);
}

void stats_print(int json) { stats_print_cb(NULL, NULL, json ? "J" : ""); }

/* ---- at start and at exit -------------------------------------------------------------- */

void stats_verbose(void)
{
    stats_who_t w;
    stats_who(&w);
    char line[4096], val[CONF_PREFIX_MAX];
    int n = snprintf(line, sizeof line, "tide: pid %ld, program %s, version %s, settings ", w.pid, w.program,
                     TIDE_VERSION);
    size_t len = n > 0 ? MIN((size_t)n, sizeof line - 1) : 0;
    const char *k;
    for (size_t i = 0; (k = conf_key_name(i)) != NULL; i++) {
        if (conf_get(k, val, sizeof val) != 0)
            continue;
        n = snprintf(line + len, sizeof line - len, "%s%s:%s", i ? "," : "", k, val);
        len = n > 0 ? MIN(len + (size_t)n, sizeof line - 2) : len;
    }
    line[len++] = '\n';
    os_write_stderr(line, len);
}

/* PATTERN with %p replaced by the pid and %% by %, into PATH (CAP bytes): false when it
 * does not fit. */
static bool stats_expand(const char *pattern, long pid, char *path, size_t cap)
{
    size_t n = 0;
    char num[24];
    for (const char *p = pattern; *p; p++) {
        const char *piece = p;
        size_t len = 1;
        if (p[0] == '%' && p[1] == 'p') {
            piece = report_fmt_u64(num, (uint64_t)pid, 0);
            len = strlen(num);
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            p++;
        }
        if (n + len >= cap)
            return false;
        memcpy(path + n, piece, len);
        n += len;
    }
    path[n] = '\0';
    return true;
}

typedef struct stats_file_s {
    int fd;
    int err;
} stats_file_t;

static void stats_write_file(void *arg, const char *s)
{
    stats_file_t *f = arg;
    if (!f->err)
        f->err = os_file_write(f->fd, s, strlen(s));
}

void stats_exit(void)
{
    long mode = ATOMIC_LOAD(&conf.stats);
    if (!mode)
        return;
    const char *opts = mode == 2 ? "J" : "";
    if (!conf.stats_file[0]) {
        stats_print_cb(NULL, NULL, opts);
        return;
    }
    char path[4096], tmp[24];
    stats_file_t f = { .fd = -1, .err = 0 };
    bool expanded = stats_expand(conf.stats_file, os_getpid(), path, sizeof path);
    f.err = expanded ? os_file_create(path, &f.fd) : ENAMETOOLONG;
    if (!f.err) {
        stats_print_cb(stats_write_file, &f, opts);
        int cerr = os_file_close(f.fd);
        f.err = f.err ? f.err : cerr;
    }
    if (f.err) {
        const char *pieces[] = { "cannot write the statistics to ", expanded ? path : conf.stats_file,
                                 ": ", report_strerror(f.err, tmp) };
        report_line(pieces, ARRAY_SIZE(pieces));
    }
}

/* ---- malloc_info ------------------------------------------------------------------------
 *
 * glibc's XML (malloc/malloc.c, __malloc_info) with tide's numbers: a <heap> per arena, whose
 * <sizes> are the regions free in its slabs by class and whose system and address space are
 * its slabs' pages; then the totals: rest adds the page heap's free pages (dirty, lazy and
 * clean) to the free regions' bytes, mmap is the large blocks (from the page heap: tide
 * maps no block by itself), and system and aspace are everything tide has mapped (tide
 * keeps no peak: max is the current size).  fast is 0: the threads' caches are not
 * counted.  The totals are gathered before anything is printed: fprintf may allocate. */
int stats_malloc_info(FILE *fp)
{
    tide_stats_t s;
    stats_collect(&s, false);
    bin_stats_t all[SC_NSMALL];
    arenas_bin_stats(ARENA_ALL, all);
    unsigned long long free_count = 0, free_bytes = 0, small_live = 0;
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        free_count += all[c].nfree_regs;
        free_bytes += all[c].nfree_regs * sc_size[c];
        small_live += all[c].live * sc_size[c];
    }
    fputs("<malloc version=\"1\">\n", fp);
    for (unsigned a = 0; a < narenas; a++) {
        bin_stats_t bins[SC_NSMALL];
        arenas_bin_stats(a, bins);
        unsigned long long count = 0, bytes = 0, system = 0;
        fprintf(fp, "<heap nr=\"%u\">\n<sizes>\n", a);
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            const bin_stats_t *b = &bins[c];
            system += b->nslabs * sc_slab_pages[c] * PAGE;
            if (!b->nfree_regs)
                continue;
            count += b->nfree_regs;
            bytes += b->nfree_regs * sc_size[c];
            fprintf(fp, "  <size from=\"%u\" to=\"%u\" total=\"%llu\" count=\"%llu\"/>\n",
                    c ? (unsigned)sc_size[c - 1] + 1 : 1, (unsigned)sc_size[c],
                    (unsigned long long)(b->nfree_regs * sc_size[c]), (unsigned long long)b->nfree_regs);
        }
        fprintf(fp,
                "</sizes>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
                "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
                "<system type=\"current\" size=\"%llu\"/>\n"
                "<system type=\"max\" size=\"%llu\"/>\n"
                "<aspace type=\"total\" size=\"%llu\"/>\n"
                "<aspace type=\"mprotect\" size=\"%llu\"/>\n"
                "</heap>\n",
                count, bytes, system, system, system, system);
    }
    unsigned long long mapped = s.mapped;
    fprintf(fp,
            "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"%llu\" size=\"%llu\"/>\n"
            "<total type=\"mmap\" count=\"%llu\" size=\"%llu\"/>\n"
            "<system type=\"current\" size=\"%llu\"/>\n"
            "<system type=\"max\" size=\"%llu\"/>\n"
            "<aspace type=\"total\" size=\"%llu\"/>\n"
            "<aspace type=\"mprotect\" size=\"%llu\"/>\n"
            "</malloc>\n",
            free_count, free_bytes + s.dirty + s.lazy + s.clean,
            (unsigned long long)(s.nmalloc_large - s.nfree_large), s.allocated > small_live ? (unsigned long long)s.allocated - small_live : 0,
            mapped, mapped, mapped, mapped);
    return 0;
}
