/* arena.c - slabs of small regions, refilled into thread caches and returned from them. */
#include "arena.h"

#include <errno.h>
#include <string.h>

#include "freelist.h"
#include "meta.h"
#include "pagemap.h"
#include "report.h"
#include "size_class.h"

arena_t **arenas;
unsigned narenas;

static int slab_cmp(const rb_node_t *a, const rb_node_t *b)
{
    const extent_t *x = container_of(a, extent_t, rb), *y = container_of(b, extent_t, rb);
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int arenas_init(unsigned n)
{
    arenas = meta_alloc(n * sizeof(arena_t *));
    if (!arenas)
        return ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = meta_alloc(sizeof(arena_t));
        if (!a)
            return ENOMEM;
        a->ind = i;
        for (unsigned c = 0; c < SC_NSMALL; c++)
            lock_init(&a->bins[c].lock);
        arenas[i] = a;
    }
    narenas = n;
    return 0;
}


unsigned arena_fill(unsigned ai, unsigned cls, void **head, unsigned n)
{
    bin_t *bin = &arenas[ai]->bins[cls];
    size_t size = sc_size[cls];
    void *first = NULL, **last = NULL;
    unsigned got = 0;
    lock_acquire(&bin->lock);
    while (got < n) {
        rb_node_t *node = rb_first(&bin->nonfull);
        extent_t *slab;
        if (node) {
            slab = container_of(node, extent_t, rb);
        } else {
            slab = extent_alloc_slab(cls, ai);
            if (!slab)
                break;
            /* A region never handed out holds the fresh mark until malloc returns it: a
             * free of it is looked at closely (freelist.h), not taken into a cache to be
             * handed out twice. */
            for (unsigned i = 0; i < sc_nregs[cls]; i++)
                ((void **)(slab->addr + i * size))[1] = (void *)FREELIST_FRESH;
            bin->nslabs++;
            bin->nslabs_made++;
            rb_insert(&bin->nonfull, &slab->rb, slab_cmp);
        }
        TIDE_ASSERT(slab->nfree > 0 && slab->nfree <= sc_nregs[cls]);
        unsigned taken = 0;
        for (unsigned w = 0; w < SC_MAX_NREGS / 64 && got + taken < n; w++) {
            uint64_t bits = slab->bitmap[w];
            while (bits && got + taken < n) {
                unsigned b = (unsigned)__builtin_ctzll(bits);
                bits &= bits - 1;
                void **obj = (void **)(slab->addr + (w * 64 + b) * size);
                if (last)
                    fl_set_next(last, obj);
                else
                    first = obj;
                last = obj;
                taken++;
            }
            slab->bitmap[w] = bits;
        }
        slab->nfree = (uint16_t)(slab->nfree - taken);
        got += taken;
        if (slab->nfree == 0)
            rb_erase(&slab->rb, &bin->nonfull);
    }
    bin->nregs_live += got;
    lock_release(&bin->lock);
    if (last)
        fl_set_next(last, NULL);
    *head = first;
    return got;
}

static extent_t *slab_of(uintptr_t p, unsigned cls, const char *caller)
{
    const range_t *r = region_range_of(p);
    if (r) {
        pm_entry_t entry = pm_read(r, p);
        extent_t *e = pm_desc(entry);
        if (pm_slab_class(entry) == cls && e->state == EXTENT_SLAB)
            return e;
    }
    report_invalid_pointer(caller, (void *)p);
}

/* Index of region P in SLAB, or abort when P is not the start of a region. */
static unsigned region_index(const extent_t *slab, uintptr_t p, const char *caller)
{
    unsigned cls = slab->cls;
    uintptr_t off = p - slab->addr;
    unsigned idx = (unsigned)((off * sc_div_magic[cls]) >> 32);
    if (unlikely((uintptr_t)idx * sc_size[cls] != off || idx >= sc_nregs[cls]))
        report_invalid_pointer(caller, (void *)p);
    return idx;
}

bool arena_region_is_free(extent_t *slab, uintptr_t p)
{
    bin_t *bin = &arenas[slab->arena]->bins[slab->cls];
    unsigned idx = region_index(slab, p, "free");
    lock_acquire(&bin->lock);
    bool is_free = (slab->bitmap[idx >> 6] >> (idx & 63)) & 1;
    lock_release(&bin->lock);
    return is_free;
}

/* Give back N (at most 256) objects of CLS whose slabs are SLABS[i]. */
static unsigned return_to_slabs(void **objs, extent_t **slabs, unsigned n, unsigned cls, const char *caller);

