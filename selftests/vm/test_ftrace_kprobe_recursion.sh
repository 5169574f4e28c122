#!/usr/bin/env bash
# A kprobe on ftrace must not recurse into itself through what its handler
# calls before kprobe_running() protects it. With CONFIG_PROVE_RCU_LIST,
# get_kprobe()'s list walk calls rcu_read_lock_any_held(), a traceable
# function: a BPF kprobe at its entry is hit from inside every kprobe hit.
# kprobe_ftrace_handler() keeps ftrace_test_recursion_trylock() for that
# (the first version of the series replaced it with kprobe_running() alone,
# and the kernel overflowed its stack here). Two probes at the same entry
# make the probe an aggregate, whose missed-hit count walks a list too.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=rcu_read_lock_any_held
grep -qw "$F" /proc/kallsyms ||
	skip "no $F in this kernel (it needs lockdep's RCU checks: the debug flavour)"
# Patch 0003 puts it in the kprobe blacklist: an optimized kprobe in its
# body recursed through kprobes_inc_nmissed_count()'s list walk, and
# nothing that kprobe_ftrace_handler() calls before kprobe_running() can
# be probed any more. Then it must be refused, and leave nothing behind.
if cut -f2 /sys/kernel/debug/kprobes/blacklist | grep -qxF "$F"; then
	if json=$("$KPCTL" -j attach "$F" 2>&1); then
		fail "$F is in the kprobe blacklist, yet attached: $json"
	fi
	assert_no_kprobes
	note "$F is blacklisted (patch 0003): refused"
	echo ok
	exit 0
fi
json=$("$KPCTL" -j attach --trigger 2000 --duration 2 "$F" "$F" \
	"$GETPGID_FUNC" "$GETPGID_FUNC+$GETPGID_SINGLE") || fail "attach: $json"
note "$(jq -c '[.probes[] | {spec, mechanism, hits, missed}]' <<< "$json")"
for i in 0 1; do
	assert_eq "$(jq -r ".probes[$i].mechanism" <<< "$json")" ftrace "$F probe $i mechanism"
done
# kpctl counts its own hits: getpgid(0) 2000 times, at entry and mid.
assert_eq "$(jq -r '.probes[2].hits' <<< "$json")" 2000 "$GETPGID_FUNC entry hits"
assert_eq "$(jq -r '.probes[3].hits' <<< "$json")" 2000 "$GETPGID_FUNC+$GETPGID_SINGLE hits"
assert_no_kprobes
echo ok
