# SPDX-License-Identifier: MIT
# make check's ThreadSanitizer step: in a copy of the tree built with -fsanitize=thread,
# the differential soak (test/stress/soak.sh, every configuration, the fault-injection
# build too), then the multithreaded Criterion suites, each test in a process of its own.
#
#   make check                  runs it after the UBSan step ($(TSAN_SOAK_SECONDS) s of soak)
#   make check TSAN=no          skips it
#   make check-tsan             the TSan build and run alone
#
# What runs, and why only that:
# - Only tide_ names reach tide in a TSan process: with gcc, libtsan.so comes first in the
#   program's libraries, so the malloc family is TSan's own allocator.  Tide cannot be the
#   malloc of a TSan process: TSan's start-up calls malloc (the loader's dlsym error
#   strings) before the runtime is initialised, and instrumented tide code there crashes in
#   __tsan_func_entry.  (clang 14 links its runtime statically into the program, which then
#   defines malloc itself: the same arrangement.)
# - test/stress/soak and soak_fault: 4 threads (and with -C a checker thread, and tide's
#   purger thread) calling every entry point through its tide_ name on shared blocks, under
#   each configuration soak.sh lists.
# - The Criterion suites, built from their own sources against test/tsan/ (the rules
#   below): Criterion 2.4 cannot start under TSan (Criterion issue #274: its runner maps an
#   arena at one of ten random 16 MiB-aligned places in 32-96 TiB, which TSan has reserved
#   almost all of, and gives up, "Could not initialize inheritable arena").  So
#   test/tsan/criterion/criterion.h stands in for Criterion's header (Test, cr_assert*,
#   cr_expect*, cr_skip_test, cr_log_*) and test/tsan/runner.c for its runner (each test
#   forked, .timeout x $(TSAN_TIMEOUT_SCALE), --filter globs); test/tsan/tide_names.h,
#   given with -include, maps the malloc family the tests call to the tide_ names.  They
#   run with die_after_fork=0: their forked children start threads, which TSan refuses by
#   default after a fork of a multithreaded process (its locks are held across the fork,
#   so the child's runtime is sound; a new thread that reuses a stack of the parent's
#   threads is not, see test/system/fork.c).  Any line of ThreadSanitizer's, or a failed
#   test, fails the step.  These run, $(TSAN_SUITES), with TSAN_FILTER_<suite>:
#     unit/refill    8 threads refilling their caches, in a forked child;
#     unit/tcache    a cache set up and grown in a thread of its own, in a forked child;
#     stress/stress  eight_threads_small_objects (8 threads, ~1M operations through the
#                    caches and slabs, half the frees remote) and producers_and_consumers
#                    (every free remote); not the 4 MiB and giant-block cases: every byte
#                    of blocks up to 4 MiB is filled and checked, minutes each under TSan;
#     system/fork    fork from the main thread and from two threads while others allocate
#                    (tide's atfork handlers), without the child's thread (see fork.c);
#                    not the fork_probe cases: they test tide as the malloc of a whole
#                    process (a signal handler interrupting it, stdio, popen, dlopen).
#   Left out, and why:
#     stress/churn   10,000 thread creations take minutes under TSan, and its bound is the
#                    process's RSS, which TSan's per-thread state and shadow inflate;
#     system/vma     its bound (tide's heap in at most 4 VMAs) holds because tide's first
#                    range sits in 16-32 TiB, far from other mappings; TSan's shadow
#                    occupies that window, so tide's ranges land among the mmap area's
#                    mappings, and a TSan process has 15 or more;
#     system/large_realloc  the threaded cases fill every byte of blocks grown to 128 MiB
#                    and moved with mremap, which TSan does not follow: its shadow of
#                    every place a block was (4 bytes a byte) makes gigabytes (the kernel
#                    killed it at 2.9 GB on a 24 GB machine shared with other runs);
#     the others are single-threaded, or test how tide serves a whole process (LD_PRELOAD,
#     start-up), which a TSan process cannot have.
# - TSan takes the memory layout its runtime fixes (programs at 0x55..., libraries and
#   mmap below 0x7fff...): with more than 28 bits of mmap randomisation (vm.mmap_rnd_bits,
#   32 on some kernels) mmap's base can fall below 0x7e80'0000'0000 and gcc 12's runtime
#   dies at start ("unexpected memory mapping").  So the programs run under `setarch -R`
#   (personality ADDR_NO_RANDOMIZE, which the soak's processes inherit) where the system
#   allows it (Docker's default seccomp profile does not; there they run as they are).
# - Suppressions: none.  tide's lock (src/lock.h) takes its word with acquire and gives it
#   with release atomics, which TSan follows; its futex sleeps are beside the point.
#   (The suites found one report, fixed in src/background.c: a fork's child initialised
#   the purger's mutex again while the prepare handler held it, which POSIX leaves
#   undefined; TSan saw the child's next lock of it as a double lock.)
# ---- the multithreaded Criterion suites, built against test/tsan/ ------------------------
# Only in the --enable-tsan tree: the sources of the suites, with test/tsan/criterion/ first
# on their include path and test/tsan/tide_names.h given with -include; the runner and the
# child runner (test/support/child.c) as a library built without the tide_ names.
if ENABLE_TSAN
tsan_suites = test/tsan/refill test/tsan/tcache test/tsan/stress test/tsan/fork
EXTRA_PROGRAMS = $(tsan_suites)
CLEANFILES += $(tsan_suites)
EXTRA_LTLIBRARIES += test/tsan/libtsanrun.la
CLEANFILES += test/tsan/libtsanrun.la
test_tsan_libtsanrun_la_SOURCES = test/tsan/runner.c test/support/child.c
test_tsan_libtsanrun_la_CPPFLAGS = $(rel_cppflags) -I$(top_srcdir)/test/tsan
test_tsan_libtsanrun_la_CFLAGS = $(rel_cflags)

