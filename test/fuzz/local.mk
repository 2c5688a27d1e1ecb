# SPDX-License-Identifier: MIT
# test/fuzz/: libFuzzer targets (clang), run for $(FUZZ_SECONDS) s each by make check, or
# alone by `make fuzz`.
FUZZ_SECONDS = 60

# ---- libFuzzer targets (clang) -----------------------------------------------------------------
# Built with $(FUZZ_CC) outside automake's rules (the rest of the tree builds with $(CC)).
# fuzz_conf links conf.c, report.c and os.c; fuzz_api links all of tide with its glibc names
# and C++'s operators made local (objcopy), so that only the explicit tide_* calls of the
# target use tide (libFuzzer is C++: its new and delete stay libstdc++'s).
FUZZ_CFLAGS = -g -O1 -std=gnu11 -Wall -Wextra -Wno-unused-parameter $(WERROR_CFLAGS) -D_GNU_SOURCE -DTIDE_DEBUG -fsanitize=fuzzer,undefined -fno-sanitize-recover=undefined \
	-I$(top_srcdir)/include -I$(top_srcdir)/src -I$(top_builddir)/src
fuzz_tide_sources = $(filter-out src/malloc.c,$(filter %.c,$(src_libtide_la_SOURCES)))
fuzz_glibc_names = malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc \
	pvalloc malloc_usable_size free_sized free_aligned_sized malloc_trim mallinfo mallinfo2 malloc_stats cfree \
	_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t _ZnamSt11align_val_t \
	_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t _ZdlPv _ZdaPv _ZdlPvm _ZdaPvm \
	_ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t \
	_ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvSt11align_val_tRKSt9nothrow_t \
	_ZdaPvSt11align_val_tRKSt9nothrow_t
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

