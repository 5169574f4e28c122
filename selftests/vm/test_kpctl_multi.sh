#!/usr/bin/env bash
# kpctl links --multi and attach --multi: one BPF kprobe_multi link over N kernel functions.
# The class of every address (bpf_link_info.kprobe_multi.probe_flags) and the
# mechanism kpctl names from it,
# hits, no program run after detach and a grace period (and a negative
# control that must report some), the functions unpatched soon after the
# detach (the deferred unregistration ran), the detach time against the
# synchronous one (fast_detach off) in the same boot, kretprobe.multi,
# bpftool's view of a held link, attach --multi (also on module functions,
# which must unload right after), bad usage.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
FAST=$KNOB_FAST
ENABLED=/sys/kernel/tracing/enabled_functions

[ -r "$ENABLED" ] || fail "$ENABLED not readable"
[ -w "$FAST" ] || fail "$FAST missing: not our kernel"
[ "$(knob "$FAST")" = 1 ] || fail "$FAST is $(cat "$FAST"), want the default Y"

# The worker unregisters a detached link's fprobe some 10 ms plus two
# RCU-tasks grace periods after the detach: give it 10 s.
wait_unpatched() { # WHAT
	local n
	for _ in $(seq 100); do
		n=$(grep -c . "$ENABLED")
		[ "$n" = 0 ] && return 0
		sleep 0.1
	done
	fail "$1: $n function(s) still in enabled_functions 10 s after the detach: $(head -3 "$ENABLED")"
}

check_multi() { # JSON N ROUNDS WHAT
	local json=$1 n=$2 rounds=$3 what=$4
	int() { json_int "$json" "$1"; }
	assert_eq "$(json_bool "$json" .multi)" true "$what: multi"
	assert_eq "$(int .rounds)" "$rounds" "$what: rounds"
	assert_eq "$(int .attached)" "$n" "$what: attached"
	assert_eq "$(int .attach_failures)" 0 "$what: attach failures"
	assert_eq "$(int .attach_ms.n)" "$rounds" "$what: attach times"
	assert_eq "$(int .detach_ms.n)" "$rounds" "$what: detach times"
	assert_eq "$(int .late_runs)" 0 "$what: late runs"
	assert_eq "$(int .late_check.flagged)" 0 "$what: runs that saw the dead flag"
	# Every address of the link is a function entry run by its fprobe.
	assert_eq "$(int .mechanisms.ftrace)" "$n" "$what: ftrace at every address"
	assert_eq "$(int '[.mechanisms[]] | add')" "$n" "$what: mechanisms add up"
	assert_eq "$(int .mechanism_sources.link_info)" "$n" "$what: mechanisms from link_info"
	assert_eq "$(jq -c 'has("full_regs_count")' <<< "$json")" false "$what: no full_regs_count"
	assert_links_json "$json" "$F" "$what"
}

start=$(date +%s)
wait_unpatched "before"

json=$(kpctl_j links --multi -n 1000 --rounds 10 --trigger 200 --late 300) ||
	fail "links --multi -n 1000: $json"
note "$json"
check_multi "$json" 1000 10 "multi -n 1000"
fast_p99=$(json_num "$json" .detach_ms.p99)
jq -r '"# 1000 functions, 10 rounds: attach ms p50 \(.attach_ms.p50) p99 \(.attach_ms.p99);" +
	" detach ms p50 \(.detach_ms.p50) p99 \(.detach_ms.p99)"' <<< "$json"
wait_unpatched "multi -n 1000"

json=$(kpctl_j links --multi -n 100 --kretprobe --rounds 3 --trigger 100 --late 200) ||
	fail "links --multi --kretprobe: $json"
note "$json"
assert_eq "$(json_bool "$json" .kretprobe)" true "kretprobe.multi run"
check_multi "$json" 100 3 "kretprobe.multi"
wait_unpatched "kretprobe.multi"

# The synchronous detach (RCU tasks rude and RCU tasks in the closing task),
# same boot: what the fast detach saves, and as clean.
echo 0 > "$FAST"
json=$(kpctl_j links --multi -n 1000 --rounds 3 --trigger 100 --late 200)
rc=$?
echo 1 > "$FAST"
[ $rc = 0 ] || fail "links --multi, fast detach off: $json"
note "$json"
assert_eq "$(json_int "$json" .fast_detach)" 0 "fast_detach reported"
check_multi "$json" 1000 3 "multi, fast detach off"
slow_p50=$(json_num "$json" .detach_ms.p50)
note "detach of one link over 1000 functions: fast p99 $fast_p99 ms, synchronous p50 $slow_p50 ms"
assert_num "$(awk -v a="$fast_p99" 'BEGIN { print a * 20 }')" '<' "$slow_p50" \
	"fast detach p99 x 20 below the synchronous p50"
