/* SPDX-License-Identifier: MIT */
/* os.h - the OS layer: the only module that makes system calls.
 *
 * Every primitive returns 0 on success or an errno value, and leaves errno itself as
 * it found it; ENOMEM is the one failure the allocator above expects and recovers from.  Each call is counted for the
 * statistics.  A build with --enable-fault-injection lets tests make chosen calls fail. */
#ifndef TIDE_OS_H
#define TIDE_OS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <unwind.h>

#include "util.h"

typedef enum {
    OS_ADV_DONTNEED = 0,
    OS_ADV_FREE = 1,
    OS_ADV_HUGEPAGE = 2,
    OS_ADV_COUNT
} os_advice_t;

/* Operations that fault injection can make fail. */
typedef enum {
    OS_OP_MAP = 0, /* reserving or growing a range */
    OS_OP_PURGE,   /* madvise / process_madvise */
    OS_OP_MOVE,    /* mremap */
    OS_OP_HEAL,    /* mmap(MAP_FIXED) over a moved block */
    OS_OP_NO_PROCESS_MADVISE, /* process_madvise fails with ENOSYS, as before Linux 5.10 */
    OS_OP_NO_PIDFD_SELF,      /* PIDFD_SELF fails with EBADF, as before Linux 6.14 */
    OS_OP_PURGE_STALL,        /* a purge that worked returns only once the op is set again */
    OS_OP_PROBE,   /* the overcommit probe: the kernel refuses the request */
    OS_OP_UNMAP,   /* munmap of a range's tail */
    OS_OP_GUARD,   /* MADV_GUARD_INSTALL fails with EINVAL, as before Linux 6.13 */
    OS_OP_NAME,    /* plays a kernel that names mappings: os_name is recorded, not made, and works */
    OS_OP_NO_PROCMAP_QUERY, /* the PROCMAP_QUERY ioctl fails with ENOTTY, as before Linux 6.11 */
    OS_OP_COLLAPSE, /* MADV_COLLAPSE fails with EINVAL, as before Linux 6.1 (or a kernel that refuses it) */
    OS_OP_POPULATE, /* MADV_POPULATE_WRITE fails with EINVAL, as before Linux 5.14 */
    OS_OP_COUNT
} os_op_t;

typedef struct os_counters_s {
    uint64_t madvise_calls[OS_ADV_COUNT];
    uint64_t madvise_bytes[OS_ADV_COUNT];
    uint64_t process_madvise_calls;
    uint64_t process_madvise_bytes;
    uint64_t map_calls;
    uint64_t move_calls;
    uint64_t heal_calls;
    uint64_t probe_calls;
    uint64_t unmap_calls;
    uint64_t guard_calls;
    uint64_t name_calls; /* prctl(PR_SET_VMA_ANON_NAME) calls made */
    uint64_t collapse_calls; /* madvise(MADV_COLLAPSE) calls made */
    uint64_t populate_calls; /* madvise(MADV_POPULATE_WRITE) calls made */
} os_counters_t;

extern os_counters_t os_counters;

/* Start-up checks and probes (page size, MREMAP_DONTUNMAP, process_madvise). */
void os_init(void);
void os_postfork_child(void);

/* Map SIZE bytes of fresh read-write anonymous memory (MAP_NORESERVE) at exactly ADDR,
 * never replacing anything: EEXIST when something is there. */
int os_map_at(uintptr_t addr, size_t size);
/* Map SIZE bytes wherever the kernel likes, aligned to ALIGN. */
int os_map_anywhere(size_t size, size_t align, uintptr_t *out);
/* Replace our own pages [ADDR, ADDR+SIZE) with fresh ones (heals a moved block's VMA). */
int os_map_over(uintptr_t addr, size_t size);
/* Whether the kernel's overcommit policy grants SIZE bytes: map them without MAP_NORESERVE
 * (so the kernel accounts for them) and unmap them again.  ENOMEM when it refuses. */
int os_commit_probe(size_t size);
/* Unmap [ADDR, ADDR+SIZE): only ever the end of a range (a hole would split its VMA). */
int os_unmap(uintptr_t addr, size_t size);
/* RAM + swap in bytes, 0 when unknown. */
size_t os_ram_and_swap(void);
/* vm.overcommit_memory (0 heuristic, 1 always, 2 strict), or -1 when it cannot be read. */
int os_overcommit_policy(void);

/* Name the mapping [ADDR, ADDR+SIZE) NAME in /proc/PID/maps and smaps ("[anon:NAME]").
 * Call it once for each mapping, whole, right after the call that made it: a name given
 * to part of a VMA splits it, and named and unnamed neighbours do not merge, so a fresh
 * mapping joins its named neighbours only once it carries their name.  A kernel that
 * cannot name mappings (before Linux 5.17, or built without CONFIG_ANON_VMA_NAME: EINVAL)
 * is not an error: 0, and the later calls are skipped.  A name is cosmetic: callers may
 * ignore what this returns. */
