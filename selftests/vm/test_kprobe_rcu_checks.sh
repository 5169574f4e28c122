#!/usr/bin/env bash
# Kprobes on the RCU lockdep helpers that the kprobe hit paths call before
# they can tell a recursive hit: every instruction boundary of
# rcu_read_lock_any_held(), rcu_is_watching(),
# rcu_lockdep_current_cpu_online() and rcu_read_lock_sched_held() that this
# kernel has (RCU_CHECK_SITES of scripts/sites/callopt-sites).
#
# With PROVE_RCU_LIST, every RCU list walk checks its caller with
# rcu_read_lock_any_held() (which calls the other two). A nested hit of an
# optimized probe (jmpopt or callopt) counts itself missed with
# kprobes_inc_nmissed_count(), which walks such a list: a kprobe on them
# recursed until the stack overflowed (the debug sweep's "stack-protector:
# Kernel stack is corrupted", with the preempt count near overflow; arm64's
# get_kprobe() makes the same check before it can tell recursion).
# callopt_handler()'s walk of its table called rcu_read_lock_sched_held()
# before kprobe_running(). Each
# site must now be refused (the three are in the kprobe blacklist on a
# lockdep kernel) or work: attached, armed while the system runs, and the
# kernel log clean. On a kernel without lockdep only rcu_is_watching()
# exists, and it must work.
. "$(dirname "$0")/../lib.sh"
CS=$BUILD/callopt-sites$SFX.env
[ -r "$CS" ] || fail "$CS missing (make all)"
. "$CS"
[ -n "${RCU_CHECK_SITES:-}" ] || fail "no RCU_CHECK_SITES in $CS"
BL=/sys/kernel/debug/kprobes/blacklist
[ -r $BL ] || fail "no $BL"
marker="kpx-rcu-checks-$$-$RANDOM"
echo "$marker" > /dev/kmsg

lockdep=0
grep -q ' rcu_read_lock_any_held$' /proc/kallsyms && lockdep=1
# /sys/kernel/debug/kprobes/blacklist: "0xSTART-0xEND<TAB>SYMBOL" per line.
blacklisted() { cut -f2 $BL | grep -qxF "$1"; }
bl=
for f in rcu_read_lock_any_held rcu_is_watching rcu_lockdep_current_cpu_online rcu_read_lock_sched_held; do
	blacklisted $f && bl+=" $f"
done
note "lockdep: $lockdep; blacklisted:${bl:- none}"

# Blacklisted: attach fails. rcu_read_lock_sched_held(): attached below,
# all at once. Anything else (rcu_is_watching() without lockdep, which is
# notrace, so trace_kprobe refuses it as well): one at a time, either way.
refused=0 alone=0 kept=()
for s in $RCU_CHECK_SITES; do
	f=${s%%+*}
	if blacklisted "$f"; then
		if out=$("$KPCTL" -j attach "$s" 2>&1); then
			fail "$s: attached although $f is in the kprobe blacklist: $out"
		fi
		refused=$((refused + 1))
	elif [ "$f" = rcu_read_lock_sched_held ]; then
		kept+=("$s")
	else
		"$KPCTL" -j attach --wait-opt 5 --trigger 100 "$s" > /dev/null 2>&1 && alone=$((alone + 1))
	fi
done
note "$refused sites refused (blacklisted), $alone attached alone, ${#kept[@]} to attach at once"

# rcu_read_lock_sched_held() all at once, armed for a while (optimized
# where they can be) while the system runs, with getpgid triggers.
if [ ${#kept[@]} -gt 0 ]; then
	out=$("$KPCTL" -j attach --wait-opt 20 --trigger 2000 --duration 3 "${kept[@]}") ||
		fail "attach ${kept[*]}: $out"
	n=$(jq '.probes | length' <<< "$out")
	assert_eq "$n" "${#kept[@]}" "probes attached"
	note "mechanisms: $(jq -r '[.probes[].mechanism] | group_by(.) | map("\(.[0]) \(length)") | join(", ")' <<< "$out")"
	note "rcu_read_lock_sched_held: $(jq '[.probes[].hits] | add' <<< "$out") hits of this process"
fi

if [ $lockdep = 1 ]; then
	for f in rcu_read_lock_any_held rcu_is_watching; do
		blacklisted $f || fail "$f is not in the kprobe blacklist: a kprobe there recurses (kprobes_inc_nmissed_count)"
	done
	if grep -q ' rcu_lockdep_current_cpu_online$' /proc/kallsyms; then
		blacklisted rcu_lockdep_current_cpu_online ||
			fail "rcu_lockdep_current_cpu_online is not in the kprobe blacklist"
	fi
	blacklisted rcu_read_lock_sched_held &&
		fail "rcu_read_lock_sched_held is blacklisted: callopt_handler() must not need that"
	printf '%s\n' "${kept[@]}" | grep -q '^rcu_read_lock_sched_held+' ||
		fail "no rcu_read_lock_sched_held site attached"
else
	blacklisted rcu_is_watching && fail "rcu_is_watching is blacklisted without lockdep"
fi
[ -z "$(grep -v '^$' /sys/kernel/debug/kprobes/list 2>/dev/null)" ] ||
	fail "kprobes left behind: $(head -3 /sys/kernel/debug/kprobes/list)"
dmesg | sed -n "/$marker/,\$p" | grep -E 'BUG|WARNING|stack-protector|preempt_count' &&
	fail "the kernel complained"
echo ok
