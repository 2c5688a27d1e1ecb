# SPDX-License-Identifier: MIT
# make check's last steps: the fuzzers (test/fuzz), then every suite again in a copy of the
# tree built with UBSan.
#
#   make check                  runs all of it (the soak for $(SOAK_SECONDS) s, each fuzzer
#                               for $(FUZZ_SECONDS) s, then the suites again under UBSan)
#   make fuzz                   the fuzzers alone, $(FUZZ_SECONDS) s each
#   make check-ubsan            the UBSan build and run alone
# `make check UBSAN=no FUZZ=no SOAK_SECONDS=10` makes a quick local run.

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

# (check-local runs it beside the configuration matrix: test/local.mk)
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
# --enable-ubsan (gcc, -fsanitize=undefined -fno-sanitize-recover=undefined; and --enable-werror
# when this tree has it) and runs its
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
	@cd $(UBSAN_BUILDDIR)/tree && { autoreconf -fi && ./configure --enable-ubsan $(if $(WERROR_CFLAGS),--enable-werror) && $(MAKE) -j2 && \
	  $(MAKE) -j2 test/stress/soak$(EXEEXT); } >../build.log 2>&1 || \
	  { echo "ubsan: the UBSan build failed; the end of $(UBSAN_BUILDDIR)/build.log:"; tail -40 ../build.log; exit 1; }
	@cd $(UBSAN_BUILDDIR)/tree && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  timeout -k 5 60 ./test/stress/soak -s 1 -q >../smoke.log 2>&1; rc=$$?; \
	  if test $$rc -ne 0; then \
	    echo "ubsan: FAILED: a one-second soak under UBSan exited with status $$rc$$(test $$rc = 124 && echo ' (hung: a UBSan report during start-up deadlocks)'):"; \
	    tail -20 ../smoke.log; \
	    if test $$rc = 124; then echo "ubsan: where it hung:"; \
	      UBSAN_OPTIONS=print_stacktrace=1 timeout -k 5 60 gdb -batch -ex run -ex 'thread apply all bt 30' \
	        --args ./test/stress/soak -s 1 -q 2>&1 </dev/null | grep -E '^#|runtime error' | grep -vE 'libc|pthread_mutex' | head -30; fi; \
	    exit 1; fi
	@cd $(UBSAN_BUILDDIR)/tree && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TIDE_TEST_SHORT=1 \
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
