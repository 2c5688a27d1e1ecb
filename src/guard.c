/* SPDX-License-Identifier: MIT */
/* guard.c - what guard pages are for (guard.h): the quarantine of freed blocks, the sampled
 * blocks and their records, and the SIGSEGV handler that explains a fault on them. */
#include "guard.h"

#include <signal.h>
#include <string.h>

#include "list.h"
#include "lock.h"
#include "meta.h"
#include "os.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"
#include "size_class_table.h"

#define GUARD_SLOTS 512   /* sampled blocks live or held at once, at most */
#define GUARD_BT_DEPTH 24 /* frames kept of a sampled block's malloc and free */

enum { REC_FREE = 0, REC_LIVE, REC_FREED };

/* A sampled block, in the metadata range (no overflow of a block reaches it). */
typedef struct guard_rec_s {
    uintptr_t ptr;
    size_t size;    /* as asked for */
    uint32_t state; /* REC_*: the handler reads it */
    uint32_t next;  /* a free slot: the next free one's index + 1 */
    int nalloc, nfree;
    void *alloc_bt[GUARD_BT_DEPTH];
    void *free_bt[GUARD_BT_DEPTH];
} guard_rec_t;

/* Held extents (their lru node), oldest first, and their bytes, guard pages included. */
typedef struct guard_queue_s {
    list_node_t fifo;
    size_t bytes;
} guard_queue_t;

static lock_t guard_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_GUARD); /* the queues and the free slots */
static guard_queue_t queue_large = { { &queue_large.fifo, &queue_large.fifo }, 0 };
static guard_queue_t queue_sampled = { { &queue_sampled.fifo, &queue_sampled.fifo }, 0 };
static guard_rec_t *guard_recs; /* GUARD_SLOTS of them, from the metadata range at the first sample */
static uint32_t guard_free_slot; /* the first free slot's index + 1; 0: none */
static uint32_t guard_nused;     /* slots handed out at least once */
static uint64_t guard_nsampled, guard_nlive; /* atomic */
static int guard_handler_on, guard_unwinder_on; /* atomic */
static struct sigaction guard_prev; /* the action the handler chains to */

/* Each thread's sampling state: bytes left in its interval, its generator, and a flag
 * against sampling the allocations backtrace() itself makes. */
typedef struct guard_tls_s {
    int64_t left;
    uint64_t rng;
    uint8_t busy;
} guard_tls_t;
static __thread guard_tls_t guard_tls __attribute__((tls_model("initial-exec")));

/* ---- the quarantine --------------------------------------------------------------- */

static guard_rec_t *rec_of(const extent_t *e) { return &guard_recs[e->sample - 1]; }

static void slot_put(guard_rec_t *rec)
{
    lock_acquire(&guard_lock);
    ATOMIC_STORE(&rec->state, REC_FREE);
    rec->next = guard_free_slot;
    guard_free_slot = (uint32_t)(rec - guard_recs) + 1;
    lock_release(&guard_lock);
}

/* Held extent E back to the page heap, and its record (a sampled one) to the free slots. */
static void release(extent_t *e)
{
    guard_rec_t *rec = e->sample ? rec_of(e) : NULL;
    extent_release_held(e);
    if (rec)
        slot_put(rec);
}

/* The oldest of Q go back while Q holds more than guard_quarantine bytes.  Lock held; it
 * is released and taken again around each. */
static void queue_trim(guard_queue_t *q)
{
    for (;;) {
        list_node_t *l = q->bytes > (size_t)ATOMIC_LOAD(&conf.guard_quarantine) ? list_first(&q->fifo) : NULL;
        if (!l)
            break;
        extent_t *x = container_of(l, extent_t, lru);
        list_remove(l);
        ATOMIC_STORE(&q->bytes, q->bytes - extent_size(x));
        /* The system call and the page heap's lock outside this one. */
        lock_release(&guard_lock);
        release(x);
        lock_acquire(&guard_lock);
    }
}

/* Hold E (all its pages guard pages already) at the end of Q, then trim Q (E itself goes
 * back at once if it is more than the bound). */
static void queue_push(guard_queue_t *q, extent_t *e)
{
    extent_hold(e);
    lock_acquire(&guard_lock);
    list_push_back(&q->fifo, &e->lru);
    ATOMIC_STORE(&q->bytes, q->bytes + extent_size(e));
    queue_trim(q);
    lock_release(&guard_lock);
}

void guard_free_large(extent_t *e, extent_hint_t *hint)
{
    size_t bound = (size_t)ATOMIC_LOAD(&conf.guard_quarantine);
    /* All of the extent, its padding too: the pages come back as clean (zero) ones. */
    if (e->guard && extent_size(e) <= bound && extent_guard_install(e->addr, extent_size(e))) {
        queue_push(&queue_large, e);
        return;
    }
    extent_free(e, hint);
    /* The bound may have shrunk since the last block was held (a racy look first: with
     * guard off this costs no lock). */
    if (ATOMIC_LOAD(&queue_large.bytes) > bound) {
        lock_acquire(&guard_lock);
        queue_trim(&queue_large);
        lock_release(&guard_lock);
    }
}

