#!/bin/sh
# SPDX-License-Identifier: MIT
# soak.sh - run the differential soak (test/stress/soak) under every configuration that matters,
# splitting a total time between them, and summarise.
#
#   test/stress/soak.sh [TOTAL_SECONDS]      (default: $SOAK_SECONDS, else 60)
#
# `make check` runs it with 60 seconds, `make stress` with $(STRESS_SECONDS) (300).
# SOAK_BIN names the soak binary (default test/stress/soak); SOAK_ARGS adds options to it
# (for example "-t 8" or "-r 0x1234" to replay a seed).  Exit status 0 iff every
# configuration ran without an error.
total=${1:-${SOAK_SECONDS:-60}}
bin=${SOAK_BIN:-test/stress/soak}

# Each purge policy, with and without immediate decay; remap on and off, and a low
# threshold so that many reallocs move pages (with room for 16 moved blocks, tide_check()
# running all the while, -C; and for 1);
# huge pages (purging whole 2 MiB units, with tide_check() running all the while once);
# the cacheless, single-arena slow paths; and the heap profiler sampling one allocation in
# 4 KiB (sampled blocks of every size, realloc'd, moved and freed, tide_check() running),
# and every allocation sampled, so that any block left behind is a sampled 16 KiB one;
# guard pages after every slab and large block (tide_check() running), and guard_sample's
# blocks on pages of their own, one in every 64 KiB allocated, so that they are frequent.
# Then test/stress/soak_fault (see below).
configs="purge:none
purge:dontneed
purge:free
purge:dontneed,decay_ms:0
purge:free,decay_ms:0
remap:off
remap:on,remap_threshold:65536,remap_max:16 -C
remap:on,remap_threshold:65536,remap_max:1,purge:dontneed
thp:on,purge:dontneed,decay_ms:0
thp:on,purge:free,decay_ms:0 -C
tcache:off,arenas:1,background:off
prof:on,prof_sample:4k,remap_threshold:65536,remap_max:16 -C
prof:on,prof_sample:1
guard:on -C
guard_sample:64k"

# The same soak against the fault-injection build, with the OS layer failing at random.
fault_bin=${SOAK_FAULT_BIN:-test/stress/soak_fault}
fault_configs=""
if [ -x "$fault_bin" ]; then
    fault_configs="faults:purge:free
faults:purge:dontneed,decay_ms:0,remap_threshold:65536"
fi

n=$(printf '%s\n%s\n' "$configs" "$fault_configs" | grep -c .)
each=$(awk -v t="$total" -v n="$n" 'BEGIN { s = t / n; if (s < 1) s = 1; printf "%.1f", s }')
echo "soak: $n configurations, $each s each, $total s in all"

pass=0
fail=0
ops_total=0
summary=""
tmp=$(mktemp)
failed_out=$(mktemp)
trap 'rm -f "$tmp" "$failed_out"' EXIT
IFS='
'
for conf in $configs $fault_configs; do
    opts=""
    case "$conf" in *" -C") conf=${conf% -C}; opts=-C ;; esac
    case "$conf" in
    faults:*) TIDE_CONF=${conf#faults:} "$fault_bin" -s "$each" -q $opts $SOAK_ARGS >"$tmp" 2>&1 ;;
    *) TIDE_CONF=$conf "$bin" -s "$each" -q $opts $SOAK_ARGS >"$tmp" 2>&1 ;;
    esac
    rc=$?
    cat "$tmp"
    ops=$(sed -n 's/^soak: result .* ops=\([0-9]*\) errors=.*/\1/p' "$tmp")
    errs=$(sed -n 's/^soak: result .* errors=\([0-9]*\)$/\1/p' "$tmp")
    if [ "$rc" -eq 0 ] && [ -n "$ops" ] && [ "$errs" = 0 ]; then
        pass=$((pass + 1))
        verdict=ok
    else
        fail=$((fail + 1))
        verdict="FAILED (exit $rc)"
        if [ "$rc" -gt 128 ]; then
            verdict="FAILED (signal $((rc - 128)))"
        fi
        { echo "soak: ---- $conf: $verdict"; cat "$tmp"; } >>"$failed_out"
    fi
    ops_total=$((ops_total + ${ops:-0}))
    summary="$summary$(printf '  %-62s %12s ops, %s errors: %s' "$conf" "${ops:-?}" "${errs:-?}" "$verdict")
"
    echo
done
unset IFS
echo "soak: summary"
printf '%s' "$summary"
echo "soak: $ops_total operations in all"
echo "soak: $pass passed, $fail failed"
# A harness that shows only a log's last lines (CI) still shows what failed, and the seed
# to replay it with (-r).
if [ "$fail" -ne 0 ]; then
    echo "soak: the failed configurations' output again:"
    cat "$failed_out"
fi
[ "$fail" -eq 0 ]
