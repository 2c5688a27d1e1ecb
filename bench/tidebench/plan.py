# SPDX-License-Identifier: MIT
"""What a run does: the parts and variants its options select, how many runs that makes,
and running them in their fixed order, each part timed."""

import os
import shutil
import time

from .ebizzy import EBIZZY_CONFIGS, run_ebizzy
from .idle import run_idle
from .kv import KV_BENCHES, run_kv
from .micro import MICRO_BENCHES, SHAPE_BENCHES, run_fastpath, run_micro
from .purge import FLOOR_SETTINGS, run_floor
from .realloc import REALLOC_MODES, run_realloc


def selected(args, group, name):
    return not args.only or group in args.only or name in args.only


class Plan:
    """The parts of the run the options select, each with its variants.  Warns of a
    busy machine and notes a missing strace on the way."""

    def __init__(self, args, variants, notes):
        self.args, self.variants = args, variants
        configs = [(c, variants["purge"] if c.purge_row else
                    variants["small"] if c.small else variants["main"])
                   for c in EBIZZY_CONFIGS
                   if selected(args, "ebizzy", c.name) and (c.quick or not args.quick)]
        self.configs = [(c, vs) for c, vs in configs if vs]
        self.benches = [b for b in MICRO_BENCHES if selected(args, "micro", b.name)]
        self.shapes = [b for b in SHAPE_BENCHES if selected(args, "shapes", b.name)]
        self.do_fastpath = selected(args, "micro", "fastpath") and shutil.which("valgrind")
        self.modes = [m for m in REALLOC_MODES if selected(args, "realloc", "realloc-" + m.name)]
        self.do_idle = selected(args, "idle", "idle")
        self.kv = [b for b in KV_BENCHES if selected(args, "kv", b.name)]
        self.do_floor = any(c.purge_row for c, _ in self.configs)

        busy = os.getloadavg()[0]
        if busy > 0.5 * (os.cpu_count() or 1):
            print(f"warning: the load average is {busy:.1f} on {os.cpu_count()} CPUs: "
                  "expect noisy numbers (each run reports the other processes' share)")
        strace = shutil.which("strace")
        if not strace:
            notes.append("strace is not installed: no madvise counts except tide's own")
            print("note: " + notes[-1])
        self.total = (sum(len(vs) * args.runs + (len([v for v in vs if v.family != "tide"])
                                                 if strace else 0) for _, vs in self.configs)
                      + len(self.benches) * len(variants["micro"]) * args.runs
                      + len(self.shapes) * len(variants["shapes"]) * args.runs
                      + (2 * len(variants["micro"]) if self.do_fastpath else 0)
                      + len(self.modes) * len(variants["realloc"]) * args.runs
                      + (len(variants["idle"]) * args.runs if self.do_idle else 0)
                      + len(self.kv) * len(variants["kv"]) * args.runs
                      + (len(FLOOR_SETTINGS) * args.runs if self.do_floor else 0))
        print(f"bench: {len(variants['main'])} allocator settings, {args.runs} run(s) each, "
              f"ebizzy -S {args.seconds}{', QUICK' if args.quick else ''}; {self.total} runs")

    def run(self, runner, bindir):
        """Runs every selected part; returns their rows (raw runs and medians) and the
        seconds each part took."""
        args, variants, res = self.args, self.variants, Results()
        started, took = time.monotonic(), res.took

        def timed(name, fn):
            t0 = time.monotonic()
            result = fn()
            took[name] = time.monotonic() - t0
            return result

        if self.configs:
            res.ebizzy_raw, res.ebizzy_rows = timed("ebizzy", lambda: run_ebizzy(
                args, runner, self.configs, bindir))
        if self.do_floor:
            res.floor_rows = timed("purge_floor", lambda: run_floor(args, runner, bindir))
        if self.benches:
            res.micro_raw, res.micro_rows = timed("micro", lambda: run_micro(
                args, runner, self.benches, variants["micro"], bindir))
        if self.shapes:
            res.shape_raw, res.shape_rows = timed("shapes", lambda: run_micro(
                args, runner, self.shapes, variants["shapes"], bindir))
        if self.do_fastpath:
            res.fast_rows = timed("fastpath", lambda: run_fastpath(
                runner, variants["micro"], bindir))
        if self.modes:
            res.realloc_raw, res.realloc_rows = timed("realloc", lambda: run_realloc(
                args, runner, self.modes, variants["realloc"], bindir))
        if self.do_idle and variants["idle"]:
            res.idle_raw, res.idle_rows = timed("idle", lambda: run_idle(
                args, runner, variants["idle"], bindir))
        if self.kv and variants["kv"]:
            res.kv_raw, res.kv_rows, res.tlb_raw, res.tlb_rows = timed("kv", lambda: run_kv(
                args, runner, self.kv, variants["kv"], bindir))
        took["total"] = time.monotonic() - started
        return res


class Results:
    """The rows of a run: *_raw every run, *_rows the medians (one per allocator and
    configuration); took: seconds per part, in the order they ran, then "total"."""

    def __init__(self):
        self.ebizzy_raw, self.ebizzy_rows, self.floor_rows = [], [], []
        self.micro_raw, self.micro_rows, self.fast_rows = [], [], []
        self.shape_raw, self.shape_rows = [], []
        self.realloc_raw, self.realloc_rows = [], []
        self.idle_raw, self.idle_rows = [], []
        self.kv_raw, self.kv_rows, self.tlb_raw, self.tlb_rows = [], [], [], []
        self.took = {}

    def medians(self):
        """The medians by part, as verdicts.evaluate() takes them."""
        return {"ebizzy": self.ebizzy_rows, "floor": self.floor_rows,
                "micro": self.micro_rows + self.shape_rows,
                "fastpath": self.fast_rows, "realloc": self.realloc_rows,
                "kv": self.kv_rows, "tlb": self.tlb_rows}