unsigned arena_return(void **objs, unsigned n, unsigned cls, const char *caller)
{
    extent_t *slabs[256];
    unsigned freed = 0;
    while (n > 0) {
        unsigned batch = MIN(n, 256u);
        for (unsigned i = 0; i < batch; i++)
            slabs[i] = slab_of((uintptr_t)objs[i], cls, caller);
        freed += return_to_slabs(objs, slabs, batch, cls, caller);
        objs += batch;
        n -= batch;
    }
    return freed;
}

static unsigned return_to_slabs(void **objs, extent_t **slabs, unsigned batch, unsigned cls, const char *caller)
{
    extent_t *empty[256];
    unsigned nempty = 0, freed = 0;
    {
        /* One lock round per arena met in the batch: the first object's arena, the
         * objects of other arenas are kept for the next round. */
        unsigned left = batch;
        while (left > 0) {
            unsigned ai = slabs[0]->arena, keep = 0;
            bin_t *bin = &arenas[ai]->bins[cls];
            lock_acquire(&bin->lock);
            for (unsigned i = 0; i < left; i++) {
                extent_t *slab = slabs[i];
                uintptr_t p = (uintptr_t)objs[i];
                if (slab->arena != ai) {
                    slabs[keep] = slab;
                    objs[keep++] = (void *)p;
                    continue;
                }
                unsigned idx = region_index(slab, p, caller);
                uint64_t bit = (uint64_t)1 << (idx & 63);
                if (unlikely(slab->bitmap[idx >> 6] & bit)) {
                    lock_release(&bin->lock);
                    report_double_free(caller, (void *)p);
                }
                slab->bitmap[idx >> 6] |= bit;
                slab->nfree++;
                TIDE_ASSERT(slab->nfree <= sc_nregs[cls]);
                if (slab->nfree == 1) {
                    rb_insert(&bin->nonfull, &slab->rb, slab_cmp);
                } else if (slab->nfree == sc_nregs[cls] && bin->nonfull.node != NULL &&
                           (bin->nonfull.node->left || bin->nonfull.node->right)) {
                    /* Empty and not the bin's last non-full slab: back to the page heap. */
                    rb_erase(&slab->rb, &bin->nonfull);
                    bin->nslabs--;
                    empty[nempty++] = slab;
                }
            }
            bin->nregs_live -= left - keep;
            lock_release(&bin->lock);
            for (unsigned i = 0; i < nempty; i++)
                extent_free(empty[i], NULL);
            freed += nempty;
            nempty = 0;
            left = keep;
        }
    }
    return freed;
}

unsigned arena_return_list(void *head, unsigned count, unsigned cls, const char *caller)
{
    void *objs[256];
    extent_t *slabs[256];
    unsigned n = 0, freed = 0;
    void **p = head;
    extent_t *slab = p ? slab_of((uintptr_t)p, cls, caller) : NULL;
    while (p) {
        /* The walk is bounded by the count: a list made to loop ends too. */
        if (count-- == 0)
            freelist_corrupt(caller, p, p, cls);
        /* Each link is checked as it is followed, by the page-map read that finds its slab. */
        void **next = fl_next(p);
        extent_t *next_slab = NULL;
        if (next && !(next_slab = freelist_slab_of(next, cls)))
            freelist_corrupt(caller, p, next, cls);
        objs[n] = p;
        slabs[n++] = slab;
        p = next;
        slab = next_slab;
        if (n == ARRAY_SIZE(objs) || !p) {
            freed += return_to_slabs(objs, slabs, n, cls, caller);
            n = 0;
        }
    }
    return freed;
}

void arenas_lock_all(void)
{
    for (unsigned i = 0; i < narenas; i++)
        for (unsigned c = 0; c < SC_NSMALL; c++)
            lock_acquire(&arenas[i]->bins[c].lock);
}

void arenas_unlock_all(void)
{
    for (unsigned i = narenas; i-- > 0;)
        for (unsigned c = SC_NSMALL; c-- > 0;)
            lock_release(&arenas[i]->bins[c].lock);
}

void arenas_reinit_locks(void)
{
    for (unsigned i = 0; i < narenas; i++)
        for (unsigned c = 0; c < SC_NSMALL; c++)
            lock_init(&arenas[i]->bins[c].lock);
}

void arenas_stats(arena_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (unsigned i = 0; i < narenas; i++) {
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            bin_t *bin = &arenas[i]->bins[c];
            lock_acquire(&bin->lock);
            out->allocated += bin->nregs_live * sc_size[c];
            out->nslabs += bin->nslabs;
            out->nslabs_made += bin->nslabs_made;
            lock_release(&bin->lock);
        }
    }
}
