#!/usr/bin/env bash
# What a detach means (docs/backend.md, "Fast detach"): once it returns,
# the program has stopped and cannot start again, as on stock. A counting
# program on getpgid(), which a worker thread on the other CPU calls in a
# loop; each round detaches, reads the count, closes the object, waits
# 100 ms and reads again: equal in every one of 100 rounds, per detach
# path, on the default (fast) path. The negative control reads the count
# before detaching instead: every round must see it grow, or the check
# could not have failed.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
RACE=$BUILD/kpx-detach-race
FAST=$KNOB_FAST
ROUNDS=${KPX_DETACH_ROUNDS:-100}
[ -x "$RACE" ] || fail "no $RACE: make detach-tool"
[ "$(knob $FAST)" = 1 ] || fail "$FAST is not 1: the default must be the fast path"

for path in perf link-detach legacy multi; do
	json=$("$RACE" -j -n "$ROUNDS" -l 0 -w 100 -p "$path" -f "$F"); rc=$?
	note "$path: $json"
	assert_eq "$(json_bool "$json" .error)" false "$path: error"
	assert_eq "$(json_int "$json" .rounds_done)" "$ROUNDS" "$path: rounds done"
	assert_eq "$(json_int "$json" .rounds_ran)" "$ROUNDS" "$path: rounds counted before detach"
	assert_eq "$(json_int "$json" .in_flight)" 0 "$path: runs in progress when detach returned"
	assert_eq "$(json_int "$json" .late_starts)" 0 "$path: count grew in the 100 ms after detach"
	assert_eq "$(json_int "$json" .late_ends)" 0 "$path: runs ended after detach"
	assert_eq "$rc" 0 "$path: exit code"
done

# Negative control: the same reads around no detach must see every round grow.
for path in perf multi; do
	json=$("$RACE" -j -n 10 -l 0 -w 100 -p "$path" -f "$F" --control); rc=$?
	note "$path control: $json"
	assert_eq "$(json_bool "$json" .error)" false "$path control: error"
	assert_eq "$(json_int "$json" .late_starts)" 10 "$path control: rounds whose count grew"
	assert_eq "$rc" 1 "$path control: exit code"
done
assert_no_kprobes
echo "ok"
