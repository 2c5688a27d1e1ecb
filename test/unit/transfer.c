/* SPDX-License-Identifier: MIT */
/*
 * transfer.c - the transfer caches (src/transfer.c, through transfer.h) by themselves: a
 * stack of lists per arena and class, newest first; at most 32 lists and 1 MiB a class,
 * 2 MiB an arena; a refused list stays the caller's; draining gives every list back to
 * its slabs, and draining the idle ones skips the classes a list was taken from since.
 *
 * The caches are the process's, so each case runs in a forked child through the child
 * runner: one thread, on arenas no thread is placed on, and the child allocates nothing
 * (a malloc could flush a thread cache into a transfer cache, and a large one could drain
 * the idle ones).  The lists are real: regions taken from the arenas' bins (arena_fill),
 * so that a drain returns them, which the bins' counts of live regions show.
 */
#include <criterion/criterion.h>

#include "support.h"

#include "arena.h"
#include "freelist.h"
#include "size_class_table.h"
#include "transfer.h"
#include "util.h"

#define CHECK TT_CHILD_CHECK

/* transfer.c's limits (TRANSFER_SLOTS, TRANSFER_CLASS_MAX_BYTES, TRANSFER_ARENA_MAX_BYTES):
 * what its header promises as "a bounded number of bytes", pinned down. */
#define SLOTS 32
#define CLASS_MAX ((size_t)1024 << 10)
#define ARENA_MAX ((size_t)2048 << 10)

/* Classes of the cases, by size. */
enum { C16 = 0, C64 = 3, C128 = 7, C512 = 15, C2048 = 23, C4096 = 27 };

static unsigned A, B; /* two arenas no thread is placed on */

/* ---- lists of regions ------------------------------------------------------------------- */

struct list {
    void *head;
    unsigned n;
    unsigned cls;
    unsigned arena;
};

static size_t live(unsigned arena, unsigned cls) { return arenas[arena]->bins[cls].nregs_live; }

/* N regions of CLS from ARENA's bin. */
static struct list fill(unsigned arena, unsigned cls, unsigned n)
{
    struct list l = { NULL, 0, cls, arena };
    l.n = arena_fill(arena, cls, &l.head, n);
    CHECK(l.n == n, "arena_fill(%u, class %u, %u) gave %u regions", arena, cls, n, l.n);
    return l;
}

static unsigned length(void *head)
{
    unsigned n = 0;
    for (void **p = head; p; p = fl_next(p))
        n++;
    return n;
}

/* The I-th region of list HEAD. */
static void *nth(void *head, unsigned i)
{
    void **p = head;
    while (i--)
        p = fl_next(p);
    return p;
}

static bool push(const struct list *l) { return transfer_push(l->arena, l->cls, l->head, l->n); }

/* The next pop of ARENA's CLS must give back list L whole. */
static void expect_pop(int line, unsigned arena, unsigned cls, const struct list *l)
{
    void *head = NULL;
    unsigned n = transfer_pop(arena, cls, &head);
    if (n != l->n || head != l->head)
        tt_child_fail(__FILE__, line, "expect_pop", "arena %u class %u: popped %u regions at %p, want the list of %u at %p",
                      arena, cls, n, head, l->n, l->head);
    if (length(head) != n)
        tt_child_fail(__FILE__, line, "expect_pop", "the list popped holds %u regions, not %u", length(head), n);
}
#define EXPECT_POP(arena, cls, l) expect_pop(__LINE__, (arena), (cls), (l))

static void expect_empty(int line, unsigned arena, unsigned cls)
{
    void *head = NULL;
    unsigned n = transfer_pop(arena, cls, &head);
    if (n != 0)
        tt_child_fail(__FILE__, line, "expect_empty", "arena %u class %u: popped a list of %u regions", arena, cls, n);
}
#define EXPECT_EMPTY(arena, cls) expect_empty(__LINE__, (arena), (cls))

static void give_back(struct list *l)
{
    arena_return_list(l->head, l->n, l->cls, "free");
    l->head = NULL;
}

/* ---- the child's set-up ------------------------------------------------------------------- */

/* Picks A and B, makes their caches usable, and leaves every cache of the process empty
 * with no list taken since the last drain. */
