#!/usr/bin/env bash
# Bad input gets a clear error, a non-zero exit, and leaves no probe behind.
# A function the kernel does not have is bad usage (kpctl looks it up in
# kallsyms before loading anything, also without root); a site the kernel
# refuses (EINVAL, EILSEQ) gets the reason 'explain' gives for it.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

assert_rc 2 "$KPCTL" attach kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown symbol message"
assert_rc 2 "${NOBODY[@]}" "$KPCTL" attach kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown symbol message without root"
assert_no_kprobes

# An offset in the middle of an instruction: the kernel says EILSEQ, kpctl
# which instruction.
assert_rc 1 "$KPCTL" attach "$GETPGID_FUNC+$GETPGID_MIDINSN"
assert_match "$out" "refused this site \(EILSEQ\): not on an instruction boundary: inside the [0-9]+-byte " \
	"mid-instruction message"
json=$(kpctl_j attach "$GETPGID_FUNC+$GETPGID_MIDINSN" 2>/dev/null); rc=$?
assert_eq $rc 1 "mid-instruction, -j: exit status"
assert_match "$(jq -r .error <<< "$json")" "not on an instruction boundary" "mid-instruction, JSON error"
assert_no_kprobes

# The first probe attaches, the second fails: the first is removed too.
assert_rc 1 "$KPCTL" attach "$GETPGID_FUNC" "$GETPGID_FUNC+$GETPGID_MIDINSN"
assert_no_kprobes

# Malformed specs are usage errors.
for spec in "$GETPGID_FUNC+" "$GETPGID_FUNC+0xzz" "$GETPGID_FUNC%ret" "$GETPGID_FUNC+4%return" "bad name"; do
	assert_rc 2 "$KPCTL" attach "$spec"
	assert_match "$out" "bad probe" "message for '$spec'"
done
assert_rc 2 "$KPCTL" attach
assert_rc 2 "$KPCTL" no-such-command

# Unprivileged users cannot attach, and are told why; links too (it said
# tracefs was missing, exit 1).
assert_rc 3 "${NOBODY[@]}" "$KPCTL" attach "$GETPGID_FUNC"
assert_match "$out" "needs root|permission" "unprivileged message"
for cmd in "links -n 1" "links --multi -n 1"; do
	# shellcheck disable=SC2086
	assert_rc 3 "${NOBODY[@]}" "$KPCTL" $cmd
	assert_match "$out" "not root \(no CAP_BPF and CAP_PERFMON\)" "unprivileged kpctl $cmd"
done
assert_no_kprobes

# A blacklisted function (the first entry of the kprobes blacklist).
bl=$(awk 'NR == 1 { print $2 }' /sys/kernel/debug/kprobes/blacklist)
[ -n "$bl" ] || fail "empty kprobes blacklist"
assert_rc 1 "$KPCTL" attach "$bl"
assert_match "$out" "refused" "message for blacklisted $bl"
# The reason, where explain can read the function (vmlinux's, in its image).
if [[ $out == *"refused this site (EINVAL): "* ]]; then
	assert_match "$out" "refused this site \(EINVAL\): blacklisted" "reason for blacklisted $bl"
else
	note "no reason for blacklisted $bl: $out"
fi
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
# The reason, for a vmlinux function (explain reads no module).
if grep -q " $nt$" /proc/kallsyms; then
	assert_match "$out" "refused this site \(EINVAL\): notrace function" "reason for notrace $nt"
	json=$(kpctl_j attach "$nt" 2>/dev/null); rc=$?
	assert_eq $rc 1 "notrace $nt, -j: exit status"
	assert_match "$(jq -r .error <<< "$json")" "notrace function" "notrace $nt, JSON error"
fi
assert_no_kprobes
