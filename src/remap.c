/* remap.c - the large-realloc path (in place / mremap move / copy). */
#include "remap.h"

static uint64_t remap_in_place, remap_copies; /* atomic */

void remap_init(void) {}
void *remap_grow(extent_t *e, size_t usable)
{
    (void)e;
    (void)usable;
    return NULL;
}
void remap_before_free(extent_t *e) { (void)e; }
void remap_count_in_place(void) { ATOMIC_ADD(&remap_in_place, 1); }
void remap_count_copy(extent_t *e)
{
    (void)e;
    ATOMIC_ADD(&remap_copies, 1);
}
void remap_prefork(void) {}
void remap_postfork_parent(void) {}
void remap_postfork_child(void) {}
void remap_stats(remap_stats_t *out)
{
    out->moves = out->heals = out->live = 0;
    out->copies = ATOMIC_LOAD(&remap_copies);
    out->in_place = ATOMIC_LOAD(&remap_in_place);
}
