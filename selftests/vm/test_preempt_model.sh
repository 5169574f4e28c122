#!/usr/bin/env bash
# The preemption model this boot really runs, in the log of every run (the
# rt rows of check-configs rest on it): the config the kernel was built
# with, uname -v, /sys/kernel/realtime and, on PREEMPT_DYNAMIC kernels, the
# mode in /sys/kernel/debug/sched/preempt. A kernel built with PREEMPT_RT
# must say so in uname -v, run its interrupts in irq/ threads and, where
# /sys/kernel/realtime exists (Debian's patches-rt has it; mainline 6.12
# does not), read 1 there; one built without must not. The config is the one this flavour was built from
# ($KOBJ/.config), or for Debian's own image the config in its package.
. "$(dirname "$0")/../lib.sh"
cfg=$(kernel_config)
note "config: $cfg"
grep -E '^CONFIG_PREEMPT[A-Z_]*=|^# CONFIG_PREEMPT(_RT|_DYNAMIC)? is not set' "$cfg" | sed 's/^/# /'
uv=$(uname -v)
note "uname -v: $uv"
rt=0
[ -r /sys/kernel/realtime ] && rt=$(cat /sys/kernel/realtime)
note "/sys/kernel/realtime: $([ -r /sys/kernel/realtime ] && echo "$rt" || echo absent)"
mode=
if [ -r /sys/kernel/debug/sched/preempt ]; then
	mode=$(cat /sys/kernel/debug/sched/preempt)
	note "sched/preempt: $mode"
fi
if grep -qx 'CONFIG_PREEMPT_RT=y' "$cfg"; then
	[[ $uv == *PREEMPT_RT* ]] || fail "built with PREEMPT_RT, but uname -v is '$uv'"
	[ ! -r /sys/kernel/realtime ] || assert_eq "$rt" 1 "/sys/kernel/realtime on a PREEMPT_RT kernel"
	# Spinlocks are rt_mutexes and interrupts are threaded there: a
	# kernel that boots RT has irq/ threads for its devices.
	n=$(ps -eo comm= | grep -c '^irq/' || true)
	note "threaded interrupt handlers (irq/*): $n"
	assert_num "$n" '>' 0 "irq/ threads on a PREEMPT_RT kernel"
else
	[[ $uv != *PREEMPT_RT* ]] || fail "built without PREEMPT_RT, but uname -v is '$uv'"
	[ "$rt" != 1 ] || fail "built without PREEMPT_RT, but /sys/kernel/realtime is 1"
fi
echo "PASS: $(uname -r): $uv${mode:+, preempt $mode}"
