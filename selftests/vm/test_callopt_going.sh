#!/usr/bin/env bash
# A call-optimized probe killed with its module while the module's code
# still runs ("x86/kprobes: Give a killed callopt probe's site its
# original bytes back"). kpx_going_helper's module notifier, which runs
# after kprobes' own when kpx_going goes, calls kpx_going's probed
# function 100 times: each call must return the probed movabs' immediate,
# run no probe handler, and find the site's original bytes (all 10 of the
# movabs, as copied before the probe) back. Meanwhile a kthread on CPU 1
# calls the function in a loop, from before the rmmod until the notifier
# stops it: its calls run while the probe is killed and the site restored,
# and at least 100 must return after the kill, all with the right result.
# Before the fix the first call after the kill never returned (the site
# still called callopt_entry, which found no probe and returned to it), so
# rmmod hung: the test fails after 60 s, and says whether rmmod keeps
# running (a loop) or sleeps (a lock). A failed run leaves that rmmod
# looping: do not reuse the VM. Then kpx_going loads again at the same
# address and a second kprobe there makes kprobes prepare the killed probe
# anew (callopt_forget()): it must be call-optimized again and hit.
. "$(dirname "$0")/../lib.sh"
H=/sys/module/kpx_going_helper/parameters
V=/sys/module/kpx_going/parameters

cleanup() {
	rmmod kpx_going 2> /dev/null
	rmmod kpx_going_helper 2> /dev/null
}
trap cleanup EXIT

# wait_callopt ADDR: the kprobe at ADDR is call-optimized.
wait_callopt() {
	local l
	for _ in $(seq 300); do
		l=$(grep "^$1 " "$KPROBES_LIST")
		[[ $l == *'[CALLOPT]'* ]] && return 0
		sleep 0.1
	done
	fail "the kprobe at $1 was not call-optimized: '$l' (list: $(cat "$KPROBES_LIST"))"
}

# kick N: kpx_going calls its probed function N times, all right.
kick() {
	local c0 c1
	c0=$(cat $V/calls)
	echo "$1" > $V/kick || fail "kick $1"
	c1=$(cat $V/calls)
	assert_eq "$((c1 - c0))" "$1" "calls made by kick"
	assert_eq "$(cat $V/wrong)" 0 "calls with a wrong result"
}

# going ROUND: unload kpx_going, which must return within 60 s, and check
# what the helper's calls after the kill saw.
going() {
	local pid g0 end st
	g0=$(cat $H/goings)
	echo 1 > $H/spin || fail "$1: start the calling loop"
	rmmod kpx_going &
	pid=$!
	# Wall-clock seconds: a looping task slows the sleeps down.
	end=$((SECONDS + 60))
	while [ $SECONDS -lt $end ]; do
		kill -0 $pid 2> /dev/null || break
		sleep 0.1
	done
	if kill -0 $pid 2> /dev/null; then
		# How it hangs: a task looping through the killed site keeps
		# running (state R, its stack unreadable while it runs); a
		# task blocked on a lock (a self-deadlock, say) sleeps (D).
		st=
		for _ in 1 2 3 4 5; do
			st+=$(awk '{ print $3 }' /proc/$pid/stat 2> /dev/null)
			sleep 1
		done
		[[ $st == *R* ]] &&
			fail "$1: rmmod kpx_going did not return in 60 s and keeps running (states $st): calls into the killed site do not return"
		fail "$1: rmmod kpx_going did not return in 60 s, blocked (states $st): $(tr '\n' ' ' < /proc/$pid/stack 2> /dev/null)"
	fi
	wait $pid || fail "$1: rmmod kpx_going failed"
	assert_eq "$(cat $H/goings)" "$((g0 + 1))" "$1: GOING notifications the helper handled"
	note "$1: after the kill: $(cat $H/going_calls) calls, $(cat $H/going_wrong) wrong, $(cat $H/going_hits) hits, site byte $(printf %02x "$(cat $H/going_byte)"), $(cat $H/going_site_diff) of 10 bytes changed"
	assert_eq "$(cat $H/going_calls)" 100 "$1: calls after the kill"
	assert_eq "$(cat $H/going_wrong)" 0 "$1: calls after the kill with a wrong result"
	assert_eq "$(cat $H/going_hits)" 0 "$1: probe hits after the kill (a gone probe runs no handler)"
	assert_eq "$(cat $H/going_byte)" $((0x48)) "$1: first byte at the site after the kill (movabs' REX.W)"
	assert_eq "$(cat $H/going_site_diff)" 0 "$1: bytes of the site's movabs that differ from before the probe"
	note "$1: the loop on CPU 1: $(cat $H/spin_after_kill) calls after the kill, $(cat $H/spin_wrong) wrong in all"
	assert_eq "$(cat $H/spin_wrong)" 0 "$1: the loop's calls with a wrong result"
	assert_num "$(cat $H/spin_after_kill)" '>=' 100 "$1: the loop's calls after the kill"
	grep -q "^$site .*\[GONE\]" "$KPROBES_LIST" ||
		fail "$1: the kprobe at $site is not [GONE]: $(grep "^$site " "$KPROBES_LIST")"
}

insmod "$MODDIR/kpx_going_helper.ko" probe=1 || fail "insmod kpx_going_helper"
insmod "$MODDIR/kpx_going.ko" || fail "insmod kpx_going"
site=$(cat $H/site)
assert_match "$site" '^ffff' "site address"
wait_callopt "$site"
kick 1000
assert_eq "$(cat $H/hits)" 1000 "hits of the first kprobe"
going "first load"
hits_first=$(cat $H/hits)

# Loaded again at the same address: the second kprobe takes the killed one.
insmod "$MODDIR/kpx_going.ko" || fail "insmod kpx_going again"
assert_eq "$(cat $H/site)" "$site" \
	"kpx_going's site on its second load (the re-prepare path needs the same address)"
assert_eq "$(cat $H/again)" 1 "the second kprobe registered at the first one's address"
wait_callopt "$site"
kick 1000
assert_eq "$(cat $H/hits_again)" 1000 "hits of the second kprobe"
assert_eq "$(cat $H/hits)" "$hits_first" "hits of the first (gone) kprobe after the second load"
going "second load"

rmmod kpx_going_helper || fail "rmmod kpx_going_helper"
assert_no_kprobes
echo ok
