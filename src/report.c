/* SPDX-License-Identifier: MIT */
/* report.c - fatal misuse reports and one-line warnings, without allocating. */
#include "report.h"

#include <stdlib.h>
#include <string.h>

#include "os.h"

char *report_fmt_u64(char *buf, uint64_t v, int hex)
{
    char tmp[24];
    size_t n = 0;
    unsigned base = hex ? 16 : 10;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    char *p = buf;
    if (hex) {
        *p++ = '0';
        *p++ = 'x';
    }
    while (n)
        *p++ = tmp[--n];
    *p = '\0';
    return buf;
}

const char *report_strerror(int err, char buf[24])
{
    const char *text = strerrordesc_np(err);
    if (text)
        return text;
    memcpy(buf, "errno ", 6);
    if (err < 0) {
        buf[6] = '-';
        report_fmt_u64(buf + 7, (uint64_t)-(int64_t)err, 0);
    } else {
        report_fmt_u64(buf + 6, (uint64_t)err, 0);
    }
    return buf;
}

void report_line(const char *const *pieces, size_t n)
{
    char line[512];
    size_t len = 0;
    static const char prefix[] = "tide: ";
    memcpy(line, prefix, sizeof prefix - 1);
    len = sizeof prefix - 1;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(pieces[i]);
        if (l > sizeof line - 1 - len)
            l = sizeof line - 1 - len;
        memcpy(line + len, pieces[i], l);
        len += l;
    }
    line[len++] = '\n';
    os_write_stderr(line, len);
}

void report_fatal(const char *func, const char *what, const void *ptr)
{
    char hex[24];
    const char *pieces[] = { func, "(): ", what, " ", report_fmt_u64(hex, (uintptr_t)ptr, 1) };
    report_line(pieces, ARRAY_SIZE(pieces));
    abort();
}

void report_internal(const char *file, int line, const char *what)
{
    char num[24];
    const char *base = strrchr(file, '/');
    const char *pieces[] = { "internal error at ", base ? base + 1 : file, ":", report_fmt_u64(num, (uint64_t)line, 0),
                             ": ", what };
    report_line(pieces, ARRAY_SIZE(pieces));
    abort();
}

#ifdef TIDE_DEBUG
void report_lock_order(const char *taking, unsigned rank, const char *held, unsigned held_rank)
{
    char r[24], h[24];
    if (!held) {
        const char *pieces[] = { "lock order: ", taking, " taken, which has no rank" };
        report_line(pieces, ARRAY_SIZE(pieces));
    } else {
        const char *pieces[] = { "lock order: taking ", taking, " (rank ", report_fmt_u64(r, rank, 0), ") while holding ",
                                 held, " (rank ", report_fmt_u64(h, held_rank, 0), ")" };
        report_line(pieces, ARRAY_SIZE(pieces));
    }
    abort();
}
#endif

void report_invalid_pointer(const char *func, const void *ptr) { report_fatal(func, "invalid pointer", ptr); }
void report_double_free(const char *func, const void *ptr) { report_fatal(func, "double free", ptr); }

void report_double_free_found(const char *func, const void *ptr, const char *how)
{
    char hex[24];
    const char *pieces[] = { func, "(): double free ", report_fmt_u64(hex, (uintptr_t)ptr, 1), " (", how, ")" };
    report_line(pieces, ARRAY_SIZE(pieces));
    abort();
}
