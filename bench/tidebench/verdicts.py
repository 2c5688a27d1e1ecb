# SPDX-License-Identifier: MIT
"""The verdicts of the targets (the data of targets.py) from the medians of a run.

evaluate() returns [(target, measured, verdict)]: PASS, FAIL, or n/a when a row is
missing (or a bound cannot decide).  A verdict drawn from rows during which other
processes used NOISY of the CPUs or more says "(noisy)".  A target with an "issue" field
(the issue that set it, which tide may not meet yet) says so before its text."""

from .allocators import FAMILIES, purge_label, tide_conf_of
from .ebizzy import EBIZZY_CONFIGS
from .kv import KV_PHASES
from .micro import MICRO_BENCHES, SHAPE_BENCHES
from .purge import PURGE_EVERY_FREE
from .realloc import REALLOC_MODES, bounded_ratio
from .report import fmt_ratio, fmt_us
from .runner import NOISY
from .targets import TARGETS


class Verdicts:
    def __init__(self):
        self.out = []

    def check(self, target, value, ok, text, rows=()):
        if value is None:
            self.out.append((target, text or "row missing", "n/a"))
            return
        verdict = "PASS" if ok else "FAIL"
        loads = [r["other_load"] for r in rows if r and r.get("other_load") is not None]
        if loads and max(loads) >= NOISY:
            text += f"; other load up to {max(loads):.0%}"
            verdict += " (noisy)"
        self.out.append((target, text, verdict))


def find(rows, **match):
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def ebizzy_rows(rows, config):
    return [r for r in rows["ebizzy"] if r["config"] == config and r["records_per_s"]]


def ebizzy_title(config):
    cfg = next(c for c in EBIZZY_CONFIGS if c.name == config)
    return f"ebizzy {' '.join(cfg.args) or '(defaults)'}"


# ---------------------------------------------------------------------------- checks ----
# Each takes a target of targets.py, the medians of the run by part and the Verdicts.

def ebizzy_ratio(t, rows, v):
    """records/s of one tide row against another row of the same configuration."""
    s5 = ebizzy_rows(rows, t["config"])
    a, b, limit = find(s5, allocator=t["tide"]), find(s5, allocator=t["ref"]), t["at_least"]
    x = a and b and a["records_per_s"] / b["records_per_s"]
    v.check(f"{ebizzy_title(t['config'])}: {t['tide']} ≥ {limit} × {t['ref']}", x,
            x and x >= limit,
            x and f"{x:.3f}x ({a['records_per_s']:,.0f} / {b['records_per_s']:,.0f} records/s)",
            (a, b))


def ebizzy_vs_best_peer(t, rows, v):
    """records/s of a tide row against the fastest peer in the same configuration (an
    extra peer given by path is not one of them)."""
    s5 = ebizzy_rows(rows, t["config"])
    a, limit = find(s5, allocator=t["tide"]), t["at_least"]
    peers = [r for r in s5 if r["allocator"] in FAMILIES and r["allocator"] != "tide"]
    best = max(peers, key=lambda r: r["records_per_s"]) if peers else None
    x = a and best and a["records_per_s"] / best["records_per_s"]
    names = "/".join(f for f in FAMILIES if f != "tide")
    v.check(f"{ebizzy_title(t['config'])}: {t['tide']} ≥ "
            f"{'' if limit == 1 else f'{limit} × '}best of {names}",
            x, x and x >= limit, x and f"{x:.3f}x of {best['allocator']} "
            f"({a['records_per_s']:,.0f} / {best['records_per_s']:,.0f} records/s)",
            [a] + peers)


def purge_every_free(rows, purge):
    """tide's purge-every-free rows of one policy (decay_ms:0), by their thp setting."""
    pef = ebizzy_rows(rows, "purge-every-free")
    return {tide_conf_of(r).get("thp", "off"): r for r in pef
            if r["allocator"].startswith("tide[") and tide_conf_of(r).get("purge") == purge
            and tide_conf_of(r).get("decay_ms") == "0"}


def purge_every_free_vs_peer(t, rows, v):
    """The best thp variant of a tide policy against a peer told to purge every free."""
    dn, limit = purge_every_free(rows, t["purge"]), t["at_least"]
    je = find(ebizzy_rows(rows, "purge-every-free"), allocator=purge_label(t["peer"]))
    best_dn = max(dn.items(), key=lambda kv: kv[1]["records_per_s"]) if dn else None
    x = best_dn and je and best_dn[1]["records_per_s"] / je["records_per_s"]
    setting = " ".join(PURGE_EVERY_FREE[t["peer"]].values())  # jemalloc: its MALLOC_CONF
    v.check(f"purge every free: tide purge:{t['purge']},decay_ms:0 (best of thp on/off) "
            f"≥ {limit} × {t['peer']} {setting}", x, x and x >= limit,
            x and f"{x:.2f}x (thp:{best_dn[0]}: {best_dn[1]['records_per_s']:,.0f} / "
            f"{je['records_per_s']:,.0f} records/s)", [je] + list(dn.values()))


