"""The targets of `make bench` and their verdicts, from the medians of a run."""

from .allocators import tide_conf_of
from .report import fmt_ratio
from .runner import NOISY


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
