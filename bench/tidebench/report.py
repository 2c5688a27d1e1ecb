# SPDX-License-Identifier: MIT
"""The report of a run: the CSV files, the markdown tables of latest.md (dated, with the
machine and the command: the record docs/benchmarks.md quotes), the targets table and
ebizzy.png."""

import csv
import datetime
import os
import platform
import shutil
import statistics
import subprocess

from .allocators import tide_conf_of
from .ebizzy import EBIZZY_CONFIGS
from .idle import IDLE_COLUMN_MS, IDLE_KEYS
from .kv import KV_PHASE_KEYS, KV_PHASES, TLB_KEYS
from .realloc import REALLOC_KEYS, REALLOC_MODES, REALLOC_REFS, REALLOC_TIME_LIMIT_S
from .runner import NOISY


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


def shapes_markdown(rows):
    """The workload shapes: time with its ratio to the fastest peer, context switches,
    peak RSS."""
    labels = list(dict.fromkeys(r["allocator"] for r in rows))
    benches = list(dict.fromkeys(r["bench"] for r in rows))
    cell = {(r["bench"], r["allocator"]): r for r in rows}

    def time_cell(r):
        return fmt(r and r["time_s"], ".3f") + (f" ({r['ratio_best_peer']:.2f}x)"
                                               if r and r.get("ratio_best_peer") else "")

    return "\n".join([
        "#### Median time, and ratio to the fastest peer\n",
        md_table(["allocator"] + [f"{b} s" for b in benches],
                 [[a] + [time_cell(cell.get((b, a))) for b in benches] for a in labels]),
        "", load_line(rows),
        "#### Median context switches per run (voluntary + involuntary)\n",
        md_table(["allocator"] + benches,
                 [[a] + [fmt(cell.get((b, a)) and cell[(b, a)].get("csw"), ".0f")
                         for b in benches] for a in labels]),
        "",
        "#### Peak RSS (MiB)\n",
        md_table(["allocator"] + benches,
                 [[a] + [fmt(cell.get((b, a)) and cell[(b, a)]["peak_rss_kib"]
                             and cell[(b, a)]["peak_rss_kib"] / 1024, ".1f")
                         for b in benches] for a in labels]),
        ""])


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


def mib(kib):
    return None if kib is None else kib / 1024


def fmt_us(x):
    """Microseconds with 3 significant digits or so: 0.071, 1.52, 30.3, 2075."""
    return "–" if x is None else format(x, ".3f" if x < 1 else ".2f" if x < 10 else
                                         ".1f" if x < 100 else ".0f")


