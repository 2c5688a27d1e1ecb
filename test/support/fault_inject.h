/* SPDX-License-Identifier: MIT */
/*
 * fault_inject.h - the test hook of tide's fault-injection builds: the check-only library
 * test/libtide_fault.la (make check) and a library built with ./configure
 * --enable-fault-injection.  It is no part of tide's interface: the release library does
 * not have it (tools/check_exports.py), and a test that calls it links one of those builds.
 *
 * tide_fault_inject(op, skip, count): after SKIP successful calls, the next COUNT
 * operating-system calls of kind OP fail with ENOMEM: OP 0 = mapping or growing a range,
 * 1 = purging (madvise/process_madvise), 2 = moving pages (mremap), 3 = healing a moved
 * block (mmap); or behave as an older kernel: 4 = process_madvise fails with ENOSYS
 * (before Linux 5.10), 5 = process_madvise on PIDFD_SELF fails with EBADF (before 6.14);
 * or 6 = a purge that worked holds its caller after its system call until
 * tide_fault_inject(6, ...) is called again; 7 = the overcommit probe (the kernel's policy
 * refuses a large request); 8 = unmapping the free tail of a range; 9 = installing a guard
 * page (EINVAL, as before Linux 6.13); 10 = naming a mapping behaves as on a kernel with
 * CONFIG_ANON_VMA_NAME (the call works, and is not made); 11 = the PROCMAP_QUERY ioctl
 * fails with ENOTTY (before Linux 6.11).  The op numbers are src/os.h's os_op_t.  Returns
 * 0, or -1 with errno EINVAL for an unknown OP.
 */
#ifndef TIDE_TEST_FAULT_INJECT_H
#define TIDE_TEST_FAULT_INJECT_H

#ifdef __cplusplus
extern "C" {
#endif

int tide_fault_inject(int op, long skip, long count);

#ifdef __cplusplus
}
#endif
#endif
