/* SPDX-License-Identifier: MIT */
/* guard_probe.c - touches a guard page tide made, chosen by name, for test/system/guard.
 *
 *   guard_probe CASE
 *
 * Run with TIDE_CONF=guard:on or guard_sample:1 (the test says which).  Before the bad
 * access it prints on stdout "ptr 0x..." for the block and "at 0x..." for the address it
 * touches, then "go"; if nothing stops it, it prints "survived" and exits 0.  The parent
 * checks that it died of SIGSEGV and what tide printed on stderr.  The case "vmas" runs
 * the same workload whatever TIDE_CONF says and prints the VMA counts instead.
 *
 * Linked with -export-dynamic, so that the backtraces of a sampled block name
 * alloc_victim and free_victim. */
#include "support.h"

#include <signal.h>
#include <sys/mman.h>

static void say(const char *what, const void *p) { printf("%s %p\n", what, p); }

static void go(void)
{
    printf("go\n");
    fflush(stdout);
}

/* A pointer the compiler cannot see through, and accesses it must make. */
static void *volatile sink;
static void *hide(void *p)
{
    sink = p;
    return sink;
}
static void poke(char *p) { *(volatile char *)p = 1; }
static char peek(const char *p) { return *(const volatile char *)p; }

/* The frames the reports must name (exported: -export-dynamic). */
__attribute__((noinline)) char *alloc_victim(size_t n)
{
    char *p = malloc(n);
    return hide(p);
}
__attribute__((noinline)) void free_victim(char *p)
{
    free(p);
    hide(p);
}

/* The program's own SIGSEGV handler, installed before tide's: tide must hand it what is
 * not tide's, and its own faults once it has reported them. */
static void program_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    static const char msg[] = "program handler\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(43);
    _exit(42);
}

static void install_program_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = program_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
}

/* The same mixed workload whatever the settings: small objects of many classes (many
 * slabs), large blocks live and freed (the quarantine), realloc growth, then VMA counts
 * with everything live and after most of it was freed. */
static void vmas(void)
{
    enum { NSMALL = 20000, NLARGE = 400 };
    static void *small[NSMALL], *large[NLARGE];
    tt_rng r = { 0x5eed };
    for (int i = 0; i < NSMALL; i++) {
        size_t n = 16 + tt_below(&r, 16000);
        small[i] = malloc(n);
        memset(small[i], 1, n);
    }
    for (int i = 0; i < NLARGE; i++) {
        size_t n = (16 + tt_below(&r, 2000)) << 10;
        large[i] = malloc(n);
        memset(large[i], 2, n);
        if (i % 4 == 0) {
            large[i] = realloc(large[i], 2 * n);
            memset(large[i], 3, 2 * n);
        }
    }
    tide_stats_t s = tt_stats();
    struct tt_vmas v = tt_count_vmas();
    printf("live: process %d tide %d meta %lu guard_bytes %lu held %lu sampled %lu\n", v.total, v.tide,
           (unsigned long)s.meta_vmas, (unsigned long)s.guard_bytes, (unsigned long)s.held,
           (unsigned long)s.sampled);
    for (int i = 0; i < NSMALL; i += 2)
        free(small[i]);
    for (int i = 0; i < NLARGE; i += 2)
        free(large[i]);
    s = tt_stats();
    v = tt_count_vmas();
    printf("freed: process %d tide %d meta %lu guard_bytes %lu held %lu sampled %lu\n", v.total, v.tide,
           (unsigned long)s.meta_vmas, (unsigned long)s.guard_bytes, (unsigned long)s.held,
           (unsigned long)s.sampled);
    printf("check %d\n", tide_check());
}

