/* SPDX-License-Identifier: MIT */
/* transfer.c - per-arena, per-class stacks of object lists, one short lock each. */
#include "transfer.h"

#include <errno.h>

#include "arena.h"
#include "extent.h"
#include "freelist.h"
#include "lock.h"
#include "meta.h"
#include "report.h"
#include "size_class_table.h"
#include "util.h"

#define TRANSFER_SLOTS 32
/* What may idle here: per arena 2 MiB, of which one class may hold half.  A producer
 * that sleeps while its consumer drains a ring of 4096 64-byte blocks meets half of them
 * here at once (128 KiB); with 128 KiB per class, prodcons ran at 2-4x the time.  A
 * thread that frees 1000 blocks of 1024 B (bench/powers) handed 872 of them on past its
 * own 128 (when no class's cache grew past 128 KiB; now it keeps 512); with 512 KiB a
 * class and 1 MiB an arena, the rest went back into slab bitmaps
 * and was cut out of them again a moment later, at about 160 instructions an object on
 * the way back and 75 on the way out (17% of the program's instructions). */
#define TRANSFER_CLASS_MAX_BYTES (1024 * KiB)
#define TRANSFER_ARENA_MAX_BYTES (2048 * KiB)

/* n and pops change under the lock, and are peeked at without it (transfer_pop, drain):
 * their stores are relaxed atomics, so that the peeks are no data races.  The lists are
 * kept apart (transfer_slots_t), so that an arena's 35 locks lie on 2 KiB rather than
 * 13: fork's handlers take and release them all, and the parent's first write to each
 * page after a fork copies it. */
typedef struct transfer_s {
    lock_t lock;
    unsigned n; /* lists held */
    size_t bytes;
    unsigned pops; /* since the last idle check */
} TIDE_ALIGNED_CL transfer_t;
_Static_assert(sizeof(transfer_t) == TIDE_CACHELINE, "a transfer cache's lock line holds no lists");

typedef struct transfer_slots_s {
    void *head[TRANSFER_SLOTS];
    uint16_t count[TRANSFER_SLOTS];
} transfer_slots_t;

static transfer_t *transfers;       /* [arena][class] */
static transfer_slots_t *slots;     /* [arena][class]: their lists */
static unsigned ntransfers;   /* arenas */
typedef struct arena_budget_s {
    size_t bytes; /* held by the arena's classes (atomic) */
} TIDE_ALIGNED_CL arena_budget_t;
static arena_budget_t *budgets; /* [arena] */
static uint8_t *ready;        /* [arena]: its locks are initialised (atomic) */
static lock_t ready_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_TRANSFER_READY);

static transfer_t *transfer_of(unsigned arena, unsigned cls) { return &transfers[arena * SC_NSMALL + cls]; }
static transfer_slots_t *slots_of(unsigned arena, unsigned cls) { return &slots[arena * SC_NSMALL + cls]; }

/* The caches stay untouched (zero pages) until a thread joins their arena: with 4 arenas
 * per CPU, a 64-CPU machine would otherwise write 3 MiB at start-up and in every fork
 * child.  Walks over every cache skip the arenas not ready yet, whose locks may be
 * being initialised (they hold nothing: only a thread of the arena allocates slabs). */
int transfer_init(unsigned narena)
{
    transfers = meta_alloc((size_t)narena * SC_NSMALL * sizeof(transfer_t));
    slots = meta_alloc((size_t)narena * SC_NSMALL * sizeof(transfer_slots_t));
    ready = meta_alloc(narena);
    budgets = meta_alloc((size_t)narena * sizeof(arena_budget_t));
    if (!transfers || !slots || !ready || !budgets)
        return ENOMEM;
    ATOMIC_STORE_REL(&ntransfers, narena);
    return 0;
}

static void init_locks(unsigned arena)
{
    for (unsigned c = 0; c < SC_NSMALL; c++)
        lock_init(&transfer_of(arena, c)->lock, LOCK_RANK_TRANSFER); /* in address order */
}

static bool is_ready(unsigned arena) { return ATOMIC_LOAD_ACQ(&ready[arena]) != 0; }

void transfer_arena_ready(unsigned arena)
{
    if (is_ready(arena))
        return;
    lock_acquire(&ready_lock);
    if (!ready[arena]) {
        init_locks(arena);
        arena_join(arena);
        ATOMIC_STORE_REL(&ready[arena], 1);
    }
    lock_release(&ready_lock);
}

