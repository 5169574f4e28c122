#!/usr/bin/env bash
# Bad input gets a clear error, a non-zero exit, and leaves no probe behind.
. "$(dirname "$0")/../lib.sh"
. "$SITES"

assert_rc 1 "$KPCTL" attach kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown symbol message"
assert_no_kprobes

# An offset in the middle of an instruction.
assert_rc 1 "$KPCTL" attach "$GETPGID_FUNC+$GETPGID_MIDINSN"
assert_match "$out" "instruction boundary|refused" "mid-instruction message"
assert_no_kprobes

# The first probe attaches, the second fails: the first is removed too.
assert_rc 1 "$KPCTL" attach "$GETPGID_FUNC" kpx_no_such_function_xyz
assert_no_kprobes

# Malformed specs are usage errors.
for spec in "$GETPGID_FUNC+" "$GETPGID_FUNC+0xzz" "$GETPGID_FUNC%ret" "$GETPGID_FUNC+4%return" "bad name"; do
	assert_rc 2 "$KPCTL" attach "$spec"
	assert_match "$out" "bad probe" "message for '$spec'"
done
assert_rc 2 "$KPCTL" attach
assert_rc 2 "$KPCTL" no-such-command

# Unprivileged users cannot attach, and are told why.
assert_rc 1 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" attach "$GETPGID_FUNC"
assert_match "$out" "needs root|permission" "unprivileged message"
assert_no_kprobes
