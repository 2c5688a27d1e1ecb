#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh - run each libFuzzer target for FUZZ_SECONDS (default 60) from its committed seed
# corpus, and summarise libFuzzer's final statistics.
#
#   test/fuzz/run.sh [TARGET...]        (default: test/fuzz/fuzz_conf test/fuzz/fuzz_api)
#
# New inputs go to test/fuzz/work/TARGET (never into the committed corpus); a crash leaves
# its input in test/fuzz/artifacts/ (rerun it with: test/fuzz/TARGET FILE).  Exit status 0
# iff no target crashed, leaked memory past libFuzzer's limits or timed out.
secs=${FUZZ_SECONDS:-60}
srcdir=${srcdir:-.}
here=$(dirname "$0")
case "$here" in /*) ;; *) here=$(pwd)/$here ;; esac
[ $# -gt 0 ] || set -- test/fuzz/fuzz_conf test/fuzz/fuzz_api
mkdir -p test/fuzz/artifacts
pass=0
fail=0
for t in "$@"; do
    name=$(basename "$t")
    corpus=$srcdir/test/fuzz/corpus/${name#fuzz_}
    work=test/fuzz/work/$name
    mkdir -p "$work"
    log=test/fuzz/$name.fuzz.log
    dict=""
    [ -f "$srcdir/test/fuzz/${name#fuzz_}.dict" ] && dict="-dict=$srcdir/test/fuzz/${name#fuzz_}.dict"
    echo "fuzz: $name for $secs s (corpus $corpus)"
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$t" -max_total_time="$secs" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
        -artifact_prefix=test/fuzz/artifacts/"$name"- $dict "$work" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    if [ "$rc" -eq 0 ]; then
        pass=$((pass + 1))
        echo "fuzz: $name: ${execs:-?} executions, coverage ${cov:-?}, 0 crashes"
    else
        fail=$((fail + 1))
        echo "fuzz: $name: FAILED (exit $rc) after ${execs:-?} executions; the end of $log:"
        tail -40 "$log"
        ls test/fuzz/artifacts/"$name"-* 2>/dev/null | sed 's/^/fuzz: input: /'
    fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
