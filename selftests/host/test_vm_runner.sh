#!/usr/bin/env bash
# scripts/vm/vm-run: passes the command's exit status through, fails a run whose
# kernel log shows a splat (even when the command succeeded, and even when it
# cleared the ring buffer), keeps the whole kernel log, times out with a
# clear message, and works from a checkout under /tmp. scripts/check/splat-scan
# tells which test each splat belongs to, and selftests/run fails the test
# during which the kernel splatted (selftests/host/runner-tests).
. "$(dirname "$0")/../lib.sh"
VMRUN=$KPX_ROOT/scripts/vm/vm-run
# The run folder of the last assert_rc, from vm-run's first line
# (build/vm/last may point to another VM started meanwhile).
run_dir() { sed -n 's/^vm-run: .* logs in \(\S*\)$/\1/p' <<< "$out" | head -n1; }

# No test or tool clears the kernel log (dmesg -C/-c, klogctl, syslog(2)
# actions 4 and 5): it would hide a splat from whatever reads the ring
# buffer. Only this test and selftests/host/runner-tests do, on purpose.
clears=$(cd "$KPX_ROOT" && grep -rnIE \
	'dmesg\b[^|;&#]*[[:space:]](-[a-zA-Z]*[cC][a-zA-Z]*|--clear|--read-clear)\b|klogctl|SYSLOG_ACTION_(READ_)?CLEAR|\bsyslog\([[:space:]]*[45]\b' \
	selftests scripts loader bench 2>/dev/null |
	grep -vE '^selftests/host/(runner-tests/|test_vm_runner\.sh:)' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(#|//|/?\*)')
[ -z "$clears" ] || fail "the kernel log is cleared here (read what follows kmsg_mark instead): $clears"

assert_rc 0 "$VMRUN" --timeout 120 -- true
assert_rc 7 "$VMRUN" --timeout 120 -- sh -c 'exit 7'
# The guest writes where the host reads, and sees the project read-only.
assert_rc 0 "$VMRUN" --timeout 120 -- sh -c 'echo hello > "$KPX_OUT/f"; ! touch README.md 2>/dev/null'
assert_eq "$(cat "$(run_dir)/f")" hello "file written by the guest"

# A WARNING in the kernel log fails the run, and the offending lines are shown.
assert_rc 126 "$VMRUN" --timeout 120 -- insmod "$MODDIR/kpx_warn.ko"
assert_match "$out" "KERNEL SPLAT" "splat report"
assert_match "$out" "WARNING:.*kpx_warn" "the WARNING line"
# WARNING-level messages reach the console too (loglevel above 4).
grep -q 'WARNING:.*kpx_warn' "$(run_dir)/console.log" || fail "the WARNING is not on the console"
# The same splat with --allow-splat: the command's own status.
assert_rc 0 "$VMRUN" --allow-splat --timeout 120 -- insmod "$MODDIR/kpx_warn.ko"

# A WARNING, then the ring buffer cleared, then success: still 126, and the
# streamed kernel log still holds the WARNING, up to vm-init's end marker.
assert_rc 126 "$VMRUN" --smp 1 --timeout 120 -- \
	bash -c 'insmod build/modules/kpx_warn.ko; sleep 1; dmesg -C; exit 0'
assert_match "$out" "WARNING:.*kpx_warn" "the WARNING line after dmesg -C"
d=$(run_dir)
grep -q 'WARNING:.*kpx_warn' "$d/kmsg.log" || fail "kmsg.log lost the WARNING after dmesg -C"
grep -q 'kpx-vm: command end rc=0' "$d/kmsg.log" || fail "kmsg.log has no end marker: incomplete"
[ ! -e "$d/kmsg-final.log" ] || fail "vm-init could not complete kmsg.log (kmsg-final.log exists)"

# A command that never ends.
assert_rc 124 "$VMRUN" --timeout 25 -- sleep 600
assert_match "$out" "TIMEOUT" "timeout message"

# A checkout under /tmp (CI clones wherever it likes).
tmp=$(mktemp -d /tmp/kpx-clone.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build"
cp -r "$KPX_ROOT/scripts" "$tmp/"
cp "$BUILD/bzImage" "$tmp/build/"
assert_rc 0 "$tmp/scripts/vm/vm-run" --timeout 120 -- sh -c '[ "$PWD" = '"$tmp"' ] && [ -x scripts/vm/vm-run ] && echo seen > "$KPX_OUT/f"'
assert_eq "$(cat "$(run_dir)/f")" seen "guest saw the checkout under /tmp"

# splat-scan --by-test: each splat line goes to what ran when the kernel
# printed it, from the markers of vm-init and vm-runner and the printk
# timestamps, in kmsg.log and on the console alike.
printf '%s\n' \
	'[    0.100000] WARNING: at boot' \
	'[    1.000000] kpx-vm: command begin' \
	'[    1.500000] BUG: before the first test' \
	'[    2.000000] kpx-test: begin test_a' \
	'[    2.500000] WARNING: CPU: 0 PID: 1 in test_a' \
	'[    3.000000] kpx-test: end test_a rc=0' \
	'[    3.100000] WARNING: between test_a and test_b' \
	'[    4.000000] kpx-test: begin test_b' \
	'[    4.500000] nothing to see' \
	'[    5.000000] kpx-test: end test_b rc=1' \
	'[    6.000000] kpx-vm: command end rc=0 id=1-2' \
	'[    6.500000] Oops: at shutdown' > "$tmp/kmsg.log"
printf '%s\n' 'WARNING: not a kernel line' '[    2.600000] WARNING: console, in test_a' > "$tmp/console.log"
assert_rc 1 "$KPX_ROOT/scripts/check/splat-scan" --by-test "$tmp/kmsg.log" "$tmp/console.log"
want=$(printf '%s\n' \
	'boot kmsg.log: [    0.100000] WARNING: at boot' \
	'command kmsg.log: [    1.500000] BUG: before the first test' \
	'test:test_a kmsg.log: [    2.500000] WARNING: CPU: 0 PID: 1 in test_a' \
	'after:test_a kmsg.log: [    3.100000] WARNING: between test_a and test_b' \
	'shutdown kmsg.log: [    6.500000] Oops: at shutdown' \
	'test:test_a console.log: [    2.600000] WARNING: console, in test_a')
assert_eq "$out" "$want" "splat-scan --by-test"
assert_rc 0 "$KPX_ROOT/scripts/check/splat-scan" --by-test "$tmp/no-such.log"

# selftests/run on in-VM tests that make the kernel WARN and exit 0
# (selftests/host/runner-tests, not part of the suite): exactly those fail,
# each with its splat, and so does vm/kernel-log-clean; the clean tests
# before and after them pass.
logs=$BUILD/test-logs-runner-selftest
assert_rc 1 "$KPX_ROOT/selftests/run" --vm-dir "$KPX_ROOT/selftests/host/runner-tests" --logdir "$logs"
note "selftests/run on runner-tests:"
sed 's/^/#   /' <<< "$out"
nl=$'\n'
assert_match "$out" "(^|$nl)PASS vm/test_1_clean " "clean test before the splats"
assert_match "$out" "(^|$nl)FAIL vm/test_2_warn " "test with a WARNING"
assert_match "$out" "(^|$nl)FAIL vm/test_3_warn_then_clear " "test with a WARNING, then dmesg -C"
assert_match "$out" "(^|$nl)PASS vm/test_4_clean " "clean test after the splats"
assert_match "$out" "(^|$nl)FAIL vm/kernel-log-clean " "kernel-log-clean"
assert_match "$out" "$nl  vm/test_2_warn: kmsg.log: [^$nl]*WARNING:[^$nl]*kpx_warn" \
	"splat attributed to test_2_warn"
assert_match "$out" "$nl  vm/test_3_warn_then_clear: kmsg.log: [^$nl]*WARNING:[^$nl]*kpx_warn" \
	"splat attributed to test_3_warn_then_clear"
if grep -E '^  (vm/test_[14]_clean|boot|between|vm-runner|after)' <<< "$out"; then
	fail "a splat attributed to something else than test_2 and test_3 (above)"
fi
assert_match "$out" "2 passed, 3 failed" "summary"
rm -rf "$logs"
