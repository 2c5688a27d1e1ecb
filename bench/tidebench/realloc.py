# SPDX-License-Identifier: MIT
"""bench/realloc: large-block growth in three modes, every allocator interleaved round
by round; medians and ratios to the reference allocators, bounded where a run stopped
at the time limit."""

import os
import statistics

from .runner import load_text, parse_key_values, round_order


class ReallocMode:
    def __init__(self, name, argv, quick_argv):
        self.name, self.argv, self.quick_argv = name, argv, quick_argv


# One block 1 MiB -> 1 GiB, doubling or in 64 KiB steps; and two blocks in each other's
# way, grown alternately to 256 MiB each (the move path and its copy fallback).
REALLOC_MODES = [
    ReallocMode("double", ["--mode=double"], ["--max=256m"]),
    ReallocMode("step", ["--mode=step", "--step=65536"], ["--max=256m"]),
    ReallocMode("pair", ["--mode=pair", "--step=65536"], ["--max=64m"]),
]
# An allocator that copies spends time in the square of the size (mimalloc takes over a
# minute for the 64 KiB steps to 1 GiB): its run stops growing after this many seconds,
# and its times become lower bounds (marked >=), which still decide "tide <= x * peer".
REALLOC_TIME_LIMIT_S = 2
REALLOC_REFS = ("glibc", "jemalloc", "mimalloc")  # the columns of ratios

REALLOC_KEYS = ("total_s", "realloc_s", "realloc_calls", "free_s", "peak_rss_kib",
                "vmas_start", "vmas_peak", "vmas_after_free", "remap_moves", "remap_heals",
                "remap_copies", "remap_in_place", "reached_bytes")


def run_realloc(args, runner, modes, variants, bindir):
    """bench/realloc per mode, the allocators interleaved round by round; medians."""
    raw, summary = [], []
    for m in modes:
        argv = ([os.path.join(bindir, "realloc")] + m.argv + (m.quick_argv if args.quick else [])
                + [f"--time-limit={REALLOC_TIME_LIMIT_S}"])
        runs = {v.label: [] for v in variants}
        for rnd in range(1, args.runs + 1):
            for v in round_order(variants, rnd):
                out = runner.run_timed(argv, v, f"realloc {m.name}", 300)
                kv = parse_key_values(out) if out is not None else {}
                res = None
                if out is not None:
                    try:
                        res = {k: float(kv[k]) for k in REALLOC_KEYS if k in kv}
                        res["complete"] = kv["complete"] == "1"
                        res["vmas_scope"] = kv["vmas_scope"]
                        missing = [k for k in REALLOC_KEYS[:8] if k not in res]
                        if missing:
                            raise KeyError(missing[0])
                    except (KeyError, ValueError) as e:
                        runner.fail(f"realloc {m.name}", v, f"bad output ({e})")
                        res = None
                if res:
                    res["other_load"] = runner.other_load
                    runs[v.label].append(res)
                    runner.check_provider(v, kv.get("allocator"))
                    raw.append(dict(res, mode=m.name, allocator=v.label, run=rnd,
                                    provider=kv.get("allocator", "")))
                shown = "failed"
                if res:
                    shown = (f"{res['total_s']:8.3f} s, {res['realloc_s']:8.4f} s in realloc"
                             + ("" if res["complete"] else
                                f" (stopped at {res['reached_bytes'] / 2**20:.0f} MiB)"))
                runner.progress(f"realloc {m.name:<15} round {rnd}/{args.runs} {v.label:<28} "
                                f"{shown}{load_text(runner.other_load)}")
        for v in variants:
            rs = runs[v.label]
            row = {"mode": m.name, "allocator": v.label, "family": v.family,
                   "env": v.env_text(), "runs": len(rs),
                   "complete": bool(rs) and all(r["complete"] for r in rs),
                   "vmas_scope": rs[0]["vmas_scope"] if rs else ""}
            for k in REALLOC_KEYS + ("other_load",):
                vals = [r[k] for r in rs if r.get(k) is not None]
                row[k] = statistics.median(vals) if vals else None
            if rs and not row["complete"]:
                row["reached_bytes"] = min(r["reached_bytes"] for r in rs)
            summary.append(row)
        for r in summary:
            if r["mode"] != m.name:
                continue
            for ref in REALLOC_REFS:
                ref_row = next((x for x in summary if x["mode"] == m.name and
                                x["allocator"] == ref), None)
                for key in ("total_s", "realloc_s"):
                    r[f"ratio_{key}_{ref}"] = bounded_ratio(r, ref_row, key)
    return raw, summary


def bounded_ratio(row, ref, key):
    """(row[key] / ref[key], bound) where bound is "" (exact), "<=" (the reference stopped
    at the time limit: its time is a lower bound, so the ratio is an upper bound) or ">="
    (the row stopped); None when a figure is missing or both stopped."""
    if not row or not ref or row.get(key) is None or not ref.get(key):
        return None
    if not row["complete"] and not ref["complete"]:
        return None
    bound = "" if ref["complete"] and row["complete"] else "<=" if row["complete"] else ">="
    return (row[key] / ref[key], bound)