def kv_markdown(args, rows, tlb_rows):
    """bench/kv: per allocator and phase RSS, AnonHugePages, fork, ops/s and touch
    latency; the TLB row."""
    out = []
    labels = list(dict.fromkeys(r["allocator"] for r in rows))
    cell = {(r["allocator"], r["phase"]): r for r in rows}
    phases = [ph for ph in KV_PHASES if any(r["phase"] == ph for r in rows)]
    live = {ph: next((r["live_bytes"] for r in rows if r["phase"] == ph and r["live_bytes"]),
                     None) for ph in phases}

    def each(fn):
        return [[a] + [fn(cell.get((a, ph))) for ph in phases] for a in labels]

    def rss(r):
        if not r or r["rss_kib"] is None:
            return "–"
        text = fmt(mib(r["rss_kib"]), ".0f")
        if r["lazyfree_kib"] and r["lazyfree_kib"] >= 1024:
            text += f" ({mib(r['rss_kib'] - r['lazyfree_kib']):.0f} − LazyFree)"
        return text

    def huge(r):
        if not r or r["anon_huge_kib"] is None:
            return "–"
        share = f" ({r['anon_huge_kib'] / r['rss_kib']:.0%})" if r["rss_kib"] else ""
        return fmt(mib(r["anon_huge_kib"]), ".0f") + share

    def ops(r):
        if not r or r.get("ops_per_s") is None:
            return "–"
        return f"{r['ops_per_s']:,.0f} ({r['minflt']:,.0f})"

    def fork(r):
        if not r or r.get("fork_ms") is None:
            return "–"
        return f"{r['fork_ms']:.2f} / {r['fork_wait_ms']:.2f}"

    def touch(r):
        if not r or r.get("touch_p50_us") is None:
            return "–"
        return " / ".join(fmt_us(r[f"touch_{p}_us"]) for p in ("p50", "p99", "p999", "max"))

    if rows:
        book = next((r["book_kib"] for r in rows if r.get("book_kib")), None)
        head = [f"{ph} (live {live[ph] / 2**20:.0f})" if live[ph] else ph for ph in phases]
        out += ["#### RSS MiB at the end of each phase (live MiB in the header)\n",
                md_table(["allocator"] + head, each(rss)), ""]
        if book:
            out.append(f"RSS counts the program's own arrays too ({float(book) / 1024:.0f} MiB, "
                       "never on huge pages), alike under every allocator.\n")
        out += ["#### AnonHugePages MiB (share of the RSS)\n",
                md_table(["allocator"] + list(phases), each(huge)), ""]
        vma_phase = "fill" if "fill" in phases else phases[0]
        out += ["#### fork: median ms until fork returns / until waitpid returns\n",
                md_table(["allocator"] + list(phases) + [f"VMAs ({vma_phase})"],
                         [row + [("tide " if cell[(row[0], vma_phase)]["family"] == "tide"
                                  else "process ") + fmt(cell[(row[0], vma_phase)]["vmas"], ".0f")]
                          for row in each(fork)]), ""]
        touched = [ph for ph in ("fill", "overwrite") if ph in phases]
        busy = [ph for ph in phases if ph != "idle"]
        out += ["#### ops/s per phase (minor faults in it); touch µs: p50 / p99 / p99.9 / max\n",
                md_table(["allocator"] + [f"{ph} ops/s" for ph in busy]
                         + [f"{ph} touch µs" for ph in touched],
                         [[a] + [ops(cell.get((a, ph))) for ph in busy]
                          + [touch(cell.get((a, ph))) for ph in touched] for a in labels]), "",
                "A phase after a fork takes a fault at its first write to each page (as after "
                "a store's snapshot; during a real one, a copy): an allocator whose free writes "
                "into the freed block takes more of them than one that writes its metadata "
                "only.\n",
                load_line([r for r in rows if r["phase"] == phases[0]])]
    if tlb_rows:
        r0 = next((r for r in tlb_rows if r.get("objects")), None)
        what = (f"{r0['heap_bytes'] / 2**20:.0f} MiB of {r0['object_bytes']:.0f}-byte blocks, "
                f"{r0['reads']:,.0f} dependent reads over {r0['chain']:,.0f} of them"
                if r0 else "")
        out += [f"#### TLB-bound reads ({what})\n",
                md_table(["allocator", "ns per read", "vs fastest peer", "RSS MiB",
                          "AnonHugePages MiB", "allocating s"],
                         [[r["allocator"], fmt(r["ns_per_read"], ".1f"),
                           fmt(r.get("ratio_best_peer"), ".2f", "x"),
                           fmt(mib(r["rss_kib"]), ".0f"), fmt(mib(r["anon_huge_kib"]), ".0f"),
                           fmt(r["alloc_s"], ".3f")] for r in tlb_rows]),
                "", f"RSS counts the program's pointer array too "
                f"({float(r0['book_kib']) / 1024:.0f} MiB).\n" if r0 and r0.get("book_kib") else "",
                load_line(tlb_rows)]
    return "\n".join(out)


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


def write_files(args, res):
    """Writes the CSV files (and ebizzy.png) of a run; returns their names."""
    ebizzy_raw, ebizzy_rows, floor_rows = res.ebizzy_raw, res.ebizzy_rows, res.floor_rows
    micro_raw, micro_rows, fast_rows = res.micro_raw, res.micro_rows, res.fast_rows
    realloc_raw, realloc_rows = res.realloc_raw, res.realloc_rows
    idle_raw, idle_rows = res.idle_raw, res.idle_rows
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
    shape_raw, shape_rows = res.shape_raw, res.shape_rows
    if micro_rows or fast_rows or shape_rows:
        write_csv(os.path.join(args.results, "micro.csv"), micro_rows + shape_rows + fast_rows,
                  ["bench", "allocator", "env", "runs", "time_s", "ratio_best_peer",
                   "peak_rss_kib", "ir_per_pair", "csw", "other_load"])
        written.append("micro.csv")
    if micro_raw or shape_raw:
        write_csv(os.path.join(args.results, "micro.raw.csv"), micro_raw + shape_raw,
                  ["bench", "allocator", "run", "time_s", "peak_rss_kib", "csw", "other_load",
                   "provider", "free_fn"])
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

    if res.kv_rows:
        write_csv(os.path.join(args.results, "kv.csv"), res.kv_rows,
                  ["phase", "allocator", "env", "policy", "runs"] + list(KV_PHASE_KEYS)
                  + ["book_kib", "other_load"])
        write_csv(os.path.join(args.results, "kv.raw.csv"), res.kv_raw,
                  ["phase", "allocator", "run"] + list(KV_PHASE_KEYS)
                  + ["other_load", "provider"])
        written += ["kv.csv", "kv.raw.csv"]
    if res.tlb_rows:
        write_csv(os.path.join(args.results, "kv-tlb.csv"), res.tlb_rows,
                  ["allocator", "env", "policy", "runs"] + list(TLB_KEYS)
                  + ["ratio_best_peer", "other_load"])
        write_csv(os.path.join(args.results, "kv-tlb.raw.csv"), res.tlb_raw,
                  ["allocator", "run"] + list(TLB_KEYS) + ["other_load", "provider"])
        written += ["kv-tlb.csv", "kv-tlb.raw.csv"]

    if floor_rows:
        write_csv(os.path.join(args.results, "purge_floor.csv"), floor_rows,
                  ["advice", "thp", "runs", "records_per_s"])
        written.append("purge_floor.csv")

    return written


