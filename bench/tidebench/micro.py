# SPDX-License-Identifier: MIT
"""The microbenchmarks (bench/pairs, prodcons, mixed: times of fixed work and peak RSS,
interleaved round by round), the workload shapes (bench/churn, larson, powers: the same,
and the context switches of each run) and bench/fastpath under callgrind (instructions
per malloc+free pair); each figure also as a ratio to the best peer."""

import os
import re
import shutil
import statistics
import tempfile

from .runner import EXTRA, load_text, parse_key_values, round_order


class MicroBench:
    def __init__(self, name, argv, key, group="micro"):
        self.name, self.argv, self.key, self.group = name, argv, key, group


MICRO_BENCHES = [
    MicroBench("pairs-batch", ["pairs", "batch"], "batch_s"),
    MicroBench("pairs-lifo", ["pairs", "lifo"], "lifo_s"),
    # One class at a time, as glibc's bench-malloc-simple: each pop follows the last one's.
    MicroBench("pairs-burst", ["pairs", "burst"], "burst_s"),
    MicroBench("prodcons", ["prodcons"], "elapsed_s"),
    # The same pinned: the scheduler's choice, which "prodcons" leaves to it, made fixed.
    MicroBench("prodcons-pairs", ["prodcons", "-p", "pairs"], "elapsed_s"),
    MicroBench("prodcons-split", ["prodcons", "-p", "split"], "elapsed_s"),
    MicroBench("mixed-1t", ["mixed", "-t", "1"], "elapsed_s"),
    MicroBench("mixed-2t", ["mixed", "-t", "2"], "elapsed_s"),
]
# The shapes of work where tide trailed its peers (issue 13), each program written for
# bench/: churn with a swinging working set and some frees by another thread, larson's
# remote frees (with and without sized free), one thread's powers of two; churn and
# larson also with 8 and 16 threads on the machine's CPUs (the same total work).
SHAPE_BENCHES = [
    MicroBench("churn", ["churn", "-t", "2"], "elapsed_s", "shapes"),
    MicroBench("churn-8t", ["churn", "-t", "8"], "elapsed_s", "shapes"),
    MicroBench("churn-16t", ["churn", "-t", "16"], "elapsed_s", "shapes"),
    MicroBench("larson", ["larson", "-t", "2"], "elapsed_s", "shapes"),
    MicroBench("larson-sized", ["larson", "-t", "2", "--sized"], "elapsed_s", "shapes"),
    MicroBench("larson-8t", ["larson", "-t", "8"], "elapsed_s", "shapes"),
    MicroBench("larson-16t", ["larson", "-t", "16"], "elapsed_s", "shapes"),
    MicroBench("powers", ["powers", "-t", "1"], "elapsed_s", "shapes"),
]
FASTPATH_K = (100000, 200000)


def median_or_none(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


def run_micro(args, runner, benches, variants, bindir):
    raw, summary = [], []
    work = ["-w", "25"] if args.quick else []
    for b in benches:
        argv = [os.path.join(bindir, b.argv[0])] + work + b.argv[1:]
        runs = {v.label: [] for v in variants}
        for rnd in range(1, args.runs + 1):
            for v in round_order(variants, rnd):
                out = runner.run_timed(argv, v, b.name, 600)
                kv = parse_key_values(out) if out is not None else {}
                t = float(kv[b.key]) if b.key in kv else None
                if t is not None:
                    rss = int(kv["peak_rss_kib"])
                    csw = int(kv["csw"]) if "csw" in kv else None
                    runs[v.label].append((t, rss, runner.other_load, csw))
                    runner.check_provider(v, kv.get("allocator"))
                    raw.append({"bench": b.name, "allocator": v.label, "run": rnd,
                                "time_s": t, "peak_rss_kib": rss, "csw": csw,
                                "other_load": runner.other_load,
                                "provider": kv.get("allocator", ""),
                                "free_fn": kv.get("free_fn", "")})
                elif out is not None:
                    runner.fail(b.name, v, f"no '{b.key}' in the output")
                shown = f"{t:9.3f} s" if t is not None else "failed"
                runner.progress(f"{b.name:<23} round {rnd}/{args.runs} {v.label:<28} {shown}"
                                f"{load_text(runner.other_load)}")
        for v in variants:
            rs = runs[v.label]
            t, rss, load, csw = (median_or_none(r[i] for r in rs) for i in range(4))
            summary.append({"bench": b.name, "allocator": v.label, "env": v.env_text(),
                            "runs": len(rs), "time_s": t, "peak_rss_kib": rss,
                            "other_load": load, "csw": csw})
    add_peer_ratios(summary, "bench", "time_s", variants)
    return raw, summary


def run_fastpath(runner, variants, bindir):
    """Instructions per malloc+free pair: callgrind totals at two K, differenced."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("note: valgrind is not installed: no instruction counts")
        return []
    rows = []
    for v in variants:
        totals = []
        for k in FASTPATH_K:
            with tempfile.TemporaryDirectory(prefix="tide-bench-cg-") as tmp:
                out_file = os.path.join(tmp, "callgrind.out")
                argv = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out_file}",
                        os.path.join(bindir, "fastpath"), str(k)]
                ok = runner.run(argv, v, f"fastpath {k} under callgrind", 600) is not None
                total = read_callgrind_total(out_file) if ok else None
                totals.append(total)
                runner.progress(f"callgrind fastpath K={k:<9} {v.label:<28} "
                                f"{total if total is not None else 'failed'} Ir")
        ir = None
        if None not in totals:
            ir = (totals[1] - totals[0]) / (FASTPATH_K[1] - FASTPATH_K[0])
        rows.append({"bench": "fastpath", "allocator": v.label, "env": v.env_text(),
                     "runs": 1, "ir_per_pair": ir})
    add_peer_ratios(rows, "bench", "ir_per_pair", variants)
    return rows


def read_callgrind_total(path):
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"(summary|totals):\s+(\d+)", line)
                if m:
                    return int(m.group(2))
    except OSError:
        pass
    return None


def add_peer_ratios(rows, group_key, value_key, variants):
    """ratio = value / the best (lowest) value among the peers (glibc, jemalloc, ...);
    an extra peer (--extra-peer) has a ratio but is not one of them."""
    peers = {v.label for v in variants if v.family not in ("tide", EXTRA)}
    for group in {r[group_key] for r in rows}:
        best = [r[value_key] for r in rows if r[group_key] == group and
                r["allocator"] in peers and r.get(value_key) is not None]
        for r in rows:
            if r[group_key] == group:
                r["ratio_best_peer"] = (r[value_key] / min(best)
                                        if best and r.get(value_key) is not None else None)
