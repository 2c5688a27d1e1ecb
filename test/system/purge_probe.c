/* SPDX-License-Identifier: MIT */
/* purge_probe.c - a small program the purge/conf/stats tests run in a fresh process, with a
 * TIDE_CONF of their choosing (tide reads it once, at start-up).  It reports what it saw
 * on stdout as "key=value" lines.  Between measurements it calls neither the allocator
 * nor stdio: /proc files are read with open/read into stack buffers. */
#include <errno.h>
#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tide.h"

#define MiB (1024L * 1024)

static long read_kb(const char *path, const char *field)
{
    char buf[8192];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    size_t flen = strlen(field);
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, field, flen) == 0 && l[flen] == ':')
            return strtol(l + flen + 1, NULL, 10);
    return -1;
}

static long rss_kb(void) { return read_kb("/proc/self/status", "VmRSS"); }
static long lazy_kb(void) { return read_kb("/proc/self/smaps_rollup", "LazyFree"); }

/* Lines of /proc/self/maps that overlap tide's ranges. */
static long tide_vmas(void)
{
    uintptr_t r[8][2];
    size_t nr = tide_ranges(r, 8);
    int fd = open("/proc/self/maps", O_RDONLY);
    char buf[1 << 16];
    size_t have = 0;
    ssize_t n;
    while (have < sizeof buf - 1 && (n = read(fd, buf + have, sizeof buf - 1 - have)) > 0)
        have += (size_t)n;
    close(fd);
    buf[have] = '\0';
    long count = 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        unsigned long a = strtoul(l, NULL, 16), b = strtoul(strchr(l, '-') + 1, NULL, 16);
        for (size_t i = 0; i < nr && i < 8; i++)
            if (b > r[i][0] && a < r[i][1])
                count++;
    }
    return count;
}

