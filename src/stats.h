/* SPDX-License-Identifier: MIT */
/* stats.h - gathering tide's counters into a tide_stats_t, and printing them. */
#ifndef TIDE_STATS_H
#define TIDE_STATS_H

#include <stdbool.h>
#include <stdio.h>

#include "tide.h"

/* EXPENSIVE: also measure resident bytes (mincore) and VMAs (/proc/self/maps). */
void stats_collect(tide_stats_t *s, bool expensive);
/* Print the statistics on stderr: as text, or as one JSON object when JSON. */
void stats_print(int json);
/* Print them through WRITE(ARG, piece) (NULL: stderr), in NUL-terminated pieces, with no
 * lock held: OPTS as tide_stats_print_cb's (tide.h). */
void stats_print_cb(void (*write)(void *arg, const char *s), void *arg, const char *opts);
/* At exit: print them as stats and stats_file say (conf.h), if at all. */
void stats_exit(void);
/* verbose:on at start-up: one line of who is running and the effective settings. */
void stats_verbose(void);
/* malloc_info's XML (glibc's form) of tide's numbers on FP: gathered first, then printed
 * with no lock of tide's held.  0, or an errno value. */
int stats_malloc_info(FILE *fp);

#endif
