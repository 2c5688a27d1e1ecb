#!/usr/bin/env python3
"""run.py - the driver behind `make bench` (python3, standard library only).

Runs the ebizzy clone and the microbenchmarks under glibc, jemalloc, tcmalloc, mimalloc
(LD_PRELOAD) and libtide once per tide configuration (TIDE_CONF), interleaving the
allocators round by round so that a noisy neighbour hurts all of them alike, and writes
the medians to RESULTS/{ebizzy,micro}.csv (raw runs in *.raw.csv), a markdown summary
RESULTS/latest.md and, when gnuplot is installed, RESULTS/ebizzy.png.

Every run reports which library's malloc it really called, so a preload that did not
take effect is reported instead of being measured as glibc under another name.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PEERS = [  # (name, soname)
    ("jemalloc", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
    ("mimalloc", "libmimalloc.so.2"),
]
FAMILIES = ["glibc"] + [name for name, _ in PEERS] + ["tide"]

# How each peer is told to return freed memory to the kernel at once (the settings of
# the published "purge every free" figures).  mimalloc 2.0 calls it decommit_delay,
# 2.1 and later purge_delay: both are set.
PURGE_EVERY_FREE = {
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"},
    "tcmalloc": {"TCMALLOC_AGGRESSIVE_DECOMMIT": "true"},
    "mimalloc": {"MIMALLOC_DECOMMIT_DELAY": "0", "MIMALLOC_PURGE_DELAY": "0"},
}

# Allocator settings inherited from the caller's environment would skew the comparison.
SCRUBBED_PREFIXES = ("LD_PRELOAD", "TIDE_CONF", "MALLOC_", "JE_MALLOC_", "TCMALLOC_",
                     "MIMALLOC_", "GLIBC_TUNABLES")

S5M_T2 = ["-s", "5242880", "-t", "2"]

# Runs during which other processes kept this share of the CPUs busy are flagged.
NOISY = 0.10
# With --max-load, how often a run is retried and how long to wait for a quieter machine.
RETRIES = 5
RETRY_PAUSE_S = 10


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


# bench/purge_floor: the kernel's cost of purging every free with no allocator at all,
# beside the purge-every-free ebizzy rows (same chunk, 2 threads, same seconds).
FLOOR_SETTINGS = [("none", "off"), ("dontneed", "off"), ("free", "off"),
                  ("none", "on"), ("dontneed", "on"), ("free", "on")]


class MicroBench:
    def __init__(self, name, argv, key):
        self.name, self.argv, self.key = name, argv, key


MICRO_BENCHES = [
    MicroBench("pairs-batch", ["pairs", "batch"], "batch_s"),
    MicroBench("pairs-lifo", ["pairs", "lifo"], "lifo_s"),
    MicroBench("prodcons", ["prodcons"], "elapsed_s"),
    # The same pinned: the scheduler's choice, which "prodcons" leaves to it, made fixed.
    MicroBench("prodcons-pairs", ["prodcons", "-p", "pairs"], "elapsed_s"),
    MicroBench("prodcons-split", ["prodcons", "-p", "split"], "elapsed_s"),
    MicroBench("mixed-1t", ["mixed", "-t", "1"], "elapsed_s"),
    MicroBench("mixed-2t", ["mixed", "-t", "2"], "elapsed_s"),
]
FASTPATH_K = (100000, 200000)


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

# bench/idle: 1 GiB burst freed, then an idle period of 2.5 x tide's default decay_ms, in a
# program with a second thread (tide's default background:auto starts its purger thread
# only in a multithreaded program), and tide's default once more single-threaded.
IDLE_ARGS = []
IDLE_THREADS_ARGS = ["--threads=2"]
IDLE_QUICK_ARGS = ["--idle-ms=1500", "--burst=256m"]
IDLE_COLUMN_MS = (0, 500, 1000, 1500, 2000, 2500)  # the samples shown in the table


class Variant:
    """One allocator setting: a library to preload (None: glibc) and its environment."""

    def __init__(self, label, family, lib, env=None, argv=None):
        self.label, self.family, self.lib, self.env = label, family, lib, dict(env or {})
        self.argv = list(argv or [])  # extra arguments to the program (bench/idle's --threads)

    def environ(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}
        if self.lib:
            env["LD_PRELOAD"] = self.lib
        env.update(self.env)
        return env

    def env_text(self):
        return " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))


# ------------------------------------------------------------------------- setup ----

def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builddir", required=True, help="top build directory")
    p.add_argument("--srcdir", help="top source directory (default: builddir)")
    p.add_argument("--results", help="output directory (default: BUILDDIR/bench/results)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 run each; ebizzy only s5M-t2, realloc and "
                        "purge-every-free; microbenchmarks at 25%% of their work; realloc "
                        "growth to 256 MiB (pair: 64 MiB); idle with a 256 MiB burst and "
                        "1.5 s idle; tide configurations 'default', 'purge:none' and "
                        "'purge:free' only of the [all] list (unless --tide-confs)")
    p.add_argument("--only", default="",
                   help="comma list of: ebizzy, micro, realloc, idle, or "
                        "configuration/benchmark names")
    p.add_argument("--allocs", default="", help="comma list of: " + ", ".join(FAMILIES))
    p.add_argument("--runs", type=int, help="runs per allocator and configuration (default 5)")
    p.add_argument("--seconds", type=int, help="ebizzy -S (default 1)")
    p.add_argument("--max-load", type=int, default=0, metavar="PERCENT",
                   help=f"retry a timed run (up to {RETRIES} times, {RETRY_PAUSE_S} s apart) when "
                        "other processes used more than PERCENT%% of the CPUs meanwhile")
    p.add_argument("--tide-confs", help="space-separated TIDE_CONF values ('default' = unset) "
                                        "replacing the [all] list of bench/tide-confs")
    args = p.parse_args()
    args.srcdir = args.srcdir or args.builddir
    args.results = args.results or os.path.join(args.builddir, "bench", "results")
    args.runs = args.runs or (1 if args.quick else 5)
    args.max_load /= 100
    args.seconds = args.seconds or 1
    if args.runs < 1 or args.seconds < 1:
        p.error("--runs and --seconds must be at least 1")
    args.only = [x for x in args.only.replace(" ", ",").split(",") if x]
    known = (["ebizzy", "micro", "fastpath", "realloc", "idle"]
             + [c.name for c in EBIZZY_CONFIGS] + [b.name for b in MICRO_BENCHES]
             + ["realloc-" + m.name for m in REALLOC_MODES])
    for x in args.only:
        if x not in known:
            p.error(f"unknown --only item '{x}' (known: {', '.join(known)})")
    args.allocs = [x for x in args.allocs.replace(" ", ",").split(",") if x]
    for a in args.allocs:
        if a not in FAMILIES:
            p.error(f"unknown allocator '{a}' (known: {', '.join(FAMILIES)})")
    return args


def read_tide_confs(path):
    sections, current = {}, None
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.fullmatch(r"\[(.+)\]", line)
            if m:
                current = sections.setdefault(m.group(1), [])
            elif current is None:
                sys.exit(f"{path}: '{line}' is outside any [section]")
            else:
                current.append(line)
    return sections


def find_library(soname):
    """Path of a shared library by soname, as the dynamic loader would find it."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"  # /sbin is not in every PATH
    try:
        out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    found = [m.groups() for m in re.finditer(r"^\s*(\S+) \((.*)\) => (\S+)$", out, re.M)
             if m.group(1) == soname]
    # ldconfig lists every ABI ("libc6,x86-64", "libc6" for i386...): take the native one.
    native = [path for _, abi, path in found if platform.machine().replace("_", "-") in abi]
    if native or found:
        return (native or [path for _, _, path in found])[0]
    for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64",
              "/usr/local/lib", "/usr/lib"):
        if os.path.exists(os.path.join(d, soname)):
            return os.path.join(d, soname)
    return None


