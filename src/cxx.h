/* SPDX-License-Identifier: MIT */
/* cxx.h - the C++ runtime, as operator new (malloc.c) needs it when an allocation fails:
 * the program's new-handler and std::bad_alloc.
 *
 * libtide depends on libc alone, so it reaches libstdc++ through weak references, which
 * the dynamic linker binds at start-up in every program that has libstdc++ (every program
 * that can call operator new, but for one that dlopens its C++ later: see cxx.c). */
#ifndef TIDE_CXX_H
#define TIDE_CXX_H

#include <stdbool.h>

/* Call the program's new-handler (std::get_new_handler()) once: true when it returned (the
 * allocation is to be tried again), false when there is none.  What the handler throws
 * passes through to operator new's caller, except with NOTHROW: then it is caught and
 * destroyed, and the answer is false (on x86_64; elsewhere it passes through too). */
bool cxx_new_handler_run(bool nothrow);

/* Throw std::bad_alloc (std::__throw_bad_alloc()); without a C++ runtime to throw it,
 * report "operator new: out of memory" and abort. */
__attribute__((noreturn, cold)) void cxx_throw_bad_alloc(void);

#endif