int os_name(uintptr_t addr, size_t size, const char *name);
/* Whether the kernel has taken a name (os_name has worked). */
bool os_named(void);

/* Give pages back by ADVICE (OS_ADV_DONTNEED or OS_ADV_FREE). */
int os_purge(uintptr_t addr, size_t size, os_advice_t advice);
/* The same for N ranges at once (process_madvise where the kernel has it). */
int os_purge_vec(const struct iovec *iov, size_t n, os_advice_t advice);
int os_hugepage(uintptr_t addr, size_t size);
/* Fault [ADDR, ADDR+SIZE) in for writing, in one call (MADV_POPULATE_WRITE, Linux 5.14+:
 * EINVAL before, and from then on without a call). */
int os_populate(uintptr_t addr, size_t size);
/* MADV_NOHUGEPAGE on [ADDR, ADDR+SIZE): no huge page faults, and khugepaged stays away. */
int os_nohugepage(uintptr_t addr, size_t size);
/* Make [ADDR, ADDR+SIZE) guard pages, or ordinary pages again, without splitting its VMA
 * (MADV_GUARD_INSTALL/REMOVE, Linux 6.13+; EINVAL before). */
int os_guard(uintptr_t addr, size_t size);
int os_unguard(uintptr_t addr, size_t size);

/* SIG's action becomes FN (SA_SIGINFO, on the alternate stack if the thread has one); the
 * previous action goes to *OLD.  0 or an errno value. */
int os_signal_install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old);
/* SIG's action becomes *ACT again (async-signal-safe). */
void os_signal_restore(int sig, const struct sigaction *act);
/* Send SIG to the calling thread (async-signal-safe). */
void os_raise(int sig);
/* libgcc's unwinder: _Unwind_Backtrace and what its callback reads of a frame. */
typedef struct os_unwinder_s {
    _Unwind_Reason_Code (*backtrace)(_Unwind_Trace_Fn, void *);
    _Unwind_Ptr (*get_ip)(struct _Unwind_Context *);
    _Unwind_Ptr (*get_cfa)(struct _Unwind_Context *);
} os_unwinder_t;
/* Find the unwinder, once (a second call returns at once): in the program when it was
 * linked in (a static program has libgcc_eh's: glibc's backtrace() needs it) or its
 * libraries export it, else in the libgcc_s that glibc's backtrace() loads at its first
 * call (which allocates: call this where an allocation may come back into tide), without
 * dlopen. */
void os_unwind_boot(void);
/* The unwinder once found; NULL before, or when there is none. */
const os_unwinder_t *os_unwinder(void);
/* A static program's start-up is past libc's own, and the unwinder's look-ups are safe
 * (see os_unwind): called from its .preinit_array (where libtide.a is built without
 * -fPIC) or tide's constructor. */
void os_unwind_start(void);
/* A static program is ending: crtbeginT's destructor, which runs after tide's, frees the
 * unwinder's sorted tables holding the lock its look-ups take (a free that guard_sample
 * would take a backtrace of).  From tide's destructor. */
void os_unwind_stop(void);
/* Run the unwinder's _Unwind_Backtrace with FN and ARG where it can run: whether it ran.
 * It cannot while the thread is inside it already (an allocation it made, sampled), and
 * it would abort the process where it finds no unwind table for its own code: a static
 * program registers its tables only as its constructors start (crtbeginT's frame_dummy),
 * after its first mallocs, and takes them back as its destructors end, and before
 * os_unwind_start not even the look-up is safe there.  May allocate (libgcc sorts the
 * tables at its first look). */
bool os_unwind(_Unwind_Trace_Fn fn, void *arg);
/* The calling thread's return addresses, innermost first, at most MAX (glibc's
 * backtrace()).  How many: 0 before os_unwind_boot, and where the unwinder cannot run
 * (os_unwind). */
int os_backtrace(void **frames, int max);
/* Write N frames to stderr, one a line, with the symbols the loader knows (no allocation;
 * used from the SIGSEGV handler). */
void os_backtrace_print(void *const *frames, int n);

/* Move SIZE bytes of pages from SRC to DST (both ours, not overlapping), leaving SRC
 * mapped and empty (mremap with MREMAP_DONTUNMAP). */
int os_move(uintptr_t src, size_t size, uintptr_t dst);
int os_has_dontunmap(void);

uint64_t os_now_ns(void);
/* Sleep while *ADDR == VAL (a spurious return is possible); wake up to N sleepers on ADDR.
 * Process-private futexes: tide's locks. */