/* ---- sampling ------------------------------------------------------------------------- */

static uint64_t guard_rand(guard_tls_t *t)
{
    /* xorshift64* */
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 0x2545F4914F6CDD1Dull;
}

/* -ln(u) for u uniform in (0, 1]: an exponential variate of mean 1, without libm. */
static double neg_log_uniform(uint64_t r)
{
    double u = (double)((r >> 11) + 1) * 0x1p-53;
    uint64_t bits;
    memcpy(&bits, &u, sizeof bits);
    int ex = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
    double m;
    memcpy(&m, &bits, sizeof m); /* u = m * 2^ex, m in [1, 2) */
    double s = (m - 1) / (m + 1), s2 = s * s; /* ln m = 2 atanh(s), s < 1/3 */
    double ln_m = 2 * s * (1 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 / 9))));
    return -(ex * 0.69314718055994530942 + ln_m);
}

/* The next interval: exponential, of mean guard_sample bytes. */
static int64_t next_interval(guard_tls_t *t)
{
    double x = neg_log_uniform(guard_rand(t)) * (double)ATOMIC_LOAD(&conf.guard_sample);
    return x < 1 ? 1 : x > 0x1p62 ? (int64_t)1 << 62 : (int64_t)x;
}

static guard_tls_t *tls(void)
{
    guard_tls_t *t = &guard_tls;
    if (unlikely(!t->rng)) {
        t->rng = os_random_seed() | 1;
        t->left = next_interval(t);
    }
    return t;
}

void guard_sample_charge(size_t bytes) { tls()->left -= (int64_t)MIN(bytes, (size_t)1 << 62); }

unsigned guard_sample_batch(size_t size, unsigned want)
{
    int64_t left = tls()->left;
    int64_t k = left > (int64_t)size ? (left - 1) / (int64_t)size : 1;
    return k < (int64_t)want ? (unsigned)k : want;
}

/* A free record slot: a new one, a recycled one, or the oldest held sampled block's
 * (given back first).  NULL when all are live.  No lock held. */
static guard_rec_t *slot_take(void)
{
    lock_acquire(&guard_lock);
    if (!guard_recs)
        guard_recs = meta_alloc(GUARD_SLOTS * sizeof *guard_recs);
    guard_rec_t *rec = NULL;
    extent_t *evict = NULL;
    if (!guard_recs) {
        /* out of metadata: no sampling */
    } else if (guard_free_slot) {
        rec = &guard_recs[guard_free_slot - 1];
        guard_free_slot = rec->next;
    } else if (guard_nused < GUARD_SLOTS) {
        rec = &guard_recs[guard_nused++];
    } else if (!list_empty(&queue_sampled.fifo)) {
        evict = container_of(list_first(&queue_sampled.fifo), extent_t, lru);
        list_remove(&evict->lru);
        ATOMIC_STORE(&queue_sampled.bytes, queue_sampled.bytes - extent_size(evict));
        rec = rec_of(evict);
        ATOMIC_STORE(&rec->state, REC_FREE);
    }
    lock_release(&guard_lock);
    if (evict)
        extent_release_held(evict);
    return rec;
}

void *guard_sample_alloc(size_t size)
{
    guard_tls_t *t = tls();
    size_t usable = ALIGN_UP(MAX(size, (size_t)1), QUANTUM);
    /* Not this one: the interval goes past it. */
    if (t->left > (int64_t)usable || t->busy)
        return NULL;
    t->left = next_interval(t);
    if (!extent_guards_work())
        return NULL;
    t->busy = 1;
    void *p = NULL;
    guard_rec_t *rec = slot_take();
    if (rec) {
        extent_t *e = extent_alloc_sampled(pages_of(usable), (unsigned)(rec - guard_recs) + 1);
        if (e) {
            rec->ptr = extent_guard_page(e) - usable;
            rec->size = size;
            rec->nfree = 0;
            rec->nalloc = os_backtrace(rec->alloc_bt, GUARD_BT_DEPTH);
            ATOMIC_STORE_REL(&rec->state, REC_LIVE);
            ATOMIC_ADD(&guard_nsampled, 1);
            ATOMIC_ADD(&guard_nlive, 1);
            p = (void *)rec->ptr;
        } else {
            slot_put(rec);
        }
    }
    t->busy = 0;
    return p;
}

uintptr_t guard_sample_ptr(const extent_t *e) { return rec_of(e)->ptr; }

size_t guard_sample_usable(const extent_t *e) { return extent_block_size(e) - (rec_of(e)->ptr & PAGE_MASK); }

