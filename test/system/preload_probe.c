/* SPDX-License-Identifier: MIT */
/*
 * preload_probe.c - preloaded after libtide by test/system/preload, into every process the
 * programs under test start.  When TIDE_PROBE_OUT names a file, its constructor appends
 * one line there:
 *
 *   exe=<path> malloc=<library defining the malloc the process calls> maps_libtide=<0|1>
 *   in_tide=<1: a fresh malloc() lies inside tide_ranges(), 0: outside, -1: no tide_ranges>
 *
 * It uses no stdio and makes one write() per line, so concurrent processes do not mix
 * their lines.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int maps_mention(const char *needle)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    static char buf[65536 + 256];
    size_t keep = 0, nl = strlen(needle);
    int found = 0;
    for (;;) {
        ssize_t r = read(fd, buf + keep, sizeof buf - 1 - keep);
        if (r <= 0)
            break;
        size_t n = keep + (size_t)r;
        buf[n] = 0;
        if (memmem(buf, n, needle, nl)) {
            found = 1;
            break;
        }
        keep = nl < n ? nl : n; /* a needle split between two reads */
        memmove(buf, buf + n - keep, keep);
    }
    close(fd);
    return found;
}

__attribute__((constructor)) static void tide_probe(void)
{
    const char *out = getenv("TIDE_PROBE_OUT");
    if (!out || !*out)
        return;
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;

    const char *lib = "?";
    Dl_info di;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (m && dladdr(m, &di) && di.dli_fname)
        lib = di.dli_fname;

    void *p = malloc(100); /* bound the way the program's own calls are */
    int in_tide = -1;
    size_t (*ranges)(uintptr_t (*)[2], size_t) = (size_t(*)(uintptr_t(*)[2], size_t))dlsym(RTLD_DEFAULT, "tide_ranges");
    if (ranges) {
        uintptr_t r[16][2];
        size_t k = ranges(r, 16);
        in_tide = 0;
        for (size_t i = 0; i < k && i < 16; i++)
            if ((uintptr_t)p >= r[i][0] && (uintptr_t)p < r[i][1])
                in_tide = 1;
    }
    free(p);

    char line[1200];
    int len = snprintf(line, sizeof line, "exe=%s malloc=%s maps_libtide=%d in_tide=%d\n", exe, lib,
                       maps_mention("/libtide.so"), in_tide);
    int fd = open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (write(fd, line, (size_t)len) < 0) {
            /* nothing to do: the test will miss this process's line */
        }
        close(fd);
    }
}
