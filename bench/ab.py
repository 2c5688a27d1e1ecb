#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ab.py - two builds or two settings of tide, side by side, on a machine whose speed moves.

make bench measures every allocator a few times and compares medians; that is its job, but
where the question is whether one change costs 2 or 3 % it cannot tell: on the 2-CPU
machines tide is measured on, a loop of additions runs anywhere from 1x to 2.5x its
fastest time from one run to the next (other machines' work on the same cores), far more
than the difference asked about.  This script answers that question only.  It runs short
runs of each row, alternately under A and B (A B B A A B ...: neither always first), many
times, and reports per row:

  med    the ratio of B's median time to A's;
  pairs  the median of the ratios of each adjacent A, B pair (a slow stretch of the
         machine hurts both runs of a pair);
  95%    where that median lies with 95 % confidence (a bootstrap over the pairs, 2000
         resamples): a row whose interval holds 1.000 has shown no difference;
  fast   the ratio of the fastest tenths' (10th percentiles): the noise only ever slows a
         run down, so the fast runs are the ones closest to what the code costs;
  cpu    the pairs' median ratio of the run's CPU time (user + system, getrusage): other
         work that takes the CPUs away lengthens a run's time but not its CPU time, and
         spinning or faulting more lengthens both;
  faults the ratio of the median minor page faults (a change in the heap's layout shows
         there first).

cpu and faults are of the whole process, start-up included; for the ebizzy rows, whose
runs last a fixed time, they are per record.

Ratios are B / A in time (ebizzy: in records per second, inverted, so that above 1 is
slower for every row).  Two builds: --a LABEL=LIBTIDE.SO --b LABEL=LIBTIDE.SO; two
settings of one build: the same library with ":TIDE_CONF" after it (--b new=lib.so:prof:on).
Another allocator's setting is an environment variable instead, "NAME=VALUE" after the
colon (what a peer's profiler costs it: --a off=libjemalloc.so.2 --b
on=libjemalloc.so.2:MALLOC_CONF=prof:true).

--pin CPU runs the single-threaded rows (pairs, powers, mixed -t 1) on that CPU alone: left
to the scheduler, one run in several of bench/pairs moved between the CPUs and took 1.3-1.4x
the time of the others, pinned none did (2026-12-04).

Usage: bench/ab.py --builddir . --a base=/tmp/base/src/.libs/libtide.so --b new=src/.libs/libtide.so
                   [--rows pairs-batch,pairs-lifo,...] [--runs 40] [--work PERCENT] [--pin CPU]
"""

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys

# The rows whose program runs one thread of its own (--pin).
SINGLE_THREADED = {"pairs-batch", "pairs-lifo", "pairs-burst", "mixed-1t", "powers"}

# name: (argv after the program's path, what it prints, higher is better)
ROWS = {
    "pairs-batch": (["pairs", "-w", "{w}", "batch"], "batch_s", False),
    "pairs-lifo": (["pairs", "-w", "{w}", "lifo"], "lifo_s", False),
    "pairs-burst": (["pairs", "-w", "{w}", "burst"], "burst_s", False),
    "prodcons": (["prodcons", "-w", "{w}"], "elapsed_s", False),
    "prodcons-pairs": (["prodcons", "-w", "{w}", "-p", "pairs"], "elapsed_s", False),
    "mixed-1t": (["mixed", "-w", "{w}", "-t", "1"], "elapsed_s", False),
    "mixed-2t": (["mixed", "-w", "{w}", "-t", "2"], "elapsed_s", False),
    "ebizzy-s5M-t2": (["ebizzy", "-S", "1", "--json", "-s", "5242880", "-t", "2"], "records_per_s", True),
    "ebizzy-defaults": (["ebizzy", "-S", "1", "--json"], "records_per_s", True),
    "ebizzy-realloc": (["ebizzy", "-S", "1", "--json", "--realloc=65536", "-s", "5242880", "-t", "2"],
                       "records_per_s", True),
    # issue 13's shapes, as make bench runs them (at their default work: --work is not passed)
    "churn": (["churn", "-t", "2"], "elapsed_s", False),
    "churn-8t": (["churn", "-t", "8"], "elapsed_s", False),
    "churn-16t": (["churn", "-t", "16"], "elapsed_s", False),
    "larson": (["larson", "-t", "2"], "elapsed_s", False),
    "larson-sized": (["larson", "-t", "2", "--sized"], "elapsed_s", False),
    "larson-8t": (["larson", "-t", "8"], "elapsed_s", False),
    "powers": (["powers", "-t", "1"], "elapsed_s", False),
}
DEFAULT_ROWS = "pairs-batch,pairs-lifo,prodcons,mixed-1t,mixed-2t,ebizzy-s5M-t2,ebizzy-defaults"


VARIANT_FORM = "LABEL=LIBRARY.SO[:TIDE_CONF or :NAME=VALUE]"


def variant(text):
    label, _, rest = text.partition("=")
    lib, _, conf = rest.partition(":")
    if not label or not lib:
        raise argparse.ArgumentTypeError(f"'{text}': want {VARIANT_FORM}")
    return label, os.path.abspath(lib), conf


def measure(bindir, row, work, v, pin=None):
    """The row's figure under V, with the run's CPU seconds and minor faults."""
    argv, key, _ = ROWS[row]
    argv = [os.path.join(bindir, argv[0])] + [a.replace("{w}", str(work)) for a in argv[1:]]
    if pin is not None and row in SINGLE_THREADED:
        argv = ["taskset", "-c", str(pin)] + argv
    env = dict(os.environ, LD_PRELOAD=v[1])
    env.pop("TIDE_CONF", None)
    if "=" in v[2]:
        name, _, value = v[2].partition("=")
        env[name] = value
    elif v[2]:
        env["TIDE_CONF"] = v[2]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"ab.py: {row} under {v[0]} failed ({out.returncode}): {out.stderr.strip()[:300]}")
    if out.stdout.lstrip().startswith("{"):
        res = json.loads(out.stdout)
        value, provider = res[key], res.get("allocator")
        per = res.get("records") or value  # the ebizzy rows: per record
    else:
        words = out.stdout.split()
        value = float(words[words.index(key) + 1])
        provider = words[words.index("allocator") + 1] if "allocator" in words else None
        per = 1
    if provider and os.path.realpath(provider) != os.path.realpath(v[1]):
        sys.exit(f"ab.py: {row} under {v[0]} ran {provider}, not {v[1]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return value, cpu / per, (after.ru_minflt - before.ru_minflt) / per


def tenth(xs):
    s = sorted(xs)
    return s[(len(s) - 1) // 10]


def median_interval(xs, resamples=2000, seed=1):
    """A 95 % bootstrap interval of the median of XS (a fixed seed: the same runs give the
    same interval)."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(resamples))
    return meds[int(resamples * 0.025)], meds[int(resamples * 0.975) - 1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builddir", required=True)
    p.add_argument("--a", type=variant, required=True, help=VARIANT_FORM)
    p.add_argument("--b", type=variant, required=True, help=VARIANT_FORM)
    p.add_argument("--rows", default=DEFAULT_ROWS, help=f"comma list of: {', '.join(ROWS)}")
    p.add_argument("--runs", type=int, default=40, help="runs of each row under each (default 40)")
    p.add_argument("--work", type=int, default=20,
                   help="the microbenchmarks' -w PERCENT (default 20: runs of 20-200 ms)")
    p.add_argument("--pin", type=int, metavar="CPU",
                   help="run the single-threaded rows on this CPU alone (taskset)")
    args = p.parse_args()
    bindir = os.path.join(args.builddir, "bench")
    rows = args.rows.split(",")
    for r in rows:
        if r not in ROWS:
            sys.exit(f"ab.py: unknown row '{r}' (rows: {', '.join(ROWS)})")

    print(f"A = {args.a[0]} ({args.a[1]}{' ' + args.a[2] if args.a[2] else ''}), "
          f"B = {args.b[0]} ({args.b[1]}{' ' + args.b[2] if args.b[2] else ''}); "
          f"{args.runs} runs of each, alternating; ratios B / A in time")
    if args.pin is not None:
        print(f"single-threaded rows pinned to CPU {args.pin}")
    print(f"| row | A median | B median | med | pairs | pairs 95% | fast | cpu | faults |")
    print(f"|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        higher_better = ROWS[row][2]
        a, b, ca, cb, fa, fb = [], [], [], [], [], []
        for i in range(args.runs):
            first, second = (args.a, args.b) if i % 2 == 0 else (args.b, args.a)
            for v in (first, second):
                x, cpu, faults = measure(bindir, row, args.work, v, args.pin)
                (a if v is args.a else b).append(x)
                (ca if v is args.a else cb).append(cpu)
                (fa if v is args.a else fb).append(faults)
        if higher_better:  # as times: the inverse
            a, b = [1 / x for x in a], [1 / x for x in b]
        med = statistics.median(b) / statistics.median(a)
        ratios = [y / x for x, y in zip(a, b)]
        pairs = statistics.median(ratios)
        lo, hi = median_interval(ratios)
        fast = tenth(b) / tenth(a)
        cpu = statistics.median(y / x for x, y in zip(ca, cb) if x > 0)
        faults = statistics.median(fb) / max(statistics.median(fa), 1e-12)
        unit = "s/record" if higher_better else "s"
        print(f"| {row} | {statistics.median(a):.4g} {unit} | {statistics.median(b):.4g} {unit} "
              f"| {med:.3f} | {pairs:.3f} | {lo:.3f}-{hi:.3f} | {fast:.3f} | {cpu:.3f} | {faults:.3f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