def tide_variant(lib, conf):
    if conf == "default":
        return Variant("tide", "tide", lib)
    return Variant(f"tide[{conf}]", "tide", lib, {"TIDE_CONF": conf})


def build_variants(args, notes):
    """Returns the variants of each part of the run: {"main": the ebizzy configurations,
    "small": ebizzy's 512 KiB-chunk configurations, "purge": the purge-every-free row,
    "micro": the microbenchmarks, "realloc", "idle"}.  The peers (glibc, jemalloc,
    tcmalloc, mimalloc) are in every list but "purge", which has them told to purge on
    every free; the tide configurations come from the sections of bench/tide-confs
    (those but [all] and [purge-every-free] default to [all] when absent).  --tide-confs
    replaces the [all], [ebizzy-small-chunks] and [micro] lists."""
    wanted = set(args.allocs or FAMILIES)
    confs = read_tide_confs(os.path.join(args.srcdir, "bench", "tide-confs"))
    all_confs = args.tide_confs.split() if args.tide_confs else confs.get("all", ["default"])
    micro_confs = all_confs if args.tide_confs else confs.get("micro", all_confs)
    small_confs = all_confs if args.tide_confs else confs.get("ebizzy-small-chunks", all_confs)
    if args.quick and not args.tide_confs:
        # purge:none too: the ebizzy targets compare tide with it.
        quick = ([c for c in all_confs if c in ("default", "purge:none", "purge:free")]
                 or all_confs[:1])
        micro_confs = [c for c in micro_confs if c in quick] or micro_confs[:1]
        all_confs = quick

    peers, purge = [], []
    if "glibc" in wanted:
        peers.append(Variant("glibc", "glibc", None))
        purge.append(peers[0])  # the reference the ratios are taken against
    for name, soname in PEERS:
        if name not in wanted:
            continue
        lib = find_library(soname)
        if not lib:
            notes.append(f"{name} skipped: {soname} is not installed")
            print(f"note: {name} skipped: {soname} is not installed")
            continue
        peers.append(Variant(name, name, lib))
        purge.append(Variant(f"{name} (purge)", name, lib, PURGE_EVERY_FREE[name]))
    out = {"main": list(peers), "small": list(peers), "purge": purge, "micro": list(peers),
           "realloc": list(peers), "idle": list(peers)}
    if "tide" in wanted:
        lib = os.path.join(args.builddir, "src", ".libs", "libtide.so")
        if not os.path.exists(lib):
            sys.exit(f"run.py: {lib} is missing: build the library first (make)")
        out["main"] += [tide_variant(lib, c) for c in all_confs]
        out["small"] += [tide_variant(lib, c) for c in small_confs]
        out["purge"] += [tide_variant(lib, c) for c in confs.get("purge-every-free", [])]
        out["micro"] += [tide_variant(lib, c) for c in micro_confs]
        out["realloc"] += [tide_variant(lib, c) for c in confs.get("realloc", all_confs)]
        out["idle"] += [tide_variant(lib, c) for c in confs.get("idle", all_confs)]
        out["idle"].append(Variant("tide (single-threaded)", "tide", lib, argv=["--threads=1"]))
    for v in out["idle"]:
        v.argv = v.argv or list(IDLE_THREADS_ARGS)
    return out


def selected(args, group, name):
    return not args.only or group in args.only or name in args.only


# ------------------------------------------------------------------------ running ----

