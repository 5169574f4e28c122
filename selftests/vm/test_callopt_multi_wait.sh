#!/usr/bin/env bash
# A multi-instruction callopt site waits for an RCU-tasks grace period before
# its call goes in (as int3, "pending", meanwhile), and that wait blocks no
# other attach or detach: kpx_hog holds the grace period off while a stress
# run attaches and detaches links at a single-instruction site 50 times; the
# multi-instruction probe stays pending throughout (class trap in
# bpf_link_info, queued: [OPTIMIZED] in debugfs), and becomes callopt (class
# optimized, [CALLOPT]) once the hog is gone.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
MF=$GETPGID_MULTI_FUNC
insmod "$MODDIR/kpx_hog.ko" || fail "insmod kpx_hog"
trap 'rmmod kpx_hog 2>/dev/null; kill $kp 2>/dev/null' EXIT

"$KPCTL" -j attach --duration 0 "$MF+$GETPGID_MULTI" > /tmp/multi.json &
kp=$!
for _ in $(seq 100); do
	grep -q "$MF+$GETPGID_MULTI" $KPROBES_LIST 2>/dev/null && break
	sleep 0.1
done
# The state of the probe from its class in bpf_link_info (bpftool's "probe")
# and its debugfs flags, read after the class: debugfs shows
# [OPTIMIZED][CALLOPT] as soon as a probe is queued for the optimizer, and the
# class is trap until the call is written. "pending": trap and [OPTIMIZED];
# "callopt": optimized and [OPTIMIZED][CALLOPT]; else "CLASS FLAGS".
multi_state() {
	local cls flags
	cls=$("$BPFTOOL" -j link show | jq -r --arg f "$MF" --argjson o $((GETPGID_MULTI)) \
		'[.[] | select(.func == $f and .offset == $o)][0].probe')
	flags=$(grep -F "$MF+$GETPGID_MULTI " "$KPROBES_LIST" | grep -o '\[.*')
	case "$cls $flags" in
	"trap [OPTIMIZED]"|"trap [OPTIMIZED][CALLOPT]") echo pending ;;
	"optimized [OPTIMIZED][CALLOPT]") echo callopt ;;
	*) echo "$cls ${flags:-(not listed)}" ;;
	esac
}
note "multi-instruction probe: $(multi_state)"
assert_eq "$(multi_state)" pending "mechanism while RCU-tasks is held off"

json=$("$KPCTL" -j stress -n 50 -k 10 -W 0 -s "$F+$GETPGID_SINGLE") || fail "stress: $json"
note "meanwhile: attach $(jq -c .attach_ms <<< "$json"), detach $(jq -c .detach_ms <<< "$json")"
assert_eq "$(json_int "$json" .violations)" 0 "hit accounting"
assert_eq "$(json_int "$json" .sites[0].mechanisms.callopt)" 50 "callopt at the single site"
# An attach that waited for the grace period would wait until the hog is gone.
assert_num "$(json_num "$json" .attach_ms.max)" '<' 1000 "longest attach (ms): did one wait?"
assert_num "$(json_num "$json" .detach_ms.max)" '<' 1000 "longest detach (ms): did one wait?"
assert_eq "$(multi_state)" pending "mechanism after the stress run"

rmmod kpx_hog || fail "rmmod kpx_hog"
for _ in $(seq 300); do
	[ "$(multi_state)" = callopt ] && break
	sleep 0.1
done
assert_eq "$(multi_state)" callopt "mechanism after the grace period"
note "after the hog: $(multi_state)"
kill -INT $kp; wait $kp
assert_eq "$(jq -r '.probes[0].mechanism' /tmp/multi.json)" callopt "final mechanism"
assert_no_kprobes
echo ok
