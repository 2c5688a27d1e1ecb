# Tests of the ebizzy clone (bench/ebizzy) and of bench/realloc, bench/idle,
# bench/prodcons and bench/purge_floor.
# They run the real binary as a child process under glibc, tide and the peer allocators
# installed, and under a stub library that defines tide_stats_get (test_ebizzy_stub).

# A shared library the tests LD_PRELOAD: -rpath makes libtool build it shared although
# it is never installed.
check_LTLIBRARIES += test/test_ebizzy_stub.la
test_test_ebizzy_stub_la_SOURCES = test/test_ebizzy_stub.c
test_test_ebizzy_stub_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/test

if HAVE_CRITERION
check_PROGRAMS += test/test_ebizzy
TESTS += test/test_ebizzy
test_test_ebizzy_SOURCES = test/test_ebizzy_options.c test/test_ebizzy_runs.c \
	test/test_ebizzy_benches.c test/test_ebizzy_run.c test/test_ebizzy_run.h
test_test_ebizzy_CPPFLAGS = $(AM_CPPFLAGS) \
	-DEBIZZY_PATH=\"$(abs_top_builddir)/bench/ebizzy\" \
	-DREALLOC_PATH=\"$(abs_top_builddir)/bench/realloc\" \
	-DIDLE_PATH=\"$(abs_top_builddir)/bench/idle\" \
	-DPRODCONS_PATH=\"$(abs_top_builddir)/bench/prodcons\" \
	-DPURGE_FLOOR_PATH=\"$(abs_top_builddir)/bench/purge_floor\" \
	-DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DSTUB_LIB=\"$(abs_top_builddir)/test/.libs/test_ebizzy_stub.so\"
test_test_ebizzy_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
test_test_ebizzy_LDADD = $(CRITERION_LIBS)
# The tests run these, so they must be built first (the bench programs are not linked in).
EXTRA_test_test_ebizzy_DEPENDENCIES = bench/ebizzy bench/realloc bench/idle bench/prodcons \
	bench/purge_floor src/libtide.la \
	test/test_ebizzy_stub.la
endif
