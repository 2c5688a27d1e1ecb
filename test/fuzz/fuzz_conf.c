/* SPDX-License-Identifier: MIT */
/* fuzz_conf.c - libFuzzer target for the TIDE_CONF parser (src/conf.c).
 *
 * Each input, NUL-terminated, is parsed as TIDE_CONF is at start-up; then every field of
 * conf must lie in its documented range, every key must read back with conf_get() and set
 * again to the same value, and every line conf.c writes must be one whole line of at most
 * 512 bytes.  Linked with src/conf.c, src/report.c and src/os.c only; os_write_stderr() is
 * wrapped (-Wl,--wrap=os_write_stderr: it makes a raw system call, no write() to wrap)
 * so that the warnings are checked, not printed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"

static conf_t defaults;
static int have_defaults, capturing;

void __real_os_write_stderr(const char *s, size_t n);
void __wrap_os_write_stderr(const char *s, size_t n)
{
    if (capturing) {
        /* report_line(): "tide: " ... "\n", at most 512 bytes; conf_print_help(): its lines. */
        if (n == 0 || n > 512 || s[n - 1] != '\n')
            abort();
        return;
    }
    __real_os_write_stderr(s, n);
}

static void in_range(long v, long lo, long hi)
{
    if (v < lo || v > hi)
        abort();
}

static const char *const keys[] = { "purge",           "decay_ms", "background",  "arenas",     "tcache",
                                    "thp",             "stats",    "stats_file",  "verbose",    "remap",
                                    "remap_max",       "remap_threshold",
                                    "prof",            "prof_sample", "prof_final", "prof_interval", "prof_prefix",
                                    "guard",           "guard_quarantine", "guard_sample" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!have_defaults) {
        defaults = conf;
        have_defaults = 1;
    }
    conf = defaults;
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    capturing = 1;
    int bad = conf_parse(s, true);
    if (bad < 0)
        abort();
    /* The documented ranges (tide(3), conf.c's table). */
    in_range(conf.purge, 0, 2);
    in_range(conf.decay_ms, -1, 86400000);
    in_range(conf.background, 0, 2);
    in_range(conf.arenas, 0, 1024);
    in_range(conf.tcache, 0, 1);
    in_range(conf.thp, 0, 2);
    in_range(conf.stats, 0, 2);
    in_range(conf.verbose, 0, 1);
    size_t flen = strnlen(conf.stats_file, sizeof conf.stats_file);
    if (flen == sizeof conf.stats_file || memchr(conf.stats_file, ',', flen))
        abort();
    in_range(conf.remap, 0, 1);
    in_range(conf.remap_max, 0, 4096);
    in_range(conf.remap_threshold, 64 << 10, (long)1 << 40);
    in_range(conf.prof, 0, 1);
    in_range(conf.prof_sample, 1, (long)1 << 40);
    in_range(conf.prof_final, 0, 1);
    in_range(conf.prof_interval, 0, (long)1 << 50);
    size_t plen = strnlen(conf.prof_prefix, sizeof conf.prof_prefix);
    if (plen == 0 || plen == sizeof conf.prof_prefix || memchr(conf.prof_prefix, ',', plen))
        abort();
    in_range(conf.guard, 0, 1);
    in_range(conf.guard_quarantine, 0, (long)1 << 40);
    in_range(conf.guard_sample, 0, (long)1 << 40);
    /* Every key reads back, and setting what it reads gives the same value. */
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char buf[CONF_PREFIX_MAX];
        if (conf_get(keys[i], buf, sizeof buf) != 0)
            abort();
        conf_t before = conf;
        if (conf_set(keys[i], strlen(keys[i]), buf, strlen(buf), true) != 0)
            abort();
        if (memcmp(&before, &conf, sizeof conf) != 0)
            abort();
    }
    /* A value too long for the buffer is ERANGE, never an overflow. */
    char tiny[2];
    int r = conf_get("purge", tiny, sizeof tiny);
    if (r != 0 && r != 34 /* ERANGE */)
        abort();
    capturing = 0;
    free(s);
    return 0;
}