static void setup(void)
{
    unsigned found[2], nfound = 0;
    for (unsigned i = narenas; i-- > 0 && nfound < 2;)
        if (ATOMIC_LOAD(&arenas[i]->nthreads) == 0)
            found[nfound++] = i;
    CHECK(nfound == 2, "%u of %u arenas have no thread", nfound, narenas);
    A = found[0];
    B = found[1];
    transfer_arena_ready(A);
    transfer_arena_ready(B);
    /* A drain resets the idle count only of the classes it finds holding a list: one
     * list in every class of A and B, then a drain, so that no earlier take counts. */
    size_t base[2][SC_NSMALL];
    for (unsigned k = 0; k < 2; k++)
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            unsigned a = k ? B : A;
            base[k][c] = live(a, c);
            struct list l = fill(a, c, 1);
            CHECK(push(&l), "arena %u class %u refused one region", a, c);
        }
    transfer_drain();
    for (unsigned k = 0; k < 2; k++)
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            unsigned a = k ? B : A;
            CHECK(live(a, c) == base[k][c], "arena %u class %u: %zu live regions after the drain, %zu before", a, c,
                  live(a, c), base[k][c]);
            EXPECT_EMPTY(a, c);
        }
    CHECK(tide_check() == 0, "tide_check() failed after the set-up");
}

/* ---- the cases (each runs in a child) --------------------------------------------------- */

/* Lists come back newest first, whole, from the arena and class they went to only. */
static int lifo_case(void *unused)
{
    setup();
    struct list l[5];
    for (unsigned i = 0; i < 5; i++) {
        l[i] = fill(A, C64, i + 1);
        CHECK(push(&l[i]), "list %u refused", i);
    }
    CHECK(transfer_holds(C64, l[0].head) && transfer_holds(C64, nth(l[4].head, 2)) &&
              transfer_holds(C64, nth(l[4].head, 4)),
          "a region of a held list is not found held");
    CHECK(!transfer_holds(C128, l[0].head), "a region is found held under another class");
    EXPECT_EMPTY(B, C64);
    EXPECT_EMPTY(A, C128);
    EXPECT_POP(A, C64, &l[4]);
    CHECK(!transfer_holds(C64, l[4].head), "a popped region is still found held");
    EXPECT_POP(A, C64, &l[3]);
    /* A push after pops goes on top. */
    struct list x = fill(A, C64, 7);
    CHECK(push(&x), "a push after pops was refused");
    EXPECT_POP(A, C64, &x);
    for (unsigned i = 3; i-- > 0;)
        EXPECT_POP(A, C64, &l[i]);
    EXPECT_EMPTY(A, C64);
    give_back(&x);
    for (unsigned i = 0; i < 5; i++)
        give_back(&l[i]);
    CHECK(tide_check() == 0, "tide_check() failed");
    return 0;
}

/* A class holds at most 32 lists, whatever their size; a refused list is not kept (nor
 * touched), and a pop makes room for one more. */
static int slots_case(void *unused)
{
    setup();
    struct list l[SLOTS + 1];
    for (unsigned i = 0; i < SLOTS; i++) {
        l[i] = fill(A, C16, 1);
        CHECK(push(&l[i]), "list %u of %d refused", i, SLOTS);
    }
    l[SLOTS] = fill(A, C16, 3);
    CHECK(!push(&l[SLOTS]), "a list beyond %d was kept", SLOTS);
    CHECK(length(l[SLOTS].head) == 3 && !transfer_holds(C16, l[SLOTS].head), "the refused list was changed or kept");
    struct list other = fill(A, C64, 1); /* another class of the same arena has room */
    CHECK(push(&other), "a full class refused a list of another class");
    EXPECT_POP(A, C16, &l[SLOTS - 1]);
    CHECK(push(&l[SLOTS]), "no room after a pop");
    EXPECT_POP(A, C16, &l[SLOTS]);
    for (unsigned i = SLOTS - 1; i-- > 0;)
        EXPECT_POP(A, C16, &l[i]);
    EXPECT_EMPTY(A, C16);
    EXPECT_POP(A, C64, &other);
    for (unsigned i = 0; i <= SLOTS; i++)
        give_back(&l[i]);
    give_back(&other);
    return 0;
}

/* A class holds at most CLASS_MAX: a list that would pass it is refused, one that reaches
 * it exactly is kept; a pop gives its bytes back. */
