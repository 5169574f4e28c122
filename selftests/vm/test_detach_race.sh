#!/usr/bin/env bash
# A BPF kprobe program detached, and its object closed, while it runs on
# another CPU (build/kpx-detach-race, selftests/detach/): per attach path,
# ROUNDS rounds of a program in a bpf_loop() of loads that fault and are
# fixed up through its exception table. A detach that let the program's
# last reference go while it ran took its ksym and extable with it: the
# next fault oopsed in the JIT image (the kernel-log check fails the test).
# Each round must also keep stock's meaning: when the detach returned, no
# run was in progress (in_flight 0), and none started or ended afterwards.
#
# Rows: the kprobe PMU link closed (libbpf's default), at the entry and at
# a call-optimized site; BPF_LINK_DETACH; a tracefs kprobe event with
# PERF_EVENT_IOC_SET_BPF (bcc, libbpf's legacy mode); the faulting program
# reached by a tail call; kprobe_multi at the entry and at an offset; and
# the stock detach (kprobes/fast_detach off), fewer rounds (each waits
# for grace periods).
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
RACE=$BUILD/kpx-detach-race
FAST=$KNOB_FAST
ROUNDS=${KPX_DETACH_ROUNDS:-100}
[ -x "$RACE" ] || fail "no $RACE: make detach-tool"
[ -w "$FAST" ] || fail "no $FAST: the kernel lacks the series' test-only switch (a patch at its end)"
trap 'echo 1 > $FAST' EXIT

row() { # ROUNDS PATH [ARGS...]
	local n=$1 path=$2 json rc; shift 2
	json=$("$RACE" -j -n "$n" -p "$path" "$@"); rc=$?
	note "$path $*: $json"
	assert_eq "$(json_bool "$json" .error)" false "$path $*: error"
	assert_eq "$(json_int "$json" .rounds_done)" "$n" "$path $*: rounds done"
	assert_eq "$(json_int "$json" .rounds_ran)" "$n" "$path $*: rounds where the program ran before detach"
	assert_eq "$(json_int "$json" .in_flight)" 0 "$path $*: runs in progress when detach returned"
	assert_eq "$(json_int "$json" .late_starts)" 0 "$path $*: runs started after detach"
	assert_eq "$(json_int "$json" .late_ends)" 0 "$path $*: runs ended after detach"
	assert_eq "$rc" 0 "$path $*: exit code"
}

echo 1 > $FAST
row "$ROUNDS" perf -f "$F"
row "$ROUNDS" perf -f "$F" -o "$GETPGID_SINGLE"
row "$ROUNDS" link-detach -f "$F"
row "$ROUNDS" legacy -f "$F"
row "$ROUNDS" tail -f "$F"
row "$ROUNDS" multi -f "$F"
row "$ROUNDS" multi-offset -f "$F" -o "$GETPGID_SINGLE"
echo 0 > $FAST
row 10 perf -f "$F"
row 10 multi -f "$F"
echo 1 > $FAST
assert_no_kprobes
echo "ok"
