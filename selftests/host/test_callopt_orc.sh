#!/usr/bin/env bash
# callopt_entry's ORC data ("x86/kprobes: Unwind a callopt site's return
# address as it is"). callopt_handler() rewrites the return address above
# callopt_entry's frame to the detour buffer or, when no probe was found,
# to the site itself, after its preempt_enable(): a task preempted in its
# epilogue or before callopt_entry's RET stops there with preemption
# enabled. The unwinder must look the caller's ORC data up at that
# address, not one byte before it (the instruction before the site, whose
# frame may differ). A task stopped in callopt_handler() is unwound into
# callopt_entry through the ORC entry of the call (its return address
# minus one), so every entry from the call of callopt_handler() up to the
# RET is a signal entry of type call, and the call's entry finds the
# site's return address above the struct pt_regs that callopt_entry built
# (sp:sp+176, PTREGS_SIZE + 8). The tail ends with the IRETQ into a
# longer region's buffer ("Keep the return stack balanced across a
# callopt hit"), whose entry must still find the site's return address
# above the IRET frame; the int3 after the extra call of the 5-byte way in
# is a speculation trap, never executed, without ORC data. Read from build/vmlinux with the tree's
# objtool (--dump=orc). Negative controls run the check on the same dump
# with the call's entry, then one tail entry, turned back into a plain
# call entry (signal:0), and with the call's entry 8 bytes off: each must
# fail, naming that entry.
. "$(dirname "$0")/../lib.sh"
VMLINUX=$BUILD/vmlinux
OBJTOOL=$BUILD/kobj/tools/objtool/objtool
[ -r "$VMLINUX" ] || fail "no $VMLINUX: make kernel"
[ -x "$OBJTOOL" ] || fail "no $OBJTOOL: make kernel"

dis=$(objdump -d --no-show-raw-insn --disassemble=callopt_entry "$VMLINUX") ||
	fail "objdump of callopt_entry failed"