tsan_cppflags = -I$(top_srcdir)/test/tsan -include $(top_srcdir)/test/tsan/tide_names.h
tsan_unit_cppflags = $(tsan_cppflags) $(rel_cppflags) -I$(top_srcdir)/src -I$(top_builddir)/src -DTIDE_DEBUG
tsan_ldadd = src/libtide.la test/tsan/libtsanrun.la $(PTHREAD_LIBS)

test_tsan_refill_SOURCES = test/unit/refill.c
test_tsan_refill_CPPFLAGS = $(tsan_unit_cppflags)
test_tsan_refill_CFLAGS = $(rel_cflags)
test_tsan_refill_LDFLAGS = $(rel_ldflags)
test_tsan_refill_LDADD = test/libtide_fault.la test/tsan/libtsanrun.la $(PTHREAD_LIBS)

test_tsan_tcache_SOURCES = test/unit/tcache.c
test_tsan_tcache_CPPFLAGS = $(tsan_unit_cppflags)
test_tsan_tcache_CFLAGS = $(rel_cflags)
test_tsan_tcache_LDFLAGS = $(rel_ldflags)
test_tsan_tcache_LDADD = test/libtide_fault.la test/tsan/libtsanrun.la $(PTHREAD_LIBS)

test_tsan_stress_SOURCES = test/stress/stress.c
test_tsan_stress_CPPFLAGS = $(tsan_cppflags) $(tide_test_cppflags)
test_tsan_stress_CFLAGS = $(rel_cflags)
test_tsan_stress_LDFLAGS = $(rel_ldflags)
test_tsan_stress_LDADD = $(tsan_ldadd)

# (fork_probe is not built: the tests that run it are filtered out, see above.)
test_tsan_fork_SOURCES = test/system/fork.c
test_tsan_fork_CPPFLAGS = $(tsan_cppflags) $(tide_test_cppflags) -DFORK_PROBE=\"$(abs_top_builddir)/test/system/fork_probe\"
test_tsan_fork_CFLAGS = $(rel_cflags)
test_tsan_fork_LDFLAGS = $(rel_ldflags)
test_tsan_fork_LDADD = $(tsan_ldadd)
endif
EXTRA_DIST += test/tsan/criterion/criterion.h test/tsan/tide_names.h test/tsan/runner.c

if ENABLE_TSAN
rel_in_tsan = yes
else
rel_in_tsan = no
endif
TSAN = yes
TSAN_BUILDDIR = tsan-build
TSAN_SOAK_SECONDS = 90
TSAN_TIMEOUT = 1800
# halt_on_error=0: every race of a run is reported (the run still fails: exit status 66).
TSAN_RUN_OPTIONS = halt_on_error=0:second_deadlock_stack=1:history_size=4
# The suites' children start threads after a fork of a multithreaded process (refill's
# case runs in one): TSan allows it with die_after_fork=0 (see the comment above).
TSAN_SUITE_OPTIONS = $(TSAN_RUN_OPTIONS):die_after_fork=0
# The Criterion suites that run, each with the tests of it that do (a glob, as
# Criterion's --filter; * when not given), and how much longer than their .timeout a
# test may take (a hang detector: TSan makes the code several times slower).
TSAN_SUITES = refill tcache stress fork
TSAN_FILTER_stress = stress/@(eight_threads_small_objects|producers_and_consumers)
TSAN_FILTER_fork = fork/@(while_three_threads_allocate|from_two_threads_at_once)
TSAN_TIMEOUT_SCALE = 4

