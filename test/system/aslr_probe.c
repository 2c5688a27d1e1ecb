/* SPDX-License-Identifier: MIT */
/*
 * aslr_probe.c - prints where tide put this process's heap: the base of its first range
 * and the address of its first malloc(64), as two hex numbers.  test/system/aslr runs it
 * many times.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tide.h"

int main(void)
{
    void *p = malloc(64);
    uintptr_t r[1][2];
    if (!p || tide_ranges(r, 1) < 1)
        return 1;
    printf("%lx %lx\n", (unsigned long)r[0][0], (unsigned long)(uintptr_t)p);
    return 0;
}
