#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make check: the targets of `make bench` judged on fixed medians, with no benchmark run.

Checks that bench/tidebench/targets.py is well formed, that verdicts.evaluate() gives
the verdicts (and texts) below for fixed rows: PASS, FAIL, n/a for a missing row or a
bound that cannot decide, "(noisy)" from a row with a busy machine, "(issue N)" before a
target an issue set, an extra peer (mimalloc3) left out of "best of the peers", and that
a target with a mistake is refused.  The expected list was produced by run.py's target code before
the bounds became data, on the same rows.  Exits 0 on success, 1 (with a diff) if not.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tidebench import verdicts  # noqa: E402  (the path first)
from tidebench.targets import TARGETS  # noqa: E402


def eb(config, allocator, rps, load=0.0):
    return {"config": config, "allocator": allocator, "records_per_s": rps, "other_load": load}


def mi(bench, allocator, time_s, ratio, rss, load=0.0):
    return {"bench": bench, "allocator": allocator, "time_s": time_s, "ratio_best_peer": ratio,
            "peak_rss_kib": rss, "other_load": load}


def re_(mode, allocator, total, inside, complete=True, vmas=(12, 30, 12), load=0.0):
    return {"mode": mode, "allocator": allocator, "complete": complete, "total_s": total,
            "realloc_s": inside, "vmas_start": vmas[0], "vmas_peak": vmas[1],
            "vmas_after_free": vmas[2], "other_load": load}


def kv(allocator, rss_by_phase, fill_huge=None, fork=None, touch=None, load=0.0):
    """bench/kv's rows of one allocator: RSS MiB per phase (fill, free, overwrite, idle,
    after); at the fill, AnonHugePages MiB, fork ms and touch p50/p99/p99.9/max us."""
    rows = []
    for phase, rss, live in zip(("fill", "free", "overwrite", "idle", "after"), rss_by_phase,
                                (1000, 400, 460, 460, 460)):
        r = {"phase": phase, "allocator": allocator, "rss_kib": rss * 1024,
             "live_bytes": live * 2**20, "anon_huge_kib": 0, "other_load": load}
        if phase == "fill":
            r["anon_huge_kib"] = None if fill_huge is None else fill_huge * 1024
            r["fork_ms"] = fork
            if touch:
                for key, x in zip(("p50", "p99", "p999", "max"), touch):
                    r[f"touch_{key}_us"] = x
        rows.append(r)
    return rows


