#!/usr/bin/env bash
# kpctl on kernels that lack something, simulated in a private mount
# namespace: no BTF (/sys/kernel/btf hidden, or --btf/KPCTL_BTF naming a
# missing file), no kprobe PMU (/sys/bus/event_source/devices hidden), no
# kprobes at all (register_kprobe also gone from /proc/kallsyms), no debugfs.
# Each gets a clear message and exit 3 (kpctl cannot run here), with -j as
# {"schema":2,"error":...} on stdout, and leaves nothing behind. Without
# debugfs kpctl still has the class the kernel reports (probe), names the
# mechanism of an ftrace probe, and says what it cannot tell (null).
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
command -v unshare > /dev/null || skip "no unshare(1)"

kpctl_progs() { "$BPFTOOL" prog show 2>/dev/null | grep -c 'name kpctl_'; }
progs_before=$(kpctl_progs)

# CMD... run in a private mount namespace after the shell snippet $SETUP.
in_ns() {
	unshare -m --propagation private bash -c "$SETUP"' && exec "$@"' ns "$@"
}

check_refused() { # REGEX WHAT (runs every kernel-facing command)
	local cmd
	for cmd in "attach $F" "links -n 5" "stress -n 1 -s $F" "regs $F" "explain $F"; do
		# shellcheck disable=SC2086
		assert_rc 3 in_ns "$KPCTL" $cmd
		assert_match "$out" "$1" "$2: kpctl $cmd"
		# shellcheck disable=SC2086
		json=$(in_ns "$KPCTL" $cmd -j 2>/dev/null)
		assert_kpctl_json "$json" 3 "$2: kpctl $cmd -j"
		assert_match "$(jq -r .error <<< "$json")" "$1" "$2: kpctl $cmd -j, error"
	done
	assert_no_kprobes
	assert_eq "$(kpctl_progs)" "$progs_before" "$2: BPF programs left behind"
}

# No BTF: /sys/kernel/btf/vmlinux missing.
SETUP='mount -t tmpfs none /sys/kernel/btf'
check_refused "kernel has no BTF \(CONFIG_DEBUG_INFO_BTF\): /sys/kernel/btf/vmlinux is missing; CO-RE programs cannot load" \
	"no BTF"
# The same through the override, and the override that works.
SETUP=true
assert_rc 3 env KPCTL_BTF=/nonexistent/vmlinux "$KPCTL" attach "$F"
assert_match "$out" "kernel has no BTF .*/nonexistent/vmlinux is missing \(KPCTL_BTF\)" "KPCTL_BTF"
assert_rc 3 "$KPCTL" --btf /nonexistent/vmlinux -j links -n 3
assert_match "$out" "kernel has no BTF .*\(--btf\)" "--btf"
json=$(kpctl_j --btf /nonexistent/vmlinux links -n 3 2>/dev/null); rc=$?
assert_eq $rc 3 "exit status, --btf missing, -j"
assert_match "$(jq -r .error <<< "$json")" "kernel has no BTF .*\(--btf\)" "--btf, JSON error"
assert_no_kprobes
assert_eq "$(kpctl_progs)" "$progs_before" "BPF programs left behind (--btf)"
assert_rc 0 env KPCTL_BTF=/sys/kernel/btf/vmlinux "$KPCTL" attach --trigger 5 "$F"
assert_no_kprobes

# No kprobe PMU (CONFIG_KPROBE_EVENTS off), kprobes built in.
SETUP='mount -t tmpfs none /sys/bus/event_source/devices'
check_refused "the kernel has no kprobe PMU \(/sys/bus/event_source/devices/kprobe is absent" \
	"no kprobe PMU"

# No kprobes at all (CONFIG_KPROBES off): no PMU, no register_kprobe.
grep -vw register_kprobe /proc/kallsyms > /tmp/kallsyms.nokprobes
SETUP='mount -t tmpfs none /sys/bus/event_source/devices &&
	mount --bind /tmp/kallsyms.nokprobes /proc/kallsyms'
check_refused "the kernel has no kprobes \(CONFIG_KPROBES" "no kprobes"

