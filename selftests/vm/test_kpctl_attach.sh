#!/usr/bin/env bash
# kpctl attach: the per-hit cost estimate, exact counts next to it, where
# the mechanism comes from (link info or debugfs), offsets past the end
# refused by kpctl (also in a module: up to the next symbol of the module),
# and Ctrl-C while attaching many probes detaches everything attached so
# far.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC

# --cost: a number for each probe getpgid(0) reaches, null for one it does
# not reach (the error path), and --trigger still counts exactly.
unreached=$(kpctl_j explain "$F" |
	jq -r '[.sites[] | select(.mechanism == "callopt")] | last | .offset') ||
	fail "explain failed"
json=$(kpctl_j attach --cost 5000 --trigger 300 --wait-opt 2 \
	"$F" "$F+$GETPGID_SINGLE" "$F+$unreached") || fail "attach --cost: $json"
note "$json"
field() { jq -r "$1" <<< "$json"; }
assert_eq "$(field .cost.estimate)" true "cost is labelled an estimate"
assert_match "$(field .cost.baseline_ns_per_call)" '^[0-9]+(\.[0-9]+)?$' "baseline ns/call"
for i in 0 1; do
	assert_match "$(field ".probes[$i].cost_ns_per_hit")" '^-?[0-9]+(\.[0-9]+)?$' \
		"cost of probe $i"
	assert_eq "$(field ".probes[$i].hits")" 300 "hits of probe $i with --cost"
done
assert_eq "$(field .probes[2].cost_ns_per_hit)" null "cost of a probe getpgid(0) does not reach"
assert_eq "$(field .probes[2].hits)" 0 "hits of the unreached probe"
assert_eq "$(field .probes[1].mechanism)" callopt "mechanism at +$GETPGID_SINGLE"
assert_no_kprobes
out=$("$KPCTL" attach --cost 1000 "$F+$GETPGID_SINGLE") || fail "attach --cost: $out"
assert_match "$out" "NS/HIT~" "cost column"
assert_match "$out" "estimate" "cost labelled an estimate"
assert_no_kprobes

# Where the mechanism comes from: the class in the link info (bpf_link_info's
# perf_event.flags, kpctl's probe_flags), refined with debugfs, when the
# kernel reports it, else debugfs alone. When the kernel reports it: the
# entry is ftrace (probe_flags BPF_PERF_PROBE_FTRACE, 2), the
# single-instruction site callopt (class optimized), and the debugfs
# fallback (KPCTL_MECH_SOURCE=debugfs) agrees with it, mechanism and class.
# Which branch runs is pinned by the kernel booted, not read from the
# answer: the link info on ours, debugfs on a stock kernel (-kpx-stock,
# Debian's own images).
specs=("$F" "$F+$GETPGID_MID" "$F+$GETPGID_SINGLE")
json=$(kpctl_j attach --wait-opt 10 --trigger 10 "${specs[@]}") || fail "attach: $json"
note "$json"
case $SFX in
*-stock) want_source=debugfs ;;
*) want_source=link_info ;;
esac
got_source=debugfs
[ "$(json_int "$json" '.probes[0].probe_flags')" = 0 ] || got_source=link_info
assert_eq "$got_source" "$want_source" "where the mechanism comes from on $(uname -r)"
for i in 0 1 2; do
	for k in mechanism mechanism_at_attach probe probe_flags mechanism_source; do
		assert_eq "$(jq -r ".probes[$i] | has(\"$k\")" <<< "$json")" true "key $k of probe $i"
	done
	for k in link_info full_regs regs_kind; do
		assert_eq "$(jq -r ".probes[$i] | has(\"$k\")" <<< "$json")" false "no key $k in probe $i"
	done