static int class_bytes_case(void *unused)
{
    setup();
    const unsigned per = (unsigned)(CLASS_MAX / sc_size[C4096]); /* 256 */
    struct list a = fill(A, C4096, per - 28), b = fill(A, C4096, 29), c = fill(A, C4096, 28), d = fill(A, C4096, 1);
    CHECK(push(&a), "%u KiB refused", (unsigned)((per - 28) * 4));
    CHECK(!push(&b), "a list passing the class's bytes was kept");
    CHECK(push(&c), "a list reaching the class's bytes exactly was refused");
    CHECK(!push(&d), "one region beyond the class's bytes was kept");
    /* Another class of the arena, and the same class of another arena, have their own. */
    struct list e = fill(A, C2048, 1), f = fill(B, C4096, per);
    CHECK(push(&e), "a class's limit refused another class");
    CHECK(push(&f), "a class's limit refused another arena");
    EXPECT_POP(A, C4096, &c);
    CHECK(push(&d), "no room after a pop");
    EXPECT_POP(A, C4096, &d);
    EXPECT_POP(A, C4096, &a);
    EXPECT_POP(A, C2048, &e);
    EXPECT_POP(B, C4096, &f);
    struct list *all[] = { &a, &b, &c, &d, &e, &f };
    for (unsigned i = 0; i < ARRAY_SIZE(all); i++)
        give_back(all[i]);
    return 0;
}

/* An arena holds at most ARENA_MAX (two classes' worth) over its classes: then every class of it refuses, the
 * other arena does not; a refused push costs nothing (the budget is exact after many). */
static int arena_bytes_case(void *unused)
{
    setup();
    struct list big4 = fill(A, C4096, (unsigned)(CLASS_MAX / 4096));       /* CLASS_MAX */
    struct list big2a = fill(A, C2048, (unsigned)(CLASS_MAX / 2048 / 2));   /* CLASS_MAX / 2 */
    struct list big2b = fill(A, C2048, (unsigned)(CLASS_MAX / 2048 / 2));   /* CLASS_MAX / 2 */
    CHECK(push(&big4) && push(&big2a) && push(&big2b), "ARENA_MAX in two classes refused");
    struct list one = fill(A, C16, 1), oneb = fill(B, C16, 1);
    for (int i = 0; i < 100; i++)
        CHECK(!push(&one), "a region beyond the arena's bytes was kept (try %d)", i);
    CHECK(push(&oneb), "the other arena refused: budgets are per arena");
    /* CLASS_MAX / 2 back: exactly that fits again, in another class, and no byte more. */
    EXPECT_POP(A, C2048, &big2b);
    struct list c512 = fill(A, C512, (unsigned)(CLASS_MAX / 2 / 512));
    CHECK(push(&c512), "CLASS_MAX / 2 refused after as much was popped (a refused push leaked budget?)");
    CHECK(!push(&one), "a region beyond the arena's bytes was kept after the pop");
    EXPECT_POP(A, C512, &c512);
    CHECK(push(&one), "one region refused with CLASS_MAX / 2 free");
    EXPECT_POP(A, C16, &one);
    EXPECT_POP(A, C2048, &big2a);
    EXPECT_POP(A, C4096, &big4);
    EXPECT_POP(B, C16, &oneb);
    /* Empty again: the whole ARENA_MAX is there. */
    struct list again4 = fill(A, C4096, (unsigned)(CLASS_MAX / 4096)), again2 = fill(A, C2048, (unsigned)(CLASS_MAX / 2048));
    CHECK(push(&again4) && push(&again2), "ARENA_MAX refused once the arena's cache was empty again");
    EXPECT_POP(A, C2048, &again2);
    EXPECT_POP(A, C4096, &again4);
    struct list *all[] = { &big4, &big2a, &big2b, &one, &oneb, &c512, &again4, &again2 };
    for (unsigned i = 0; i < ARRAY_SIZE(all); i++)
        give_back(all[i]);
    CHECK(tide_check() == 0, "tide_check() failed");
    return 0;
}

/* transfer_drain_idle() gives back the lists of the classes no list was taken from since
 * its last call, per arena and class, and keeps the others until the next call;
 * transfer_drain() gives back everything.  A pop that finds nothing is no take. */
