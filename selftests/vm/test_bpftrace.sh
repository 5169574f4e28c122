#!/usr/bin/env bash
# Debian's bpftrace, unchanged, on our kernel (and on a stock one, where
# the func+offset site is not callopt): kprobes at a function entry
# and at func+offset (a single-instruction callopt site), and a kretprobe,
# count exactly the getpgid() calls of one process; while they are attached,
# bpftool shows the links bpftrace made with their mechanisms (entry:
# ftrace with full pt_regs; func+offset: callopt); nothing is left behind.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
N=1000
command -v bpftrace > /dev/null || fail "bpftrace is not installed (make deps)"
note "$(bpftrace --version)"
assert_no_kprobes

child=/tmp/bpftrace-child.sh
cat > "$child" <<CHILD
#!/bin/bash
"$BPFTOOL" -j perf show > /tmp/bpftrace-perf.json
cat "$KPROBES_LIST" > /tmp/bpftrace-kprobes.txt
exec perl -e 'syscall(121, 0) for 1..$N'	# 121: getpgid
CHILD
chmod +x "$child"
off=$((GETPGID_SINGLE))
out=$(timeout 120 bpftrace -e "
kprobe:$F /comm == \"perl\"/ { @entry = count(); }
kprobe:$F+$off /comm == \"perl\"/ { @mid = count(); }
kretprobe:$F /comm == \"perl\"/ { @ret = count(); }" -c "/bin/bash $child" 2>&1) || fail "bpftrace failed: $out"
note "$out"
for m in entry mid ret; do
	grep -qx "@$m: $N" <<< "$out" || fail "bpftrace @$m: want $N, output: $out"
done

perf=$(cat /tmp/bpftrace-perf.json)
note "bpftool perf show while bpftrace ran: $perf"
note "kprobes list while bpftrace ran: $(cat /tmp/bpftrace-kprobes.txt)"
attached() { # FD_TYPE FUNC OFFSET
	jq --arg t "$1" --arg f "$2" --argjson o "$3" \
		'[.[] | select(.fd_type == $t and .func == $f and (.offset // 0) == $o)] | length' <<< "$perf"
}
assert_eq "$(attached kprobe "$F" 0)" 1 "bpftrace's entry kprobe in bpftool perf show"
assert_eq "$(attached kprobe "$F" "$off")" 1 "bpftrace's $F+$off kprobe in bpftool perf show"
assert_eq "$(attached kretprobe "$F" 0)" 1 "bpftrace's kretprobe in bpftool perf show"
sym=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
kp() { grep -i "^${1}  *[kr] " /tmp/bpftrace-kprobes.txt; }
entry_lines=$(kp "$(printf '%x' $((0x$sym + GETPGID_FENTRY)))")
mid_line=$(kp "$(printf '%x' $((0x$sym + off)))")
assert_eq "$(wc -l <<< "$entry_lines")" 2 "kprobes at the fentry site (kprobe, kretprobe)"
assert_eq "$(grep -c '\[FTRACE\]' <<< "$entry_lines")" 2 "entry kprobes on ftrace: $entry_lines"
if stock_kernel; then
	# Stock has no callopt: the same site is an int3 kprobe, optimized
	# to a jump (jmpopt) once the optimizer has run.
	[ -n "$mid_line" ] || fail "no kprobe at $F+$off"
	[[ $mid_line != *CALLOPT* && $mid_line != *FTRACE* ]] || fail "stock kernel, kprobe at $F+$off: $mid_line"
	note "stock kernel: kprobe at $F+$off: $mid_line"
else
	assert_match "$mid_line" '\[CALLOPT\]' "kprobe at $F+$off"
fi
assert_no_kprobes
echo "PASS: bpftrace counted $N calls at $F, $F+$off ($(stock_kernel && echo stock || echo callopt)) and its return"
