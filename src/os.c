/* SPDX-License-Identifier: MIT */
/* os.c - every system call tide makes.
 *
 * Contract (see os.h): return 0 or an errno value, count what was done, never
 * allocate, and leave errno as the caller had it.  Failures other than ENOMEM/EEXIST
 * are returned too; the layers above decide whether they are fatal. */
#include "os.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sysinfo.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif
/* Linux 6.14+: a pidfd meaning "the calling thread's process", no fd needed. */
#define OS_PIDFD_SELF (-10000)

#define OS_PROT (PROT_READ | PROT_WRITE)
#define OS_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)

os_counters_t os_counters;

/* Every primitive starts with OS_KEEP_ERRNO: the calls below fail, or return EAGAIN, on
 * paths where the tide call that made them succeeds (a futex word that changed before
 * the wait, a place already taken while the range grows, a probe), and a successful
 * malloc or free must not change errno (glibc >= 2.33 promises it for free).  Failures
 * travel up as return values; the entry points set errno where glibc does. */
static inline void os_errno_restore(const int *saved) { errno = *saved; }
#define OS_KEEP_ERRNO const int os_saved_errno __attribute__((cleanup(os_errno_restore), unused)) = errno

/* Files through raw system calls: libc's open, read, write and close are cancellation
 * points, and no malloc function may act on a pending cancel (glibc's never does).
 * syscall() itself is not one. */
static int os_sys_open(const char *path) { return (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC); }
static long os_sys_read(int fd, void *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }
static long os_sys_write(int fd, const void *buf, size_t n) { return syscall(SYS_write, fd, buf, n); }
static void os_sys_close(int fd) { syscall(SYS_close, fd); }

static int os_dontunmap = -1;       /* -1 unknown, 0 no, 1 yes */
static int os_pmadv_fd = OS_PIDFD_SELF;
static int os_pmadv_state;          /* 0 untried, 1 works, -1 unavailable */
static int os_name_state;           /* 0 untried, 1 works, -1 unavailable (atomic) */

static const int os_advice_value[OS_ADV_COUNT] = { MADV_DONTNEED, MADV_FREE, MADV_HUGEPAGE };

#ifdef TIDE_FAULT_INJECTION
static long os_fault_skip[OS_OP_COUNT], os_fault_count[OS_OP_COUNT];

static unsigned os_fault_gen[OS_OP_COUNT]; /* bumped by every os_fault_set */

void os_fault_set(os_op_t op, long skip, long count)
{
    ATOMIC_STORE(&os_fault_skip[op], skip);
    ATOMIC_STORE(&os_fault_count[op], count);
    __atomic_add_fetch(&os_fault_gen[op], 1, __ATOMIC_SEQ_CST);
}

static bool os_fault(os_op_t op)
{
    if (ATOMIC_LOAD(&os_fault_count[op]) <= 0)
        return false;
    if (ATOMIC_SUB(&os_fault_skip[op], 1) > 0)
        return false;
    return ATOMIC_SUB(&os_fault_count[op], 1) > 0;
}

/* A purge chosen by OS_OP_PURGE_STALL holds its caller (and its locks) after its system
 * call until the test sets the op again: a test can then act while a purge is in
 * progress.  GEN is the op's generation read before the call, so that a release that
 * comes before the wait is not missed. */
static unsigned os_stall_gen(void) { return __atomic_load_n(&os_fault_gen[OS_OP_PURGE_STALL], __ATOMIC_SEQ_CST); }

static void os_stall(unsigned gen)
{
    if (!os_fault(OS_OP_PURGE_STALL))
        return;
    struct timespec ts = { 0, 1000000 };
    while (os_stall_gen() == gen)
        nanosleep(&ts, NULL);
}

/* The trace of the calls that make or change mappings (os.h), for tests to read. */
os_trace_t os_trace[OS_TRACE_MAX];
unsigned long os_trace_len;

static void os_record(os_trace_op_t op, uintptr_t addr, size_t len, uintptr_t to, int err, os_name_how_t how,
                      const char *name)
{
    unsigned long i = ATOMIC_ADD(&os_trace_len, 1);
    if (i >= OS_TRACE_MAX)
        return;
    os_trace_t *t = &os_trace[i];
    t->op = op;
    t->err = err;
    t->how = how;
    t->tid = (int)syscall(SYS_gettid);
    t->addr = addr;
    t->to = to;
    t->len = len;
    if (name) {
        size_t n = MIN(strlen(name), sizeof t->name - 1);
        memcpy(t->name, name, n);
        t->name[n] = '\0';
    }
}
#else
#define os_fault(op) false
#define os_stall_gen() 0u
#define os_stall(gen) ((void)(gen))
#define os_record(op, addr, len, to, err, how, name) ((void)0)
#endif

