#!/usr/bin/env bash
# kpctl stress: attach/detach in a loop while workers hit the sites; the
# controller's calls are counted exactly, the workers' hits lie within the
# bounds, latencies are reported, and nothing is left behind.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
N=20
K=50
unreached=$("$KPCTL" -j explain "$F" |
	jq -r '[.sites[] | select(.mechanism == "callopt")] | last | .offset') ||
	fail "explain failed"
json=$("$KPCTL" -j stress -n $N -k $K -W 2 --yield \
	-s "$F,$F+$GETPGID_MID" -s "$F+$GETPGID_SINGLE" -s "$F+$unreached") ||
	fail "stress: $json"
note "$json"
field() { jq -r "$1" <<< "$json"; }
assert_eq "$(field .iterations)" $N "intervals"
assert_eq "$(field .violations)" 0 "violations"
assert_eq "$(field '.sites | length')" 4 "sites"
assert_eq "$(field .attach_ms.n)" $((4 * N)) "attach latencies"
assert_eq "$(field .detach_ms.n)" $((4 * N)) "detach latencies"
jq -e '.attach_ms.p50 <= .attach_ms.p99 and .attach_ms.p99 <= .attach_ms.max and
	.detach_ms.p50 <= .detach_ms.p99 and .detach_ms.p99 <= .detach_ms.max' <<< "$json" \
	> /dev/null || fail "percentiles out of order"
[ "$(field .worker_calls)" -gt 0 ] || fail "workers made no calls"
for i in 0 1 2; do
	assert_eq "$(field ".sites[$i].hits_per_call")" 1 "hits per call at site $i"
	assert_eq "$(field ".sites[$i].ctrl_hits")" $((N * K)) "controller hits at site $i"
	jq -e --argjson i $i '.sites[$i] | .worker_lower <= .worker_hits and
		.worker_hits <= .worker_upper and .hits == .ctrl_hits + .worker_hits' \
		<<< "$json" > /dev/null || fail "site $i outside its bounds"
done
assert_eq "$(field .sites[3].hits_per_call)" 0 "hits per call at the unreached site"
assert_eq "$(field .sites[3].hits)" 0 "hits at the unreached site"
assert_eq "$(field '.sites[2].mechanisms.callopt')" $N "callopt at +$GETPGID_SINGLE"
assert_eq "$(field '.sites[0].mechanisms.ftrace')" $N "ftrace at the entry"
assert_no_kprobes

# Default sites, pinned workers, text output.
out=$("$KPCTL" stress -n 5 -k 10 -W 2 --pin --hold 5) || fail "stress defaults: $out"
note "$out"
assert_match "$out" "hit accounting exact" "text verdict"
assert_match "$out" "attach ms: p50" "attach percentiles"
assert_match "$out" "$F\+0x[0-9a-f]+" "default mid-function site"
assert_no_kprobes

# --duration stops early.
json=$("$KPCTL" -j stress -n 100000 -d 2 -W 1 -s "$F+$GETPGID_SINGLE") || fail "stress -d: $json"
[ "$(field .iterations)" -lt 100000 ] || fail "--duration did not stop the run"
assert_no_kprobes

# Bad input: usage errors, a site that does not exist, nothing left behind.
assert_rc 2 "$KPCTL" stress -n 0
assert_rc 2 "$KPCTL" stress -k 0
assert_rc 2 "$KPCTL" stress -W x
assert_rc 2 "$KPCTL" stress extra
assert_rc 1 "$KPCTL" stress -n 2 -s "$F+$GETPGID_SINGLE" -s kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown site message"
assert_no_kprobes
assert_rc 0 "$KPCTL" stress --help
assert_match "$out" "c\*lower" "stress --help explains the check"
