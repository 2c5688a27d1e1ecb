/* SPDX-License-Identifier: MIT */
/*
 * child.h - the one way the suites run something in a child process.
 *
 * A child runs a program (exec'd) or a function of the test (forked, nothing exec'd),
 * with the test's environment less the allocator settings it might carry (LD_PRELOAD,
 * MALLOC_CONF; TIDE_CONF, which is the configuration matrix's variant when set, goes
 * first in the child's) plus the ones the caller names, stdin from /dev/null, a file or
 * given bytes, and stdout and stderr captured (or left to the test's own).  The runner
 * waits for it and returns its wait status; a hang detector kills it after a time limit
 * or after a time without output, so a deadlock fails the test with a message instead of
 * stopping the whole suite at its timeout.
 *
 * Nothing here uses Criterion: child programs and plain test programs link it too.
 */
#ifndef TIDE_TEST_CHILD_H
#define TIDE_TEST_CHILD_H

#include <stdbool.h>
#include <stddef.h>

struct tt_child_spec {
    /* What runs: PATH, exec'd (searched in $PATH when it has no '/') with ARGV (argv[0]
     * included; NULL: just PATH); or, without PATH, FN(ARG) in the forked child, whose
     * return value is its exit status (FN may exit() itself, to run the atexit handlers
     * and destructors; the runner only _exit()s, without flushing stdio). */
    const char *path;
    const char *const *argv;
    int (*fn)(void *arg);
    void *arg;
    /* The exec'd program's environment (a forked FN keeps the test's): */
    const char *conf;       /* TIDE_CONF=CONF, after the test's own TIDE_CONF entries if
                             * it has any (the matrix's variant); NULL: only those */
    const char *preload;    /* LD_PRELOAD=PRELOAD; NULL: no LD_PRELOAD */
    const char *const *env; /* NULL-terminated "NAME=value" entries, each replacing the
                             * test's NAME; a bare "NAME" removes it */
    const char *cwd;        /* NULL: the test's */
    const char *stdin_path; /* stdin from this file; NULL: /dev/null (or INPUT) */
    const char *input;      /* stdin holds these bytes (NUL-terminated) */
    bool keep_output;       /* stdout and stderr stay the test's: nothing is captured */
    bool fixed_layout;      /* exec'd without address-space randomisation, so that every
                             * run maps its libraries at the same addresses (ignored where
                             * the kernel refuses personality(ADDR_NO_RANDOMIZE)) */
    /* Hang detectors, in seconds (0: none): the child is killed with SIGKILL after
     * TIMEOUT_S in all, or after SILENCE_S without a byte on stdout or stderr (needs
     * captured output). */
    int timeout_s;
    int silence_s;
};

struct tt_child {
    int status;            /* the wait status (exec failed: exit 127; set-up failed: 126) */
    bool hung;             /* killed by a hang detector */
    char *out, *err;       /* what it wrote, NUL-terminated ("" when not captured) */
    size_t outlen, errlen; /* their lengths (the output may hold NULs) */
};

/* Runs the child and waits for it.  0, or an errno value when it could not be started
 * (then *C says nothing).  Free the result with tt_child_free. */
int tt_child_run(const struct tt_child_spec *spec, struct tt_child *c);
void tt_child_free(struct tt_child *c);

/* Whether it exited with CODE (and was not killed as hung). */
bool tt_child_exited(const struct tt_child *c, int code);
/* Whether it was killed by signal SIG. */
bool tt_child_signalled(const struct tt_child *c, int sig);
/* How it ended, for messages: "exited with status 3", "was killed by signal 6 (Aborted)",
 * "hung, and was killed". */
const char *tt_child_how(const struct tt_child *c, char *buf, size_t len);
/* The same for a wait status. */
const char *tt_wait_status(int status, char *buf, size_t len);

/* In a forked FN that must not allocate (a malloc could disturb what it tests): reports
 * "FILE:LINE: COND: message" on stderr with one write(2), and _exit(1).  Use TT_CHILD_CHECK. */
void tt_child_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
#define TT_CHILD_CHECK(cond, ...)                                                          \
    do {                                                                                   \
        if (!(cond))                                                                       \
            tt_child_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                         \
    } while (0)

/* Runs FN(ARG) in this process with stdout and stderr sent to memory files; *OUT and *ERR
 * (each may be NULL) get what was written there, malloc'd and NUL-terminated. */
void tt_capture(void (*fn)(void *arg), void *arg, char **out, char **err);

#endif /* TIDE_TEST_CHILD_H */
