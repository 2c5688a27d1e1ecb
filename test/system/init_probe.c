/* SPDX-License-Identifier: MIT */
/* init_probe.c - the first call into tide comes from odd places: another library's
 * constructor (init_lib), dlsym/dlerror, dlopen (the dynamic loader allocates), or a
 * thread's TLS destructor.  Exit status 0 means every block was tide's and intact. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

extern void *init_lib_blocks[16];

static int owned(const void *p)
{
    uintptr_t r[8][2];
    size_t n = tide_ranges(r, 8);
    for (size_t i = 0; i < n && i < 8; i++)
        if ((uintptr_t)p >= r[i][0] && (uintptr_t)p < r[i][1])
            return 1;
    return 0;
}

static pthread_key_t key;
static void destructor(void *arg)
{
    /* The thread's first allocation happens here, after its other TLS is torn down. */
    char *p = malloc(100), *q = malloc(70000);
    if (!p || !q || !owned(p) || !owned(q))
        abort();
    memset(p, 1, 100);
    memset(q, 2, 70000);
    free(p);
    free(q);
    free(arg);
}
static void *thread_main(void *arg)
{
    pthread_setspecific(key, arg); /* allocates nothing itself */
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ctor";
    if (strcmp(mode, "dlsym") == 0) {
        /* The very first call: dlsym fails and dlerror allocates its message. */
        if (dlsym(RTLD_DEFAULT, "no_such_symbol_anywhere") != NULL || dlerror() == NULL)
            return 1;
        void *p = malloc(32);
        return owned(p) ? 0 : 2;
    }
    if (strcmp(mode, "dlopen") == 0) {
        void *h = dlopen("libm.so.6", RTLD_NOW);
        if (!h || !dlsym(h, "cos"))
            return 3;
        dlclose(h);
        return owned(malloc(1)) ? 0 : 4;
    }
    if (strcmp(mode, "tls") == 0) {
        pthread_key_create(&key, destructor);
        tide_stats_t s0, s1;
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < 500; i++) {
                pthread_t t;
                pthread_create(&t, NULL, thread_main, malloc(8));
                pthread_join(t, NULL);
            }
            tide_stats_get(round ? &s1 : &s0, sizeof s0);
        }
        /* The second 500 threads must not have left anything behind. */
        if (s1.allocated > s0.allocated + 65536) {
            fprintf(stderr, "allocated grew from %lu to %lu\n", (unsigned long)s0.allocated,
                    (unsigned long)s1.allocated);
            return 5;
        }
        return tide_check() == 0 ? 0 : 6;
    }
    /* ctor: init_lib's constructor allocated before main. */
    for (int i = 0; i < 15; i++) {
        unsigned char *b = init_lib_blocks[i];
        if (!b || !owned(b))
            return 10 + i;
        for (size_t k = 0; k < ((size_t)16 << i); k++)
            if (b[k] != i)
                return 30;
        free(b);
    }
    return tide_check() == 0 ? 0 : 31;
}