void os_init(void)
{
    OS_KEEP_ERRNO;
    /* The page map's shift is a compile-time constant. */
    unsigned long pg = getauxval(AT_PAGESZ);
    if (pg && pg != PAGE) {
        static const char msg[] = "tide: this build needs 4 KiB pages\n";
        os_write_stderr(msg, sizeof msg - 1);
        abort();
    }
}

void os_postfork_child(void)
{
    OS_KEEP_ERRNO;
    /* A pidfd opened by the parent names the parent. */
    if (os_pmadv_fd >= 0) {
        os_sys_close(os_pmadv_fd);
        os_pmadv_fd = OS_PIDFD_SELF;
        os_pmadv_state = 0;
    }
}

/* ThreadSanitizer's mmap interceptor (gcc 12's libtsan, clang 14's runtime) does not know
 * MAP_FIXED_NOREPLACE: it replaces an address outside its application ranges (tide's first
 * hint, 16-32 TiB, is its shadow) with 0 and keeps the flag, and as root the kernel then
 * maps page 0, where TSan dies ("mmap at bad address").  A TSan build passes the address as
 * a plain hint: the check below still keeps only the place asked for. */
#ifdef TIDE_TSAN
#define OS_NOREPLACE 0
#else
#define OS_NOREPLACE MAP_FIXED_NOREPLACE
#endif

int os_map_at(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_MAP))
        return ENOMEM;
    void *p = mmap((void *)addr, size, OS_PROT, OS_FLAGS | OS_NOREPLACE, -1, 0);
    ATOMIC_ADD(&os_counters.map_calls, 1);
    if (p == MAP_FAILED)
        return errno == EEXIST ? EEXIST : ENOMEM;
    if ((uintptr_t)p != addr) {
        /* A kernel older than 4.17 took the flag as a hint (a TSan build passes none): this
         * mapping is not ours to keep. */
        munmap(p, size);
        return EEXIST;
    }
    os_record(OS_TR_MAP, addr, size, 0, 0, 0, NULL);
    return 0;
}

int os_map_anywhere(size_t size, size_t align, uintptr_t *out)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_MAP))
        return ENOMEM;
    size_t len = size + align;
    if (len < size)
        return ENOMEM;
    void *p = mmap(NULL, len, OS_PROT, OS_FLAGS, -1, 0);
    ATOMIC_ADD(&os_counters.map_calls, 1);
    if (p == MAP_FAILED)
        return ENOMEM;
    uintptr_t a = ALIGN_UP((uintptr_t)p, align);
    /* Trim the slack outside the aligned span: it never was part of a tide range. */
    if (a > (uintptr_t)p)
        munmap(p, a - (uintptr_t)p);
    if ((uintptr_t)p + len > a + size)
        munmap((void *)(a + size), (uintptr_t)p + len - (a + size));
    os_record(OS_TR_MAP, a, size, 0, 0, 0, NULL);
    *out = a;
    return 0;
}

int os_map_over(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_HEAL))
        return ENOMEM;
    void *p = mmap((void *)addr, size, OS_PROT, OS_FLAGS | MAP_FIXED, -1, 0);
    ATOMIC_ADD(&os_counters.heal_calls, 1);
    int err = p == MAP_FAILED ? errno : 0;
    os_record(OS_TR_MAP_OVER, addr, size, 0, err, 0, NULL);
    return err;
}

int os_commit_probe(size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_PROBE))
        return ENOMEM;
    /* Without MAP_NORESERVE the kernel applies vm.overcommit_memory (mm/util.c,
     * __vm_enough_memory): heuristic refuses one mapping larger than RAM + swap, strict
     * refuses beyond the commit limit, always refuses nothing.  Nothing is touched, so
     * the probe costs a few microseconds and no memory. */
    void *p = mmap(NULL, size, OS_PROT, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ATOMIC_ADD(&os_counters.probe_calls, 1);
    if (p == MAP_FAILED)
        return ENOMEM;
    munmap(p, size);
    return 0;
}

int os_unmap(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_UNMAP))
        return ENOMEM;
    int err = munmap((void *)addr, size) ? errno : 0;
    ATOMIC_ADD(&os_counters.unmap_calls, 1);
    os_record(OS_TR_UNMAP, addr, size, 0, err, 0, NULL);
    return err;
}

size_t os_ram_and_swap(void)
{
    OS_KEEP_ERRNO;
    struct sysinfo si;
    if (sysinfo(&si) != 0)
        return 0;
    unsigned long unit = si.mem_unit ? si.mem_unit : 1;
    return (size_t)(si.totalram + si.totalswap) * unit;
}

int os_overcommit_policy(void)
{
    OS_KEEP_ERRNO;
    int fd = os_sys_open("/proc/sys/vm/overcommit_memory");
    if (fd < 0)
        return -1;
    char c = 0;
    long r = os_sys_read(fd, &c, 1);
    os_sys_close(fd);
    return r == 1 && c >= '0' && c <= '2' ? c - '0' : -1;
}