PEF = "purge-every-free"
ROWS = {
    "ebizzy": [
        eb("s5M-t2", "glibc", 400000.0), eb("s5M-t2", "jemalloc", 500000.0),
        eb("s5M-t2", "mimalloc", 520000.0, load=0.12),
        eb("s5M-t2", "tide", 515000.0), eb("s5M-t2", "tide[purge:none]", 525000.0),
        eb("s5M-t2", "mimalloc3", 600000.0),  # an extra peer: not one of "the peers"
        eb(PEF, "glibc", 300000.0), eb(PEF, "jemalloc (purge)", 100000.0),
        eb(PEF, "tide[purge:dontneed,decay_ms:0]", 140000.0),
        eb(PEF, "tide[purge:dontneed,decay_ms:0,thp:on]", 160000.0),
        eb(PEF, "tide[purge:free,decay_ms:0]", 250000.0),
        eb(PEF, "tide[purge:free,decay_ms:0,thp:on]", 230000.0),
    ],
    "floor": [{"advice": a, "thp": t, "records_per_s": r} for a, t, r in
              (("none", "off", 900000.0), ("dontneed", "off", 200000.0),
               ("free", "off", 420000.0), ("none", "on", 950000.0),
               ("dontneed", "on", 260000.0), ("free", "on", 400000.0))],
    "micro": [
        mi("pairs-batch", "glibc", 1.0, 1.0, 2000), mi("pairs-batch", "tide", 1.05, 1.05, 1900),
        mi("pairs-lifo", "glibc", 0.5, 1.0, 2000), mi("pairs-lifo", "tide", 0.6, 1.2, 1900),
        mi("pairs-burst", "tcmalloc", 0.3, 1.0, 2000), mi("pairs-burst", "tide", 0.36, 1.2, 1900),
        mi("prodcons", "glibc", 0.4, 1.0, 3000, load=0.3),
        mi("prodcons", "tide", 0.42, 1.05, 2900),
        mi("prodcons-pairs", "glibc", 0.4, 1.0, 3000), mi("prodcons-pairs", "tide", 0.6, 1.5, 2900),
        mi("mixed-1t", "jemalloc", 2.0, 1.0, 200000), mi("mixed-1t", "tide", 2.1, 1.05, 210000),
        mi("mixed-2t", "jemalloc", 1.2, 1.0, 200000, load=0.5),
        mi("mixed-2t", "tide", 1.3, 1.08, 230000),
        mi("churn", "tcmalloc", 0.3, 1.0, 30000), mi("churn", "tide", 0.29, 0.97, 28000),
        mi("larson", "mimalloc", 0.2, 1.0, 9000), mi("larson", "tide", 0.21, 1.05, 9000),
        mi("larson-sized", "tcmalloc", 0.2, 1.0, 9000, load=0.25),
        mi("larson-sized", "tide", 0.2, 1.0, 9000),
        mi("powers", "tcmalloc", 0.05, 1.0, 4000), mi("powers", "tide", 0.06, 1.2, 4000),
        mi("churn-8t", "jemalloc", 0.3, 1.0, 30000), mi("churn-8t", "tide", 0.32, 1.07, 30000),
        mi("churn-16t", "jemalloc", 0.3, 1.0, 30000), mi("churn-16t", "tide", 0.36, 1.2, 30000),
        mi("larson-8t", "mimalloc", 0.2, 1.0, 20000), mi("larson-8t", "tide", 0.2, 1.0, 20000),
    ],
    "fastpath": [{"bench": "fastpath", "allocator": "glibc", "ir_per_pair": 52.0},
                 {"bench": "fastpath", "allocator": "tide", "ir_per_pair": 21.5}],
    "realloc": [
        re_("double", "glibc", 0.40, 0.20), re_("double", "jemalloc", 0.50, 0.30),
        re_("double", "mimalloc", 2.0, 1.9, complete=False),
        re_("double", "tide", 0.15, 0.01, vmas=(12, 30, 13)),
        re_("step", "glibc", 0.8, 0.5, load=0.2), re_("step", "jemalloc", 0.9, 0.6),
        re_("step", "mimalloc", 0.9, 1.95, complete=False),
        re_("step", "tide", 0.5, 0.02),
    ],
    "kv": (kv("tide", (1030, 1030, 1060, 990, 985), fill_huge=950, fork=1.2,
              touch=(0.08, 1.5, 45.0, 2100.0))
           + kv("tide[thp:off]", (1025, 1025, 1050, 940, 930), fill_huge=0, fork=15.0,
                touch=(0.07, 1.1, 3.2, 250.0))
           + kv("jemalloc", (1040, 1040, 1080, 1000, 990), fork=20.0)
           + kv("mimalloc3", (1000, 1000, 1040, 1000, 1000), fork=0.9, load=0.15)),
    "tlb": [{"allocator": "tide", "ns_per_read": 85.0, "other_load": 0.0},
            {"allocator": "tide[thp:off]", "ns_per_read": 100.0, "other_load": 0.0}],
}

