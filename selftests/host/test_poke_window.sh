#!/usr/bin/env bash
# tp_chunk_flush() (0035, and its fix "x86/alternatives: Call nothing
# traceable while a chunk has poking_mm loaded") writes a chunk of text
# with poking_mm loaded: between its two switch_mm_irqs_off() calls nothing
# that ftrace or a kprobe can hook may run. Read from build/vmlinux: every
# call the function makes must be to one of the functions it calls outside
# that window (the lock, the mm switches themselves, the check and the
# rewrite after it, the perf events), as the code reads. The helpers the
# window used to call (flush_tlb_one_user(), text_poke_map(), ...) must
# not be called at all. A negative control runs the same check on a
# disassembly that has such a call, which must fail.
. "$(dirname "$0")/../lib.sh"
VMLINUX=$BUILD/vmlinux
[ -r "$VMLINUX" ] || fail "no $VMLINUX: make kernel"

# Called outside the poking_mm window only (switch_mm_irqs_off() is its edges).
ALLOWED='__fentry__|__get_locked_pte|switch_mm_irqs_off|leave_mm|hw_breakpoint_restore|flush_tlb_mm_range|_raw_spin_unlock|__rcu_read_unlock|memcmp|perf_event_text_poke|text_poke|__text_poke|__stack_chk_fail'
# check_calls: disassembly on stdin; prints the calls not allowed, fails on any.
check_calls() {
	local calls bad
	calls=$(grep -oE 'call +[0-9a-f]+ <[^>]+>' | sed -E 's/.*<([^>+]+).*/\1/' | sort -u)
	[ -n "$calls" ] || { echo "no calls found"; return 1; }
	bad=$(grep -vxE "$ALLOWED" <<< "$calls")
	[ -z "$bad" ] || { echo "$bad"; return 1; }
}

dis=$(objdump -d --no-show-raw-insn --disassemble=tp_chunk_flush "$VMLINUX") ||
	fail "objdump of tp_chunk_flush failed"
grep -q '<tp_chunk_flush>:' <<< "$dis" || fail "no tp_chunk_flush in $VMLINUX (inlined or renamed?)"
assert_eq "$(grep -c 'call.*<switch_mm_irqs_off>' <<< "$dis")" 2 "switch_mm_irqs_off() calls (the window's edges)"
out=$(check_calls <<< "$dis") || fail "tp_chunk_flush calls what it must not: $out"
note "calls: $(grep -oE '<[^>+]+>$' <<< "$dis" | sort -u | tr '\n' ' ')"

# Negative control: the check must catch a call to a traceable helper.
bad=$(printf '%s\n' "$dis" | sed '0,/call.*<switch_mm_irqs_off>/s//&\n ffffffff81000000:\tcall   ffffffff81069610 <flush_tlb_one_user>/')
grep -q 'flush_tlb_one_user' <<< "$bad" || fail "negative control: the fixture has no flush_tlb_one_user call"
out=$(check_calls <<< "$bad") && fail "negative control: a call to flush_tlb_one_user() passed the check"
assert_eq "$out" flush_tlb_one_user "negative control: the call found"
echo ok
