#!/usr/bin/env bash
# A probe inside the fentry call bytes (func+FENTRY+1 .. +4), or at func+0 of
# an ENDBR function, is moved to the fentry site and runs through ftrace with
# full pt_regs, instead of being refused as "not an instruction boundary";
# the first byte after the call is an ordinary site again.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
site=$((GETPGID_FENTRY))
base=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
[ -n "$base" ] || fail "no $F in /proc/kallsyms"
want=$(printf '0x%x' $((0x$base + site)))
field() { jq -r "$1" <<< "$json"; }
for off in 0 $(seq $((site + 1)) $((site + 4))); do
	json=$("$KPCTL" -j attach --trigger 100 "$F+$off") || fail "attach at +$off: $json"
	assert_eq "$(field '.probes[0].mechanism')" ftrace "mechanism at +$off"
	assert_eq "$(field '.probes[0].mechanism_source')" link_info "mechanism source at +$off"
	assert_eq "$(field '.probes[0].full_regs')" true "full regs at +$off"
	assert_eq "$(field '.probes[0].addr')" "$want" "probe address for +$off"
	assert_eq "$(field '.probes[0].hits')" 100 "hits at +$off"
	assert_no_kprobes
done
note "+0 and +$((site + 1))..+$((site + 4)) all moved to the fentry site $want"
# Past the call: not moved.
json=$("$KPCTL" -j attach --trigger 10 "$F+$((site + 5))") || fail "attach past the call: $json"
assert_eq "$(field '.probes[0].addr')" "$(printf '0x%x' $((0x$base + site + 5)))" "address past the call"
[ "$(field '.probes[0].mechanism')" != ftrace ] || fail "the first byte after the call is on ftrace"
assert_no_kprobes
echo ok
