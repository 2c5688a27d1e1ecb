/* transfer.c - per-class stacks of object lists, one short lock each. */
#include "transfer.h"

#include "arena.h"
#include "lock.h"
#include "size_classes.h"
#include "util.h"

#define TRANSFER_SLOTS 128
#define TRANSFER_MAX_BYTES (512 * KiB) /* per class: bounds what idles here */

typedef struct transfer_s {
    lock_t lock;
    unsigned n; /* lists held */
    size_t bytes;
    unsigned pops;  /* since the last idle check */
    void *head[TRANSFER_SLOTS];
    uint16_t count[TRANSFER_SLOTS];
} TIDE_ALIGNED_CL transfer_t;

static transfer_t transfer[SC_NSMALL] = { [0 ... SC_NSMALL - 1] = { .lock = LOCK_INITIALIZER } };

bool transfer_push(unsigned cls, void *head, unsigned n)
{
    transfer_t *t = &transfer[cls];
    size_t bytes = (size_t)n * sc_size[cls];
    bool ok = false;
    lock_acquire(&t->lock);
    if (t->n < TRANSFER_SLOTS && t->bytes + bytes <= TRANSFER_MAX_BYTES) {
        t->head[t->n] = head;
        t->count[t->n] = (uint16_t)n;
        t->n++;
        t->bytes += bytes;
        ok = true;
    }
    lock_release(&t->lock);
    return ok;
}

unsigned transfer_pop(unsigned cls, void **head)
{
    transfer_t *t = &transfer[cls];
    if (ATOMIC_LOAD(&t->n) == 0) /* a racy peek: an empty class costs no lock */
        return 0;
    unsigned n = 0;
    lock_acquire(&t->lock);
    if (t->n) {
        t->pops++;
        t->n--;
        *head = t->head[t->n];
        n = t->count[t->n];
        t->bytes -= (size_t)n * sc_size[cls];
    }
    lock_release(&t->lock);
    return n;
}

void transfer_drain(void)
{
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        void *head;
        while (transfer_pop(c, &head))
            arena_flush_list(head, c, "free");
    }
}

bool transfer_holds(unsigned cls, const void *p)
{
    transfer_t *t = &transfer[cls];
    bool found = false;
    lock_acquire(&t->lock);
    for (unsigned b = 0; b < t->n && !found; b++)
        for (void **q = t->head[b]; q && !found; q = *q)
            found = q == p;
    lock_release(&t->lock);
    return found;
}

void transfer_drain_idle(void)
{
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        transfer_t *t = &transfer[c];
        if (ATOMIC_LOAD(&t->n) == 0)
            continue;
        lock_acquire(&t->lock);
        bool idle = t->pops == 0;
        t->pops = 0;
        lock_release(&t->lock);
        void *head;
        while (idle && transfer_pop(c, &head))
            arena_flush_list(head, c, "free");
        if (idle)
            t->pops = 0; /* our own pops do not count */
    }
}

void transfer_lock_all(void)
{
    for (unsigned c = 0; c < SC_NSMALL; c++)
        lock_acquire(&transfer[c].lock);
}

void transfer_unlock_all(void)
{
    for (unsigned c = SC_NSMALL; c-- > 0;)
        lock_release(&transfer[c].lock);
}

void transfer_reinit_locks(void)
{
    for (unsigned c = 0; c < SC_NSMALL; c++)
        lock_init(&transfer[c].lock);
}
