#!/usr/bin/env bash
# Recursion and enable/disable on callopt probes.
# 1. A callopt probe hit while another kprobe's handler runs (a BPF program
#    of a probe on getpgid calls bpf_get_current_pid_tgid, probed in its
#    middle) counts a miss instead of running: exactly one per trigger.
# 2. A tracefs kprobe event at a callopt site, disabled and enabled again,
#    is unoptimized and call-optimized again, and records exactly the calls
#    made while it was enabled.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
N=500
inner=bpf_get_current_pid_tgid
off=$("$KPCTL" -j explain "$inner" | jq -r '[.sites[] | select(.mechanism == "callopt")][0].offset // empty')
[ -n "$off" ] || fail "no callopt site in $inner: $("$KPCTL" explain "$inner")"
json=$("$KPCTL" -j attach --trigger $N --wait-opt 10 "$GETPGID_FUNC+$GETPGID_SINGLE" "$inner+$off") ||
	fail "attach: $json"
note "$json"
assert_eq "$(jq -r '.probes[1].mechanism' <<< "$json")" callopt "mechanism of the nested probe"
assert_eq "$(jq -r '.probes[0].hits' <<< "$json")" $N "outer hits"
assert_eq "$(jq -r '.probes[1].missed' <<< "$json")" $N "nested probe: one miss per outer hit"
assert_eq "$(jq -r '.probes[1].hits' <<< "$json")" 0 "nested probe never ran its program"
assert_no_kprobes

T=/sys/kernel/tracing
ev=kpx_callopt_t
echo "p:kpx/$ev $GETPGID_FUNC+$GETPGID_SINGLE" >> $T/kprobe_events || fail "cannot add kprobe event"
cleanup() { echo 0 > $T/events/kpx/$ev/enable 2>/dev/null; echo "-:kpx/$ev" >> $T/kprobe_events 2>/dev/null; }
trap cleanup EXIT
echo > $T/trace
calls() { python3 -c "import os
for i in range($1): os.getpgid(0)"; }
wait_flag() { # FLAG PRESENT(1|0)
	for _ in $(seq 100); do
		if grep -q "$1" $KPROBES_LIST; then [ "$2" = 1 ] && return 0
		else [ "$2" = 0 ] && return 0; fi
		sleep 0.1
	done
	fail "waited for $1 present=$2: $(cat $KPROBES_LIST)"
}
echo 1 > $T/events/kpx/$ev/enable
wait_flag '\[CALLOPT\]' 1
calls 100
echo 0 > $T/events/kpx/$ev/enable
wait_flag '\[CALLOPT\]' 0
calls 100
echo 1 > $T/events/kpx/$ev/enable
wait_flag '\[CALLOPT\]' 1
calls 100
echo 0 > $T/events/kpx/$ev/enable
n=$(grep -c "$ev:" $T/trace)
note "$n events recorded"
# Exactly the 200 calls made while enabled; nothing else calls getpgid here.
assert_eq "$n" 200 "events recorded while enabled"