def latest_markdown(args, res, targets, notes):
    """The text of latest.md: every table of what the run ran, the targets, the notes."""
    ebizzy_rows, floor_rows = res.ebizzy_rows, res.floor_rows
    micro_rows, fast_rows = res.micro_rows, res.fast_rows
    realloc_rows, idle_rows, took = res.realloc_rows, res.idle_rows, res.took
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
    if res.shape_rows:
        md.append("### Workload shapes\n")
        md.append("Times of fixed work" + (" (25%, QUICK)" if args.quick else "") +
                  ", the same total work at every thread count, on "
                  f"{os.cpu_count()} CPUs: `churn` (2 threads; 8 and 16: `churn-8t`, "
                  "`churn-16t`) allocates and frees 8 B – 16 KiB blocks in waves of a swinging "
                  "working set, one block in 8 freed by the next thread; `larson` (2 threads; "
                  "`-8t`, `-16t`) replaces random blocks of 8 – 1000 B in arrays handed from "
                  "thread to thread, `larson-sized` frees with the allocator's sized free; "
                  "`powers`: one thread allocates and frees 1000 blocks of each power of two "
                  "16 – 1024 B in turn.  Context switches come from getrusage over the "
                  "timed part: a lock convoy shows there.\n")
        md.append(shapes_markdown(res.shape_rows))
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
    if res.kv_rows or res.tlb_rows:
        default_policy = [r["policy"] for r in res.kv_rows + res.tlb_rows
                          if r["allocator"] == "tide" and r.get("policy")]
        md.append("### A key-value store's life, and TLB-bound reads (`bench/kv`)\n")
        md.append("`bench/kv` (" + ("256 MiB, 1.5 s idle (QUICK)" if args.quick else
                                    "about 1 GiB live after the fill, 3 s idle")
                  + "): a second thread that makes no allocator call, as in a store with "
                  "background threads; fill: keys given values of 16 B – 4 KiB "
                  "(log-uniform), allocated and written whole; free: a random 60 % deleted; "
                  "overwrite: 30 % of the rest given a value 1.5 – 2 × larger (malloc the new, "
                  "write it, free the old, as a store's SET does); idle: no allocator call; "
                  "after: 10,000 SETs, at which allocators that purge only when called give "
                  "memory back.  At the end of each phase: RSS and AnonHugePages "
                  "(smaps_rollup), then forks whose child exits at once (the time fork takes "
                  "in the parent, which copies the page tables, and until waitpid returns, "
                  "which includes the child's exit).  Touch: per SET, the time to allocate "
                  "its block and write every byte, wherever its page faults fall (p99.9 and "
                  "max show huge-page faults and compaction).  The TLB row: each read waits "
                  "for the one before, so a page-table walk adds to every read."
                  + "".join(f"  tide's default: {p}." for p in default_policy[:1]) + "\n")
        md.append(kv_markdown(args, res.kv_rows, res.tlb_rows))
    targets_md = ""
    if targets:
        targets_md = ("### Targets\n\nFrom the medians above; tide is its default "
                      "configuration unless named.\n\n" + targets_markdown(targets) + "\n")
        md.append(targets_md)
    if notes:
        md.append("Notes:\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    return "\n".join(md), targets_md
