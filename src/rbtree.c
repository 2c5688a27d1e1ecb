/* SPDX-License-Identifier: MIT */
/* rbtree.c - red-black tree rebalancing (the classic algorithms, with NULL leaves). */
#include "rbtree.h"

#define RB_RED 0
#define RB_BLACK 1

static inline int rb_color(const rb_node_t *n) { return (int)(n->parent_color & 1); }
static inline bool rb_is_red(const rb_node_t *n) { return n && rb_color(n) == RB_RED; }
static inline bool rb_is_black(const rb_node_t *n) { return !n || rb_color(n) == RB_BLACK; }
static inline void rb_set_parent(rb_node_t *n, rb_node_t *p)
{
    n->parent_color = (n->parent_color & 3) | (uintptr_t)p;
}
static inline void rb_set_color(rb_node_t *n, int c) { n->parent_color = (n->parent_color & ~(uintptr_t)1) | (uintptr_t)c; }
static inline void rb_set_red(rb_node_t *n) { rb_set_color(n, RB_RED); }
static inline void rb_set_black(rb_node_t *n) { rb_set_color(n, RB_BLACK); }

static void rb_replace_child(rb_node_t *old, rb_node_t *new, rb_node_t *parent, rb_root_t *root)
{
    if (!parent)
        root->node = new;
    else if (parent->left == old)
        parent->left = new;
    else
        parent->right = new;
}

static void rb_rotate_left(rb_node_t *x, rb_root_t *root)
{
    rb_node_t *y = x->right, *p = rb_parent(x);
    x->right = y->left;
    if (y->left)
        rb_set_parent(y->left, x);
    y->left = x;
    rb_set_parent(y, p);
    rb_replace_child(x, y, p, root);
    rb_set_parent(x, y);
}

static void rb_rotate_right(rb_node_t *x, rb_root_t *root)
{
    rb_node_t *y = x->left, *p = rb_parent(x);
    x->left = y->right;
    if (y->right)
        rb_set_parent(y->right, x);
    y->right = x;
    rb_set_parent(y, p);
    rb_replace_child(x, y, p, root);
    rb_set_parent(x, y);
}

void rb_insert_color(rb_node_t *node, rb_root_t *root)
{
    rb_node_t *parent, *gparent;
    while ((parent = rb_parent(node)) && rb_is_red(parent)) {
        gparent = rb_parent(parent);
        if (parent == gparent->left) {
            rb_node_t *uncle = gparent->right;
            if (rb_is_red(uncle)) {
                rb_set_black(uncle);
                rb_set_black(parent);
                rb_set_red(gparent);
                node = gparent;
                continue;
            }
            if (parent->right == node) {
                rb_rotate_left(parent, root);
                rb_node_t *t = parent;
                parent = node;
                node = t;
            }
            rb_set_black(parent);
            rb_set_red(gparent);
            rb_rotate_right(gparent, root);
        } else {
            rb_node_t *uncle = gparent->left;
            if (rb_is_red(uncle)) {
                rb_set_black(uncle);
                rb_set_black(parent);
                rb_set_red(gparent);
                node = gparent;
                continue;
            }
            if (parent->left == node) {
                rb_rotate_right(parent, root);
                rb_node_t *t = parent;
                parent = node;
                node = t;
            }
            rb_set_black(parent);
            rb_set_red(gparent);
            rb_rotate_left(gparent, root);
        }
    }
    rb_set_black(root->node);
}

static void rb_erase_color(rb_node_t *node, rb_node_t *parent, rb_root_t *root)
{
    rb_node_t *other;
    while (rb_is_black(node) && node != root->node) {
        if (parent->left == node) {
            other = parent->right;
            if (rb_is_red(other)) {
                rb_set_black(other);
                rb_set_red(parent);
                rb_rotate_left(parent, root);
                other = parent->right;
            }
            if (rb_is_black(other->left) && rb_is_black(other->right)) {
                rb_set_red(other);
                node = parent;
                parent = rb_parent(node);
            } else {
                if (rb_is_black(other->right)) {
                    rb_set_black(other->left);
                    rb_set_red(other);
                    rb_rotate_right(other, root);
                    other = parent->right;
                }
                rb_set_color(other, rb_color(parent));
                rb_set_black(parent);
                rb_set_black(other->right);
                rb_rotate_left(parent, root);
                node = root->node;
                break;
            }
        } else {
            other = parent->left;
            if (rb_is_red(other)) {
                rb_set_black(other);
                rb_set_red(parent);
                rb_rotate_right(parent, root);
                other = parent->left;
            }
            if (rb_is_black(other->left) && rb_is_black(other->right)) {
                rb_set_red(other);
                node = parent;
                parent = rb_parent(node);
            } else {
                if (rb_is_black(other->left)) {
                    rb_set_black(other->right);
                    rb_set_red(other);
                    rb_rotate_left(other, root);
                    other = parent->left;
                }
                rb_set_color(other, rb_color(parent));
                rb_set_black(parent);
                rb_set_black(other->left);
                rb_rotate_right(parent, root);
                node = root->node;
                break;
            }
        }
    }
    if (node)
        rb_set_black(node);
}

void rb_erase(rb_node_t *node, rb_root_t *root)
{
    rb_node_t *child, *parent;
    int color;

    if (root->leftmost == node)
        root->leftmost = rb_next(node);

    if (!node->left) {
        child = node->right;
    } else if (!node->right) {
        child = node->left;
    } else {
        rb_node_t *old = node, *left;
        node = node->right;
        while ((left = node->left) != NULL)
            node = left;
        rb_replace_child(old, node, rb_parent(old), root);

        child = node->right;
        parent = rb_parent(node);
        color = rb_color(node);
        if (parent == old) {
            parent = node;
        } else {
            if (child)
                rb_set_parent(child, parent);
            parent->left = child;
            node->right = old->right;
            rb_set_parent(old->right, node);
        }
        node->parent_color = old->parent_color;
        node->left = old->left;
        rb_set_parent(old->left, node);
        goto fixup;
    }

    parent = rb_parent(node);
    color = rb_color(node);
    if (child)
        rb_set_parent(child, parent);
    rb_replace_child(node, child, parent, root);
fixup:
    if (color == RB_BLACK)
        rb_erase_color(child, parent, root);
}

rb_node_t *rb_next(const rb_node_t *node)
{
    rb_node_t *parent;
    if (node->right) {
        node = node->right;
        while (node->left)
            node = node->left;
        return (rb_node_t *)node;
    }
    while ((parent = rb_parent(node)) && node == parent->right)
        node = parent;
    return parent;
}

rb_node_t *rb_prev(const rb_node_t *node)
{
    rb_node_t *parent;
    if (node->left) {
        node = node->left;
        while (node->right)
            node = node->right;
        return (rb_node_t *)node;
    }
    while ((parent = rb_parent(node)) && node == parent->left)
        node = parent;
    return parent;
}
