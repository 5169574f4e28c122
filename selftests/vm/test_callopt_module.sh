#!/usr/bin/env bash
# Call-optimized probes in a module that is unloaded while they are armed
# and hit: the module goes, its probes become [GONE], detaching them later
# is clean, and loading and probing the module again works.
. "$(dirname "$0")/../lib.sh"
. "$MODDIR/sites.env"
SINGLE="kpx_targets:kpx_target_single+$TARGETS_SINGLE"
MULTI="kpx_targets:kpx_target_multi+$TARGETS_MULTI"

for round in 1 2; do
	insmod "$MODDIR/kpx_targets.ko" || fail "insmod (round $round)"
	"$KPCTL" -j attach --duration 0 "$SINGLE" "$MULTI" > /tmp/kpctl.json 2>/tmp/kpctl.err &
	kp=$!
	# Both get call-optimized while the kthreads hit them.
	wait_list '\[CALLOPT\]' 2
	rmmod kpx_targets || fail "rmmod with armed probes failed (round $round)"
	wait_list '\[GONE\]' 2
	kill -INT $kp
	wait $kp || fail "kpctl failed after the module went: $(cat /tmp/kpctl.err)"
	note "round $round: $(jq -c '[.probes[] | {spec, mechanism, hits}]' /tmp/kpctl.json)"
	for i in 0 1; do
		assert_num "$(json_int "$(cat /tmp/kpctl.json)" ".probes[$i].hits")" '>' 0 \
			"hits of probe $i before the module went"
	done
	assert_no_kprobes
done
