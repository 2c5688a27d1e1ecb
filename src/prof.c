/* SPDX-License-Identifier: MIT */
/* prof.c - the sampling heap profiler: the countdown, call stacks, records, dumps.
 *
 * State: a table of distinct call stacks (hashed, chained, never freed), carved under
 * prof_lock from the metadata range (meta.h), apart from the heap, and read without it; a
 * record of each live sampled block (its stack, sizes and weight), in the block's extent
 * (extent_prof_t), or for a sample kept in its slab in a table apart (prof_slab_lock);
 * and the weighted live and cumulative counts of each stack, kept apart in PROF_SHARDS
 * shards, each with its own lock, of which a thread uses one.  A sample and a sampled
 * block's free (whichever thread frees it) add to and take from the counts of the calling
 * thread's shard alone, so two threads that sample touch no line the other writes (with
 * one lock and one set of counts for all, those lines passed between the CPUs at every
 * sample: at prof_sample:16k, bench/larson's samples took about twice the time they take
 * now).  A shard's count of a stack may go below zero; their sum over the shards, which a
 * dump takes, is the stack's.  Weights are fixed-point integers (counts in 1/1024ths),
 * rounded once when a sample is recorded, so that a free takes back exactly what its
 * sample added.  Locks: prof_lock (the table; a dump) before the shards' (in their order),
 * then prof_slab_lock, meta's last; a sample or a free holds one shard's lock at a time,
 * and takes prof_lock only to add a stack, holding no other, so nothing here can deadlock
 * with an allocation, and a fork waits for all of them (init.c takes them before the page
 * heap's). */
#include "prof.h"

#include <errno.h>
#include <string.h>

#include "conf.h"
#include "large.h"
#include "lock.h"
#include "meta.h"
#include "os.h"
#include "report.h"

#define PROF_BUCKETS (1u << 14)
#define PROF_STACK_CHUNK (64 * KiB)
#define PROF_FX 1024u /* fixed-point unit of the weighted counts */
/* A chain of frame pointers this long is taken as real; a shorter one that breaks
 * (frames without frame pointers) goes to the unwinder. */
#define PROF_MIN_WALK 3
/* How a sample's stack was found (prof_bt_t.how). */
#define PROF_WALKED 0
#define PROF_RECOGNISED 1
#define PROF_UNWOUND 2

/* Weighted counts of the samples of one stack (or of all): counts in 1/PROF_FX.  A shard's
 * may wrap below zero (unsigned: defined); their sum is right. */
typedef struct prof_counts_s {
    uint64_t live_count, live_bytes;
    uint64_t alloc_count, alloc_bytes; /* the same, cumulative */
} prof_counts_t;

typedef struct prof_stack_s {
    struct prof_stack_s *next; /* in its bucket; set before the entry is published */
    uint64_t hash;
    uint32_t id;               /* where its counts are in each shard */
    uint32_t depth;
    prof_counts_t sum;         /* a dump's sum of the shards' counts (prof_lock) */
    uintptr_t pc[];
} prof_stack_t;

_Static_assert(sizeof(extent_prof_t) <= sizeof(((extent_t *)0)->bitmap), "a record does not grow the extent");

static lock_t prof_lock = LOCK_INITIALIZER(LOCK_RANK_PROF); /* the table's growth, a dump */
/* What a sample reads of the settings, in one line of its own: the conf line is not
 * touched by samples (prof and the prof keys are fixed at start-up). */
static struct {
    int ready;         /* atomic: booted, sampling may start */
    double rate;       /* prof_sample */
    uint64_t interval; /* prof_interval */
} TIDE_ALIGNED_CL prof_set;
static prof_stack_t **prof_buckets; /* heads: atomic (read without prof_lock) */
static uintptr_t prof_stack_cur, prof_stack_end;
static uint64_t prof_interval_mark; /* atomic: live bytes at the last interval dump */
static uint64_t prof_nstacks;       /* under prof_lock */
static uint64_t prof_ndumps;        /* atomic */
static uint64_t prof_seq, prof_seq_kind[3];                             /* atomic */

/* Freed blocks of the smallest large class that small samples were promoted to, kept for
 * the next ones (up to this many a shard): a sample's block then comes and goes with the
 * lock the record takes anyway.  Without them, a block freed by another thread than the
 * one that sampled it went to that thread's cache, and the next sample of the first thread
 * took one from the page heap, under its lock, often in pages never touched before.  Few:
 * what they hold is neither live nor purged until malloc_trim (prof_trim). */
#define PROF_SPARE_MAX 8

/* A shard's counts of the stacks come in chunks of PROF_CHUNK_STACKS, made when it first
 * counts one of them: up to PROF_MAX_CHUNKS * PROF_CHUNK_STACKS stacks (a sample of a
 * stack beyond is dropped, as when the metadata runs out). */
#define PROF_SHARDS 8
#define PROF_CHUNK_STACKS 512u
#define PROF_MAX_CHUNKS 2048u

/* What a sample or a sampled free touches, in two lines: the first the lock, the counts'
 * chunks and the figures, the second the kept blocks.  The totals of the dump's header are
 * the sum of the stacks' counts; a shard keeps only its live bytes, for prof_interval. */
typedef struct prof_shard_s {
    lock_t lock;
    unsigned nspare;        /* atomic: peeked without the lock */
    prof_counts_t **chunk;  /* PROF_MAX_CHUNKS of them, from the metadata at start-up */
    uint64_t live_bytes;    /* atomic: prof_interval peeks at it */
    uint64_t nlive, ndropped;
    uint64_t nfound[3];     /* samples' stacks by how they were found (their sum: samples) */
    extent_t *spare[PROF_SPARE_MAX];
} TIDE_ALIGNED_CL prof_shard_t;
/* (Not in debug builds, whose locks carry their rank.) */
_Static_assert(sizeof(prof_shard_t) == 2 * TIDE_CACHELINE || sizeof(lock_t) > 4, "a shard is two lines");

static prof_shard_t prof_shards[PROF_SHARDS] = { [0 ... PROF_SHARDS - 1] = {
                                                     .lock = LOCK_INITIALIZER(LOCK_RANK_PROF_SHARD) } };
static unsigned prof_next_shard; /* atomic: the shard of the next thread that samples */

