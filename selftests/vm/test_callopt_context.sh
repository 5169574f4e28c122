#!/usr/bin/env bash
# What a callopt probe changes in the context of the code it probes, and
# what a task stopped in its trampolines looks like (kpx_ctx.ko runs each
# experiment in the kernel; see selftests/modules/kpx_ctx.c):
#  df       the handler runs with DF clear; the probed code keeps DF set
#  ac       a task that schedules on its way out of a probe inside a STAC
#           region neither hands AC to the next task nor loses its own
#  preempt  the way out of a probe is a preemption point on preempt=full
#           only: none on preempt=none or preempt=voluntary
#  unwind   a reliable stack trace of a task stopped in callopt_exit is
#           right; a site that moves the stack pointer is not callopt
. "$(dirname "$0")/../lib.sh"
MOD=$MODDIR/kpx_ctx.ko
[ -r "$MOD" ] || fail "$MOD missing (make modules)"
RES=/sys/kernel/debug/kpx_ctx/result
trap 'rmmod kpx_ctx 2>/dev/null' EXIT
CALLOPT_MECH=2 # enum kprobe_mechanism: KPROBE_MECH_CALLOPT

# The kernel's preemption model: full, voluntary or none.
preempt_mode() {
	local f=/sys/kernel/debug/sched/preempt
	if [ -r $f ]; then # PREEMPT_DYNAMIC: "none voluntary (full)"
		sed -n 's/.*(\([a-z]*\)).*/\1/p' $f
	elif uname -v | grep -qw 'PREEMPT\|PREEMPT_RT'; then
		echo full
	else
		echo none
	fi
}
MODE=$(preempt_mode)
note "preemption: $MODE ($(uname -v))"

# run EXP [PARAM=VALUE...]: load the module, keep its result in $r
run() {
	rmmod kpx_ctx 2>/dev/null
	insmod "$MOD" exp="$@" || fail "insmod kpx_ctx exp=$*"
	r=$(cat $RES) || fail "no $RES"
	rmmod kpx_ctx || fail "rmmod kpx_ctx"
	note "exp=$*: $(tr '\n' ' ' <<< "$r")"
	[ "$(val done)" = 1 ] || fail "exp=$*: no result"
}
# val KEY: the number KEY= in $r; fails unless it is one
val() {
	local v
	v=$(sed -n "s/^$1=//p" <<< "$r")
	[ "$1" = done ] || [[ $v =~ ^[0-9]+$ ]] || fail "exp: $1 is '$v', not a number"
	echo "$v"
}
want() { # KEY OP VALUE
	local v; v=$(val "$1")
	[ "$v" "$2" "$3" ] || fail "$1 = $v, want $2 $3 ($(tr '\n' ' ' <<< "$r"))"
}

run df
want mech -eq $CALLOPT_MECH
want hits -eq 20000
want handler_df -eq 0
want regs_df -eq 20000
want after_df -eq 20000

run ac
want smap -eq 1
want mech -eq $CALLOPT_MECH
want hits -eq 20000
want regs_ac -eq 20000
want after_ac -eq 20000
want ac_lost -eq 0
want ac_leaked -eq 0
if [ "$MODE" = full ]; then
	# The reschedule happened on the way out: the test tested something.
	want switched -gt 100
else
	want switched -eq 0
fi

run preempt
want mech -eq $CALLOPT_MECH
want hits -eq 20000
if [ "$MODE" = full ]; then
	want switches -gt 100
else
	want switches -eq 0
fi

run unwind site=plain
want mech -eq $CALLOPT_MECH
want wrong -eq 0
if [ "$MODE" = full ]; then
	want at_exit -gt 50
	# Every stopped task unwound reliably to target, loop, kthread.
	want reliable -eq "$(val at_exit)"
else
	want at_exit -eq 0
fi

run unwind site=push
want wrong -eq 0
want at_exit -eq 0
m=$(val mech)
[ "$m" != $CALLOPT_MECH ] || fail "pushq site is callopt"
note "pushq site: mechanism $m (not callopt)"
echo ok
