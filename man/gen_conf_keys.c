/* SPDX-License-Identifier: MIT */
/* gen_conf_keys.c - writes tide(3)'s list of TIDE_CONF keys at build time, from the table
 * TIDE_CONF is parsed with (conf_keys in src/conf.c), so the page cannot drift from the
 * code: a key added to the table is documented, with its default, what it accepts and
 * whether tide_conf_set() may change it, by the next build.
 *
 * It copies the template on standard input to standard output, replacing the one line
 * "@TIDE_CONF_KEYS@" with one .TP entry per key in the table's order, and fails if that
 * line is missing or repeated.  The table is static, so this program includes conf.c
 * itself; src/report.c is linked in for the numbers accepted_text() writes, and the two
 * system-call wrappers conf.c names are stubs (nothing here calls them). */
#include "../src/conf.c"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

bool os_secure(void) { return false; }
void os_write_stderr(const char *s, size_t n)
{
    if (write(STDERR_FILENO, s, n) < 0)
        return;
}

#define MARKER "@TIDE_CONF_KEYS@"

/* Whether the '-' at P is a minus sign (a word starts with it: "-1") rather than a hyphen
 * ("single-threaded"): roff prints the two differently. */
static bool is_minus(const char *s, const char *p) { return p == s || !isalnum((unsigned char)p[-1]); }

/* Text lines of roff at most this long (mandoc -T lint's style). */
#define LINE_MAX_BYTES 80

/* S as roff text lines: backslashes and minus signs escaped, filled into lines of at most
 * LINE_MAX_BYTES at its spaces, and a line that would start with a control character made
 * plain.  CAPITAL: the first letter upper case (the help texts are fragments); STOP: a
 * full stop at the end unless there is one. */
static void put_text(const char *s, bool capital, bool stop)
{
    char *text = malloc(2 * strlen(s) + 2);
    size_t n = 0;
    if (!text)
        exit(1);
    for (const char *p = s; *p; p++) {
        if (*p == '\\') {
            text[n++] = '\\';
            text[n++] = 'e';
        } else if (*p == '-' && is_minus(s, p)) {
            text[n++] = '\\';
            text[n++] = '-';
        } else {
            text[n++] = p == s && capital ? (char)toupper((unsigned char)*p) : *p;
        }
    }
    if (stop && n && text[n - 1] != '.')
        text[n++] = '.';
    text[n] = '\0';
    for (char *line = text; *line;) {
        bool guard = *line == '.' || *line == '\'';
        size_t len = strlen(line), max = LINE_MAX_BYTES - (guard ? 2 : 0);
        if (len > max) {
            char *cut = line + max;
            while (cut > line && *cut != ' ')
                cut--;
            if (cut == line) /* one word longer than a line: it stays whole */
                cut = strchr(line + max, ' ');
            len = cut ? (size_t)(cut - line) : len;
        }
        if (guard)
            fputs("\\&", stdout);
        fwrite(line, 1, len, stdout);
        putchar('\n');
        line += len;
        while (*line == ' ')
            line++;
    }
    free(text);
}

/* A macro argument: quoted, so that spaces and an empty string stay one argument. */
static void put_arg(const char *s)
{
    putchar('"');
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputs("\\(dq", stdout);
        else if (*p == '\\')
            fputs("\\e", stdout);
        else if (*p == '-' && is_minus(s, p))
            fputs("\\-", stdout);
        else
            putchar(*p);
    }
    putchar('"');
}

static void put_keys(void)
{
    printf(".\\\" Written by man/gen_conf_keys from conf_keys in src/conf.c.\n");
    for (size_t i = 0; i < ARRAY_SIZE(conf_keys); i++) {
        const conf_key_t *k = &conf_keys[i];
        char acc[128];
        accepted_text(k, acc, sizeof acc);
        /* The tag reads "KEY (default VALUE)"; man/check_man.sh finds the keys by it. */
        fputs(".TP\n.BR ", stdout);
        put_arg(k->name);
        fputs(" \" (default \" ", stdout);
        put_arg(k->def);
        fputs(" )\n", stdout);
        put_text(k->help, true, true);
        fputs("Accepted:\n", stdout);
        put_text(acc, false, true);
        if (k->runtime)
            fputs("It can be changed at run time with\n.BR tide_conf_set ().\n", stdout);
        else
            fputs("Only\n.B TIDE_CONF\nsets it, at start-up:\n.BR tide_conf_set ()\nfails with\n.BR EPERM .\n",
                  stdout);
    }
}

int main(void)
{
    char line[4096];
    int markers = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (strcmp(line, MARKER "\n") == 0) {
            put_keys();
            markers++;
        } else {
            fputs(line, stdout);
        }
    }
    if (markers != 1) {
        fprintf(stderr, "gen_conf_keys: the template must have exactly one line %s (found %d)\n", MARKER, markers);
        return 1;
    }
    return ferror(stdout) || fflush(stdout) ? 1 : 0;
}
