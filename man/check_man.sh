#!/bin/sh
# SPDX-License-Identifier: MIT
# check_man.sh - the manual pages of the build tree lint clean and document what the built
# tide offers (make check runs it from the top of the build tree):
#   1. groff, through man-db's `man --warnings=w` (every warning groff has), says nothing
#      about man/tide.1 or man/tide.3, in UTF-8 and in ASCII, 80 columns wide, and neither
#      does `mandoc -T lint -W warning` (warnings and worse; its style hints are not
#      enforced, though the pages had none when this check was written);
#   2. tide(3)'s list of TIDE_CONF keys has, in order, each key and default the built
#      library prints for TIDE_CONF=help (run through src/tide), and nothing else;
#   3. tide(1)'s OPTIONS has a tag for each option the usage of `src/tide --help` shows.
# Exit status: 0 = all hold, 1 = something does not (listed), 99 = could not check.
set -u
LC_ALL=C
export LC_ALL
# The user's man-db settings must not change what is checked.
unset MANOPT MANROFFOPT MAN_KEEP_FORMATTING MANPAGER PAGER MANWIDTH 2>/dev/null

pages="man/tide.1 man/tide.3"
lib="$(pwd)/src/.libs/libtide.so"
tmp="${TMPDIR:-/tmp}/check_man.$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp" || exit 99

for tool in man mandoc; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "check_man: $tool not found; ./bootstrap installs man-db and mandoc" >&2
        exit 99
    fi
done
for f in $pages src/tide "$lib"; do
    if [ ! -e "$f" ]; then
        echo "check_man: $f is missing: run make first" >&2
        exit 99
    fi
done

fail=0
bad() {
    echo "check_man: FAIL: $*"
    fail=1
}

# ---- 1. lint -------------------------------------------------------------------------
for p in $pages; do
    for enc in UTF-8 ascii; do
        MANWIDTH=80 man --warnings=w -E "$enc" -P cat -l "$p" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ $rc -ne 0 ] || [ -s "$tmp/err" ] || [ ! -s "$tmp/out" ]; then
            bad "$p ($enc): man exited with $rc and said:"
            sed 's/^/    /' "$tmp/err"
        fi
    done
    mandoc -T lint -W warning "$p" >"$tmp/lint" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || [ -s "$tmp/lint" ]; then
        bad "$p: mandoc -T lint exited with $rc and said:"
        sed 's/^/    /' "$tmp/lint"
    fi
done

# ---- 2. every key of TIDE_CONF=help, with its default, in tide(3) ---------------------
# The library prints "  KEY (default VALUE; ACCEPTED)" for each key; the page's list has a
# tag "KEY (default VALUE)" for each.
TIDE_LIB="$lib" TIDE_CONF=help src/tide -- true 2>"$tmp/help" >/dev/null || {
    echo "check_man: TIDE_CONF=help src/tide -- true failed:" >&2
    cat "$tmp/help" >&2
    exit 99
}
sed -n 's/^  \([^ ]*\) (default \([^;]*\);.*/\1 \2/p' "$tmp/help" >"$tmp/keys.lib"
if [ ! -s "$tmp/keys.lib" ]; then
    echo "check_man: TIDE_CONF=help printed no key:" >&2
    cat "$tmp/help" >&2
    exit 99
fi
MANWIDTH=80 man -E ascii -P cat -l man/tide.3 2>/dev/null |
    sed -n 's/^       \([A-Za-z0-9_]*\) (default \(.*\))$/\1 \2/p' >"$tmp/keys.man"
if ! cmp -s "$tmp/keys.lib" "$tmp/keys.man"; then
    bad "tide(3)'s TIDE_CONF keys (+) differ from the library's TIDE_CONF=help (-):"
    diff -u "$tmp/keys.lib" "$tmp/keys.man" | sed -n 's/^\([-+][^-+]\)/    \1/p'
fi

# ---- 3. every option of tide's usage, in tide(1) ----------------------------------------
# (--help prints the usage on stdout; an older wrapper printed it on stderr)
src/tide --help >"$tmp/usage" 2>&1
opts=$(sed -n 's/^usage: tide //p' "$tmp/usage" | grep -o '\[-[-A-Za-z]*' | sed 's/^\[//')
if [ -z "$opts" ]; then
    echo "check_man: no option found in the usage of src/tide --help:" >&2
    cat "$tmp/usage" >&2
    exit 99
fi
MANWIDTH=80 man -E ascii -P cat -l man/tide.1 2>/dev/null |
    sed -n '/^OPTIONS$/,/^[A-Z]/p' >"$tmp/options"
for o in $opts; do
    grep -Eq "^       ($o|-[A-Za-z], $o)( |,|\$)" "$tmp/options" ||
        bad "tide(1) has no entry under OPTIONS for $o, which tide --help shows"
done

[ $fail -eq 0 ] && echo "check_man: $pages lint clean; tide(3) lists the $(wc -l <"$tmp/keys.lib") keys of TIDE_CONF=help; tide(1) has the options $(echo $opts)"
exit $fail