int os_purge(uintptr_t addr, size_t size, os_advice_t advice)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_PURGE))
        return ENOMEM;
    unsigned gen = os_stall_gen();
    int r = madvise((void *)addr, size, os_advice_value[advice]);
    ATOMIC_ADD(&os_counters.madvise_calls[advice], 1);
    if (r != 0)
        return errno;
    ATOMIC_ADD(&os_counters.madvise_bytes[advice], size);
    os_stall(gen);
    return 0;
}

static long os_process_madvise(const struct iovec *iov, size_t n, int advice)
{
    /* Fault injection plays the older kernels that CI's does not: the fallbacks run too. */
    if (os_fault(OS_OP_NO_PROCESS_MADVISE)) {
        errno = ENOSYS;
        return -1;
    }
    if (os_pmadv_fd == OS_PIDFD_SELF && os_fault(OS_OP_NO_PIDFD_SELF)) {
        errno = EBADF;
        return -1;
    }
    return syscall(SYS_process_madvise, os_pmadv_fd, iov, n, advice, 0u);
}

int os_purge_vec(const struct iovec *iov, size_t n, os_advice_t advice)
{
    OS_KEEP_ERRNO;
    if (n == 0)
        return 0;
    if (n == 1)
        return os_purge((uintptr_t)iov[0].iov_base, iov[0].iov_len, advice);
    if (os_fault(OS_OP_PURGE))
        return ENOMEM;
    unsigned gen = os_stall_gen();
    if (ATOMIC_LOAD(&os_pmadv_state) >= 0) {
        /* The kernel takes at most IOV_MAX (1024) ranges a call. */
        size_t done = 0;
        while (done < n) {
            size_t k = MIN(n - done, (size_t)1024), bytes = 0;
            for (size_t i = 0; i < k; i++)
                bytes += iov[done + i].iov_len;
            long r = os_process_madvise(iov + done, k, os_advice_value[advice]);
            if (r < 0 && errno == EBADF && os_pmadv_fd == OS_PIDFD_SELF) {
                /* No PIDFD_SELF before 6.14: open a pidfd of our own process (the kernel
                 * sets close-on-exec on it). */
                int fd = (int)syscall(SYS_pidfd_open, getpid(), 0u);
                if (fd >= 0) {
                    os_pmadv_fd = fd;
                    r = os_process_madvise(iov + done, k, os_advice_value[advice]);
                }
            }
            if (r < 0 || (size_t)r != bytes)
                break;
            ATOMIC_ADD(&os_counters.process_madvise_calls, 1);
            ATOMIC_ADD(&os_counters.process_madvise_bytes, bytes);
            ATOMIC_STORE(&os_pmadv_state, 1);
            done += k;
        }
        if (done == n) {
            os_stall(gen);
            return 0;
        }
        if (ATOMIC_LOAD(&os_pmadv_state) == 0)
            ATOMIC_STORE(&os_pmadv_state, -1);
        iov += done;
        n -= done;
    }
    int err = 0;
    for (size_t i = 0; i < n; i++) {
        int r = os_purge((uintptr_t)iov[i].iov_base, iov[i].iov_len, advice);
        if (r)
            err = r;
    }
    return err;
}

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#define MADV_GUARD_REMOVE 103
#endif

/* Guard pages as page-table markers (Linux 6.13+): a touch is a SIGSEGV, and unlike
 * mprotect the VMA is not split.  EINVAL on older kernels. */
int os_guard(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_GUARD))
        return EINVAL;
    int r = madvise((void *)addr, size, MADV_GUARD_INSTALL);
    ATOMIC_ADD(&os_counters.guard_calls, 1);
    return r ? errno : 0;
}

int os_unguard(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    int r = madvise((void *)addr, size, MADV_GUARD_REMOVE);
    ATOMIC_ADD(&os_counters.guard_calls, 1);
    return r ? errno : 0;
}

int os_signal_install(int sig, void (*fn)(int, siginfo_t *, void *), struct sigaction *old)
{
    OS_KEEP_ERRNO;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, old) ? errno : 0;
}

void os_signal_restore(int sig, const struct sigaction *act)
{
    OS_KEEP_ERRNO;
    sigaction(sig, act, NULL);
}