EXPECTED = [
    ("ebizzy -s 5242880 -t 2: tide ≥ 0.97 × tide[purge:none]",
     "0.981x (515,000 / 525,000 records/s)", "PASS"),
    ("ebizzy -s 5242880 -t 2: tide[purge:none] ≥ best of glibc/jemalloc/tcmalloc/mimalloc",
     "1.010x of mimalloc (525,000 / 520,000 records/s); other load up to 12%", "PASS (noisy)"),
    ("purge every free: tide purge:dontneed,decay_ms:0 (best of thp on/off) ≥ 1.5 × jemalloc "
     "dirty_decay_ms:0,muzzy_decay_ms:0",
     "1.60x (thp:on: 160,000 / 100,000 records/s)", "PASS"),
    ("purge every free: tide purge:free,decay_ms:0 (best variant) ≥ 1.5 × tide "
     "purge:dontneed,decay_ms:0 (same thp)",
     "1.79x (both thp:off: 250,000 / 140,000 records/s; thp:on: 1.44x; with no allocator: 2.10x "
     "(thp:off, bench/purge_floor))", "PASS"),
    ("pairs-batch: tide time ≤ 1.1 × fastest peer",
     "1.05x (1.050 s)", "PASS"),
    ("pairs-lifo: tide time ≤ 1.1 × fastest peer",
     "1.20x (0.600 s)", "FAIL"),
    ("(issue 38) pairs-burst: tide time ≤ 1.1 × fastest peer",
     "1.20x (0.360 s)", "FAIL"),
    ("prodcons: tide time ≤ 1.2 × fastest peer",
     "1.05x (0.420 s); other load up to 30%", "PASS (noisy)"),
    ("prodcons-pairs: tide time ≤ 1.2 × fastest peer",
     "1.50x (0.600 s)", "FAIL"),
    ("prodcons-split: tide time ≤ 1.2 × fastest peer",
     "row missing", "n/a"),
    ("mixed-1t: tide peak RSS ≤ 1.1 × jemalloc",
     "1.05x (205 / 195 MiB)", "PASS"),
    ("mixed-2t: tide peak RSS ≤ 1.1 × jemalloc",
     "1.15x (225 / 195 MiB)", "FAIL"),
    ("churn: tide time ≤ 1.0 × fastest peer",
     "0.97x (0.290 s)", "PASS"),
    ("larson: tide time ≤ 1.0 × fastest peer",
     "1.05x (0.210 s)", "FAIL"),
    ("larson-sized: tide time ≤ 1.0 × fastest peer",
     "1.00x (0.200 s); other load up to 25%", "PASS (noisy)"),
    ("powers: tide time ≤ 1.0 × fastest peer",
     "1.20x (0.060 s)", "FAIL"),
    ("churn-8t: tide time ≤ 1.1 × fastest peer",
     "1.07x (0.320 s)", "PASS"),
    ("churn-16t: tide time ≤ 1.1 × fastest peer",
     "1.20x (0.360 s)", "FAIL"),
    ("larson-8t: tide time ≤ 1.1 × fastest peer",
     "1.00x (0.200 s)", "PASS"),
    ("larson-16t: tide time ≤ 1.1 × fastest peer",
     "row missing", "n/a"),
    ("realloc double: tide total ≤ 1.0 × glibc",
     "0.37x", "PASS"),
    ("realloc double: tide total ≤ 0.5 × jemalloc",
     "0.30x", "PASS"),
    ("realloc double: tide total ≤ 0.5 × mimalloc",
     "≤0.075x", "PASS"),
    ("realloc double: tide inside realloc ≤ 0.67 × glibc",
     "0.05x", "PASS"),
    ("realloc double: tide inside realloc ≤ 0.1 × jemalloc",
     "0.033x", "PASS"),
    ("realloc double: tide inside realloc ≤ 0.1 × mimalloc",
     "≤0.0053x", "PASS"),
    ("realloc double: tide's VMAs after the final free == at start",
     "13 after free, 12 at start (30 at peak)", "FAIL"),
    ("realloc step: tide total ≤ 1.0 × glibc",
     "0.62x; other load up to 20%", "PASS (noisy)"),
    ("realloc step: tide total ≤ 0.5 × jemalloc",
     "0.56x", "FAIL"),
    ("realloc step: tide total ≤ 0.5 × mimalloc",
     "≤0.56x (mimalloc stopped at the time limit)", "n/a"),
    ("realloc step: tide inside realloc ≤ 0.67 × glibc",
     "0.04x; other load up to 20%", "PASS (noisy)"),
    ("realloc step: tide inside realloc ≤ 0.1 × jemalloc",
     "0.033x", "PASS"),
    ("realloc step: tide inside realloc ≤ 0.1 × mimalloc",
     "≤0.01x", "PASS"),
    ("realloc step: tide's VMAs after the final free == at start",
     "12 after free, 12 at start (30 at peak)", "PASS"),
    ("(issue 37) kv fill: tide fork ≤ 1.0 × mimalloc3's",
     "1.33x (1.20 / 0.90 ms); other load up to 15%", "FAIL (noisy)"),
    ("(issue 37) kv fill: tide fork ≤ 0.2 × tide[thp:off]'s",
     "0.08x (1.20 / 15.00 ms)", "PASS"),
    ("(issue 37) kv fill: tide AnonHugePages ≥ 90% of the live bytes",
     "95.0% (950 / 1000 MiB)", "PASS"),
    ("(issue 37) kv: tide RSS ≤ 1.02 × tide[thp:off]'s in every phase",
     "1.059x at worst (after: 985 / 930 MiB)", "FAIL"),
    ("(issue 37) kv: tide RSS ≤ 1.0 × jemalloc's in every phase",
     "0.995x at worst (after: 985 / 990 MiB)", "PASS"),
    ("(issue 37) kv-tlb: tide reads/s ≥ 1.05 × tide[thp:off]'s",
     "1.176x (85.0 / 100.0 ns per read)", "PASS"),
    ("(issue 37) kv fill: tide touch latency against tide[thp:off]'s (no target)",
     "p50 0.080 / 0.070 µs, p99 1.50 / 1.10 µs, p99.9 45.0 / 3.20 µs, max 2100 / 250 µs", "–"),
    ("fastpath: instructions per malloc(64)+free pair (no target)",
     "glibc 52.0; tide 21.5", "–"),
]

