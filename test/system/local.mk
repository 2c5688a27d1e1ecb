# SPDX-License-Identifier: MIT
# test/system/: tide in whole processes: real programs under LD_PRELOAD, fork, start-up,
# purging and decay, large realloc and its VMAs, the VMA count, vm.max_map_count.
if HAVE_CRITERION
tide_system_suites = test/system/fork test/system/preload test/system/vma
check_PROGRAMS += $(tide_system_suites)
TESTS += $(tide_system_suites)

# fork() while other threads allocate, and programs that fork as real programs do.
test_system_fork_SOURCES = test/system/fork.c $(tide_test_support)
test_system_fork_CPPFLAGS = $(tide_test_cppflags) -DFORK_PROBE=\"$(abs_top_builddir)/test/system/fork_probe\"
test_system_fork_CFLAGS = $(tide_test_cflags)
test_system_fork_LDFLAGS = -no-install
test_system_fork_LDADD = $(tide_test_ldadd)
# the program test/system/fork runs must be built first
EXTRA_test_system_fork_DEPENDENCIES = test/system/fork_probe$(EXEEXT)

# test/system/fork runs this: it forks from a signal handler, beside stdio, popen, system,
# posix_spawn and dlopen threads.
check_PROGRAMS += test/system/fork_probe
test_system_fork_probe_SOURCES = test/system/fork_probe.c
test_system_fork_probe_CPPFLAGS = $(AM_CPPFLAGS)
test_system_fork_probe_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin
test_system_fork_probe_LDFLAGS = -no-install
test_system_fork_probe_LDADD = src/libtide.la $(PTHREAD_LIBS) -ldl

# Real programs (python3, sort, gcc, git) with LD_PRELOAD=libtide.so behave as without it.
test_system_preload_SOURCES = test/system/preload.c $(tide_test_support)
test_system_preload_CPPFLAGS = $(tide_test_cppflags) \
	-DTIDE_PROBE_SO=\"$(abs_top_builddir)/test/system/.libs/libmallocprobe.so\" \
	-DCXX_PROBE=\"$(abs_top_builddir)/test/system/cxx_probe$(EXEEXT)\"
test_system_preload_CFLAGS = $(tide_test_cflags)
test_system_preload_LDFLAGS = -no-install
test_system_preload_LDADD = $(tide_test_ldadd)
# the probes must be built before test/system/preload runs
EXTRA_test_system_preload_DEPENDENCIES = test/system/libmallocprobe.la test/system/cxx_probe$(EXEEXT)

# A C++ program linked with libstdc++ and not with tide: test/system/preload runs it with
# libtide preloaded, and its operators new and delete must be tide's.
check_PROGRAMS += test/system/cxx_probe
test_system_cxx_probe_SOURCES = test/system/cxx_probe.cc
test_system_cxx_probe_CPPFLAGS = $(AM_CPPFLAGS)
test_system_cxx_probe_CXXFLAGS = -std=gnu++17 -Wall -Wextra $(WERROR_CFLAGS) -O2 -g
test_system_cxx_probe_LDFLAGS = -no-install
test_system_cxx_probe_LDADD = -ldl

# The probe test/system/preload preloads beside libtide: it records, in every process
# started, which library serves malloc and whether a fresh malloc lies inside tide_ranges().
check_LTLIBRARIES += test/system/libmallocprobe.la
test_system_libmallocprobe_la_SOURCES = test/system/preload_probe.c
test_system_libmallocprobe_la_CFLAGS = $(AM_CFLAGS) -O2 -g
test_system_libmallocprobe_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
EXTRA_DIST += test/system/preload_py.py test/system/preload_git.sh test/system/preload_input.c

# Where the heap starts: test/system/aslr runs test/system/aslr_probe 1,000 times.
check_PROGRAMS += test/system/aslr_probe test/system/aslr
TESTS += test/system/aslr
test_system_aslr_probe_SOURCES = test/system/aslr_probe.c
test_system_aslr_probe_LDFLAGS = -no-install
test_system_aslr_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_system_aslr_SOURCES = test/system/aslr.c $(tide_test_support)
test_system_aslr_CPPFLAGS = $(tide_test_cppflags) -DASLR_PROBE=\"$(abs_top_builddir)/test/system/aslr_probe\"
test_system_aslr_CFLAGS = $(tide_test_cflags)
test_system_aslr_LDFLAGS = -no-install
test_system_aslr_LDADD = $(tide_test_ldadd)
EXTRA_test_system_aslr_DEPENDENCIES = test/system/aslr_probe$(EXEEXT)

# The VMA count of a heap that churned 1 GiB.
test_system_vma_SOURCES = test/system/vma.c $(tide_test_support)
test_system_vma_CPPFLAGS = $(tide_test_cppflags)
test_system_vma_CFLAGS = $(tide_test_cflags)
test_system_vma_LDFLAGS = -no-install
test_system_vma_LDADD = $(tide_test_ldadd)

