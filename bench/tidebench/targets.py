# SPDX-License-Identifier: MIT
"""The acceptance targets of `make bench`: data only, evaluated by verdicts.py against
the medians of a run, in this order (the order of latest.md's Targets table).

Each target is a dict.  "check" names what is measured (verdicts.CHECKS says what each
one computes and which fields it takes); "at_least" / "at_most" is the bound on that
ratio.  Rows are named by their label in the tables: "tide" is tide's default
configuration, "tide[purge:none]" tide under that TIDE_CONF, "jemalloc" a peer (or an
extra peer by its label).  "tide" may be left out: it defaults to "tide".  "issue" names
the issue that set a target tide does not meet yet; the table says so.  The text of each
target in the table is made from these fields, so a bound is written once, here.
"""

TARGETS = [
    # ebizzy -s 5242880 -t 2: the default purge policy costs at most 3% against never
    # purging, and tide that never purges beats every peer.
    {"check": "ebizzy_ratio", "config": "s5M-t2", "ref": "tide[purge:none]", "at_least": 0.97},
    {"check": "ebizzy_vs_best_peer", "config": "s5M-t2", "tide": "tide[purge:none]",
     "at_least": 1.0},

    # ebizzy -s 5242880 -t 2 with every allocator told to purge on every free
    # (tide: decay_ms:0, the best of thp:off and thp:on).
    {"check": "purge_every_free_vs_peer", "purge": "dontneed", "peer": "jemalloc",
     "at_least": 1.5},
    {"check": "purge_every_free_policies", "purge": "free", "ref": "dontneed", "at_least": 1.5},

    # Microbenchmarks: time against the fastest peer, peak RSS against jemalloc.
    {"check": "micro_time", "bench": "pairs-batch", "at_most": 1.1},
    {"check": "micro_time", "bench": "pairs-lifo", "at_most": 1.1},
    {"check": "micro_time", "bench": "pairs-burst", "at_most": 1.1, "issue": 38},
    {"check": "micro_time", "bench": "prodcons", "at_most": 1.2},
    {"check": "micro_time", "bench": "prodcons-pairs", "at_most": 1.2},
    {"check": "micro_time", "bench": "prodcons-split", "at_most": 1.2},
    {"check": "micro_peak_rss", "bench": "mixed-1t", "ref": "jemalloc", "at_most": 1.1},
    {"check": "micro_peak_rss", "bench": "mixed-2t", "ref": "jemalloc", "at_most": 1.1},

    # The workload shapes (issue 13): time against the fastest peer, 2 threads (powers: 1);
    # with 8 and 16 threads on the machine's CPUs, no collapse.
    {"check": "micro_time", "bench": "churn", "at_most": 1.0},
    {"check": "micro_time", "bench": "larson", "at_most": 1.0},
    {"check": "micro_time", "bench": "larson-sized", "at_most": 1.0},
    {"check": "micro_time", "bench": "powers", "at_most": 1.0},
    {"check": "micro_time", "bench": "churn-8t", "at_most": 1.1},
    {"check": "micro_time", "bench": "churn-16t", "at_most": 1.1},
    {"check": "micro_time", "bench": "larson-8t", "at_most": 1.1},
    {"check": "micro_time", "bench": "larson-16t", "at_most": 1.1},

    # realloc growth: total time (first malloc, reallocs, touches) and the time inside
    # realloc, against glibc, jemalloc and mimalloc; and no VMA left behind.
    {"check": "realloc_ratio", "mode": "double", "time": "total_s", "ref": "glibc",
     "at_most": 1.0},
    {"check": "realloc_ratio", "mode": "double", "time": "total_s", "ref": "jemalloc",
     "at_most": 0.5},
    {"check": "realloc_ratio", "mode": "double", "time": "total_s", "ref": "mimalloc",
     "at_most": 0.5},
    {"check": "realloc_ratio", "mode": "double", "time": "realloc_s", "ref": "glibc",
     "at_most": 0.67},
    {"check": "realloc_ratio", "mode": "double", "time": "realloc_s", "ref": "jemalloc",
     "at_most": 0.1},
    {"check": "realloc_ratio", "mode": "double", "time": "realloc_s", "ref": "mimalloc",
     "at_most": 0.1},
    {"check": "realloc_vmas", "mode": "double"},
    {"check": "realloc_ratio", "mode": "step", "time": "total_s", "ref": "glibc",
     "at_most": 1.0},
    {"check": "realloc_ratio", "mode": "step", "time": "total_s", "ref": "jemalloc",
     "at_most": 0.5},
    {"check": "realloc_ratio", "mode": "step", "time": "total_s", "ref": "mimalloc",
     "at_most": 0.5},
    {"check": "realloc_ratio", "mode": "step", "time": "realloc_s", "ref": "glibc",
     "at_most": 0.67},
    {"check": "realloc_ratio", "mode": "step", "time": "realloc_s", "ref": "jemalloc",
     "at_most": 0.1},
    {"check": "realloc_ratio", "mode": "step", "time": "realloc_s", "ref": "mimalloc",
     "at_most": 0.1},
    {"check": "realloc_vmas", "mode": "step"},

    # Issue 37 (a heap on transparent huge pages by default, where they cost no memory):
    # bench/kv; set by the issue (tide: its default, thp:auto).  fork
    # of the 1 GiB heap at most mimalloc 3's (an extra peer, labelled so: make bench
    # EXTRA_PEER="mimalloc3=/path/to/libmimalloc.so"; n/a without it) and at most 0.2 x
    # thp:off's; AnonHugePages at least 90% of the live heap after the fill; RSS in every
    # phase at most 1.02 x thp:off's and at most jemalloc's; TLB-bound reads at least 5%
    # faster than thp:off; the fill's touch latency reported against thp:off.
    {"check": "kv_fork", "phase": "fill", "ref": "mimalloc3", "at_most": 1.0, "issue": 37},
    {"check": "kv_fork", "phase": "fill", "ref": "tide[thp:off]", "at_most": 0.2, "issue": 37},
    {"check": "kv_huge_share", "phase": "fill", "at_least": 0.9, "issue": 37},
    {"check": "kv_rss", "ref": "tide[thp:off]", "at_most": 1.02, "issue": 37},
    {"check": "kv_rss", "ref": "jemalloc", "at_most": 1.0, "issue": 37},
    {"check": "kv_tlb", "ref": "tide[thp:off]", "at_least": 1.05, "issue": 37},
    {"check": "kv_touch_report", "phase": "fill", "ref": "tide[thp:off]", "issue": 37},

    # Reported, no bound.
    {"check": "fastpath_report"},
]