done
if [ "$want_source" = link_info ]; then
	note "the kernel reports the probe class in bpf_link_info"
	for i in 0 1 2; do
		assert_eq "$(field ".probes[$i].mechanism_source")" link_info "source of probe $i"
		assert_eq "$(field ".probes[$i].hits")" 10 "hits of probe $i"
		# One known bit, its class named, and the mechanism told (not null).
		assert_match "$(json_int "$json" ".probes[$i].probe_flags")" '^(1|2|4|8)$' \
			"probe_flags of probe $i"
		assert_match "$(json_str "$json" ".probes[$i].probe")" '^(trap|ftrace|optimized|disarmed)$' \
			"class of probe $i"
		assert_match "$(json_str "$json" ".probes[$i].mechanism")" \
			'^(ftrace|callopt|jmpopt|int3|pending|disabled|gone)$' "mechanism of probe $i"
	done
	assert_eq "$(field '.probes[0].mechanism')" ftrace "mechanism at the entry"
	assert_eq "$(json_str "$json" '.probes[0].probe')" ftrace "class at the entry"
	assert_eq "$(json_int "$json" '.probes[0].probe_flags')" 2 "probe_flags at the entry"
	# Both switches are on by default; a run that turned one off says so.
	co=$(knob "$KNOB_CALLOPT") || fail "no kprobes/callopt on our kernel"
	op=$(cat /proc/sys/debug/kprobes-optimization)
	if [ "$co" = 1 ] && [ "$op" = 1 ]; then
		# The single instruction of >= 5 bytes (GETPGID_MID may need more
		# than one instruction, or be int3, depending on the build).
		assert_eq "$(field '.probes[2].mechanism')" callopt "mechanism at +$GETPGID_SINGLE"
		assert_eq "$(json_str "$json" '.probes[2].probe')" optimized "class at +$GETPGID_SINGLE"
		assert_eq "$(json_int "$json" '.probes[2].probe_flags')" 4 "probe_flags at +$GETPGID_SINGLE"
	else
		note "callopt $co, optimization $op: the callopt check is not made"
	fi
	fallback=$(KPCTL_MECH_SOURCE=debugfs kpctl_j attach --wait-opt 10 "${specs[@]}") ||
		fail "attach, debugfs fallback: $fallback"
	for i in 0 1 2; do
		assert_eq "$(jq -r ".probes[$i].mechanism_source" <<< "$fallback")" debugfs \
			"forced source of probe $i"
		assert_eq "$(jq -r ".probes[$i].mechanism" <<< "$fallback")" \
			"$(field ".probes[$i].mechanism")" "debugfs agrees with the link info, probe $i"
		assert_eq "$(jq -r ".probes[$i].probe" <<< "$fallback")" \
			"$(field ".probes[$i].probe")" "debugfs's class agrees with the link info, probe $i"
	done
else
	note "the kernel does not report the probe class in bpf_link_info: debugfs"
	for i in 0 1 2; do
		assert_eq "$(field ".probes[$i].mechanism_source")" debugfs "source of probe $i"
		assert_eq "$(json_int "$json" ".probes[$i].probe_flags")" 0 "probe_flags of probe $i"
	done
	assert_eq "$(field '.probes[0].mechanism')" ftrace "mechanism at the entry"
	assert_eq "$(json_str "$json" '.probes[0].probe')" ftrace "class at the entry, from debugfs"
fi
out=$("$KPCTL" attach "$F") || fail "attach text: $out"
assert_match "$out" "MECHANISM +SOURCE +CLASS" "mechanism, source and class columns"
assert_match "$out" "$F +0x[0-9a-f]+ +ftrace +[a-z_]+ +ftrace" "text row of the entry"
assert_no_kprobes

# An offset past the function's end would land in the next symbol: refused.
size=$(kpctl_j explain "$F" | jq -r .size)
for off in "$size" $((size + 16)) 0x100000; do
	assert_rc 1 "$KPCTL" attach "$F+$off"
	assert_match "$out" "past the end" "message for +$off"
	assert_no_kprobes
done
assert_rc 2 "$KPCTL" attach --cost 0 "$F"
assert_rc 2 "$KPCTL" attach --cost x "$F"
json=$(kpctl_j attach "$F+$size" 2>/dev/null); rc=$?
assert_eq $rc 1 "exit status past the end, -j"
assert_match "$(jq -r .error <<< "$json")" "past the end" "past the end, JSON error"
assert_no_kprobes

