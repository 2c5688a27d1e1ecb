#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_fastpath.py - the fast path is as long as tools/fastpath.pin says, no longer.

Runs bench/fastpath (K iterations of free(malloc(64))) under callgrind with
src/.libs/libtide.so preloaded, at two K, and divides the difference of the totals by the
difference of K: start-up cancels, one pair is left (make bench's fastpath row counts the
same way).  Instruction counts do not depend on the machine's load or speed, so the check
is exact: it fails when the count, rounded to a whole instruction, differs from the pin,
with the defaults or with either setting that must not lengthen the path (prof:on,
guard_sample).  TIDE_CONF is replaced for each run, so a configuration matrix does not
change what is counted.

Skipped (77) where the pin does not apply: a library built by another compiler than the
pin's (.comment names it), with CFLAGS other than configure's default "-g -O2", or with
UBSan, debug assertions or fault injection.  Fails (99)
when valgrind is missing (./bootstrap installs it).

Environment: builddir (default .), srcdir (default: this file's parent's parent),
TIDE_UBSAN / TIDE_FAULT_INJECTION / TIDE_DEBUG_BUILD (yes/no) and TIDE_CFLAGS, from make
check.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

K = (100000, 200000)
SETTINGS = ("", "prof:on", "guard_sample:67108864")


def read_pin(path):
    pin = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                key, _, value = line.partition(" ")
                pin[key] = value.strip()
    return pin["compiler"], int(pin["instructions"])


def built_by(lib):
    readelf = os.environ.get("READELF", "readelf")
    try:
        out = subprocess.run([readelf, "-p", ".comment", lib], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"GCC: \(.*?\) (\d+)\.", out)
    return f"GCC {m.group(1)}" if m else (out.strip().splitlines() or [None])[-1]


def total(valgrind, prog, lib, k, conf, tmp):
    out = os.path.join(tmp, f"cg.{k}")
    env = dict(os.environ, LD_PRELOAD=lib, TIDE_CONF=conf)
    r = subprocess.run([valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", prog, str(k)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_fastpath: callgrind of {prog} {k} failed (status {r.returncode}):\n"
                 + r.stderr[-2000:])
    with open(out) as f:
        for line in f:
            m = re.match(r"(summary|totals):\s+(\d+)", line)
            if m:
                return int(m.group(2))
    sys.exit(f"check_fastpath: no total in {out}")


def main():
    builddir = os.environ.get("builddir", ".")
    srcdir = os.environ.get("srcdir") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if any(os.environ.get(v) == "yes" for v in ("TIDE_UBSAN", "TIDE_FAULT_INJECTION", "TIDE_DEBUG_BUILD")):
        print("check_fastpath: SKIP: not a release build (UBSan, debug or fault injection)")
        return 77
    cflags = " ".join(os.environ.get("TIDE_CFLAGS", "-g -O2").split())
    if cflags != "-g -O2":
        print(f"check_fastpath: SKIP: the pin is for CFLAGS=\"-g -O2\"; this build has \"{cflags}\"")
        return 77
    lib = os.path.abspath(os.path.join(builddir, "src/.libs/libtide.so"))
    prog = os.path.abspath(os.path.join(builddir, "bench/fastpath"))
    compiler, pinned = read_pin(os.path.join(srcdir, "tools/fastpath.pin"))
    by = built_by(lib)
    if by != compiler:
        print(f"check_fastpath: SKIP: the pin is for {compiler}; libtide.so was built by {by}")
        return 77
    valgrind = shutil.which("valgrind")
    if not valgrind:
        print("check_fastpath: FAILED: valgrind not found (./bootstrap installs it)")
        return 99
    failed = False
    with tempfile.TemporaryDirectory(prefix="tide-fastpath-") as tmp:
        for conf in SETTINGS:
            a, b = (total(valgrind, prog, lib, k, conf, tmp) for k in K)
            per_pair = (b - a) / (K[1] - K[0])
            name = conf or "defaults"
            if round(per_pair) == pinned:
                print(f"check_fastpath: {name}: {per_pair:.2f} instructions a pair (pinned: {pinned})")
            elif round(per_pair) > pinned:
                print(f"check_fastpath: FAILED: {name}: the fast path grew to {per_pair:.2f} "
                      f"instructions a pair; tools/fastpath.pin says {pinned}")
                failed = True
            else:
                print(f"check_fastpath: FAILED: {name}: the fast path is down to {per_pair:.2f} "
                      f"instructions a pair: pin it in tools/fastpath.pin (now {pinned}) and "
                      f"update the documents that cite it")
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
