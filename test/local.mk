# test/: the Criterion suites run by `make check`.
include test/ebizzy.mk
include test/reliability.mk
include test/purge.mk
include test/remap.mk
include test/init.mk
include test/static.mk

# ---- tide's core suites --------------------------------------------------------------
# Every suite links with src/libtide.la first, so the whole test process, Criterion's
# runner included, allocates with tide; test/preload preloads src/.libs/libtide.so into
# real programs.
#
# `make check TEST_ALLOC=glibc` builds and runs the same suites against glibc's malloc
# instead (no libtide; the tide_ names map to the plain ones), to check the tests
# themselves.  Switching modes rebuilds the suites: test/alloc_mode.h records the mode.
TEST_ALLOC = tide
tide_test_glibc = $(filter glibc,$(TEST_ALLOC))

tide_test_ldadd = $(if $(tide_test_glibc),,src/libtide.la) $(CRITERION_LIBS) $(PTHREAD_LIBS)
tide_test_cppflags = $(AM_CPPFLAGS) -I$(top_builddir)/test -I$(top_srcdir)/test \
	-DTIDE_SO=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DTIDE_PROBE_SO=\"$(abs_top_builddir)/test/.libs/libmallocprobe.so\" \
	-DTIDE_TEST_SRCDIR=\"$(abs_top_srcdir)/test\"
# -fno-builtin: the compiler must not fold or drop malloc/free pairs the tests make on purpose.
tide_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -O2 -g -fno-builtin \
	-Wno-alloc-size-larger-than

BUILT_SOURCES += test/alloc_mode.h
CLEANFILES += test/alloc_mode.h
test/alloc_mode.h: FORCE
	@$(MKDIR_P) test
	@if test -n '$(tide_test_glibc)'; then \
	  echo '#define TIDE_TEST_GLIBC 1 /* make check TEST_ALLOC=glibc */'; \
	else \
	  echo '/* the suites link with libtide (TEST_ALLOC=tide) */'; \
	fi > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
.PHONY: FORCE
FORCE:

if HAVE_CRITERION
tide_suites = test/api test/misuse test/stress test/fork test/churn test/preload test/vma test/compat
check_PROGRAMS += $(tide_suites)
TESTS += $(tide_suites)

test_api_SOURCES = test/api.c test/support.h
test_api_CPPFLAGS = $(tide_test_cppflags)
test_api_CFLAGS = $(tide_test_cflags)
test_api_LDFLAGS = -no-install
test_api_LDADD = $(tide_test_ldadd) -ldl

test_misuse_SOURCES = test/misuse.c test/support.h
test_misuse_CPPFLAGS = $(tide_test_cppflags)
test_misuse_CFLAGS = $(tide_test_cflags)
test_misuse_LDFLAGS = -no-install
test_misuse_LDADD = $(tide_test_ldadd)

test_stress_SOURCES = test/stress.c test/support.h
test_stress_CPPFLAGS = $(tide_test_cppflags)
test_stress_CFLAGS = $(tide_test_cflags)
test_stress_LDFLAGS = -no-install
test_stress_LDADD = $(tide_test_ldadd)

test_fork_SOURCES = test/fork.c test/support.h
test_fork_CPPFLAGS = $(tide_test_cppflags) -DFORK_PROBE=\"$(abs_top_builddir)/test/fork_probe\"
test_fork_CFLAGS = $(tide_test_cflags)
test_fork_LDFLAGS = -no-install
test_fork_LDADD = $(tide_test_ldadd)
# the program test/fork runs must be built first
EXTRA_test_fork_DEPENDENCIES = test/fork_probe$(EXEEXT)

# test/fork runs this: it forks from a signal handler, beside stdio, popen, system,
# posix_spawn and dlopen threads.
check_PROGRAMS += test/fork_probe
test_fork_probe_SOURCES = test/fork_probe.c
test_fork_probe_CPPFLAGS = $(AM_CPPFLAGS)
test_fork_probe_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin
test_fork_probe_LDFLAGS = -no-install
test_fork_probe_LDADD = src/libtide.la $(PTHREAD_LIBS) -ldl

test_churn_SOURCES = test/churn.c test/support.h
test_churn_CPPFLAGS = $(tide_test_cppflags)
test_churn_CFLAGS = $(tide_test_cflags)
test_churn_LDFLAGS = -no-install
test_churn_LDADD = $(tide_test_ldadd)

test_preload_SOURCES = test/preload.c test/support.h
test_preload_CPPFLAGS = $(tide_test_cppflags)
test_preload_CFLAGS = $(tide_test_cflags)
test_preload_LDFLAGS = -no-install
test_preload_LDADD = $(tide_test_ldadd)
# the probe must be built before test/preload runs
EXTRA_test_preload_DEPENDENCIES = test/libmallocprobe.la

test_vma_SOURCES = test/vma.c test/support.h
test_vma_CPPFLAGS = $(tide_test_cppflags)
test_vma_CFLAGS = $(tide_test_cflags)
test_vma_LDFLAGS = -no-install
test_vma_LDADD = $(tide_test_ldadd)

test_compat_SOURCES = test/compat.c test/support.h
test_compat_CPPFLAGS = $(tide_test_cppflags) -DERRNO_PROBE=\"$(abs_top_builddir)/test/errno_probe$(EXEEXT)\" \
	-DSECURE_PROBE=\"$(abs_top_builddir)/test/secure_probe$(EXEEXT)\" -DTEST_BUILDDIR=\"$(abs_top_builddir)/test\"
test_compat_CFLAGS = $(tide_test_cflags)
test_compat_LDFLAGS = -no-install
test_compat_LDADD = $(tide_test_ldadd)
# the probes must be built before test/compat runs
EXTRA_test_compat_DEPENDENCIES = test/errno_probe$(EXEEXT) test/secure_probe$(EXEEXT)

# test/compat runs it with glibc's malloc and with libtide preloaded: never linked with libtide.
check_PROGRAMS += test/errno_probe
test_errno_probe_SOURCES = test/errno_probe.c
test_errno_probe_CFLAGS = $(AM_CFLAGS) -O2 -g -fno-builtin -Wno-alloc-size-larger-than
test_errno_probe_LDFLAGS = -no-install

# Linked with libtide statically (libtool's -static: the uninstalled libtide.a), so that a
# setuid copy of it has tide without LD_PRELOAD, which the loader ignores there.
check_PROGRAMS += test/secure_probe
test_secure_probe_SOURCES = test/secure_probe.c
test_secure_probe_CFLAGS = $(AM_CFLAGS) -O2 -g
test_secure_probe_LDFLAGS = -no-install -static
test_secure_probe_LDADD = src/libtide.la $(PTHREAD_LIBS)

# The probe test/preload preloads beside libtide: it records, in every process started,
# which library serves malloc and whether a fresh malloc lies inside tide_ranges().
check_LTLIBRARIES += test/libmallocprobe.la
test_libmallocprobe_la_SOURCES = test/preload_probe.c
test_libmallocprobe_la_CFLAGS = $(AM_CFLAGS) -O2 -g
test_libmallocprobe_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
EXTRA_DIST += test/preload_py.py test/preload_git.sh test/preload_input.c

else
# Without Criterion the suites cannot be built: make that a failure, not a silent pass.
TESTS += test/no-criterion.sh
EXTRA_DIST += test/no-criterion.sh
endif
