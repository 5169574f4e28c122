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
#  flags    the probed code's flags survive both trampolines' returns
#           (call depth tracking's return thunk changes them)
#  traced   with TRACE_PREEMPT_TOGGLE, the preemptirq tracepoints see the
#           exit's preempt_enable() pair each preempt_disable() of a hit
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
# register_kprobe() of an enabled probe returns with the call installed
want mech_registered -eq $CALLOPT_MECH
want mech -eq $CALLOPT_MECH
want hits -eq 20000
want handler_df -eq 0
want regs_df -eq 20000
want after_df -eq 20000

run ac
# Without SMAP (QEMU's qemu64 model) STAC and CLAC are patched out: AC is
# never set, and there is nothing to leak or lose. The module must agree
# with /proc/cpuinfo about SMAP.
if grep -qw smap /proc/cpuinfo; then smap=1; else smap=0; fi
want smap -eq $smap
want mech -eq $CALLOPT_MECH
want hits -eq 20000
want ac_lost -eq 0
want ac_leaked -eq 0
if [ $smap = 1 ]; then
	want regs_ac -eq 20000
	want after_ac -eq 20000
else
	note "ac: this CPU has no SMAP; AC is never set (regs_ac=$(val regs_ac))"
	want regs_ac -eq 0
fi
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

# The flags the probed code computes, on both sides of the displaced
# instruction: a cmp whose ZF is tested after the site (callopt_exit returns
# there), and an adc that adds the carry of a cmp before the site
# (callopt_entry returns into the buffer that runs it). Under call depth
# tracking (retbleed=stuff) a return through call_depth_return_thunk would
# change them: test_mitigations says which return thunk this boot uses.
note "return thunk: $(dmesg | grep -o 'active return thunk: .*' | tail -n1)"
for s in exit entry; do
	run flags site=$s
	want mech -eq $CALLOPT_MECH
	want hits -eq 20000
	want flags_bad -eq 0
done

# Where preempt_disable() is traced (TRACE_PREEMPT_TOGGLE, the debug
# flavour), every 0->1 transition in callopt_handler() must be paired with a
# 1->0 one in callopt_preempt_enable(), the exit's preempt_enable(): the
# preemptirq tracepoints see both. Elsewhere there is no such event.
EV=/sys/kernel/tracing/events/preemptirq
if [ -d $EV/preempt_enable ]; then
	. "$SITES"
	# caller_offs is the caller's address minus _stext; a function's range
	# ends at the next symbol in /proc/kallsyms. Only the low 32 bits of
	# the addresses: awk's numbers are doubles, which round a 64-bit
	# kernel address to a multiple of 2048 (kernel text is within 4 GiB).
	range() {
		sort /proc/kallsyms | awk -v f="$1" '
			$3 == "_stext" { st = strtonum("0x" substr($1, 9)) }
			found && !end { end = strtonum("0x" substr($1, 9)) }
			$3 == f { found = strtonum("0x" substr($1, 9)) }
			END { if (found && end) printf "caller_offs >= %d && caller_offs < %d\n", found - st, end - st }'
	}
	dis=$(range callopt_handler)
	ena=$(range callopt_preempt_enable)
	[ -n "$dis" ] && [ -n "$ena" ] || fail "no callopt_handler or callopt_preempt_enable in kallsyms"
	T=/sys/kernel/tracing
	echo 0 > $T/tracing_on
	echo > $T/trace
	echo "$dis" > $EV/preempt_disable/filter
	echo "$ena" > $EV/preempt_enable/filter
	echo 1 > $EV/preempt_disable/enable
	echo 1 > $EV/preempt_enable/enable
	echo 1 > $T/tracing_on
	# --wait-opt: until the optimizer has run, the probe is an int3 one,
	# whose preempt_disable() (in int3 context) is no 0->1 transition and
	# traces nothing; under load the triggers could all land there.
	out=$("$KPCTL" -j attach --wait-opt 30 --trigger 1000 "$GETPGID_FUNC+$GETPGID_SINGLE") ||
		fail "attach: $out"
	echo 0 > $T/tracing_on
	echo 0 > $EV/preempt_disable/enable
	echo 0 > $EV/preempt_enable/enable
	echo 0 > $EV/preempt_disable/filter
	echo 0 > $EV/preempt_enable/filter
	[ "$(jq -r '.probes[0].mechanism' <<< "$out")" = callopt ] || fail "not callopt: $out"
	nd=$(grep -c ' preempt_disable: ' $T/trace)
	ne=$(grep -c ' preempt_enable: ' $T/trace)
	echo > $T/trace
	echo 1 > $T/tracing_on
	note "traced preemption: $nd disables in callopt_handler, $ne enables in callopt_preempt_enable"
	[ "$nd" -ge 1000 ] || fail "only $nd traced preempt_disable in callopt_handler for 1000 hits"
	[ "$ne" = "$nd" ] || fail "$nd traced preempt_disable, $ne preempt_enable: unpaired"
else
	note "no preemptirq tracepoints (no TRACE_PREEMPT_TOGGLE): the traced pair is checked on the debug flavour"
fi
echo ok
