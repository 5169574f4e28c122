#!/usr/bin/env bash
# make run's demo (scripts/vm/demo) shows the three mechanisms a new user
# should see: ftrace at the entry, callopt where kpctl explain predicts it,
# and a fallback with its reason; each probe counts the 1000 calls. The
# demo checks the mechanisms against explain itself; here its output must
# name three different mechanisms, callopt one of them.
. "$(dirname "$0")/../lib.sh"
out=$("$KPX_ROOT/scripts/vm/demo" 2>&1) || fail "demo failed: $out"
note "$out"
table=$(sed -n '/^PROBE /,/^== why/p' <<< "$out" | sed '1d;$d')
assert_eq "$(wc -l <<< "$table")" 3 "probe rows"
mechs=$(awk '{ print $3 }' <<< "$table")
assert_eq "$(sed -n 1p <<< "$mechs")" ftrace "mechanism at the entry"
assert_eq "$(sed -n 2p <<< "$mechs")" callopt "mechanism at explain's callopt site"
assert_eq "$(sort -u <<< "$mechs" | wc -l)" 3 "three different mechanisms ($(echo $mechs))"
assert_eq "$(awk '{ print $5 }' <<< "$table" | sort -u)" 1000 "hits of every probe"
assert_eq "$(grep -cE '^\+(0|0x[0-9a-f]+) [a-z0-9]+: .+' <<< "$out")" 3 "a reason for each site"
assert_match "$out" "each probe ran through the mechanism explain predicted" "the demo's verdict"
assert_no_kprobes
