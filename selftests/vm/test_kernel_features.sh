#!/usr/bin/env bash
# The booted kernel is ours and has what the project needs at run time.
. "$(dirname "$0")/../lib.sh"
assert_match "$(uname -r)" '^6\.12\..*-kpx' "kernel release"
assert_match "$(uname -v)" 'PREEMPT' "preemption model"
assert_eq "$(cat /sys/kernel/debug/kprobes/enabled)" 1 "kprobes enabled"
assert_eq "$(cat /proc/sys/debug/kprobes-optimization)" 1 "kprobes optimization"
[ -s /sys/kernel/btf/vmlinux ] || fail "no kernel BTF"
. "$SITES"
grep -q " $GETPGID_FUNC$" /proc/kallsyms || fail "$GETPGID_FUNC not in kallsyms"
[ -r /sys/bus/event_source/devices/kprobe/type ] || fail "no kprobe PMU"
"$BPFTOOL" btf dump file /sys/kernel/btf/vmlinux format raw > /tmp/btf.txt ||
	fail "bpftool cannot read kernel BTF"
grep -q "STRUCT 'pt_regs'" /tmp/btf.txt || fail "no struct pt_regs in kernel BTF"
