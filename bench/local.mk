# SPDX-License-Identifier: MIT
# bench/: the ebizzy clone, the allocator microbenchmarks and `make bench`.
# The programs never link libtide: run.py picks the allocator of each run with LD_PRELOAD,
# so the same binaries measure glibc, jemalloc, tcmalloc, mimalloc, tide and any other
# allocator library given by path (EXTRA_PEER).

bench_programs = bench/ebizzy bench/pairs bench/prodcons bench/mixed bench/fastpath \
	bench/realloc bench/idle bench/purge_floor bench/churn bench/larson bench/powers bench/kv
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

bench_realloc_SOURCES = bench/realloc.c bench/bench.h $(bench_probe)
bench_realloc_CFLAGS = $(bench_cflags)
bench_realloc_LDADD = $(bench_ldadd)

bench_idle_SOURCES = bench/idle.c bench/bench.h $(bench_probe) bench/rng.h
bench_idle_CFLAGS = $(bench_cflags)
bench_idle_LDADD = $(bench_ldadd)

bench_purge_floor_SOURCES = bench/purge_floor.c bench/bench.h $(bench_probe)
bench_purge_floor_CFLAGS = $(bench_cflags)
bench_purge_floor_LDADD = $(bench_ldadd)

bench_churn_SOURCES = bench/churn.c bench/shape.h bench/bench.h $(bench_probe)
bench_churn_CFLAGS = $(bench_cflags)
bench_churn_LDADD = $(bench_ldadd)

bench_larson_SOURCES = bench/larson.c bench/shape.h bench/bench.h $(bench_probe)
bench_larson_CFLAGS = $(bench_cflags)
bench_larson_LDADD = $(bench_ldadd)

bench_powers_SOURCES = bench/powers.c bench/shape.h bench/bench.h $(bench_probe)
bench_powers_CFLAGS = $(bench_cflags)
bench_powers_LDADD = $(bench_ldadd)

bench_kv_SOURCES = bench/kv.c bench/bench.h $(bench_probe)
bench_kv_CFLAGS = $(bench_cflags)
bench_kv_LDADD = $(bench_ldadd)

bench_fastpath_SOURCES = bench/fastpath.c bench/bench.h
bench_fastpath_CFLAGS = $(bench_cflags)

# `make bench`: build the library and the programs, then run the comparison (bench/run.py).
#   QUICK=1           smoke run, about 2 minutes (see bench/README.md for what it drops)
#   ONLY=ebizzy|micro|shapes|realloc|idle|kv or configuration/benchmark names, comma-separated
#                     (e.g. ONLY=s5M-t2,realloc-step)
#   ALLOCS=glibc,tide the allocators to run (glibc, jemalloc, tcmalloc, mimalloc, tide)
#   RUNS=3            runs per allocator and configuration (default 5; QUICK: 1)
#   DURATION=5        seconds per ebizzy run (default 1)
#   MAX_LOAD=10       retry a run during which other processes used over 10% of the CPUs
#   TIDE_CONFS="default purge:free"  TIDE_CONF values to run, replacing bench/tide-confs
#   EXTRA_TIDE="before=/path/to/libtide.so"  other builds of libtide measured beside this
#                     one in every table (LABEL=PATH, space-separated): before/after in one run
#   EXTRA_PEER="mimalloc3=/path/to/libmimalloc.so"  other allocator libraries measured
#                     beside the peers in every table (LABEL=PATH, space-separated)
# "bench" is also a directory: without .PHONY, make would call it up to date.
.PHONY: bench
PYTHON3 = python3
bench_flag = $(if $(filter-out 0 no false,$(1)),$(2))
bench: src/libtide.la $(bench_programs)
	$(PYTHON3) $(srcdir)/bench/run.py --builddir="$(abs_top_builddir)" \
	  --srcdir="$(abs_top_srcdir)" \
	  $(call bench_flag,$(QUICK),--quick) \
	  $(if $(ONLY),--only="$(ONLY)") $(if $(ALLOCS),--allocs="$(ALLOCS)") \
	  $(if $(RUNS),--runs="$(RUNS)") $(if $(DURATION),--seconds="$(DURATION)") \
	  $(if $(MAX_LOAD),--max-load="$(MAX_LOAD)") \
	  $(if $(TIDE_CONFS),--tide-confs="$(TIDE_CONFS)") \
	  $(foreach x,$(EXTRA_TIDE),--extra-tide="$(x)") \
	  $(foreach x,$(EXTRA_PEER),--extra-peer="$(x)")

# run.py is the entry point; the package tidebench/ does the work (python3, standard library).
bench_tidebench = bench/tidebench/__init__.py bench/tidebench/runner.py \
	bench/tidebench/ebizzy.py bench/tidebench/purge.py bench/tidebench/micro.py \
	bench/tidebench/realloc.py bench/tidebench/idle.py bench/tidebench/kv.py \
	bench/tidebench/allocators.py \
	bench/tidebench/cli.py bench/tidebench/plan.py bench/tidebench/report.py \
	bench/tidebench/targets.py bench/tidebench/verdicts.py
EXTRA_DIST += bench/run.py $(bench_tidebench) bench/background.py bench/ab.py bench/tide-confs \
	bench/README.md bench/results/.gitignore
# The dated results docs/ cites.
EXTRA_DIST += bench/results/latest.md bench/results/prof-ab.md bench/results/prof-on-off.md \
	bench/results/2026-12-06-design-figures.md

# make check: the targets judged on fixed medians (no benchmark is run).  -B: no
# __pycache__ left in the source tree.
TESTS += bench/test_targets.py
EXTRA_DIST += bench/test_targets.py
TEST_EXTENSIONS += .py
PY_LOG_COMPILER = $(PYTHON3)
AM_PY_LOG_FLAGS = -B