# tide stopped at the time limit: a lower bound under the bound cannot decide, over it can.
STOPPED_ROWS = {"realloc": [re_("double", "glibc", 0.4, 0.2),
                            re_("double", "tide", 0.3, 0.3, complete=False)]}
STOPPED = [
    ("realloc double: tide total ≤ 1.0 × glibc",
     "≥0.75x (glibc stopped at the time limit)", "n/a"),
    ("realloc double: tide inside realloc ≤ 0.67 × glibc", "≥1.50x", "FAIL"),
]

BAD_TARGETS = [
    {"check": "micro_speed", "bench": "pairs-batch", "at_most": 1.1},   # unknown check
    {"check": "micro_time", "bench": "pairs-batch"},                     # no bound
    {"check": "micro_time", "bench": "pairs-bach", "at_most": 1.1},      # unknown bench
    {"check": "micro_time", "bench": "pairs-batch", "at_least": 1.1},    # the wrong bound
    {"check": "micro_time", "bench": "pairs-batch", "at_most": "1.1"},   # not a number
    {"check": "realloc_ratio", "mode": "double", "time": "total", "ref": "glibc",
     "at_most": 1.0},                                                   # unknown time
    {"check": "kv_rss", "ref": "jemalloc", "phase": "load", "at_most": 1.0},  # unknown phase
    {"check": "kv_fork", "phase": "fill", "ref": "mimalloc3", "at_most": 1.0,
     "issue": "37"},                                                    # not an issue number
]


def compare(what, got, want):
    if got == want:
        return 0
    print(f"FAIL: {what}")
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            print(f"  target {i + 1}:\n    expected {w}\n    got      {g}")
    return 1


def main():
    failures = 0
    verdicts.validate(TARGETS)
    failures += compare("fixed rows", verdicts.evaluate(ROWS), EXPECTED)

    # Nothing run: every target n/a ("row missing"), and no fastpath line.
    empty = verdicts.evaluate({})
    want = [(t, "row missing", "n/a") for t, _, _ in EXPECTED[:-1]]
    failures += compare("no rows", empty, want)

    got = [t for t in verdicts.evaluate(STOPPED_ROWS) if t[0] in {s[0] for s in STOPPED}]
    failures += compare("a run stopped at the time limit", got, STOPPED)

    # The bounds are data: the same rows against a stricter list of one target.
    strict = [{"check": "realloc_ratio", "mode": "double", "time": "total_s",
               "ref": "jemalloc", "at_most": 0.25}]
    failures += compare("a bound of its own", verdicts.evaluate(ROWS, strict),
                        [("realloc double: tide total ≤ 0.25 × jemalloc", "0.30x", "FAIL")])

    # One phase named: its ratio alone decides.
    one = [{"check": "kv_rss", "ref": "tide[thp:off]", "phase": "fill", "at_most": 1.02}]
    failures += compare("one phase", verdicts.evaluate(ROWS, one),
                        [("kv: tide RSS ≤ 1.02 × tide[thp:off]'s in fill",
                          "1.005x (fill: 1030 / 1025 MiB)", "PASS")])

    for bad in BAD_TARGETS:
        try:
            verdicts.validate([bad])
        except ValueError:
            continue
        print(f"FAIL: a bad target was accepted: {bad}")
        failures += 1

    print(f"{len(EXPECTED)} targets on fixed rows, {len(BAD_TARGETS)} bad targets: "
          + ("FAIL" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
