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
    def __init__(self, name, args, quick, purge_row=False):
        self.name, self.args, self.quick, self.purge_row = name, args, quick, purge_row


EBIZZY_CONFIGS = [
    EbizzyConfig("s5M-t2", S5M_T2, quick=True),
    EbizzyConfig("defaults", [], quick=False),
    EbizzyConfig("R", ["-R"], quick=False),
    EbizzyConfig("random", ["--random=1"], quick=False),
    EbizzyConfig("realloc", ["--realloc=65536"] + S5M_T2, quick=True),
    EbizzyConfig("purge-every-free", S5M_T2, quick=True, purge_row=True),
    # Above 8 MiB, default jemalloc purges a freed block at once.
    EbizzyConfig("s16M-t2", ["-s", "16777216", "-t", "2"], quick=False),
]


class MicroBench:
    def __init__(self, name, argv, key):
        self.name, self.argv, self.key = name, argv, key


MICRO_BENCHES = [
    MicroBench("pairs-batch", ["pairs", "batch"], "batch_s"),
    MicroBench("pairs-lifo", ["pairs", "lifo"], "lifo_s"),
    MicroBench("prodcons", ["prodcons"], "elapsed_s"),
    MicroBench("mixed-1t", ["mixed", "-t", "1"], "elapsed_s"),
    MicroBench("mixed-2t", ["mixed", "-t", "2"], "elapsed_s"),
]
FASTPATH_K = (100000, 200000)


class Variant:
    """One allocator setting: a library to preload (None: glibc) and its environment."""

    def __init__(self, label, family, lib, env=None):
        self.label, self.family, self.lib, self.env = label, family, lib, dict(env or {})

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
                        "purge-every-free; microbenchmarks at 25%% of their work; tide "
                        "configurations 'default' and 'purge:free' only (unless --tide-confs)")
    p.add_argument("--only", default="",
                   help="comma list of: ebizzy, micro, or configuration/benchmark names")
    p.add_argument("--allocs", default="", help="comma list of: " + ", ".join(FAMILIES))
    p.add_argument("--runs", type=int, help="runs per allocator and configuration (default 3)")
    p.add_argument("--seconds", type=int, help="ebizzy -S (default 1)")
    p.add_argument("--max-load", type=int, default=0, metavar="PERCENT",
                   help=f"retry a timed run (up to {RETRIES} times, {RETRY_PAUSE_S} s apart) when "
                        "other processes used more than PERCENT%% of the CPUs meanwhile")
    p.add_argument("--tide-confs", help="space-separated TIDE_CONF values ('default' = unset) "
                                        "replacing the [all] list of bench/tide-confs")
    args = p.parse_args()
    args.srcdir = args.srcdir or args.builddir
    args.results = args.results or os.path.join(args.builddir, "bench", "results")
    args.runs = args.runs or (1 if args.quick else 3)
    args.max_load /= 100
    args.seconds = args.seconds or 1
    if args.runs < 1 or args.seconds < 1:
        p.error("--runs and --seconds must be at least 1")
    args.only = [x for x in args.only.replace(" ", ",").split(",") if x]
    known = (["ebizzy", "micro", "fastpath"] + [c.name for c in EBIZZY_CONFIGS]
             + [b.name for b in MICRO_BENCHES])
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
    """Returns (the variants every benchmark runs, the purge-every-free row's variants)."""
    wanted = set(args.allocs or FAMILIES)
    confs = read_tide_confs(os.path.join(args.srcdir, "bench", "tide-confs"))
    all_confs = args.tide_confs.split() if args.tide_confs else confs.get("all", ["default"])
    if args.quick and not args.tide_confs:
        all_confs = [c for c in all_confs if c in ("default", "purge:free")] or all_confs[:1]

    main, purge = [], []
    if "glibc" in wanted:
        main.append(Variant("glibc", "glibc", None))
        purge.append(main[0])  # the reference the ratios are taken against
    for name, soname in PEERS:
        if name not in wanted:
            continue
        lib = find_library(soname)
        if not lib:
            notes.append(f"{name} skipped: {soname} is not installed")
            print(f"note: {name} skipped: {soname} is not installed")
            continue
        main.append(Variant(name, name, lib))
        purge.append(Variant(f"{name} (purge)", name, lib, PURGE_EVERY_FREE[name]))
    if "tide" in wanted:
        lib = os.path.join(args.builddir, "src", ".libs", "libtide.so")
        if not os.path.exists(lib):
            sys.exit(f"run.py: {lib} is missing: build the library first (make)")
        main += [tide_variant(lib, c) for c in all_confs]
        purge += [tide_variant(lib, c) for c in confs.get("purge-every-free", [])]
    return main, purge


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


