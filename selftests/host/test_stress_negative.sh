#!/usr/bin/env bash
# Negative control of the preemption stress test: with the test knob
# kprobes/callopt_early_free on, unoptimizing a callopt probe poisons and
# frees its detour buffer without waiting for a grace period. The same
# stress run that passes in vm/test_stress must then fail: a crash, a kernel
# splat, or corruption it detects. If it passes, the stress test proves
# nothing.
. "$(dirname "$0")/../lib.sh"
KNOB=/sys/kernel/debug/kprobes/callopt_early_free
start=$(date +%s.%N)
"$KPX_ROOT/scripts/vm/vm-run" --smp 4 --mem 2048 --timeout 900 -- bash -c \
	"[ -e $KNOB ] || exit 99; echo 1 > $KNOB; selftests/stress/run 3000" > "$BUILD/negative.log" 2>&1
rc=$?
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
run=$(readlink -f "$BUILD/vm/last")
note "vm-run exit $rc after ${secs}s; logs in $run"
grep -E 'int3|Oops|BUG|general protection|mismatch|late|KERNEL SPLAT' "$BUILD/negative.log" | head -5
case "$rc" in
99) fail "kernel without $KNOB (CONFIG_KPROBES_CALLOPT_TEST)" ;;
0) fail "the stress test passed with buffers freed early: it cannot catch the bug" ;;
124) fail "timed out instead of failing" ;;
125|126) ;;	# the guest crashed, or the kernel log shows a splat
1) grep -qE '"mismatches":[1-9]|"late_runs":[1-9]|ran [0-9]+ times after detach' "$BUILD/negative.log" ||
	fail "the stress run failed for another reason: $(tail -5 "$BUILD/negative.log")" ;;
*) fail "unexpected vm-run exit $rc: $(tail -5 "$BUILD/negative.log")" ;;
esac
echo "negative control caught after ${secs}s (vm-run exit $rc)"