static int run(const char *c)
{
    if (!strcmp(c, "large_overflow")) {
        /* One byte past a large block (a whole number of pages): its guard page. */
        char *p = malloc(256 << 10);
        memset(p, 1, 256 << 10);
        say("ptr", p);
        say("at", p + (256 << 10));
        go();
        poke(hide(p) + (256 << 10));
    } else if (!strcmp(c, "large_uaf")) {
        /* A read of a freed large block: held as a guard. */
        char *p = malloc(256 << 10);
        memset(p, 1, 256 << 10);
        free(p);
        say("ptr", p);
        say("at", p + 5000);
        go();
        printf("read %d\n", peek((char *)hide(p) + 5000));
    } else if (!strcmp(c, "cached_large_uaf")) {
        /* 20 KiB, a cached class: with guard:on not cached, held as a guard. */
        char *p = malloc(20000);
        free(p);
        say("ptr", p);
        say("at", p);
        go();
        printf("read %d\n", peek(hide(p)));
    } else if (!strcmp(c, "realloc_grow_overflow") || !strcmp(c, "realloc_shrink_overflow")) {
        /* The guard page follows the block to its new end, in place or not. */
        bool grow = !strcmp(c, "realloc_grow_overflow");
        size_t n = grow ? 512 << 10 : 128 << 10;
        char *p = malloc(256 << 10);
        memset(p, 1, 256 << 10);
        p = realloc(p, n);
        memset(p, 2, n);
        say("ptr", p);
        say("at", p + n);
        go();
        poke(hide(p) + n);
    } else if (!strcmp(c, "slab_overflow")) {
        /* One byte past each of 64 live 4 KiB objects (slabs of two): the byte lands in the
         * next object's data, or in the guard page after a slab's last object. */
        char *v[64];
        for (int i = 0; i < 64; i++)
            v[i] = malloc(4096);
        for (int i = 0; i < 64; i++) {
            say("ptr", v[i]);
            say("at", v[i] + 4096);
            go();
            poke(hide(v[i]) + 4096);
        }
    } else if (!strcmp(c, "sample_overflow")) {
        char *p = alloc_victim(96);
        memset(p, 1, 96);
        say("ptr", p);
        say("at", p + 96);
        go();
        poke(hide(p) + 96);
    } else if (!strcmp(c, "sample_uaf")) {
        char *p = alloc_victim(96);
        memset(p, 1, 96);
        free_victim(p);
        say("ptr", p);
        say("at", p + 8);
        go();
        printf("read %d\n", peek((char *)hide(p) + 8));
    } else if (!strcmp(c, "sample_usable")) {
        /* A sampled block is right-aligned against its guard page: its usable size is its
         * size rounded up to 16, all of it writable. */
        char *p = alloc_victim(100);
        size_t u = malloc_usable_size(p);
        memset(p, 1, u);
        printf("usable %zu aligned %d\n", u, (int)((uintptr_t)p % 16 == 0));
        free(p);
    } else if (!strcmp(c, "chain_other") || !strcmp(c, "chain_tide")) {
        /* The program's handler first, then guard_sample set at run time: tide's handler
         * chains to the program's. */
        install_program_handler();
        if (tide_conf_set("guard_sample", "1") != 0)
            return 2;
        if (!strcmp(c, "chain_other")) {
            char *q = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            say("ptr", q);
            say("at", q);
            go();
            poke(hide(q));
        } else {
            char *p = alloc_victim(96);
            say("ptr", p);
            say("at", p + 96);
            go();
            poke(hide(p) + 96);
        }
    } else if (!strcmp(c, "double_free_held") || !strcmp(c, "double_free_sampled")) {
        char *p = malloc(!strcmp(c, "double_free_held") ? 256 << 10 : 96);
        say("ptr", p);
        go();
        free(p);
        free(hide(p));
    } else if (!strcmp(c, "rate")) {
        /* 32 MiB of 64-byte objects (counted when the thread's cache is refilled), then
         * 32 MiB of 32 KiB blocks (counted one by one), none freed: how many were sampled. */
        enum { NSMALL = (32 << 20) / 64, NLARGE = (32 << 20) / (32 << 10) };
        static void *small[NSMALL], *large[NLARGE];
        for (int i = 0; i < NSMALL; i++)
            small[i] = malloc(64);
        tide_stats_t s0 = tt_stats();
        for (int i = 0; i < NLARGE; i++)
            large[i] = malloc(32 << 10);
        tide_stats_t s1 = tt_stats();
        printf("sampled small %lu large %lu\n", (unsigned long)s0.sampled, (unsigned long)(s1.sampled - s0.sampled));
        for (int i = 0; i < NSMALL; i++)
            free(small[i]);
        for (int i = 0; i < NLARGE; i++)
            free(large[i]);
        return 0;
    } else if (!strcmp(c, "handler")) {
        /* Whose SIGSEGV action this process has (tide installs one only for its keys). */
        free(malloc(1)); /* tide has started */
        struct sigaction old;
        sigaction(SIGSEGV, NULL, &old);
        printf("handler %s\n", (old.sa_flags & SA_SIGINFO) ? "siginfo" : old.sa_handler == SIG_DFL ? "default" : "other");
        return 0;
    } else if (!strcmp(c, "vmas")) {
        vmas();
        return 0;
    } else {
        fprintf(stderr, "guard_probe: unknown case %s\n", c);
        return 2;
    }
    printf("survived\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: guard_probe CASE\n");
        return 2;
    }
    return run(argv[1]);
}
