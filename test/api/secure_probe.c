/* SPDX-License-Identifier: MIT */
/* secure_probe.c - what TIDE_CONF did in this process, for test/api/compat.
 *
 * Linked with libtide statically (as a setuid program that links it would be), so no
 * LD_PRELOAD is involved: test/api/compat copies it, makes the copy setuid or setgid, and
 * runs it as root with TIDE_CONF set.  Prints the purge policy in force, AT_SECURE and
 * the effective ids. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "tide.h"

int main(void)
{
    free(malloc(100)); /* tide is up: TIDE_CONF was read, or not */
    char purge[32] = "?";
    if (tide_conf_get("purge", purge, sizeof purge) != 0)
        return 2;
    printf("purge=%s at_secure=%lu euid=%u egid=%u\n", purge, getauxval(AT_SECURE), (unsigned)geteuid(),
           (unsigned)getegid());
    return fflush(stdout) != 0;
}
