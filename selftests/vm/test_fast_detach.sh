#!/usr/bin/env bash
# Fast detach of BPF kprobe links (kprobes/fast_detach), against the
# stock detach path in the same boot:
#  - one link at a time, 200 attach/detach cycles with nothing else running,
#    at the function's entry (ftrace) and at a call-optimized site: exact
#    hit accounting and the mechanism in every cycle;
#  - what makes a detach fast, counted where the host's load cannot change
#    it: the grace-period waits the detaching thread makes inside the
#    detach (kpx-detach-race --count-gp). None on the fast path, through a
#    kprobe PMU link and a kprobe_multi link; at least one per detach on
#    the stock path (the negative control: the count would see a wait);
#  - 1000 links at 1000 distinct functions: no program runs after its
#    detach returned plus one RCU grace period (late runs, with a negative
#    control in test_kpctl_links), and every kprobe is gone shortly after;
#  - the stock path (knob 0) still works and still waits.
# Latencies are TCG wall time, which depends on the host (another QEMU, a
# build): they are printed as notes, not asserted (make bench measures
# them against stock in one run).
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
FAST=$KNOB_FAST
[ -w "$FAST" ] || fail "no $FAST: the kernel lacks the series' test-only switch (a patch at its end)"
trap 'echo 1 > $FAST' EXIT
stress_detach() { # SITE -> JSON of kpctl stress (200 cycles, no workers)
	"$KPCTL" -j stress -n 200 -k 10 -W 0 -s "$1" ||
		fail_test "stress at $1 failed"
}
# The correctness of one stress run: exact hit accounting, the mechanism in
# every cycle.
check_stress() { # JSON SITE MECHANISM WHAT
	assert_eq "$(json_int "$1" .violations)" 0 "$2 ($4): hit accounting"
	assert_eq "$(json_int "$1" ".sites[0].mechanisms.$3")" 200 "$2 ($4): $3 every cycle"
}

for site in "$F" "$F+$GETPGID_SINGLE"; do
	case $site in *+*) mech=callopt ;; *) mech=ftrace ;; esac
	echo 0 > $FAST
	stock=$(stress_detach "$site")
	note "$site stock: $(jq -c .detach_ms <<< "$stock")"
	check_stress "$stock" "$site" $mech stock
	echo 1 > $FAST
	fast=$(stress_detach "$site")
	note "$site fast: $(jq -c .detach_ms <<< "$fast")"
	check_stress "$fast" "$site" $mech fast
	s50=$(json_num "$stock" .detach_ms.p50)
	f50=$(json_num "$fast" .detach_ms.p50)
	note "$site: detach p50 ratio stock/fast $(jq -n --argjson s "$s50" --argjson f "$f50" \
		'if $f > 0 then $s / $f | floor else "inf" end') (TCG wall time, not asserted)"
done
assert_no_kprobes

# Grace-period waits inside the detach, per path: none fast, some stock.
RACE=$BUILD/kpx-detach-race
[ -x "$RACE" ] || fail "no $RACE: make detach-tool"
gp_row() { # KNOB N PATH [ARGS...] -> the total of grace-period waits
	local knob=$1 n=$2 path=$3 json; shift 3
	echo "$knob" > $FAST
	json=$("$RACE" -j --count-gp -n "$n" -l 0 -w 0 -p "$path" "$@") ||
		fail_test "kpx-detach-race $path $* (knob $knob): $json"
	note "knob $knob, $path $*: $(jq -c '{detach_ms, gp_waits}' <<< "$json")" >&2
	assert_eq "$(json_int "$json" .rounds_done)" "$n" "$path $* (knob $knob): rounds" >&2
	json_int "$json" .gp_waits_total
}
for args in "perf -f $F" "perf -f $F -o $GETPGID_SINGLE" "multi -f $F"; do
	# shellcheck disable=SC2086
	assert_eq "$(gp_row 1 50 $args)" 0 "$args: grace-period waits in 50 fast detaches"
	# shellcheck disable=SC2086
	assert_num "$(gp_row 0 10 $args)" '>=' 10 "$args: grace-period waits in 10 stock detaches"
done
echo 1 > $FAST
assert_no_kprobes

# 1000 links, fast: no late runs, nothing left.
json=$("$KPCTL" -j links -n 1000) || fail "links -n 1000: $(jq -c '{late_runs, attached}' <<< "$json")"
note "1000 links: $(jq -c '{attached, attach_ms, detach_ms, late_runs, functions_hit, mechanisms}' <<< "$json")"
assert_eq "$(json_int "$json" .attached)" 1000 "links attached"
assert_eq "$(json_int "$json" .late_runs)" 0 "late runs"
assert_num "$(json_int "$json" .functions_hit)" '>' 10 "functions hit while attached"
assert_no_kprobes

# The stock path still works, and neither has late runs (200 links: ~75 ms each on stock).
echo 0 > $FAST
stock=$("$KPCTL" -j links -n 200) || fail "stock links -n 200"
echo 1 > $FAST
fast=$("$KPCTL" -j links -n 200) || fail "fast links -n 200"
note "200 links stock: $(jq -c '{attach_ms, detach_ms}' <<< "$stock")"
note "200 links fast:  $(jq -c '{attach_ms, detach_ms}' <<< "$fast")"
note "200 links, detach total: stock $(json_num "$stock" .detach_ms.total) ms," \
	"fast $(json_num "$fast" .detach_ms.total) ms (TCG wall time, not asserted)"
assert_eq "$(json_int "$stock" .late_runs)" 0 "stock late runs"
assert_eq "$(json_int "$fast" .late_runs)" 0 "fast late runs"
assert_no_kprobes
echo "ok"
