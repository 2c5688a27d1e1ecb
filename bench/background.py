#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What tide's background modes cost and give: ebizzy -t 1 and -t 2 throughput, and
bench/idle's RSS after an idle period in a single-threaded program and in one with a
second thread, under background:on, auto (the default) and off.

Runs are interleaved mode by mode, round by round; the table gives medians.  It times
benchmarks: run it alone on the machine.

    python3 bench/background.py --builddir . [--runs 5] [--seconds 1]
"""
import argparse
import os
import statistics
import subprocess
import sys

MODES = ("on", "auto", "off")


def run(argv, env_extra, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TIDE_CONF")}
    env.update(env_extra)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({out.returncode}): {out.stderr}")
    return out.stdout


def key_values(text):
    kv = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            kv[parts[0]] = parts[1]
    return kv


def ebizzy_rate(text):
    for line in text.splitlines():
        if line.endswith("records/s"):
            return float(line.split()[0])
    sys.exit(f"ebizzy printed no records/s:\n{text}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builddir", required=True)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seconds", type=int, default=1)
    args = p.parse_args()
    lib = os.path.join(args.builddir, "src", ".libs", "libtide.so")
    bench = os.path.join(args.builddir, "bench")
    res = {m: {"t1": [], "t2": [], "idle1": [], "idle2": [], "retouch1": [], "retouch2": [],
               "threads1": []} for m in MODES}
    for rnd in range(args.runs):
        for m in MODES:
            env = {"LD_PRELOAD": lib, "TIDE_CONF": f"background:{m}"}
            for t in (1, 2):
                out = run([os.path.join(bench, "ebizzy"), "-s", "5242880", "-t", str(t), "-S",
                           str(args.seconds)], env)
                res[m][f"t{t}"].append(ebizzy_rate(out))
            for t in (1, 2):
                kv = key_values(run([os.path.join(bench, "idle"), f"--threads={t}"], env))
                res[m][f"idle{t}"].append(int(kv["nolazy_idle_kib"]) / 1024)
                res[m][f"retouch{t}"].append(float(kv["retouch_s"]))
            print(f"round {rnd + 1}/{args.runs} background:{m}: ebizzy -t1 {res[m]['t1'][-1]:,.0f} "
                  f"-t2 {res[m]['t2'][-1]:,.0f}; idle 1 thread {res[m]['idle1'][-1]:.0f} MiB, "
                  f"2 threads {res[m]['idle2'][-1]:.0f} MiB", flush=True)
    med = {m: {k: statistics.median(v) for k, v in r.items() if v} for m, r in res.items()}
    print()
    print(f"medians of {args.runs} interleaved runs; ebizzy -s 5242880 -S {args.seconds}; "
          "bench/idle defaults (64 MiB live, 1 GiB burst, 2.5 s idle)")
    print()
    print("| background | ebizzy -t 1 records/s | ebizzy -t 2 records/s | idle, 1 thread: RSS−LazyFree "
          "after idle MiB | re-touch s | idle, 2 threads: RSS−LazyFree after idle MiB | re-touch s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in MODES:
        r = med[m]
        name = f"{m} (default)" if m == "auto" else m
        print(f"| {name} | {r['t1']:,.0f} | {r['t2']:,.0f} | {r['idle1']:.0f} | {r['retouch1']:.3f} | "
              f"{r['idle2']:.0f} | {r['retouch2']:.3f} |")


if __name__ == "__main__":
    main()
