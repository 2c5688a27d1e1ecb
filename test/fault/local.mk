# SPDX-License-Identifier: MIT
# test/fault/: the check-only build of libtide (test/libtide_fault.la), whose OS layer fails
# chosen calls: ENOMEM without leaks, sound heaps after failed purges, moves, heals and
# unmaps, purging as on kernels without process_madvise or PIDFD_SELF.
if HAVE_CRITERION
check_PROGRAMS += test/fault/fault
TESTS += test/fault/fault
test_fault_fault_SOURCES = test/fault/fault.c $(tide_test_support)
# TIDE_FAULT_INJECTION: the suite reads the OS layer's test hooks (os.h), such as its trace.
test_fault_fault_CPPFLAGS = $(rel_cppflags) -I$(top_srcdir)/src -I$(top_builddir)/src -DTIDE_FAULT_INJECTION
test_fault_fault_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_fault_fault_LDFLAGS = $(rel_ldflags)
test_fault_fault_LDADD = test/libtide_fault.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
endif
