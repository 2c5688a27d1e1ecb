/* SPDX-License-Identifier: MIT */
/* report.h - how tide tells the user something went wrong.
 *
 * Misuse (a bad or double free) is fatal: one precise line on stderr, then abort(),
 * as glibc does.  Configuration mistakes are warnings: one line, and the default
 * stays.  Nothing here allocates. */
#ifndef TIDE_REPORT_H
#define TIDE_REPORT_H

#include <stddef.h>
#include <stdint.h>

__attribute__((noreturn, cold)) void report_invalid_pointer(const char *func, const void *ptr);
__attribute__((noreturn, cold)) void report_double_free(const char *func, const void *ptr);
/* A double free found after the second free, where the block was taken next:
 * "tide: FUNC(): double free 0x... (HOW)". */
__attribute__((noreturn, cold)) void report_double_free_found(const char *func, const void *ptr, const char *how);
__attribute__((noreturn, cold)) void report_fatal(const char *func, const char *what, const void *ptr);
/* A broken internal invariant: "tide: internal error at FILE:LINE: WHAT", then abort(). */
__attribute__((noreturn, cold)) void report_internal(const char *file, int line, const char *what);

#ifdef TIDE_DEBUG
/* Lock order (lock.c's check, debug builds): "tide: lock order: taking TAKING (rank R)
 * while holding HELD (rank H)", or with HELD NULL "tide: lock order: TAKING taken, which
 * has no rank". */
__attribute__((noreturn, cold)) void report_lock_order(const char *taking, unsigned rank, const char *held,
                                                       unsigned held_rank);
#endif

/* Internal invariants.  TIDE_CHECK is always on, for the cheap ones whose failure would
 * corrupt the heap next (a cut outside its run, a descriptor pool that ran dry): one line
 * naming the condition, then abort.  TIDE_ASSERT is on in debug builds
 * (./configure --enable-debug) and the UBSan build that make check runs; elsewhere it
 * compiles to nothing (the condition is type-checked, never evaluated). */
#define TIDE_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (__builtin_expect(!(cond), 0))                                                  \
            report_internal(__FILE__, __LINE__, #cond);                                    \
    } while (0)
#ifdef TIDE_DEBUG
#define TIDE_ASSERT(cond) TIDE_CHECK(cond)
#else
#define TIDE_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/* "tide: " + the pieces, joined, + newline; at most a few hundred bytes. */
void report_line(const char *const *pieces, size_t n);
/* Format V in decimal (or hex with 0x when HEX) into BUF; returns BUF. */
char *report_fmt_u64(char *buf, uint64_t v, int hex);
/* The text of errno value ERR ("No such file or directory"), or "errno N" in BUF for a
 * number glibc does not know.  Untranslated, constant (glibc 2.32's strerrordesc_np):
 * no allocation, no lock, async-signal-safe, where strerror may load a translation. */
const char *report_strerror(int err, char buf[24]);

#endif
