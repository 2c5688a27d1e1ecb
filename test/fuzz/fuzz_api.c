/* SPDX-License-Identifier: MIT */
/* fuzz_api.c - libFuzzer target: the input is a program of calls to tide's API.
 *
 * tide's sources are linked in with their glibc names (malloc, free, ...) made local, so
 * libFuzzer and libc keep glibc's malloc and only the explicit tide_* calls below reach
 * tide.  Each 4-byte instruction is (opcode, slot, size byte, argument byte) on a table of
 * 32 slots; sizes are log-scaled up to 4 MiB, alignments up to 16 MiB.  Every block is
 * patterned by address and size and checked before free and realloc (and a realloc's kept
 * prefix against the old pattern), calloc must give zeros, usable sizes must cover the
 * request; runtime settings change between calls.  At the end of each input everything is
 * freed, and tide_check() must pass and the statistics reconcile. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

#define NSLOT 32

typedef struct slot_s {
    unsigned char *p;
    size_t size, usable, align;
    int kind; /* 0 malloc-like (free_sized ok), 1 aligned_alloc (free_aligned_sized ok), 2 other */
} slot_t;

static slot_t slot[NSLOT];

static uint8_t pat(const void *p, size_t size, size_t i)
{
    uint64_t x = (uintptr_t)p * 0x9E3779B97F4A7C15ULL + size * 0xff51afd7ed558ccdULL + i * 0x100000001b3ULL;
    return (uint8_t)(x >> 56);
}

/* Whole block up to 64 KiB, else the first and last 4 KiB and a byte a page. */
#define STEP(n, i) ((n) > 65536 && (i) >= 4096 && (i) + 4096 < (n) ? 4096 : 1)

static void fill(slot_t *s)
{
    for (size_t i = 0; i < s->usable; i += STEP(s->usable, i))
        s->p[i] = pat(s->p, s->size, i);
}

static void check(const slot_t *s, const unsigned char *at, size_t limit)
{
    size_t n = limit < s->usable ? limit : s->usable;
    for (size_t i = 0; i < n; i += STEP(s->usable, i))
        if (at[i] != pat(s->p, s->size, i))
            abort();
}

static size_t decode_size(uint8_t b, uint8_t c)
{
    unsigned lg = b % 23; /* up to 4 MiB */
    size_t base = (size_t)1 << lg;
    return base + ((size_t)c * base >> 8) - (b >= 230 ? base : 0);
}

static void adopt(slot_t *s, void *p, size_t size, size_t align, int kind, int zero)
{
    if (!p)
        return;
    s->p = p;
    s->size = size;
    s->align = align;
    s->kind = kind;
    s->usable = tide_malloc_usable_size(p);
    if (s->usable < size || ((uintptr_t)p & 15) || ((uintptr_t)p & (align - 1)))
        abort();
    if (zero)
        for (size_t i = 0; i < size; i += STEP(size, i))
            if (s->p[i])
                abort();
    fill(s);
}

static void release(slot_t *s, int how)
{
    if (!s->p)
        return;
    check(s, s->p, SIZE_MAX);
    if (how == 1 && s->kind == 0)
        tide_free_sized(s->p, s->size);
    else if (how == 2 && s->kind == 1)
        tide_free_aligned_sized(s->p, s->align, s->size);
    else
        tide_free(s->p);
    s->p = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* No background thread: each input runs alone, so runs are reproducible. */
    tide_conf_set("background", "off");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static const char *const purge[] = { "none", "dontneed", "free" };
    static const char *const decay[] = { "0", "-1", "1000", "5" };
    static const char *const thresholds[] = { "64k", "1m", "256k" };
    tide_conf_set("purge", "free");
    tide_conf_set("decay_ms", "1000");
    tide_conf_set("remap", "on");
    tide_conf_set("remap_threshold", "1m");
    tide_conf_set("thp", "off");
    for (size_t pc = 0; pc + 4 <= n && pc < 4 * 512; pc += 4) {
        uint8_t op = d[pc] % 20, a = d[pc + 2], b = d[pc + 3];
        slot_t *s = &slot[d[pc + 1] % NSLOT];
        size_t size = decode_size(a, b);
        size_t align = (size_t)1 << (b % 25);
        void *p = NULL;
        switch (op) {
        case 0: case 1:
            release(s, 0);
            adopt(s, tide_malloc(size), size, 1, 0, 0);
            break;
        case 2: {
            release(s, 0);
            size_t m = 1 + b % 16;
            adopt(s, tide_calloc(size / m, m), size / m * m, 1, 0, 1);
            break;
        }
        case 3: case 4: {
            if (!s->p) {
                adopt(s, tide_realloc(NULL, size), size, 1, 0, 0);
                break;
            }
            check(s, s->p, SIZE_MAX);
            slot_t old = *s;
            unsigned char *q = op == 3 ? tide_realloc(s->p, size) : tide_reallocarray(s->p, size, 1);
            if (!q) {
                if (size != 0)
                    abort(); /* a realloc this small cannot fail */
                s->p = NULL; /* realloc(p, 0) freed it */
                break;
            }
            check(&old, q, old.size < size ? old.size : size);
            s->p = NULL;
            adopt(s, q, size, 1, 0, 0);
            break;
        }
        case 5:
            release(s, 0);
            if (tide_posix_memalign(&p, align < 8 ? 8 : align, size) == 0)
                adopt(s, p, size, align < 8 ? 8 : align, 1, 0);
            break;
        case 6:
            release(s, 0);
            adopt(s, tide_aligned_alloc(align, size), size, align, 1, 0);
            break;
        case 7:
            release(s, 0);
            adopt(s, tide_memalign(align, size), size, align, 2, 0);
            break;
        case 8:
            release(s, 0);
            adopt(s, tide_valloc(size), size, 4096, 2, 0);
            break;
        case 9:
            release(s, 0);
            adopt(s, tide_pvalloc(size), size, 4096, 2, 0);
            break;
        case 10: case 11:
            release(s, 0);
            break;
        case 12:
            release(s, 1);
            break;
        case 13:
            release(s, 2);
            break;
        case 14:
            if (s->p && tide_malloc_usable_size(s->p) != s->usable)
                abort();
            break;
        case 15:
            if (b < 16)
                tide_malloc_trim(0);
            else if (b < 32)
                tide_purge();
            break;
        case 16:
            tide_conf_set("purge", purge[b % 3]);
            break;
        case 17:
            tide_conf_set("decay_ms", decay[b % 4]);
            break;
        case 18:
            tide_conf_set("remap", b & 1 ? "on" : "off");
            tide_conf_set("remap_threshold", thresholds[a % 3]);
            break;
        default:
            tide_conf_set("thp", b & 1 ? "on" : "off");
            break;
        }
    }
    for (int i = 0; i < NSLOT; i++)
        release(&slot[i], 0);
    if (tide_check() != 0)
        abort();
    tide_stats_t st;
    tide_stats_get(&st, sizeof st);
    if (st.active + st.dirty + st.lazy + st.clean + st.held + st.metadata != st.mapped || st.allocated > st.active)
        abort();
    return 0;
}