# No debugfs: the class comes from the link info when the kernel reports it
# (ours), which names the mechanism of an ftrace probe; nothing tells it
# otherwise (stock), which kpctl says (and it still works). Which branch runs
# is pinned by the kernel booted.
SETUP='umount -l /sys/kernel/debug'
json=$(in_ns "$KPCTL" -j attach --trigger 5 "$F" 2>/tmp/nodebugfs.err) ||
	fail "attach without debugfs: $json $(cat /tmp/nodebugfs.err)"
assert_kpctl_json "$json" 0 "attach -j without debugfs"
note "$json"
assert_eq "$(json_int "$json" '.probes[0].hits')" 5 "hits without debugfs"
if stock_kernel; then
	assert_eq "$(jq -c '.probes[0] | [.mechanism, .probe, .probe_flags, .mechanism_source]' <<< "$json")" \
		'[null,null,0,"none"]' "mechanism, class, flags and source on stock without debugfs"
	assert_match "$(cat /tmp/nodebugfs.err)" "cannot tell the mechanism of '$F': the kernel does not report its class in the link info, and .*kprobes/list is not readable" \
		"message without debugfs on stock"
else
	assert_eq "$(jq -c '.probes[0] | [.mechanism, .probe, .probe_flags, .mechanism_source]' <<< "$json")" \
		'["ftrace","ftrace",2,"link_info"]' "mechanism, class, flags and source without debugfs"
	! grep -q 'cannot tell' /tmp/nodebugfs.err ||
		fail "a warning for an ftrace probe without debugfs: $(cat /tmp/nodebugfs.err)"
	# A mid-function probe: its class (trap while queued, then optimized)
	# does not name the mechanism, which only debugfs tells: null, said once.
	json=$(in_ns "$KPCTL" -j attach --trigger 5 "$F+$GETPGID_SINGLE" 2>/tmp/nodebugfs.err) ||
		fail "attach mid-function without debugfs: $json $(cat /tmp/nodebugfs.err)"
	assert_kpctl_json "$json" 0 "attach -j mid-function without debugfs"
	note "$json"
	assert_eq "$(jq -c '.probes[0] | [.mechanism, .mechanism_at_attach, .mechanism_source]' <<< "$json")" \
		'[null,null,"link_info"]' "mechanism mid-function without debugfs"
	assert_match "$(json_str "$json" '.probes[0].probe')" '^(trap|optimized)$' "class mid-function without debugfs"
	assert_match "$(json_int "$json" '.probes[0].probe_flags')" '^(1|4)$' "probe_flags mid-function without debugfs"
	assert_eq "$(json_int "$json" '.probes[0].hits')" 5 "hits mid-function without debugfs"
	assert_match "$(cat /tmp/nodebugfs.err)" "cannot tell the mechanism of '$F\+$GETPGID_SINGLE': the kernel reports its class, (trap|optimized), and only .*kprobes/list tells (int3 from pending|callopt from jmpopt), which is not readable" \
		"message mid-function without debugfs"
	assert_eq "$(grep -c 'cannot tell' /tmp/nodebugfs.err)" 1 "the message, once"
fi
assert_no_kprobes
json=$(KPCTL_MECH_SOURCE=debugfs in_ns "$KPCTL" -j attach --trigger 5 "$F" \
	2>/tmp/nodebugfs.err) || fail "attach without debugfs, forced: $json"
assert_kpctl_json "$json" 0 "attach -j without debugfs, forced"
note "$json"
assert_eq "$(jq -c '.probes[0] | [.mechanism, .probe, .mechanism_source]' <<< "$json")" \
	'[null,null,"none"]' "mechanism, class and source, no source"
# probe_flags stays the kernel's word, which the forced source ignores.
assert_eq "$(json_int "$json" '.probes[0].probe_flags')" "$(stock_kernel && echo 0 || echo 2)" \
	"probe_flags, forced source"
assert_eq "$(json_int "$json" '.probes[0].hits')" 5 "hits without debugfs"
assert_match "$(cat /tmp/nodebugfs.err)" "cannot tell the mechanism of '$F': .*kprobes/list is not readable" \
	"message without debugfs"
assert_no_kprobes
