/* SPDX-License-Identifier: MIT */
/*
 * rbtree.c - the intrusive red-black tree (src/rbtree.c) by itself: random sequences of
 * inserts and erases against a sorted array, with, after every step, the order both ways
 * (rb_first/rb_next, rb_last/rb_prev), the cached leftmost node, rb_lower_bound, the parent
 * links and the red-black rules (a black root, no red node with a red child, the same
 * number of black nodes on every path) checked by a walk.
 */
#include <criterion/criterion.h>

#include "support.h"

#include "rbtree.h"
#include "util.h"

#define NNODES 1024

struct item {
    rb_node_t rb;
    unsigned key;
    bool in;
};

static struct item items[NNODES];
static struct item *ref[NNODES]; /* the reference: the items in the tree, in order */
static size_t nref;

static int item_cmp(const rb_node_t *a, const rb_node_t *b)
{
    unsigned x = container_of(a, struct item, rb)->key, y = container_of(b, struct item, rb)->key;
    return x < y ? -1 : x > y;
}

static int item_cmp_key(const rb_node_t *a, const void *key)
{
    return container_of(a, struct item, rb)->key < *(const unsigned *)key ? -1 : 0;
}

static struct item *item_of(rb_node_t *n) { return n ? container_of(n, struct item, rb) : NULL; }
static bool is_black(const rb_node_t *n) { return !n || (n->parent_color & 1); }

/* Equal keys go to the right: an item goes after every item of its key. */
static void ref_insert(struct item *it)
{
    size_t i = nref;
    while (i > 0 && ref[i - 1]->key > it->key)
        i--;
    memmove(ref + i + 1, ref + i, (nref - i) * sizeof *ref);
    ref[i] = it;
    nref++;
}

static void ref_erase(struct item *it)
{
    size_t i = 0;
    while (ref[i] != it)
        i++;
    memmove(ref + i, ref + i + 1, (nref - i - 1) * sizeof *ref);
    nref--;
}

/* The black height of N's subtree, checking the rules and the links below it; the count
 * of nodes goes to *COUNT. */
static int walk(const rb_node_t *n, const rb_node_t *parent, size_t *count, const char *when)
{
    if (!n)
        return 1;
    cr_assert_eq(rb_parent(n), parent, "%s: a node's parent link is wrong", when);
    cr_assert((n->parent_color & 2) == 0, "%s: bit 1 of parent_color is set", when);
    if (!is_black(n))
        cr_assert(is_black(n->left) && is_black(n->right), "%s: a red node (key %u) has a red child", when,
                  item_of((rb_node_t *)n)->key);
    unsigned k = item_of((rb_node_t *)n)->key;
    if (n->left)
        cr_assert_leq(item_of(n->left)->key, k, "%s: a left child orders after its parent", when);
    if (n->right)
        cr_assert_geq(item_of(n->right)->key, k, "%s: a right child orders before its parent", when);
    int lh = walk(n->left, n, count, when), rh = walk(n->right, n, count, when);
    cr_assert_eq(lh, rh, "%s: black heights %d and %d below key %u", when, lh, rh, k);
    (*count)++;
    return lh + (is_black(n) ? 1 : 0);
}

static void check_tree(const rb_root_t *root, const char *when)
{
    cr_assert(is_black(root->node), "%s: the root is red", when);
    size_t count = 0;
    int bh = walk(root->node, NULL, &count, when);
    cr_assert_eq(count, nref, "%s: %zu nodes in the tree, %zu in the reference", when, count, nref);
    /* A red-black tree of n nodes has a black height of at most log2(n + 1) + 1. */
    cr_assert_leq(1u << (bh - 1), nref + 1, "%s: black height %d for %zu nodes", when, bh, nref);
    cr_assert_eq(rb_empty(root), nref == 0, "%s: rb_empty", when);
    cr_assert_eq(item_of(rb_first(root)), nref ? ref[0] : NULL, "%s: the cached leftmost node is wrong", when);
    cr_assert_eq(item_of(rb_last(root)), nref ? ref[nref - 1] : NULL, "%s: rb_last is wrong", when);
    size_t i = 0;
    for (rb_node_t *n = rb_first(root); n; n = rb_next(n), i++)
        cr_assert(i < nref && item_of(n) == ref[i], "%s: rb_next: position %zu is wrong", when, i);
    cr_assert_eq(i, nref, "%s: rb_next walked %zu of %zu", when, i, nref);
    for (rb_node_t *n = rb_last(root); n; n = rb_prev(n), i--)
        cr_assert(i > 0 && item_of(n) == ref[i - 1], "%s: rb_prev: position %zu is wrong", when, i - 1);
    cr_assert_eq(i, 0, "%s: rb_prev stopped %zu short", when, i);
}