wait_unpatched "fast detach off"

# bpftool shows the held link, a probe class per function.
# Held for up to 60 s; Ctrl-C ends it once checked (it then detaches, exit 1).
"$KPCTL" links --multi -n 20 --trigger 0 --hold 60000 --late 50 > /tmp/multi.out 2>&1 &
pid=$!
bt=""
for _ in $(seq 60); do
	bt=$("$BPFTOOL" -j link show 2>/dev/null |
		jq -c '[.[] | select(.type == "kprobe_multi")]' 2>/dev/null)
	[ "$(jq length <<< "${bt:-[]}")" -ge 1 ] && break
	sleep 0.1
done
[ "$(jq length <<< "${bt:-[]}")" = 1 ] || fail "bpftool: want one kprobe_multi link, got: $bt"
note "$bt"
assert_eq "$(json_int "$bt" '.[0].func_cnt')" 20 "bpftool: func_cnt"
assert_eq "$(json_int "$bt" '[.[0].funcs[] | select(.probe == "ftrace")] | length')" 20 \
	"bpftool: probe ftrace per function"
assert_eq "$(json_int "$bt" '[.[0].funcs[] | select(has("mechanism"))] | length')" 0 \
	"bpftool: no key mechanism"
plain=$("$BPFTOOL" link show 2>&1)
assert_match "$plain" "kprobe.multi  func_cnt 20" "bpftool plain: the link"
assert_match "$plain" "addr +cookie +probe +func \[module\]" "bpftool plain: probe column"
[[ $plain != *mechanism* ]] || fail "bpftool plain: a mechanism column: $plain"
[ "$(grep -c ' ftrace ' <<< "$plain")" -ge 20 ] || fail "bpftool plain: 20 ftrace rows: $plain"
kill -INT $pid
wait $pid
rc=$?
assert_eq $rc 1 "links --multi --hold: exit status after Ctrl-C ($(cat /tmp/multi.out))"
wait_unpatched "held link"

# The negative control: the dead flag set while attached must be caught.
assert_rc 1 kpctl_j links --multi -n 5 --control --late 50
json=$(sed -n '/^{/p' <<< "$out")
[ -n "$json" ] || fail "negative control: no JSON in: $out"
assert_num "$(json_int "$json" .late_runs)" '>' 0 "negative control: late runs"
assert_match "$out" "as the negative control wants" "negative control message"
wait_unpatched "negative control"

# attach --multi: one link over two SPECs, matched back by cookie.
# pid_vnr: getpgid(0) calls it once; other calls in kpctl may add some.
json=$(kpctl_j attach --multi --trigger 100 "$F" pid_vnr) ||
	fail "attach --multi: $json"
note "$json"
assert_eq "$(json_str "$json" .link)" kprobe_multi "attach --multi: link"
assert_eq "$(json_int "$json" '.probes | length')" 2 "attach --multi: probes"
for i in 0 1; do
	p=".probes[$i]"
	assert_eq "$(json_bool "$json" $p.multi)" true "attach --multi $i: multi"
	assert_eq "$(json_str "$json" $p.mechanism)" ftrace "attach --multi $i: mechanism"
	assert_eq "$(json_str "$json" $p.mechanism_source)" link_info "attach --multi $i: source"
	assert_eq "$(json_str "$json" "$p.probe")" ftrace "attach --multi $i: class"
	assert_eq "$(json_int "$json" "$p.probe_flags")" 2 "attach --multi $i: probe_flags"
	assert_eq "$(jq -c "$p | has(\"full_regs\")" <<< "$json")" false "attach --multi $i: no full_regs"
	[ "$(json_str "$json" $p.addr)" != 0x0 ] || fail "attach --multi $i: no address"
done
assert_eq "$(json_str "$json" .probes[0].spec)" "$F" "attach --multi: first SPEC"
assert_eq "$(json_int "$json" .probes[0].hits)" 100 "attach --multi: $F hits"
assert_num "$(json_int "$json" .probes[1].hits)" '>=' 100 "attach --multi: pid_vnr hits"
json=$(kpctl_j attach --multi --trigger 50 "$F%return") || fail "attach --multi %return: $json"
assert_eq "$(json_int "$json" .probes[0].hits)" 50 "attach --multi %return: hits"
wait_unpatched "attach --multi"
assert_rc 2 kpctl_j attach --multi "$F" no_such_function_kpx
assert_match "$out" "no such function in the kernel: 'no_such_function_kpx'" "attach --multi: unknown function"
# Offsets: the entry stays with ftrace, the others are kprobes of the same
# link (call-optimized once the optimizer is done), all with exact hits.
json=$(kpctl_j attach --multi --wait-opt 10 --trigger 100 "$F" "$F+$GETPGID_SINGLE" \
	"$GETPGID_MULTI_FUNC+$GETPGID_MULTI") || fail "attach --multi offsets: $json"