bool transfer_push(unsigned arena, unsigned cls, void *head, unsigned n)
{
    transfer_t *t = transfer_of(arena, cls);
    size_t bytes = (size_t)n * sc_size[cls];
    size_t *budget = &budgets[arena].bytes;
    bool ok = false;
    lock_acquire_gated(&t->lock);
    if (t->n < TRANSFER_SLOTS && t->bytes + bytes <= TRANSFER_CLASS_MAX_BYTES) {
        if (ATOMIC_ADD(budget, bytes) + bytes <= TRANSFER_ARENA_MAX_BYTES) {
            transfer_slots_t *sl = slots_of(arena, cls);
            sl->head[t->n] = head;
            sl->count[t->n] = (uint16_t)n;
            ATOMIC_STORE(&t->n, t->n + 1);
            t->bytes += bytes;
            ok = true;
        } else {
            ATOMIC_SUB(budget, bytes);
        }
    }
    lock_release(&t->lock);
    return ok;
}

/* Take the newest list of T (arena ARENA, class CLS): how many objects *HEAD holds, 0
 * when T is empty.  Lock held. */
static unsigned take_list(transfer_t *t, unsigned arena, unsigned cls, void **head)
{
    if (!t->n)
        return 0;
    ATOMIC_STORE(&t->n, t->n - 1);
    transfer_slots_t *sl = slots_of(arena, cls);
    *head = sl->head[t->n];
    unsigned n = sl->count[t->n];
    TIDE_ASSERT(n > 0 && t->bytes >= (size_t)n * sc_size[cls]);
    t->bytes -= (size_t)n * sc_size[cls];
    ATOMIC_SUB(&budgets[arena].bytes, (size_t)n * sc_size[cls]);
    return n;
}

unsigned transfer_pop(unsigned arena, unsigned cls, void **head)
{
    transfer_t *t = transfer_of(arena, cls);
    if (ATOMIC_LOAD(&t->n) == 0) /* a racy peek: an empty class costs no lock */
        return 0;
    lock_acquire_gated(&t->lock);
    unsigned n = take_list(t, arena, cls, head);
    if (n)
        ATOMIC_STORE(&t->pops, t->pops + 1);
    lock_release(&t->lock);
    return n;
}

/* Give back to their slabs the lists of every class of every arena; with IDLE_ONLY,
 * only of the classes nobody took a list from since the last such call.  The lists are
 * returned with no transfer lock held.  The slabs they empty are left dirty: the callers
 * purge next (the purger thread, malloc_trim). */
static void drain(bool idle_only)
{
    unsigned na = ATOMIC_LOAD_ACQ(&ntransfers);
    for (unsigned a = 0; a < na; a++)
        for (unsigned c = 0; is_ready(a) && c < SC_NSMALL; c++) {
            transfer_t *t = transfer_of(a, c);
            /* An empty class with no take since the last call has nothing to do; one with a
             * take still starts counting afresh, or a list pushed next would look busy. */
            if (ATOMIC_LOAD(&t->n) == 0 && ATOMIC_LOAD(&t->pops) == 0)
                continue;
            lock_acquire_gated(&t->lock);
            bool skip = idle_only && t->pops != 0;
            ATOMIC_STORE(&t->pops, 0);
            lock_release(&t->lock);
            for (void *head; !skip;) {
                lock_acquire_gated(&t->lock);
                unsigned n = take_list(t, a, c, &head);
                lock_release(&t->lock);
                if (!n)
                    break;
                arena_return_list(head, n, c, "free");
            }
        }
}

void transfer_drain(void) { drain(false); }

void transfer_drain_idle(void) { drain(true); }

bool transfer_holds(unsigned cls, const void *p)
{
    bool found = false;
    for (unsigned a = 0; a < ATOMIC_LOAD_ACQ(&ntransfers) && !found; a++) {
        if (!is_ready(a))
            continue;
        transfer_t *t = transfer_of(a, cls);
        const transfer_slots_t *sl = slots_of(a, cls);
        lock_acquire_gated(&t->lock);
        for (unsigned b = 0; b < t->n && !found; b++) {
            unsigned left = sl->count[b]; /* bounded: a list made to loop ends too */
            for (void **q = sl->head[b]; q && left && !found; q = freelist_next_checked(q, cls, "free"), left--)
                found = q == p;
        }
        lock_release(&t->lock);
    }
    return found;
}

/* fork: ready_lock ranks below the caches' locks, so that none becomes ready while they
 * are taken, released or reset (the caches of the arenas not ready hold nothing, and
 * their locks are made when they become ready). */
void transfer_ready_locks(lock_op_t op) { lock_apply(&ready_lock, op); }

void transfer_locks(lock_op_t op)
{
    for (unsigned a = 0; a < ntransfers; a++)
        for (unsigned c = 0; ready[a] && c < SC_NSMALL; c++)
            lock_apply_gated(&transfer_of(a, c)->lock, op);
}