static int drain_case(void *unused)
{
    setup();
    size_t l64 = live(A, C64), l128 = live(A, C128), lb64 = live(B, C64);
    struct list x1 = fill(A, C64, 10), x2 = fill(A, C64, 20), y1 = fill(A, C128, 5), y2 = fill(A, C128, 6);
    struct list z = fill(B, C64, 9);
    EXPECT_EMPTY(A, C128); /* finds nothing: not a take */
    CHECK(push(&x1) && push(&x2) && push(&y1) && push(&y2) && push(&z), "a push was refused");
    EXPECT_POP(A, C64, &x2); /* a take from A's 64-byte class */
    transfer_drain_idle();
    CHECK(live(A, C128) == l128, "A's idle 128-byte lists were not given back (%zu live, %zu before)", live(A, C128),
          l128);
    CHECK(live(B, C64) == lb64, "B's idle 64-byte list was not given back: a take in A kept it");
    CHECK(transfer_holds(C64, x1.head) && live(A, C64) == l64 + 30, "A's 64-byte list taken from was drained");
    EXPECT_EMPTY(A, C128);
    EXPECT_EMPTY(B, C64);
    transfer_drain_idle(); /* no take since the last call: now it goes */
    CHECK(!transfer_holds(C64, x1.head) && live(A, C64) == l64 + 20,
          "A's 64-byte list was kept by a second drain with no take between (%zu live, want %zu)", live(A, C64),
          l64 + 20);
    EXPECT_EMPTY(A, C64);
    give_back(&x2);
    CHECK(live(A, C64) == l64, "%zu 64-byte regions live, %zu before", live(A, C64), l64);

    /* transfer_drain() ignores takes. */
    size_t lb128 = live(B, C128);
    struct list w1 = fill(A, C64, 4), w2 = fill(A, C64, 4), v = fill(B, C128, 3);
    CHECK(push(&w1) && push(&w2) && push(&v), "a push was refused");
    EXPECT_POP(A, C64, &w2);
    transfer_drain();
    CHECK(live(A, C64) == l64 + 4 && live(B, C128) == lb128 && !transfer_holds(C64, w1.head) &&
              !transfer_holds(C128, v.head),
          "transfer_drain() kept a list");
    EXPECT_EMPTY(A, C64);
    EXPECT_EMPTY(B, C128);
    give_back(&w2);
    CHECK(tide_check() == 0, "tide_check() failed after the drains");
    return 0;
}

/* A take counts until the next drain, also when that drain finds the class empty: a list
 * pushed after it and left alone goes at the drain after. */
static int drain_after_empty_case(void *unused)
{
    setup();
    size_t l64 = live(A, C64);
    struct list x = fill(A, C64, 7);
    CHECK(push(&x), "a push was refused");
    EXPECT_POP(A, C64, &x); /* a take; the class is empty again */
    transfer_drain_idle();  /* sees the take, in an empty class */
    struct list y = fill(A, C64, 5);
    CHECK(push(&y), "a push was refused");
    transfer_drain_idle(); /* no take since the last call */
    CHECK(!transfer_holds(C64, y.head) && live(A, C64) == l64 + 7,
          "an idle list pushed after a drain of the emptied class was kept (%zu live, want %zu)", live(A, C64),
          l64 + 7);
    give_back(&x);
    CHECK(tide_check() == 0, "tide_check() failed after the drains");
    return 0;
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* Every case hands lists between two arenas. */
static void in_child(int (*fn)(void *))
{
    tt_skip_under("arenas:1", "it needs two arenas");
    free(malloc(1)); /* tide is up */
    tt_assert_child_ok(fn, NULL, 120);
}

Test(transfer, lists_come_back_newest_first, .timeout = 180)
{
    in_child(lifo_case);
}
Test(transfer, a_class_holds_at_most_32_lists, .timeout = 180)
{
    in_child(slots_case);
}
Test(transfer, a_class_holds_at_most_1_mib, .timeout = 180)
{
    in_child(class_bytes_case);
}
Test(transfer, an_arena_holds_at_most_2_mib, .timeout = 180)
{
    in_child(arena_bytes_case);
}
Test(transfer, draining_idle_skips_the_classes_taken_from, .timeout = 180)
{
    in_child(drain_case);
}
Test(transfer, a_take_counts_once_also_in_an_emptied_class, .timeout = 180)
{
    in_child(drain_after_empty_case);
}
