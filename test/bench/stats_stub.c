/* SPDX-License-Identifier: MIT */
/*
 * stats_stub.c - a stand-in for libtide's statistics.  The tests preload it into
 * bench/ebizzy to check that the clone's weak reference to tide_stats_get resolves to a
 * preloaded library, and that it reports only the fields the library says it filled:
 * STUB_TIDE_STATS_SIZE=N makes the stub claim to be an older library whose
 * tide_stats_t is N bytes long.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tide.h"

__attribute__((visibility("default"))) int tide_stats_get(tide_stats_t *out, size_t size)
{
    tide_stats_t s = { .size = sizeof s };
    const char *claimed = getenv("STUB_TIDE_STATS_SIZE");
    if (claimed)
        s.size = strtoull(claimed, NULL, 10);
    s.madvise_calls[0] = 11;
    s.madvise_bytes[0] = 45056;
    s.madvise_calls[1] = 22;
    s.madvise_bytes[1] = 90112;
    s.process_madvise_calls = 3;
    s.purges = 33;
    s.purged_bytes = 135168;
    s.vmas = 4;
    size_t n = size < sizeof s ? size : sizeof s;
    memcpy(out, &s, n < s.size ? n : s.size);
    return 0;
}