grep -q '<callopt_entry>:' <<< "$dis" || fail "no callopt_entry in $VMLINUX"
start=$(awk '/<callopt_entry>:/ {print $1; exit}' <<< "$dis")
# The address of the call to callopt_handler(), of the instruction after it,
# and of the RET that ends callopt_entry (a jump to the return thunk with
# CONFIG_MITIGATION_RETHUNK; padding follows it).
call=$(grep -E 'call +[0-9a-f]+ <callopt_handler>' <<< "$dis" | awk -F: '{gsub(/ /,"",$1); print $1}')
[ -n "$call" ] || fail "callopt_entry does not call callopt_handler"
after=$(grep -A1 -E 'call +[0-9a-f]+ <callopt_handler>' <<< "$dis" | tail -1 | awk -F: '{gsub(/ /,"",$1); print $1}')
last=$(grep -E '^ *[0-9a-f]+:.*(\bret|<__x86_return_thunk>|iretq)' <<< "$dis" | tail -1 | awk -F: '{gsub(/ /,"",$1); print $1}')
[ -n "$last" ] || fail "no RET or IRETQ in callopt_entry"
grep -qE '^ *[0-9a-f]+:\s+iretq' <<< "$dis" || fail "no IRETQ in callopt_entry (the way into a longer region's buffer)"
# The speculation trap after the extra call of the way into a 5-byte
# region's buffer ("call 1f; int3; 1:"): never executed, so objtool gives
# it no ORC data. Every int3 must be such a trap, and there is one.
traps=$(awk '
	/^ *[0-9a-f]+:/ {
		a = $1; sub(/:$/, "", a)
		if ($2 == "int3" && prev_call != "" && strtonum("0x" prev_call) == strtonum("0x" a) + 1)
			print a
		else if ($2 == "int3")
			print "bad:" a
		prev_call = ($2 == "call") ? $3 : ""
	}' <<< "$dis")
grep -q bad: <<< "$traps" && fail "an int3 in callopt_entry is not the trap after a call to the next instruction: $traps"
[ "$(wc -w <<< "$traps")" = 1 ] || fail "want one speculation trap in callopt_entry, found '$traps'"
[ $((16#$last)) -gt $((16#$after)) ] || fail "the RET ($last) is not after the call ($after)"
note "callopt_entry at $start: call at $call, tail $after..$last, trap at $traps"

dump=$("$OBJTOOL" --dump=orc "$VMLINUX") || fail "objtool --dump=orc failed"

# check_orc START CALL AFTER LAST TRAP: the dump on stdin; prints what is
# wrong.
check_orc() {
	python3 -c '
import sys
start, call, after, last, trap = (int(a, 16) for a in sys.argv[1:6])
ents = []
for line in sys.stdin:
    addr, _, rest = line.partition(":")
    try:
        a = int(addr, 16)
    except ValueError:
        continue
    if start - 0x40 <= a <= last + 0x40:
        ents.append((a, rest.strip()))
ents.sort()
def at(x):
    e = [r for a, r in ents if a <= x]
    return e[-1] if e else None
bad = []
for x in range(call, last + 1):
    if x == trap:
        continue
    e = at(x)
    if e is None or "signal:1" not in e or "type:call" not in e:
        bad.append("%s %x: %s (want a call entry, signal:1)" %
                   ("call" if x < after else "tail", x, e))
        break
ce = [r for a, r in ents if a == call]
if not ce:
    bad.append("no ORC entry starts at %x, the call" % call)
elif "sp:sp+176 " not in ce[0] + " ":
    bad.append("call %x: %s (want sp:sp+176, struct pt_regs and the return address)" % (call, ce[0]))
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("%d entries from the call to the RET and IRETQ, all signal:1" % len([a for a, r in ents if call <= a <= last]))
' "$start" "$call" "$after" "$last" "$traps"
}

out=$(check_orc <<< "$dump") || fail "callopt_entry's ORC data: $out"
note "$out"

# flip_at ADDR: the dump on stdin with the first signal entry at or after
# ADDR made a plain call entry; prints the flipped address on stderr.
flip_at() {
	python3 -c '
import sys
frm = int(sys.argv[1], 16)
done = False
for line in sys.stdin:
    addr = line.partition(":")[0]
    try:
        a = int(addr, 16)
    except ValueError:
        a = None
    if not done and a is not None and a >= frm and "signal:1" in line:
        line = line.replace("signal:1", "signal:0")
        print("flipped %x" % a, file=sys.stderr)
        done = True
    sys.stdout.write(line)
sys.exit(0 if done else 1)
' "$1"
}

# Negative controls: the call's own entry (the one a task in
# callopt_handler()'s epilogue is unwound with), the first tail entry
# after the one at $after, and the IRETQ's.
for what in call:$call tail:$(printf '%x' $((16#$after + 1))) tail:$last; do
	kind=${what%%:*}
	badump=$(flip_at "${what#*:}" <<< "$dump" 2>/tmp/orc-flip.$$) ||
		fail "negative control ($kind): no signal entry at or after ${what#*:} to flip"
	flipped=$(sed -n 's/^flipped //p' /tmp/orc-flip.$$); rm -f /tmp/orc-flip.$$
	out=$(check_orc <<< "$badump") && fail "negative control ($kind): a $kind entry without signal passed"
	grep -q "$kind $flipped" <<< "$out" || fail "negative control ($kind): wrong finding for $flipped: $out"
	note "negative control ($kind): $out"
done
# The call's entry with the hint 8 bytes off (a pt_regs one word short).
badump=$(sed "s/^$call:\(.*\)sp:sp+176 /$call:\1sp:sp+168 /" <<< "$dump")
[ "$badump" != "$dump" ] || fail "negative control (sp): no sp:sp+176 entry at $call to change"
out=$(check_orc <<< "$badump") && fail "negative control (sp): the call's entry at sp+168 passed"
grep -q "call $call: .*want sp:sp+176" <<< "$out" || fail "negative control (sp): wrong finding: $out"
note "negative control (sp): $out"
echo ok