static void touch(void *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        ((volatile char *)p)[i] = (char)i;
    if (n)
        ((volatile char *)p)[n - 1] = 1;
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Mixed sizes from 1 KiB to 1 MiB, touched, until TOTAL usable bytes; returns count. */
static size_t alloc_mixed(void **v, size_t max, size_t total, size_t *usable, uint64_t *seed)
{
    size_t n = 0, sum = 0;
    while (sum < total && n < max) {
        size_t sz = (size_t)1024 << (rnd(seed) % 11);
        sz += rnd(seed) % sz;
        v[n] = malloc(sz);
        if (!v[n])
            exit(3);
        touch(v[n], sz);
        sum += malloc_usable_size(v[n]);
        n++;
    }
    *usable = sum;
    return n;
}

/* drop MB: allocate MB MiB in 1 MiB blocks and a few small ones, free them, report RSS,
 * LazyFree and tide's VMAs before and after. */
static int cmd_drop(long mb)
{
    void **v = calloc((size_t)mb, sizeof *v);
    for (long i = 0; i < mb; i++) {
        v[i] = malloc(MiB);
        touch(v[i], MiB);
    }
    long rss0 = rss_kb(), lazy0 = lazy_kb(), vma0 = tide_vmas();
    for (long i = 0; i < mb; i++)
        free(v[i]);
    long rss1 = rss_kb(), lazy1 = lazy_kb(), vma1 = tide_vmas();
    printf("rss_before=%ld\nrss_after=%ld\nlazy_before=%ld\nlazy_after=%ld\nvmas_before=%ld\nvmas_after=%ld\n", rss0,
           rss1, lazy0, lazy1, vma0, vma1);
    return 0;
}

/* The state letter of thread TID (R running or runnable, S asleep, ...), '?' if unknown. */
static char task_state(long tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')'); /* the name may hold spaces */
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

/* The thread of this process named NAME, or -1. */
static long find_task(const char *name)
{
    long found = -1;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *de; d && found < 0 && (de = readdir(d));) {
        char path[300], comm[64];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, comm, sizeof comm - 1);
        close(fd);
        if (n > 0 && comm[n - 1] == '\n')
            n--;
        if (n > 0 && (size_t)n == strlen(name) && memcmp(comm, name, (size_t)n) == 0)
            found = atol(de->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Of thread TID: time on a CPU and time runnable but waiting for one (ns), from
 * /proc/self/task/TID/schedstat.  Zeros when TID < 0 or the file is missing. */
static void task_sched(long tid, uint64_t *run_ns, uint64_t *wait_ns)
{
    char path[64], buf[128];
    *run_ns = *wait_ns = 0;
    if (tid < 0)
        return;
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *end;
    *run_ns = strtoull(buf, &end, 10);
    *wait_ns = strtoull(end, NULL, 10);
}

/* Time the hypervisor took from this machine's CPUs (all of them), in ns. */
static uint64_t steal_ns(void)
{
    char buf[512];
    int fd = open("/proc/stat", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* cpu user nice system idle iowait irq softirq steal */
    char *p = buf + 3;
    unsigned long long v = 0;
    for (int i = 0; i < 8; i++)
        v = strtoull(p, &p, 10);
    return (uint64_t)v * (1000000000u / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* idle LIVE_MB BURST_MB MAX_MS: keep LIVE_MB live, allocate and free a BURST_MB burst,
 * then make no call and report when (ms of CLOCK_MONOTONIC after the last free) RSS -
 * LazyFree - baseline came within 5% of the live heap, sampling every 50 ms for up to
 * MAX_MS.  Also what the clock cannot tell on a busy machine: how long the frees took,
 * the gap between the last two samples, the purger thread's time on a CPU and waiting
 * for one, the machine's steal time, and what tide purged, all up to that sample. */
static int cmd_idle(long live_mb, long burst_mb, long max_ms, int reuse_rounds)
{
    static void *live[1 << 16], *burst[1 << 18];
    uint64_t seed = 88172645463325252ull;
    long base = rss_kb();
    size_t live_bytes, burst_bytes;
    size_t nlive = alloc_mixed(live, 1 << 16, (size_t)live_mb * MiB, &live_bytes, &seed);
    size_t nburst = alloc_mixed(burst, 1 << 18, (size_t)burst_mb * MiB, &burst_bytes, &seed);
    /* idle-reused: the burst is freed and taken again first, so that the decay has seen
     * the program reuse all of it just before it goes idle. */
    for (int r = 0; r < reuse_rounds; r++) {
        for (size_t i = 0; i < nburst; i++)
            free(burst[i]);
        uint64_t again = 88172645463325252ull + (uint64_t)r + 1;
        nburst = alloc_mixed(burst, 1 << 18, (size_t)burst_mb * MiB, &burst_bytes, &again);
    }
    long peak = rss_kb();
    uint64_t t_first = now_ns();
    for (size_t i = 0; i < nburst; i++)
        free(burst[i]);
    long purger = find_task("tide-purge");
    tide_stats_t st0, st1;
    tide_stats_get(&st0, sizeof st0);
    uint64_t run0, wait0, run1, wait1, steal0 = steal_ns();
    task_sched(purger, &run0, &wait0);
    uint64_t t0 = now_ns(), t = t0, prev = t0;
    long limit_kb = (long)(live_bytes / 1024) * 105 / 100;
    long excess = 0, reached = -1;
    for (;;) {
        excess = rss_kb() - lazy_kb() - base;
        if (excess <= limit_kb) {
            reached = (long)((t - t0) / 1000000u);
            break;
        }
        if (t - t0 > (uint64_t)max_ms * 1000000u)
            break;
        nap_ms(50);
        prev = t;
        t = now_ns();
    }
    /* The purger names itself once it runs: one started by these frees may have had no
     * name yet above.  Its whole life is then what it spent on them. */
    if (purger < 0)
        purger = find_task("tide-purge");
    task_sched(purger, &run1, &wait1);
    uint64_t steal1 = steal_ns();
    tide_stats_get(&st1, sizeof st1);
    /* RSS falls while a pass runs, and the pass adds its bytes to tide's counter when it
     * ends: once RSS is back, give the pass in flight time to end (a 30 s hang detector),
     * so that the counter can be compared with the drop. */
    long drop_kb = peak - base - excess;
    for (int i = 0; reached >= 0 && i < 3000 && (long)((st1.purged_bytes - st0.purged_bytes) >> 10) < drop_kb - drop_kb / 20;
         i++) {
        nap_ms(10);
        tide_stats_get(&st1, sizeof st1);
    }
    printf("live_kb=%zu\nburst_kb=%zu\npeak_kb=%ld\nlimit_kb=%ld\nfinal_kb=%ld\nreached_ms=%ld\n", live_bytes / 1024,
           burst_bytes / 1024, peak - base, limit_kb, excess, reached);
    printf("free_ms=%lu\ngap_ms=%lu\npurger=%d\npurger_run_ms=%lu\npurger_wait_ms=%lu\nsteal_ms=%lu\npurged_kb=%lu\n",
           (unsigned long)((t0 - t_first) / 1000000u), (unsigned long)((t - prev) / 1000000u), purger >= 0,
           (unsigned long)((run1 - run0) / 1000000u), (unsigned long)((wait1 - wait0) / 1000000u),
           (unsigned long)((steal1 - steal0) / 1000000u),
           (unsigned long)((st1.purged_bytes - st0.purged_bytes) >> 10));
    for (size_t i = 0; i < nlive; i++)
        free(live[i]);
    return 0;
}

static long threads_now(void) { return read_kb("/proc/self/status", "Threads"); }

/* threads MB: free MB MiB of 1 MiB blocks, leaving dirty pages, then report the process's
 * threads and whether it may enter a new user namespace (the kernel refuses a
 * multithreaded process with EINVAL). */
static int cmd_threads(long mb)
{
    void **v = calloc((size_t)mb, sizeof *v);
    for (long i = 0; i < mb; i++) {
        v[i] = malloc(MiB);
        touch(v[i], MiB);
    }
    for (long i = 0; i < mb; i++)
        free(v[i]);
    free(v);
    long threads = threads_now();
    int r = unshare(CLONE_NEWUSER);
    printf("threads=%ld\nunshare=%d\nunshare_errno=%d\n", threads, r, r ? errno : 0);
    return 0;
}

/* One malloc and free of a large block (a call that reaches the page heap). */
static void one_call(void)
{
    void *volatile p = malloc(128 * 1024); /* volatile: the compiler must not drop the pair */
    free(p);
}

/* idle-next LIVE_MB BURST_MB WAIT_MS: keep LIVE_MB live, allocate and free a BURST_MB
 * burst, make no call for WAIT_MS and report the excess RSS; then one call, the excess
 * after it, and after another WAIT_MS and call.  A single-threaded process with no purger
 * thread purges what has decayed at its next calls (the objects that first call drains
 * from the transfer caches decay in their turn). */
static int cmd_idle_next(long live_mb, long burst_mb, long wait_ms)
{
    static void *live[1 << 16], *burst[1 << 18];
    uint64_t seed = 88172645463325252ull;
    long base = rss_kb();
    size_t live_bytes, burst_bytes;
    size_t nlive = alloc_mixed(live, 1 << 16, (size_t)live_mb * MiB, &live_bytes, &seed);
    size_t nburst = alloc_mixed(burst, 1 << 18, (size_t)burst_mb * MiB, &burst_bytes, &seed);
    for (size_t i = 0; i < nburst; i++)
        free(burst[i]);
    nap_ms(wait_ms);
    long idle_kb = rss_kb() - lazy_kb() - base, threads = threads_now();
    one_call();
    long next_kb = rss_kb() - lazy_kb() - base;
    nap_ms(wait_ms);
    one_call();
    long later_kb = rss_kb() - lazy_kb() - base;
    printf("live_kb=%zu\nburst_kb=%zu\nidle_kb=%ld\nnext_kb=%ld\nlater_kb=%ld\nlimit_kb=%ld\nthreads=%ld\n",
           live_bytes / 1024, burst_bytes / 1024, idle_kb, next_kb, later_kb, (long)(live_bytes / 1024) * 105 / 100,
           threads);
    for (size_t i = 0; i < nlive; i++)
        free(live[i]);
    return 0;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* swing DECAY_MS: a working set that comes back after more than decay_ms, beside memory
 * that never does (run with background:off and decay_ms DECAY_MS: the passes run at this
 * program's large mallocs and frees).  COLD (256 blocks of 1 MiB, apart) is freed first
 * and never used again.  Then, every decay_ms / 8, a steady block S (4 MiB) is freed and
 * taken again twice, and for the first 4 steps a swinging set X (8 blocks of 2 MiB) is
 * allocated, written and freed; for the next 12 steps (1.5 x decay_ms) X stays free, and
 * then it is allocated and written again.  Every size fits only its own runs: COLD's
 * 1 MiB runs nothing else, X's run the 2 MiB blocks, S's run S (live guards keep
 * the runs apart).  Reports what tide
 * purged from the first free of COLD to X's return, the minor faults of writing X again,
 * the longest gap between two steps (a step late by decay_ms / 2 or more makes the run
 * say nothing: the reuse it should have seen was not there), and whether X's run and S's
 * lie apart as meant. */
static int cmd_swing(long decay_ms)
{
    enum { NCOLD = 256, NX = 8 };
    static void *cold[NCOLD], *guard[NCOLD], *x[NX];
    const size_t cold_size = 1 * MiB, x_size = 2 * MiB, s_size = 4 * MiB, guard_size = 128 * 1024;
    for (int i = 0; i < NCOLD; i++) {
        cold[i] = malloc(cold_size);
        guard[i] = malloc(guard_size); /* keeps the cold runs apart */
        touch(cold[i], cold_size);
    }
    for (int i = 0; i < NX; i++)
        x[i] = malloc(x_size);
    /* Guards the size of the blocks before them: a smaller one could fit a free run
     * elsewhere and leave the two sets side by side. */
    void *xguard = malloc(x_size), *s = malloc(s_size), *sguard = malloc(s_size);
    touch(s, s_size);
    /* The sets as laid out, one after the other: else the run says nothing. */
    int apart = (char *)xguard == (char *)x[NX - 1] + x_size && (char *)s == (char *)xguard + x_size;
    for (int i = 0; i < NX; i++) {
        touch(x[i], x_size);
        free(x[i]);
    }
    tide_stats_t st0, st1;
    tide_stats_get(&st0, sizeof st0);
    for (int i = 0; i < NCOLD; i++)
        free(cold[i]);
    long step_ms = decay_ms / 8, max_gap_ms = 0;
    uint64_t prev = now_ns();
    for (int step = 0; step < 16; step++) {
        nap_ms(step_ms);
        uint64_t t = now_ns();
        max_gap_ms = (long)((t - prev) / 1000000u) > max_gap_ms ? (long)((t - prev) / 1000000u) : max_gap_ms;
        prev = t;
        for (int k = 0; k < 2; k++) {
            free(s);
            s = malloc(s_size);
            touch(s, s_size);
        }
        if (step < 4) {
            for (int i = 0; i < NX; i++) {
                x[i] = malloc(x_size);
                touch(x[i], x_size);
            }
            for (int i = 0; i < NX; i++)
                free(x[i]);
        }
    }
    tide_stats_get(&st1, sizeof st1);
    long f0 = minor_faults();
    for (int i = 0; i < NX; i++) {
        x[i] = malloc(x_size);
        touch(x[i], x_size);
    }
    long faults = minor_faults() - f0;
    printf("cold_kb=%zu\nx_kb=%zu\npurged_kb=%lu\nx_faults=%ld\nx_pages=%zu\nmax_gap_ms=%ld\napart=%d\n",
           NCOLD * cold_size / 1024, NX * x_size / 1024,
           (unsigned long)((st1.purged_bytes - st0.purged_bytes) >> 10), faults, NX * x_size / 4096, max_gap_ms,
           apart);
    for (int i = 0; i < NX; i++)
        free(x[i]);
    for (int i = 0; i < NCOLD; i++)
        free(guard[i]);
    free(s);
    free(sguard);
    free(xguard);
    return 0;
}

/* conf KEY: print KEY's value as tide_conf_get sees it. */
static int cmd_conf(const char *key)
{
    char buf[64];
    if (tide_conf_get(key, buf, sizeof buf) != 0)
        return 4;
    printf("%s=%s\n", key, buf);
    return 0;
}

static uint64_t dirty_bytes(void)
{
    tide_stats_t st;
    tide_stats_get(&st, sizeof st);
    return st.dirty;
}

/* decay0-asleep: free pages so that the purger thread starts and waits for them to come
 * due, set decay_ms to 0 at run time, wait (up to 10 s) until the purger has purged them
 * and is asleep, then sample its state 100 times, 5 ms apart.  With decay_ms 0 every free
 * purges at once: the purger has nothing to wait for and must stay asleep. */
static int cmd_decay0_asleep(void)
{
    void *p = malloc(8 * MiB);
    touch(p, 8 * MiB);
    free(p);
    long tid = -1;
    for (int i = 0; i < 1000 && tid < 0; i++, nap_ms(10))
        tid = find_task("tide-purge");
    if (tid < 0)
        return 5;
    if (tide_conf_set("decay_ms", "0") != 0)
        return 6;
    int waited = 0;
    for (; waited < 1000 && (dirty_bytes() != 0 || task_state(tid) != 'S'); waited++)
        nap_ms(10);
    int asleep = 0, samples = 100;
    for (int i = 0; i < samples; i++, nap_ms(5))
        asleep += task_state(tid) == 'S';
    printf("dirty_kb=%lu\nsettled=%d\nasleep=%d\nsamples=%d\n", (unsigned long)(dirty_bytes() >> 10),
           waited < 1000, asleep, samples);
    return 0;
}

/* free-starts: whether a free starts the purger thread.  The program becomes
 * multithreaded (a thread that makes no allocator call, created and joined) after its
 * allocations, with the classes pthread_create allocates from already in the cache, so
 * that the first call that may start the purger is the free of a large block; then one
 * malloc.  Reports the process's threads before the free, after it and after the malloc. */
static void *nothing(void *arg) { return arg; }

static int cmd_free_starts(void)
{
    char *big = malloc(8 * MiB);
    if (!big)
        return 3;
    touch(big, 8 * MiB);
    void *warm[64];
    for (int i = 0; i < 64; i++)
        warm[i] = malloc(16 * (size_t)(i + 1));
    for (int i = 0; i < 64; i++)
        free(warm[i]);
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 4;
    long before = threads_now();
    free(big);
    long after_free = threads_now();
    char *again = malloc(8 * MiB);
    if (!again)
        return 3;
    long after_malloc = threads_now();
    touch(again, 4096); /* used, so that the compiler keeps the pair */
    printf("before=%ld\nafter_free=%ld\nafter_malloc=%ld\n", before, after_free, after_malloc);
    free(again);
    return 0;
}

/* --thread: a second thread that makes no allocator call, started before anything else,
 * so that the probe is a multithreaded program (tide's default background:auto starts its
 * purger thread only in one). */
static void *sleeper(void *arg)
{
    for (;;)
        pause();
    return arg;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--thread") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, sleeper, NULL) != 0)
            return 8;
        argc--, argv++;
    }
    if (argc >= 3 && strcmp(argv[1], "drop") == 0)
        return cmd_drop(atol(argv[2]));
    if (argc >= 5 && strcmp(argv[1], "idle") == 0)
        return cmd_idle(atol(argv[2]), atol(argv[3]), atol(argv[4]), 0);
    if (argc >= 5 && strcmp(argv[1], "idle-reused") == 0)
        return cmd_idle(atol(argv[2]), atol(argv[3]), atol(argv[4]), 2);
    if (argc >= 3 && strcmp(argv[1], "conf") == 0)
        return cmd_conf(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "threads") == 0)
        return cmd_threads(atol(argv[2]));
    if (argc >= 5 && strcmp(argv[1], "idle-next") == 0)
        return cmd_idle_next(atol(argv[2]), atol(argv[3]), atol(argv[4]));
    if (argc >= 5 && strcmp(argv[1], "idle-child") == 0) {
        /* The same in a fork child: the purger thread did not survive the fork, and the
         * child must start its own. */
        free(malloc(100)); /* tide is up, and so is the parent's purger */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            int r = cmd_idle(atol(argv[2]), atol(argv[3]), atol(argv[4]), 0);
            fflush(stdout);
            _exit(r);
        }
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 9;
    }
    if (argc >= 3 && strcmp(argv[1], "swing") == 0)
        return cmd_swing(atol(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "decay0-asleep") == 0)
        return cmd_decay0_asleep();
    if (argc >= 2 && strcmp(argv[1], "noop") == 0)
        return 0;
    if (argc >= 2 && strcmp(argv[1], "free-starts") == 0)
        return cmd_free_starts();
    fprintf(stderr, "usage: probe [--thread] drop MB | idle|idle-child|idle-reused LIVE_MB BURST_MB MAX_MS | conf KEY | decay0-asleep | "
                    "threads MB | idle-next LIVE_MB BURST_MB WAIT_MS | swing DECAY_MS | noop | free-starts\n");
    return 2;
}
