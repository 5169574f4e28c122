#!/usr/bin/env bash
# The deferred destroy of closed perf kprobe events is bounded
# ("tracing/kprobes: Bound the deferred destroy of closed kprobe events").
# build/kpx-destroy-queue (selftests/detach/) opens EVENTS kprobe PMU events
# and closes them in a row on CPU 0 while kpx_hog, on CPU 1, holds RCU
# grace periods off with preemption disabled: the worker frees nothing, a
# close whose event the worker queued returns during the hold, and one
# that finds the queue full waits until the worker has freed a batch, after
# the hold. At most the bound (128) may return during the hold, and the
# next close must be the one that waited. Without the bound all EVENTS
# returned during it. The closes after that one are deferred again: they
# must take under a quarter of the time stock's synchronous closes take
# after theirs (the first version of the bound destroyed them synchronously).
# Afterwards no probe may be left. The stock close
# (kprobes/fast_detach off) is the negative control of the measure:
# every close waits, none returns during the hold.
. "$(dirname "$0")/../lib.sh"
TOOL=$BUILD/kpx-destroy-queue
FAST=$KNOB_FAST
BOUND=128
EVENTS=400
HOLD_MS=3000
[ -x "$TOOL" ] || fail "no $TOOL: make detach-tool"
[ -w "$FAST" ] || fail "no $FAST: the kernel lacks the series' test-only switch (a patch at its end)"
insmod "$MODDIR/kpx_hog.ko" cpu=1 || fail "insmod kpx_hog cpu=1"
trap 'echo 1 > $FAST; rmmod kpx_hog 2>/dev/null' EXIT

row() { # NAME: run the tool; its JSON in $json
	local rc
	json=$("$TOOL" -j -n $EVENTS --hold-ms $HOLD_MS); rc=$?
	note "$1: $json"
	assert_eq "$rc" 0 "$1: exit code (no probe left)"
	assert_eq "$(json_int "$json" .events)" "$EVENTS" "$1: events"
	assert_eq "$(json_int "$json" .left)" 0 "$1: probes left"
}

echo 1 > $FAST
row fast
n=$(json_int "$json" .done_in_hold)
assert_num "$n" '<=' $BOUND "fast: closes that returned during the hold (queued)"
assert_num "$n" '>=' 1 "fast: closes that returned during the hold (queued)"
assert_eq "$(json_int "$json" .first_late)" "$n" "fast: the first close after the hold is the next one"
# It found the queue full and waited for the hold to end.
assert_num "$(json_num "$json" .first_late_ms)" '>=' $((HOLD_MS / 3)) \
	"fast: ms the first close past the bound waited"
# The closes after that one: once the worker has room again, they are
# deferred too (0040 waits for a batch; its first version destroyed each
# of them synchronously, at stock's cost).
fast_rest=$(awk -v a="$(json_num "$json" .close_ms)" -v b="$(json_num "$json" .first_late_ms)" \
	'BEGIN { printf "%.3f", a - b }')

echo 0 > $FAST
row stock
assert_eq "$(json_int "$json" .done_in_hold)" 0 "stock: closes that returned during the hold"
assert_eq "$(json_int "$json" .first_late)" 0 "stock: the first close waited"
stock_rest=$(awk -v a="$(json_num "$json" .close_ms)" -v b="$(json_num "$json" .first_late_ms)" \
	'BEGIN { printf "%.3f", a - b }')
note "ms of the closes after the first late one: fast $fast_rest, stock $stock_rest"
assert_num "$(awk -v a="$fast_rest" 'BEGIN { print a * 4 }')" '<' "$stock_rest" \
	"fast: the closes after the first late one take less than a quarter of stock's"
echo 1 > $FAST
rmmod kpx_hog || fail "rmmod kpx_hog"
trap - EXIT
echo ok