# Purge policies, decay, the idle purger, TIDE_CONF and statistics, through
# test/system/purge_probe run in fresh processes.
check_PROGRAMS += test/system/purge_probe test/system/purge
TESTS += test/system/purge
test_system_purge_probe_SOURCES = test/system/purge_probe.c
test_system_purge_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_system_purge_probe_LDFLAGS = -no-install
test_system_purge_SOURCES = test/system/purge.c $(tide_test_support)
test_system_purge_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS) \
	-DPROBE_PATH=\"$(abs_top_builddir)/test/system/purge_probe\" \
	-DTIDE_WRAPPER=\"$(abs_top_builddir)/src/tide\" -DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DTIDE_LA=\"$(abs_top_builddir)/src/libtide.la\"
test_system_purge_LDADD = src/libtide.la $(CRITERION_LIBS)
test_system_purge_LDFLAGS = -no-install
EXTRA_test_system_purge_DEPENDENCIES = test/system/purge_probe$(EXEEXT)

# thp:auto's huge pages, read from /proc/self/smaps: coverage, one VMA, purge, statistics.
check_PROGRAMS += test/system/thp
TESTS += test/system/thp
test_system_thp_SOURCES = test/system/thp.c $(tide_test_support)
test_system_thp_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS)
test_system_thp_LDADD = src/libtide.la $(CRITERION_LIBS)
test_system_thp_LDFLAGS = -no-install

# Large realloc: in place, mremap moves, heals, the VMA budget.
check_PROGRAMS += test/system/large_realloc
TESTS += test/system/large_realloc
test_system_large_realloc_SOURCES = test/system/large_realloc.c $(tide_test_support)
test_system_large_realloc_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS)
test_system_large_realloc_LDADD = src/libtide.la $(CRITERION_LIBS)
test_system_large_realloc_LDFLAGS = -no-install

# Start-up from a library constructor, dlsym, the dynamic loader, TLS destructors.
check_LTLIBRARIES += test/system/libinit_lib.la
check_PROGRAMS += test/system/init_probe test/system/init
TESTS += test/system/init
test_system_libinit_lib_la_SOURCES = test/system/init_lib.c
test_system_libinit_lib_la_LDFLAGS = -rpath /nowhere -avoid-version
test_system_init_probe_SOURCES = test/system/init_probe.c
# init_lib comes first so its constructor may run before tide's.
test_system_init_probe_LDADD = test/system/libinit_lib.la src/libtide.la -ldl
test_system_init_probe_LDFLAGS = -no-install
test_system_init_SOURCES = test/system/init.c $(tide_test_support)
test_system_init_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS) \
	-DINIT_PROBE=\"$(abs_top_builddir)/test/system/init_probe\" \
	-DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\"
test_system_init_LDADD = src/libtide.la $(CRITERION_LIBS)
test_system_init_LDFLAGS = -no-install
EXTRA_test_system_init_DEPENDENCIES = test/system/init_probe$(EXEEXT)

# The sampling heap profiler, its dumps read by google-pprof and jeprof (./bootstrap
# installs google-perftools and libjemalloc-dev), through test/system/prof_probe.
check_PROGRAMS += test/system/prof test/system/prof_probe test/system/prof_probe_fp
TESTS += test/system/prof
test_system_prof_SOURCES = test/system/prof.c $(tide_test_support)
test_system_prof_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS) \
	-DPROF_PROBE=\"$(abs_top_builddir)/test/system/prof_probe\" \
	-DPROF_PROBE_FP=\"$(abs_top_builddir)/test/system/prof_probe_fp\" \
	-DTIDE_WRAPPER=\"$(abs_top_builddir)/src/tide\" -DTIDE_SO=\"$(abs_top_builddir)/src/.libs/libtide.so\"
test_system_prof_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_system_prof_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
test_system_prof_LDFLAGS = $(rel_ldflags)
EXTRA_test_system_prof_DEPENDENCIES = test/system/prof_probe$(EXEEXT) test/system/prof_probe_fp$(EXEEXT) src/tide
# The probe as Debian's gcc builds it (no frame pointers: tide uses backtrace()) and with
# frame pointers (tide follows them); linked with the uninstalled libtide.so, which the
# dumps' mappings name and the readers symbolize.
test_system_prof_probe_SOURCES = test/system/prof_probe.c
test_system_prof_probe_CFLAGS = $(rel_cflags)
test_system_prof_probe_LDFLAGS = $(rel_ldflags)
test_system_prof_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_system_prof_probe_fp_SOURCES = test/system/prof_probe.c
test_system_prof_probe_fp_CFLAGS = $(rel_cflags) -fno-omit-frame-pointer
test_system_prof_probe_fp_LDFLAGS = $(rel_ldflags)
test_system_prof_probe_fp_LDADD = src/libtide.la $(PTHREAD_LIBS)

