#!/usr/bin/env bash
# Negative control of the preemption stress test: with the test knob
# kprobes/callopt_early_free on, unoptimizing a callopt probe poisons and
# frees its detour buffer without waiting for a grace period. The same
# stress run that passes in vm/test_stress must then fail: a crash, a kernel
# splat, or corruption it detects. If it passes, the stress test proves
# nothing. A crash counts only if it is the one the control causes: a trap
# (int3 on the poison, or a fault, GPF or invalid opcode in a freed page)
# whose RIP is in no symbol. Seen on 2026-12-07: without patch 0047, an
# int3 in the poisoned buffer ("Oops: int3", "RIP: 0010:0xffffffffc020907d",
# Code all cc); with it, an instruction fetch at "RIP: 0010:0x64", a jump to
# no code (most likely a return address left wrong by another probe's code
# in the reused slot; not traced further). Any other crash, one whose RIP
# has a symbol, fails the test.
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
125|126)	# the guest crashed, or the kernel log shows a splat: in the buffer?
	con=$run/console.log
	[ -r "$con" ] || fail "vm-run exit $rc and no $con"
	grep -qE 'Oops: int3|BUG: unable to handle page fault|#PF: supervisor instruction fetch|general protection fault|Oops: invalid opcode' "$con" ||
		fail "vm-run exit $rc without the trap a freed buffer causes: $(grep -m3 -E 'BUG|Oops|WARNING|RIP' "$con")"
	grep -qE 'RIP: 0010:0x[0-9a-f]+$' "$con" ||
		fail "a trap, but not in a freed buffer (its RIP has a symbol): $(grep -m2 'RIP:' "$con")"
	note "trapped in a freed buffer: $(grep -m1 -E 'RIP: 0010:0x' "$con")" ;;
1) grep -qE '"mismatches":[1-9]|"late_runs":[1-9]|ran [0-9]+ times after detach' "$BUILD/negative.log" ||
	fail "the stress run failed for another reason: $(tail -5 "$BUILD/negative.log")" ;;
*) fail "unexpected vm-run exit $rc: $(tail -5 "$BUILD/negative.log")" ;;
esac
echo "negative control caught after ${secs}s (vm-run exit $rc)"
