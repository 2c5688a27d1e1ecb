/* SPDX-License-Identifier: MIT */
/*
 * shape.h - what the workload-shape programs (churn, larson, powers) share: their
 * options (-t THREADS, -w PERCENT) and the lines of their report that run.py reads.
 */
#ifndef TIDE_BENCH_SHAPE_H
#define TIDE_BENCH_SHAPE_H

#include <stdio.h>
#include <unistd.h>

#include "bench.h"
#include "probe.h"

/* -t THREADS (at most MAX_THREADS) and -w PERCENT, and nothing else; or exit 1 with
 * USAGE. */
static inline void shape_parse(int argc, char **argv, const char *usage, unsigned max_threads,
                               unsigned *nthreads, unsigned *percent)
{
    int c;
    while ((c = getopt(argc, argv, "t:w:")) != -1) {
        if (c == 'w') {
            *percent = (unsigned)bench_parse_count(optarg, "-w");
        } else if (c == 't') {
            *nthreads = (unsigned)bench_parse_count(optarg, "-t");
        } else {
            fprintf(stderr, "%s", usage);
            exit(1);
        }
    }
    if (optind < argc || *nthreads > max_threads) {
        fprintf(stderr, "%s", usage);
        exit(1);
    }
}

/* The timed part took T1 - T0 seconds and CSW context switches. */
static inline void shape_report(double t0, double t1, long csw)
{
    printf("elapsed_s %.6f\n", t1 - t0);
    printf("csw %ld\n", csw);
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
}

#endif
