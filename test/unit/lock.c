/* SPDX-License-Identifier: MIT */
/*
 * lock.c - the order of tide's locks (src/lock.h's ranks), as the debug build checks it:
 * a thread that takes a lock while it holds one of a higher rank (or, but for the ranks
 * whose locks are taken together, one of the same rank) dies with one line naming both;
 * the right order, a release before the next take, and the walks that take every lock of
 * a rank in order pass; so does a fork of a multithreaded process, whose handlers take
 * every lock of tide rank by rank.
 *
 * Each case runs in a forked child through the child runner (the test process is single-
 * threaded there, so the fork itself takes no lock).  The locks are tide's own where the
 * case is about them (the page heap's, the bins'), else locks of the test given a rank.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>

#include "support.h"

#include "arena.h"
#include "extent.h"
#include "lock.h"

#ifndef TIDE_LOCK_RANKS
#error "the unit suites link the debug library: lock ranks are checked there"
#endif

/* Runs FN in a child, which must die of SIGABRT with WANT as its one line on stderr. */
static void expect_abort(int (*fn)(void *), void *arg, const char *want)
{
    struct tt_child_spec spec = { .fn = fn, .arg = arg, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96];
    cr_expect(tt_child_signalled(&c, SIGABRT), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect_str_eq(c.err, want);
    tt_child_free(&c);
}

/* Runs FN in a child, which must exit 0 and write nothing on stderr. */
static void expect_pass(int (*fn)(void *), void *arg)
{
    struct tt_child_spec spec = { .fn = fn, .arg = arg, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96];
    cr_expect(tt_child_exited(&c, 0), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect_str_empty(c.err);
    tt_child_free(&c);
}

static lock_t *bin_lock(unsigned arena, unsigned cls) { return &arenas[arena]->bins[cls].lock; }

/* ---- the wrong order dies ------------------------------------------------------------ */

/* The line of a bin lock taken while the page heap's is held. */
static void bin_inside_pageheap_line(char *want, size_t cap)
{
    snprintf(want, cap, "tide: lock order: taking bin lock 0 at %p (rank %d) while holding pageheap.lock (rank %d)\n",
             (void *)bin_lock(0, 3), LOCK_RANK_BIN, LOCK_RANK_PAGEHEAP);
}

static int bin_inside_pageheap(void *arg)
{
    (void)arg;
    lock_acquire(&pageheap.lock);
    lock_acquire(bin_lock(0, 3));
    return 0;
}

Test(lock_order, a_bin_lock_taken_inside_the_page_heaps_dies_naming_both)
{
    char want[256];
    bin_inside_pageheap_line(want, sizeof want);
    expect_abort(bin_inside_pageheap, NULL, want);
}

/* A try-lock is checked too, though it could not deadlock: the order is one for all. */
static int try_bin_inside_pageheap(void *arg)
{
    (void)arg;
    lock_acquire(&pageheap.lock);
    (void)lock_try(bin_lock(0, 3));
    return 0;
}

Test(lock_order, a_try_lock_in_the_wrong_order_dies_too)
{
    char want[256];
    bin_inside_pageheap_line(want, sizeof want);
    expect_abort(try_bin_inside_pageheap, NULL, want);
}

/* Two locks of a rank whose locks are never held together. */
static int two_of_a_single_rank(void *arg)
{
    (void)arg;
    static lock_t a = LOCK_INITIALIZER(LOCK_RANK_GUARD), b = LOCK_INITIALIZER(LOCK_RANK_GUARD);
    lock_acquire(&a);
    lock_acquire(&b);
    return 0;
}

Test(lock_order, two_locks_of_a_rank_held_one_at_a_time_die_together)
{
    char want[256];
    snprintf(want, sizeof want, "tide: lock order: taking guard_lock (rank %d) while holding guard_lock (rank %d)\n",
             LOCK_RANK_GUARD, LOCK_RANK_GUARD);
    expect_abort(two_of_a_single_rank, NULL, want);
}

/* The bins of one arena in descending order (the walks take them ascending). */
static int bins_descending(void *arg)
{
    (void)arg;
    lock_acquire(bin_lock(0, 5));
    lock_acquire(bin_lock(0, 2));
    return 0;
}

Test(lock_order, bins_of_an_arena_taken_downwards_die)
{
    char want[256];
    snprintf(want, sizeof want,
             "tide: lock order: taking bin lock 0 at %p (rank %d) while holding bin lock 0 at %p (rank %d)\n",
             (void *)bin_lock(0, 2), LOCK_RANK_BIN, (void *)bin_lock(0, 5), LOCK_RANK_BIN);
    expect_abort(bins_descending, NULL, want);
}

/* Locks of a MANY rank go by their nth first (the bins: their arena), whatever their
 * addresses: arena 1's bin, then arena 0's, is the wrong order. */
static lock_t nth_locks[2];

static int nth_descending(void *arg)
{
    (void)arg;
    lock_init_nth(&nth_locks[0], LOCK_RANK_BIN, 1);
    lock_init_nth(&nth_locks[1], LOCK_RANK_BIN, 0);
    lock_acquire(&nth_locks[0]);
    lock_acquire(&nth_locks[1]);
    return 0;
}

Test(lock_order, a_later_arenas_bin_then_an_earlier_ones_dies)
{
    char want[256];
    snprintf(want, sizeof want,
             "tide: lock order: taking bin lock 0 at %p (rank %d) while holding bin lock 1 at %p (rank %d)\n",
             (void *)&nth_locks[1], LOCK_RANK_BIN, (void *)&nth_locks[0], LOCK_RANK_BIN);
    expect_abort(nth_descending, NULL, want);
}

static lock_t unranked_lock; /* zero: no rank */

static int unranked(void *arg)
{
    (void)arg;
    lock_acquire(&unranked_lock);
    return 0;
}

Test(lock_order, a_lock_without_a_rank_dies)
{
    char want[256];
    snprintf(want, sizeof want, "tide: lock order: an unranked lock at %p taken, which has no rank\n",
             (void *)&unranked_lock);
    expect_abort(unranked, NULL, want);
}

/* ---- the right order passes -------------------------------------------------------- */

static int up_the_ranks(void *arg)
{
    (void)arg;
    static lock_t init = LOCK_INITIALIZER(LOCK_RANK_INIT), meta = LOCK_INITIALIZER(LOCK_RANK_META);
    lock_acquire(&init);
    TT_CHILD_CHECK(lock_try(bin_lock(0, 3)), "a free bin lock could not be taken");
    lock_acquire(&pageheap.lock);
    lock_acquire(&meta);
    lock_release(&meta);
    lock_release(&pageheap.lock);
    lock_release(bin_lock(0, 3));
    lock_release(&init);
    return 0;
}

Test(lock_order, locks_taken_up_the_ranks_pass)
{
    expect_pass(up_the_ranks, NULL);
}

/* A lock released is forgotten: the page heap's, then a bin's, is no nesting. */
static int release_then_lower(void *arg)
{
    (void)arg;
    lock_acquire(&pageheap.lock);
    lock_release(&pageheap.lock);
    lock_acquire(bin_lock(0, 3));
    lock_acquire(&pageheap.lock); /* and nested the right way round */
    lock_release(&pageheap.lock);
    lock_release(bin_lock(0, 3));
    return 0;
}

Test(lock_order, a_released_lock_is_forgotten)
{
    expect_pass(release_then_lower, NULL);
}

/* Every bin of every arena, as fork and tide_check take them, then the page heap's. */
static int all_bins_then_pageheap(void *arg)
{
    (void)arg;
    arenas_lock_all();
    lock_acquire(&pageheap.lock);
    lock_release(&pageheap.lock);
    arenas_unlock_all();
    TT_CHILD_CHECK(tide_check() == 0, "tide_check() failed");
    return 0;
}

Test(lock_order, every_bin_in_order_passes)
{
    expect_pass(all_bins_then_pageheap, NULL);
}

/* ---- fork --------------------------------------------------------------------------- */

/* With a second thread the fork handlers take every lock of tide, rank by rank (lock.h),
 * each rank's in order; the parent releases them down the ranks, the child resets them.
 * The checks run in both: a fork_locks line out of order would kill the parent. */
static pthread_barrier_t fork_barrier;

static void *waiter(void *arg)
{
    (void)arg;
    free(malloc(64)); /* a thread cache, an arena with its transfer caches ready */
    pthread_barrier_wait(&fork_barrier);
    pthread_barrier_wait(&fork_barrier);
    return NULL;
}

static int child_allocates(void *arg)
{
    (void)arg;
    void *p[64];
    for (unsigned i = 0; i < 64; i++)
        TT_CHILD_CHECK((p[i] = malloc((size_t)16 << (i % 18))) != NULL, "malloc failed in the child");
    for (unsigned i = 0; i < 64; i++)
        free(p[i]);
    TT_CHILD_CHECK(tide_check() == 0, "tide_check() failed in the child");
    return 0;
}

Test(lock_order, a_fork_takes_every_lock_in_rank_order)
{
    pthread_t t;
    cr_assert_eq(pthread_barrier_init(&fork_barrier, NULL, 2), 0);
    cr_assert_eq(pthread_create(&t, NULL, waiter, NULL), 0);
    pthread_barrier_wait(&fork_barrier);
    for (int i = 0; i < 3; i++)
        expect_pass(child_allocates, NULL);
    void *p = malloc(100); /* and the parent goes on */
    cr_assert_not_null(p);
    free(p);
    pthread_barrier_wait(&fork_barrier);
    pthread_join(t, NULL);
    cr_assert_eq(tide_check(), 0);
}

/* ---- what a fork writes --------------------------------------------------------------- */

/* Whether the page holding ADDR is mapped by this process alone (/proc/self/pagemap bit
 * 56): after a fork, a page the parent has not written since is still shared with the
 * child; one it wrote was copied.  -1 if unknown. */
static int page_exclusive(const void *addr)
{
    /* (open and pread, not stdio: an allocation here would write a bin's page itself,
     * under tcache:off) */
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0)
        return -1;
    uint64_t e = 0;
    long page = sysconf(_SC_PAGESIZE);
    bool ok = pread(fd, &e, sizeof e, (off_t)((uintptr_t)addr / (uintptr_t)page * sizeof e)) == (ssize_t)sizeof e;
    close(fd);
    if (!ok || !(e >> 63 & 1))
        return -1;
    return (int)(e >> 56 & 1);
}

/* No thread was placed on arena I, nor did any bin of it ever make a slab. */
static bool arena_unused(unsigned i)
{
    for (unsigned c = 0; c < SC_NSMALL; c++)
        if (arenas[i]->counts[c].nslabs_made)
            return false;
    return arenas[i]->nthreads == 0;
}

static int fork_writes_no_arena_page(void *arg)
{
    (void)arg;
    pthread_t t;
    TT_CHILD_CHECK(pthread_barrier_init(&fork_barrier, NULL, 2) == 0, "pthread_barrier_init");
    TT_CHILD_CHECK(pthread_create(&t, NULL, waiter, NULL) == 0, "pthread_create");
    pthread_barrier_wait(&fork_barrier);
    free(malloc(64));
    /* An arena in the middle, with both neighbours, is joined only on a machine with more
     * CPUs than a quarter of the arenas; the first is every process's. */
    unsigned u = narenas / 2, j = 0;
    if (narenas < 3) {
        fprintf(stderr, "%u arenas: none between two that no thread joined", narenas);
        return 77;
    }
    TT_CHILD_CHECK(!arena_unused(j), "the first arena is unused");
    if (!arena_unused(u - 1) || !arena_unused(u) || !arena_unused(u + 1)) {
        fprintf(stderr, "arenas %u-%u were used", u - 1, u + 1);
        return 77;
    }
    int go[2];
    TT_CHILD_CHECK(pipe(go) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
    }
    TT_CHILD_CHECK(pid > 0, "fork");
    int joined[SC_NSMALL], unjoined = page_exclusive(bin_lock(u, SC_NSMALL / 2)), gate = page_exclusive(&tide_fork_gate);
    for (unsigned c = 0; c < SC_NSMALL; c++)
        joined[c] = page_exclusive(bin_lock(j, c));
    TT_CHILD_CHECK(write(go[1], "x", 1) == 1, "write");
    int st;
    TT_CHILD_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork's child failed");
    pthread_barrier_wait(&fork_barrier);
    pthread_join(t, NULL);
    if (unjoined < 0 || gate < 0) {
        fprintf(stderr, "/proc/self/pagemap gave no entry");
        return 77;
    }
    /* The handlers' own page is written (the gate goes down): the probe sees a write. */
    TT_CHILD_CHECK(gate == 1, "the page of the fork gate was not copied: did the fork run tide's handlers?");
    for (unsigned c = 0; c < SC_NSMALL; c++)
        TT_CHILD_CHECK(joined[c] != 1, "the fork wrote the page of bin %u of arena %u, which a thread joined: "
                       "a page fault for the parent at every fork", c, j);
    TT_CHILD_CHECK(unjoined == 0, "the fork wrote the page of arena %u's bins, which no thread has joined (%u arenas): "
                   "a page fault for the parent at every fork", u, narenas);
    return 0;
}

Test(lock_order, a_fork_writes_no_page_of_an_arenas_locks)
{
    struct tt_child_spec spec = { .fn = fork_writes_no_arena_page, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96];
    if (tt_child_exited(&c, 77))
        cr_skip_test("not measurable here: %s", c.err);
    cr_expect(tt_child_exited(&c, 0), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    tt_child_free(&c);
}

/* ---- the fork gate (lock.h) ----------------------------------------------------------- */

/* While the gate is up here, no thread of the test may allocate or assert (Criterion's
 * assertions may allocate): outside a fork, nothing holds the locks that let the forking
 * thread past it, and under tcache:off every allocation takes a bin lock.  What is seen
 * is kept, and asserted once the gate is down. */
static atomic_int gate_step;

/* Waits for the go, takes bin lock (0, 3) gated, then says so. */
static void *gated_taker(void *arg)
{
    (void)arg;
    while (atomic_load(&gate_step) != 1)
        sched_yield();
    lock_acquire_gated(bin_lock(0, 3));
    atomic_store(&gate_step, 2);
    lock_release(bin_lock(0, 3));
    return NULL;
}

Test(fork_gate, a_thread_that_takes_an_arenas_lock_while_it_is_up_sleeps_until_it_is_down)
{
    atomic_store(&gate_step, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, gated_taker, NULL), 0);
    lock_gate_raise();
    atomic_store(&gate_step, 1);
    /* It went to sleep on the gate (2: someone may sleep on it), the lock let go. */
    while (__atomic_load_n(&tide_fork_gate, __ATOMIC_SEQ_CST) != 2)
        sched_yield();
    int step_while_up = atomic_load(&gate_step), lock_was_free = lock_try(bin_lock(0, 3));
    if (lock_was_free)
        lock_release(bin_lock(0, 3));
    lock_gate_lower(LOCK_OP_RELEASE);
    pthread_join(t, NULL);
    cr_expect_eq(step_while_up, 1, "the thread went past the gate while it was up");
    cr_expect(lock_was_free, "the thread that met the gate kept the lock");
    cr_expect_eq(atomic_load(&gate_step), 2, "the thread did not take the lock once the gate was down");
    cr_expect_eq(tide_fork_gate, 0);
}

Test(fork_gate, a_thread_that_holds_another_lock_goes_past_it)
{
    /* (As the walks that take every bin do: the first taken before the gate went up.) */
    lock_acquire(bin_lock(0, 2));
    lock_gate_raise();
    lock_acquire_gated(bin_lock(0, 3));
    uint32_t gate_then = __atomic_load_n(&tide_fork_gate, __ATOMIC_SEQ_CST);
    lock_release(bin_lock(0, 3));
    lock_release(bin_lock(0, 2));
    lock_gate_lower(LOCK_OP_RELEASE);
    cr_expect_eq(gate_then, 1, "it slept on the gate");
}

static atomic_int holder_step;

static void *holder(void *arg)
{
    (void)arg;
    lock_acquire(bin_lock(0, 4));
    atomic_store(&holder_step, 1);
    while (atomic_load(&holder_step) != 2)
        sched_yield();
    atomic_store(&holder_step, 3);
    lock_release(bin_lock(0, 4));
    return NULL;
}

Test(fork_gate, the_handlers_pass_waits_for_the_holder_and_writes_no_free_lock)
{
    atomic_store(&holder_step, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, holder, NULL), 0);
    while (atomic_load(&holder_step) != 1)
        sched_yield();
    atomic_store(&holder_step, 2);
    lock_gate_pass(bin_lock(0, 4));
    int step_after_pass = atomic_load(&holder_step);
    pthread_join(t, NULL);
    cr_expect_eq(step_after_pass, 3, "the pass returned while the lock was held");
    /* A free lock is only read: its word stays as it was. */
    lock_t l;
    lock_init(&l, LOCK_RANK_BIN);
    lock_gate_pass(&l);
    cr_expect_eq(l.word, 0);
}