# Correct allocations near vm.max_map_count, with only a few hundred VMAs left.
check_PROGRAMS += test/system/mapcount
TESTS += test/system/mapcount
test_system_mapcount_SOURCES = test/system/mapcount.c $(tide_test_support)
test_system_mapcount_CPPFLAGS = $(rel_cppflags)
test_system_mapcount_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_system_mapcount_LDFLAGS = $(rel_ldflags)
test_system_mapcount_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
endif

# Static programs (gcc -static with src/.libs/libtide.a), linked at check time from the
# sources of other suites' probes, with the configured compiler and flags (the UBSan build's
# too): the link's messages, the default settings, prof:on and guard_sample.
if HAVE_CRITERION
check_PROGRAMS += test/system/static
TESTS += test/system/static
test_system_static_SOURCES = test/system/static.c $(tide_test_support)
test_system_static_CPPFLAGS = $(rel_cppflags) -DTIDE_CC='"$(CC)"' -DTIDE_STATIC_FLAGS='"$(CFLAGS) $(LDFLAGS)"' \
	-DTIDE_STATIC_LIB=\"$(abs_top_builddir)/src/.libs/libtide.a\" -DTIDE_TOP_SRCDIR=\"$(abs_top_srcdir)\" \
	-DTIDE_TEST_SRCDIR=\"$(abs_top_srcdir)/test\"
test_system_static_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_system_static_LDFLAGS = $(rel_ldflags)
test_system_static_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
endif

# guard:on and guard_sample: the faults tide's SIGSEGV handler reports (test/system/guard_probe
# run in children), the VMA count with guard pages and without, the quarantine.
if HAVE_CRITERION
check_PROGRAMS += test/system/guard_probe test/system/guard
TESTS += test/system/guard
test_system_guard_probe_SOURCES = test/system/guard_probe.c
test_system_guard_probe_CPPFLAGS = $(rel_cppflags)
test_system_guard_probe_CFLAGS = $(rel_cflags)
# -export-dynamic: the backtraces in tide's report name the probe's functions.
test_system_guard_probe_LDFLAGS = $(rel_ldflags) -export-dynamic
test_system_guard_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_system_guard_SOURCES = test/system/guard.c $(tide_test_support)
test_system_guard_CPPFLAGS = $(rel_cppflags) -DGUARD_PROBE=\"$(abs_top_builddir)/test/system/guard_probe$(EXEEXT)\"
test_system_guard_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_system_guard_LDFLAGS = $(rel_ldflags)
test_system_guard_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
EXTRA_test_system_guard_DEPENDENCIES = test/system/guard_probe$(EXEEXT)
endif

# The sources of tide's settings and their order (the program's tide_malloc_conf, the
# system's file, TIDE_CONF), each link form, the file under setuid, TIDE_CONF's syntax,
# mallopt: test/system/conf runs test/system/conf_probe built these ways.
if HAVE_CRITERION
conf_probe_default = -DPROBE_DEFAULT='"purge:none,decay_ms:5,remap_max:7"'
conf_probe_file = $(abs_top_builddir)/test/system/etc/tide.conf
# linked with -ltide (libtide.so); the link editor exports tide_malloc_conf by itself
check_PROGRAMS += test/system/conf_probe test/system/conf_probe_plain test/system/conf_probe_static \
	test/system/conf_probe_preload test/system/conf_probe_hidden test/system/conf_probe_file
