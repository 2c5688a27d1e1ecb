# bench/: the ebizzy clone, the allocator microbenchmarks and `make bench`.
# The programs never link libtide: run.py picks the allocator of each run with LD_PRELOAD,
# so the same binaries measure glibc, jemalloc, tcmalloc, mimalloc and tide.

bench_programs = bench/ebizzy
noinst_PROGRAMS += $(bench_programs)

# -O2 even if the user's CFLAGS lack it (theirs still come last and win).
bench_cflags = $(AM_CFLAGS) -O2
bench_ldadd = $(PTHREAD_LIBS)
bench_probe = bench/probe.c bench/probe.h bench/rng.h

bench_ebizzy_SOURCES = bench/ebizzy.c $(bench_probe)
bench_ebizzy_CFLAGS = $(bench_cflags)
bench_ebizzy_LDADD = $(bench_ldadd)
