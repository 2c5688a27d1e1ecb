/* SPDX-License-Identifier: MIT */
/* conf_probe.c - what tide's settings are in this process, for test/system/conf.
 *
 * Built several ways (test/system/local.mk): linked with -ltide (libtide.so), with
 * libtide.a, with the build of libtide whose system file is in the build tree, and not
 * linked with tide at all (run with LD_PRELOAD; PROBE_PRELOAD: tide's calls are found
 * with dlsym), with and without -rdynamic.  With PROBE_DEFAULT it defines tide_malloc_conf.
 *
 *   conf_probe KEY...          prints KEY=VALUE for each key, as tide_conf_get() says
 *   conf_probe slabs LIMIT     mallopt(M_ARENA_MAX, LIMIT) unless LIMIT is 0, then two
 *                              threads allocate a block each of a class nothing else
 *                              uses; prints mallopt's result and the slabs made meanwhile */
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

#ifdef PROBE_DEFAULT
const char *tide_malloc_conf = PROBE_DEFAULT;
#endif

typedef int conf_get_fn(const char *, char *, size_t);

static conf_get_fn *find_conf_get(void)
{
#ifdef PROBE_PRELOAD
    return (conf_get_fn *)dlsym(RTLD_DEFAULT, "tide_conf_get");
#else
    return tide_conf_get;
#endif
}

#ifndef PROBE_PRELOAD
/* A class of its own: nothing else here allocates it.  Of more than a page, so that a
 * block prof:on (the matrix) samples stays the region of a slab it would have been, where
 * a smaller one would be promoted to a large block and cut no slab. */
#define SLAB_SIZE 5120
static void *held[2];
static unsigned long long slabs_made; /* by the two mallocs themselves */

static void *alloc_one(void *arg)
{
    tide_stats_t a, b;
    tide_stats_get(&a, sizeof a);
    held[(long)arg] = malloc(SLAB_SIZE);
    tide_stats_get(&b, sizeof b);
    slabs_made += b.nslabs_made - a.nslabs_made;
    return NULL;
}

/* Run with tcache:off: each thread's blocks come from its own arena, the one with the
 * fewest threads among those in use when it first allocates (a thread without a cache
 * stays counted there after its exit). */
static int cmd_slabs(int limit)
{
    int r = limit ? mallopt(M_ARENA_MAX, limit) : -1;
    for (long i = 0; i < 2; i++) { /* one after the other: each is placed knowing the other's place */
        pthread_t t;
        if (pthread_create(&t, NULL, alloc_one, (void *)i) != 0 || pthread_join(t, NULL) != 0)
            return 2;
    }
    printf("mallopt=%d slabs=%llu\n", r, slabs_made);
    free(held[0]);
    free(held[1]);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    free(malloc(100)); /* tide is up */
#ifndef PROBE_PRELOAD
    if (argc == 3 && strcmp(argv[1], "slabs") == 0)
        return cmd_slabs(atoi(argv[2]));
#endif
    conf_get_fn *get = find_conf_get();
    if (!get) {
        printf("tide is not loaded\n");
        return 3;
    }
    for (int i = 1; i < argc; i++) {
        char buf[300] = "?";
        if (get(argv[i], buf, sizeof buf) != 0)
            return 2;
        printf("%s=%s\n", argv[i], buf);
    }
    return fflush(stdout) != 0;
}