assert_eq "$(json_str "$json" .probes[0].mechanism)" ftrace "attach --multi offsets: entry"
for i in 1 2; do
	assert_eq "$(json_str "$json" .probes[$i].mechanism)" callopt \
		"attach --multi offsets: $(json_str "$json" .probes[$i].spec)"
	assert_eq "$(json_str "$json" .probes[$i].mechanism_source)" link_info \
		"attach --multi offsets $i: source"
	# The class from the link info, callopt (not jmpopt) from debugfs.
	assert_eq "$(json_str "$json" .probes[$i].probe)" optimized "attach --multi offsets $i: class"
done
assert_eq "$(json_str "$json" .probes[0].probe)" ftrace "attach --multi offsets: entry class"
assert_eq "$(json_int "$json" .probes[0].hits)" 100 "attach --multi offsets: entry hits"
assert_eq "$(json_int "$json" .probes[1].hits)" 100 "attach --multi offsets: $F+$GETPGID_SINGLE hits"
assert_num "$(json_int "$json" .probes[2].hits)" '>=' 100 "attach --multi offsets: pid_vnr hits"
assert_eq "$(grep -c "$F\|$GETPGID_MULTI_FUNC" /sys/kernel/debug/kprobes/list)" 0 \
	"attach --multi offsets: kprobes left after the detach"
# All or nothing: a site inside an instruction refuses the whole link.
assert_rc 1 kpctl_j attach --multi "$F" "$F+$GETPGID_SINGLE" "$F+$GETPGID_MIDINSN"
assert_match "$out" "refused one kprobe_multi link over 3" "attach --multi inside an instruction"
assert_match "$out" "'$F\+$GETPGID_MIDINSN': not on an instruction boundary" \
	"attach --multi inside an instruction: the reason"
assert_eq "$(grep -c "$F" /sys/kernel/debug/kprobes/list)" 0 \
	"attach --multi inside an instruction: kprobes left"
# The entry and its fentry call as a site: the same place, refused.
assert_rc 1 kpctl_j attach --multi "$F" "$F+$GETPGID_FENTRY"
assert_match "$out" "refused one kprobe_multi link over 2" "attach --multi entry and fentry call"
# A site inside the fentry call is no instruction boundary: refused with
# EILSEQ, as on stock, alone or with the entry.
IN_CALL=$((GETPGID_FENTRY + 2))
assert_rc 1 kpctl_j attach --multi "$F" "$F+$IN_CALL"
assert_match "$out" "refused one kprobe_multi link over 2" "attach --multi entry and a site inside its fentry call"
assert_match "$out" "'$F\+$IN_CALL': not on an instruction boundary" \
	"attach --multi inside the fentry call: the reason"
assert_rc 1 kpctl_j attach --multi "$F+$IN_CALL"
assert_match "$out" "not on an instruction boundary" "attach --multi inside the fentry call, alone"
assert_eq "$(grep -c "$F" /sys/kernel/debug/kprobes/list)" 0 \
	"attach --multi inside the fentry call: kprobes left"
assert_rc 2 kpctl_j attach --multi "$F" "$F%return"
assert_rc 2 kpctl_j attach --multi --cost 10 "$F"
wait_unpatched "attach --multi errors"

# A link on module functions holds the module until its fprobe is gone:
# it detaches synchronously, so the module unloads right after.
insmod "$MODDIR/kpx_targets.ko" || fail "insmod kpx_targets"
json=$(kpctl_j attach --multi --duration 1 kpx_targets:kpx_target_entry kpx_targets:kpx_target_single)
rc=$?
rmmod kpx_targets || fail "rmmod right after the detach of a kprobe_multi link on its functions"
[ $rc = 0 ] || fail "attach --multi on module functions: $json"
note "$(jq -c '[.probes[] | {spec, mechanism, hits}]' <<< "$json")"
for i in 0 1; do
	assert_num "$(json_int "$json" .probes[$i].hits)" '>' 0 "module function $i: hits"
	assert_eq "$(json_str "$json" .probes[$i].mechanism)" ftrace "module function $i: mechanism"
done
wait_unpatched "module link"

assert_rc 2 "$KPCTL" links --rounds 2
assert_match "$out" "--rounds needs --multi" "--rounds without --multi"
assert_rc 2 "$KPCTL" links --multi --rounds 0
assert_rc 2 "$KPCTL" links --multi --rounds 1.5
assert_rc 2 "$KPCTL" links --multi -n 0
note "$(( $(date +%s) - start )) s"
