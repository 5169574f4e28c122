#!/usr/bin/env bash
# The guest half of host/test_callopt_stuff (run there by scripts/vm/vm-run):
# the return mitigation this boot chose, then kpx_ctx.ko's flags experiment
# at its two sites, one line each ("callopt-stuff: exp=flags site=S
# mech=M hits=N flags_bad=B done=1").
. "$(dirname "$0")/../lib.sh"
RES=/sys/kernel/debug/kpx_ctx/result
echo "callopt-stuff: retbleed: $(cat /sys/devices/system/cpu/vulnerabilities/retbleed)"
dmesg | grep -E 'RETBleed:|active return thunk:|callthunks: Setting up' | sed 's/^\[[ 0-9.]*\] /callopt-stuff: /'
for s in exit entry; do
	insmod "$MODDIR/kpx_ctx.ko" exp=flags site=$s || { echo "callopt-stuff: insmod site=$s failed"; exit 1; }
	r=$(grep -E '^(exp|site|mech|hits|flags_bad|done)=' $RES | tr '\n' ' ')
	rmmod kpx_ctx || exit 1
	echo "callopt-stuff: $r"
done
