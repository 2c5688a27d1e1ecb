# SPDX-License-Identifier: MIT
"""The ebizzy clone (bench/ebizzy) in each of its configurations, every allocator
interleaved round by round; medians, and madvise calls from tide's counters or from one
more, untimed run under strace."""

import json
import os
import shutil
import statistics
import tempfile

from .runner import Variant, load_text, round_order

S5M_T2 = ["-s", "5242880", "-t", "2"]


class EbizzyConfig:
    def __init__(self, name, args, quick, purge_row=False, small=False):
        self.name, self.args, self.quick, self.purge_row = name, args, quick, purge_row
        # Chunks of 512 KiB: reused before any decay and below THP's 2 MiB, so tide runs
        # them under the short [ebizzy-small-chunks] list of bench/tide-confs.
        self.small = small


EBIZZY_CONFIGS = [
    EbizzyConfig("s5M-t2", S5M_T2, quick=True),
    EbizzyConfig("defaults", [], quick=False, small=True),
    EbizzyConfig("R", ["-R"], quick=False, small=True),
    EbizzyConfig("random", ["--random=1"], quick=False, small=True),
    EbizzyConfig("realloc", ["--realloc=65536"] + S5M_T2, quick=True),
    EbizzyConfig("purge-every-free", S5M_T2, quick=True, purge_row=True),
    # Above 8 MiB, default jemalloc purges a freed block at once.
    EbizzyConfig("s16M-t2", ["-s", "16777216", "-t", "2"], quick=False),
]


def tide_madvise_calls(tide):
    if not tide:
        return None
    keys = ("madvise_dontneed_calls", "madvise_free_calls", "madvise_hugepage_calls",
            "process_madvise_calls")
    return sum(tide.get(k, 0) for k in keys)


def run_ebizzy(args, runner, configs, bindir):
    ebizzy = os.path.join(bindir, "ebizzy")
    raw, summary = [], []
    strace = shutil.which("strace")
    for cfg, variants in configs:
        argv = [ebizzy] + cfg.args + ["-S", str(args.seconds), "--json", "--fork"]
        runs = {v.label: [] for v in variants}
        for rnd in range(1, args.runs + 1):
            for v in round_order(variants, rnd):
                out = runner.run_timed(argv, v, f"ebizzy {cfg.name}", args.seconds + 120)
                res = None
                if out is not None:
                    try:
                        res = json.loads(out)
                    except ValueError:
                        runner.fail(f"ebizzy {cfg.name}", v, "output is not JSON")
                if res:
                    # Robust to a busy machine: it does not count the time others took.
                    cpu = res["user_s"] + res["sys_s"]
                    res["records_per_cpu_s"] = res["records"] / cpu if cpu > 0 else None
                    runs[v.label].append(res)
                    runner.check_provider(v, res.get("allocator"))
                    raw.append({"config": cfg.name, "allocator": v.label, "env": v.env_text(),
                                "run": rnd, "records": res["records"],
                                "records_per_s": res["records_per_s"],
                                "records_per_cpu_s": res["records_per_cpu_s"],
                                "real_s": res["real_s"],
                                "user_s": res["user_s"], "sys_s": res["sys_s"],
                                "peak_rss_kib": res["peak_rss_kib"], "vmas": res["vmas"],
                                "fork_ms": res["fork_ms"],
                                "tide_madvise_calls": tide_madvise_calls(res.get("tide")),
                                "other_load": runner.other_load,
                                "provider": res["allocator"]})
                    res["other_load"] = runner.other_load
                shown = f"{res['records_per_s']:>14,.0f} records/s" if res else "failed"
                runner.progress(f"ebizzy {cfg.name:<16} round {rnd}/{args.runs} "
                                f"{v.label:<28} {shown}{load_text(runner.other_load)}")

        for v in variants:
            rs = runs[v.label]
            row = {"config": cfg.name, "args": " ".join(cfg.args), "allocator": v.label,
                   "env": v.env_text(), "runs": len(rs)}
            for key in ("records_per_s", "records_per_cpu_s", "user_s", "sys_s", "peak_rss_kib",
                        "vmas", "fork_ms", "other_load"):
                vals = [r[key] for r in rs if r.get(key) is not None]
                row[key] = statistics.median(vals) if vals else None
            row["provider"] = rs[0]["allocator"] if rs else ""
            # madvise calls: tide counts its own; everyone else is counted by strace.
            counted = [(tide_madvise_calls(r.get("tide")), r["records"]) for r in rs
                       if r.get("tide")]
            if counted:
                row["madvise_calls"] = statistics.median(c for c, _ in counted)
                row["madvise_per_krec"] = statistics.median(1000 * c / max(n, 1)
                                                            for c, n in counted)
                row["madvise_source"] = "tide counters"
            elif strace and rs:
                row.update(strace_madvise(runner, strace, ebizzy, cfg, v))
            summary.append(row)
        ref = next((r["records_per_s"] for r in summary
                    if r["config"] == cfg.name and r["allocator"] == "glibc"), None)
        for r in summary:
            if r["config"] == cfg.name:
                r["ratio_glibc"] = (r["records_per_s"] / ref
                                    if ref and r["records_per_s"] is not None else None)
    return raw, summary


def strace_madvise(runner, strace, ebizzy, cfg, variant):
    """Count madvise calls in a separate, untimed 1-second run under strace."""
    with tempfile.NamedTemporaryFile(prefix="tide-bench-strace-", suffix=".txt") as tmp:
        # -E hands the allocator to the traced program only, not to strace itself.
        argv = [strace, "-f", "-c", "-o", tmp.name, "-e", "trace=madvise,process_madvise"]
        for k, v in sorted(dict(variant.env, **({"LD_PRELOAD": variant.lib}
                                               if variant.lib else {})).items()):
            argv += ["-E", f"{k}={v}"]
        argv += ["--", ebizzy] + cfg.args + ["-S", "1", "--json"]
        plain = Variant(variant.label, variant.family, None)  # strace runs without preload
        out = runner.run(argv, plain, f"strace ebizzy {cfg.name}", 180)
        calls = None
        if out is not None:
            calls = 0
            with open(tmp.name) as f:
                for line in f:
                    fields = line.split()
                    if fields and fields[-1] in ("madvise", "process_madvise"):
                        calls += int(fields[3])
        records = json.loads(out)["records"] if out else 0
        shown = f"{calls} madvise calls" if calls is not None else "failed"
        runner.progress(f"strace {cfg.name:<16} {variant.label:<36} {shown}")
        if calls is None:
            return {}
        return {"madvise_calls": calls, "madvise_per_krec": 1000 * calls / max(records, 1),
                "madvise_source": "strace, 1 s run"}