/* The first item whose key is not below KEY, from the reference. */
static struct item *ref_lower_bound(unsigned key)
{
    for (size_t i = 0; i < nref; i++)
        if (ref[i]->key >= key)
            return ref[i];
    return NULL;
}

/* OPS random steps, inserting with probability INSERT_PCT %, keys in [0, KEYS). */
static void random_steps(uint64_t seed, unsigned ops, unsigned insert_pct, unsigned keys)
{
    rb_root_t root = RB_ROOT_INIT;
    memset(items, 0, sizeof items);
    nref = 0;
    tt_rng r = { seed };
    char when[96];
    for (unsigned op = 0; op < ops; op++) {
        struct item *it = &items[tt_below(&r, NNODES)];
        bool insert = tt_below(&r, 100) < insert_pct;
        if (insert && !it->in) {
            it->key = (unsigned)tt_below(&r, keys);
            rb_insert(&root, &it->rb, item_cmp);
            ref_insert(it);
            it->in = true;
            snprintf(when, sizeof when, "seed %#llx, step %u: insert of key %u", (unsigned long long)seed, op, it->key);
        } else if (!insert && it->in) {
            rb_erase(&it->rb, &root);
            ref_erase(it);
            it->in = false;
            snprintf(when, sizeof when, "seed %#llx, step %u: erase of key %u", (unsigned long long)seed, op, it->key);
        } else {
            continue;
        }
        check_tree(&root, when);
        unsigned probe = (unsigned)tt_below(&r, keys + 1);
        cr_assert_eq(item_of(rb_lower_bound(&root, &probe, item_cmp_key)), ref_lower_bound(probe),
                     "%s: rb_lower_bound(%u) is wrong", when, probe);
    }
    /* Empty it in key order, then from the right: the leftmost cache must follow. */
    while (nref) {
        struct item *it = (nref & 1) ? ref[0] : ref[nref - 1];
        rb_erase(&it->rb, &root);
        ref_erase(it);
        it->in = false;
        check_tree(&root, "emptying");
    }
}

Test(rbtree, random_inserts_and_erases_with_duplicate_keys, .timeout = 120)
{
    for (uint64_t seed = 1; seed <= 4; seed++)
        random_steps(seed, 6000, 60, 64);
}

Test(rbtree, random_inserts_and_erases_with_distinct_keys, .timeout = 120)
{
    for (uint64_t seed = 11; seed <= 14; seed++)
        random_steps(seed, 6000, 70, 1u << 30);
}

Test(rbtree, growing_then_shrinking, .timeout = 120) { random_steps(99, 8000, 90, 4096); }

Test(rbtree, ascending_and_descending_inserts)
{
    rb_root_t root = RB_ROOT_INIT;
    memset(items, 0, sizeof items);
    nref = 0;
    /* Sorted input is the classic worst case of an unbalanced tree. */
    for (unsigned i = 0; i < NNODES / 2; i++) {
        items[i].key = i;
        rb_insert(&root, &items[i].rb, item_cmp);
        ref_insert(&items[i]);
    }
    check_tree(&root, "after ascending inserts");
    for (unsigned i = NNODES / 2; i < NNODES; i++) {
        items[i].key = NNODES - i;
        rb_insert(&root, &items[i].rb, item_cmp);
        ref_insert(&items[i]);
    }
    check_tree(&root, "after descending inserts");
}
