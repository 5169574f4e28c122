#!/usr/bin/env bash
# Fast detach of BPF kprobe links (debug.kprobes-fast-detach), against the
# stock detach path in the same boot:
#  - one link at a time, 200 attach/detach cycles with nothing else running,
#    at the function's entry (ftrace) and at a call-optimized site: detach
#    p99 and p50 at most 1/20 of stock's p50 (TCG wall time: a ratio;
#    1/5 on the debug flavour, see RATIO);
#  - 1000 links at 1000 distinct functions: detaching all of them takes
#    <= 1 s, no program runs after its detach returned plus one RCU grace
#    period (late runs, with a negative control in test_kpctl_links), and
#    every kprobe is gone shortly after;
#  - the stock path (knob 0) still works and still waits.
# TCG wall time is noisy when the host is busy (another QEMU, a build): a
# p99 over the limit is measured up to three times before it counts as a
# failure (all are logged). Every try is checked in full (hit accounting,
# mechanisms, then p99): a retry never skips an assertion. On a quiet host
# the first try passes.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
FAST=/proc/sys/debug/kprobes-fast-detach
[ -w "$FAST" ] || fail "no $FAST: the kernel lacks the fast-detach patch"
trap 'echo 1 > $FAST' EXIT
# How many times faster than stock a fast detach must be. Stock's detach
# waits for grace periods (80 to 120 ms here on either flavour); a fast one
# takes about 0.2 ms on the normal kernel, but on the debug flavour
# lockdep, kmemleak and the debug checks of every ftrace update and perf
# teardown bring it to 1 to 8 ms (200 links: 17.4x and 23x in two runs
# alone on the host, 13x with one other VM). 5x there still shows what the test is for: a
# detach that waited for a grace period would take at least one, a ratio
# of 1 or less.
RATIO=20
[ "$SFX" != -debug ] || RATIO=5

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
	# TCG wall time, so a ratio against stock in the same boot (absolute
	# figures depend on the host's load: another QEMU, a build): the fast
	# p99 must be at most 1/RATIO of stock's p50.
	s50=$(json_num "$stock" .detach_ms.p50)
	for try in 1 2 3; do
		fast=$(stress_detach "$site")
		note "$site fast, try $try: $(jq -c .detach_ms <<< "$fast")"
		check_stress "$fast" "$site" $mech "fast, try $try"
		p99=$(json_num "$fast" .detach_ms.p99)
		awk -v p="$p99" -v s="$s50" -v r=$RATIO 'BEGIN { exit !(p * r <= s) }' && break
		[ "$try" = 3 ] && fail "$site: detach p99 $p99 ms x $RATIO > stock p50 $s50 ms in 3 tries"
	done
	# (The p99 limit above implies the same for p50.)
	f50=$(json_num "$fast" .detach_ms.p50)
	note "$site: detach p50 ratio stock/fast $(jq -n --argjson s "$s50" --argjson f "$f50" \
		'if $f > 0 then $s / $f | floor else "inf" end')"
done
assert_no_kprobes

# 1000 links, fast: total detach <= 1 s, no late runs.
json=$("$KPCTL" -j links -n 1000) || fail "links -n 1000: $(jq -c '{late_runs, attached}' <<< "$json")"
note "1000 links: $(jq -c '{attached, attach_ms, detach_ms, late_runs, functions_hit, mechanisms}' <<< "$json")"
assert_eq "$(json_int "$json" .attached)" 1000 "links attached"
assert_eq "$(json_int "$json" .late_runs)" 0 "late runs"
assert_num "$(json_int "$json" .functions_hit)" '>' 10 "functions hit while attached"
total=$(json_num "$json" .detach_ms.total)
[ -n "$SFX" ] || assert_num "$total" '<=' 1000 "detaching 1000 links (ms)"
assert_no_kprobes

# The stock path, for the ratio (200 links keep the run short: ~75 ms each).
echo 0 > $FAST
stock=$("$KPCTL" -j links -n 200) || fail "stock links -n 200"
echo 1 > $FAST
fast=$("$KPCTL" -j links -n 200) || fail "fast links -n 200"
note "200 links stock: $(jq -c '{attach_ms, detach_ms}' <<< "$stock")"
note "200 links fast:  $(jq -c '{attach_ms, detach_ms}' <<< "$fast")"
s_total=$(json_num "$stock" .detach_ms.total)
f_total=$(json_num "$fast" .detach_ms.total)
assert_num "$(awk -v f="$f_total" -v r=$RATIO 'BEGIN { print f * r }')" '<=' "$s_total" \
	"200 links: fast detach $f_total ms x $RATIO vs stock $s_total ms"
assert_eq "$(json_int "$stock" .late_runs)" 0 "stock late runs"
assert_eq "$(json_int "$fast" .late_runs)" 0 "fast late runs"
assert_no_kprobes
echo "ok"
