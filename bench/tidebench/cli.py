# SPDX-License-Identifier: MIT
"""The command line of bench/run.py (make bench passes its variables as these options)."""

import argparse
import os

from .allocators import FAMILIES
from .ebizzy import EBIZZY_CONFIGS
from .kv import KV_BENCHES
from .micro import MICRO_BENCHES, SHAPE_BENCHES
from .realloc import REALLOC_MODES
from .runner import RETRIES, RETRY_PAUSE_S


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--builddir", required=True, help="top build directory")
    p.add_argument("--srcdir", help="top source directory (default: builddir)")
    p.add_argument("--results", help="output directory (default: BUILDDIR/bench/results)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 run each; ebizzy only s5M-t2, realloc and "
                        "purge-every-free; microbenchmarks at 25%% of their work; realloc "
                        "growth to 256 MiB (pair: 64 MiB); idle with a 256 MiB burst and "
                        "1.5 s idle; kv at 256 MiB with 1.5 s idle; tide configurations "
                        "'default', 'purge:none' and 'purge:free' only of the [all] list "
                        "(unless --tide-confs)")
    p.add_argument("--only", default="",
                   help="comma list of: ebizzy, micro, shapes, realloc, idle, kv, or "
                        "configuration/benchmark names")
    p.add_argument("--allocs", default="", help="comma list of: " + ", ".join(FAMILIES))
    p.add_argument("--runs", type=int, help="runs per allocator and configuration (default 5)")
    p.add_argument("--seconds", type=int, help="ebizzy -S (default 1)")
    p.add_argument("--max-load", type=int, default=0, metavar="PERCENT",
                   help=f"retry a timed run (up to {RETRIES} times, {RETRY_PAUSE_S} s apart) when "
                        "other processes used more than PERCENT%% of the CPUs meanwhile")
    p.add_argument("--tide-confs", help="space-separated TIDE_CONF values ('default' = unset) "
                                        "replacing the [all] list of bench/tide-confs")
    p.add_argument("--extra-tide", action="append", default=[], metavar="LABEL=LIBTIDE.SO",
                   help="also measure another build of libtide (its default configuration) "
                        "under LABEL, beside the others in every table: a before/after "
                        "comparison in one run (repeatable)")
    p.add_argument("--extra-peer", action="append", default=[], metavar="LABEL=LIB.SO",
                   help="also measure another allocator library (preloaded) under LABEL, "
                        "beside the peers in every table, e.g. a peer that is not packaged "
                        "(repeatable)")
    args = p.parse_args()
    labels = set(FAMILIES)
    for option in ("extra_tide", "extra_peer"):
        extra = []
        for x in getattr(args, option):
            name = "--" + option.replace("_", "-")
            label, sep, lib = x.partition("=")
            what = "libtide.so" if option == "extra_tide" else "shared library"
            if not sep or not label or not lib:
                p.error(f"{name} '{x}': want LABEL=PATH to an existing {what}")
            if not os.path.isfile(lib):
                p.error(f"{name} '{x}': {lib} does not exist")
            if label in labels or option == "extra_peer" and label.startswith("tide"):
                p.error(f"{name} '{x}': the label {label} is taken"
                        + (" (tide's rows start with 'tide')" if label.startswith("tide")
                           else ""))
            labels.add(label)
            extra.append((label, os.path.abspath(lib)))
        setattr(args, option, extra)
    args.srcdir = args.srcdir or args.builddir
    args.results = args.results or os.path.join(args.builddir, "bench", "results")
    args.runs = args.runs or (1 if args.quick else 5)
    args.max_load /= 100
    args.seconds = args.seconds or 1
    if args.runs < 1 or args.seconds < 1:
        p.error("--runs and --seconds must be at least 1")
    args.only = [x for x in args.only.replace(" ", ",").split(",") if x]
    known = (["ebizzy", "micro", "shapes", "fastpath", "realloc", "idle", "kv"]
             + [c.name for c in EBIZZY_CONFIGS] + [b.name for b in MICRO_BENCHES + SHAPE_BENCHES]
             + ["realloc-" + m.name for m in REALLOC_MODES] + [b.name for b in KV_BENCHES])
    for x in args.only:
        if x not in known:
            p.error(f"unknown --only item '{x}' (known: {', '.join(known)})")
    args.allocs = [x for x in args.allocs.replace(" ", ",").split(",") if x]
    for a in args.allocs:
        if a not in FAMILIES:
            p.error(f"unknown allocator '{a}' (known: {', '.join(FAMILIES)})")
    return args