def purge_every_free_policies(t, rows, v):
    """The best thp variant of one tide policy against another policy at the same thp;
    beside it, the same ratio with no allocator (bench/purge_floor)."""
    purge, ref, limit = t["purge"], t["ref"], t["at_least"]
    dn, fr = purge_every_free(rows, ref), purge_every_free(rows, purge)
    best_fr = max(fr.items(), key=lambda kv: kv[1]["records_per_s"]) if fr else None
    same = best_fr and dn.get(best_fr[0])
    x = same and best_fr[1]["records_per_s"] / same["records_per_s"]
    others = "".join(f"; thp:{thp}: {fr[thp]['records_per_s'] / dn[thp]['records_per_s']:.2f}x"
                     for thp in sorted(fr) if best_fr and thp != best_fr[0] and thp in dn)
    fl = {(r["advice"], r["thp"]): r["records_per_s"] for r in rows["floor"]
          if r["records_per_s"]}
    if best_fr and (purge, best_fr[0]) in fl and (ref, best_fr[0]) in fl:
        others += (f"; with no allocator: {fl[(purge, best_fr[0])] / fl[(ref, best_fr[0])]:.2f}x"
                   f" (thp:{best_fr[0]}, bench/purge_floor)")
    v.check(f"purge every free: tide purge:{purge},decay_ms:0 (best variant) ≥ {limit} × tide "
            f"purge:{ref},decay_ms:0 (same thp)", x, x and x >= limit,
            x and f"{x:.2f}x (both thp:{best_fr[0]}: {best_fr[1]['records_per_s']:,.0f} / "
            f"{same['records_per_s']:,.0f} records/s{others})",
            list(dn.values()) + list(fr.values()))


def micro_time(t, rows, v):
    """A microbenchmark's time against the fastest peer's."""
    bench, limit = t["bench"], t["at_most"]
    r = find(rows["micro"], bench=bench, allocator=t["tide"])
    x = r and r.get("ratio_best_peer")
    v.check(f"{bench}: {t['tide']} time ≤ {limit} × fastest peer", x, x and x <= limit,
            x and f"{x:.2f}x ({r['time_s']:.3f} s)",
            [m for m in rows["micro"] if m["bench"] == bench])


def micro_peak_rss(t, rows, v):
    """A microbenchmark's peak RSS against another allocator's; other processes' CPU use
    does not move it, so it is never noisy."""
    bench, limit = t["bench"], t["at_most"]
    r = find(rows["micro"], bench=bench, allocator=t["tide"])
    je = find(rows["micro"], bench=bench, allocator=t["ref"])
    x = r and je and r["peak_rss_kib"] and je["peak_rss_kib"] and \
        r["peak_rss_kib"] / je["peak_rss_kib"]
    v.check(f"{bench}: {t['tide']} peak RSS ≤ {limit} × {t['ref']}", x, x and x <= limit,
            x and f"{x:.2f}x ({r['peak_rss_kib'] / 1024:.0f} / "
            f"{je['peak_rss_kib'] / 1024:.0f} MiB)")


def realloc_ratio(t, rows, v):
    """A realloc time (total or inside realloc) against another allocator's.  A ratio
    with a bound (a run stopped at the time limit) decides only when the bound does."""
    mode, key, ref, limit = t["mode"], t["time"], t["ref"], t["at_most"]
    what = {"total_s": "total", "realloc_s": "inside realloc"}[key]
    target = f"realloc {mode}: {t['tide']} {what} ≤ {limit} × {ref}"
    r = find(rows["realloc"], mode=mode, allocator=t["tide"])
    ref_row = find(rows["realloc"], mode=mode, allocator=ref)
    ratio = bounded_ratio(r, ref_row, key)
    if ratio is None:
        v.check(target, None, False, "")
        return
    value, bound = ratio
    text = fmt_ratio(ratio)
    if bound == "<=" and value > limit or bound == ">=" and value <= limit:
        v.out.append((target, text + f" ({ref} stopped at the time limit)", "n/a"))
    else:
        v.check(target, value, value <= limit, text, (r, ref_row))


