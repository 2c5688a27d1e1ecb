# SPDX-License-Identifier: MIT
# make check's ThreadSanitizer step: the differential soak (test/stress/soak.sh, every
# configuration, the fault-injection build too) again in a copy of the tree built with
# -fsanitize=thread.
#
#   make check                  runs it after the UBSan step ($(TSAN_SOAK_SECONDS) s of soak)
#   make check TSAN=no          skips it
#   make check-tsan             the TSan build and run alone
#
# What runs, and why only that:
# - test/stress/soak and soak_fault: 4 threads (and with -C a checker thread, and tide's
#   purger thread) calling every entry point through its tide_ name on shared blocks, under
#   each configuration soak.sh lists.  They are plain programs, and call tide by its tide_
#   names: with gcc, libtsan.so comes first in the program's libraries, so the malloc family
#   is TSan's own allocator and only the tide_ names reach tide.  Tide cannot be the malloc
#   of a TSan process: TSan's start-up calls malloc (the loader's dlsym error strings) before
#   the runtime is initialised, and instrumented tide code there crashes in
#   __tsan_func_entry.  (clang 14 links its runtime statically into the program, which then
#   defines malloc itself: the same arrangement.)
# - Not the Criterion suites (unit/refill, unit/tcache, stress/stress, stress/churn,
#   system/fork, system/vma, system/large_realloc are the multithreaded ones): Criterion 2.4
#   cannot start under TSan (Criterion issue #274).  Its runner maps an arena at one of ten
#   random 16 MiB-aligned places in 32-96 TiB, which TSan has reserved almost all of
#   (shadow, meta, trace ranges), and gives up ("Could not initialize inheritable arena");
#   every test's sandbox does the same, and crashes when it fails.  The others are
#   single-threaded, or test how tide serves a whole process (LD_PRELOAD, fork, start-up),
#   which a TSan process cannot have.
# - TSan takes the memory layout its runtime fixes (programs at 0x55..., libraries and
#   mmap below 0x7fff...): with more than 28 bits of mmap randomisation (vm.mmap_rnd_bits,
#   32 on some kernels) mmap's base can fall below 0x7e80'0000'0000 and gcc 12's runtime
#   dies at start ("unexpected memory mapping").  So the programs run under `setarch -R`
#   (personality ADDR_NO_RANDOMIZE, which the soak's processes inherit) where the system
#   allows it (Docker's default seccomp profile does not; there they run as they are).
# - Suppressions: none.  tide's lock (src/lock.h) takes its word with acquire and gives it
#   with release atomics, which TSan follows; its futex sleeps are beside the point.
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

check-local: tsan-check-local
.PHONY: tsan-check-local check-tsan
tsan-check-local: reliability-check-local
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
	  $(MAKE) src/size_class_table.h && \
	  $(MAKE) -j2 src/libtide.la test/stress/soak$(EXEEXT) test/stress/soak_fault$(EXEEXT); } >../build.log 2>&1 || \
	  { echo "tsan: the TSan build failed; the end of $(TSAN_BUILDDIR)/build.log:"; tail -40 ../build.log; exit 1; }
	@cd $(TSAN_BUILDDIR)/tree && norand=; if setarch -R true 2>/dev/null; then norand='setarch -R'; fi; \
	  TSAN_OPTIONS=$(TSAN_RUN_OPTIONS) SOAK_BIN=test/stress/soak$(EXEEXT) \
	  SOAK_FAULT_BIN=test/stress/soak_fault$(EXEEXT) \
	  timeout -k 10 $(TSAN_TIMEOUT) $$norand $(SHELL) test/stress/soak.sh $(TSAN_SOAK_SECONDS) >../check.log 2>&1; rc=$$?; \
	  sed -n '/^soak: summary/,$$p' ../check.log | sed 's/^/tsan: /'; \
	  if test $$rc -ne 0; then echo "tsan: FAILED (status $$rc); ThreadSanitizer's reports:"; \
	    grep -h -A24 'WARNING: ThreadSanitizer' ../check.log | head -120; exit 1; fi; \
	  echo "tsan: the soak passed under ThreadSanitizer ($(TSAN_BUILDDIR)/check.log)"

clean-local: tsan-clean-local
.PHONY: tsan-clean-local
tsan-clean-local:
	rm -rf $(TSAN_BUILDDIR)
