/* SPDX-License-Identifier: MIT */
/* init_lib.c - a shared library whose constructor allocates: tide must start up from
 * inside another library's constructor, before main and possibly before its own
 * constructor has run. */
#include <stdlib.h>
#include <string.h>

void *init_lib_blocks[16];

__attribute__((constructor)) static void init_lib_constructor(void)
{
    for (int i = 0; i < 16; i++) {
        init_lib_blocks[i] = malloc((size_t)16 << i);
        memset(init_lib_blocks[i], i, (size_t)16 << i);
    }
    free(init_lib_blocks[15]);
    init_lib_blocks[15] = NULL;
}
