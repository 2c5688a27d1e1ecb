# SPDX-License-Identifier: MIT
"""Running a program under an allocator variant: the environment it gets, the share of
the machine other processes took meanwhile, retries on a busy machine, failures, and a
check that the malloc it called is the one preloaded."""

import os
import resource
import subprocess
import time

# Allocator settings inherited from the caller's environment would skew the comparison.
SCRUBBED_PREFIXES = ("LD_PRELOAD", "TIDE_CONF", "MALLOC_", "JE_MALLOC_", "TCMALLOC_",
                     "MIMALLOC_", "GLIBC_TUNABLES")

# Runs during which other processes kept this share of the CPUs busy are flagged.
NOISY = 0.10
# With --max-load, how often a run is retried and how long to wait for a quieter machine.
RETRIES = 5
RETRY_PAUSE_S = 10


# The family of a peer library given by path (--extra-peer): measured beside the others
# in every table, but not one of the peers that "fastest peer" ratios and targets take.
EXTRA = "extra"


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


def round_order(items, rnd):
    """ITEMS in the order round RND (1, 2, ...) runs them: rotated by one each round, so that
    no allocator always runs first (after a pause, on a cooler CPU, with caches another
    program left) or always right after the same neighbour.  With a fixed order the same
    library measured twice in one round differed by 2-8 % on this machine."""
    items = list(items)
    k = (rnd - 1) % len(items) if items else 0
    return items[k:] + items[:k]


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
