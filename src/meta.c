/* SPDX-License-Identifier: MIT */
/* meta.c - tide's metadata range: a bump allocator over one VMA of its own.
 *
 * It is placed at a random address away from the heap's (so the two never become
 * neighbours the kernel would merge into one VMA) and grows at its end with
 * MAP_FIXED_NOREPLACE, by at least a quarter of what it has; only when something else
 * sits there does it start a chunk elsewhere. */
#include "meta.h"

#include <errno.h>

#include "lock.h"
#include "os.h"
#include "util.h"

#define META_MAX_CHUNKS 32
#define META_NAME "tide-meta" /* in /proc/PID/maps: [anon:tide-meta] */
#define META_MIN_GROW (1 * MiB)
#define META_HINT_LO ((uintptr_t)8 << 40) /* below the heap's first range, [16, 32) TiB, which grows up */
#define META_HINT_SPAN_GIB 4096u

static lock_t meta_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_META);
static uintptr_t chunk_lo[META_MAX_CHUNKS], chunk_hi[META_MAX_CHUNKS];
static unsigned nchunks;
static uintptr_t cur, end; /* the chunk being bumped: [cur, end) is free */
static size_t mapped, used;
/* Per chunk, where the 2 MiB units not yet handed to meta_take_full_unit start. */
static uintptr_t unit_next[META_MAX_CHUNKS];
static int units_ready; /* a unit was handed out whole since the last look (atomic) */
static bool huge;       /* MADV_HUGEPAGE on the range, and on what it grows by */

static int new_chunk(size_t len, uintptr_t hint)
{
    if (nchunks == META_MAX_CHUNKS)
        return ENOMEM;
    uintptr_t a = hint;
    int err = hint ? os_map_at(a, len) : EEXIST;
    if (err && os_map_anywhere(len, PAGE, &a) != 0)
        return ENOMEM;
    os_name(a, len, META_NAME);
    if (huge)
        os_hugepage(a, len);
    chunk_lo[nchunks] = a;
    chunk_hi[nchunks] = a + len;
    nchunks++;
    cur = a;
    end = a + len;
    mapped += len;
    return 0;
}

int meta_init(void)
{
    lock_init(&meta_lock, LOCK_RANK_META);
    uint64_t seed = os_random_seed();
    /* On a 2 MiB boundary, so that its first unit can be collapsed too (a unit the range
     * starts inside stays in 4 KiB pages, each an entry for every fork to copy). */
    uintptr_t hint = META_HINT_LO + (uintptr_t)(seed % META_HINT_SPAN_GIB) * GiB +
                     ((uintptr_t)(seed >> 20) % (GiB / HUGEPAGE)) * HUGEPAGE;
    return new_chunk(META_MIN_GROW, hint);
}

/* Make room for SIZE bytes at cur: extend the chunk in place, else start another.  Lock
 * held. */
static int grow(size_t size)
{
    size_t step = ALIGN_UP(MAX(size, MAX(mapped / 4, META_MIN_GROW)), PAGE);
    if (huge) /* (to a 2 MiB boundary: a unit the range ends inside stays in 4 KiB pages) */
        step = ALIGN_UP(end + step, HUGEPAGE) - end;
    if (os_map_at(end, step) == 0) {
        os_name(end, step, META_NAME); /* before anything could merge with it */
        if (huge)
            os_hugepage(end, step);
        chunk_hi[nchunks - 1] = end + step;
        end += step;
        mapped += step;
        return 0;
    }
    /* Taken (or refused): the rest of this chunk stays unused. */
    return new_chunk(step, 0);
}

void *meta_alloc(size_t size)
{
    size = ALIGN_UP(size, (size_t)TIDE_CACHELINE);
    lock_acquire(&meta_lock);
    void *p = NULL;
    if (cur + size <= end || grow(size) == 0) {
        p = (void *)cur;
        if ((cur >> LG_HUGEPAGE) != ((cur + size) >> LG_HUGEPAGE))
            ATOMIC_STORE(&units_ready, 1);
        cur += size;
        used += size;
    }
    lock_release(&meta_lock);
    return p;
}

void meta_advise_huge(void)
{
    lock_acquire(&meta_lock);
    if (!huge) {
        huge = true;
        for (unsigned i = 0; i < nchunks; i++)
            os_hugepage(chunk_lo[i], chunk_hi[i] - chunk_lo[i]);
    }
    lock_release(&meta_lock);
}

bool meta_full_unit_waits(void) { return ATOMIC_LOAD(&units_ready) != 0; }

uintptr_t meta_take_full_unit(void)
{
    if (!meta_full_unit_waits())
        return 0;
    lock_acquire(&meta_lock);
    for (unsigned i = 0; i < nchunks; i++) {
        uintptr_t lim = i == nchunks - 1 ? cur : chunk_hi[i];
        uintptr_t u = MAX(ALIGN_UP(chunk_lo[i], HUGEPAGE), unit_next[i]);
        if (u + HUGEPAGE <= lim) {
            unit_next[i] = u + HUGEPAGE;
            lock_release(&meta_lock);
            return u;
        }
    }
    ATOMIC_STORE(&units_ready, 0);
    lock_release(&meta_lock);
    return 0;
}

void meta_stats(meta_stats_t *out)
{
    lock_acquire(&meta_lock);
    out->mapped = mapped;
    out->used = used;
    out->nchunks = nchunks;
    lock_release(&meta_lock);
}

unsigned meta_chunks(uintptr_t (*out)[2], unsigned max)
{
    lock_acquire(&meta_lock);
    unsigned n = nchunks;
    for (unsigned i = 0; i < n && i < max; i++) {
        out[i][0] = chunk_lo[i];
        out[i][1] = chunk_hi[i];
    }
    lock_release(&meta_lock);
    return n;
}

void meta_locks(lock_op_t op) { lock_apply(&meta_lock, op); }
