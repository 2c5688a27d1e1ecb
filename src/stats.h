/* SPDX-License-Identifier: MIT */
/* stats.h - gathering tide's counters into a tide_stats_t, and printing them. */
#ifndef TIDE_STATS_H
#define TIDE_STATS_H

#include <stdbool.h>

#include "tide.h"

/* EXPENSIVE: also measure resident bytes (mincore) and VMAs (/proc/self/maps). */
void stats_collect(tide_stats_t *s, bool expensive);
void stats_print(int json);

#endif