void os_raise(int sig)
{
    OS_KEEP_ERRNO;
    syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

/* ---- libgcc's unwinder ------------------------------------------------------------------
 *
 * Reached without dlopen, which a static link warns about ("requires at runtime the shared
 * libraries from the glibc version used for linking") and which libtide.a would carry into
 * every program linked with it.  Weak references find it where the program has it: a
 * static program always does (glibc's backtrace() calls libgcc_eh's, linked in), a dynamic
 * one when libgcc_s is among the libraries it was linked with (C++ programs).  Otherwise
 * glibc's backtrace() loads libgcc_s at its first call, into no scope a symbol lookup
 * searches, and the functions are read from its dynamic symbol table (dl_iterate_phdr,
 * which a static link does not warn about either). */
extern __typeof(_Unwind_Backtrace) _Unwind_Backtrace __attribute__((weak));
extern __typeof(_Unwind_GetIP) _Unwind_GetIP __attribute__((weak));
extern __typeof(_Unwind_GetCFA) _Unwind_GetCFA __attribute__((weak));
struct os_eh_bases {
    void *tbase, *dbase, *func;
};
typedef const void *(*os_find_fde_fn)(void *, struct os_eh_bases *);
/* libgcc's own lookup of a code address's unwind table (libgcc_s exports it). */
extern const void *_Unwind_Find_FDE(void *pc, struct os_eh_bases *bases) __attribute__((weak));

static os_unwinder_t os_unw;     /* set before os_unw_state turns 2 */
static os_find_fde_fn os_unw_find;
static int os_unw_state;         /* atomic: 0 not looked for, 1 being looked for, 2 done */
static bool os_unw_static;       /* no program interpreter: a static program (static-pie too) */
static int os_unw_started;       /* atomic: 1 after os_unwind_start, 2 after os_unwind_stop */
/* The thread is inside the unwinder: its look-ups allocate, and an allocation may be
 * sampled (by guard_sample inside the profiler's unwinding, say), which must not enter it
 * again (libgcc holds a lock of its own meanwhile). */
static __thread bool os_unw_inside __attribute__((tls_model("initial-exec")));

/* Whether the program has no interpreter (PT_INTERP): nothing but libc's start-up code ran
 * before it allocates. */
static bool os_static_program(void)
{
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    unsigned long n = getauxval(AT_PHNUM);
    for (unsigned long i = 0; ph && i < n; i++)
        if (ph[i].p_type == PT_INTERP)
            return false;
    return ph != NULL;
}

/* Symbol NAME of the object at BASE, from its GNU hash table GH, symbols SYM, names STR;
 * 0 when it is not defined there. */
static uintptr_t os_elf_symbol(uintptr_t base, const uint32_t *gh, const ElfW(Sym) *sym, const char *str,
                               const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = h * 33 + *c;
    uint32_t nbuckets = gh[0], symoffset = gh[1], nbloom = gh[2];
    if (nbuckets == 0)
        return 0;
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + nbloom);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset)
        return 0; /* an empty bucket */
    for (;; i++) {
        uint32_t c = chain[i - symoffset];
        if ((c | 1) == (h | 1) && strcmp(str + sym[i].st_name, name) == 0 && sym[i].st_shndx != SHN_UNDEF &&
            sym[i].st_value)
            return base + sym[i].st_value;
        if (c & 1)
            return 0;
    }
}

typedef struct os_gcc_s {
    os_unwinder_t u;
    os_find_fde_fn find;
} os_gcc_t;

/* dl_iterate_phdr's callback: libgcc_s's unwinder into ARG, if INFO is libgcc_s. */
static int os_gcc_lookup(struct dl_phdr_info *info, size_t size, void *arg)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "", *slash = strrchr(name, '/');
    if (strncmp(slash ? slash + 1 : name, "libgcc_s.so", 11) != 0)
        return 0;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    for (unsigned i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;
    uintptr_t symtab = 0, strtab = 0, gnuhash = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        /* (glibc relocates these in place where .dynamic is writable: absolute, then) */
        uintptr_t p = dyn->d_un.d_ptr < base ? dyn->d_un.d_ptr + base : dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_SYMTAB)
            symtab = p;
        else if (dyn->d_tag == DT_STRTAB)
            strtab = p;
        else if (dyn->d_tag == DT_GNU_HASH)
            gnuhash = p;
    }
    if (!symtab || !strtab || !gnuhash)
        return 0;
    const uint32_t *gh = (const uint32_t *)gnuhash;
    const ElfW(Sym) *sym = (const ElfW(Sym) *)symtab;
    const char *str = (const char *)strtab;
    os_gcc_t *g = arg;
    g->u.backtrace = (__typeof(g->u.backtrace))os_elf_symbol(base, gh, sym, str, "_Unwind_Backtrace");
    g->u.get_ip = (__typeof(g->u.get_ip))os_elf_symbol(base, gh, sym, str, "_Unwind_GetIP");
    g->u.get_cfa = (__typeof(g->u.get_cfa))os_elf_symbol(base, gh, sym, str, "_Unwind_GetCFA");
    g->find = (os_find_fde_fn)os_elf_symbol(base, gh, sym, str, "_Unwind_Find_FDE");
    return 1;
}

const os_unwinder_t *os_unwinder(void)
{
    return ATOMIC_LOAD_ACQ(&os_unw_state) == 2 && os_unw.backtrace ? &os_unw : NULL;
}

