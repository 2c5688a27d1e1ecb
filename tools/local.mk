# SPDX-License-Identifier: MIT
# tools/: checks make check runs on the built tree.

# libtide.a and libtide.so define exactly the TIDE_EXPORT and TIDE_ALIAS names of src/
# (and the test hooks, TIDE_TEST_EXPORT, in a build with fault injection); libtide.so
# versions them as src/libtide.ver says and needs nothing but libc (and, built with
# --enable-ubsan, UBSan's runtime).
TESTS += tools/check_exports.py
EXTRA_DIST += tools/check_exports.py
AM_TESTS_ENVIRONMENT += NM='$(NM)'; export NM; \
	TIDE_FAULT_INJECTION='$(if $(TIDE_FAULT_CPPFLAGS),yes,no)'; export TIDE_FAULT_INJECTION; \
	TIDE_UBSAN='$(rel_in_ubsan)'; export TIDE_UBSAN;

# src/ files include and call only files of their row of docs/architecture.md's layer
# table or below, and each row's "uses" names the rows it includes and calls (make check;
# `make check-layers` alone; tools/check_layers.py says how).  It reads the
# objects automake lists for libtide, so renamed or removed sources leave no stale object
# in the check.
TESTS += tools/check_layers.py
EXTRA_DIST += tools/check_layers.py
tide_layer_env = TIDE_LAYER_OBJECTS='$(src_libtide_la_OBJECTS)' \
	TIDE_LAYER_GENERATED='$(filter src/%,$(BUILT_SOURCES) $(nodist_src_libtide_la_SOURCES))' \
	NM='$(NM)' READELF='$(READELF)'
AM_TESTS_ENVIRONMENT += $(tide_layer_env); export TIDE_LAYER_OBJECTS TIDE_LAYER_GENERATED READELF;
.PHONY: check-layers
check-layers: src/libtide.la
	$(AM_V_at)$(tide_layer_env) srcdir='$(srcdir)' $(srcdir)/tools/check_layers.py

# No object tests the flags of an `add x@gottpoff(%rip)`, which the linker turns into a
# lea that sets none where x is the executable's (GCC 12 does so under UBSan: a NULL check
# of a TLS address that then reads the flags of the instruction before).
TESTS += tools/check_tls_flags.py
EXTRA_DIST += tools/check_tls_flags.py
AM_TESTS_ENVIRONMENT += OBJDUMP='$(OBJDUMP)'; export OBJDUMP;

# The fast path's length against the number tools/fastpath.pin commits (callgrind, exact).
TESTS += tools/check_fastpath.py
EXTRA_DIST += tools/check_fastpath.py tools/fastpath.pin
AM_TESTS_ENVIRONMENT += TIDE_DEBUG_BUILD='$(if $(TIDE_DEBUG_CPPFLAGS),yes,no)'; export TIDE_DEBUG_BUILD; \
	TIDE_CFLAGS='$(CFLAGS)'; export TIDE_CFLAGS;
