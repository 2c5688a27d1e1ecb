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
__attribute__((noreturn, cold)) void report_fatal(const char *func, const char *what, const void *ptr);
/* "tide: " + the pieces, joined, + newline; at most a few hundred bytes. */
void report_line(const char *const *pieces, size_t n);
/* Format V in decimal (or hex with 0x when HEX) into BUF; returns BUF. */
char *report_fmt_u64(char *buf, uint64_t v, int hex);

#endif
