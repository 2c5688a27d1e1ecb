/* SPDX-License-Identifier: MIT */
/* prof_stack.c - the heap profiler's call stacks: a sample's stack found (a stack this
 * thread unwound before recognised again, else frame pointers followed within the thread's
 * stack, else libgcc's unwinder), and the table of distinct stacks (hashed, chained, never
 * freed), carved from the metadata range under prof_lock and read without it. */
#include "prof_internal.h"

#include <string.h>

#include "meta.h"
#include "os.h"

/* A chain of frame pointers this long is taken as real; a shorter one that breaks
 * (frames without frame pointers) goes to the unwinder. */
#define PROF_MIN_WALK 3

prof_stack_t **prof_buckets; /* heads: atomic (read without prof_lock) */
uintptr_t prof_stack_cur, prof_stack_end;
uint64_t prof_nstacks; /* under prof_lock */

/* ---- a sample's stack ------------------------------------------------------------ */

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

/* ---- the table of stacks --------------------------------------------------------- */

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

prof_stack_t *prof_stack_of(const prof_bt_t *bt)
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
