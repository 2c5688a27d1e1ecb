/* guard.c - what guard pages are for (guard.h): the quarantine of freed blocks, and the
 * SIGSEGV handler that explains a fault on a guard page. */
#include "guard.h"

#include <signal.h>
#include <string.h>

#include "list.h"
#include "lock.h"
#include "os.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"
#include "size_class_table.h"

/* Held extents (their lru node), oldest first, and their bytes, guard pages included. */
typedef struct guard_queue_s {
    list_node_t fifo;
    size_t bytes;
} guard_queue_t;

static lock_t guard_lock = LOCK_INITIALIZER; /* the queue */
static guard_queue_t queue_large = { { &queue_large.fifo, &queue_large.fifo }, 0 };
static int guard_handler_on; /* atomic */
static struct sigaction guard_prev; /* the action the handler chains to */

/* ---- the quarantine --------------------------------------------------------------- */

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
        extent_release_held(x);
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
    if (e->guard && extent_size(e) <= bound && extent_guard_install(e->addr, extent_block_size(e))) {
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
    uintptr_t lo = e->addr, hi = lo + (e->npages << LG_PAGE);
    bool held = state == EXTENT_HELD;
    if (a < lo || a >= hi ||
        (!held && !((state == EXTENT_LARGE || state == EXTENT_SLAB) && e->guard && a >= hi - PAGE)))
        return false;
    uintptr_t block;
    size_t size;
    if (state == EXTENT_SLAB && cls < SC_NSMALL) {
        size = sc_size[cls]; /* the last region: its overflow ends here */
        block = lo + (sc_nregs[cls] - 1u) * size;
    } else {
        block = lo;
        size = (e->npages - e->guard) << LG_PAGE;
    }
    char at[24], b[24], n[24];
    const char *line[] = { "SIGSEGV at ", report_fmt_u64(at, a, 1), held ? ": use after free of" : ": overflow past",
                           " the block ", report_fmt_u64(b, block, 1), " of ", report_fmt_u64(n, size, 0), " bytes" };
    report_line(line, ARRAY_SIZE(line));
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
    if (!ATOMIC_LOAD(&conf.guard))
        return;
    if (!__atomic_exchange_n(&guard_handler_on, 1, __ATOMIC_ACQ_REL))
        os_signal_install(SIGSEGV, guard_segv, &guard_prev);
}

void guard_prefork(void) { lock_acquire(&guard_lock); }
void guard_postfork_parent(void) { lock_release(&guard_lock); }
void guard_postfork_child(void) { lock_init(&guard_lock); }
