/* SPDX-License-Identifier: MIT */
/* prof_dump.c - the heap profiler's dumps: the legacy heap-profile text (a header, a line
 * a stack, /proc/self/maps), written with raw system calls through a static buffer under
 * prof_lock, the shards' counts summed under their locks first; tide_prof_dump, the
 * interval's and the final dumps. */
#include "prof_internal.h"

#include <errno.h>
#include <string.h>

#include "conf.h"
#include "os.h"
#include "report.h"

uint64_t prof_ndumps; /* atomic */
static uint64_t prof_seq, prof_seq_kind[3]; /* atomic */

typedef struct prof_out_s {
    int fd, err;
    size_t n;
    char buf[16384];
} prof_out_t;

static prof_out_t prof_out; /* under prof_lock */

/* Each stack's counts summed over the shards into its sum, and all of them into *TOTAL, at
 * one instant (prof_lock held: the table stays as it is; the shards' locks are taken only
 * for the sums, so that samples go on while the dump is written). */
static void prof_sum(prof_counts_t *total)
{
    prof_shards_lock();
    *total = (prof_counts_t){ 0 };
    for (unsigned b = 0; b < PROF_BUCKETS; b++) {
        for (prof_stack_t *s = prof_buckets[b]; s; s = s->next) {
            prof_counts_t sum = { 0 };
            for (unsigned k = 0; k < PROF_SHARDS; k++) {
                const prof_counts_t *chunk = prof_shards[k].chunk[s->id / PROF_CHUNK_STACKS];
                if (!chunk)
                    continue;
                const prof_counts_t *c = &chunk[s->id % PROF_CHUNK_STACKS];
                sum.live_count += c->live_count;
                sum.live_bytes += c->live_bytes;
                sum.alloc_count += c->alloc_count;
                sum.alloc_bytes += c->alloc_bytes;
            }
            s->sum = sum;
            total->live_count += sum.live_count;
            total->live_bytes += sum.live_bytes;
            total->alloc_count += sum.alloc_count;
            total->alloc_bytes += sum.alloc_bytes;
        }
    }
    prof_shards_unlock();
}

static void prof_flush(prof_out_t *o)
{
    if (!o->err && o->n)
        o->err = os_file_write(o->fd, o->buf, o->n);
    o->n = 0;
}

static void prof_put(prof_out_t *o, const char *s)
{
    size_t l = strlen(s);
    if (o->n + l > sizeof o->buf)
        prof_flush(o);
    memcpy(o->buf + o->n, s, l);
    o->n += l;
}

static void prof_put_u64(prof_out_t *o, uint64_t v, int hex)
{
    char tmp[24];
    prof_put(o, report_fmt_u64(tmp, v, hex));
}

static uint64_t prof_count_of(uint64_t fx) { return (fx + PROF_FX / 2) / PROF_FX; }

/* "N: BYTES [N: BYTES] @": the live, then the cumulative, weighted counts. */
static void prof_put_counts(prof_out_t *o, uint64_t lc, uint64_t lb, uint64_t ac, uint64_t ab)
{
    prof_put_u64(o, prof_count_of(lc), 0);
    prof_put(o, ": ");
    prof_put_u64(o, lb, 0);
    prof_put(o, " [");
    prof_put_u64(o, prof_count_of(ac), 0);
    prof_put(o, ": ");
    prof_put_u64(o, ab, 0);
    prof_put(o, "] @");
}

static int prof_write(const char *path)
{
    prof_out_t *o = &prof_out;
    int fd;
    int err = os_file_create(path, &fd);
    if (err)
        return err;
    o->fd = fd;
    o->err = 0;
    o->n = 0;
    /* The weights are unbiased estimates already: "heapprofile" tells pprof and jeprof
     * not to scale the counts again. */
    prof_counts_t t;
    prof_sum(&t);
    prof_put(o, "heap profile: ");
    prof_put_counts(o, t.live_count, t.live_bytes, t.alloc_count, t.alloc_bytes);
    prof_put(o, " heapprofile\n");
    for (unsigned b = 0; b < PROF_BUCKETS; b++) {
        for (const prof_stack_t *s = prof_buckets[b]; s; s = s->next) {
            prof_put_counts(o, s->sum.live_count, s->sum.live_bytes, s->sum.alloc_count, s->sum.alloc_bytes);
            for (unsigned i = 0; i < s->depth; i++) {
                prof_put(o, " ");
                /* pprof takes the first address as is and the others as return
                 * addresses (it subtracts one): all of ours are return addresses. */
                prof_put_u64(o, i == 0 ? s->pc[i] - 1 : s->pc[i], 1);
            }
            prof_put(o, "\n");
        }
    }
    prof_put(o, "\nMAPPED_LIBRARIES:\n");
    prof_flush(o);
    if (!o->err)
        o->err = os_copy_maps(fd);
    err = o->err;
    int cerr = os_file_close(fd);
    return err ? err : cerr;
}

int prof_dump(const char *path)
{
    if (!ATOMIC_LOAD(&conf.prof) || !ATOMIC_LOAD_ACQ(&prof_set.ready))
        return ENOENT;
    if (!path)
        return prof_dump_auto(2, false);
    lock_acquire(&prof_lock);
    int err = prof_write(path);
    lock_release(&prof_lock);
    if (!err)
        ATOMIC_ADD(&prof_ndumps, 1);
    return err;
}

/* A dump to PREFIX.PID.SEQ.KIND.heap, KIND f, iN or mN (jemalloc's names); a failure is
 * a warning when WARN.  0 or an errno value. */
int prof_dump_auto(unsigned kind, bool warn)
{
    static const char kinds[] = { 'f', 'i', 'm' };
    char path[CONF_PREFIX_MAX + 96], tmp[24];
    uint64_t seq = ATOMIC_ADD(&prof_seq, 1), kseq = ATOMIC_ADD(&prof_seq_kind[kind], 1);
    size_t n = strlen(conf.prof_prefix);
    memcpy(path, conf.prof_prefix, n);
    const char *parts[] = { ".", report_fmt_u64(tmp, (uint64_t)os_getpid(), 0), NULL };
    for (unsigned i = 0; parts[i]; i++) {
        memcpy(path + n, parts[i], strlen(parts[i]));
        n += strlen(parts[i]);
    }
    path[n++] = '.';
    report_fmt_u64(tmp, seq, 0);
    memcpy(path + n, tmp, strlen(tmp));
    n += strlen(tmp);
    path[n++] = '.';
    path[n++] = kinds[kind];
    if (kind) {
        report_fmt_u64(tmp, kseq, 0);
        memcpy(path + n, tmp, strlen(tmp));
        n += strlen(tmp);
    }
    memcpy(path + n, ".heap", sizeof ".heap");
    lock_acquire(&prof_lock);
    int err = prof_write(path);
    lock_release(&prof_lock);
    if (err) {
        if (warn) {
            const char *pieces[] = { "cannot write the heap profile ", path, ": ", report_strerror(err, tmp) };
            report_line(pieces, ARRAY_SIZE(pieces));
        }
        return err;
    }
    ATOMIC_ADD(&prof_ndumps, 1);
    return 0;
}
