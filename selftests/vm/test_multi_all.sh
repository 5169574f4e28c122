#!/usr/bin/env bash
# One BPF kprobe_multi link over every traceable core-kernel function
# (build/kpx-multi-all, selftests/benchs/multi_all.c), the way upstream's
# kprobe_multi_bench_attach measures attach and detach, with the detach
# contract checked on the way: the kernel attaches every function (ftrace
# patches exactly that many more), the link is hit, no run starts after the
# detach returned, and ftrace has unpatched every function again within
# 600 s. The ftrace site's offset in a function must match the config: 4
# (behind ENDBR64) with X86_KERNEL_IBT, 0 without (Debian's configs have it,
# so do the lab's).
# Negative control first: the program marked dead right after the attach
# must count late runs. On our kernels the same link is then detached the
# stock way (kprobes/fast_detach off) in the same boot: the fast detach
# must return in under a tenth of that time. The figures (attach, detach,
# time until unpatched) go to the log, also on Debian's own image.
. "$(dirname "$0")/../lib.sh"
TOOL=$BUILD/kpx-multi-all
FAST=$KNOB_FAST
[ -x "$TOOL" ] || fail "no $TOOL: make bench-tool"
cfg=$(kernel_config)
want_off=0
grep -q '^CONFIG_X86_KERNEL_IBT=y' "$cfg" && want_off=4
note "config $cfg: X86_KERNEL_IBT $([ $want_off = 4 ] && echo y || echo n)"
if stock_kernel; then
	[ ! -e "$FAST" ] || fail "$FAST exists on a kernel without the series"
else
	[ -w "$FAST" ] || fail "$FAST missing: not our kernel"
	[ "$(knob "$FAST")" = 1 ] || fail "$FAST is $(cat "$FAST"), want the default Y"
	trap 'echo 1 > $FAST' EXIT
fi

run() { # WHAT WANT-RC ARGS...: the tool's JSON in $json
	local what=$1 want=$2 rc
	shift 2
	json=$("$TOOL" -j --unpatch-timeout 600 "$@"); rc=$?
	note "$what: $json"
	assert_eq "$rc" "$want" "$what: exit code"
	n=$(json_int "$json" .functions)
	assert_num "$n" '>=' 10000 "$what: functions"
	assert_eq "$(( $(json_int "$json" .listed) - $(json_int "$json" .module) -
		$(json_int "$json" .duplicate_names) - $(json_int "$json" .left_out) ))" "$n" \
		"$what: functions = listed - modules' - duplicates - left out"
	assert_eq "$(json_int "$json" .attach_err)" 0 "$what: attach error"
	assert_eq "$(( $(json_int "$json" .enabled_attached) - $(json_int "$json" .enabled_before) ))" \
		"$n" "$what: functions ftrace patched for the link"
	assert_eq "$(json_int "$json" .entry_offset)" $want_off "$what: ftrace site's offset"
	assert_num "$(json_int "$json" .runs)" '>' 0 "$what: runs while attached"
}

run control 1 --control
assert_num "$(json_int "$json" .late_runs)" '>' 0 "control: late runs (dead set after the attach)"
assert_eq "$(json_str "$json" .failed)" "control: late runs counted, as they must be" "control: verdict"

run default 0
assert_eq "$(json_int "$json" .late_runs)" 0 "default: runs after the detach returned"
assert_eq "$(json_bool "$json" .ok)" true "default: ok"
fast_ms=$(json_num "$json" .detach_ms)
jq -r '"# \(.functions) functions (IBT offset \(.entry_offset)): attach \(.attach_ms) ms, detach \(.detach_ms) ms, unpatched \(.unpatch_ms) ms after it"' <<< "$json"

if ! stock_kernel; then
	echo 0 > "$FAST"
	run sync 0
	echo 1 > "$FAST"
	assert_eq "$(json_int "$json" .late_runs)" 0 "sync: runs after the detach returned"
	sync_ms=$(json_num "$json" .detach_ms)
	jq -r '"# stock-path detach (fast_detach off): attach \(.attach_ms) ms, detach \(.detach_ms) ms, unpatched \(.unpatch_ms) ms after it"' <<< "$json"
	assert_num "$(awk -v f="$fast_ms" 'BEGIN { print f * 10 }')" '<' "$sync_ms" \
		"fast detach ($fast_ms ms) x 10 against the stock path's ($sync_ms ms)"
fi
echo "PASS"
