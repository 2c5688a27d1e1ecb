/* SPDX-License-Identifier: MIT */
/* stats.c - statistics that reconcile:
 *   active + dirty + lazy + clean + held + metadata == mapped,   allocated <= active. */
#include "stats.h"

#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "conf.h"
#include "extent.h"
#include "guard.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "region.h"
#include "large.h"
#include "meta.h"
#include "tcache.h"

void stats_collect(tide_stats_t *s, bool expensive)
{
    memset(s, 0, sizeof *s);
    s->size = sizeof *s;
    extent_stats_t ph;
    arena_stats_t ar;
    arenas_stats(&ar);
    extent_stats(&ph);
    meta_stats_t ms;
    meta_stats(&ms);
    /* The heap's pages, its page map, and the metadata range. */
    s->mapped = region.heap_mapped + region.pm_mapped + ms.mapped;
    s->active = ph.active;
    s->dirty = ph.dirty;
    s->lazy = ph.lazy;
    s->clean = ph.clean;
    s->metadata = region.pm_mapped + ms.mapped + ph.reserved;
    /* Guard pages are active (blocks hold them) but never handed out. */
    s->allocated = ar.allocated + (ph.active - ph.slab_bytes - ph.large_guards);
    s->guard_bytes = ph.guards;
    s->held = ph.held;
    guard_stats_t gs;
    guard_stats(&gs);
    s->sampled = gs.sampled;
    s->sampled_live = gs.sampled_live;
    s->lazyfree_est = ph.lazy;
    s->nranges = ATOMIC_LOAD(&region.nranges);
    s->nmalloc_large = ph.nlarge_alloc;
    s->nfree_large = ph.nlarge_free;
    s->nslabs = ph.nslabs;
    s->nslabs_made = ar.nslabs_made;
    s->nslabs_empty = ar.nslabs_empty;
    for (int a = 0; a < OS_ADV_COUNT; a++) {
        s->madvise_calls[a] = ATOMIC_LOAD(&os_counters.madvise_calls[a]);
        s->madvise_bytes[a] = ATOMIC_LOAD(&os_counters.madvise_bytes[a]);
    }
    s->process_madvise_calls = ATOMIC_LOAD(&os_counters.process_madvise_calls);
    s->process_madvise_bytes = ATOMIC_LOAD(&os_counters.process_madvise_bytes);
    purge_stats_t ps;
    purge_stats(&ps);
    s->purges = ps.passes;
    s->purged_bytes = ps.purged_bytes;
    s->grows = ATOMIC_LOAD(&os_counters.map_calls);
    large_stats_t rs;
    large_stats(&rs);
    s->remap_moves = rs.moves;
    s->remap_heals = rs.heals;
    s->remap_copies = rs.copies;
    s->remap_in_place = rs.in_place;
    s->remap_live = rs.live;
    s->remap_vmas = rs.vmas;
    s->remap_vmas_peak = rs.vmas_peak;
    s->narenas = narenas;
    tcache_stats_t ts;
    tcache_stats(&ts);
    s->nthreads = ts.nthreads;
    s->named = os_named();
    prof_stats_t pf;
    prof_stats(&pf);
    s->prof_samples = pf.samples;
    s->prof_live_samples = pf.live_samples;
    s->prof_stacks = pf.stacks;
    s->prof_frame_walks = pf.frame_walks;
    s->prof_backtraces = pf.backtraces;
    s->prof_stacks_reused = pf.reused;
    s->prof_dumps = pf.dumps;
    if (expensive) {
        s->resident = region_resident();
        long v = region_vmas();
        s->vmas = v < 0 ? 0 : (uint64_t)v;
        uintptr_t chunks[32][2];
        unsigned n = meta_chunks(chunks, 32);
        for (unsigned i = 0; i < n && i < 32; i++) {
            long m = os_count_vmas(chunks[i][0], chunks[i][1]);
            s->meta_vmas += m < 0 ? 0 : (uint64_t)m;
        }
    }
}

#define STATS_FIELDS(X)                                                                        \
    X(mapped) X(active) X(allocated) X(dirty) X(lazy) X(clean) X(metadata) X(resident)         \
    X(lazyfree_est) X(nranges) X(vmas) X(nmalloc_large) X(nfree_large) X(nslabs)               \
    X(process_madvise_calls) X(process_madvise_bytes) X(purges) X(purged_bytes) X(grows)       \
    X(remap_moves) X(remap_heals) X(remap_copies) X(remap_in_place) X(remap_live) X(narenas)  \
    X(nthreads) X(remap_vmas) X(remap_vmas_peak) X(meta_vmas) X(named) X(prof_samples) X(prof_live_samples)   \
    X(prof_stacks) X(prof_frame_walks) X(prof_backtraces) X(prof_dumps) X(nslabs_made) X(nslabs_empty) \
    X(prof_stacks_reused) X(guard_bytes) X(held) X(sampled) X(sampled_live)

void stats_print(int json)
{
    tide_stats_t s;
    stats_collect(&s, true);
    char buf[8192];
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__)
    static const char *const adv[] = { "dontneed", "free", "hugepage" };
    if (json) {
        PUT("{");
#define X(f) PUT("\"%s\":%llu,", #f, (unsigned long long)s.f);
        STATS_FIELDS(X)
#undef X
        for (int a = 0; a < 3; a++)
            PUT("\"madvise_%s_calls\":%llu,\"madvise_%s_bytes\":%llu%s", adv[a],
                (unsigned long long)s.madvise_calls[a], adv[a], (unsigned long long)s.madvise_bytes[a],
                a < 2 ? "," : "");
        PUT("}\n");
    } else {
        PUT("tide statistics\n");
#define X(f) PUT("  %-22s %llu\n", #f, (unsigned long long)s.f);
        STATS_FIELDS(X)
#undef X
        for (int a = 0; a < 3; a++)
            PUT("  madvise %-14s %llu calls, %llu bytes\n", adv[a], (unsigned long long)s.madvise_calls[a],
                (unsigned long long)s.madvise_bytes[a]);
        /* Huge pages: the mode, and under auto what the system allowed and what was done. */
        extent_huge_stats_t h;
        extent_huge_stats(&h);
        static const char *const setting[] = { "never", "madvise", "always" };
        if (h.mode == THP_AUTO && h.active)
            PUT("  thp                    auto: collapsing dense 2 MiB units (system THP %s): %llu fresh, %llu "
                "dense, %llu metadata, %llu failed\n",
                setting[h.setting], (unsigned long long)h.fresh, (unsigned long long)h.collapsed,
                (unsigned long long)h.meta, (unsigned long long)h.failed);
        else if (h.mode == THP_AUTO)
            PUT("  thp                    auto: off (%s)\n",
                h.refused ? "the kernel refused MADV_COLLAPSE" : "the system's THP setting is never");
        else
            PUT("  thp                    %s\n", h.mode == THP_ON ? "on: MADV_HUGEPAGE on the whole heap" : "off");
        /* Where the heap is, as /proc/PID/maps writes it. */
        unsigned nr = ATOMIC_LOAD_ACQ(&region.nranges);
        for (unsigned i = 0; i < nr; i++)
            PUT("  range %-16u %lx-%lx %s\n", i, (unsigned long)region.ranges[i].pm_lo,
                (unsigned long)ATOMIC_LOAD(&region.ranges[i].end),
                s.named ? "[anon:" REGION_NAME "]" : "(unnamed: the kernel has no anon VMA names)");
    }
#undef PUT
    os_write_stderr(buf, MIN(n, sizeof buf));
}