# After the matrix, the fuzzers and the UBSan copy, which tide-check-local's own make runs
# (test/local.mk): named here as a prerequisite, reliability-check-local would run them all
# a second time in this make.
check-local: tsan-check-local
.PHONY: tsan-check-local check-tsan
tsan-check-local: tide-check-local
	@if test "$(TSAN)" = no || test "$(rel_in_tsan)" = yes || test "$(rel_in_ubsan)" = yes; then :; else \
	  $(MAKE) $(AM_MAKEFLAGS) check-tsan || exit 1; fi

# As check-ubsan: a copy of the files git tracks, configured with --enable-tsan (gcc,
# -fsanitize=thread, internal assertions on); only the library and the soak are built.
check-tsan:
	@echo "tsan: building a copy of the tree in $(TSAN_BUILDDIR)/ with --enable-tsan"
	@rm -rf $(TSAN_BUILDDIR) && $(MKDIR_P) $(TSAN_BUILDDIR)/tree
	@if (cd $(top_srcdir) && git rev-parse --git-dir) >/dev/null 2>&1; then \
	  (cd $(top_srcdir) && git ls-files -z --cached | tar --null -T - --ignore-failed-read -cf -) | \
	    tar -C $(TSAN_BUILDDIR)/tree -xf - ; \
	else \
	  $(MAKE) $(AM_MAKEFLAGS) distdir distdir=$(TSAN_BUILDDIR)/tree >/dev/null; \
	fi
	@cd $(TSAN_BUILDDIR)/tree && { autoreconf -fi && ./configure --enable-tsan $(if $(WERROR_CFLAGS),--enable-werror) && \
	  $(MAKE) src/size_class_table.h test/support/alloc_mode.h && \
	  $(MAKE) -j2 src/libtide.la test/stress/soak$(EXEEXT) test/stress/soak_fault$(EXEEXT) \
	    $(patsubst %,test/tsan/%$(EXEEXT),$(TSAN_SUITES)); } >../build.log 2>&1 || \
	  { echo "tsan: the TSan build failed; the end of $(TSAN_BUILDDIR)/build.log:"; tail -40 ../build.log; exit 1; }
	@cd $(TSAN_BUILDDIR)/tree && norand=; if setarch -R true 2>/dev/null; then norand='setarch -R'; fi; \
	  TSAN_OPTIONS=$(TSAN_RUN_OPTIONS) SOAK_BIN=test/stress/soak$(EXEEXT) \
	  SOAK_FAULT_BIN=test/stress/soak_fault$(EXEEXT) \
	  timeout -k 10 $(TSAN_TIMEOUT) $$norand $(SHELL) test/stress/soak.sh $(TSAN_SOAK_SECONDS) >../check.log 2>&1; rc=$$?; \
	  sed -n '/^soak: summary/,$$p' ../check.log | sed 's/^/tsan: /'; \
	  if test $$rc -ne 0; then echo "tsan: FAILED (status $$rc); ThreadSanitizer's reports:"; \
	    grep -h -A24 'WARNING: ThreadSanitizer' ../check.log | head -120; exit 1; fi; \
	  echo "tsan: the soak passed under ThreadSanitizer ($(TSAN_BUILDDIR)/check.log)"
	@cd $(TSAN_BUILDDIR)/tree && norand=; if setarch -R true 2>/dev/null; then norand='setarch -R'; fi; \
	  : >../suites.log; failed=; \
	  run() { echo "tsan: test/tsan/$$1 --filter='$$2'" >>../suites.log; \
	    TSAN_OPTIONS=$(TSAN_SUITE_OPTIONS) timeout -k 10 $(TSAN_TIMEOUT) $$norand test/tsan/$$1$(EXEEXT) \
	      --filter="$$2" --timeout-scale=$(TSAN_TIMEOUT_SCALE) >>../suites.log 2>&1 || failed="$$failed $$1"; }; \
	  $(foreach s,$(TSAN_SUITES),run $(s) '$(or $(TSAN_FILTER_$(s)),*)';) \
	  grep -h '^tsan: \|^\[\(PASS\|FAIL\|SKIP\)\]\|^Synthesis' ../suites.log | sed 's/^\(tsan: \)*/tsan: /'; \
	  if test -n "$$failed" || grep -q 'ThreadSanitizer' ../suites.log; then \
	    echo "tsan: FAILED:$$failed; ThreadSanitizer's reports:"; \
	    grep -h -A24 'ThreadSanitizer' ../suites.log | head -120; exit 1; fi; \
	  echo "tsan: the suites passed under ThreadSanitizer ($(TSAN_BUILDDIR)/suites.log)"

clean-local: tsan-clean-local
.PHONY: tsan-clean-local
tsan-clean-local:
	rm -rf $(TSAN_BUILDDIR)