void os_unwind_start(void)
{
    int idle = 0;
    __atomic_compare_exchange_n(&os_unw_started, &idle, 1, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

void os_unwind_stop(void) { ATOMIC_STORE_REL(&os_unw_started, 2); }

/* Whether the unwinder can run here and now (the thread outside it): it aborts the
 * process when it finds no unwind table for its own code, and a static program registers
 * its tables only as its constructors start (crtbeginT's frame_dummy), after its first
 * mallocs, and takes them back as its destructors end.  May allocate (libgcc sorts the
 * tables at its first look). */
static bool os_unwind_ready(void)
{
    if (!os_unwinder())
        return false;
    /* A static program's libc allocates as it starts, some of it while glibc's table of
     * objects, which libgcc's look-up reads, is half made (_dl_find_object_init); at exit
     * libgcc frees its sorted tables holding the lock its look-up takes. */
    if (os_unw_static && ATOMIC_LOAD_ACQ(&os_unw_started) != 1)
        return false;
    /* What the unwinder looks up first: its own code's table. */
    struct os_eh_bases b;
    os_unw_inside = true;
    bool found = os_unw_find((void *)((uintptr_t)os_unw.backtrace + 1), &b) != NULL;
    os_unw_inside = false;
    return found;
}

void os_unwind_boot(void)
{
    OS_KEEP_ERRNO;
    int idle = 0;
    if (!__atomic_compare_exchange_n(&os_unw_state, &idle, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    os_unw_static = os_static_program();
    void *v[2];
    if (_Unwind_Backtrace && _Unwind_GetIP && _Unwind_GetCFA && _Unwind_Find_FDE) {
        os_unw = (os_unwinder_t){ _Unwind_Backtrace, _Unwind_GetIP, _Unwind_GetCFA };
        os_unw_find = _Unwind_Find_FDE;
        ATOMIC_STORE_REL(&os_unw_state, 2);
        /* glibc's backtrace() looks the unwinder up at its first call, which may allocate:
         * now (in a static program, where it can run, which is later). */
        if (os_unwind_ready())
            backtrace(v, 2);
        return;
    }
    /* A dynamic program: glibc's first backtrace() loads libgcc_s. */
    backtrace(v, 2);
    os_gcc_t g = { { 0 }, 0 };
    dl_iterate_phdr(os_gcc_lookup, &g);
    if (g.u.backtrace && g.u.get_ip && g.u.get_cfa && g.find) {
        os_unw = g.u;
        os_unw_find = g.find;
    }
    ATOMIC_STORE_REL(&os_unw_state, 2);
}

bool os_unwind(_Unwind_Trace_Fn fn, void *arg)
{
    OS_KEEP_ERRNO;
    if (os_unw_inside || !os_unwind_ready())
        return false;
    os_unw_inside = true;
    os_unw.backtrace(fn, arg);
    os_unw_inside = false;
    return true;
}

int os_backtrace(void **frames, int max)
{
    OS_KEEP_ERRNO;
    if (ATOMIC_LOAD_ACQ(&os_unw_state) != 2 || os_unw_inside)
        return 0; /* not looked for: backtrace() would allocate, or abort in a static program */
    /* (Without the unwinder found, a dynamic program: backtrace() does what it can.) */
    if (os_unwinder() && !os_unwind_ready())
        return 0;
    os_unw_inside = true;
    int n = backtrace(frames, max);
    os_unw_inside = false;
    return n > 0 ? n : 0;
}

void os_backtrace_print(void *const *frames, int n)
{
    OS_KEEP_ERRNO;
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
}

int os_hugepage(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    int err = madvise((void *)addr, size, MADV_HUGEPAGE) ? errno : 0;
    ATOMIC_ADD(&os_counters.madvise_calls[OS_ADV_HUGEPAGE], 1);
    if (err == 0)
        ATOMIC_ADD(&os_counters.madvise_bytes[OS_ADV_HUGEPAGE], size);
    os_record(OS_TR_HUGEPAGE, addr, size, 0, err, 0, NULL);
    return err;
}

int os_nohugepage(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    int err = madvise((void *)addr, size, MADV_NOHUGEPAGE) ? errno : 0;
    os_record(OS_TR_NOHUGEPAGE, addr, size, 0, err, 0, NULL);
    return err;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif

/* The kernel populates (atomic; cleared at its first EINVAL: a kernel before 5.14, asked
 * once). */
static int os_populate_ok = 1;

int os_populate(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (!ATOMIC_LOAD(&os_populate_ok))
        return EINVAL;
    int err = os_fault(OS_OP_POPULATE) ? EINVAL : madvise((void *)addr, size, MADV_POPULATE_WRITE) ? errno : 0;
    ATOMIC_ADD(&os_counters.populate_calls, 1);
    if (err == EINVAL)
        ATOMIC_STORE(&os_populate_ok, 0);
    os_record(OS_TR_POPULATE, addr, size, 0, err, 0, NULL);
    return err;
}

int os_collapse(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_COLLAPSE))
        return EINVAL;
    /* MADV_COLLAPSE first drains the LRU batches of every CPU that has pages in one
     * (lru_add_drain_all: work queued on each and waited for, milliseconds on an idle
     * CPU).  The unit's newest pages are in this CPU's batch (the caller just wrote
     * them): MADV_COLD drains it here, for one page's deactivation. */
    madvise((void *)addr, PAGE, MADV_COLD);
    int err = madvise((void *)addr, size, MADV_COLLAPSE) ? errno : 0;
    ATOMIC_ADD(&os_counters.collapse_calls, 1);
    return err;
}

int os_thp_setting(void)
{
    OS_KEEP_ERRNO;
    char buf[128];
    int fd = os_sys_open("/sys/kernel/mm/transparent_hugepage/enabled");
    if (fd < 0)
        return 0;
    long n = os_sys_read(fd, buf, sizeof buf - 1);
    os_sys_close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* "always [madvise] never": the word in brackets is in force. */
    if (strstr(buf, "[always]"))
        return 2;
    return strstr(buf, "[madvise]") ? 1 : 0;
}

int os_name(uintptr_t addr, size_t size, const char *name)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_NAME)) {
        os_record(OS_TR_NAME, addr, size, 0, 0, OS_NAME_PLAYED, name);
        return 0;
    }
    if (ATOMIC_LOAD(&os_name_state) < 0) {
        os_record(OS_TR_NAME, addr, size, 0, 0, OS_NAME_SKIPPED, name);
        return 0;
    }
    int err = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)addr, (unsigned long)size, name) ? errno : 0;
    ATOMIC_ADD(&os_counters.name_calls, 1);
    os_record(OS_TR_NAME, addr, size, 0, err, OS_NAME_CALLED, name);
    if (err == 0) {
        ATOMIC_STORE(&os_name_state, 1);
        return 0;
    }
    /* Before Linux 5.17 the option is unknown, and without CONFIG_ANON_VMA_NAME it is
     * refused: EINVAL either way, on a first call whose arguments are right.  Once a
     * name has been taken, EINVAL means what it says. */
    if (err == EINVAL && ATOMIC_LOAD(&os_name_state) == 0) {
        ATOMIC_STORE(&os_name_state, -1);
        return 0;
    }
    return err;
}