def realloc_vmas(t, rows, v):
    """tide's range has as many VMAs after the final free as after the first malloc."""
    r = find(rows["realloc"], mode=t["mode"], allocator=t["tide"])
    x = r and r["vmas_start"] is not None and r["vmas_after_free"] is not None
    v.check(f"realloc {t['mode']}: {t['tide']}'s VMAs after the final free == at start",
            x or None, x and r["vmas_after_free"] == r["vmas_start"],
            x and f"{r['vmas_after_free']:.0f} after free, {r['vmas_start']:.0f} at start "
            f"({r['vmas_peak']:.0f} at peak)")


def ratio(a, b, key):
    """a[key] / b[key], or None when a row or a figure is missing (or b's is 0)."""
    if not a or not b or a.get(key) is None or not b.get(key):
        return None
    return a[key] / b[key]


def kv_row(rows, allocator, phase):
    return find(rows["kv"], allocator=allocator, phase=phase)


def kv_fork(t, rows, v):
    """bench/kv: the median fork time (until fork returns) at the end of a phase against
    another row's."""
    ph, limit = t["phase"], t["at_most"]
    a, b = kv_row(rows, t["tide"], ph), kv_row(rows, t["ref"], ph)
    x = ratio(a, b, "fork_ms")
    v.check(f"kv {ph}: {t['tide']} fork ≤ {limit} × {t['ref']}'s", x, x is not None and x <= limit,
            x is not None and f"{x:.2f}x ({a['fork_ms']:.2f} / {b['fork_ms']:.2f} ms)", (a, b))


def kv_huge_share(t, rows, v):
    """bench/kv: AnonHugePages at the end of a phase as a share of the live bytes (memory:
    never noisy)."""
    ph, limit = t["phase"], t["at_least"]
    r = kv_row(rows, t["tide"], ph)
    x = None
    if r and r.get("anon_huge_kib") is not None and r.get("live_bytes"):
        x = r["anon_huge_kib"] * 1024 / r["live_bytes"]
    v.check(f"kv {ph}: {t['tide']} AnonHugePages ≥ {limit:.0%} of the live bytes", x,
            x is not None and x >= limit,
            x is not None and f"{x:.1%} ({r['anon_huge_kib'] / 1024:.0f} / "
            f"{r['live_bytes'] / 2**20:.0f} MiB)")


def kv_rss(t, rows, v):
    """bench/kv: RSS against another row's at the end of every phase (or the one named):
    the worst ratio decides (memory: never noisy)."""
    phases = [t["phase"]] if "phase" in t else list(KV_PHASES)
    limit, where = t["at_most"], f"in {t['phase']}" if "phase" in t else "in every phase"
    target = f"kv: {t['tide']} RSS ≤ {limit} × {t['ref']}'s {where}"
    worst = None
    for ph in phases:
        a, b = kv_row(rows, t["tide"], ph), kv_row(rows, t["ref"], ph)
        x = ratio(a, b, "rss_kib")
        if x is None:
            v.check(target, None, False, "")
            return
        if worst is None or x > worst[0]:
            worst = (x, ph, a["rss_kib"], b["rss_kib"])
    x, ph, a, b = worst
    v.check(target, x, x <= limit, f"{x:.3f}x" + (" at worst" if len(phases) > 1 else "")
            + f" ({ph}: {a / 1024:.0f} / {b / 1024:.0f} MiB)")


def kv_tlb(t, rows, v):
    """bench/kv --mode=tlb: reads per second against another row's (the inverse ratio of
    the ns per read)."""
    limit = t["at_least"]
    a, b = find(rows["tlb"], allocator=t["tide"]), find(rows["tlb"], allocator=t["ref"])
    x = ratio(b, a, "ns_per_read")
    v.check(f"kv-tlb: {t['tide']} reads/s ≥ {limit} × {t['ref']}'s", x,
            x is not None and x >= limit, x is not None and
            f"{x:.3f}x ({a['ns_per_read']:.1f} / {b['ns_per_read']:.1f} ns per read)", (a, b))


def kv_touch_report(t, rows, v):
    """bench/kv: a phase's touch latency percentiles beside another row's: reported, no
    bound."""
    ph = t["phase"]
    a, b = kv_row(rows, t["tide"], ph), kv_row(rows, t["ref"], ph)
    target = f"kv {ph}: {t['tide']} touch latency against {t['ref']}'s (no target)"
    keys = (("p50", "touch_p50_us"), ("p99", "touch_p99_us"), ("p99.9", "touch_p999_us"),
            ("max", "touch_max_us"))
    if any(ratio(a, b, k) is None for _, k in keys):
        v.check(target, None, False, "")
        return
    v.out.append((target, ", ".join(f"{name} {fmt_us(a[k])} / {fmt_us(b[k])} µs"
                                     for name, k in keys), "–"))


