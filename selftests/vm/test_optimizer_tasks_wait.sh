#!/usr/bin/env bash
# The kprobe optimizer still waits for RCU-tasks when it unoptimizes a
# jump-optimized probe that stays registered (here: disabled). Its detour
# buffer is freed later after nothing more than a synchronize_rcu(), so a
# task preempted inside it must have left before the optimizer goes on.
# The first version of the series decided whether to wait after
# do_unoptimize_kprobes() had emptied the lists, and skipped the wait.
#
# kpx_hog holds RCU-tasks grace periods off. With it loaded, disabling the
# jump-optimized probe must leave the optimizer waiting, with kprobe_mutex
# held, so that enabling the probe again blocks until the hog goes. A
# callopt probe, disabled the same way, needs no wait: enabling it again
# does not block (the control).
. "$(dirname "$0")/../lib.sh"
. "$SITES"
T=/sys/kernel/tracing
EV=$T/events/kprobes
CALLOPT=$KNOB_CALLOPT
HOG=$MODDIR/kpx_hog.ko
[ -w $CALLOPT ] || fail "no $CALLOPT"
[ -r "$HOG" ] || fail "$HOG missing (make modules)"
SITE="$GETPGID_FUNC+$GETPGID_SINGLE"
cleanup() {
	rmmod kpx_hog 2>/dev/null
	for e in kpx_wait_jmp kpx_wait_call; do
		[ -e $EV/$e/enable ] && echo 0 > $EV/$e/enable
		echo "-:$e" >> $T/kprobe_events 2>/dev/null
	done
	echo 1 > $CALLOPT
}
trap cleanup EXIT

# mech_of EVENT: the debugfs mechanism flags of the event's probe
flags_of() { grep " $SITE " $KPROBES_LIST | head -n1; }

# check NAME KNOB WANT_BLOCK
check() {
	local name=$1 knob=$2 want=$3 i done_file=/tmp/$1.enabled
	echo "$knob" > $CALLOPT
	echo "p:$name $SITE" >> $T/kprobe_events || fail "cannot add $name at $SITE"
	echo 1 > $EV/$name/enable
	for i in $(seq 100); do
		flags_of | grep -q OPTIMIZED && break
		sleep 0.1
	done
	note "$name armed: $(flags_of)"
	flags_of | grep -q OPTIMIZED || fail "$name: not optimized in 10 s"
	if [ "$knob" = 0 ]; then
		flags_of | grep -q CALLOPT && fail "$name: callopt with the knob off"
	else
		flags_of | grep -q CALLOPT || fail "$name: not callopt"
	fi

	insmod "$HOG" || fail "insmod kpx_hog"
	echo 0 > $EV/$name/enable
	sleep 0.5	# the optimizer runs 5 jiffies after the disable
	rm -f $done_file
	( echo 1 > $EV/$name/enable && touch $done_file ) &
	local pid=$!
	sleep 3
	if [ -e $done_file ]; then blocked=0; else blocked=1; fi
	note "$name: enabling again while RCU-tasks is held off: blocked=$blocked"
	rmmod kpx_hog || fail "rmmod kpx_hog"
	wait $pid || fail "$name: enable failed"
	[ -e $done_file ] || fail "$name: enable did not finish after the hog went"
	[ $blocked = "$want" ] ||
		fail "$name: blocked=$blocked, want $want (1: the optimizer waits for RCU-tasks)"
	echo 0 > $EV/$name/enable
	echo "-:$name" >> $T/kprobe_events || fail "cannot remove $name"
}

check kpx_wait_jmp 0 1
check kpx_wait_call 1 0
assert_no_kprobes
echo ok