bool os_named(void) { return ATOMIC_LOAD(&os_name_state) > 0; }

int os_move(uintptr_t src, size_t size, uintptr_t dst)
{
    OS_KEEP_ERRNO;
    if (os_fault(OS_OP_MOVE))
        return ENOMEM;
    void *p = mremap((void *)src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, (void *)dst);
    ATOMIC_ADD(&os_counters.move_calls, 1);
    int err = p == MAP_FAILED ? errno : 0;
    os_record(OS_TR_MOVE, src, size, dst, err, 0, NULL);
    return err;
}

int os_has_dontunmap(void)
{
    OS_KEEP_ERRNO;
    int known = ATOMIC_LOAD(&os_dontunmap);
    if (known >= 0)
        return known;
    /* Probe on a private scratch mapping: an unknown flag is EINVAL before Linux 5.7. */
    int ok = 0;
    void *a = mmap(NULL, 2 * PAGE, OS_PROT, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a != MAP_FAILED) {
        *(volatile char *)a = 1;
        void *b = mremap(a, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, (char *)a + PAGE);
        ok = b != MAP_FAILED && *(volatile char *)b == 1 && *(volatile char *)a == 0;
        munmap(a, 2 * PAGE);
    }
    ATOMIC_STORE(&os_dontunmap, ok);
    return ok;
}

