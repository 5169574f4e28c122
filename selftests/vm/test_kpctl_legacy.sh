#!/usr/bin/env bash
# The legacy tracefs path (libbpf's PROBE_ATTACH_MODE_LEGACY: a kprobe event
# in kprobe_events, a perf event on it): the same mechanisms and exact
# counts as through the kprobe PMU; and the same event recording into
# ftrace's ring buffer while its BPF program runs (the kprobe dispatcher's
# path for TRACE and PROFILE together): both see every call. Nothing is
# left behind: no kprobe, no event.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
T=/sys/kernel/tracing
[ -d $T/events ] || T=/sys/kernel/debug/tracing
N=500
libbpf_events() { grep -c 'libbpf_' $T/kprobe_events; }
assert_no_kprobes
assert_eq "$(libbpf_events)" 0 "libbpf events before"

want=(ftrace callopt ftrace)
specs=("$F" "$F+$GETPGID_SINGLE" "$F%return")
for i in 0 1 2; do
	json=$(kpctl_j attach --legacy --wait-opt 5 --trigger $N "${specs[$i]}") ||
		fail "attach --legacy ${specs[$i]}: $json"
	note "$(jq -c '.probes[0] | {spec, mechanism, mechanism_source, hits}' <<< "$json")"
	assert_eq "$(jq -r .probes[0].hits <<< "$json")" $N "hits at ${specs[$i]} (legacy)"
	assert_eq "$(jq -r .probes[0].mechanism <<< "$json")" "${want[$i]}" "mechanism at ${specs[$i]} (legacy)"
done
# One probe at a time: kpctl counts by BPF cookie, which legacy attach lacks.
assert_rc 2 "$KPCTL" attach --legacy "$F" "$F+$GETPGID_SINGLE"
assert_match "$out" "one probe at a time" "message for several legacy probes"
assert_no_kprobes
assert_eq "$(libbpf_events)" 0 "libbpf events after the legacy attach"

# ftrace and BPF on one kprobe event.
"$KPCTL" -j attach --legacy --wait-opt 5 --duration 6 "$F+$GETPGID_SINGLE" > /tmp/legacy.json 2> /tmp/legacy.err &
kp=$!
for _ in $(seq 100); do
	ev=$(sed -n 's/^p:\([^ ]*libbpf_[^ ]*\) .*/\1/p' $T/kprobe_events | head -1)
	[ -n "$ev" ] && break
	sleep 0.05
done
[ -n "$ev" ] || fail "kpctl --legacy made no kprobe event: $(cat /tmp/legacy.err)"
note "event $ev: $(grep "$ev" $T/kprobe_events)"
sleep 1	# attached and, once kpctl has read its mechanism, settled
echo > $T/trace
echo 1 > "$T/events/$ev/enable" || fail "cannot enable $ev for ftrace"
perl -e "syscall(121, 0) for 1..$N" || fail "perl getpgid loop"	# 121: getpgid
echo 0 > "$T/events/$ev/enable"
traced=$(grep -c "perl-.*${ev#*/}:" $T/trace)
note "ftrace recorded $traced hits of perl"
assert_eq "$traced" $N "hits of perl in ftrace's buffer"
wait $kp || fail "kpctl --legacy --duration: $(cat /tmp/legacy.err)"
assert_kpctl_json "$(cat /tmp/legacy.json)" 0 "kpctl -j attach --legacy --duration"
hits=$(jq -r .probes[0].hits /tmp/legacy.json)
note "BPF counted $hits hits (all processes) in 6 s"
[ "$hits" -ge $N ] || fail "BPF counted $hits hits while ftrace recorded $N of perl's"
assert_eq "$(jq -r .probes[0].mechanism /tmp/legacy.json)" callopt "mechanism"
assert_no_kprobes
assert_eq "$(libbpf_events)" 0 "libbpf events at the end"
echo "PASS: legacy tracefs attach, and ftrace + BPF on one kprobe event"
