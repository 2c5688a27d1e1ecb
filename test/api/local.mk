# SPDX-License-Identifier: MIT
# test/api/: the malloc family and tide's interface as a caller sees them.
if HAVE_CRITERION
tide_api_suites = test/api/api test/api/misuse test/api/hardening test/api/compat
check_PROGRAMS += $(tide_api_suites)
TESTS += $(tide_api_suites)

# Every entry point, the size classes, alignments, ENOMEM, realloc, calloc, the statistics.
test_api_api_SOURCES = test/api/api.c $(tide_test_support)
test_api_api_CPPFLAGS = $(tide_test_cppflags)
test_api_api_CFLAGS = $(tide_test_cflags)
test_api_api_LDFLAGS = -no-install
test_api_api_LDADD = $(tide_test_ldadd) -ldl

# C++'s operators new and delete: every form, alignment, std::bad_alloc, the new-handler,
# sized delete.  A C++ program (Criterion works from C++) linked with libtide, whatever
# TEST_ALLOC says: the operators are tide's own.
check_PROGRAMS += test/api/cxx
TESTS += test/api/cxx
test_api_cxx_SOURCES = test/api/cxx.cc test/support/child.h test/support/child.c
test_api_cxx_CPPFLAGS = $(rel_cppflags)
test_api_cxx_CFLAGS = $(rel_cflags)
test_api_cxx_CXXFLAGS = -std=gnu++17 -Wall -Wextra $(WERROR_CFLAGS) -O2 -g $(CRITERION_CFLAGS)
test_api_cxx_LDFLAGS = $(rel_ldflags)
test_api_cxx_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
# The same linked with libtide.a (libtool's -static: the uninstalled archive, one object
# with its internal names made local): the operators, the personality routine of the
# nothrow forms and the weak references to libstdc++ work from there too.
check_PROGRAMS += test/api/cxx_static
TESTS += test/api/cxx_static
test_api_cxx_static_SOURCES = $(test_api_cxx_SOURCES)
test_api_cxx_static_CPPFLAGS = $(test_api_cxx_CPPFLAGS)
test_api_cxx_static_CFLAGS = $(test_api_cxx_CFLAGS)
test_api_cxx_static_CXXFLAGS = $(test_api_cxx_CXXFLAGS)
test_api_cxx_static_LDFLAGS = $(rel_ldflags) -static
test_api_cxx_static_LDADD = $(test_api_cxx_LDADD)

# Wild, interior and double frees: each run in a forked child that must abort with the line.
test_api_misuse_SOURCES = test/api/misuse.c $(tide_test_support)
test_api_misuse_CPPFLAGS = $(tide_test_cppflags)
test_api_misuse_CFLAGS = $(tide_test_cflags)
test_api_misuse_LDFLAGS = -no-install
test_api_misuse_LDADD = $(tide_test_ldadd)

# Forged links, cleared keys and never-allocated slots: each run in a child that must abort.
test_api_hardening_SOURCES = test/api/hardening.c $(tide_test_support)
test_api_hardening_CPPFLAGS = $(tide_test_cppflags)
test_api_hardening_CFLAGS = $(tide_test_cflags)
test_api_hardening_LDFLAGS = -no-install
test_api_hardening_LDADD = $(tide_test_ldadd)

# errno, cancellation and setuid programs against glibc 2.36.
test_api_compat_SOURCES = test/api/compat.c $(tide_test_support)
test_api_compat_CPPFLAGS = $(tide_test_cppflags) -DERRNO_PROBE=\"$(abs_top_builddir)/test/api/errno_probe$(EXEEXT)\" \
	-DSECURE_PROBE=\"$(abs_top_builddir)/test/api/secure_probe$(EXEEXT)\" -DTEST_BUILDDIR=\"$(abs_top_builddir)/test/api\"
test_api_compat_CFLAGS = $(tide_test_cflags)
test_api_compat_LDFLAGS = -no-install
test_api_compat_LDADD = $(tide_test_ldadd)
# the probes must be built before test/api/compat runs
EXTRA_test_api_compat_DEPENDENCIES = test/api/errno_probe$(EXEEXT) test/api/secure_probe$(EXEEXT)

# test/api/compat runs it with glibc's malloc and with libtide preloaded: never linked with libtide.
check_PROGRAMS += test/api/errno_probe
test_api_errno_probe_SOURCES = test/api/errno_probe.c
test_api_errno_probe_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin -Wno-alloc-size-larger-than
test_api_errno_probe_LDFLAGS = -no-install

# Linked with libtide statically (libtool's -static: the uninstalled libtide.a), so that a
# setuid copy of it has tide without LD_PRELOAD, which the loader ignores there.
check_PROGRAMS += test/api/secure_probe
test_api_secure_probe_SOURCES = test/api/secure_probe.c
test_api_secure_probe_CFLAGS = $(AM_CFLAGS) -O2 -g
test_api_secure_probe_LDFLAGS = -no-install -static
test_api_secure_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)

# Every misuse tide catches cheaply is reported in one exact line, then abort(): each case
# runs test/api/misuse_helper in a child.  Always against libtide (the lines are tide's).
check_PROGRAMS += test/api/misuse_report test/api/misuse_helper
TESTS += test/api/misuse_report
test_api_misuse_report_SOURCES = test/api/misuse_report.c test/support/child.h test/support/child.c
test_api_misuse_report_CPPFLAGS = $(rel_cppflags) -DMISUSE_HELPER=\"$(abs_top_builddir)/test/api/misuse_helper$(EXEEXT)\"
test_api_misuse_report_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_api_misuse_report_LDFLAGS = $(rel_ldflags)
test_api_misuse_report_LDADD = $(CRITERION_LIBS)
# the helper must be built before the suite runs
EXTRA_test_api_misuse_report_DEPENDENCIES = test/api/misuse_helper$(EXEEXT)
test_api_misuse_helper_SOURCES = test/api/misuse_helper.c
test_api_misuse_helper_CPPFLAGS = $(rel_cppflags)
test_api_misuse_helper_CFLAGS = $(rel_cflags)
test_api_misuse_helper_LDFLAGS = $(rel_ldflags)
test_api_misuse_helper_LDADD = src/libtide.la $(PTHREAD_LIBS)
endif

# A program with its own `conf`, `region`, `rb_erase`, ... linked statically with libtide.a
# (libtool's -static: the uninstalled src/.libs/libtide.a): both its names and tide's
# allocator must work (issue 14).
check_PROGRAMS += test/api/static_names
TESTS += test/api/static_names
test_api_static_names_SOURCES = test/api/static_names.c test/support/child.h test/support/child.c
test_api_static_names_CPPFLAGS = $(rel_cppflags)
test_api_static_names_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin
test_api_static_names_LDFLAGS = -no-install -static
test_api_static_names_LDADD = src/libtide.la $(PTHREAD_LIBS)
