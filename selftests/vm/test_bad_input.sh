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
assert_rc 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" attach "$GETPGID_FUNC"
assert_match "$out" "needs root|permission" "unprivileged message"
assert_no_kprobes

# A blacklisted function (the first entry of the kprobes blacklist).
bl=$(awk 'NR == 1 { print $2 }' /sys/kernel/debug/kprobes/blacklist)
[ -n "$bl" ] || fail "empty kprobes blacklist"
assert_rc 1 "$KPCTL" attach "$bl"
assert_match "$out" "refused" "message for blacklisted $bl"
assert_no_kprobes

# A notrace function: in kallsyms' text, not in available_filter_functions,
# and not blacklisted (BPF kprobes refuse notrace functions).
cut -d' ' -f1 /sys/kernel/tracing/available_filter_functions | sort -u > /tmp/traceable
awk '{ print $2 }' /sys/kernel/debug/kprobes/blacklist | sort -u > /tmp/blacklisted
nt=$(awk '$2 == "T" && $3 !~ /^(_|\.)/ && $3 !~ /\./ { print $3 }' /proc/kallsyms | sort -u |
	comm -23 - /tmp/traceable | comm -23 - /tmp/blacklisted | grep -v '^startup\|^_s\|^_t' | head -n1)
[ -n "$nt" ] || fail "found no notrace function"
note "notrace function: $nt"
assert_rc 1 "$KPCTL" attach "$nt"
assert_match "$out" "refused" "message for notrace $nt"
assert_no_kprobes