class Runner:
    def __init__(self, args, total):
        self.args, self.total, self.done = args, total, 0
        self.failures, self.provider_notes, self.seen = [], [], set()
        self.other_load, self.retries = None, 0

    def progress(self, text):
        self.done += 1
        width = len(str(self.total))
        print(f"[{self.done:{width}}/{self.total}] {text}", flush=True)

    def run(self, argv, variant, what, timeout):
        """Run argv under variant; returns its stdout, or None (failure recorded).
        Sets self.other_load: the share of the machine's CPU time that other processes
        used meanwhile (the noise of a shared machine)."""
        busy0, kids0, t0 = machine_busy_s(), children_cpu_s(), time.monotonic()
        try:
            p = subprocess.run(argv, env=variant.environ(), capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(what, variant, f"timed out after {timeout} s")
            return None
        finally:
            wall = time.monotonic() - t0
            foreign = machine_busy_s() - busy0 - (children_cpu_s() - kids0)
            self.other_load = max(0.0, min(1.0, foreign / (wall * (os.cpu_count() or 1))))
        if p.returncode != 0:
            self.fail(what, variant, f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
            return None
        return p.stdout

    def run_timed(self, argv, variant, what, timeout):
        """run() for a measurement: with --max-load, a run during which other processes
        took more of the CPUs than that is thrown away and retried after a pause."""
        for attempt in range(1 + RETRIES):
            out = self.run(argv, variant, what, timeout)
            if out is None or not self.args.max_load or self.other_load <= self.args.max_load:
                break
            if attempt < RETRIES:
                print(f"  other load {self.other_load:.0%} during {what} under {variant.label}:"
                      f" retrying in {RETRY_PAUSE_S} s", flush=True)
                self.retries += 1
                time.sleep(RETRY_PAUSE_S)
        return out

    def fail(self, what, variant, why):
        msg = f"{what} under {variant.label} failed: {why}"
        self.failures.append(msg)
        print("  FAILED: " + msg, flush=True)

    def check_provider(self, variant, provider):
        """Warn once per variant when the malloc in use is not the one preloaded."""
        if not provider or variant.label in self.seen:
            return
        self.seen.add(variant.label)
        real = os.path.realpath(provider)
        if variant.lib is None:
            ok = os.path.basename(real).startswith("libc")
        else:
            ok = real == os.path.realpath(variant.lib)
        if ok:
            return
        if variant.family == "tide":
            msg = (f"{variant.label}: malloc came from {provider}, not libtide "
                   "(libtide does not provide malloc yet?): its figures are that allocator's")
        else:
            msg = f"{variant.label}: malloc came from {provider}: the LD_PRELOAD did not take effect"
        self.provider_notes.append(msg)
        print("  note: " + msg, flush=True)


def machine_busy_s():
    """CPU seconds the whole machine spent busy (or stolen by the hypervisor)."""
    with open("/proc/stat") as f:
        t = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (t[0] + t[1] + t[2] + t[5] + t[6] + t[7]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def load_text(load):
    return f" (other load {load:.0%})" if load is not None and load >= NOISY else ""


def parse_key_values(text):
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            out[parts[0]] = parts[1].strip()
    return out


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
            for v in variants:
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


def run_micro(args, runner, benches, variants, bindir):
    raw, summary = [], []
    work = ["-w", "25"] if args.quick else []
    for b in benches:
        argv = [os.path.join(bindir, b.argv[0])] + work + b.argv[1:]
        runs = {v.label: [] for v in variants}
        for rnd in range(1, args.runs + 1):
            for v in variants:
                out = runner.run_timed(argv, v, b.name, 600)
                kv = parse_key_values(out) if out is not None else {}
                t = float(kv[b.key]) if b.key in kv else None
                if t is not None:
                    rss = int(kv["peak_rss_kib"])
                    runs[v.label].append((t, rss, runner.other_load))
                    runner.check_provider(v, kv.get("allocator"))
                    raw.append({"bench": b.name, "allocator": v.label, "run": rnd,
                                "time_s": t, "peak_rss_kib": rss,
                                "other_load": runner.other_load,
                                "provider": kv.get("allocator", "")})
                elif out is not None:
                    runner.fail(b.name, v, f"no '{b.key}' in the output")
                shown = f"{t:9.3f} s" if t is not None else "failed"
                runner.progress(f"{b.name:<23} round {rnd}/{args.runs} {v.label:<28} {shown}"
                                f"{load_text(runner.other_load)}")
        for v in variants:
            rs = runs[v.label]
            med = (lambda i: statistics.median(r[i] for r in rs)) if rs else (lambda i: None)
            summary.append({"bench": b.name, "allocator": v.label, "env": v.env_text(),
                            "runs": len(rs), "time_s": med(0), "peak_rss_kib": med(1),
                            "other_load": med(2)})
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
            for v in variants:
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
        for v in variants:
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


def floor_markdown(rows, ebizzy):
    """Free against dontneed with no allocator, next to tide's purge-every-free rows."""
    tide = {(tide_conf_of(r).get("purge"), tide_conf_of(r).get("thp", "off")): r["records_per_s"]
            for r in ebizzy if r["config"] == "purge-every-free" and r["records_per_s"]
            and r["allocator"].startswith("tide[")}
    floor = {(r["advice"], r["thp"]): r["records_per_s"] for r in rows}
    table = []
    for thp in ("off", "on"):
        f_none, f_dn, f_fr = (floor.get((a, thp)) for a in ("none", "dontneed", "free"))
        t_dn, t_fr = tide.get(("dontneed", thp)), tide.get(("free", thp))
        table.append([f"thp:{thp}", fmt(f_none, ",.0f"), fmt(f_dn, ",.0f"), fmt(f_fr, ",.0f"),
                      fmt(f_dn and f_fr and f_fr / f_dn, ".2f", "x"),
                      fmt(t_dn, ",.0f"), fmt(t_fr, ",.0f"),
                      fmt(t_dn and t_fr and t_fr / t_dn, ".2f", "x")])
    return md_table(["huge pages", "no allocator: no purge", "dontneed", "free", "free / dontneed",
                     "tide: purge:dontneed,decay_ms:0", "purge:free,decay_ms:0",
                     "free / dontneed"], table)


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
    """ratio = value / the best (lowest) value among the peers (glibc, jemalloc, ...)."""
    peers = {v.label for v in variants if v.family != "tide"}
    for group in {r[group_key] for r in rows}:
        best = [r[value_key] for r in rows if r[group_key] == group and
                r["allocator"] in peers and r.get(value_key) is not None]
        for r in rows:
            if r[group_key] == group:
                r["ratio_best_peer"] = (r[value_key] / min(best)
                                        if best and r.get(value_key) is not None else None)


# ------------------------------------------------------------------------ reports ----

def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else
                            round(r[k], 6) if isinstance(r[k], float) else r[k])
                        for k in fields})


