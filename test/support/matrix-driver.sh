#!/bin/sh
# SPDX-License-Identifier: MIT
# matrix-driver.sh - the test driver of the configuration matrix (test/local.mk).
#
#   matrix-driver.sh TEST-DRIVER --test-name NAME --log-file LOG --trs-file TRS ... -- CMD...
#
# Runs automake's TEST-DRIVER with the rest of the arguments: one PASS, FAIL, ... for the
# suite under its variant.  Then each test the suite skipped (Criterion's "[SKIP]" lines,
# which CRITERION_VERBOSITY_LEVEL=1 prints) is a SKIP result of its own, on the terminal
# and in the summary, with the reason it gave (tt_skip_under: the variant excludes its
# premise), so that what did not run under which configuration is never silent.
driver=$1
shift
name= log= trs= color=no
prev=
for a in "$@"; do
    case $prev in
    --test-name) name=$a ;;
    --log-file) log=$a ;;
    --trs-file) trs=$a ;;
    --color-tests) color=$a ;;
    esac
    [ "$a" = -- ] && break
    prev=$a
done
sh "$driver" "$@"
rc=$?
if [ -n "$log" ] && [ -f "$log" ] && [ -n "$trs" ]; then
    blu= std=
    if [ "$color" = yes ]; then
        blu=$(printf '\033[1;34m') std=$(printf '\033[m')
    fi
    # Criterion: "[SKIP] suite::test: reason", perhaps in colour.
    sed -n 's/\x1b\[[0-9;]*m//g; s/^\[SKIP\] //p' "$log" | while IFS= read -r line; do
        echo "${blu}SKIP${std}: $name: $line"
        echo ":test-result: SKIP" >>"$trs"
    done
fi
exit $rc
