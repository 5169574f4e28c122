#!/usr/bin/env bash
# Callopt under call depth tracking (retbleed=stuff). On QEMU's
# Skylake-Client model with "retbleed=stuff spectre_v2=retpoline" the
# kernel chooses call depth tracking, whose return thunk
# (call_depth_return_thunk) counts every return with a shlq that changes
# the arithmetic flags. Both callopt trampolines return into probed code
# whose flags are live, so they must return around that thunk.
# selftests/host/callopt-stuff-guest.sh shows the mitigation the boot chose
# and runs kpx_ctx.ko's flags experiment at both sites: a cmp whose ZF is
# read after the site, and an adc that adds the carry of a cmp before it.
# Each must be callopt, hit 20000 times, and compute right every time
# (flags_bad=0; the series without the fix got 10000 and 9998 wrong). The
# kernel log must stay clean (vm-run exits 126 otherwise).
. "$(dirname "$0")/../lib.sh"
[ -r "$MODDIR/kpx_ctx.ko" ] || fail "no $MODDIR/kpx_ctx.ko (make modules)"
log=$BUILD/callopt-stuff.log
"$KPX_ROOT/scripts/vm/vm-run" --cpu Skylake-Client --append "retbleed=stuff spectre_v2=retpoline" \
	--timeout 600 -- selftests/host/callopt-stuff-guest.sh > "$log" 2>&1
rc=$?
out=$(grep '^callopt-stuff:' "$log")
echo "$out"
[ $rc = 0 ] || fail "vm-run exited $rc: $(tail -n 20 "$log")"
assert_match "$out" "RETBleed: Mitigation: Stuffing" "retbleed mitigation"
assert_match "$out" "active return thunk: call_depth_return_thunk" "return thunk"
for s in exit entry; do
	line=$(grep "^callopt-stuff: exp=flags site=$s " <<< "$out") || fail "no result for site=$s"
	assert_match "$line" " mech=2 " "site=$s is callopt"
	assert_match "$line" " hits=20000 " "site=$s hits"
	assert_match "$line" " flags_bad=0 " "site=$s flags"
	assert_match "$line" " done=1( |\$)" "site=$s finished"
done
