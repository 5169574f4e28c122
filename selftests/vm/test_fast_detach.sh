#!/usr/bin/env bash
# Fast detach of BPF kprobe links (debug.kprobes-fast-detach), against the
# stock detach path in the same boot:
#  - one link at a time, 200 attach/detach cycles with nothing else running,
#    at the function's entry (ftrace) and at a call-optimized site: detach
#    p99 <= 1 ms, and far below stock's;
#  - 1000 links at 1000 distinct functions: detaching all of them takes
#    <= 1 s, no program runs after its detach returned plus one RCU grace
#    period (late runs, with a negative control in test_kpctl_links), and
#    every kprobe is gone shortly after;
#  - the stock path (knob 0) still works and still waits.
# TCG wall time is noisy when the host is busy (another QEMU, a build): a
# p99 over the limit is measured up to three times before it counts as a
# failure (all are logged). On a quiet host the first try passes.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
FAST=/proc/sys/debug/kprobes-fast-detach
[ -w "$FAST" ] || fail "no $FAST: the kernel lacks the fast-detach patch"
trap 'echo 1 > $FAST' EXIT

stress_detach() { # SITE -> JSON of kpctl stress (200 cycles, no workers)
	"$KPCTL" -j stress -n 200 -k 10 -W 0 -s "$1" ||
		fail "stress at $1 failed"
}

for site in "$F" "$F+$GETPGID_SINGLE"; do
	case $site in *+*) mech=callopt ;; *) mech=ftrace ;; esac
	echo 0 > $FAST
	stock=$(stress_detach "$site")
	echo 1 > $FAST
	fast=$(stress_detach "$site")
	note "$site stock: $(jq -c .detach_ms <<< "$stock")"
	note "$site fast:  $(jq -c .detach_ms <<< "$fast")"
	for j in "$stock" "$fast"; do
		assert_eq "$(jq -r .violations <<< "$j")" 0 "$site: hit accounting"
		assert_eq "$(jq -r ".sites[0].mechanisms.$mech" <<< "$j")" 200 "$site: $mech every cycle"
	done
	# The absolute limits are for the normal flavour; the debug kernel
	# (lockdep, debug objects, ...) is several times slower per call and
	# only has to keep the ratio to stock.
	if [ -n "$SFX" ]; then
		note "$SFX flavour: no absolute p99 limit"
	else
	for try in 2 3; do
		jq -e '.detach_ms.p99 <= 1' <<< "$fast" > /dev/null && break
		fast=$(stress_detach "$site")
		note "$site fast, try $try: $(jq -c .detach_ms <<< "$fast")"
	done
	jq -e '.detach_ms.p99 <= 1' <<< "$fast" > /dev/null ||
		fail "$site: detach p99 $(jq .detach_ms.p99 <<< "$fast") ms > 1 ms in 3 tries"
	fi
	# Stock waits for grace periods: tens of ms here. At least 20x slower.
	jq -e --argjson s "$(jq .detach_ms.p50 <<< "$stock")" '.detach_ms.p50 * 20 <= $s' \
		<<< "$fast" > /dev/null || fail "$site: fast p50 not 20x below stock's"
	note "$site: detach p50 ratio stock/fast $(jq -n --argjson s "$(jq .detach_ms.p50 <<< "$stock")" \
		--argjson f "$(jq .detach_ms.p50 <<< "$fast")" '$s / $f | floor')"
done
assert_no_kprobes

# 1000 links, fast: total detach <= 1 s, no late runs.
json=$("$KPCTL" -j links -n 1000) || fail "links -n 1000: $(jq -c '{late_runs, attached}' <<< "$json")"
note "1000 links: $(jq -c '{attached, attach_ms, detach_ms, late_runs, functions_hit, mechanisms}' <<< "$json")"
assert_eq "$(jq -r .attached <<< "$json")" 1000 "links attached"
assert_eq "$(jq -r .late_runs <<< "$json")" 0 "late runs"
[ "$(jq -r .functions_hit <<< "$json")" -gt 10 ] || fail "too few functions hit while attached"
[ -n "$SFX" ] || jq -e '.detach_ms.total <= 1000' <<< "$json" > /dev/null ||
	fail "detaching 1000 links took $(jq .detach_ms.total <<< "$json") ms"
assert_no_kprobes

# The stock path, for the ratio (200 links keep the run short: ~75 ms each).
echo 0 > $FAST
stock=$("$KPCTL" -j links -n 200) || fail "stock links -n 200"
echo 1 > $FAST
fast=$("$KPCTL" -j links -n 200) || fail "fast links -n 200"
note "200 links stock: $(jq -c '{attach_ms, detach_ms}' <<< "$stock")"
note "200 links fast:  $(jq -c '{attach_ms, detach_ms}' <<< "$fast")"
jq -e --argjson s "$(jq .detach_ms.total <<< "$stock")" '.detach_ms.total * 20 <= $s' \
	<<< "$fast" > /dev/null || fail "200 links: fast detach not 20x below stock's"
assert_eq "$(jq -r .late_runs <<< "$stock")" 0 "stock late runs"
assert_no_kprobes
echo "ok"
