#!/usr/bin/env bash
# kpctl regs: a handler sees the same pt_regs with callopt and with the jump
# optimization as with int3 at the same site (sp relative to the syscall's
# entry, as the stack offset of each syscall may be random); the optimization knob is
# restored; entry (ftrace) sites cannot be compared; waiting for a hit works.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
OPTIMIZE=/proc/sys/debug/kprobes-optimization
restore() { echo 1 > $OPTIMIZE; echo 1 > /sys/kernel/debug/kprobes/callopt; }
trap restore EXIT

compare() { # SPEC MECHANISM
	local json
	json=$(kpctl_j regs --compare --wait-opt 10 "$1") || fail "regs --compare $1: $json"
	note "$json"
	assert_eq "$(jq -r '[.captures[].mechanism] | join(",")' <<< "$json")" "$2,int3" \
		"mechanisms at $1"
	assert_eq "$(jq -r .compare.equal <<< "$json")" true "pt_regs equal at $1"
	assert_eq "$(jq -r '.compare.differ | length' <<< "$json")" 0 "registers that differ at $1"
	addr=$(jq -r .addr <<< "$json")
	for k in 0 1; do
		assert_eq "$(jq -r ".captures[$k].regs.ip" <<< "$json")" \
			"$(printf '0x%x' $((addr + 1)))" "ip of capture $k at $1"
		for r in flags ax di si bx; do
			assert_eq "$(jq -r ".captures[$k].regs.$r" <<< "$json")" \
				"$(jq -r ".captures[0].regs.$r" <<< "$json")" "$r of capture $k at $1"
		done
		# sp relative to sp at the syscall's entry (Debian's kernels move
		# each syscall's stack by a random offset): a site below it.
		assert_eq "$(jq -r ".captures[$k].anchor" <<< "$json")" __x64_sys_getpgid "anchor of capture $k"
		assert_match "$(jq -r ".captures[$k].anchor_sp" <<< "$json")" '^0xff[0-9a-f]{14}$' "anchor sp of capture $k"
		assert_num "$(json_num "$(jq -c ".captures[$k]" <<< "$json")" .sp_from_anchor)" '<' 0 \
			"sp below the syscall's entry, capture $k at $1"
		assert_eq "$(jq -r ".captures[$k].sp_from_anchor" <<< "$json")" \
			"$(jq -r ".captures[0].sp_from_anchor" <<< "$json")" "sp from the anchor, capture $k at $1"
	done
	note "sp at the anchor: $(jq -r '[.captures[].anchor_sp] | join(" ")' <<< "$json")"
	assert_match "$(jq -r .captures[0].regs.sp <<< "$json")" '^0xff[0-9a-f]{14}$' "kernel sp (the top byte is 0xff with 4- and 5-level paging)"
	assert_eq "$(cat $OPTIMIZE)" 1 "optimization restored after $1"
	assert_no_kprobes
}
compare "$F+$GETPGID_SINGLE" callopt
compare "$GETPGID_MULTI_FUNC+$GETPGID_MULTI" callopt
# The jump optimization too, with callopt off for new probes.
echo 0 > /sys/kernel/debug/kprobes/callopt
compare "$GETPGID_MULTI_FUNC+$GETPGID_MULTI" jmpopt
echo 1 > /sys/kernel/debug/kprobes/callopt

# Text output says whether they agree.
out=$("$KPCTL" regs --compare "$F+$GETPGID_SINGLE") || fail "regs text: $out"
assert_match "$out" "pt_regs agree" "text verdict"

# The entry probe is ftrace-based: no int3 form, so no comparison (exit 1),
# and the knob is restored.
assert_rc 1 "$KPCTL" regs --compare "$F"
assert_match "$out" "ftrace" "message for the entry site"
assert_eq "$(cat $OPTIMIZE)" 1 "optimization restored after a failed compare"
assert_no_kprobes

# A single capture at the entry: ip is the fentry site + 1.
json=$(kpctl_j regs "$F") || fail "regs $F: $json"
sym=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
assert_eq "$(jq -r .captures[0].regs.ip <<< "$json")" "$(printf '0x%x' $((0x$sym + GETPGID_FENTRY + 1)))" \
	"ip at the entry"
assert_eq "$(jq -r .captures[0].mechanism <<< "$json")" ftrace "entry mechanism"

# Outside the getpgid function kpctl waits for any task to hit the site.
(while :; do cat /proc/version > /dev/null; done) &
loop=$!
json=$(kpctl_j regs --timeout 20 vfs_read)
rc=$?
kill $loop; wait $loop 2>/dev/null
[ $rc = 0 ] || fail "regs vfs_read: $json"
vr=$(awk '$3 == "vfs_read" { print $1; exit }' /proc/kallsyms)
assert_eq "$(jq -r .captures[0].regs.ip <<< "$json")" "$(printf '0x%x' $((0x$vr + 5)))" \
	"ip at vfs_read"
assert_no_kprobes

# No hit within the timeout; bad input.
assert_rc 1 "$KPCTL" regs --timeout 1 __x64_sys_getsid
assert_match "$out" "no hit" "timeout message"
assert_rc 2 "$KPCTL" regs --compare vfs_read
assert_rc 2 "$KPCTL" regs "$F%return"
assert_rc 2 "$KPCTL" regs
assert_rc 1 "$KPCTL" regs "$F+$GETPGID_MIDINSN"
assert_match "$out" "instruction boundary|refused" "mid-instruction message"
assert_rc 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" regs "$F"
assert_match "$out" "root|permission" "unprivileged message"
assert_eq "$(cat $OPTIMIZE)" 1 "optimization knob"
assert_no_kprobes
