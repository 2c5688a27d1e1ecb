#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py - the driver behind `make bench` (python3, standard library only).

Runs the ebizzy clone and the microbenchmarks under glibc, jemalloc, tcmalloc, mimalloc
(LD_PRELOAD) and libtide once per tide configuration (TIDE_CONF), interleaving the
allocators round by round (each round starting one allocator later) so that a noisy
neighbour hurts all of them alike and none always runs first, and writes
the medians to RESULTS/{ebizzy,micro}.csv (raw runs in *.raw.csv), a markdown summary
RESULTS/latest.md and, when gnuplot is installed, RESULTS/ebizzy.png.

Every run reports which library's malloc it really called, so a preload that did not
take effect is reported instead of being measured as glibc under another name.

The work is done by the package beside this file, tidebench/: see its __init__.py.
"""

import os
import sys

from tidebench import allocators, cli, plan, report, verdicts
from tidebench.runner import Runner


def main():
    args = cli.parse_args(__doc__.split("\n\n")[0])
    notes = []
    variants = allocators.build_variants(args, notes)
    if not variants["main"]:
        sys.exit("run.py: no allocator left to run")
    work = plan.Plan(args, variants, notes)
    runner = Runner(args, work.total)
    res = work.run(runner, os.path.join(args.builddir, "bench"))

    written = report.write_files(args, res)
    targets = verdicts.evaluate(res.medians())
    if runner.retries:
        notes.append(f"{runner.retries} run(s) were retried because other processes used more "
                     f"than {args.max_load:.0%} of the CPUs")
    text, targets_md = report.latest_markdown(
        args, res, targets, notes + runner.provider_notes + runner.failures)
    with open(os.path.join(args.results, "latest.md"), "w") as f:
        f.write(text)
    written.append("latest.md")

    print("\n" + text)
    print(f"bench: wrote {', '.join(os.path.join(args.results, w) for w in written)}")
    if targets_md:
        print("\n" + targets_md)
    if runner.failures:
        print(f"bench: {len(runner.failures)} run(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
