#!/usr/bin/env bash
# Sites whose displaced code callopt must refuse, picked from the kernel
# image by scripts/sites/callopt-sites (build/callopt-sites.env), each with a
# control site in the same function that it must take:
#  - the issue's reproducer: handle_softirqs' preempt_count() load, probed
#    while /proc/interrupts is read: the kernel must neither print "huh,
#    entered softirq" nor hang, and the probe must not be callopt;
#  - %gs operands, single and inside a longer region (the preempt count is
#    %gs-relative per-CPU data and callopt raises it);
#  - REP string instructions (unbounded time with preemption disabled);
#  - instructions that move the stack pointer, single and in a region (the
#    ORC frame at the end differs from the one at the site);
#  - regions that end in a RET (the kernel patched "jmp __x86_return_thunk"
#    to "ret; int3..."): the RET would leave the buffer with preemption
#    disabled, and every hit would leak a preempt count.
# Then all of them at once, with the controls, under a workload.
. "$(dirname "$0")/../lib.sh"
CS=$BUILD/callopt-sites$SFX.env
[ -r "$CS" ] || fail "$CS missing (make all)"
. "$CS"
marker="kpx-refused-$$-$RANDOM"
echo "$marker" > /dev/kmsg
log_since_marker() { dmesg | sed -n "/$marker/,\$p"; }

attach_json() { # SPEC...: kpctl attach JSON, or fail
	"$KPCTL" -j attach --wait-opt 10 "$@"
}
mech_of() { jq -r '.probes[0].mechanism // "missing"' <<< "$1"; }

# 1. The reproducer, where the kernel has handle_softirqs() as a function,
# under its name or a clone's (PREEMPT_RT: handle_softirqs.constprop.0);
# where it was inlined everywhere, scripts/sites/callopt-sites prints no site.
if [ -z "$RE_SOFTIRQ" ]; then
	grep -qw handle_softirqs /proc/kallsyms &&
		fail "handle_softirqs is in kallsyms, but $CS has no RE_SOFTIRQ site"
	note "no handle_softirqs() in this kernel (inlined): no reproducer site"
else
	"$KPCTL" -j attach --duration 4 $RE_SOFTIRQ > /tmp/re.json &
	pid=$!
	sleep 1
	for i in $(seq 50); do
		cat /proc/interrupts > /dev/null || fail "cat /proc/interrupts failed (try $i)"
	done
	wait $pid || fail "kpctl attach $RE_SOFTIRQ: $(cat /tmp/re.json)"
	re=$(cat /tmp/re.json)
	m=$(mech_of "$re")
	hits=$(jq -r '.probes[0].hits' <<< "$re")
	note "$RE_SOFTIRQ: $m, $hits hits"
	[[ $hits =~ ^[0-9]+$ ]] && [ "$hits" -gt 0 ] || fail "$RE_SOFTIRQ: hits '$hits'"
	[ "$m" != callopt ] && [ "$m" != missing ] || fail "$RE_SOFTIRQ is $m"
	log_since_marker | grep -q "huh, entered softirq" &&
		fail "softirq preempt count changed: $(log_since_marker | grep -m1 huh)"
fi

# 2. Every class: each candidate the kernel lets us probe is not callopt,
# each control is.
usable=()
controls=()
for cls in GS_SINGLE GS_MULTI REP FRAME_SINGLE FRAME_MULTI RET; do
	eval "cands=\$RE_$cls ctl=\$CONTROL_$cls"
	n=0
	for s in $cands; do
		if ! out=$(attach_json "$s" 2>&1); then
			note "$cls $s: not probed at all ($(tail -n1 <<< "$out"))"
			continue
		fi
		m=$(mech_of "$out")
		[ "$m" != missing ] || fail "$cls $s: no mechanism in $out"
		[ "$m" != callopt ] || fail "$cls $s is callopt"
		note "$cls $s: $m"
		[[ " ${usable[*]} " == *" $s "* ]] || usable+=("$s")
		n=$((n + 1))
	done
	[ $n -ge 1 ] || fail "$cls: no candidate could be probed: $cands"
	c=0
	for s in $ctl; do
		out=$(attach_json "$s" 2>&1) || continue
		m=$(mech_of "$out")
		note "$cls control $s: $m"
		if [ "$m" = callopt ]; then
			# once each: classes share functions
			[[ " ${controls[*]} " == *" $s "* ]] || controls+=("$s")
			c=$((c + 1))
		fi
	done
	[ $c -ge 1 ] || fail "$cls: no control site is callopt: $ctl"
	assert_no_kprobes
done

# 3. All at once, under a workload that runs softirqs, page allocation,
# file I/O, fork and exec.
work() {
	local end=$((SECONDS + 6)) i=0
	while [ $SECONDS -lt $end ]; do
		dd if=/dev/zero of=/tmp/refused.$i bs=64k count=16 status=none
		cmp -s /tmp/refused.$i <(head -c 1048576 /dev/zero) || return 1
		rm -f /tmp/refused.$i
		ls -R /usr/include > /dev/null 2>&1
		cat /proc/interrupts > /dev/null
		i=$((i + 1))
	done
	echo "$i"
}
work > /tmp/work.out &
wpid=$!
all=$("$KPCTL" -j attach --duration 5 "${usable[@]}" "${controls[@]}") ||
	fail "attach all: $all"
wait $wpid || fail "the workload failed: $(cat /tmp/work.out)"
note "workload: $(cat /tmp/work.out) rounds"
for s in "${usable[@]}"; do
	m=$(jq -r --arg s "$s" '[.probes[] | select(.spec == $s)][0].mechanism // ""' <<< "$all")
	[ -n "$m" ] || fail "$s missing from $all"
	[ "$m" != callopt ] || fail "$s is callopt under load"
done
for s in "${controls[@]}"; do
	m=$(jq -r --arg s "$s" '[.probes[] | select(.spec == $s)][0].mechanism // ""' <<< "$all")
	[ "$m" = callopt ] || fail "control $s is '$m' under load"
done
note "$(jq -r '.probes[] | "\(.spec) \(.mechanism) \(.hits)"' <<< "$all")"
assert_no_kprobes
log_since_marker | grep -Eq "huh, entered softirq|preempt count|scheduling while atomic" &&
	fail "kernel log: $(log_since_marker | grep -Em3 'huh|preempt count|atomic')"
echo ok
