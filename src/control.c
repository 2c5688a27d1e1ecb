/* SPDX-License-Identifier: MIT */
/* control.c - tide's own interface beyond the malloc family: settings, purging,
 * statistics, the heap check, the ranges (include/tide.h); and in the fault-injection builds
 * the tests' hook into the OS layer. */
#include <errno.h>
#include <string.h>

#include "tide.h"

#include "check.h"
#include "conf.h"
#include "guard.h"
#include "init.h"
#include "os.h"
#include "prof.h"
#include "region.h"
#include "stats.h"
#include "tcache.h"

TIDE_EXPORT size_t tide_purge(void)
{
    if (!init_ensure())
        return 0;
    prof_trim();
    return tcache_trim();
}

TIDE_EXPORT int tide_conf_set(const char *key, const char *value)
{
    if (!key || !value) {
        errno = EINVAL;
        return -1;
    }
    init_ensure();
    int err = conf_set(key, strlen(key), value, strlen(value), false);
    if (err) {
        errno = err;
        return -1;
    }
    if (strcmp(key, "thp") == 0) {
        region_set_thp(conf.thp == THP_ON);
        extent_huge_thp_changed();
    }
    if (strcmp(key, "guard") == 0 || strcmp(key, "guard_sample") == 0)
        guard_boot();
    return 0;
}

TIDE_EXPORT int tide_conf_get(const char *key, char *buf, size_t len)
{
    int err = key && buf ? conf_get(key, buf, len) : EINVAL;
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

TIDE_EXPORT int tide_stats_get(tide_stats_t *out, size_t stats_size)
{
    if (!out) {
        errno = EINVAL;
        return -1;
    }
    tide_stats_t s;
    memset(&s, 0, sizeof s);
    if (init_ensure())
        stats_collect(&s, true);
    memcpy(out, &s, MIN(stats_size, sizeof s));
    return 0;
}

TIDE_EXPORT void tide_stats_print(int json)
{
    if (init_ensure())
        stats_print(json);
}

TIDE_EXPORT void tide_stats_print_cb(void (*write)(void *arg, const char *s), void *arg, const char *opts)
{
    if (init_ensure())
        stats_print_cb(write, arg, opts);
}

TIDE_EXPORT size_t tide_ranges(uintptr_t (*out)[2], size_t max)
{
    if (!init_ensure())
        return 0;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n && i < max; i++) {
        out[i][0] = region.ranges[i].pm_lo;
        out[i][1] = ATOMIC_LOAD(&region.ranges[i].end);
    }
    return n;
}

TIDE_EXPORT int tide_prof_dump(const char *path)
{
    int err = init_ensure() ? prof_dump(path) : ENOENT;
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

TIDE_EXPORT int tide_check(void) { return init_ensure() && check_heap() != 0 ? -1 : 0; }

#ifdef TIDE_FAULT_INJECTION
/* The test hook of the fault-injection builds (test/libtide_fault.la, ./configure
 * --enable-fault-injection), declared for the tests in test/support/fault_inject.h. */
TIDE_TEST_EXPORT int tide_fault_inject(int op, long skip, long count);
TIDE_TEST_EXPORT int tide_fault_inject(int op, long skip, long count)
{
    if (op >= 0 && op < OS_OP_COUNT) {
        os_fault_set((os_op_t)op, skip, count);
        return 0;
    }
    errno = EINVAL;
    return -1;
}
#endif