test_system_conf_probe_SOURCES = test/system/conf_probe.c
test_system_conf_probe_CPPFLAGS = $(rel_cppflags) $(conf_probe_default)
test_system_conf_probe_CFLAGS = $(rel_cflags)
test_system_conf_probe_LDFLAGS = $(rel_ldflags)
test_system_conf_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
# the same without tide_malloc_conf
test_system_conf_probe_plain_SOURCES = test/system/conf_probe.c
test_system_conf_probe_plain_CPPFLAGS = $(rel_cppflags)
test_system_conf_probe_plain_CFLAGS = $(rel_cflags)
test_system_conf_probe_plain_LDFLAGS = $(rel_ldflags)
test_system_conf_probe_plain_LDADD = src/libtide.la $(PTHREAD_LIBS)
# linked with libtide.a (libtool's -static: the uninstalled archive)
test_system_conf_probe_static_SOURCES = test/system/conf_probe.c
test_system_conf_probe_static_CPPFLAGS = $(rel_cppflags) $(conf_probe_default)
test_system_conf_probe_static_CFLAGS = $(rel_cflags)
test_system_conf_probe_static_LDFLAGS = $(rel_ldflags) -static
test_system_conf_probe_static_LDADD = src/libtide.la $(PTHREAD_LIBS)
# not linked with tide (run with LD_PRELOAD): with -export-dynamic (-rdynamic) the
# loader sees the program's tide_malloc_conf, without it not
test_system_conf_probe_preload_SOURCES = test/system/conf_probe.c
test_system_conf_probe_preload_CPPFLAGS = $(rel_cppflags) $(conf_probe_default) -DPROBE_PRELOAD
test_system_conf_probe_preload_CFLAGS = $(rel_cflags)
test_system_conf_probe_preload_LDFLAGS = $(rel_ldflags) -export-dynamic
test_system_conf_probe_preload_LDADD = -ldl
test_system_conf_probe_hidden_SOURCES = test/system/conf_probe.c
test_system_conf_probe_hidden_CPPFLAGS = $(test_system_conf_probe_preload_CPPFLAGS)
test_system_conf_probe_hidden_CFLAGS = $(rel_cflags)
test_system_conf_probe_hidden_LDFLAGS = $(rel_ldflags)
test_system_conf_probe_hidden_LDADD = -ldl
# linked with a build of libtide whose system file is $(conf_probe_file), not
# $(sysconfdir)/tide.conf: the test writes it (tide itself is in the program, no loader
# involved, so a setuid copy has it too)
test_system_conf_probe_file_SOURCES = test/system/conf_probe.c
test_system_conf_probe_file_CPPFLAGS = $(rel_cppflags) $(conf_probe_default)
test_system_conf_probe_file_CFLAGS = $(rel_cflags)
test_system_conf_probe_file_LDFLAGS = $(rel_ldflags)
test_system_conf_probe_file_LDADD = test/libtide_conffile.la $(PTHREAD_LIBS)
EXTRA_LTLIBRARIES += test/libtide_conffile.la
CLEANFILES += test/libtide_conffile.la
test_libtide_conffile_la_SOURCES = $(src_libtide_la_SOURCES)
nodist_test_libtide_conffile_la_SOURCES = $(nodist_src_libtide_la_SOURCES)
test_libtide_conffile_la_CPPFLAGS = $(tide_lib_cppflags) -DTIDE_CONF_FILE='"$(conf_probe_file)"'
test_libtide_conffile_la_CFLAGS = $(src_libtide_la_CFLAGS)

check_PROGRAMS += test/system/conf
TESTS += test/system/conf
test_system_conf_SOURCES = test/system/conf.c $(tide_test_support)
test_system_conf_CPPFLAGS = $(rel_cppflags) $(CRITERION_CFLAGS) -DTIDE_SO=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DPROBE_DIR=\"$(abs_top_builddir)/test/system\" -DCONF_FILE=\"$(conf_probe_file)\"
test_system_conf_CFLAGS = $(rel_cflags)
test_system_conf_LDFLAGS = $(rel_ldflags)
test_system_conf_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
EXTRA_test_system_conf_DEPENDENCIES = test/system/conf_probe$(EXEEXT) test/system/conf_probe_plain$(EXEEXT) \
	test/system/conf_probe_static$(EXEEXT) test/system/conf_probe_preload$(EXEEXT) \
	test/system/conf_probe_hidden$(EXEEXT) test/system/conf_probe_file$(EXEEXT)
endif

# The statistics as a user reads them: stats:on and stats:json at exit with the pid, the
# program and the settings, stats_file, the per-class counts, verbose:on, malloc_info's
# XML, tide_stats_print_cb, the wrapper's --stats options (test/system/stats_probe run in
# children; python3 parses the JSON and the XML).
if HAVE_CRITERION
check_PROGRAMS += test/system/stats_probe test/system/stats
TESTS += test/system/stats
test_system_stats_probe_SOURCES = test/system/stats_probe.c
test_system_stats_probe_CPPFLAGS = $(rel_cppflags)
test_system_stats_probe_CFLAGS = $(rel_cflags)
test_system_stats_probe_LDFLAGS = $(rel_ldflags)
test_system_stats_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)
test_system_stats_SOURCES = test/system/stats.c $(tide_test_support)
test_system_stats_CPPFLAGS = $(rel_cppflags) -DSTATS_PROBE=\"$(abs_top_builddir)/test/system/stats_probe$(EXEEXT)\" \
	-DTIDE_WRAPPER=\"$(abs_top_builddir)/src/tide\" -DTIDE_LIB=\"$(abs_top_builddir)/src/.libs/libtide.so\"
test_system_stats_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_system_stats_LDFLAGS = $(rel_ldflags)
test_system_stats_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
EXTRA_test_system_stats_DEPENDENCIES = test/system/stats_probe$(EXEEXT) src/tide
endif
