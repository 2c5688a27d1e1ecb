# SPDX-License-Identifier: MIT
# test/: everything `make check` runs, one folder per kind of test (docs/testing.md):
#   unit/    modules by themselves, linked with the check-only build of libtide
#   api/     the malloc family and tide's interface as a caller sees them
#   system/  tide in whole processes: real programs, fork, start-up, purging, VMAs
#   stress/  threads, churn and the differential soak
#   fault/   the OS layer failing chosen calls
#   fuzz/    libFuzzer targets
#   bench/   the programs of bench/ run briefly
#   support/ the one helper header and the one child runner the suites share
# Each folder keeps its rules in its local.mk; the variables below are theirs.

# ---- the suites' two modes -----------------------------------------------------------
# Every suite links with src/libtide.la first, so the whole test process, Criterion's
# runner included, allocates with tide; test/system/preload preloads src/.libs/libtide.so
# into real programs.
#
# `make check TEST_ALLOC=glibc` builds and runs the suites that use $(tide_test_ldadd)
# against glibc's malloc instead (no libtide; the tide_ names map to the plain ones), to
# check the tests themselves.  Switching modes rebuilds them: alloc_mode.h records the mode.
TEST_ALLOC = tide
tide_test_glibc = $(filter glibc,$(TEST_ALLOC))

# The helper header and the child runner, compiled into the programs that use them.
tide_test_support = test/support/support.h test/support/child.h test/support/child.c
EXTRA_DIST += test/support/fault_inject.h

tide_test_ldadd = $(if $(tide_test_glibc),,src/libtide.la) $(CRITERION_LIBS) $(PTHREAD_LIBS)
tide_test_cppflags = $(AM_CPPFLAGS) -DTIDE_TEST_DUAL -I$(top_builddir)/test/support -I$(top_srcdir)/test/support \
	-DTIDE_SO=\"$(abs_top_builddir)/src/.libs/libtide.so\" \
	-DTIDE_TEST_SRCDIR=\"$(abs_top_srcdir)/test\"
# -fno-builtin: the compiler must not fold or drop malloc/free pairs the tests make on purpose.
tide_test_cflags = $(AM_CFLAGS) $(CRITERION_CFLAGS) -O2 -g -fno-builtin \
	-Wno-alloc-size-larger-than

# The suites that always link libtide (whatever TEST_ALLOC says) and the programs they run.
rel_cppflags = $(AM_CPPFLAGS) -I$(top_builddir)/test/support -I$(top_srcdir)/test/support
# -fno-builtin: the compiler must not fold or drop the calls the tests make on purpose.
rel_cflags = $(AM_CFLAGS) -O2 -g -fno-builtin -Wno-alloc-size-larger-than
# -no-install: no libtool wrapper scripts, the programs can be exec'd directly.
rel_ldflags = -no-install

BUILT_SOURCES += test/support/alloc_mode.h
CLEANFILES += test/support/alloc_mode.h
test/support/alloc_mode.h: FORCE
	@$(MKDIR_P) test/support
	@if test -n '$(tide_test_glibc)'; then \
	  echo '#define TIDE_TEST_GLIBC 1 /* make check TEST_ALLOC=glibc */'; \
	else \
	  echo '/* the suites link with libtide (TEST_ALLOC=tide) */'; \
	fi > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
.PHONY: FORCE
FORCE:

# ---- the check-only build of libtide -----------------------------------------------------
# The same sources and flags as src/libtide.la plus -DTIDE_FAULT_INJECTION and -DTIDE_DEBUG
# (TIDE_ASSERT on), as a convenience library linked into the fault tests and the unit tests
# (tide is then the malloc of the whole test process, and every internal name links), so
# that `make check` exercises tide_fault_inject() and the internal assertions while the
# library that is built and installed keeps no trace of them.
EXTRA_LTLIBRARIES = test/libtide_fault.la
CLEANFILES += test/libtide_fault.la
test_libtide_fault_la_SOURCES = $(src_libtide_la_SOURCES)
nodist_test_libtide_fault_la_SOURCES = $(nodist_src_libtide_la_SOURCES)
test_libtide_fault_la_CPPFLAGS = $(src_libtide_la_CPPFLAGS) -DTIDE_FAULT_INJECTION -DTIDE_DEBUG
test_libtide_fault_la_CFLAGS = $(src_libtide_la_CFLAGS)

if !HAVE_CRITERION
# Without Criterion the suites cannot be built: make that a failure, not a silent pass.
TESTS += test/support/no-criterion.sh
endif
EXTRA_DIST += test/support/no-criterion.sh