def fmt(x, spec, suffix=""):
    return "–" if x is None else format(x, spec) + suffix


def load_line(rows):
    """How busy other processes kept the machine during the runs of a table."""
    loads = [r["other_load"] for r in rows if r.get("other_load") is not None]
    if not loads:
        return ""
    worst = max(loads)
    text = (f"Other processes used {statistics.median(loads):.0%} of the CPUs during these runs "
            f"(median over rows; worst row {worst:.0%})")
    return text + (": differences of that size are noise.\n" if worst >= NOISY else ".\n")


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def ebizzy_markdown(args, summary):
    out = []
    for cfg in EBIZZY_CONFIGS:
        rows = [r for r in summary if r["config"] == cfg.name]
        if not rows:
            continue
        title = f"`ebizzy {' '.join(cfg.args) or '(defaults)'}`"
        if cfg.purge_row:
            title += ", every allocator told to purge on every free"
        out.append(f"#### {title}\n")
        out.append(md_table(
            ["allocator", "records/s", "vs glibc", "records/CPU-s", "user s", "sys s",
             "peak RSS MiB", "VMAs", "fork ms", "madvise / 1k records"],
            [[r["allocator"] + (f" `{r['env']}`" if cfg.purge_row and r["env"] and
                                not r["allocator"].startswith("tide") else ""),
              fmt(r["records_per_s"], ",.0f"), fmt(r.get("ratio_glibc"), ".2f", "x"),
              fmt(r["records_per_cpu_s"], ",.0f"),
              fmt(r["user_s"], ".2f"), fmt(r["sys_s"], ".2f"),
              fmt(r["peak_rss_kib"] and r["peak_rss_kib"] / 1024, ".1f"),
              fmt(r["vmas"], ".0f"), fmt(r["fork_ms"], ".3f"),
              fmt(r.get("madvise_per_krec"), ".2f") +
              (" (tide)" if r.get("madvise_source") == "tide counters" else "")]
             for r in rows]))
        out.append("")
        out.append(load_line(rows))
    return "\n".join(out)


def micro_markdown(micro, fastpath):
    out = []
    labels = list(dict.fromkeys([r["allocator"] for r in micro + fastpath]))
    benches = list(dict.fromkeys(r["bench"] for r in micro))
    cell = {(r["bench"], r["allocator"]): r for r in micro + fastpath}

    if micro or fastpath:
        header = ["allocator"] + [f"{b} s" for b in benches]
        if fastpath:
            header.append("Ir per malloc+free")
        rows = []
        for a in labels:
            row = [a]
            for b in benches:
                r = cell.get((b, a))
                row.append(fmt(r and r["time_s"], ".3f") +
                           (f" ({r['ratio_best_peer']:.2f}x)" if r and r.get("ratio_best_peer")
                            else ""))
            if fastpath:
                r = cell.get(("fastpath", a))
                row.append(fmt(r and r["ir_per_pair"], ".1f") +
                           (f" ({r['ratio_best_peer']:.2f}x)" if r and r.get("ratio_best_peer")
                            else ""))
            rows.append(row)
        out.append("#### Median time, and ratio to the fastest peer\n")
        out.append(md_table(header, rows))
        out.append("")
        out.append(load_line(micro))
    if micro:
        out.append("#### Peak RSS (MiB)\n")
        out.append(md_table(["allocator"] + benches,
                            [[a] + [fmt(cell.get((b, a)) and cell[(b, a)]["peak_rss_kib"]
                                        and cell[(b, a)]["peak_rss_kib"] / 1024, ".1f")
                                    for b in benches] for a in labels]))
        out.append("")
    return "\n".join(out)


def fmt_ratio(r):
    if r is None:
        return "–"
    value, bound = r
    # Two significant digits below 0.1: "0.0041x", not "0.00x".
    text = f"{value:.2f}" if value >= 0.1 else f"{value:.2g}"
    return {"": "", "<=": "≤", ">=": "≥"}[bound] + text + "x"


def realloc_markdown(args, rows):
    out = []
    for m in REALLOC_MODES:
        mrows = [r for r in rows if r["mode"] == m.name]
        if not mrows:
            continue
        argv = m.argv + (m.quick_argv if args.quick else [])
        out.append(f"#### `realloc {' '.join(argv)}`\n")
        table = []
        for r in mrows:
            stopped = "" if r["complete"] else f" (stopped at {r['reached_bytes'] / 2**20:.0f} MiB)"
            lb = "" if r["complete"] else "≥"
            tide = r["family"] == "tide"
            table.append(
                [r["allocator"],
                 lb + fmt(r["total_s"], ".3f") + stopped]
                + [fmt_ratio(r.get(f"ratio_total_s_{ref}")) for ref in REALLOC_REFS]
                + [lb + fmt(r["realloc_s"], ".4f")]
                + [fmt_ratio(r.get(f"ratio_realloc_s_{ref}")) for ref in REALLOC_REFS]
                + [fmt(r["realloc_calls"], ".0f"),
                   " / ".join(fmt(r[k], ".0f") for k in ("remap_moves", "remap_copies",
                                                         "remap_in_place")) if tide else "–",
                   ("tide " if tide else "process ") +
                   " / ".join(fmt(r[k], ".0f") for k in ("vmas_start", "vmas_peak",
                                                         "vmas_after_free")),
                   fmt(r["peak_rss_kib"] and r["peak_rss_kib"] / 1024, ".0f")])
        out.append(md_table(
            ["allocator", "total s"] + [f"vs {ref}" for ref in REALLOC_REFS]
            + ["in realloc s"] + [f"vs {ref}" for ref in REALLOC_REFS]
            + ["reallocs", "moves / copies / in place", "VMAs start / peak / after free",
               "peak RSS MiB"], table))
        out.append("")
        out.append(load_line(mrows))
    return "\n".join(out)