void os_futex_wait(uint32_t *addr, uint32_t val);
void os_futex_wake(uint32_t *addr, int n);
void os_write_stderr(const char *s, size_t n);
unsigned os_ncpus(void);
/* The CPU the calling thread runs on (it may have moved by the time it is used), or -1.
 * glibc reads it from the thread's rseq area, else the vDSO's getcpu. */
int os_cpu(void);
/* 64 random bits, independent from one call to the next (getrandom). */
uint64_t os_random_seed(void);
/* AT_SECURE: a setuid or setgid program (or one with file capabilities), which must not
 * take settings from whoever started it. */
bool os_secure(void);
/* Read the file at PATH into BUF (at most CAP bytes; *TRUNCATED: it has more) with raw
 * system calls, allocating nothing.  Returns 0 with *LEN set, or the errno of the failure. */
int os_read_file(const char *path, char *buf, size_t cap, size_t *len, bool *truncated);
/* Bytes of [ADDR, ADDR+SIZE) that are resident (mincore). */
size_t os_resident(uintptr_t addr, size_t size);
/* Make [ADDR, ADDR+SIZE) (whole aligned 2 MiB units) huge pages now (MADV_COLLAPSE,
 * Linux 6.1+): pages not present are filled with zeros, contents are kept, and no VMA
 * flag is set (no split).  0, or EINVAL (no such advice, or a unit it cannot take),
 * EAGAIN, ENOMEM (no huge page to be had), EBUSY. */
int os_collapse(uintptr_t addr, size_t size);
/* The system's THP setting (/sys/kernel/mm/transparent_hugepage/enabled): 0 never or
 * unreadable, 1 madvise, 2 always. */
int os_thp_setting(void);
/* VMAs of /proc/self/maps that overlap [LO, HI); -1 when it cannot be read. */
long os_count_vmas(uintptr_t lo, uintptr_t hi);

/* Files for the heap profiler's dumps: create (truncate) PATH for writing, mode 0644;
 * write all of BUF; close. */
int os_file_create(const char *path, int *fd);
int os_file_write(int fd, const void *buf, size_t n);
int os_file_close(int fd);
/* Append /proc/self/maps to FD. */
int os_copy_maps(int fd);
/* The mapping that holds ADDR, [*LO, *HI), as /proc/self/maps has it; ENOENT when none
 * does, EACCES when it cannot be read. */
int os_vma_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);
long os_getpid(void);
/* The program's name, NUL-terminated in BUF (LEN > 0): the last component of its argv[0]
 * (/proc/self/cmdline), else its comm; "?" when neither can be read.  No allocation. */
void os_program_name(char *buf, size_t len);

#ifdef TIDE_FAULT_INJECTION
/* Test hook: make the next COUNT calls of OP after SKIP successful ones fail with ENOMEM. */
void os_fault_set(os_op_t op, long skip, long count);
/* How many os_vma_of lookups the kernel answered through PROCMAP_QUERY (found or not). */
extern unsigned long os_vma_queries;

/* The fault-injection build also records, from the start of the process, the calls that
 * make or change tide's mappings, in the order they returned, so that tests can check
 * what the kernel was asked (the first OS_TRACE_MAX; os_trace_len counts all of them). */
typedef enum {
    OS_TR_MAP,      /* os_map_at, os_map_anywhere: [addr, addr+len) mapped afresh */
    OS_TR_MAP_OVER, /* os_map_over (a heal) */
    OS_TR_MOVE,     /* os_move: [addr, addr+len) moved to [to, to+len) */
    OS_TR_UNMAP,    /* os_unmap */
    OS_TR_HUGEPAGE, /* os_hugepage */
    OS_TR_NOHUGEPAGE, /* os_nohugepage */
    OS_TR_NAME,     /* os_name: NAME given to [addr, addr+len) */
    OS_TR_POPULATE  /* os_populate: [addr, addr+len) faulted in */
} os_trace_op_t;

typedef enum {
    OS_NAME_CALLED,  /* the prctl was made; err is what it returned */
    OS_NAME_SKIPPED, /* not made: the kernel is known to have no names */
    OS_NAME_PLAYED   /* OS_OP_NAME was armed: not made, taken as done */
} os_name_how_t;

typedef struct os_trace_s {
    os_trace_op_t op;
    int err;            /* the system call's errno, 0 when it worked */
    os_name_how_t how;  /* OS_TR_NAME only */
    int tid;            /* the calling thread */
    uintptr_t addr, to;
    size_t len;
    char name[24];
} os_trace_t;

#define OS_TRACE_MAX 8192
extern os_trace_t os_trace[OS_TRACE_MAX];
extern unsigned long os_trace_len; /* atomic */
#endif

#endif
