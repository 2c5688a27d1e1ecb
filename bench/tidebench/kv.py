# SPDX-License-Identifier: MIT
"""bench/kv: a key-value store's life (fill, free, overwrite, idle, after: RSS,
AnonHugePages, fork time, ops/s and touch latency at the end of each phase) and its TLB
row (--mode=tlb: dependent reads over a large heap of small objects), every allocator
interleaved round by round; medians."""

import os
import statistics

from .micro import add_peer_ratios
from .runner import load_text, parse_key_values, round_order


class KvBench:
    def __init__(self, name, argv, quick_argv):
        self.name, self.argv, self.quick_argv = name, argv, quick_argv


# The life at its defaults (about 1 GiB live after the fill, 3 s idle) and the TLB row
# (1 GiB of 64-byte blocks); QUICK: a quarter of the bytes and half the idle.
KV_BENCHES = [
    KvBench("kv-life", [], ["-w", "25", "--idle-ms=1500"]),
    KvBench("kv-tlb", ["--mode=tlb"], ["-w", "25"]),
]
KV_PHASES = ("fill", "free", "overwrite", "idle", "after")
# Per phase, printed as PHASE_KEY; the first ones are always printed.
KV_PHASE_KEYS = ("ops", "s", "live_bytes", "blocks", "rss_kib", "anon_huge_kib", "lazyfree_kib",
                 "vmas", "minflt", "ops_per_s", "fork_ms", "fork_wait_ms", "touch_p50_us",
                 "touch_p99_us", "touch_p999_us", "touch_max_us")
KV_ALWAYS = 9  # KV_PHASE_KEYS[:KV_ALWAYS] are in every phase
TLB_KEYS = ("ns_per_read", "read_s", "reads", "chain", "objects", "object_bytes", "heap_bytes",
            "alloc_s", "alloc_minflt", "read_minflt", "rss_kib", "anon_huge_kib", "vmas",
            "book_kib")
TIDE_KEYS = ("thp", "purge", "decay_ms", "background")


def parse_life(kv):
    """{phase: {key: value}} from bench/kv's output; KeyError or ValueError if incomplete."""
    out = {}
    for ph in KV_PHASES:
        row = {k: float(kv[f"{ph}_{k}"]) for k in KV_PHASE_KEYS[:KV_ALWAYS]}
        row.update({k: float(kv[f"{ph}_{k}"]) for k in KV_PHASE_KEYS[KV_ALWAYS:]
                    if f"{ph}_{k}" in kv})
        out[ph] = row
    if kv["bad"] != "0":
        raise ValueError(f"{kv['bad']} block(s) lost their contents")
    return out


def parse_tlb(kv):
    return {k: float(kv[k]) for k in TLB_KEYS}


def policy_of(kv):
    return ",".join(f"{k}:{kv[f'tide_{k}']}" for k in TIDE_KEYS if f"tide_{k}" in kv)


def median_of(values):
    values = [x for x in values if x is not None]
    return statistics.median(values) if values else None


def run_kv(args, runner, benches, variants, bindir):
    """bench/kv's life and TLB row under each allocator, interleaved round by round.
    Returns (life_raw, life_rows: one per allocator and phase, tlb_raw, tlb_rows)."""
    life_raw, life_rows, tlb_raw, tlb_rows = [], [], [], []
    for b in benches:
        tlb = b.name == "kv-tlb"
        argv = ([os.path.join(bindir, "kv")] + b.argv + (b.quick_argv if args.quick else []))
        runs = {v.label: [] for v in variants}
        policy, book = {}, {}
        for rnd in range(1, args.runs + 1):
            for v in round_order(variants, rnd):
                out = runner.run_timed(argv, v, b.name, 600)
                kv = parse_key_values(out) if out is not None else {}
                res = None
                if out is not None:
                    try:
                        res = parse_tlb(kv) if tlb else parse_life(kv)
                    except (KeyError, ValueError) as e:
                        runner.fail(b.name, v, f"bad output ({e})")
                if res:
                    runs[v.label].append((res, runner.other_load))
                    runner.check_provider(v, kv.get("allocator"))
                    policy[v.label], book[v.label] = policy_of(kv), kv.get("book_kib")
                    common = {"allocator": v.label, "run": rnd, "other_load": runner.other_load,
                              "provider": kv.get("allocator", "")}
                    if tlb:
                        tlb_raw.append(dict(res, **common))
                    else:
                        life_raw += [dict(res[ph], phase=ph, **common) for ph in KV_PHASES]
                runner.progress(f"{b.name:<23} round {rnd}/{args.runs} {v.label:<28} "
                                f"{shown(res, tlb)}{load_text(runner.other_load)}")
        for v in variants:
            rs = runs[v.label]
            common = {"allocator": v.label, "family": v.family, "env": v.env_text(),
                      "runs": len(rs), "policy": policy.get(v.label, ""),
                      "other_load": median_of(load for _, load in rs)}
            if tlb:
                tlb_rows.append(dict(common, **{k: median_of(r.get(k) for r, _ in rs)
                                               for k in TLB_KEYS}))
                continue
            for ph in KV_PHASES:
                row = dict(common, phase=ph, book_kib=book.get(v.label))
                row.update({k: median_of(r[ph].get(k) for r, _ in rs) for k in KV_PHASE_KEYS})
                life_rows.append(row)
    if tlb_rows:
        for r in tlb_rows:
            r["bench"] = "kv-tlb"
        add_peer_ratios(tlb_rows, "bench", "ns_per_read", variants)
    return life_raw, life_rows, tlb_raw, tlb_rows


def shown(res, tlb):
    if not res:
        return "failed"
    if tlb:
        return (f"{res['ns_per_read']:7.1f} ns/read, AnonHugePages "
                f"{res['anon_huge_kib'] / 1024:.0f} MiB")
    fill, idle = res["fill"], res["idle"]
    fork = f", fork {fill['fork_ms']:.2f} ms" if fill.get("fork_ms") is not None else ""
    return (f"fill RSS {fill['rss_kib'] / 1024:6.0f} MiB (huge {fill['anon_huge_kib'] / 1024:.0f})"
            f"{fork}, after idle {idle['rss_kib'] / 1024:.0f} MiB")