def idle_markdown(args, rows, ebizzy_rows):
    ebizzy = {r["allocator"]: r for r in ebizzy_rows if r["config"] == "s5M-t2"}
    idle_ms = 1500 if args.quick else 2500
    cols = [ms for ms in IDLE_COLUMN_MS if ms <= idle_ms]
    # tide's rows first: the table is about its policies; the peers are context.
    ordered = ([r for r in rows if r["family"] == "tide"] +
               [r for r in rows if r["family"] != "tide"])
    table = []
    for r in ordered:
        label = r["allocator"]
        if r["family"] == "tide" and label == "tide" and r["policy"]:
            label += f" (default: {r['policy']})"
        e = ebizzy.get(r["allocator"])
        series = " / ".join(fmt(r["series"].get(ms) and r["series"][ms][1] / 1024, ".0f")
                            for ms in cols)
        table.append([label, fmt(e and e["records_per_s"], ",.0f"),
                      fmt(r["rss_peak_kib"] and r["rss_peak_kib"] / 1024, ".0f"),
                      fmt(r["rss_idle_kib"] and r["rss_idle_kib"] / 1024, ".0f"),
                      fmt(r["nolazy_idle_kib"] is not None and r["nolazy_idle_kib"] / 1024, ".0f"),
                      fmt(r["retouch_s"], ".3f"), fmt(r["burst_s"], ".3f"), series])
    col_s = " / ".join(f"{ms / 1000:g}" for ms in cols)
    return "\n".join([md_table(
        ["allocator", "ebizzy records/s", "RSS at burst peak MiB", "RSS after idle MiB",
         "RSS−LazyFree after idle MiB", "re-touch s", "first touch s",
         f"RSS−LazyFree MiB at {col_s} s of idle"], table), "", load_line(rows)])


# ------------------------------------------------------------------------ targets ----

def tide_conf_of(row):
    """The TIDE_CONF of a tide row as a dict ({} for the default)."""
    m = re.fullmatch(r"tide\[(.*)\]", row["allocator"])
    return dict(kv.split(":", 1) for kv in m.group(1).split(",")) if m else {}


def compute_targets(ebizzy, micro, fastpath, realloc, floor=()):
    """[(target, measured, verdict)] from the medians of this run: PASS, FAIL, or n/a
    when a row is missing (or a bound cannot decide).  A verdict drawn from rows during
    which other processes used NOISY of the CPUs or more says "(noisy)"."""
    out = []

    def check(target, value, ok, text, rows=()):
        if value is None:
            out.append((target, text or "row missing", "n/a"))
            return
        verdict = "PASS" if ok else "FAIL"
        loads = [r["other_load"] for r in rows if r and r.get("other_load") is not None]
        if loads and max(loads) >= NOISY:
            text += f"; other load up to {max(loads):.0%}"
            verdict += " (noisy)"
        out.append((target, text, verdict))

    def find(rows, **match):
        return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)

    # ebizzy -s 5242880 -t 2
    s5 = [r for r in ebizzy if r["config"] == "s5M-t2" and r["records_per_s"]]
    t, none = find(s5, allocator="tide"), find(s5, allocator="tide[purge:none]")
    v = t and none and t["records_per_s"] / none["records_per_s"]
    check("ebizzy -s 5242880 -t 2: tide ≥ 0.97 × tide[purge:none]", v, v and v >= 0.97,
          v and f"{v:.3f}x ({t['records_per_s']:,.0f} / {none['records_per_s']:,.0f} records/s)",
          (t, none))
    peers = [r for r in s5 if not r["allocator"].startswith("tide")]
    best = max(peers, key=lambda r: r["records_per_s"]) if peers else None
    v = none and best and none["records_per_s"] / best["records_per_s"]
    check("ebizzy -s 5242880 -t 2: tide[purge:none] ≥ best of glibc/jemalloc/tcmalloc/mimalloc",
          v, v and v >= 1.0, v and f"{v:.3f}x of {best['allocator']} "
          f"({none['records_per_s']:,.0f} / {best['records_per_s']:,.0f} records/s)",
          [none] + peers)

    # ebizzy, every allocator told to purge on every free
    pef = [r for r in ebizzy if r["config"] == "purge-every-free" and r["records_per_s"]]
    tide_pef = [(tide_conf_of(r), r) for r in pef if r["allocator"].startswith("tide[")]

    def pef_rows(purge):
        return {c.get("thp", "off"): r for c, r in tide_pef
                if c.get("purge") == purge and c.get("decay_ms") == "0"}
    dn, fr = pef_rows("dontneed"), pef_rows("free")
    je = find(pef, allocator="jemalloc (purge)")
    best_dn = max(dn.items(), key=lambda kv: kv[1]["records_per_s"]) if dn else None
    v = best_dn and je and best_dn[1]["records_per_s"] / je["records_per_s"]
    check("purge every free: tide purge:dontneed,decay_ms:0 (best of thp on/off) "
          "≥ 1.5 × jemalloc dirty_decay_ms:0,muzzy_decay_ms:0", v, v and v >= 1.5,
          v and f"{v:.2f}x (thp:{best_dn[0]}: {best_dn[1]['records_per_s']:,.0f} / "
          f"{je['records_per_s']:,.0f} records/s)", [je] + list(dn.values()))
    best_fr = max(fr.items(), key=lambda kv: kv[1]["records_per_s"]) if fr else None
    same = best_fr and dn.get(best_fr[0])
    v = same and best_fr[1]["records_per_s"] / same["records_per_s"]
    others = "".join(f"; thp:{thp}: {fr[thp]['records_per_s'] / dn[thp]['records_per_s']:.2f}x"
                     for thp in sorted(fr) if best_fr and thp != best_fr[0] and thp in dn)
    fl = {(r["advice"], r["thp"]): r["records_per_s"] for r in floor if r["records_per_s"]}
    if best_fr and ("free", best_fr[0]) in fl and ("dontneed", best_fr[0]) in fl:
        others += (f"; with no allocator: {fl[('free', best_fr[0])] / fl[('dontneed', best_fr[0])]:.2f}x"
                   f" (thp:{best_fr[0]}, bench/purge_floor)")
    check("purge every free: tide purge:free,decay_ms:0 (best variant) ≥ 1.5 × tide "
          "purge:dontneed,decay_ms:0 (same thp)", v, v and v >= 1.5,
          v and f"{v:.2f}x (both thp:{best_fr[0]}: {best_fr[1]['records_per_s']:,.0f} / "
          f"{same['records_per_s']:,.0f} records/s{others})",
          list(dn.values()) + list(fr.values()))

    # microbenchmarks: time against the fastest peer, peak RSS against jemalloc
    for bench, limit in (("pairs-batch", 1.1), ("pairs-lifo", 1.1), ("prodcons", 1.2),
                         ("prodcons-pairs", 1.2), ("prodcons-split", 1.2)):
        r = find(micro, bench=bench, allocator="tide")
        v = r and r.get("ratio_best_peer")
        check(f"{bench}: tide time ≤ {limit} × fastest peer", v, v and v <= limit,
              v and f"{v:.2f}x ({r['time_s']:.3f} s)",
              [x for x in micro if x["bench"] == bench])
    for bench in ("mixed-1t", "mixed-2t"):
        r, je = find(micro, bench=bench, allocator="tide"), find(micro, bench=bench,
                                                                 allocator="jemalloc")
        v = r and je and r["peak_rss_kib"] and je["peak_rss_kib"] and \
            r["peak_rss_kib"] / je["peak_rss_kib"]
        check(f"{bench}: tide peak RSS ≤ 1.1 × jemalloc", v, v and v <= 1.1,
              v and f"{v:.2f}x ({r['peak_rss_kib'] / 1024:.0f} / "
              f"{je['peak_rss_kib'] / 1024:.0f} MiB)")  # peak RSS: not moved by others' CPU use

    # realloc growth
    limits = {"total_s": {"glibc": 1.0, "jemalloc": 0.5, "mimalloc": 0.5},
              "realloc_s": {"glibc": 0.67, "jemalloc": 0.1, "mimalloc": 0.1}}
    for mode in ("double", "step"):
        r = find(realloc, mode=mode, allocator="tide")
        for key, what in (("total_s", "total"), ("realloc_s", "inside realloc")):
            for ref, limit in limits[key].items():
                ratio = r and r.get(f"ratio_{key}_{ref}")
                target = f"realloc {mode}: tide {what} ≤ {limit} × {ref}"
                if ratio is None:
                    check(target, None, False, "")
                    continue
                value, bound = ratio
                text = fmt_ratio(ratio)
                if bound == "<=" and value > limit or bound == ">=" and value <= limit:
                    out.append((target, text + f" ({ref} stopped at the time limit)", "n/a"))
                else:
                    check(target, value, value <= limit, text,
                          (r, find(realloc, mode=mode, allocator=ref)))
        v = r and r["vmas_start"] is not None and r["vmas_after_free"] is not None
        check(f"realloc {mode}: tide's VMAs after the final free == at start", v or None,
              v and r["vmas_after_free"] == r["vmas_start"],
              v and f"{r['vmas_after_free']:.0f} after free, {r['vmas_start']:.0f} at start "
              f"({r['vmas_peak']:.0f} at peak)")

    # fastpath: reported, no target
    fp = [r for r in fastpath if r.get("ir_per_pair") is not None]
    if fp:
        out.append(("fastpath: instructions per malloc(64)+free pair (no target)",
                    "; ".join(f"{r['allocator']} {r['ir_per_pair']:.1f}" for r in fp), "–"))
    return out


