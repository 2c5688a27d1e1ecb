/* SPDX-License-Identifier: MIT */
/* probe.c - see probe.h. */
#include "config.h"

#include "probe.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

long probe_peak_rss_kib(void)
{
    char status[4096];
    long kib = probe_read_file("/proc/self/status", status, sizeof status) > 0
        ? probe_field(status, "VmHWM:") : -1;
    if (kib >= 0)
        return kib;
    /* On Linux ru_maxrss is already in KiB. */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        return ru.ru_maxrss;
    return -1;
}

long probe_vma_count(void)
{
    return probe_maps_count(NULL, 0, NULL);
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

long probe_maps_count(const uintptr_t (*ranges)[2], size_t nranges, long *inside)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* A line starts with "lo-hi " in hex; only that prefix is parsed, so a line may be
     * longer than the buffer: the parser carries its state from one read to the next. */
    char buf[4096];
    long lines = 0, in = 0;
    uintptr_t addr[2] = { 0, 0 };
    int field = 0; /* 0: lo, 1: hi, 2: the rest of the line */
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            close(fd);
            return -1;
        }
        for (ssize_t i = 0; i < n; i++) {
            char c = buf[i];
            if (c == '\n') {
                lines++;
                for (size_t r = 0; r < nranges; r++)
                    if (addr[0] < ranges[r][1] && ranges[r][0] < addr[1]) {
                        in++;
                        break;
                    }
                addr[0] = addr[1] = 0;
                field = 0;
            } else if (field < 2) {
                int d = hex_digit(c);
                if (d >= 0)
                    addr[field] = addr[field] << 4 | (uintptr_t)d;
                else
                    field++; /* '-' after lo, ' ' after hi */
            }
        }
    }
    close(fd);
    if (inside)
        *inside = in;
    return lines;
}

long probe_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || size == 0)
        return -1;
    size_t len = 0;
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0)
                len = (size_t)-1;
            break;
        }
        len += (size_t)n;
    }
    close(fd);
    if (len == (size_t)-1)
        return -1;
    buf[len] = '\0';
    return (long)len;
}

long probe_field(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, name, n) == 0) {
            const char *p = line + n;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p < '0' || *p > '9')
                return -1;
            long v = 0;
            for (; *p >= '0' && *p <= '9'; p++)
                v = v * 10 + (*p - '0');
            return v;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return -1;
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
