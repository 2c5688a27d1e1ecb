/* SPDX-License-Identifier: MIT */
/* rbtree.h - intrusive red-black tree, in the manner of Linux's include/linux/rbtree.h.
 *
 * The node is embedded in the object it orders and the tree never allocates, so the
 * allocator can keep its own free lists in it.  The caller owns ordering: rb_insert()
 * takes a comparison function that is inlined at each call site.  The root caches its
 * leftmost node, so "smallest" is O(1). */
#ifndef TIDE_RBTREE_H
#define TIDE_RBTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rb_node_s {
    uintptr_t parent_color; /* parent pointer | colour in bit 0 (1 = black) */
    struct rb_node_s *left, *right;
} rb_node_t;

typedef struct rb_root_s {
    rb_node_t *node;
    rb_node_t *leftmost;
} rb_root_t;

#define RB_ROOT_INIT { NULL, NULL }

static inline rb_node_t *rb_parent(const rb_node_t *n) { return (rb_node_t *)(n->parent_color & ~(uintptr_t)3); }
static inline bool rb_empty(const rb_root_t *r) { return r->node == NULL; }
static inline rb_node_t *rb_first(const rb_root_t *r) { return r->leftmost; }
static inline rb_node_t *rb_last(const rb_root_t *r)
{
    rb_node_t *n = r->node;
    while (n && n->right)
        n = n->right;
    return n;
}

/* Rebalance after linking NODE (red) below PARENT. */
void rb_insert_color(rb_node_t *node, rb_root_t *root);
void rb_erase(rb_node_t *node, rb_root_t *root);
rb_node_t *rb_next(const rb_node_t *node);
rb_node_t *rb_prev(const rb_node_t *node);

/* Insert NODE; CMP(a, b) < 0 when a orders before b.  Equal keys go to the right. */
static inline __attribute__((always_inline)) void
rb_insert(rb_root_t *root, rb_node_t *node, int (*cmp)(const rb_node_t *, const rb_node_t *))
{
    rb_node_t **link = &root->node, *parent = NULL;
    bool leftmost = true;
    while (*link) {
        parent = *link;
        if (cmp(node, parent) < 0) {
            link = &parent->left;
        } else {
            link = &parent->right;
            leftmost = false;
        }
    }
    node->parent_color = (uintptr_t)parent; /* red */
    node->left = node->right = NULL;
    *link = node;
    if (leftmost)
        root->leftmost = node;
    rb_insert_color(node, root);
}

/* The first node that does not order before KEY (KEY need not be in the tree):
 * CMP_KEY(node, key) < 0 when node orders before key. */
static inline __attribute__((always_inline)) rb_node_t *
rb_lower_bound(const rb_root_t *root, const void *key, int (*cmp_key)(const rb_node_t *, const void *))
{
    rb_node_t *n = root->node, *best = NULL;
    while (n) {
        if (cmp_key(n, key) < 0) {
            n = n->right;
        } else {
            best = n;
            n = n->left;
        }
    }
    return best;
}

#endif