# MODULE:FUNC+OFF past the end: the size is up to the next symbol of the
# module in /proc/kallsyms (it probed the next symbol before). A function
# of a module that is not loaded is bad usage.
. "$MODDIR/sites.env"
insmod "$MODDIR/kpx_targets.ko" || fail "insmod kpx_targets"
mapfile -t msyms < <(awk '$4 == "[kpx_targets]" { print $1, $3 }' /proc/kallsyms | sort)
msize=
for ((i = 0; i < ${#msyms[@]}; i++)); do
	read -r a n <<< "${msyms[i]}"
	[ "$n" = kpx_target_single ] || continue
	for ((j = i + 1; j < ${#msyms[@]}; j++)); do
		read -r b _ <<< "${msyms[j]}"
		(( 0x$b != 0x$a )) && { msize=$(( 0x$b - 0x$a )); break; }
	done
	break
done
[ -n "$msize" ] || fail "no symbol after kpx_target_single in kpx_targets: ${msyms[*]}"
note "kpx_target_single: $msize bytes to the next symbol of its module"
for spec in "kpx_targets:kpx_target_single+$msize" "kpx_targets:kpx_target_single+0x100000" \
	"kpx_target_single+$msize"; do
	assert_rc 1 "$KPCTL" attach "$spec"
	assert_match "$out" "past the end of (kpx_targets:)?kpx_target_single \(0x$(printf %x "$msize") bytes" \
		"message for $spec"
	assert_no_kprobes
done
json=$(kpctl_j attach "kpx_targets:kpx_target_single+$msize" 2>/dev/null); rc=$?
assert_eq $rc 1 "exit status past the end of a module function, -j"
assert_match "$(jq -r .error <<< "$json")" "past the end" "past the end of a module function, JSON error"
assert_rc 0 "$KPCTL" attach "kpx_targets:kpx_target_single+$TARGETS_SINGLE"
assert_no_kprobes
assert_rc 2 "$KPCTL" attach kpx_targets:kpx_no_such_function
assert_match "$out" "no such function in the kernel" "a function the module does not have"
rmmod kpx_targets || fail "rmmod kpx_targets"
assert_rc 2 "$KPCTL" attach "kpx_targets:kpx_target_single"
assert_match "$out" "or its module is not loaded" "a function of a module not loaded"

# Options after the command and after the specs, -j among them; a unique
# prefix of the command does.
json=$("$KPCTL" att "$F" --trigger 100 -j) || fail "att SPEC --trigger 100 -j: $json"
assert_kpctl_json "$json" 0 "att SPEC --trigger 100 -j"
assert_eq "$(jq -r .probes[0].hits <<< "$json")" 100 "hits with --trigger after the spec"
assert_eq "$(jq -r '.probes | length' <<< "$json")" 1 "probes with options after the spec"
assert_eq "$(jq -r '.detach_ms.n' <<< "$json")" 1 "detach_ms.n"
assert_no_kprobes
# Negative control: after "--", an option is a spec (and a bad one).
assert_rc 2 "$KPCTL" attach "$F" -- --trigger
assert_match "$out" "bad probe '--trigger'" "an option after --"

# Ctrl-C in the middle of attaching 3000 probes.
specs=()
for _ in $(seq 1000); do specs+=("$F+$GETPGID_MID" "$F+$GETPGID_SINGLE" "$F"); done
"$KPCTL" attach "${specs[@]}" > /tmp/attach.out 2> /tmp/attach.err &
pid=$!
for _ in $(seq 200); do
	[ "$(wc -l < $KPROBES_LIST)" -ge 3 ] && break
	sleep 0.05
done
[ "$(wc -l < $KPROBES_LIST)" -ge 3 ] || fail "no probe attached after 10 s"
kill -INT $pid
wait $pid
rc=$?
assert_eq $rc 1 "exit status after Ctrl-C"
assert_match "$(cat /tmp/attach.err)" "interrupted while attaching" "Ctrl-C message"
assert_no_kprobes
# The same with -j: the error as JSON.
"$KPCTL" attach -j "${specs[@]}" > /tmp/attach.out 2> /tmp/attach.err &
pid=$!
for _ in $(seq 200); do
	[ "$(wc -l < $KPROBES_LIST)" -ge 3 ] && break
	sleep 0.05
done
kill -INT $pid
wait $pid
rc=$?
assert_eq $rc 1 "exit status after Ctrl-C, -j"
assert_kpctl_json "$(cat /tmp/attach.out)" $rc "attach -j, Ctrl-C"
assert_match "$(jq -r .error /tmp/attach.out)" "interrupted while attaching" "Ctrl-C, JSON error"
assert_no_kprobes

assert_rc 0 "$KPCTL" attach --help
assert_match "$out" "--cost" "attach --help"