def targets_markdown(targets):
    return md_table(["target", "measured", "result"],
                    [[t, m, v if v != "FAIL" else "**FAIL**"] for t, m, v in targets])


def machine_description(args):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    commit = ""
    if shutil.which("git"):
        commit = subprocess.run(["git", "-C", args.srcdir, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        # "-dirty" when sources differ from the commit; the results a run writes do not count.
        changed = subprocess.run(["git", "-C", args.srcdir, "status", "--porcelain", "--",
                                  ".", ":!bench/results"],
                                 capture_output=True, text=True).stdout.strip()
        if commit and changed:
            commit += "-dirty"
    versions = []
    if shutil.which("dpkg-query"):
        for pkg in ("libc6", "libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0"):
            v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                               capture_output=True, text=True).stdout.strip()
            if v:
                versions.append(f"{pkg} {v}")
    return (f"{datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}, tide {commit or '?'}, "
            f"Linux {platform.release()}, {os.cpu_count()} CPUs ({cpu or '?'})"
            + (f"; {', '.join(versions)}" if versions else ""))


def plot_ebizzy(args, summary, path):
    """Records/s and peak RSS per allocator for the 5 MiB, 2-thread configurations."""
    gnuplot = shutil.which("gnuplot")
    rows = [r for r in summary if r["config"] == "s5M-t2" and r["records_per_s"] is not None]
    rows += [r for r in summary if r["config"] == "purge-every-free" and
             r["allocator"] != "glibc" and r["records_per_s"] is not None]
    if not gnuplot or not rows:
        if not gnuplot:
            print("note: gnuplot is not installed: no plot")
        return False
    data = "\n".join(f'"{r["allocator"]}" {r["records_per_s"]:.0f} '
                     f'{r["peak_rss_kib"] / 1024:.1f}' for r in rows)
    script = f"""
set terminal pngcairo size 1200,1000 font ",10" noenhanced
set output '{path}'
$d << EOD
{data}
EOD
set multiplot layout 2,1 title "ebizzy -s 5242880 -t 2, median of {args.runs} run(s) of {args.seconds} s"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8
set grid ytics
set yrange [0:*]
set key off
set xtics rotate by -40 scale 0
set lmargin 12
set rmargin 22
set bmargin 13
set ylabel "records/s"
plot $d using 2:xtic(1) lc rgb "#3465a4"
set ylabel "peak RSS (MiB)"
plot $d using 3:xtic(1) lc rgb "#cc6600"
unset multiplot
"""
    p = subprocess.run([gnuplot], input=script, capture_output=True, text=True)
    if p.returncode != 0:
        print("note: gnuplot failed: " + p.stderr.strip()[-300:])
        return False
    return True


# -------------------------------------------------------------------------- main ----

def main():
    args = parse_args()
    bindir = os.path.join(args.builddir, "bench")
    notes = []
    variants = build_variants(args, notes)
    if not variants["main"]:
        sys.exit("run.py: no allocator left to run")

    configs = [(c, variants["purge"] if c.purge_row else
                variants["small"] if c.small else variants["main"])
               for c in EBIZZY_CONFIGS
               if selected(args, "ebizzy", c.name) and (c.quick or not args.quick)]
    configs = [(c, vs) for c, vs in configs if vs]
    benches = [b for b in MICRO_BENCHES if selected(args, "micro", b.name)]
    do_fastpath = selected(args, "micro", "fastpath") and shutil.which("valgrind")
    modes = [m for m in REALLOC_MODES if selected(args, "realloc", "realloc-" + m.name)]
    do_idle = selected(args, "idle", "idle")
    do_floor = any(c.purge_row for c, _ in configs)

    busy = os.getloadavg()[0]
    if busy > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the load average is {busy:.1f} on {os.cpu_count()} CPUs: "
              "expect noisy numbers (each run reports the other processes' share)")
    strace = shutil.which("strace")
    if not strace:
        notes.append("strace is not installed: no madvise counts except tide's own")
        print("note: " + notes[-1])
    total = (sum(len(vs) * args.runs + (len([v for v in vs if v.family != "tide"])
                                        if strace else 0) for _, vs in configs)
             + len(benches) * len(variants["micro"]) * args.runs
             + (2 * len(variants["micro"]) if do_fastpath else 0)
             + len(modes) * len(variants["realloc"]) * args.runs
             + (len(variants["idle"]) * args.runs if do_idle else 0)
             + (len(FLOOR_SETTINGS) * args.runs if do_floor else 0))
    print(f"bench: {len(variants['main'])} allocator settings, {args.runs} run(s) each, "
          f"ebizzy -S {args.seconds}{', QUICK' if args.quick else ''}; {total} runs")
    runner = Runner(args, total)

    started, took = time.monotonic(), {}

    def timed(name, fn):
        t0 = time.monotonic()
        result = fn()
        took[name] = time.monotonic() - t0
        return result

    ebizzy_raw, ebizzy_rows = (timed("ebizzy", lambda: run_ebizzy(args, runner, configs, bindir))
                               if configs else ([], []))
    floor_rows = (timed("purge_floor", lambda: run_floor(args, runner, bindir))
                  if do_floor else [])
    micro_raw, micro_rows = (timed("micro", lambda: run_micro(args, runner, benches,
                                                              variants["micro"], bindir))
                             if benches else ([], []))
    fast_rows = (timed("fastpath", lambda: run_fastpath(runner, variants["micro"], bindir))
                 if do_fastpath else [])
    realloc_raw, realloc_rows = (timed("realloc", lambda: run_realloc(
        args, runner, modes, variants["realloc"], bindir)) if modes else ([], []))
    idle_raw, idle_rows = (timed("idle", lambda: run_idle(args, runner, variants["idle"], bindir))
                           if do_idle and variants["idle"] else ([], []))
    took["total"] = time.monotonic() - started

    os.makedirs(args.results, exist_ok=True)
    written = []
    if ebizzy_rows:
        write_csv(os.path.join(args.results, "ebizzy.csv"), ebizzy_rows,
                  ["config", "args", "allocator", "env", "runs", "records_per_s", "ratio_glibc",
                   "records_per_cpu_s", "user_s", "sys_s", "peak_rss_kib", "vmas", "fork_ms", "madvise_calls",
                   "madvise_per_krec", "madvise_source", "other_load", "provider"])
        write_csv(os.path.join(args.results, "ebizzy.raw.csv"), ebizzy_raw,
                  ["config", "allocator", "env", "run", "records", "records_per_s",
                   "records_per_cpu_s", "real_s",
                   "user_s", "sys_s", "peak_rss_kib", "vmas", "fork_ms", "tide_madvise_calls",
                   "other_load", "provider"])
        written += ["ebizzy.csv", "ebizzy.raw.csv"]
    if micro_rows or fast_rows:
        write_csv(os.path.join(args.results, "micro.csv"), micro_rows + fast_rows,
                  ["bench", "allocator", "env", "runs", "time_s", "ratio_best_peer",
                   "peak_rss_kib", "ir_per_pair", "other_load"])
        written.append("micro.csv")
    if micro_raw:
        write_csv(os.path.join(args.results, "micro.raw.csv"), micro_raw,
                  ["bench", "allocator", "run", "time_s", "peak_rss_kib", "other_load",
                   "provider"])
        written.append("micro.raw.csv")
    if realloc_rows:
        flat = [dict(r, **{k: (r[k][0] if r.get(k) else None) for k in r
                           if k.startswith("ratio_")},
                     **{k + "_bound": (r[k][1] if r.get(k) else "") for k in r
                        if k.startswith("ratio_")}) for r in realloc_rows]
        ratio_fields = [f"ratio_{key}_{ref}{suffix}" for key in ("total_s", "realloc_s")
                        for ref in REALLOC_REFS for suffix in ("", "_bound")]
        write_csv(os.path.join(args.results, "realloc.csv"), flat,
                  ["mode", "allocator", "env", "runs", "complete", "reached_bytes", "total_s",
                   "realloc_s", "realloc_calls", "free_s"] + ratio_fields
                  + ["remap_moves", "remap_heals", "remap_copies", "remap_in_place",
                     "vmas_scope", "vmas_start", "vmas_peak", "vmas_after_free", "peak_rss_kib",
                     "other_load"])
        write_csv(os.path.join(args.results, "realloc.raw.csv"), realloc_raw,
                  ["mode", "allocator", "run", "complete"] + list(REALLOC_KEYS)
                  + ["vmas_scope", "other_load", "provider"])
        written += ["realloc.csv", "realloc.raw.csv"]
    if idle_rows:
        flat = [dict(r, ebizzy_records_per_s=next(
                    (e["records_per_s"] for e in ebizzy_rows if e["config"] == "s5M-t2" and
                     e["allocator"] == r["allocator"]), None),
                     series=",".join(f"{ms}:{a:.0f}:{b:.0f}" for ms, (a, b) in
                                     sorted(r["series"].items()))) for r in idle_rows]
        write_csv(os.path.join(args.results, "idle.csv"), flat,
                  ["allocator", "env", "policy", "runs", "ebizzy_records_per_s"]
                  + list(IDLE_KEYS) + ["other_load", "series"])
        write_csv(os.path.join(args.results, "idle.raw.csv"), idle_raw,
                  ["allocator", "run"] + list(IDLE_KEYS) + ["other_load", "series", "provider"])
        written += ["idle.csv", "idle.raw.csv"]
    if ebizzy_rows and plot_ebizzy(args, ebizzy_rows, os.path.join(args.results, "ebizzy.png")):
        written.append("ebizzy.png")

    if floor_rows:
        write_csv(os.path.join(args.results, "purge_floor.csv"), floor_rows,
                  ["advice", "thp", "runs", "records_per_s"])
        written.append("purge_floor.csv")

    targets = compute_targets(ebizzy_rows, micro_rows, fast_rows, realloc_rows, floor_rows)
    md = [f"## Benchmarks ({'QUICK, ' if args.quick else ''}median of {args.runs} run(s))\n",
          machine_description(args) + ".  Produced by `make bench"
          + (" QUICK=1" if args.quick else "") + "` in "
          + ", ".join(f"{took[k] / 60:.1f} min" if k == "total" else f"{k} {took[k]:.0f} s"
                      for k in took) + ".\n"]
    if ebizzy_rows:
        md.append(f"### ebizzy clone, {args.seconds}-second runs\n")
        md.append("records/CPU-s divides the records by the user+sys time they took: unlike "
                  "records/s, it does not fall when other processes take CPUs away (but it "
                  "hides time spent waiting).  madvise calls come from `strace -f -c` in a "
                  "separate 1-second run, or from tide's own counters where marked (tide).\n")
        md.append(ebizzy_markdown(args, ebizzy_rows))
    if floor_rows:
        md.append("#### Purging every free with no allocator (`bench/purge_floor`)\n")
        md.append("What each advice costs the kernel by itself: 2 threads copy 5 MiB into a "
                  "buffer of their own on a 2 MiB boundary and purge it after every copy (with "
                  "huge pages only its whole 2 MiB units, as tide does), with no allocator "
                  "involved, in records (copies) per second.  A record here is not an ebizzy "
                  "record (no search, one source buffer): compare the ratios, free against "
                  "dontneed, not the rates.\n")
        md.append(floor_markdown(floor_rows, ebizzy_rows))
        md.append("")
    if micro_rows or fast_rows:
        md.append("### Microbenchmarks\n")
        md.append("Times of fixed work" + (" (25%, QUICK)" if args.quick else "") +
                  "; Ir per malloc+free is callgrind's instruction count of `free(malloc(64))`, "
                  "including 9 instructions of the loop.\n")
        md.append(micro_markdown(micro_rows, fast_rows))
    if realloc_rows:
        md.append("### realloc growth\n")
        md.append("One byte written to every page a growth adds, contents checked at the end.  "
                  "total s: the first malloc, every realloc and every touch (not the final "
                  "free); in realloc s: the sum of the time spent inside realloc calls.  "
                  "\"vs X\" is the ratio to X's median.  A run that reached "
                  f"{REALLOC_TIME_LIMIT_S} s stops growing: its times are lower bounds (≥) and "
                  "ratios to them upper bounds (≤).  moves / copies / in place are tide's "
                  "counters; VMAs are those of tide's range under tide, of the whole process "
                  "otherwise, after the first malloc, at the peak size and after the final "
                  "free.\n")
        md.append(realloc_markdown(args, realloc_rows))
    if idle_rows:
        idle_what = ("256 MiB burst, 1.5 s idle (QUICK)" if args.quick else
                     "1 GiB burst, 2.5 s idle")
        md.append("### Purge policies: throughput against RSS after idle\n")
        md.append(f"`bench/idle` ({idle_what}): a program with a second thread (`--threads=2`; "
                  "tide (single-threaded): `--threads=1`) keeps a 64 MiB live heap; a burst of "
                  "64 KiB – 4 MiB "
                  "blocks touched and freed, then no allocator call for the idle period; RSS "
                  "(VmRSS) and RSS − LazyFree (what stays once the kernel takes back MADV_FREE "
                  "pages) at its end, then the time to allocate and touch the same burst again "
                  "(re-touch) against the first time (first touch).  ebizzy records/s is "
                  "`-s 5242880 -t 2` of the same configuration from this run.  Peers purge "
                  "only when called (jemalloc, mimalloc, tcmalloc) or at once (glibc's "
                  "munmap): they are context.\n")
        md.append(idle_markdown(args, idle_rows, ebizzy_rows))
    targets_md = ""
    if targets:
        targets_md = ("### Targets\n\nFrom the medians above; tide is its default "
                      "configuration unless named.\n\n" + targets_markdown(targets) + "\n")
        md.append(targets_md)
    if runner.retries:
        notes.append(f"{runner.retries} run(s) were retried because other processes used more "
                     f"than {args.max_load:.0%} of the CPUs")
    all_notes = notes + runner.provider_notes + runner.failures
    if all_notes:
        md.append("Notes:\n\n" + "\n".join(f"- {n}" for n in all_notes) + "\n")
    text = "\n".join(md)
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
