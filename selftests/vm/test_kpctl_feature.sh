#!/usr/bin/env bash
# kpctl feature on the kernel that runs: ours has the kprobes series (its
# knobs, the probe classes in bpf_link_info, kprobe_multi offsets), a stock
# kernel (ours unpatched, or Debian's: lib.sh's stock_kernel) has none of it
# and says so. The answers agree with the kernel: the knobs' values with
# their files, link_info_probe with an attached link's info (probe_flags), and
# kprobe_multi_offsets with attach --multi at an offset (refused on stock
# with its own message, before anything is loaded). Nothing is loaded: the
# same answers without root, which only privileged, the debugfs list and
# the series' debugfs knobs (null: unreadable) tell apart.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

json=$(kpctl_j feature) || fail "feature -j: $json"
note "$json"
j() { jq -c "$1" <<< "$json"; }
assert_rc 0 "$KPCTL" feature
assert_match "$out" "kprobe_multi links take offsets" "feature, text"

assert_eq "$(json_str "$json" .release)" "$(uname -r)" "release"
assert_eq "$(j '[.requirements.kprobes, .requirements.kprobe_pmu, .requirements.btf,
	.requirements.privileged, .requirements.kprobes_list]')" "[true,true,true,true,true]" \
	"requirements, as root"
assert_eq "$(j .btf_path)" '"/sys/kernel/btf/vmlinux"' "BTF read"
assert_eq "$(j .bpf.kprobe_multi)" true "kprobe_multi links"
# Each knob's key, its file, and the value kpctl must report (a debugfs
# bool's Y/N as 1/0).
for kf in "kprobes-optimization /proc/sys/debug/kprobes-optimization" \
	  "kprobes/callopt $KNOB_CALLOPT" "kprobes/fast_detach $KNOB_FAST"; do
	read -r k f <<< "$kf"
	want=null
	[ -e "$f" ] && want=$(knob "$f")
	assert_eq "$(j ".knobs[\"$k\"]")" "$want" "knob $k"
done

link=$(kpctl_j attach --trigger 1 "$F") || fail "attach $F: $link"
pflags=$(json_int "$link" '.probes[0].probe_flags')
if stock_kernel; then
	assert_eq "$(j .series)" false "series on a stock kernel"
	assert_eq "$(j '[.knobs["kprobes/callopt"], .knobs["kprobes/fast_detach"]]')" "[null,null]" \
		"the series' knobs on a stock kernel"
	assert_eq "$(j '[.bpf.link_info_probe, .bpf.kprobe_multi_probe_flags,
		.bpf.kprobe_multi_offsets]')" "[false,false,false]" "the series' UAPI on a stock kernel"
	assert_eq "$pflags" 0 "a link's info on a stock kernel: no class"
	assert_rc 1 "$KPCTL" attach --multi "$F" "$F+$GETPGID_SINGLE"
	assert_match "$out" "'$F\+$GETPGID_SINGLE': this kernel's kprobe_multi takes no offsets" \
		"attach --multi with an offset on a stock kernel"
	json2=$(kpctl_j attach --multi "$F" "$F+$GETPGID_SINGLE" 2>/dev/null); rc=$?
	assert_eq $rc 1 "attach --multi with an offset on a stock kernel, -j"
	assert_match "$(jq -r .error <<< "$json2")" "takes no offsets" \
		"attach --multi with an offset on a stock kernel, JSON error"
else
	assert_eq "$(j .series)" true "series on our kernel"
	assert_num "$(json_int "$json" '.knobs["kprobes/fast_detach"]')" '>=' 0 "fast-detach knob"
	assert_eq "$(j '[.bpf.link_info_probe, .bpf.kprobe_multi_probe_flags,
		.bpf.kprobe_multi_offsets]')" "[true,true,true]" "the series' UAPI on our kernel"
	assert_eq "$pflags" 2 "a link's info on our kernel: the class ftrace at the entry"
	json2=$(kpctl_j attach --multi --trigger 10 "$F" "$F+$GETPGID_SINGLE") ||
		fail "attach --multi with an offset on our kernel: $json2"
	assert_eq "$(json_int "$json2" '.probes[1].hits')" 10 "attach --multi with an offset: hits"
fi
assert_no_kprobes

# Without root: the same, but not privileged (and debugfs is root's).
nb=$("${NOBODY[@]}" "$KPCTL" -j feature) || fail "feature -j without root: $nb"
assert_kpctl_json "$nb" 0 "feature -j without root"
assert_eq "$(jq -c .requirements.privileged <<< "$nb")" false "without root: privileged"
assert_eq "$(jq -c '[.series, .knobs["kprobes-optimization"], .bpf, .requirements.kprobes,
	.requirements.kprobe_pmu]' <<< "$nb")" \
	"$(j '[.series, .knobs["kprobes-optimization"], .bpf, .requirements.kprobes,
	.requirements.kprobe_pmu]')" "without root: the kernel's answers"
# The series' knobs are debugfs files, root's: unknown (null) without root.
assert_eq "$(jq -c '[.knobs["kprobes/callopt"], .knobs["kprobes/fast_detach"]]' <<< "$nb")" \
	"[null,null]" "without root: the debugfs knobs cannot be read"
echo "PASS: kpctl feature on $(stock_kernel && echo a stock kernel || echo our kernel)"
