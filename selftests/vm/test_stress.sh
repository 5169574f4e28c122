#!/usr/bin/env bash
# Preemption stress: links attached and detached at an ftrace, a callopt and
# a jump-optimized site while preemptible kthreads on every CPU and a user
# thread hit them. No hit may run twice or with corrupted registers, no
# program may run after its detach plus a grace period, the worker's probe
# counts exactly, every site is hit, and the kernel log stays clean (the
# runner checks that).
. "$(dirname "$0")/../lib.sh"
CYCLES=${KPX_STRESS_CYCLES:-1000}
KNOB=/sys/kernel/debug/kprobes/callopt_early_free
# The negative control (host/test_stress_negative) turns this knob on; here it
# must exist, so that both runs use the same kernel, and be off.
[ -e $KNOB ] || fail "no $KNOB (CONFIG_KPROBES_CALLOPT_TEST)"
assert_eq "$(cat $KNOB)" N "early free knob"
json=$("$KPX_ROOT/selftests/stress/run" "$CYCLES") || fail "stress run failed: $json"
note "$json"
field() { jq -r "$1" <<< "$json"; }
assert_eq "$(field .cycles)" "$CYCLES" "cycles"
assert_eq "$(field .mismatches)" 0 "sequence mismatches"
assert_eq "$(field .late_runs)" 0 "programs run after detach + grace period"
assert_eq "$(field .worker.hits)" "$(field .worker.calls)" "worker hits vs calls"
[ "$(field .worker.calls)" -gt 0 ] || fail "the worker made no calls"
assert_eq "$(field '.sites[0].mechanisms.ftrace // 0 | . > 0')" true "entry site on ftrace"
assert_eq "$(field '.sites[1].mechanisms.callopt // 0 | . > 0')" true "single site call-optimized"
for i in 0 1 2; do
	[ "$(field ".sites[$i].hits")" -gt 0 ] || fail "site $i never hit"
done
note "cycles $CYCLES, hits $(field .hits), worker $(field .worker.calls), detach p50 $(field .detach_ms.p50) ms p99 $(field .detach_ms.p99) ms"
assert_no_kprobes
