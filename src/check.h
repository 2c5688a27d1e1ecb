/* SPDX-License-Identifier: MIT */
/* check.h - a walk of the whole heap that verifies tide's invariants (tests, debugging). */
#ifndef TIDE_CHECK_H
#define TIDE_CHECK_H

/* 0 when every invariant holds; else prints the first broken one and returns EINVAL. */
int check_heap(void);

#endif