def fastpath_report(t, rows, v):
    """Instructions per malloc+free pair under callgrind: reported, no bound."""
    fp = [r for r in rows["fastpath"] if r.get("ir_per_pair") is not None]
    if fp:
        v.out.append(("fastpath: instructions per malloc(64)+free pair (no target)",
                      "; ".join(f"{r['allocator']} {r['ir_per_pair']:.1f}" for r in fp), "–"))


# check name: (function, the fields a target of it must have, those it may have)
CHECKS = {
    "ebizzy_ratio": (ebizzy_ratio, {"config", "ref", "at_least"}, {"tide"}),
    "ebizzy_vs_best_peer": (ebizzy_vs_best_peer, {"config", "at_least"}, {"tide"}),
    "purge_every_free_vs_peer": (purge_every_free_vs_peer, {"purge", "peer", "at_least"}, set()),
    "purge_every_free_policies": (purge_every_free_policies, {"purge", "ref", "at_least"},
                                  set()),
    "micro_time": (micro_time, {"bench", "at_most"}, {"tide"}),
    "micro_peak_rss": (micro_peak_rss, {"bench", "ref", "at_most"}, {"tide"}),
    "realloc_ratio": (realloc_ratio, {"mode", "time", "ref", "at_most"}, {"tide"}),
    "realloc_vmas": (realloc_vmas, {"mode"}, {"tide"}),
    "kv_fork": (kv_fork, {"phase", "ref", "at_most"}, {"tide"}),
    "kv_huge_share": (kv_huge_share, {"phase", "at_least"}, {"tide"}),
    "kv_rss": (kv_rss, {"ref", "at_most"}, {"tide", "phase"}),
    "kv_tlb": (kv_tlb, {"ref", "at_least"}, {"tide"}),
    "kv_touch_report": (kv_touch_report, {"phase", "ref"}, {"tide"}),
    "fastpath_report": (fastpath_report, set(), set()),
}
PARTS = ("ebizzy", "floor", "micro", "fastpath", "realloc", "kv", "tlb")


def validate(targets):
    """Raises ValueError for a target that names an unknown check, field or row set."""
    known = {"config": {c.name for c in EBIZZY_CONFIGS},
             "bench": {b.name for b in MICRO_BENCHES + SHAPE_BENCHES},
             "mode": {m.name for m in REALLOC_MODES}, "time": {"total_s", "realloc_s"},
             "peer": set(PURGE_EVERY_FREE), "purge": {"none", "dontneed", "free"},
             "phase": set(KV_PHASES)}
    for i, t in enumerate(targets):
        where = f"targets.py, target {i + 1} ({t.get('check')})"
        if t.get("check") not in CHECKS:
            raise ValueError(f"{where}: unknown check (known: {', '.join(CHECKS)})")
        _, required, optional = CHECKS[t["check"]]
        fields = set(t) - {"check", "issue"}  # any target may name its issue
        if required - fields or fields - required - optional:
            raise ValueError(f"{where}: fields {sorted(fields)}; it takes {sorted(required)}"
                             + (f" and may take {sorted(optional)}" if optional else ""))
        for k, value in t.items():
            if k in known and value not in known[k]:
                raise ValueError(f"{where}: {k} {value!r} is not one of {sorted(known[k])}")
            if k in ("at_least", "at_most") and not isinstance(value, (int, float)):
                raise ValueError(f"{where}: {k} {value!r} is not a number")
            if k == "issue" and not isinstance(value, int):
                raise ValueError(f"{where}: issue {value!r} is not an issue number")
        if t["check"] == "purge_every_free_policies" and t["ref"] not in known["purge"]:
            raise ValueError(f"{where}: ref {t['ref']!r} is not a purge policy")


def evaluate(rows, targets=TARGETS):
    """[(target, measured, verdict)] for targets, in their order, from the medians of a
    run: rows[part] for part in PARTS (a part not run: absent or empty)."""
    validate(targets)
    rows = {p: rows.get(p) or [] for p in PARTS}
    v = Verdicts()
    for t in targets:
        first = len(v.out)
        CHECKS[t["check"]][0](dict({"tide": "tide"}, **t), rows, v)
        if "issue" in t:
            v.out[first:] = [(f"(issue {t['issue']}) {target}", measured, verdict)
                             for target, measured, verdict in v.out[first:]]
    return v.out


validate(TARGETS)  # a mistake in targets.py stops run.py at once, not after the runs
