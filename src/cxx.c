/* SPDX-License-Identifier: MIT */
/* cxx.c - what operator new (malloc.c) needs of the C++ runtime: the new-handler and
 * std::bad_alloc ([new.delete.single]).
 *
 * A new that cannot allocate calls the handler std::get_new_handler() returns and tries
 * again, for as long as the handler returns; with no handler it throws std::bad_alloc.  A
 * nothrow new is the same with NULL for whatever that throws.
 *
 * libstdc++'s functions are weak references, bound by the dynamic linker at start-up in
 * every program that has libstdc++ then (and by a static link where the program pulled them
 * in), NULL elsewhere: no get_new_handler is no handler, and no __throw_bad_alloc is a
 * report and abort, which is what an exception no one catches comes to.  That happens in a
 * program that loads its C++ later (dlopen) and runs out of memory in it.
 *
 * A throw passes through tide's C frames by their unwind tables (.eh_frame, which gcc
 * writes on x86_64 unless told not to); they hold nothing to release.  Catching one is
 * another matter: C has no catch, and an unwind whose search phase finds no handler ends
 * the program before anything is unwound.  cxx_call_caught below is a frame of assembly
 * whose personality routine is tide's own: it claims whatever is thrown through its call
 * of the handler and lands it where it is destroyed (__cxa_begin_catch, __cxa_end_catch),
 * which is what libstdc++'s nothrow new does with its catch (...).  On other machines the
 * nothrow forms let the handler's exception through. */
#include "cxx.h"

#include <stdint.h>
#include <stdlib.h>
#include <unwind.h>

#include "report.h"
#include "util.h"

typedef void (*cxx_handler_t)(void);

extern cxx_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak)); /* std::get_new_handler() */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn)); /* std::__throw_bad_alloc() */

void cxx_throw_bad_alloc(void)
{
    if (_ZSt17__throw_bad_allocv)
        _ZSt17__throw_bad_allocv();
    static const char *const line[] = { "operator new: out of memory, and no C++ runtime to throw std::bad_alloc" };
    report_line(line, ARRAY_SIZE(line));
    abort();
}

#if defined(__x86_64__) && defined(__ELF__)
#define CXX_CATCH 1

extern void *__cxa_begin_catch(void *) __attribute__((weak));
extern void __cxa_end_catch(void) __attribute__((weak));
/* The unwinder's, present whenever it calls the personality routine (it is libgcc's). */
#pragma weak _Unwind_GetIP
#pragma weak _Unwind_SetGR
#pragma weak _Unwind_SetIP

/* Call FN: 0 when it returned, 1 when it threw (the exception is destroyed).  FN returns to
 * cxx_after_call; an exception thrown through that call lands at cxx_landing, its header
 * in %rax.  The frame has a frame record, for the profiler's walks from inside FN. */
int cxx_call_caught(cxx_handler_t fn);
extern const char cxx_after_call[], cxx_landing[];
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cxx_call_caught\n"
        ".hidden cxx_call_caught\n"
        ".type cxx_call_caught, @function\n"
        "cxx_call_caught:\n"
        ".cfi_startproc\n"
        ".cfi_personality 0x1b, cxx_personality\n" /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "callq *%rdi\n"
        ".globl cxx_after_call\n"
        ".hidden cxx_after_call\n"
        "cxx_after_call:\n"
        "xorl %eax, %eax\n"
        ".cfi_remember_state\n"
        "popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "retq\n"
        ".cfi_restore_state\n"
        ".globl cxx_landing\n"
        ".hidden cxx_landing\n"
        "cxx_landing:\n"
        "movq %rax, %rdi\n"
        "callq *__cxa_begin_catch@GOTPCREL(%rip)\n"
        "callq *__cxa_end_catch@GOTPCREL(%rip)\n"
        "movl $1, %eax\n"
        "popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "retq\n"
        ".cfi_endproc\n"
        ".size cxx_call_caught, .-cxx_call_caught\n");

/* cxx_call_caught's personality routine: the handler of every exception thrown through its
 * call, but a forced unwind (thread cancellation, pthread_exit), which must go on. */
__attribute__((used)) _Unwind_Reason_Code cxx_personality(int version, _Unwind_Action actions,
                                                          _Unwind_Exception_Class cls,
                                                          struct _Unwind_Exception *ue, struct _Unwind_Context *ctx)
{
    (void)cls;
    if (version != 1 || (actions & _UA_FORCE_UNWIND) || !_Unwind_GetIP || !_Unwind_SetGR || !_Unwind_SetIP ||
        !__cxa_begin_catch || !__cxa_end_catch || _Unwind_GetIP(ctx) != (_Unwind_Ptr)cxx_after_call)
        return _URC_CONTINUE_UNWIND;
    if (actions & _UA_SEARCH_PHASE)
        return _URC_HANDLER_FOUND;
    if (!(actions & _UA_HANDLER_FRAME))
        return _URC_CONTINUE_UNWIND;
    _Unwind_SetGR(ctx, __builtin_eh_return_data_regno(0), (_Unwind_Ptr)ue);
    _Unwind_SetGR(ctx, __builtin_eh_return_data_regno(1), 0);
    _Unwind_SetIP(ctx, (_Unwind_Ptr)cxx_landing);
    return _URC_INSTALL_CONTEXT;
}
#endif

bool cxx_new_handler_run(bool nothrow)
{
    cxx_handler_t h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!h)
        return false;
#ifdef CXX_CATCH
    if (nothrow)
        return cxx_call_caught(h) == 0;
#else
    (void)nothrow;
#endif
    h();
    return true;
}
