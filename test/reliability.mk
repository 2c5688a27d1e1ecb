# Reliability suite (issue #6): the differential soak, fault injection, behaviour near
# vm.max_map_count, misuse reports, libFuzzer targets and a UBSan build of the suites.
#
#   make check                  runs all of it (the soak for $(SOAK_SECONDS) s, each fuzzer
#                               for $(FUZZ_SECONDS) s, then the suites again under UBSan)
#   make stress                 the soak alone, $(STRESS_SECONDS) s split between configurations
#   make fuzz                   the fuzzers alone, $(FUZZ_SECONDS) s each
#   make check-ubsan            the UBSan build and run alone
# `make check UBSAN=no FUZZ=no SOAK_SECONDS=10` makes a quick local run.

SOAK_SECONDS = 60
STRESS_SECONDS = 300
FUZZ_SECONDS = 60

rel_cppflags = $(AM_CPPFLAGS) -I$(top_builddir)/test -I$(top_srcdir)/test
# -fno-builtin: the compiler must not fold or drop the calls the tests make on purpose.
rel_cflags = $(AM_CFLAGS) -O2 -g -fno-builtin -Wno-alloc-size-larger-than
# -no-install: no libtool wrapper scripts, the programs can be exec'd directly.
rel_ldflags = -no-install

# ---- the check-only fault-injection copy of libtide ---------------------------------------
# The same sources and flags as src/libtide.la plus -DTIDE_FAULT_INJECTION, as a convenience
# library linked into the fault tests (tide is then the malloc of the whole test process), so
# that `make check` exercises tide_fault_inject() while the library that is built and
# installed keeps no trace of it.
EXTRA_LTLIBRARIES = test/libtide_fault.la
CLEANFILES += test/libtide_fault.la
test_libtide_fault_la_SOURCES = $(src_libtide_la_SOURCES)
nodist_test_libtide_fault_la_SOURCES = $(nodist_src_libtide_la_SOURCES)
test_libtide_fault_la_CPPFLAGS = $(src_libtide_la_CPPFLAGS) -DTIDE_FAULT_INJECTION -DTIDE_DEBUG
test_libtide_fault_la_CFLAGS = $(src_libtide_la_CFLAGS)

# ---- the differential soak -----------------------------------------------------------------
check_PROGRAMS += test/soak test/soak_fault
test_soak_SOURCES = test/soak.c
test_soak_CPPFLAGS = $(rel_cppflags)
test_soak_CFLAGS = $(rel_cflags)
test_soak_LDFLAGS = $(rel_ldflags)
test_soak_LDADD = src/libtide.la $(PTHREAD_LIBS)

test_soak_fault_SOURCES = test/soak.c
test_soak_fault_CPPFLAGS = $(rel_cppflags) -DSOAK_FAULTS
test_soak_fault_CFLAGS = $(rel_cflags)
test_soak_fault_LDFLAGS = $(rel_ldflags)
test_soak_fault_LDADD = test/libtide_fault.la $(PTHREAD_LIBS)

TESTS += test/soak.sh
EXTRA_DIST += test/soak.sh

.PHONY: stress
stress: test/soak$(EXEEXT)
	SOAK_BIN=test/soak$(EXEEXT) $(SHELL) $(srcdir)/test/soak.sh $(STRESS_SECONDS)

# ---- misuse reports --------------------------------------------------------------------------
if HAVE_CRITERION
check_PROGRAMS += test/misuse_report test/misuse_helper
TESTS += test/misuse_report
test_misuse_report_SOURCES = test/misuse_report.c
test_misuse_report_CPPFLAGS = $(rel_cppflags) -DMISUSE_HELPER=\"$(abs_top_builddir)/test/misuse_helper$(EXEEXT)\"
test_misuse_report_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_misuse_report_LDFLAGS = $(rel_ldflags)
test_misuse_report_LDADD = $(CRITERION_LIBS)
# the helper must be built before the suite runs
EXTRA_test_misuse_report_DEPENDENCIES = test/misuse_helper$(EXEEXT)
test_misuse_helper_SOURCES = test/misuse_helper.c
test_misuse_helper_CPPFLAGS = $(rel_cppflags)
test_misuse_helper_CFLAGS = $(rel_cflags)
test_misuse_helper_LDFLAGS = $(rel_ldflags)
test_misuse_helper_LDADD = src/libtide.la $(PTHREAD_LIBS)
endif

