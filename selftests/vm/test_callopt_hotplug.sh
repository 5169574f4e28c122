#!/usr/bin/env bash
# CPU hotplug while call-optimized probes are attached, detached and hit:
# the stress run over the ftrace, callopt and multi-instruction callopt
# sites passes while CPUs go offline and online under it.
. "$(dirname "$0")/../lib.sh"
ncpu=$(nproc --all)
[ "$ncpu" -ge 2 ] || skip "needs at least 2 CPUs"
[ -w /sys/devices/system/cpu/cpu1/online ] || fail "CPU 1 cannot be offlined"
"$KPX_ROOT/selftests/stress/run" 100 > /tmp/stress.json 2>/tmp/stress.err &
st=$!
toggles=0
while kill -0 $st 2>/dev/null; do
	for c in $(seq 1 $((ncpu - 1))); do
		echo 0 > /sys/devices/system/cpu/cpu$c/online || fail "offline cpu$c"
		sleep 0.2
		echo 1 > /sys/devices/system/cpu/cpu$c/online || fail "online cpu$c"
		toggles=$((toggles + 1))
		kill -0 $st 2>/dev/null || break
	done
done
wait $st || fail "stress run failed under hotplug: $(cat /tmp/stress.err) $(cat /tmp/stress.json)"
json=$(cat /tmp/stress.json)
note "$toggles offline/online toggles; $json"
[ "$toggles" -ge 2 ] || fail "only $toggles hotplug toggles happened"
assert_eq "$(jq -r .mismatches <<< "$json")" 0 "mismatches"
assert_eq "$(jq -r .late_runs <<< "$json")" 0 "late runs"
assert_eq "$(jq -r .worker.hits <<< "$json")" "$(jq -r .worker.calls <<< "$json")" "worker hits"
assert_no_kprobes
