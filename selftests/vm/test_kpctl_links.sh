#!/usr/bin/env bash
# kpctl links: one BPF kprobe link on each of 200 kernel functions; attach
# and detach latencies, mechanisms, hits, no program run after detach and a
# grace period (late runs; and a negative control that must report some),
# nothing left registered; kretprobes; the stock
# detach path (fast_detach off) when the knob exists; Ctrl-C while
# attaching; bad usage.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
FAST=$KNOB_FAST

# The kernel may release kprobes after detach returns: give it 5 s.
wait_no_kprobes() {
	for _ in $(seq 50); do
		[ -z "$(cat "$KPROBES_LIST" 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	assert_no_kprobes
}

check_links() { # JSON N WHAT
	local json=$1 n=$2 what=$3 attached failures l
	int() { json_int "$json" "$1"; }
	num() { json_num "$json" "$1"; }
	attached=$(int .attached)
	failures=$(int .attach_failures)
	if [ "$attached" != "$n" ]; then
		# Only when the candidates ran out, every failure accounted for.
		assert_num "$attached" '>=' $((n * 95 / 100)) "$what: attached of $n"
		assert_eq $((attached + failures)) "$(int .candidates)" \
			"$what: attached + failures when short of $n"
	fi
	assert_eq "$(int '[.failure_reasons[]] | add // 0')" "$failures" \
		"$what: failure reasons add up"
	assert_eq "$(int .late_runs)" 0 "$what: late runs"
	assert_eq "$(int .late_check.flagged)" 0 "$what: runs that saw the dead flag"
	assert_eq "$(int '[.mechanisms[]] | add')" "$attached" "$what: mechanisms add up"
	assert_eq "$(int '[.mechanism_sources[]] | add')" "$attached" \
		"$what: mechanism sources add up"
	# Every link is at a function's entry: the ftrace site (the class in the
	# link info on ours, debugfs on a stock kernel).
	assert_eq "$(int .mechanisms.ftrace)" "$attached" "$what: ftrace at every entry"
	assert_eq "$(int ".mechanism_sources.$(stock_kernel && echo debugfs || echo link_info)")" \
		"$attached" "$what: where the mechanisms come from"
	# Schema 2 has no full_regs_count.
	assert_eq "$(jq -c 'has("full_regs_count")' <<< "$json")" false "$what: no full_regs_count"
	assert_links_json "$json" "$F" "$what"
	for l in attach_ms detach_ms; do
		assert_num "$(num .$l.sum)" '<=' "$(num .$l.total)" "$what: $l sum <= total"
	done
}

start=$(date +%s)
json=$(kpctl_j links -n 200) || fail "links -n 200: $json"
note "$json"
check_links "$json" 200 "links -n 200"
jq -r '"attach ms total \(.attach_ms.total) p50 \(.attach_ms.p50) p99 \(.attach_ms.p99);" +
	" detach ms total \(.detach_ms.total) p50 \(.detach_ms.p50) p99 \(.detach_ms.p99);" +
	" fast_detach \(.fast_detach)"' <<< "$json" | sed 's/^/# /'
wait_no_kprobes

json=$(kpctl_j links -n 50 --kretprobe --trigger 100 --late 200) ||
	fail "links --kretprobe: $json"
note "$json"
assert_eq "$(json_bool "$json" .kretprobe)" true "kretprobe run"
check_links "$json" 50 "links --kretprobe"
wait_no_kprobes

# The stock detach path (synchronous grace periods) must be as clean.
if [ -w "$FAST" ]; then
	old=$(cat "$FAST")
	echo 0 > "$FAST"
	json=$(kpctl_j links -n 30 --trigger 100 --late 200)
	rc=$?
	echo "$old" > "$FAST"
	[ $rc = 0 ] || fail "links with fast detach off: $json"
	note "$json"
	assert_eq "$(json_int "$json" .fast_detach)" 0 "fast_detach reported"
	check_links "$json" 30 "links, fast detach off"
	wait_no_kprobes
else
	note "no $FAST: stock detach only"
fi

# Text output.
out=$("$KPCTL" links -n 10 --trigger 50 --late 50) || fail "links text: $out"
note "$out"
assert_match "$out" "attached 10 of 10" "text: attached"
assert_match "$out" "detach ms: total" "text: detach latencies"
assert_match "$out" "0 late run" "text: late runs"
wait_no_kprobes

# The negative control: the dead flag set while attached must be caught.
assert_rc 1 kpctl_j links -n 5 --control --late 50
json=$(sed -n '/^{/p' <<< "$out")
[ -n "$json" ] || fail "negative control: no JSON in: $out"
assert_num "$(json_int "$json" .late_runs)" '>' 0 "negative control: late runs"
assert_match "$out" "as the negative control wants" "negative control message"
wait_no_kprobes

# Ctrl-C in the middle of attaching: everything attached is detached, exit 1.
"$KPCTL" links -n 4000 > /tmp/links.out 2> /tmp/links.err &
pid=$!
for _ in $(seq 300); do
	[ "$(wc -l < $KPROBES_LIST)" -ge 10 ] && break
	sleep 0.05
done
[ "$(wc -l < $KPROBES_LIST)" -ge 10 ] || fail "no link attached after 15 s"
kill -INT $pid
wait $pid
rc=$?
assert_eq $rc 1 "exit status after Ctrl-C"
assert_match "$(cat /tmp/links.err)" "interrupted while attaching" "Ctrl-C message"
wait_no_kprobes

assert_rc 2 "$KPCTL" links -n 0
assert_rc 2 "$KPCTL" links -n 5000
assert_rc 2 "$KPCTL" links -n 1.5
assert_rc 2 "$KPCTL" links --hold x
assert_rc 2 "$KPCTL" links extra
assert_rc 0 "$KPCTL" links --help
assert_match "$out" "late run" "links --help"
note "$(( $(date +%s) - start )) s"
