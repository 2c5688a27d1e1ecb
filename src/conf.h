/* SPDX-License-Identifier: MIT */
/* conf.h - tide's settings: "key:value,key:value" from the program's tide_malloc_conf,
 * the file TIDE_CONF_FILE and TIDE_CONF, in that order, read once at start-up without
 * allocating; tide_conf_set()/tide_conf_get() at run time. */
#ifndef TIDE_CONF_H
#define TIDE_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

typedef enum {
    PURGE_NONE = 0,
    PURGE_DONTNEED = 1,
    PURGE_FREE = 2
} purge_policy_t;

typedef enum {
    BACKGROUND_OFF = 0,
    BACKGROUND_ON = 1,
    BACKGROUND_AUTO = 2 /* only once the process has a second thread */
} background_mode_t;

typedef enum {
    THP_OFF = 0,  /* no huge-page work: 4 KiB pages unless the system's THP setting is always */
    THP_ON = 1,   /* MADV_HUGEPAGE on every range, whole; purge in whole 2 MiB units */
    THP_AUTO = 2  /* where the system's THP setting is madvise or always: MADV_HUGEPAGE on the
                   * whole heap once it is large, MADV_NOHUGEPAGE once a purge splits a unit
                   * in use (extent_huge.c) */
} thp_mode_t;

#define CONF_PREFIX_MAX 256
/* The most of the file that is read (a static buffer: nothing may allocate yet). */
#define CONF_FILE_MAX 8192

typedef struct conf_s {
    long purge;            /* purge_policy_t */
    long decay_ms;         /* -1: never; 0: at once */
    long background;       /* background_mode_t: the idle purger thread */
    long arenas;           /* 0: 4 per CPU */
    long tcache;
    long thp;              /* thp_mode_t */
    long stats;            /* print statistics at exit: 0 off, 1 text (on), 2 JSON */
    char stats_file[CONF_PREFIX_MAX]; /* where they go ("%p": the pid); "": stderr */
    long verbose;          /* the effective settings on stderr at start-up */
    long remap;            /* mremap path for large realloc */
    long remap_max;        /* live moved blocks at most (each costs 2 VMAs until healed) */
    long remap_threshold;  /* bytes: reallocs of blocks at least this big may move pages */
    long prof;             /* the sampling heap profiler */
    long prof_sample;      /* bytes: mean interval between samples */
    long prof_final;       /* dump a profile at exit */
    long prof_interval;    /* bytes: dump each time the sampled live heap grows this much; 0 never */
    char prof_prefix[CONF_PREFIX_MAX]; /* dumps go to PREFIX.PID.SEQ.KIND.heap */
    long guard;            /* a guard page after every slab and large block; freed large
                            * blocks held as guards for a while (guard.h) */
    long guard_quarantine; /* bytes: the most freed blocks held as guards (each kind) */
    long guard_sample;     /* bytes: one allocation in about this many is sampled; 0 off */
} conf_t;

extern conf_t conf TIDE_HIDDEN;

/* Read the settings: tide_malloc_conf, the file, then TIDE_CONF from the environment (no
 * getenv: it may run before libc is ready), TIDE_CONF not in a setuid or setgid program. */
void conf_init(void);
/* Parse one "key:value,..." string as TIDE_CONF; warnings for bad entries.  Returns bad entries. */
int conf_parse(const char *s, bool at_start);
int conf_set(const char *key, size_t keylen, const char *val, size_t vallen, bool at_start);
int conf_get(const char *key, char *buf, size_t len);
void conf_print_help(void);
/* The name of key I of the table, in its order; NULL past the last (with conf_get, the
 * effective settings the statistics and verbose:on print). */
const char *conf_key_name(size_t i);

#endif