void guard_sample_free(extent_t *e)
{
    guard_rec_t *rec = rec_of(e);
    guard_tls_t *t = tls();
    t->busy = 1;
    rec->nfree = os_backtrace(rec->free_bt, GUARD_BT_DEPTH);
    t->busy = 0;
    ATOMIC_STORE_REL(&rec->state, REC_FREED);
    ATOMIC_SUB(&guard_nlive, 1);
    if (!extent_guard_install(e->addr, extent_size(e))) {
        extent_free(e, NULL);
        slot_put(rec);
        return;
    }
    queue_push(&queue_sampled, e);
}

/* ---- the SIGSEGV handler ------------------------------------------------------------- */

/* Report a fault at A when it hit a guard page tide made; false when it did not.
 * Async-signal-safe: lock-free reads of the page map and the descriptors (never
 * unmapped), formatting by hand, write(2) (and backtrace_symbols_fd). */
static bool guard_explain(uintptr_t a)
{
    const range_t *r = region_range_of(a);
    if (!r)
        return false;
    pm_entry_t entry = pm_read(r, a);
    if (!pm_is_guard(entry))
        return false;
    const volatile extent_t *e = pm_desc(entry);
    unsigned state = e->state, cls = e->cls;
    uintptr_t lo = e->addr, hi = lo + (e->npages << LG_PAGE), gp = lo + ((e->npages - e->guard) << LG_PAGE);
    bool held = state == EXTENT_HELD;
    if (a < lo || a >= hi ||
        (!held && !((state == EXTENT_LARGE || state == EXTENT_SLAB) && e->guard && a >= gp && a < gp + PAGE)))
        return false;
    const guard_rec_t *rec = e->sample && guard_recs ? &guard_recs[e->sample - 1] : NULL;
    uintptr_t block;
    size_t size;
    if (rec && ATOMIC_LOAD(&rec->state) != REC_FREE) {
        block = rec->ptr;
        size = rec->size;
    } else if (state == EXTENT_SLAB && cls < SC_NSMALL) {
        rec = NULL;
        size = sc_size[cls]; /* the last region: its overflow ends here */
        block = lo + (sc_nregs[cls] - 1u) * size;
    } else {
        rec = NULL;
        block = lo;
        size = (e->npages - e->guard) << LG_PAGE;
    }
    char at[24], b[24], n[24];
    const char *line[] = { "SIGSEGV at ", report_fmt_u64(at, a, 1), held ? ": use after free of" : ": overflow past",
                           " the block ", report_fmt_u64(b, block, 1), " of ", report_fmt_u64(n, size, 0), " bytes" };
    report_line(line, ARRAY_SIZE(line));
    if (!rec) {
        static const char *const none[] = { "no backtraces: the block was not sampled (guard_sample)" };
        report_line(none, 1);
        return true;
    }
    static const char *const alloc[] = { "the block was allocated at:" };
    report_line(alloc, 1);
    os_backtrace_print(rec->alloc_bt, rec->nalloc);
    if (held && rec->nfree) {
        static const char *const freed[] = { "and freed at:" };
        report_line(freed, 1);
        os_backtrace_print(rec->free_bt, rec->nfree);
    }
    return true;
}

/* Hand a fault that is not tide's to the action that was there before. */
static void guard_chain(int sig, siginfo_t *si, void *uc)
{
    if (guard_prev.sa_flags & SA_SIGINFO) {
        guard_prev.sa_sigaction(sig, si, uc);
        return;
    }
    if (guard_prev.sa_handler != SIG_DFL && guard_prev.sa_handler != SIG_IGN) {
        guard_prev.sa_handler(sig);
        return;
    }
    /* The default action (or none): a fault recurs when the handler returns, a signal
     * someone sent is sent again. */
    os_signal_restore(sig, &guard_prev);
    if (!si || si->si_code <= 0)
        os_raise(sig);
}

static void guard_segv(int sig, siginfo_t *si, void *uc)
{
    /* si_code > 0: the kernel's, for an access (kill() and sigqueue() give <= 0). */
    if (si && si->si_code > 0 && guard_explain((uintptr_t)si->si_addr)) {
        /* Returning re-executes the access: it faults again under the previous action. */
        os_signal_restore(sig, &guard_prev);
        return;
    }
    guard_chain(sig, si, uc);
}

void guard_boot(void)
{
    if (!ATOMIC_LOAD(&conf.guard) && !guard_sampling())
        return;
    /* The unwinder is found (which may load it, and allocate) now, not inside a malloc. */
    if (guard_sampling() && !__atomic_exchange_n(&guard_unwinder_on, 1, __ATOMIC_RELAXED)) {
        guard_tls.busy = 1;
        os_unwind_boot();
        guard_tls.busy = 0;
    }
    if (!__atomic_exchange_n(&guard_handler_on, 1, __ATOMIC_ACQ_REL))
        os_signal_install(SIGSEGV, guard_segv, &guard_prev);
}

void guard_stats(guard_stats_t *out)
{
    out->sampled = ATOMIC_LOAD(&guard_nsampled);
    out->sampled_live = ATOMIC_LOAD(&guard_nlive);
}

void guard_locks(lock_op_t op) { lock_apply(&guard_lock, op); }