void os_futex_wait(uint32_t *addr, uint32_t val)
{
    OS_KEEP_ERRNO;
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void os_futex_wake(uint32_t *addr, int n)
{
    OS_KEEP_ERRNO;
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

uint64_t os_now_ns(void)
{
    OS_KEEP_ERRNO;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void os_write_stderr(const char *s, size_t n)
{
    OS_KEEP_ERRNO;
    while (n > 0) {
        long w = os_sys_write(STDERR_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

unsigned os_ncpus(void)
{
    OS_KEEP_ERRNO;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int os_cpu(void)
{
    OS_KEEP_ERRNO;
    return sched_getcpu();
}

bool os_secure(void)
{
    OS_KEEP_ERRNO;
    return getauxval(AT_SECURE) != 0;
}

int os_read_file(const char *path, char *buf, size_t cap, size_t *len, bool *truncated)
{
    OS_KEEP_ERRNO;
    *len = 0;
    *truncated = false;
    int fd = os_sys_open(path);
    if (fd < 0)
        return errno;
    int err = 0;
    for (;;) {
        char extra;
        bool full = *len == cap;
        long r = full ? os_sys_read(fd, &extra, 1) : os_sys_read(fd, buf + *len, cap - *len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = errno;
            break;
        }
        if (r == 0)
            break;
        if (full) {
            *truncated = true;
            break;
        }
        *len += (size_t)r;
    }
    os_sys_close(fd);
    return err;
}

uint64_t os_random_seed(void)
{
    OS_KEEP_ERRNO;
    uint64_t v;
    /* The kernel's generator (never blocks once it is seeded, which is before any user
     * process runs); else the auxiliary vector's random bytes, mixed with a counter so
     * that successive calls differ, and the clock. */
    if (syscall(SYS_getrandom, &v, sizeof v, 1 /* GRND_NONBLOCK */) == (long)sizeof v)
        return v;
    static uint64_t calls;
    uint64_t seed = 0;
    const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
    if (r)
        memcpy(&seed, r + (ATOMIC_ADD(&calls, 1) & 1) * 8, sizeof seed);
    uint64_t z = seed ^ os_now_ns() ^ ((uint64_t)getpid() << 32) ^ (ATOMIC_LOAD(&calls) * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

size_t os_resident(uintptr_t addr, size_t size)
{
    OS_KEEP_ERRNO;
    unsigned char vec[4096];
    size_t resident = 0;
    for (size_t off = 0; off < size;) {
        size_t chunk = MIN(size - off, sizeof vec * PAGE);
        if (mincore((void *)(addr + off), chunk, vec) == 0) {
            for (size_t i = 0; i < chunk / PAGE; i++)
                resident += vec[i] & 1;
        }
        off += chunk;
    }
    return resident * PAGE;
}

static uintptr_t os_parse_hex(const char **s)
{
    uintptr_t v = 0;
    for (;; (*s)++) {
        char c = **s;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v * 16 + (uintptr_t)(c - 'a' + 10);
        else
            return v;
    }
}

/* Call FN(start, end, readable, ARG) for each mapping of /proc/self/maps, open as FD, in
 * order, until it returns true.  The file is streamed through a stack buffer (it can be
 * large, and this must not allocate); only the start of a line matters, so the tail of an
 * overlong one is skipped. */
typedef bool (*os_maps_fn)(uintptr_t start, uintptr_t end, bool readable, void *arg);

static bool os_maps_line(const char *line, os_maps_fn fn, void *arg)
{
    uintptr_t start = os_parse_hex(&line);
    line++; /* '-' */
    uintptr_t end = os_parse_hex(&line);
    return fn(start, end, line[0] == ' ' && line[1] == 'r', arg); /* " rw-p ..." */
}

static void os_maps_each_fd(int fd, os_maps_fn fn, void *arg)
{
    char buf[4096];
    size_t have = 0;
    bool in_tail = false, done = false;
    while (!done) {
        long r = os_sys_read(fd, buf + have, sizeof buf - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        size_t i = 0;
        for (char *nl; !done && (nl = memchr(buf + i, '\n', have - i)) != NULL; i = (size_t)(nl - buf) + 1) {
            if (!in_tail)
                done = os_maps_line(buf + i, fn, arg);
            in_tail = false;
        }
        if (!done && i == 0 && have == sizeof buf - 1) { /* no newline in a full buffer */
            if (!in_tail)
                done = os_maps_line(buf, fn, arg);
            in_tail = true;
            i = have;
        }
        memmove(buf, buf + i, have - i);
        have -= i;
    }
}

/* The same, opening the file: 0, or the errno of the open. */
static int os_maps_each(os_maps_fn fn, void *arg)
{
    int fd = os_sys_open("/proc/self/maps");
    if (fd < 0)
        return errno;
    os_maps_each_fd(fd, fn, arg);
    os_sys_close(fd);
    return 0;
}

typedef struct os_vma_query_s {
    uintptr_t lo, hi; /* os_count_vmas: the span; os_vma_of: the address in lo */
    long count;
    bool found, readable;
} os_vma_query_t;

static bool os_count_one(uintptr_t start, uintptr_t end, bool readable, void *arg)
{
    (void)readable;
    os_vma_query_t *q = arg;
    if (end > q->lo && start < q->hi)
        q->count++;
    return false;
}

long os_count_vmas(uintptr_t lo, uintptr_t hi)
{
    OS_KEEP_ERRNO;
    os_vma_query_t q = { .lo = lo, .hi = hi };
    return os_maps_each(os_count_one, &q) ? -1 : q.count;
}

static bool os_find_one(uintptr_t start, uintptr_t end, bool readable, void *arg)
{
    os_vma_query_t *q = arg;
    if (q->lo < start || q->lo >= end)
        return false;
    q->lo = start;
    q->hi = end;
    q->found = true;
    q->readable = readable;
    return true;
}

/* Linux 6.11's query of one mapping through an ioctl on /proc/PID/maps (linux/fs.h,
 * defined here for older headers): with no flags, the mapping that holds query_addr, or
 * ENOENT.  It costs an open, the ioctl and a close, where reading the text to the line
 * took 4-6 times as long (25-45 us a thread in a process of 16 threads, measured here): the
 * heap profiler looks up each thread's stack once. */
#define OS_PROCMAP_QUERY 0xC0686611ul /* _IOWR(0x9f, 17, os_procmap_query_t) */
#define OS_PROCMAP_READABLE 1u
typedef struct os_procmap_query_s {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
} os_procmap_query_t;
_Static_assert(sizeof(os_procmap_query_t) == 104, "PROCMAP_QUERY's argument, as Linux 6.11 defines it");

static int os_query_state; /* 0 untried or works, -1 the kernel has no query (atomic) */

#ifdef TIDE_FAULT_INJECTION
unsigned long os_vma_queries;
#endif

/* ADDR's mapping by the query, on FD: 0 or ENOENT as the kernel answered, else ENOTTY
 * (no query: read the text). */
static int os_vma_query(int fd, uintptr_t addr, os_vma_query_t *out)
{
    if (ATOMIC_LOAD(&os_query_state) < 0 || os_fault(OS_OP_NO_PROCMAP_QUERY))
        return ENOTTY;
    os_procmap_query_t q = { .size = sizeof q, .query_addr = addr };
    bool found = syscall(SYS_ioctl, fd, OS_PROCMAP_QUERY, &q) == 0;
    if (!found && errno != ENOENT) {
        if (errno == ENOTTY || errno == EINVAL) /* before 6.11, or a struct it does not know */
            ATOMIC_STORE(&os_query_state, -1);
        return ENOTTY;
    }
#ifdef TIDE_FAULT_INJECTION
    ATOMIC_ADD(&os_vma_queries, 1);
#endif
    if (!found)
        return ENOENT;
    out->lo = (uintptr_t)q.vma_start;
    out->hi = (uintptr_t)q.vma_end;
    out->readable = (q.vma_flags & OS_PROCMAP_READABLE) != 0;
    return 0;
}

int os_vma_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    OS_KEEP_ERRNO;
    int fd = os_sys_open("/proc/self/maps");
    if (fd < 0)
        return errno;
    os_vma_query_t q = { .lo = addr };
    int err = os_vma_query(fd, addr, &q);
    if (err == ENOTTY) {
        os_maps_each_fd(fd, os_find_one, &q);
        err = q.found ? 0 : ENOENT;
    }
    os_sys_close(fd);
    if (err)
        return err;
    if (!q.readable)
        return EACCES;
    *lo = q.lo;
    *hi = q.hi;
    return 0;
}

/* ---- files, for the heap profiler's dumps ---------------------------------------- */

int os_file_create(const char *path, int *fd)
{
    OS_KEEP_ERRNO;
    int r = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r < 0)
        return errno;
    *fd = r;
    return 0;
}

int os_file_write(int fd, const void *buf, size_t n)
{
    OS_KEEP_ERRNO;
    const char *s = buf;
    while (n > 0) {
        long w = os_sys_write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if (w == 0)
            return EIO;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int os_file_close(int fd)
{
    OS_KEEP_ERRNO;
    /* Linux closes the descriptor whatever close returns: never retried. */
    return syscall(SYS_close, fd) == 0 || errno == EINTR ? 0 : errno;
}

int os_copy_maps(int fd)
{
    OS_KEEP_ERRNO;
    int in = os_sys_open("/proc/self/maps");
    if (in < 0)
        return errno;
    char buf[4096];
    int err = 0;
    for (;;) {
        long r = os_sys_read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            err = errno;
        if (r <= 0 || (err = os_file_write(fd, buf, (size_t)r)) != 0)
            break;
    }
    os_sys_close(in);
    return err;
}

long os_getpid(void)
{
    OS_KEEP_ERRNO;
    return syscall(SYS_getpid);
}

/* Read up to LEN - 1 bytes of PATH into BUF: how many, -1 when it cannot be read. */
static long os_read_small(const char *path, char *buf, size_t len)
{
    int fd = os_sys_open(path);
    if (fd < 0)
        return -1;
    long have = 0;
    while ((size_t)have < len - 1) {
        long r = os_sys_read(fd, buf + have, len - 1 - (size_t)have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        have += r;
    }
    os_sys_close(fd);
    buf[have] = '\0';
    return have;
}

void os_program_name(char *buf, size_t len)
{
    OS_KEEP_ERRNO;
    char tmp[256];
    /* argv[0] as the program was started (its last component), else the kernel's 15
     * bytes of comm. */
    long n = os_read_small("/proc/self/cmdline", tmp, sizeof tmp);
    const char *name = NULL;
    if (n > 0 && tmp[0]) {
        const char *slash = strrchr(tmp, '/'); /* tmp holds a NUL after argv[0] */
        name = slash && slash[1] ? slash + 1 : tmp;
    } else if (os_read_small("/proc/self/comm", tmp, sizeof tmp) > 0) {
        tmp[strcspn(tmp, "\n")] = '\0';
        name = tmp;
    }
    if (!name || !*name)
        name = "?";
    size_t l = strlen(name);
    if (l > len - 1)
        l = len - 1;
    memcpy(buf, name, l);
    buf[l] = '\0';
}
