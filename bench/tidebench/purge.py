# SPDX-License-Identifier: MIT
"""Purging every free: how each peer is told to (the ebizzy purge-every-free row, run by
ebizzy.py under these settings), and bench/purge_floor, what each advice costs the
kernel with no allocator at all."""

import os
import statistics

from .runner import Variant, load_text, parse_key_values

# How each peer is told to return freed memory to the kernel at once (the settings of
# the published "purge every free" figures).  mimalloc 2.0 calls it decommit_delay,
# 2.1 and later purge_delay: both are set.
PURGE_EVERY_FREE = {
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"},
    "tcmalloc": {"TCMALLOC_AGGRESSIVE_DECOMMIT": "true"},
    "mimalloc": {"MIMALLOC_DECOMMIT_DELAY": "0", "MIMALLOC_PURGE_DELAY": "0"},
}


# bench/purge_floor: the kernel's cost of purging every free with no allocator at all,
# beside the purge-every-free ebizzy rows (same chunk, 2 threads, same seconds).
FLOOR_SETTINGS = [("none", "off"), ("dontneed", "off"), ("free", "off"),
                  ("none", "on"), ("dontneed", "on"), ("free", "on")]


def run_floor(args, runner, bindir):
    """bench/purge_floor in each setting, interleaved round by round; medians."""
    variant = Variant("no allocator", "floor", None)
    runs = {k: [] for k in FLOOR_SETTINGS}
    for rnd in range(1, args.runs + 1):
        for advice, thp in FLOOR_SETTINGS:
            argv = [os.path.join(bindir, "purge_floor"), f"--advice={advice}", f"--thp={thp}",
                    "--threads=2", f"--seconds={args.seconds}"]
            out = runner.run_timed(argv, variant, "purge_floor", 60)
            kv = parse_key_values(out) if out is not None else {}
            rate = float(kv["records_per_s"]) if "records_per_s" in kv else None
            if rate is not None:
                runs[(advice, thp)].append(rate)
            runner.progress(f"purge_floor {'':<11} round {rnd}/{args.runs} "
                            f"{f'{advice}, thp:{thp}':<28} "
                            f"{f'{rate:,.0f} records/s' if rate else 'failed'}"
                            f"{load_text(runner.other_load)}")
    return [{"advice": a, "thp": t, "runs": len(runs[(a, t)]),
             "records_per_s": statistics.median(runs[(a, t)]) if runs[(a, t)] else None}
            for a, t in FLOOR_SETTINGS]