# ---- fault injection -------------------------------------------------------------------------
if HAVE_CRITERION
check_PROGRAMS += test/fault
TESTS += test/fault
test_fault_SOURCES = test/fault.c
test_fault_CPPFLAGS = $(rel_cppflags) -I$(top_srcdir)/src -I$(top_builddir)/src
test_fault_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_fault_LDFLAGS = $(rel_ldflags)
test_fault_LDADD = test/libtide_fault.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
endif

# ---- near vm.max_map_count --------------------------------------------------------------------
if HAVE_CRITERION
check_PROGRAMS += test/mapcount
TESTS += test/mapcount
test_mapcount_SOURCES = test/mapcount.c
test_mapcount_CPPFLAGS = $(rel_cppflags)
test_mapcount_CFLAGS = $(rel_cflags) $(CRITERION_CFLAGS)
test_mapcount_LDFLAGS = $(rel_ldflags)
test_mapcount_LDADD = src/libtide.la $(CRITERION_LIBS) $(PTHREAD_LIBS)
endif

# ---- libFuzzer targets (clang) -----------------------------------------------------------------
# Built with $(FUZZ_CC) outside automake's rules (the rest of the tree builds with $(CC)).
# fuzz_conf links conf.c, report.c and os.c; fuzz_api links all of tide with its glibc names
# made local (objcopy), so that only the explicit tide_* calls of the target use tide.
FUZZ_CFLAGS = -g -O1 -std=gnu11 -D_GNU_SOURCE -DTIDE_DEBUG -fsanitize=fuzzer,undefined -fno-sanitize-recover=undefined \
	-I$(top_srcdir)/include -I$(top_srcdir)/src -I$(top_builddir)/src
fuzz_tide_sources = $(filter-out src/malloc.c,$(filter %.c,$(src_libtide_la_SOURCES)))
fuzz_glibc_names = malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc \
	pvalloc malloc_usable_size free_sized free_aligned_sized malloc_trim mallinfo mallinfo2 malloc_stats cfree
EXTRA_DIST += test/fuzz/run.sh test/fuzz/fuzz_conf.c test/fuzz/fuzz_api.c test/fuzz/conf.dict \
	test/fuzz/corpus test/fuzz/.gitignore
