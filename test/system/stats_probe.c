/* SPDX-License-Identifier: MIT */
/* stats_probe.c - run by test/system/stats in fresh processes (TIDE_CONF is read at
 * start-up).  Linked with libtide.
 *
 *   stats_probe noop              prints "pid=N" and exits (the statistics at exit, verbose)
 *   stats_probe classes N SIZE    three JSON objects on stdout (tide_stats_print_cb, "J"):
 *                                 after tide_purge(), after N mallocs of SIZE and another
 *                                 tide_purge(), after their frees and a third
 *   stats_probe info PATH         malloc_info(0) into PATH, then on stdout tide_stats_get's
 *                                 numbers of the same moment and malloc_info(1)'s errno */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tide.h"

/* write(2), not stdio: the callback must not allocate here, or the counts would move. */
static void write_stdout(void *arg, const char *s)
{
    (void)arg;
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w <= 0)
            exit(3);
        s += w;
        n -= (size_t)w;
    }
}

static int classes(long n, size_t size)
{
    void **objs = malloc((size_t)n * sizeof *objs);
    if (!objs)
        return 2;
    tide_purge();
    tide_stats_print_cb(write_stdout, NULL, "J");
    for (long i = 0; i < n; i++)
        if (!(objs[i] = malloc(size)))
            return 2;
    tide_purge();
    tide_stats_print_cb(write_stdout, NULL, "J");
    for (long i = 0; i < n; i++)
        free(objs[i]);
    tide_purge();
    tide_stats_print_cb(write_stdout, NULL, "J");
    free(objs);
    return 0;
}

static int info(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 2;
    /* A buffer of the probe's own: fprintf allocates none, so nothing moves between the
     * two snapshots. */
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    void *keep[3] = { malloc(100), malloc(3000), malloc(1 << 20) }; /* small, small, large */
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    int r = malloc_info(0, f);
    errno = 0;
    int bad = malloc_info(1, f);
    int bad_errno = errno;
    if (fclose(f) != 0)
        return 2;
    printf("r=%d\nbad=%d\nbad_errno=%d\nmapped=%llu\nlarge=%llu\nfree_pages=%llu\nnarenas=%llu\n", r, bad, bad_errno,
           (unsigned long long)s.mapped, (unsigned long long)(s.nmalloc_large - s.nfree_large),
           (unsigned long long)(s.dirty + s.lazy + s.clean), (unsigned long long)s.narenas);
    for (int i = 0; i < 3; i++)
        free(keep[i]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "noop") == 0) {
        printf("pid=%ld\n", (long)getpid());
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "classes") == 0)
        return classes(atol(argv[2]), (size_t)atol(argv[3]));
    if (argc >= 3 && strcmp(argv[1], "info") == 0)
        return info(argv[2]);
    fprintf(stderr, "usage: stats_probe noop | classes N SIZE | info PATH\n");
    return 2;
}
