/* SPDX-License-Identifier: MIT */
/*
 * tide.h - public interface of the tide memory allocator.
 *
 * tide is a drop-in malloc: preloading or linking libtide replaces malloc, free and
 * friends for the whole process.  The tide_-prefixed twins below are for programs
 * that want to call tide explicitly (for example beside another allocator), and the
 * tide_conf_*, tide_purge and tide_stats_* calls expose tide's own controls.
 */
#ifndef TIDE_H
#define TIDE_H

#include <stddef.h>
#include <stdint.h>
#include <malloc.h> /* struct mallinfo2 */

#ifdef __cplusplus
extern "C" {
#endif

#define TIDE_VERSION "0.1.0"

/* ---- the malloc family (glibc semantics, errno as POSIX says) ---- */
void *tide_malloc(size_t size);
void tide_free(void *ptr);
void *tide_calloc(size_t nmemb, size_t size);
void *tide_realloc(void *ptr, size_t size);
void *tide_reallocarray(void *ptr, size_t nmemb, size_t size);
int tide_posix_memalign(void **memptr, size_t alignment, size_t size);
void *tide_aligned_alloc(size_t alignment, size_t size);
void *tide_memalign(size_t alignment, size_t size);
void *tide_valloc(size_t size);
void *tide_pvalloc(size_t size);
size_t tide_malloc_usable_size(void *ptr);
void tide_free_sized(void *ptr, size_t size);
void tide_free_aligned_sized(void *ptr, size_t alignment, size_t size);
int tide_malloc_trim(size_t pad);
struct mallinfo2 tide_mallinfo2(void);
void tide_malloc_stats(void);
/* glibc's mallopt: M_ARENA_MAX (VALUE > 0) limits the arenas threads use from now on and
 * returns 1; every other parameter tunes glibc's own heap, is ignored, and returns 0. */
int tide_mallopt(int param, int value);
/* glibc's malloc_info: tide's numbers in glibc's XML form on FP (tide(3)).  OPTIONS must be
 * 0: else -1 with errno EINVAL. */
int tide_malloc_info(int options, FILE *fp);

/* ---- configuration (the keys of TIDE_CONF; TIDE_CONF=help lists them) ---- */
/* Settings are read at start-up from, in order, each overriding the same key's earlier
 * value: this string, if the program defines it, e.g.
 *     const char *tide_malloc_conf = "purge:free,decay_ms:500";
 * (tide declares it weak: a program linked with -ltide or libtide.a needs nothing more;
 * one that gets tide through LD_PRELOAD only must export it: link it with -rdynamic);
 * the system's file, $(sysconfdir)/tide.conf; the environment's TIDE_CONF (not in a
 * setuid or setgid program).  tide(3) says more. */
extern const char *tide_malloc_conf;

/* Set KEY to VALUE at run time. Returns 0, or -1 with errno EINVAL (unknown key or bad
 * value, a warning is printed) or EPERM (the key can only be set through TIDE_CONF). */
int tide_conf_set(const char *key, const char *value);
/* Write KEY's current value as text into BUF. Returns 0, or -1 with errno EINVAL. */
int tide_conf_get(const char *key, char *buf, size_t len);

/* ---- purging ---- */
/* Return every free page to the kernel now, by the purge policy in force
 * (purge:none is treated as dontneed here). Returns the number of bytes purged. */
size_t tide_purge(void);

/* ---- the heap profiler (TIDE_CONF=prof:on) ---- */
/* Write a heap profile of the live heap as sampled (the legacy text format gperftools
 * and jemalloc write: read it with `google-pprof --text PROGRAM FILE` or `jeprof`) to
 * PATH, or, when PATH is NULL, to PREFIX.PID.SEQ.mN.heap (prof_prefix).  Returns 0, or -1
 * with errno ENOENT (the profiler is off) or the error of creating or writing the file. */
int tide_prof_dump(const char *path);

/* ---- statistics ---- */
/* Counters of the whole process. Bytes unless a name says otherwise. They reconcile:
 *   active + dirty + lazy + clean + metadata == mapped
 *   allocated <= active */
typedef struct tide_stats_s {
    uint64_t size;            /* sizeof(tide_stats_t) as the library knows it */
    uint64_t mapped;          /* address space tide has mapped (all ranges) */
    uint64_t active;          /* pages in slabs and large blocks in use */
    uint64_t allocated;       /* bytes handed out to the program (size classes) */
    uint64_t dirty;           /* free pages still resident, waiting to be purged */
    uint64_t lazy;            /* free pages given back with MADV_FREE, not reused yet */
    uint64_t clean;           /* free pages purged with MADV_DONTNEED or never touched */
    uint64_t metadata;        /* page map, extent descriptors, arenas */
    uint64_t resident;        /* RSS of tide's ranges (mincore), computed on request */
    uint64_t lazyfree_est;    /* estimate of bytes the kernel still counts as LazyFree */
    uint64_t nranges;         /* contiguous ranges tide has reserved (normally 1) */
    uint64_t vmas;            /* VMAs of /proc/self/maps inside tide's ranges */
    uint64_t nmalloc_large;   /* large allocations served from the page heap */
    uint64_t nfree_large;
    uint64_t nslabs;          /* live slabs */
    uint64_t madvise_calls[3];   /* [0] MADV_DONTNEED, [1] MADV_FREE, [2] MADV_HUGEPAGE */
    uint64_t madvise_bytes[3];
    uint64_t process_madvise_calls;
    uint64_t process_madvise_bytes;
    uint64_t purges;          /* purge passes that released memory */
    uint64_t purged_bytes;
    uint64_t grows;           /* extensions of a range (mmap calls) */
    uint64_t remap_moves;     /* large reallocs moved with mremap */
    uint64_t remap_heals;     /* moved blocks healed back into one VMA */
    uint64_t remap_copies;    /* large reallocs that had to copy */
    uint64_t remap_in_place;  /* large reallocs grown or shrunk in place */
    uint64_t remap_live;      /* moved blocks not yet healed */
    uint64_t narenas;
    uint64_t nthreads;        /* threads with a live thread cache */
    uint64_t remap_vmas;      /* extra VMAs moved blocks occupy now, as tide counts them
                                 (an upper bound; the budget keeps it <= 2 x remap_max) */
    uint64_t remap_vmas_peak; /* the most remap_vmas has been since the process started */
    uint64_t meta_vmas;       /* VMAs of tide's metadata range (descriptors, arenas), kept
                               * apart from the heap's; tide's VMAs in all: vmas + meta_vmas */
    uint64_t named;           /* 1: tide's mappings are named, "[anon:tide]" in /proc/PID/maps;
                                 0: the kernel cannot name them (before 5.17, or built
                                 without CONFIG_ANON_VMA_NAME) */
    uint64_t prof_samples;    /* allocations the heap profiler sampled (prof:on) */
    uint64_t prof_live_samples; /* ... of which still live */
    uint64_t prof_stacks;     /* distinct call stacks it recorded */
    uint64_t prof_frame_walks; /* stacks taken by following frame pointers */
    uint64_t prof_backtraces; /* stacks unwound (libgcc's unwinder, or glibc's backtrace()) */
    uint64_t prof_dumps;      /* profiles written */
    uint64_t nslabs_made;     /* slabs cut from the page heap since the process started */
    uint64_t nslabs_empty;    /* empty slabs the bins keep at hand (counted in nslabs) */
    uint64_t prof_stacks_reused; /* stacks without frame pointers unwound once and recognised
                                    again, instead of unwinding them (prof_backtraces) */
    uint64_t guard_bytes;     /* guard pages after live slabs and blocks (guard:on,
                               * guard_sample), part of active, never resident */
    uint64_t held;            /* freed blocks held as guard pages before reuse (not active,
                               * not free): active + dirty + lazy + clean + held + metadata
                               * = mapped */
    uint64_t sampled;         /* blocks guard_sample placed before a guard page so far */
    uint64_t sampled_live;    /* ... not freed yet */
} tide_stats_t;

/* Fill *out (STATS_SIZE bytes of it, normally sizeof(tide_stats_t)). Returns 0. */
int tide_stats_get(tide_stats_t *out, size_t stats_size);
/* Print the statistics on stderr, as text, or as one JSON object when json != 0: the
 * pid, the program, tide's version and the effective settings, the counters above, and
 * per small size class the regions its bins handed out and got back. */
void tide_stats_print(int json);
/* The same through WRITE(ARG, S), called with NUL-terminated pieces of the text in order
 * (jemalloc's malloc_stats_print); WRITE NULL: stderr.  OPTS (NULL: none) holds letters:
 * J one JSON object instead of text, g without the settings, b without the size classes.
 * No lock of tide's is held while WRITE runs: it may allocate. */
void tide_stats_print_cb(void (*write)(void *arg, const char *s), void *arg, const char *opts);

/* Walk the whole heap and verify tide's invariants (extents tile the range, page-map
 * entries, coalescing, slab bitmaps, counters).  Returns 0, or prints the first broken
 * invariant on stderr and returns -1.  Takes every lock: for tests and debugging. */
int tide_check(void);

/* The address ranges tide owns: fills up to MAX [lo, hi) pairs, returns how many exist. */
size_t tide_ranges(uintptr_t (*out)[2], size_t max);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_H */