CLEANFILES += test/fuzz/fuzz_conf test/fuzz/fuzz_api test/fuzz/tide_malloc.o test/fuzz/*.fuzz.log

test/fuzz/fuzz_conf: $(srcdir)/test/fuzz/fuzz_conf.c $(srcdir)/src/conf.c $(srcdir)/src/report.c $(srcdir)/src/os.c \
		src/size_class_table.h
	@$(MKDIR_P) test/fuzz
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) -Wl,--wrap=os_write_stderr -o $@ $(srcdir)/test/fuzz/fuzz_conf.c \
		$(srcdir)/src/conf.c $(srcdir)/src/report.c $(srcdir)/src/os.c

test/fuzz/tide_malloc.o: $(srcdir)/src/malloc.c src/size_class_table.h
	@$(MKDIR_P) test/fuzz
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_CFLAGS:-fsanitize=fuzzer,%=-fsanitize=fuzzer-no-link,%) -fvisibility=hidden \
		-ftls-model=initial-exec -fno-builtin -c -o $@.tmp $(srcdir)/src/malloc.c && \
	objcopy $(addprefix --localize-symbol=,$(fuzz_glibc_names)) $@.tmp $@ && rm -f $@.tmp

test/fuzz/fuzz_api: $(srcdir)/test/fuzz/fuzz_api.c test/fuzz/tide_malloc.o $(addprefix $(srcdir)/,$(fuzz_tide_sources)) \
		src/size_class_table.h
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) -fvisibility=hidden -ftls-model=initial-exec -fno-builtin -pthread -o $@ \
		$(srcdir)/test/fuzz/fuzz_api.c test/fuzz/tide_malloc.o $(addprefix $(srcdir)/,$(fuzz_tide_sources))

FUZZ = yes
.PHONY: fuzz
if HAVE_LIBFUZZER
fuzz: test/fuzz/fuzz_conf test/fuzz/fuzz_api
	FUZZ_SECONDS=$(FUZZ_SECONDS) srcdir=$(srcdir) $(SHELL) $(srcdir)/test/fuzz/run.sh
else
fuzz:
	@echo "fuzz: clang with libFuzzer is missing (./bootstrap installs clang and libclang-rt-14-dev)" >&2; exit 1
endif

# ---- make check: the fuzzers, then the suites again under UBSan ------------------------------
if HAVE_LIBFUZZER
rel_have_fuzz = yes
else
rel_have_fuzz = no
endif
if ENABLE_UBSAN
rel_in_ubsan = yes
else
rel_in_ubsan = no
endif
UBSAN = yes
UBSAN_BUILDDIR = ubsan-build
UBSAN_SOAK_SECONDS = 30
UBSAN_TIMEOUT = 1800

check-local: reliability-check-local
.PHONY: reliability-check-local check-ubsan
reliability-check-local:
	@if test "$(FUZZ)" = no || test "$(rel_in_ubsan)" = yes; then \
	  echo "fuzz: not run here (FUZZ=$(FUZZ), UBSan build: $(rel_in_ubsan))"; \
	elif test "$(rel_have_fuzz)" = yes; then \
	  $(MAKE) $(AM_MAKEFLAGS) fuzz || exit 1; \
	else \
	  echo "fuzz: FAILED: clang with libFuzzer not found (./bootstrap installs clang and libclang-rt-14-dev)" >&2; exit 1; \
	fi
	@if test "$(UBSAN)" = no || test "$(rel_in_ubsan)" = yes; then :; else \
	  $(MAKE) $(AM_MAKEFLAGS) check-ubsan || exit 1; fi

# A configured source tree cannot host a VPATH build, so check-ubsan copies the files git
# tracks (as they are in the work tree; `make distdir` outside git), configures the copy with
# --enable-ubsan (gcc, -fsanitize=undefined -fno-sanitize-recover=undefined) and runs its
# `make check` (the soak for $(UBSAN_SOAK_SECONDS) s; no fuzzers: they run with UBSan already).
# A UBSan report while tide starts up re-enters malloc from the sanitizer and deadlocks, so a
# one-second soak runs first under a timeout, to fail at once rather than hang.
check-ubsan:
	@echo "ubsan: building a copy of the tree in $(UBSAN_BUILDDIR)/ with --enable-ubsan"
	@rm -rf $(UBSAN_BUILDDIR) && $(MKDIR_P) $(UBSAN_BUILDDIR)/tree
	@if (cd $(top_srcdir) && git rev-parse --git-dir) >/dev/null 2>&1; then \
	  (cd $(top_srcdir) && git ls-files -z --cached | tar --null -T - --ignore-failed-read -cf -) | \
	    tar -C $(UBSAN_BUILDDIR)/tree -xf - ; \
	else \
	  $(MAKE) $(AM_MAKEFLAGS) distdir distdir=$(UBSAN_BUILDDIR)/tree >/dev/null; \
	fi
	@cd $(UBSAN_BUILDDIR)/tree && { autoreconf -fi && ./configure --enable-ubsan && $(MAKE) -j2 && \
	  $(MAKE) -j2 test/soak$(EXEEXT); } >../build.log 2>&1 || \
	  { echo "ubsan: the UBSan build failed; the end of $(UBSAN_BUILDDIR)/build.log:"; tail -40 ../build.log; exit 1; }
	@cd $(UBSAN_BUILDDIR)/tree && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  timeout -k 5 60 ./test/soak -s 1 -q >../smoke.log 2>&1; rc=$$?; \
	  if test $$rc -ne 0; then \
	    echo "ubsan: FAILED: a one-second soak under UBSan exited with status $$rc$$(test $$rc = 124 && echo ' (hung: a UBSan report during start-up deadlocks)'):"; \
	    tail -20 ../smoke.log; \
	    if test $$rc = 124; then echo "ubsan: where it hung:"; \
	      UBSAN_OPTIONS=print_stacktrace=1 timeout -k 5 60 gdb -batch -ex run -ex 'thread apply all bt 30' \
	        --args ./test/soak -s 1 -q 2>&1 </dev/null | grep -E '^#|runtime error' | grep -vE 'libc|pthread_mutex' | head -30; fi; \
	    exit 1; fi
	@cd $(UBSAN_BUILDDIR)/tree && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  timeout -k 10 $(UBSAN_TIMEOUT) $(MAKE) check SOAK_SECONDS=$(UBSAN_SOAK_SECONDS) FUZZ=no UBSAN=no VERBOSE=yes \
	  >../check.log 2>&1; rc=$$?; \
	  grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP|# [A-Z]+:)' ../check.log | sed 's/^/ubsan: /'; \
	  if test $$rc -ne 0; then echo "ubsan: FAILED (status $$rc); UBSan reports:"; \
	    grep -h -A8 'runtime error' ../check.log | head -60; exit 1; fi; \
	  echo "ubsan: the suites passed under UBSan"

clean-local: reliability-clean-local
.PHONY: reliability-clean-local
reliability-clean-local:
	rm -rf $(UBSAN_BUILDDIR) test/fuzz/work test/fuzz/artifacts
