#!/usr/bin/env bash
# A probe inside the fentry call bytes (func+FENTRY+1 .. +4) is refused with
# EILSEQ, as on stock: those bytes are no instruction boundary, and ftrace
# rewrites them. kpctl names the cause. +0 of an ENDBR function is the
# fentry site (the kernel moves it to +4, as upstream does), and the first
# byte after the call is an ordinary site. (A kretprobe there, and a
# kprobe_multi site there: prog_tests kprobe_mechanism/fentry_inner and
# kprobe_multi_offsets/bad_input, test_kpctl_multi.)
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
site=$((GETPGID_FENTRY))
base=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
[ -n "$base" ] || fail "no $F in /proc/kallsyms"
want=$(printf '0x%x' $((0x$base + site)))
field() { jq -r "$1" <<< "$json"; }

json=$("$KPCTL" -j attach --trigger 100 "$F+0") || fail "attach at +0: $json"
assert_eq "$(field '.probes[0].mechanism')" ftrace "mechanism at +0"
assert_eq "$(field '.probes[0].addr')" "$want" "probe address for +0"
assert_eq "$(field '.probes[0].hits')" 100 "hits at +0"
assert_no_kprobes

for off in $(seq $((site + 1)) $((site + 4))); do
	assert_rc 1 "$KPCTL" attach --duration 0 "$F+$off"
	assert_match "$out" "cannot attach '$F\+$off': the kernel refused this site \(EILSEQ\)" \
		"error at +$off"
	assert_match "$out" "inside the 5-byte fentry call at \+0x$(printf %x "$site")" "cause at +$off"
	assert_no_kprobes
done
note "+$((site + 1))..+$((site + 4)) refused with EILSEQ"

# Past the call: an ordinary site.
json=$("$KPCTL" -j attach --trigger 10 "$F+$((site + 5))") || fail "attach past the call: $json"
assert_eq "$(field '.probes[0].addr')" "$(printf '0x%x' $((0x$base + site + 5)))" "address past the call"
[ "$(field '.probes[0].mechanism')" != ftrace ] || fail "the first byte after the call is on ftrace"
assert_eq "$(field '.probes[0].hits')" 10 "hits past the call"
assert_no_kprobes
echo ok
