# bench/: the ebizzy clone, the allocator microbenchmarks and `make bench`.
# The programs never link libtide: run.py picks the allocator of each run with LD_PRELOAD,
# so the same binaries measure glibc, jemalloc, tcmalloc, mimalloc and tide.

bench_programs = bench/ebizzy bench/pairs bench/prodcons bench/mixed bench/fastpath
noinst_PROGRAMS += $(bench_programs)

# -O2 even if the user's CFLAGS lack it (theirs still come last and win).
bench_cflags = $(AM_CFLAGS) -O2
bench_ldadd = $(PTHREAD_LIBS)
bench_probe = bench/probe.c bench/probe.h bench/rng.h

bench_ebizzy_SOURCES = bench/ebizzy.c $(bench_probe)
bench_ebizzy_CFLAGS = $(bench_cflags)
bench_ebizzy_LDADD = $(bench_ldadd)

bench_pairs_SOURCES = bench/pairs.c bench/bench.h $(bench_probe)
bench_pairs_CFLAGS = $(bench_cflags)
bench_pairs_LDADD = $(bench_ldadd)

bench_prodcons_SOURCES = bench/prodcons.c bench/bench.h $(bench_probe)
bench_prodcons_CFLAGS = $(bench_cflags)
bench_prodcons_LDADD = $(bench_ldadd)

bench_mixed_SOURCES = bench/mixed.c bench/bench.h $(bench_probe)
bench_mixed_CFLAGS = $(bench_cflags)
bench_mixed_LDADD = $(bench_ldadd)

bench_fastpath_SOURCES = bench/fastpath.c bench/bench.h
bench_fastpath_CFLAGS = $(bench_cflags)