def machine_description(args):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    commit = ""
    if shutil.which("git"):
        commit = subprocess.run(["git", "-C", args.srcdir, "describe", "--always", "--dirty"],
                                capture_output=True, text=True).stdout.strip()
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
set terminal pngcairo size 1100,800 font ",10" noenhanced
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
set xtics rotate by -35 scale 0
set lmargin 12
set rmargin 16
set bmargin 8
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
    main_variants, purge_variants = build_variants(args, notes)
    if not main_variants:
        sys.exit("run.py: no allocator left to run")

    configs = [(c, purge_variants if c.purge_row else main_variants) for c in EBIZZY_CONFIGS
               if selected(args, "ebizzy", c.name) and (c.quick or not args.quick)]
    configs = [(c, vs) for c, vs in configs if vs]
    benches = [b for b in MICRO_BENCHES if selected(args, "micro", b.name)]
    do_fastpath = selected(args, "micro", "fastpath") and shutil.which("valgrind")

    busy = os.getloadavg()[0]
    if busy > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the load average is {busy:.1f} on {os.cpu_count()} CPUs: "
              "expect noisy numbers (each run reports the other processes' share)")
    strace = shutil.which("strace")
    if not strace:
        notes.append("strace is not installed: no madvise counts except tide's own")
        print("note: " + notes[-1])
    total = (sum(len(vs) * (args.runs + (1 if strace else 0)) for _, vs in configs)
             + len(benches) * len(main_variants) * args.runs
             + (2 * len(main_variants) if do_fastpath else 0))
    print(f"bench: {len(main_variants)} allocator settings, {args.runs} run(s) each, "
          f"ebizzy -S {args.seconds}{', QUICK' if args.quick else ''}; {total} runs")
    runner = Runner(args, total)

    ebizzy_raw, ebizzy_rows = run_ebizzy(args, runner, configs, bindir) if configs else ([], [])
    micro_raw, micro_rows = (run_micro(args, runner, benches, main_variants, bindir)
                             if benches else ([], []))
    fast_rows = run_fastpath(runner, main_variants, bindir) if do_fastpath else []

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
    if ebizzy_rows and plot_ebizzy(args, ebizzy_rows, os.path.join(args.results, "ebizzy.png")):
        written.append("ebizzy.png")

    md = [f"## Benchmarks ({'QUICK, ' if args.quick else ''}median of {args.runs} run(s))\n",
          machine_description(args) + ".  Produced by `make bench"
          + (" QUICK=1" if args.quick else "") + "`.\n"]
    if ebizzy_rows:
        md.append(f"### ebizzy clone, {args.seconds}-second runs\n")
        md.append("records/CPU-s divides the records by the user+sys time they took: unlike "
                  "records/s, it does not fall when other processes take CPUs away (but it "
                  "hides time spent waiting).  madvise calls come from `strace -f -c` in a "
                  "separate 1-second run, or from tide's own counters where marked (tide).\n")
        md.append(ebizzy_markdown(args, ebizzy_rows))
    if micro_rows or fast_rows:
        md.append("### Microbenchmarks\n")
        md.append("Times of fixed work" + (" (25%, QUICK)" if args.quick else "") +
                  "; Ir per malloc+free is callgrind's instruction count of `free(malloc(64))`, "
                  "including 9 instructions of the loop.\n")
        md.append(micro_markdown(micro_rows, fast_rows))
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
    if runner.failures:
        print(f"bench: {len(runner.failures)} run(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