# ---- the configuration matrix --------------------------------------------------------
# After the suites under the default settings, `make check` runs the api, unit and system
# suites once more under each of these TIDE_CONF settings, $(MATRIX_JOBS) suites at a time
# (the soak's configurations, guard and guard_sample among them, are test/stress/soak.sh's).
# A run is named by its variant: test/matrix/tcache-off/api/api.mx is test/api/api under
# TIDE_CONF=tcache:off, with its log beside it (':' is '-' in the names, ',' is '+') and a
# summary in test/matrix/test-suite.log.  The programs a suite runs in children get the
# variant too (test/support/child.h); a test whose premise a variant excludes declares it
# (tt_skip_under, test/support/support.h) and each such skip is listed as a SKIP of its own.
#
#   make check MATRIX=no                        the suites under the default settings only
#   make check-matrix                           the matrix alone
#   make check-matrix CONF=tcache:off           one variant ('a:x,b:y' combines settings)
#   make check-matrix CONF=tcache:off TESTS=test/api/api
# prof:on samples about one allocation in every 512 KiB allocated, at random: a test that
# counts exactly what goes through a class, a cache or a bin subtracts the samples
# (test/system/stats), uses blocks of more than a page, whose samples stay in their slab
# (test/unit/refill), sets its blocks apart from the sampled ones (test/api/hardening),
# or declares the premise.
# `make check-matrix CONF=prof:on,prof_sample:4k` samples 128 times as often: the way to
# find such a premise, not a variant of the list (some statistical bounds do not hold).
TIDE_MATRIX = guard:on tcache:off prof:on purge:free thp:on arenas:1 background:on
MATRIX = yes
MATRIX_JOBS = 2
CONF = $(TIDE_MATRIX)

tide_comma := ,
# The suites of TESTS (all of them, or the ones named on the command line) the matrix runs.
tide_matrix_suites = $(filter test/api/% test/unit/% test/system/%,$(TESTS))
tide_matrix_tests = $(foreach v,$(CONF),$(patsubst test/%,test/matrix/$(subst $(tide_comma),+,$(subst :,-,$(v)))/%.mx,$(tide_matrix_suites)))

TEST_EXTENSIONS = .mx
MX_LOG_COMPILER = $(SHELL)
MX_LOG_DRIVER = $(SHELL) $(top_srcdir)/test/support/matrix-driver.sh $(top_srcdir)/build-aux/test-driver
EXTRA_DIST += test/support/matrix-driver.sh

# A run's script, made from its name: the suite under TIDE_CONF=VARIANT, with Criterion
# listing each test (so that a skipped one is seen), never beside the same suite under
# another variant (some suites write fixed paths: test/system/conf the system file).
.PRECIOUS: test/matrix/%.mx
test/matrix/%.mx: Makefile
	@$(MKDIR_P) $(@D)
	@stem='$*'; suite=test/$${stem#*/}; \
	conf=`echo "$${stem%%/*}" | sed 's/+/,/g; s/^\([^-]*\)-/\1:/; s/,\([^-]*\)-/,\1:/g'`; \
	{ echo "# $$suite under TIDE_CONF=$$conf: the configuration matrix (test/local.mk)"; \
	  echo "echo 'matrix: $$suite under TIDE_CONF=$$conf'"; \
	  echo "TIDE_CONF='$$conf' TIDE_TEST_SHORT=1 CRITERION_VERBOSITY_LEVEL=1 exec flock test/matrix/$$(echo $$suite | tr / _).lock ./$$suite$(EXEEXT)"; \
	} >$@

# make check's last steps, after the suites under the defaults: the matrix, beside the
# fuzzers and the UBSan build (test/ubsan.mk), which spend much of their time on one CPU.
# Not in the UBSan build's own make check, nor against glibc's malloc (TEST_ALLOC=glibc).
check-local: tide-check-local
.PHONY: tide-check-local matrix-check-local check-matrix
tide-check-local: check-TESTS
	@$(MAKE) $(AM_MAKEFLAGS) -j2 matrix-check-local reliability-check-local
matrix-check-local:
	@if test "$(MATRIX)" = no || test "$(rel_in_ubsan)" = yes || test -n '$(tide_test_glibc)'; then \
	  echo "matrix: not run here (MATRIX=$(MATRIX), UBSan build: $(rel_in_ubsan), TEST_ALLOC=$(TEST_ALLOC))"; \
	else $(MAKE) $(AM_MAKEFLAGS) check-matrix; fi
check-matrix:
	@echo "matrix: $(words $(tide_matrix_suites)) suites under each of: $(CONF)"
	@$(MAKE) $(AM_MAKEFLAGS) -j$(MATRIX_JOBS) check-TESTS TESTS='$(tide_matrix_tests)' \
	  TEST_SUITE_LOG=test/matrix/test-suite.log
clean-local: matrix-clean-local
.PHONY: matrix-clean-local
matrix-clean-local:
	rm -rf test/matrix

include test/unit/local.mk
include test/api/local.mk
include test/system/local.mk
include test/stress/local.mk
include test/fault/local.mk
include test/bench/local.mk
include test/fuzz/local.mk
include test/ubsan.mk
include test/tsan.mk
