#!/usr/bin/env bash
# kpctl stress: attach/detach in a loop while workers hit the sites; the
# controller's calls are counted exactly, the workers' hits lie within the
# bounds, latencies are reported, and nothing is left behind.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
N=20
K=50
unreached=$(kpctl_j explain "$F" |
	jq -r '[.sites[] | select(.mechanism == "callopt")] | last | .offset') ||
	fail "explain failed"
json=$(kpctl_j stress -n $N -k $K -W 2 --yield \
	-s "$F,$F+$GETPGID_MID" -s "$F+$GETPGID_SINGLE" -s "$F+$unreached") ||
	fail "stress: $json"
note "$json"
num() { json_num "$json" "$1"; }
int() { json_int "$json" "$1"; }
assert_eq "$(int .iterations)" $N "intervals"
assert_eq "$(int .violations)" 0 "violations"
assert_eq "$(int '.sites | length')" 4 "sites"
assert_eq "$(int .attach_ms.n)" $((4 * N)) "attach latencies"
assert_eq "$(int .detach_ms.n)" $((4 * N)) "detach latencies"
for l in attach_ms detach_ms; do
	assert_num "$(num .$l.p50)" '<=' "$(num .$l.p99)" "$l: p50 <= p99"
	assert_num "$(num .$l.p99)" '<=' "$(num .$l.max)" "$l: p99 <= max"
done
assert_num "$(int .worker_calls)" '>' 0 "worker calls"
for i in 0 1 2; do
	assert_eq "$(num ".sites[$i].hits_per_call")" 1 "hits per call at site $i"
	assert_eq "$(int ".sites[$i].ctrl_hits")" $((N * K)) "controller hits at site $i"
	lower=$(int ".sites[$i].worker_lower") upper=$(int ".sites[$i].worker_upper")
	whits=$(int ".sites[$i].worker_hits")
	assert_num "$lower" '<=' "$whits" "site $i: worker hits above the lower bound"
	assert_num "$whits" '<=' "$upper" "site $i: worker hits below the upper bound"
	assert_eq "$(int ".sites[$i].hits")" $(( $(int ".sites[$i].ctrl_hits") + whits )) \
		"site $i: hits = controller hits + worker hits"
done
assert_eq "$(num .sites[3].hits_per_call)" 0 "hits per call at the unreached site"
assert_eq "$(int .sites[3].hits)" 0 "hits at the unreached site"
assert_eq "$(int '.sites[2].mechanisms.callopt')" $N "callopt at +$GETPGID_SINGLE"
assert_eq "$(int '.sites[0].mechanisms.ftrace')" $N "ftrace at the entry"
assert_no_kprobes

# Default sites, pinned workers, text output.
out=$("$KPCTL" stress -n 5 -k 10 -W 2 --pin --hold 5) || fail "stress defaults: $out"
note "$out"
assert_match "$out" "hit accounting exact" "text verdict"
assert_match "$out" "attach ms: p50" "attach percentiles"
assert_match "$out" "$F\+0x[0-9a-f]+" "default mid-function site"
assert_no_kprobes

# --duration stops early.
json=$(kpctl_j stress -n 100000 -d 2 -W 1 -s "$F+$GETPGID_SINGLE") || fail "stress -d: $json"
assert_num "$(int .iterations)" '<' 100000 "iterations with --duration 2"
assert_no_kprobes

# Bad input: usage errors, a site that does not exist, nothing left behind.
assert_rc 2 "$KPCTL" stress -n 0
assert_rc 2 "$KPCTL" stress -k 0
assert_rc 2 "$KPCTL" stress -W x
assert_rc 2 "$KPCTL" stress extra
assert_rc 2 "$KPCTL" stress -n 2 -s "$F+$GETPGID_SINGLE" -s kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown site message"
assert_no_kprobes
assert_rc 0 "$KPCTL" stress --help
assert_match "$out" "c\*lower" "stress --help explains the check"
