# SPDX-License-Identifier: MIT
"""bench/idle: a burst freed, then an idle period; RSS during and after it and the time
to touch the burst again, every allocator interleaved round by round; medians."""

import os
import statistics

from .runner import load_text, parse_key_values, round_order

# bench/idle: 1 GiB burst freed, then an idle period of 2.5 x tide's default decay_ms, in a
# program with a second thread (tide's default background:auto starts its purger thread
# only in a multithreaded program), and tide's default once more single-threaded.
IDLE_ARGS = []
IDLE_THREADS_ARGS = ["--threads=2"]
IDLE_QUICK_ARGS = ["--idle-ms=1500", "--burst=256m"]
IDLE_COLUMN_MS = (0, 500, 1000, 1500, 2000, 2500)  # the samples shown in the table


IDLE_KEYS = ("burst_s", "free_s", "retouch_s", "rss_peak_kib", "nolazy_peak_kib",
             "rss_idle_kib", "lazyfree_idle_kib", "nolazy_idle_kib", "peak_rss_kib")


def parse_series(text):
    """"ms:rss:nolazy,..." -> {ms: (rss_kib, nolazy_kib)}"""
    out = {}
    for item in text.split(","):
        ms, rss, nolazy = (int(x) for x in item.split(":"))
        out[ms] = (rss, nolazy)
    return out


def run_idle(args, runner, variants, bindir):
    """bench/idle under each allocator, interleaved round by round; medians."""
    raw, summary = [], []
    argv = [os.path.join(bindir, "idle")] + (IDLE_QUICK_ARGS if args.quick else IDLE_ARGS)
    runs = {v.label: [] for v in variants}
    for rnd in range(1, args.runs + 1):
        for v in round_order(variants, rnd):
            out = runner.run_timed(argv + v.argv, v, "idle", 300)
            kv = parse_key_values(out) if out is not None else {}
            res = None
            if out is not None:
                try:
                    res = {k: float(kv[k]) for k in IDLE_KEYS}
                    res["series"] = parse_series(kv["series"])
                except (KeyError, ValueError) as e:
                    runner.fail("idle", v, f"bad output ({e})")
                    res = None
            if res:
                res["other_load"] = runner.other_load
                res["policy"] = ",".join(f"{k}:{kv[f'tide_{k}']}" for k in
                                         ("purge", "decay_ms", "thp", "background")
                                         if f"tide_{k}" in kv)
                runs[v.label].append(res)
                runner.check_provider(v, kv.get("allocator"))
                raw.append(dict({k: res[k] for k in IDLE_KEYS}, allocator=v.label, run=rnd,
                                other_load=runner.other_load, series=kv["series"],
                                provider=kv.get("allocator", "")))
            shown = (f"RSS after idle {res['rss_idle_kib'] / 1024:7.1f} MiB, -LazyFree "
                     f"{res['nolazy_idle_kib'] / 1024:7.1f} MiB, re-touch {res['retouch_s']:.3f} s"
                     if res else "failed")
            runner.progress(f"idle {'':<18} round {rnd}/{args.runs} {v.label:<28} {shown}"
                            f"{load_text(runner.other_load)}")
    for v in variants:
        rs = runs[v.label]
        row = {"allocator": v.label, "family": v.family, "env": v.env_text(), "runs": len(rs),
               "policy": rs[0]["policy"] if rs else ""}
        for k in IDLE_KEYS + ("other_load",):
            row[k] = statistics.median(r[k] for r in rs) if rs else None
        # The idle period's samples, median per instant over the runs.
        times = sorted(set.intersection(*(set(r["series"]) for r in rs))) if rs else []
        row["series"] = {ms: (statistics.median(r["series"][ms][0] for r in rs),
                              statistics.median(r["series"][ms][1] for r in rs)) for ms in times}
        summary.append(row)
    return raw, summary
