#!/usr/bin/env bash
# scripts/vm-run: passes the command's exit status through, fails a run whose
# kernel log shows a splat (even when the command succeeded), times out with
# a clear message, and works from a checkout under /tmp.
. "$(dirname "$0")/../lib.sh"
VMRUN=$KPX_ROOT/scripts/vm-run

assert_rc 0 "$VMRUN" --timeout 120 -- true
assert_rc 7 "$VMRUN" --timeout 120 -- sh -c 'exit 7'
# The guest writes where the host reads, and sees the project read-only.
assert_rc 0 "$VMRUN" --timeout 120 -- sh -c 'echo hello > "$KPX_OUT/f"; ! touch README.md 2>/dev/null'
assert_eq "$(cat "$KPX_ROOT/build/vm/last/f")" hello "file written by the guest"

# A WARNING in the kernel log fails the run, and the offending lines are shown.
assert_rc 126 "$VMRUN" --timeout 120 -- insmod "$MODDIR/kpx_warn.ko"
assert_match "$out" "KERNEL SPLAT" "splat report"
assert_match "$out" "WARNING:.*kpx_warn" "the WARNING line"
# The same splat with --allow-splat: the command's own status.
assert_rc 0 "$VMRUN" --allow-splat --timeout 120 -- insmod "$MODDIR/kpx_warn.ko"

# A command that never ends.
assert_rc 124 "$VMRUN" --timeout 25 -- sleep 600
assert_match "$out" "TIMEOUT" "timeout message"

# A checkout under /tmp (CI clones wherever it likes).
tmp=$(mktemp -d /tmp/kpx-clone.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build"
cp -r "$KPX_ROOT/scripts" "$tmp/"
cp "$BUILD/bzImage" "$tmp/build/"
assert_rc 0 "$tmp/scripts/vm-run" --timeout 120 -- sh -c '[ "$PWD" = '"$tmp"' ] && [ -x scripts/vm-run ] && echo seen > "$KPX_OUT/f"'
assert_eq "$(cat "$tmp/build/vm/last/f")" seen "guest saw the checkout under /tmp"
