#!/bin/sh
# SPDX-License-Identifier: MIT
# link_localized.sh LIBTOOL-LINK-COMMAND ... -o LIB.la ...
#
# Runs the libtool link command it is given, then rebuilds the static archive that
# command made as one relocatable object (ld -r) whose hidden symbols are made local
# (objcopy --localize-hidden).  The shared library keeps its internals out of reach with
# -fvisibility=hidden, but a static archive of separate objects must leave every
# cross-file internal global, so a program linked with it that had its own `conf` or
# `rb_erase` collided with tide's.  Once the objects are one, those references are
# resolved inside it and the names can be local; the default-visibility names (tide's
# API, the malloc family and C++'s operators) stay global: the names libtide.so exports,
# whose tide_ ones src/libtide.ver versions (tools/check_exports.py checks that the two
# libraries and the script agree).  Sections are kept as they are: TLS, .init_array,
# .fini_array and the unwind tables (.eh_frame, and the personality routine of the C++
# operators' nothrow forms, src/cxx.c) work as before.
#
# LD, OBJCOPY, AR and RANLIB come from the environment (configure's values).
set -u
la= prev=
for arg in "$@"; do
    test "x$prev" = x-o && la=$arg
    prev=$arg
done
test -n "$la" || { echo "$0: no -o LIB.la in the link command" >&2; exit 1; }
"$@" || exit $?

old=$(sed -n "s/^old_library='\(.*\)'\$/\1/p" "$la")
test -n "$old" || exit 0 # no static library (--disable-static)
dir=$(dirname "$la")/.libs
archive=$dir/$old
obj=$dir/${old%.a}.o
fail() {
    echo "$0: $1 failed; $la removed" >&2
    rm -f "$la" "$obj" "$obj.tmp"
    exit 1
}
${LD:-ld} -r --whole-archive "$archive" -o "$obj.tmp" || fail "ld -r of $archive"
${OBJCOPY:-objcopy} --localize-hidden "$obj.tmp" "$obj" || fail "objcopy --localize-hidden"
rm -f "$archive" "$obj.tmp"
${AR:-ar} cr "$archive" "$obj" || fail "ar"
${RANLIB:-ranlib} "$archive" || fail "ranlib"
rm -f "$obj"
