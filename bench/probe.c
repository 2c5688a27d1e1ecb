/* probe.c - see probe.h. */
#include "config.h"

#include "probe.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

double probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long probe_peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kib = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
                break;
        fclose(f);
        if (kib >= 0)
            return kib;
    }
    /* On Linux ru_maxrss is already in KiB. */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        return ru.ru_maxrss;
    return -1;
}

long probe_vma_count(void)
{
    /* Count newlines with fread, not fgets: a line may be longer than any buffer. */
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char buf[8192];
    size_t n;
    long lines = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++)
            lines++;
    fclose(f);
    return lines;
}

const char *probe_malloc_provider(void)
{
    /* dlsym(RTLD_DEFAULT) follows the same lookup order as the program's own calls, so
     * it finds the preloaded allocator when there is one. */
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    Dl_info info;
    if (sym && dladdr(sym, &info) && info.dli_fname && info.dli_fname[0])
        return info.dli_fname;
    return "unknown";
}