/* A stack unwound once, kept to be recognised again.  Unwinding without frame pointers
 * (libgcc's unwinder) costs some 20,000 instructions, 8 % of a program that
 * allocates 512 KiB blocks at full speed (ebizzy).  A call from the same place returns
 * to the same address with the same stack pointer; if every return address of the
 * frames above is still where the unwind found it (frame I's just below frame I-1's
 * canonical frame address), each frame has the same size and caller as before, and the
 * stack is the one unwound then.  Frames whose size varies (alloca) move the slots and
 * miss. */
#define PROF_CACHE_DEPTH 32
#define PROF_CACHE_WAYS 2
typedef struct prof_cached_s {
    uintptr_t frame;                  /* the entry's frame record, 0: empty */
    prof_stack_t *stack;              /* its entry in the table, once found (NULL: not yet) */
    struct prof_counts_s *counts;     /* the thread's shard's counts of it, once made */
    uintptr_t pc[PROF_CACHE_DEPTH];   /* pc[0] = the return address at frame + 8 */
    uint16_t slot[PROF_CACHE_DEPTH];  /* where pc[i] (i > 0) is: frame + 8 * slot[i] */
    uint8_t n;
} prof_cached_t;

#define PROF_DRAWS 16
typedef struct prof_tls_s {
    uint64_t rng;
    uintptr_t stack_lo, stack_hi; /* the thread's stack VMA, as last looked up */
    uint64_t armed_classes;       /* each class's countdown holds a drawn interval (a bit each) */
    uint8_t armed;                /* the same for the byte countdown */
    uint8_t busy;                 /* sampling: allocations made meanwhile are not sampled */
    uint8_t cached_next;          /* the way to replace next */
    uint8_t ndraws;               /* how many of draws[] are left, used from the end */
    uint8_t shard;                /* the thread's shard, + 1 (0: none yet) */
    double draws[PROF_DRAWS];     /* exponentials of mean 1, drawn ahead */
    prof_cached_t cached[PROF_CACHE_WAYS];
} prof_tls_t;
static __thread prof_tls_t prof_tls __attribute__((tls_model("initial-exec")));

/* ---- numbers: libc and pthreads only, so no libm --------------------------------- */

/* A sample pays for its interval (a logarithm) and, when its size is not a class's, its
 * weight (an exponential): fixed polynomials, with no division in a loop (the series
 * summed term by term cost 150-170 instructions each, as much as the rest of a sample). */
