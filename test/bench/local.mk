# SPDX-License-Identifier: MIT
# test/bench/: the programs of bench/ run briefly: bench/ebizzy (its options, its runs
# under glibc, tide and the peer allocators installed) and bench/realloc, bench/idle,
# bench/prodcons, bench/purge_floor, bench/kv and the workload shapes (bench/churn,
# bench/larson, bench/powers).  They run the real binary as a child process, under
# glibc, tide and a stub library that defines tide_stats_get (stats_stub.c).

# A shared library the tests LD_PRELOAD: -rpath makes libtool build it shared although
# it is never installed.
check_LTLIBRARIES += test/bench/libstats_stub.la
test_bench_libstats_stub_la_SOURCES = test/bench/stats_stub.c
test_bench_libstats_stub_la_LDFLAGS = -module -avoid-version -shared -rpath $(abs_builddir)/test/bench

if HAVE_CRITERION
check_PROGRAMS += test/bench/bench_programs
TESTS += test/bench/bench_programs
test_bench_bench_programs_SOURCES = test/bench/ebizzy_options.c test/bench/ebizzy_runs.c \
	test/bench/bench_programs.c test/bench/run.c test/bench/run.h test/support/child.h test/support/child.c
test_bench_bench_programs_CPPFLAGS = $(rel_cppflags) \
	-DEBIZZY_PATH=\"$(abs_top_builddir)/bench/ebizzy\" \
	-DREALLOC_PATH=\"$(abs_top_builddir)/bench/realloc\" \
	-DIDLE_PATH=\"$(abs_top_builddir)/bench/idle\" \
	-DPRODCONS_PATH=\"$(abs_top_builddir)/bench/prodcons\" \
	-DPURGE_FLOOR_PATH=\"$(abs_top_builddir)/bench/purge_floor\" \
	-DCHURN_PATH=\"$(abs_top_builddir)/bench/churn\" \
	-DLARSON_PATH=\"$(abs_top_builddir)/bench/larson\" \
	-DPOWERS_PATH=\"$(abs_top_builddir)/bench/powers\" \
	-DKV_PATH=\"$(abs_top_builddir)/bench/kv\" \
	-DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DSTUB_LIB=\"$(abs_top_builddir)/test/bench/.libs/libstats_stub.so\"
test_bench_bench_programs_CFLAGS = $(AM_CFLAGS) $(CRITERION_CFLAGS)
test_bench_bench_programs_LDADD = $(CRITERION_LIBS)
# The tests run these, so they must be built first (the bench programs are not linked in).
EXTRA_test_bench_bench_programs_DEPENDENCIES = bench/ebizzy bench/realloc bench/idle bench/prodcons \
	bench/purge_floor bench/churn bench/larson bench/powers bench/kv src/libtide.la \
	test/bench/libstats_stub.la
endif
