/* SPDX-License-Identifier: MIT */
/* list.h - intrusive circular doubly-linked list (the node lives in the object). */
#ifndef TIDE_LIST_H
#define TIDE_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct list_node_s {
    struct list_node_s *prev, *next;
} list_node_t;

static inline void list_init(list_node_t *head) { head->prev = head->next = head; }
static inline bool list_empty(const list_node_t *head) { return head->next == head; }

static inline void list_insert_after(list_node_t *pos, list_node_t *n)
{
    n->prev = pos;
    n->next = pos->next;
    pos->next->prev = n;
    pos->next = n;
}
static inline void list_push_back(list_node_t *head, list_node_t *n) { list_insert_after(head->prev, n); }
static inline void list_remove(list_node_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
static inline list_node_t *list_first(const list_node_t *head) { return list_empty(head) ? NULL : head->next; }

#endif
