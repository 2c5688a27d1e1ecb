# SPDX-License-Identifier: MIT
"""Which allocators a run measures: the peers found on this machine (by soname, as the
dynamic loader finds them), extra peer libraries given by path, libtide under each
configuration of bench/tide-confs, and the lists of variants each part of the run uses."""

import os
import platform
import re
import shutil
import subprocess
import sys

from .idle import IDLE_THREADS_ARGS
from .purge import PURGE_EVERY_FREE
from .runner import EXTRA, Variant

PEERS = [  # (name, soname)
    ("jemalloc", "libjemalloc.so.2"),
    ("tcmalloc", "libtcmalloc_minimal.so.4"),
    ("mimalloc", "libmimalloc.so.2"),
]
FAMILIES = ["glibc"] + [name for name, _ in PEERS] + ["tide"]


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


def peer_family(lib):
    """The peer an extra library is a build of, from its file name (libmimalloc.so ->
    mimalloc), or None."""
    m = re.match(r"lib(jemalloc|tcmalloc|mimalloc)", os.path.basename(lib))
    return m and m.group(1)


def check_preload(label, lib):
    """Exits with one line if the dynamic loader will not preload LIB (not a shared
    library, the wrong architecture...): better now than a failed run in every table."""
    true = shutil.which("true") or "/bin/true"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_PRELOAD")}
    p = subprocess.run([true], env=dict(env, LD_PRELOAD=lib), capture_output=True, text=True)
    if p.returncode != 0 or "cannot be preloaded" in p.stderr:
        why = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        sys.exit(f"run.py: extra peer {label}: {lib} cannot be preloaded: {why}")


def tide_variant(lib, conf):
    if conf == "default":
        return Variant("tide", "tide", lib)
    return Variant(f"tide[{conf}]", "tide", lib, {"TIDE_CONF": conf})


def purge_label(name):
    """The label of a peer told to purge on every free (PURGE_EVERY_FREE)."""
    return f"{name} (purge)"


def build_variants(args, notes):
    """Returns the variants of each part of the run: {"main": the ebizzy configurations,
    "small": ebizzy's 512 KiB-chunk configurations, "purge": the purge-every-free row,
    "micro": the microbenchmarks, "shapes": the workload shapes, "realloc", "idle", "kv"}.
    The peers (glibc, jemalloc, tcmalloc, mimalloc, then the extra peers of --extra-peer)
    are in every list but "purge", which has them told to purge on every free (an extra
    peer only when its file name says which peer it is a build of); the tide
    configurations come from the sections of bench/tide-confs (those but [all] and
    [purge-every-free] default to [all] when absent).  --tide-confs replaces the [all],
    [ebizzy-small-chunks], [micro] and [shapes] lists."""
    wanted = set(args.allocs or FAMILIES)
    confs = read_tide_confs(os.path.join(args.srcdir, "bench", "tide-confs"))
    all_confs = args.tide_confs.split() if args.tide_confs else confs.get("all", ["default"])
    micro_confs = all_confs if args.tide_confs else confs.get("micro", all_confs)
    small_confs = all_confs if args.tide_confs else confs.get("ebizzy-small-chunks", all_confs)
    shape_confs = all_confs if args.tide_confs else confs.get("shapes", micro_confs)
    if args.quick and not args.tide_confs:
        # purge:none too: the ebizzy targets compare tide with it.
        quick = ([c for c in all_confs if c in ("default", "purge:none", "purge:free")]
                 or all_confs[:1])
        micro_confs = [c for c in micro_confs if c in quick] or micro_confs[:1]
        shape_confs = [c for c in shape_confs if c in quick] or shape_confs[:1]
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
        purge.append(Variant(purge_label(name), name, lib, PURGE_EVERY_FREE[name]))
    for label, lib in args.extra_peer:  # whatever ALLOCS says: asked for by path
        check_preload(label, lib)
        peers.append(Variant(label, EXTRA, lib))
        family = peer_family(lib)
        notes.append(f"{label}: an extra peer, {os.path.realpath(lib)}"
                     + (f" (told to purge on every free as {family} is)" if family else
                        " (not in the purge-every-free row: its file name does not say "
                        "whose build it is, so how to tell it to purge is unknown)"))
        if family:
            purge.append(Variant(purge_label(label), EXTRA, lib, PURGE_EVERY_FREE[family]))
    out = {"main": list(peers), "small": list(peers), "purge": purge, "micro": list(peers),
           "shapes": list(peers), "realloc": list(peers), "idle": list(peers),
           "kv": list(peers)}
    if "tide" in wanted:
        lib = os.path.join(args.builddir, "src", ".libs", "libtide.so")
        if not os.path.exists(lib):
            sys.exit(f"run.py: {lib} is missing: build the library first (make)")
        out["main"] += [tide_variant(lib, c) for c in all_confs]
        out["small"] += [tide_variant(lib, c) for c in small_confs]
        out["purge"] += [tide_variant(lib, c) for c in confs.get("purge-every-free", [])]
        out["micro"] += [tide_variant(lib, c) for c in micro_confs]
        out["shapes"] += [tide_variant(lib, c) for c in shape_confs]
        out["realloc"] += [tide_variant(lib, c) for c in confs.get("realloc", all_confs)]
        out["idle"] += [tide_variant(lib, c) for c in confs.get("idle", all_confs)]
        out["idle"].append(Variant("tide (single-threaded)", "tide", lib, argv=["--threads=1"]))
        out["kv"] += [tide_variant(lib, c) for c in confs.get("kv", all_confs)]
        for label, extra in args.extra_tide:
            for part in ("main", "small", "micro", "shapes", "realloc", "idle", "kv"):
                out[part].append(Variant(label, "tide", extra))
    for v in out["idle"]:
        v.argv = v.argv or list(IDLE_THREADS_ARGS)
    return out


def tide_conf_of(row):
    """The TIDE_CONF of a tide row as a dict ({} for the default)."""
    m = re.fullmatch(r"tide\[(.*)\]", row["allocator"])
    return dict(kv.split(":", 1) for kv in m.group(1).split(",")) if m else {}