TIDE_SAMPLE_PATH double prof_ln(double x) /* x > 0, normal */
{
    union {
        double d;
        uint64_t u;
    } v = { x };
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
    double m = v.d; /* [1, 2) */
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* ln m = 2 atanh(z) = 2z (1 + z^2/3 + z^4/5 + ...), |z| <= 0.172: six terms leave out
     * less than 1e-10 of it, far below what an interval's length needs.  Summed in pairs
     * (Estrin's scheme), not in one chain of twelve multiply-adds: each sample waits for
     * this, and the chain took longer than the rest of the sample's arithmetic. */
    double z = (m - 1) / (m + 1), z2 = z * z, z4 = z2 * z2;
    double s01 = 1 + z2 * (1.0 / 3), s23 = 1.0 / 5 + z2 * (1.0 / 7), s45 = 1.0 / 9 + z2 * (1.0 / 11);
    double s = s01 + z4 * (s23 + z4 * s45);
    return 2 * z * s + e * 0.6931471805599453;
}

/* 2^(-j/32), j = 0..31. */
static const double prof_exp2_neg32[32] = {
    1.0, 0.9785720620877001, 0.9576032806985737, 0.93708381705515,
    0.9170040432046712, 0.8973545375015536, 0.8781260801866497, 0.859309649061239,
    0.8408964152537145, 0.8228777390769825, 0.8052451659746271, 0.7879904225539432,
    0.7711054127039704, 0.7545822137967114, 0.7384130729697497, 0.7225904034885233,
    0.7071067811865476, 0.691954940981916, 0.6771277734684463, 0.6626183215798707,
    0.6484197773255048, 0.6345254785958666, 0.620928906036742, 0.6076236799902345,
    0.5946035575013605, 0.5818624293887887, 0.5693943173783458, 0.5571933712979462,
    0.5452538663326288, 0.5335702003384118, 0.5221368912137069, 0.5109485743270583,
};

/* 1 - exp(-x), x >= 0, to within 1e-13 of itself (1.2e-14 at worst, test/unit/prof_math),
 * tiny x too: the weight of a block whose size is no class's.  Seven terms of a series in
 * something below 1/32, where the series in x itself took up to eighteen terms (some 100
 * instructions a sample of a large block, a sixth of what the sample cost). */
TIDE_SAMPLE_PATH double prof_one_minus_exp_neg(double x)
{
    if (!(x < 40))
        return 1; /* exp(-40) is below half an ulp of 1 */
    if (x < 1.0 / 32) {
        /* x (1 - x/2! + x^2/3! - ... + x^6/7!): what is left out is below x^7/8!, 1e-15 of it. */
        double y = -x;
        double s = (((((y * (1.0 / 5040) + 1.0 / 720) * y + 1.0 / 120) * y + 1.0 / 24) * y + 1.0 / 6) * y + 0.5) * y +
                   1;
        return x * s;
    }
    /* exp(-x) = 2^-(n div 32) 2^-((n mod 32)/32) exp(-f), n = floor(32 x / ln 2), f < ln 2 / 32:
     * the first factor in the exponent, the second from the table, the third in seven
     * terms (what is left out is below f^7/7!, 5e-16). */
    int n = (int)(x * (32 / 0.6931471805599453));
    double y = n * 0.02166084939249829 - x; /* -f */
    double e = (((((y * (1.0 / 720) + 1.0 / 120) * y + 1.0 / 24) * y + 1.0 / 6) * y + 0.5) * y + 1) * y + 1;
    union {
        double d;
        uint64_t u;
    } scale = { .u = (uint64_t)(1023 - (n >> 5)) << 52 };
    return 1 - e * prof_exp2_neg32[n & 31] * scale.d;
}

TIDE_SAMPLE_PATH static uint64_t prof_random(void)
{
    prof_tls_t *t = &prof_tls;
    if (!t->rng)
        t->rng = (os_random_seed() ^ ((uintptr_t)t * 0x9E3779B97F4A7C15u)) | 1;
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 0x2545F4914F6CDD1Du;
}

/* An exponentially distributed number of mean 1.  They are drawn PROF_DRAWS at a time:
 * between two samples the program runs long enough to evict this code and its
 * constants, and only one sample in PROF_DRAWS brings them back (at the default rate, a
 * countdown's running out and its draw, with no sample taken, took bench/pairs' batch
 * 2 % longer when each draw was made as it was needed). */
TIDE_SAMPLE_PATH static double prof_exponential(void)
{
    prof_tls_t *t = &prof_tls;
    if (unlikely(t->ndraws == 0)) {
        for (unsigned i = 0; i < PROF_DRAWS; i++) {
            double u = (double)((prof_random() >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
            t->draws[i] = -prof_ln(u);
        }
        t->ndraws = PROF_DRAWS;
    }
    return t->draws[--t->ndraws];
}

/* An exponentially distributed interval of mean prof_sample bytes. */
TIDE_SAMPLE_PATH static int64_t prof_draw(void)
{
    double d = prof_exponential() * prof_set.rate;
    return d < 1 ? 1 : d > 4e18 ? (int64_t)4e18 : (int64_t)d;
}

TIDE_SAMPLE_PATH static double prof_probability(size_t size)
{
    double p = prof_one_minus_exp_neg((double)size / prof_set.rate);
    return p > 1e-300 ? p : 1e-300;
}

/* A record's weight in 1/PROF_FX blocks, from the inverse INV of its probability, rounded
 * once when it is recorded: the free takes back the same integers, with no floating point.
 * Through int64_t, one instruction where uint64_t takes a test and a branch: it stays below
 * 2^51 (INV < 2^41 at the largest prof_sample, 2^40). */
static uint64_t prof_count_fx(double inv) { return (uint64_t)(int64_t)(PROF_FX * inv + 0.5); }

/* For each small class, set at start-up (prof_sample does not change after): prof_sample over
 * its size, and the inverse of the probability that a block of its size is sampled, so
 * that a sample by a class's countdown computes neither an exponential nor a division;
 * side by side, since a sample reads both. */
static struct {
    double scale;
    uint64_t count_fx; /* the inverse, as a record's weight (prof_count_fx) */
} prof_class[SC_NSMALL];

/* The small class of exactly SIZE bytes, or SC_NSMALL. */
TIDE_SAMPLE_PATH static unsigned prof_class_sized(size_t size)
{
    if (size > SC_LOOKUP_MAX)
        return SC_NSMALL;
    unsigned c = sc_lookup[(size + 15) >> 4];
    return c < SC_NSMALL && sc_size[c] == size ? c : SC_NSMALL;
}

/* ---- the countdown ---------------------------------------------------------------- */

TIDE_SAMPLE_PATH bool prof_fire(void)
{
    tcache_t *tc = &tcache_tls;
    /* Ready first: only a profiler that is on gets ready. */
    if (unlikely(!ATOMIC_LOAD_ACQ(&prof_set.ready))) {
        /* off: never again; starting up: look again later */
        tc->prof_left = !ATOMIC_LOAD(&conf.prof) ? INT64_MAX : (int64_t)(64 * KiB);
        return false;
    }
    prof_tls_t *t = &prof_tls;
    if (!t->armed) {
        /* A thread's first countdown starts at its first allocation. */
        t->armed = 1;
        tc->prof_left += prof_draw();
        if (tc->prof_left >= 0)
            return false;
    }
    /* The next interval starts after this block (a Poisson process has no memory). */
    tc->prof_left = prof_draw();
    return !t->busy;
}

_Static_assert(SC_NSMALL <= 64, "armed_classes has a bit for each small class");

/* A class's countdown, for a thread that never samples: 2^46 allocations. */
#define PROF_CLASS_NEVER ((int64_t)1 << 46)

/* How many allocations of class CLS (SIZE bytes) up to and including the next one
 * sampled: N = ceil(E / SIZE) for an exponential interval E of mean prof_sample, geometric
 * with P(N > k) = exp(-k SIZE / prof_sample), which is what the byte countdown's interval
 * gives a run of blocks of SIZE bytes. */
TIDE_SAMPLE_PATH static int64_t prof_draw_count(unsigned cls)
{
    double d = prof_exponential() * prof_class[cls].scale;
    if (!(d < (double)PROF_CLASS_NEVER))
        return PROF_CLASS_NEVER;
    int64_t n = (int64_t)d;
    n += (double)n < d;
    return n > 1 ? n : 1;
}

TIDE_SAMPLE_PATH bool prof_class_fire(unsigned cls)
{
    tcache_t *tc = &tcache_tls;
    int64_t left; /* allocations to let by before the next sample */
    bool fire = false;
    if (unlikely(!ATOMIC_LOAD_ACQ(&prof_set.ready))) {
        /* off: never again; starting up: look again later */
        left = !ATOMIC_LOAD(&conf.prof) ? PROF_CLASS_NEVER : (int64_t)(64 * KiB / sc_size[cls]);
    } else {
        prof_tls_t *t = &prof_tls;
        int64_t n = prof_draw_count(cls);
        if (!(t->armed_classes & ((uint64_t)1 << cls))) {
            /* A thread's first countdown of a class starts at its first allocation of it:
             * this one, the first of N. */
            t->armed_classes |= (uint64_t)1 << cls;
            if (n > 1) {
                tcache_set_countdown(tc, cls, n - 2);
                return false;
            }
            n = prof_draw_count(cls);
        }
        fire = !t->busy;
        left = n - 1;
    }
    tcache_set_countdown(tc, cls, left);
    return fire;
}

/* ---- call stacks ------------------------------------------------------------------ */

/* Whether SP lies in the calling thread's stack as known, looking it up if not. */
TIDE_SAMPLE_PATH static bool prof_stack_known(uintptr_t sp)
{
    prof_tls_t *t = &prof_tls;
    if (sp >= t->stack_lo && sp < t->stack_hi)
        return true;
    uintptr_t lo, hi;
    if (os_vma_of(sp, &lo, &hi) != 0)
        return false;
    t->stack_lo = lo;
    t->stack_hi = hi;
    return true;
}

/* Frame pointers from FRAME up: how many return addresses, or 0 when the chain breaks
 * before PROF_MIN_WALK of them (code without frame pointers). */
static unsigned prof_walk(prof_bt_t *bt, const uintptr_t *frame)
{
    const prof_tls_t *t = &prof_tls;
    uintptr_t lo = (uintptr_t)frame, hi = t->stack_hi;
    unsigned n = 0;
    bt->pc[n++] = frame[1];
    const uintptr_t *fp = (const uintptr_t *)frame[0], *prev = frame;
    while (n < PROF_MAX_DEPTH) {
        uintptr_t a = (uintptr_t)fp;
        if (a == 0)
            return n; /* the outermost frame (_start and clone zero it) */
        /* A frame record lies above the last one, inside the stack, 16-byte aligned as
         * the ABI's prologue leaves it; its return address is code, not stack. */
        if (fp <= prev || (a & 15) || a < lo || a > hi - 2 * sizeof(uintptr_t))
            break;
        uintptr_t pc = fp[1];
        if (pc < PAGE || (pc >= lo && pc < hi))
            break;
        bt->pc[n++] = pc;
        prev = fp;
        fp = (const uintptr_t *)fp[0];
    }
    return n >= PROF_MIN_WALK || n == PROF_MAX_DEPTH ? n : 0;
}

/* libgcc's unwinder (os_unwinder): it tells where each frame's return address is, which
 * backtrace() does not. */
typedef struct prof_walk_s {
    const os_unwinder_t *u;
    prof_bt_t *bt;
    uintptr_t entry_pc, frame, hi; /* the program's return address, the entry's frame, stack top */
    bool in_program;               /* past tide's own frames */
    prof_cached_t *keep;           /* where the slots go, NULL once one does not fit */
} prof_walk_t;

/* One frame: its return address IP, which (as the unwinder keeps its context) sits just
 * below CFA, the canonical frame address of the frame it returns from. */
static _Unwind_Reason_Code prof_unwind_one(struct _Unwind_Context *ctx, void *arg)
{
    prof_walk_t *w = arg;
    uintptr_t ip = w->u->get_ip(ctx), at = w->u->get_cfa(ctx) - sizeof(uintptr_t);
    prof_bt_t *bt = w->bt;
    if (!w->in_program) { /* tide's own frames, until the program's */
        if (ip != w->entry_pc)
            return _URC_NO_REASON;
        w->in_program = true;
        bt->pc[bt->n++] = ip;
        return _URC_NO_REASON;
    }
    if (ip == 0 || bt->n == PROF_MAX_DEPTH)
        return _URC_END_OF_STACK;
    if (w->keep && (bt->n >= PROF_CACHE_DEPTH || at <= w->frame || at >= w->hi || (at - w->frame) % 8 ||
                    (at - w->frame) / 8 > UINT16_MAX || *(const uintptr_t *)at != ip))
        w->keep = NULL;
    if (w->keep)
        w->keep->slot[bt->n] = (uint16_t)((at - w->frame) / 8);
    bt->pc[bt->n++] = ip;
    return _URC_NO_REASON;
}

/* The stack cached for FRAME, if every return address is still in its slot. */
TIDE_SAMPLE_PATH static bool prof_reuse(prof_bt_t *bt, const uintptr_t *f)
{
    prof_tls_t *t = &prof_tls;
    for (unsigned w = 0; w < PROF_CACHE_WAYS; w++) {
        const prof_cached_t *c = &t->cached[w];
        if (c->frame != (uintptr_t)f || c->pc[0] != f[1])
            continue;
        unsigned i = 1;
        while (i < c->n && f[c->slot[i]] == c->pc[i])
            i++;
        if (i < c->n)
            continue;
        bt->n = c->n;
        bt->stack = c->stack;
        bt->cached = (prof_cached_t *)c;
        if (!c->stack)
            memcpy(bt->pc, c->pc, c->n * sizeof c->pc[0]);
        return true;
    }
    return false;
}

/* Unwind with libgcc's unwinder from here to the program's return address F[1] and on,
 * keeping the stack for prof_reuse when it fits (thread busy: the unwinder may allocate).
 * False when the unwinder is missing or cannot run here. */
static bool prof_unwind_from(prof_bt_t *bt, const uintptr_t *f)
{
    const os_unwinder_t *u = os_unwinder();
    if (!u)
        return false;
    prof_tls_t *t = &prof_tls;
    prof_cached_t *c = &t->cached[t->cached_next];
    prof_walk_t w = { .u = u, .bt = bt, .entry_pc = f[1], .frame = (uintptr_t)f, .hi = t->stack_hi, .keep = c };
    c->frame = 0; /* invalid while it is being filled */
    c->stack = NULL;
    c->counts = NULL;
    bt->n = 0;
    if (!os_unwind(prof_unwind_one, &w))
        return false;
    if (bt->n == 0) { /* the program's frame not found: its return address alone is still right */
        bt->pc[bt->n++] = f[1];
        return true;
    }
    if (w.keep && bt->n < PROF_MAX_DEPTH) { /* (a stack cut at the maximum is not kept) */
        memcpy(c->pc, bt->pc, bt->n * sizeof bt->pc[0]);
        c->n = (uint8_t)bt->n;
        c->frame = (uintptr_t)f;
        bt->cached = c;
        t->cached_next = (uint8_t)((t->cached_next + 1) % PROF_CACHE_WAYS);
    }
    return true;
}

TIDE_SAMPLE_PATH void prof_backtrace(prof_bt_t *bt, void *frame)
{
    const uintptr_t *f = frame;
    prof_tls_t *t = &prof_tls;
    bt->stack = NULL;
    bt->cached = NULL;
    bt->frame = (uintptr_t)f;
    bool known = prof_stack_known((uintptr_t)f);
    /* A stack unwound before first: where frame pointers are missing, the walk would
     * fail on every sample before it. */
    if (known && prof_reuse(bt, f)) {
        bt->how = PROF_RECOGNISED;
        return;
    }
    if (known && (bt->n = prof_walk(bt, f)) != 0) {
        bt->how = PROF_WALKED;
        return;
    }
    bt->how = PROF_UNWOUND;
    void *v[PROF_MAX_DEPTH + 16];
    int k = 0;
    /* Both may allocate: libgcc sorts a static program's tables at its first look, and
     * glibc's backtrace() may load the unwinder. */
    t->busy = 1;
    bool unwound = known && prof_unwind_from(bt, f);
    if (!unwound) /* (none while the unwinder cannot run: a static program's start) */
        k = os_backtrace(v, (int)ARRAY_SIZE(v));
    t->busy = 0;
    if (unwound)
        return;
    /* backtrace() starts at this function: cut it at the program's return address. */
    int i = 0;
    while (i < k && (uintptr_t)v[i] != f[1])
        i++;
    bt->n = 0;
    if (i == k) { /* not found: the return address alone is still right */
        bt->pc[bt->n++] = f[1];
    } else {
        for (; i < k && bt->n < PROF_MAX_DEPTH; i++)
            bt->pc[bt->n++] = (uintptr_t)v[i];
    }
}

static uint64_t prof_hash(const prof_bt_t *bt)
{
    uint64_t h = 0xcbf29ce484222325u ^ bt->n;
    for (unsigned i = 0; i < bt->n; i++) {
        h ^= bt->pc[i];
        h *= 0x100000001b3u;
        h ^= h >> 29;
    }
    return h;
}

/* The entry of bucket B for BT's addresses (hash H), if there is one.  Without the lock:
 * an entry is complete before its bucket's head points to it, and never changes after. */
static prof_stack_t *prof_stack_find(prof_stack_t **b, const prof_bt_t *bt, uint64_t h)
{
    for (prof_stack_t *s = ATOMIC_LOAD_ACQ(b); s; s = s->next)
        if (s->hash == h && s->depth == bt->n && memcmp(s->pc, bt->pc, bt->n * sizeof bt->pc[0]) == 0)
            return s;
    return NULL;
}

/* The table's entry for BT's addresses, added (under prof_lock) when new; NULL when the
 * metadata or the stacks' ids ran out. */
static prof_stack_t *prof_stack_of(const prof_bt_t *bt)
{
    uint64_t h = prof_hash(bt);
    prof_stack_t **b = &prof_buckets[h & (PROF_BUCKETS - 1)];
    prof_stack_t *s = prof_stack_find(b, bt, h);
    if (s)
        return s;
    lock_acquire(&prof_lock);
    s = prof_stack_find(b, bt, h);
    if (s || prof_nstacks >= (uint64_t)PROF_MAX_CHUNKS * PROF_CHUNK_STACKS)
        goto out;
    size_t need = ALIGN_UP(sizeof(prof_stack_t) + bt->n * sizeof bt->pc[0], (size_t)16);
    if (prof_stack_cur + need > prof_stack_end) {
        void *chunk = meta_alloc(PROF_STACK_CHUNK);
        if (!chunk)
            goto out;
        prof_stack_cur = (uintptr_t)chunk;
        prof_stack_end = prof_stack_cur + PROF_STACK_CHUNK;
    }
    s = (prof_stack_t *)prof_stack_cur;
    prof_stack_cur += need;
    memset(s, 0, sizeof *s);
    s->hash = h;
    s->id = (uint32_t)prof_nstacks++;
    s->depth = bt->n;
    memcpy(s->pc, bt->pc, bt->n * sizeof bt->pc[0]);
    s->next = *b;
    ATOMIC_STORE_REL(b, s);
out:
    lock_release(&prof_lock);
    return s;
}

/* The stack BT: the entry it was recognised as, else found or added, and then remembered
 * by the cached stack it came from.  No lock held. */
TIDE_SAMPLE_PATH static prof_stack_t *prof_stack_get(const prof_bt_t *bt)
{
    if (bt->stack)
        return bt->stack;
    prof_stack_t *s = prof_stack_of(bt);
    /* (Still the entry BT was found in: a signal handler's sample between may have
     * replaced it, with its own frame.) */
    if (s && bt->cached && bt->cached->frame == bt->frame)
        bt->cached->stack = s;
    return s;
}

/* ---- records ---------------------------------------------------------------------- */

/* Its weight in bytes, SIZE * INV rounded: below 2^47 (size * inv is about prof_sample for a
 * block below it, at most 1.6 size above), so SIZE * COUNT_FX stays below 2^57. */
static uint64_t prof_rec_bytes(const extent_prof_t *r) { return (r->size * r->count_fx + PROF_FX / 2) / PROF_FX; }

/* The calling thread's shard: given in turn to the threads as they first sample or free
 * a sample. */
TIDE_SAMPLE_PATH static prof_shard_t *prof_my_shard(void)
{
    prof_tls_t *t = &prof_tls;
    if (unlikely(!t->shard))
        t->shard = (uint8_t)(ATOMIC_ADD(&prof_next_shard, 1) % PROF_SHARDS + 1);
    return &prof_shards[t->shard - 1];
}

/* Shard SH's counts of stack S, their chunk made when it is the first of it SH counts
 * (SH's lock held); NULL when the metadata ran out. */
TIDE_SAMPLE_PATH static prof_counts_t *prof_counts(prof_shard_t *sh, const prof_stack_t *s)
{
    prof_counts_t **c = &sh->chunk[s->id / PROF_CHUNK_STACKS];
    if (unlikely(!*c) && !(*c = meta_alloc(PROF_CHUNK_STACKS * sizeof **c)))
        return NULL;
    return &(*c)[s->id % PROF_CHUNK_STACKS];
}

/* Counts C of R's stack in shard SH, and SH's live bytes, gain (ADD) or lose R's weights;
 * the cumulative counts too when R is a new sample (SAMPLED).  SH's lock held. */
TIDE_INLINE void prof_weigh(prof_shard_t *sh, prof_counts_t *c, const extent_prof_t *r, bool add,
                            bool sampled)
{
    uint64_t count = r->count_fx, bytes = prof_rec_bytes(r);
    if (add) {
        c->live_count += count;
        c->live_bytes += bytes;
        ATOMIC_STORE(&sh->live_bytes, sh->live_bytes + bytes);
    } else {
        c->live_count -= count;
        c->live_bytes -= bytes;
        ATOMIC_STORE(&sh->live_bytes, sh->live_bytes - bytes);
    }
    if (sampled) {
        c->alloc_count += count;
        c->alloc_bytes += bytes;
    }
}

static int prof_dump_auto(unsigned kind, bool warn);

/* Fill record R of a sample of stack S (NULL: none could be had) and count it in shard SH,
 * whose lock is held: false when it stays unprofiled (out of metadata). */
TIDE_SAMPLE_PATH static bool record_in(prof_shard_t *sh, extent_prof_t *r, prof_stack_t *s, const prof_bt_t *bt,
                                       size_t size, size_t usable, uint64_t count_fx)
{
    sh->nfound[bt->how]++;
    /* A recognised stack's counts in this thread's shard are kept with it. */
    prof_cached_t *k = bt->cached;
    bool mine = k && k->frame == bt->frame && k->stack == s;
    prof_counts_t *c = mine && k->counts ? k->counts : s ? prof_counts(sh, s) : NULL;
    if (!c) {
        sh->ndropped++;
        return false;
    }
    if (mine)
        k->counts = c;
    *r = (extent_prof_t){ .stack = s,
                          .size = size,
                          .count_fx = count_fx,
                          .usable = (uint32_t)usable,
                          .shard = (uint8_t)(sh - prof_shards) };
    prof_weigh(sh, c, r, true, true);
    sh->nlive++;
    return true;
}

/* Record E's block: in E, with E->prof set. */
TIDE_SAMPLE_PATH static bool record_extent(prof_shard_t *sh, extent_t *e, prof_stack_t *s, const prof_bt_t *bt,
                                           size_t size, size_t usable, uint64_t count_fx)
{
    if (!record_in(sh, &e->prof_rec, s, bt, size, usable, count_fx))
        return false;
    e->prof = 1;
    return true;
}

/* After a sample, with prof_interval set (INTERVAL): a dump when the live heap grew by it
 * since the last.  The shards' live bytes are read without their locks (a dump a sample
 * early or late is no matter); one thread wins the mark and dumps. */
static TIDE_NOINLINE void prof_interval_check(uint64_t interval)
{
    uint64_t live = 0;
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        live += ATOMIC_LOAD(&prof_shards[k].live_bytes);
    uint64_t mark = ATOMIC_LOAD(&prof_interval_mark);
    if ((int64_t)(live - mark) >= (int64_t)interval &&
        __atomic_compare_exchange_n(&prof_interval_mark, &mark, live, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        prof_dump_auto(1, true);
}

/* After a sample, its locks released: RECORDED when it was counted. */
TIDE_INLINE void record_done(bool recorded)
{
    uint64_t interval = prof_set.interval;
    if (recorded && unlikely(interval))
        prof_interval_check(interval);
}

/* The weight of a sample taken with the probability of PSIZE bytes. */
TIDE_INLINE uint64_t record_weight(size_t psize)
{
    unsigned cls = prof_class_sized(psize);
    return cls < SC_NSMALL ? prof_class[cls].count_fx : prof_count_fx(1 / prof_probability(psize));
}

TIDE_SAMPLE_PATH void prof_record(extent_t *e, const prof_bt_t *bt, size_t size, size_t usable, size_t psize)
{
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    prof_shard_t *sh = prof_my_shard();
    lock_acquire(&sh->lock);
    bool recorded = record_extent(sh, e, s, bt, size, usable, count_fx);
    lock_release(&sh->lock);
    record_done(recorded);
}

/* A kept block from shard SH, whose lock is held, or NULL. */
TIDE_SAMPLE_PATH static extent_t *spare_take(prof_shard_t *sh)
{
    if (!sh->nspare)
        return NULL;
    ATOMIC_STORE(&sh->nspare, sh->nspare - 1);
    extent_t *e = sh->spare[sh->nspare];
    ATOMIC_STORE(&e->cached, 0);
    return e;
}

/* Shard SH (the caller's, its lock not held) has no kept block: move another shard's
 * into it, all of them, so that the next samples find them at home (a sample freed by
 * another thread leaves its block in that thread's shard, and a lock of that shard's for
 * each sample would pass its lines between the CPUs again).  Whether any moved. */
static bool spare_steal(prof_shard_t *sh)
{
    prof_shard_t *from = NULL;
    if (ATOMIC_LOAD(&prof_next_shard) < 2)
        return false; /* only this thread's shard in use: no look at the others' lines */
    for (unsigned k = 0; k < PROF_SHARDS && !from; k++)
        if (&prof_shards[k] != sh && ATOMIC_LOAD(&prof_shards[k].nspare))
            from = &prof_shards[k];
    if (!from)
        return false;
    extent_t *moved[PROF_SPARE_MAX];
    unsigned n = 0, i = 0;
    lock_acquire(&from->lock);
    while (from->nspare) {
        moved[n++] = from->spare[from->nspare - 1];
        ATOMIC_STORE(&from->nspare, from->nspare - 1);
    }
    lock_release(&from->lock);
    lock_acquire(&sh->lock);
    for (; i < n && sh->nspare < PROF_SPARE_MAX; i++) {
        sh->spare[sh->nspare] = moved[i];
        ATOMIC_STORE(&sh->nspare, sh->nspare + 1);
    }
    lock_release(&sh->lock);
    /* (Another thread of this shard freed samples meanwhile: no room for the rest.) */
    for (unsigned j = i; j < n; j++) {
        ATOMIC_STORE(&moved[j]->cached, 0);
        large_free(moved[j]);
    }
    return n > 0;
}

TIDE_SAMPLE_PATH extent_t *prof_record_kept(const prof_bt_t *bt, size_t size, size_t usable, size_t psize)
{
    /* A peek first, so that none kept costs no lock. */
    prof_shard_t *sh = prof_my_shard();
    if (!ATOMIC_LOAD(&sh->nspare) && !spare_steal(sh))
        return NULL;
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    lock_acquire(&sh->lock);
    extent_t *e = spare_take(sh);
    bool recorded = e && record_extent(sh, e, s, bt, size, usable, count_fx);
    lock_release(&sh->lock);
    record_done(recorded);
    return e;
}

/* SH, whose lock is held, could not get metadata for the counts of R's stack: the shard
 * that sampled R has them.  Its lock is held on return, with the counts in *C. */
static TIDE_NOINLINE prof_shard_t *free_in_sampling_shard(prof_shard_t *sh, const extent_prof_t *r, prof_counts_t **c)
{
    lock_release(&sh->lock);
    sh = &prof_shards[r->shard];
    lock_acquire(&sh->lock);
    *c = prof_counts(sh, r->stack);
    return sh;
}

/* Take record R's weights off, in the calling thread's shard (else the one that sampled
 * it, when this one could not get metadata for the counts of its stack): that shard, its
 * lock held. */
TIDE_SAMPLE_PATH static prof_shard_t *unweigh(const extent_prof_t *r)
{
    prof_shard_t *sh = prof_my_shard();
    lock_acquire(&sh->lock);
    prof_counts_t *c = prof_counts(sh, r->stack);
    if (unlikely(!c))
        sh = free_in_sampling_shard(sh, r, &c);
    prof_weigh(sh, c, r, false, false);
    sh->nlive--;
    return sh;
}

TIDE_SAMPLE_PATH bool prof_free(extent_t *e, bool keep)
{
    e->prof = 0;
    prof_shard_t *sh = unweigh(&e->prof_rec);
    keep = keep && sh->nspare < PROF_SPARE_MAX;
    if (keep) {
        /* As a thread cache marks the blocks it holds: a second free finds the mark. */
        ATOMIC_STORE(&e->cached, 1);
        sh->spare[sh->nspare] = e;
        ATOMIC_STORE(&sh->nspare, sh->nspare + 1);
    }
    lock_release(&sh->lock);
    return keep;
}

/* ---- samples kept in their slab ---------------------------------------------------- */

/* Their records, by block address: open addressing with linear probing, under
 * prof_slab_lock (after the shards' locks, before meta's).  A removal moves the entries
 * after it back into the hole (no tombstones: a table serves any number of samples that
 * come and go without filling up).  Grown by doubling when three quarters full, from the
 * metadata (the old table stays there, unused: at most as much again). */
typedef struct prof_slab_rec_s {
    uintptr_t addr; /* 0: an empty slot */
    extent_prof_t rec;
} prof_slab_rec_t;

#define PROF_SLAB_LG_MIN 8
static lock_t prof_slab_lock = LOCK_INITIALIZER(LOCK_RANK_PROF_SLAB);
static prof_slab_rec_t *prof_slab_tab;
static unsigned prof_slab_lg; /* the table holds 2^prof_slab_lg slots */
static size_t prof_slab_n;    /* records in it */

static size_t slab_home(uintptr_t a)
{
    return (size_t)(((uint64_t)(a >> LG_PAGE) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - prof_slab_lg));
}

static void slab_put(uintptr_t a, const extent_prof_t *r)
{
    size_t mask = ((size_t)1 << prof_slab_lg) - 1, i = slab_home(a);
    while (prof_slab_tab[i].addr)
        i = (i + 1) & mask;
    prof_slab_tab[i] = (prof_slab_rec_t){ .addr = a, .rec = *r };
}

/* Room for one record more, the table grown if need be: false when the metadata ran out. */
static bool slab_room(void)
{
    size_t cap = prof_slab_tab ? (size_t)1 << prof_slab_lg : 0;
    if ((prof_slab_n + 1) * 4 <= cap * 3)
        return true;
    unsigned lg = cap ? prof_slab_lg + 1 : PROF_SLAB_LG_MIN;
    prof_slab_rec_t *t = meta_alloc(sizeof *t << lg), *old = prof_slab_tab;
    if (!t)
        return false;
    prof_slab_tab = t;
    prof_slab_lg = lg;
    for (size_t i = 0; i < cap; i++)
        if (old[i].addr)
            slab_put(old[i].addr, &old[i].rec);
    return true;
}

/* Take the record of block A out into *R: false when there is none. */
static bool slab_take(uintptr_t a, extent_prof_t *r)
{
    if (!prof_slab_tab)
        return false;
    size_t mask = ((size_t)1 << prof_slab_lg) - 1, i = slab_home(a);
    while (prof_slab_tab[i].addr != a) {
        if (!prof_slab_tab[i].addr)
            return false;
        i = (i + 1) & mask;
    }
    *r = prof_slab_tab[i].rec;
    prof_slab_n--;
    /* Each entry after the hole, up to the next empty slot, moves into it unless its home
     * lies cyclically in (hole, entry]: then it is where a search from its home finds it. */
    for (size_t j = (i + 1) & mask; prof_slab_tab[j].addr; j = (j + 1) & mask) {
        size_t h = slab_home(prof_slab_tab[j].addr);
        if (((j - h) & mask) >= ((j - i) & mask)) {
            prof_slab_tab[i] = prof_slab_tab[j];
            i = j;
        }
    }
    prof_slab_tab[i].addr = 0;
    return true;
}

TIDE_SAMPLE_PATH void prof_record_in_slab(void *p, extent_t *slab, const prof_bt_t *bt, size_t size, size_t psize)
{
    uintptr_t a = (uintptr_t)p;
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    prof_shard_t *sh = prof_my_shard();
    extent_prof_t r;
    lock_acquire(&sh->lock);
    lock_acquire(&prof_slab_lock);
    bool recorded = false;
    if (slab_room()) {
        recorded = record_in(sh, &r, s, bt, size, 0, count_fx);
        if (recorded) {
            slab_put(a, &r);
            prof_slab_n++;
            extent_mark_sampled(slab, a, true);
        }
    } else {
        sh->nfound[bt->how]++;
        sh->ndropped++;
    }
    lock_release(&prof_slab_lock);
    lock_release(&sh->lock);
    record_done(recorded);
}

TIDE_SAMPLE_PATH void prof_free_in_slab(void *p, extent_t *slab)
{
    uintptr_t a = (uintptr_t)p;
    extent_prof_t r;
    lock_acquire(&prof_slab_lock);
    bool found = slab_take(a, &r);
    if (found)
        extent_mark_sampled(slab, a, false);
    lock_release(&prof_slab_lock);
    if (found)
        lock_release(&unweigh(&r)->lock);
}

void prof_trim(void)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++) {
        prof_shard_t *sh = &prof_shards[k];
        extent_t *kept[PROF_SPARE_MAX];
        unsigned n = 0;
        lock_acquire(&sh->lock);
        for (extent_t *e; (e = spare_take(sh)) != NULL;)
            kept[n++] = e;
        lock_release(&sh->lock);
        for (unsigned i = 0; i < n; i++)
            large_free(kept[i]);
    }
}

TIDE_SAMPLE_PATH size_t prof_usable(const extent_t *e)
{
    return e->prof_rec.usable ? e->prof_rec.usable : extent_block_size(e);
}

extent_prof_t prof_detach(extent_t *e)
{
    extent_prof_t r = { 0 };
    if (e->prof)
        r = e->prof_rec;
    e->prof = 0;
    return r;
}

void prof_reattach(const extent_prof_t *rec, extent_t *e)
{
    if (rec->stack) {
        e->prof_rec = *rec;
        e->prof = 1;
    }
}

void prof_resized(const extent_prof_t *rec, extent_t *e, size_t old_size, size_t size, void *frame)
{
    if (rec->stack) {
        /* Sampled at its old size with probability p, it would have been sampled by now
         * with 1 - (1 - p) exp(-growth / R) (an unsampled block counts its growth, below):
         * that is its weight from now on.  A block that shrank keeps its p. */
        /* (In the shard that sampled it, which has counts of its stack.) */
        extent_prof_t r = *rec;
        prof_shard_t *sh = &prof_shards[r.shard];
        lock_acquire(&sh->lock);
        prof_counts_t *c = prof_counts(sh, r.stack);
        prof_weigh(sh, c, &r, false, false);
        if (size > r.size) {
            double p = (double)PROF_FX / (double)r.count_fx;
            p = 1 - (1 - p) * (1 - prof_one_minus_exp_neg((double)(size - r.size) / prof_set.rate));
            r.count_fx = prof_count_fx(1 / p);
        }
        r.size = size;
        r.usable = 0; /* a large block now */
        prof_weigh(sh, c, &r, true, false);
        e->prof_rec = r;
        e->prof = 1;
        lock_release(&sh->lock);
        return;
    }
    if (size > old_size && size - old_size <= TIDE_MAX_BLOCK && prof_count(size - old_size)) {
        prof_bt_t bt;
        prof_backtrace(&bt, frame);
        prof_record(e, &bt, size, 0, size);
    }
}

/* ---- dumps ------------------------------------------------------------------------ */

typedef struct prof_out_s {
    int fd, err;
    size_t n;
    char buf[16384];
} prof_out_t;

static prof_out_t prof_out; /* under prof_lock */

/* Every shard's lock, in their order, and back. */
static void prof_shards_lock(void)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        lock_acquire(&prof_shards[k].lock);
}
static void prof_shards_unlock(void)
{
    for (unsigned k = PROF_SHARDS; k-- > 0;)
        lock_release(&prof_shards[k].lock);
}

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
static int prof_dump_auto(unsigned kind, bool warn)
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

/* ---- life cycle ------------------------------------------------------------------- */

void prof_boot(void)
{
    if (!ATOMIC_LOAD(&conf.prof))
        return;
    prof_set.rate = (double)conf.prof_sample;
    prof_set.interval = (uint64_t)conf.prof_interval;
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        prof_class[c].scale = prof_set.rate / (double)sc_size[c];
        prof_class[c].count_fx = prof_count_fx(1 / prof_probability(sc_size[c]));
    }
    /* The tables' first chunks now: a sample then needs more only as stacks grow. */
    prof_buckets = meta_alloc(PROF_BUCKETS * sizeof *prof_buckets);
    void *stacks = meta_alloc(PROF_STACK_CHUNK);
    bool ok = prof_buckets && stacks;
    for (unsigned k = 0; k < PROF_SHARDS && ok; k++)
        ok = (prof_shards[k].chunk = meta_alloc(PROF_MAX_CHUNKS * sizeof *prof_shards[k].chunk)) != NULL;
    if (!ok) {
        ATOMIC_STORE(&conf.prof, 0);
        return;
    }
    prof_stack_cur = (uintptr_t)stacks;
    prof_stack_end = prof_stack_cur + PROF_STACK_CHUNK;
    /* The unwinder's first look-up may load libgcc_s and allocates: not inside a sample. */
    prof_tls.busy = 1;
    os_unwind_boot();
    prof_tls.busy = 0;
    ATOMIC_STORE_REL(&prof_set.ready, 1);
    /* This thread's allocations while tide started (these above among them) found the
     * profiler not ready and put off their look for 64 KiB: the program's own come next. */
    tcache_tls.prof_left = 0;
    for (unsigned c = 0; c < SC_NSMALL; c++)
        tcache_set_countdown(&tcache_tls, c, 0);
}

void prof_exit(void)
{
    if (ATOMIC_LOAD(&conf.prof) && ATOMIC_LOAD(&conf.prof_final) && ATOMIC_LOAD_ACQ(&prof_set.ready))
        prof_dump_auto(0, true);
}

void prof_locks(lock_op_t op) { lock_apply(&prof_lock, op); }
void prof_shard_locks(lock_op_t op)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        lock_apply(&prof_shards[k].lock, op);
}
void prof_slab_locks(lock_op_t op) { lock_apply(&prof_slab_lock, op); }

void prof_stats(prof_stats_t *out)
{
    *out = (prof_stats_t){ 0 };
    lock_acquire(&prof_lock);
    out->stacks = prof_nstacks;
    lock_release(&prof_lock);
    for (unsigned k = 0; k < PROF_SHARDS; k++) {
        prof_shard_t *sh = &prof_shards[k];
        lock_acquire(&sh->lock);
        out->samples += sh->nfound[PROF_WALKED] + sh->nfound[PROF_RECOGNISED] + sh->nfound[PROF_UNWOUND] - sh->ndropped;
        out->live_samples += sh->nlive;
        out->dropped += sh->ndropped;
        out->frame_walks += sh->nfound[PROF_WALKED];
        out->reused += sh->nfound[PROF_RECOGNISED];
        out->backtraces += sh->nfound[PROF_UNWOUND];
        lock_release(&sh->lock);
    }
    out->dumps = ATOMIC_LOAD(&prof_ndumps);
}
