#!/usr/bin/env bash
# callopt_entry's ORC data ("x86/kprobes: Unwind a callopt site's return
# address as it is"). After callopt_handler() returns, the return address
# above callopt_entry's frame is the detour buffer or, when no probe was
# found, the site itself, and a task preempted before the RET stops there
# with preemption enabled. The unwinder must look the caller's ORC data up
# at that address, not one byte before it (the instruction before the
# site, whose frame may differ): every ORC entry from the instruction
# after the call up to the RET is a signal entry. The entry of the call
# itself is not (while callopt_handler() runs, the return address is
# site+5, after a call). Read from build/vmlinux with the tree's objtool
# (--dump=orc). A negative control runs the check on the same dump with
# one tail entry turned back into a call entry, which must fail.
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
last=$(grep -E '^ *[0-9a-f]+:.*(\bret|<__x86_return_thunk>)' <<< "$dis" | tail -1 | awk -F: '{gsub(/ /,"",$1); print $1}')
[ -n "$last" ] || fail "no RET in callopt_entry"
[ $((16#$last)) -gt $((16#$after)) ] || fail "the RET ($last) is not after the call ($after)"
note "callopt_entry at $start: call at $call, tail $after..$last"

dump=$("$OBJTOOL" --dump=orc "$VMLINUX") || fail "objtool --dump=orc failed"

# check_orc START CALL AFTER LAST: the dump on stdin; prints what is wrong.
check_orc() {
	python3 -c '
import sys
start, call, after, last = (int(a, 16) for a in sys.argv[1:5])
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
e = at(call)
if e is None or "signal:0" not in e or "type:call" not in e:
    bad.append("call %x: %s (want a call entry, signal:0)" % (call, e))
for x in [x for x in range(after, last + 1)]:
    e = at(x)
    if e is None or "signal:1" not in e or "type:call" not in e:
        bad.append("tail %x: %s (want a call entry, signal:1)" % (x, e))
        break
if not [a for a, r in ents if a == after]:
    bad.append("no ORC entry starts at %x, right after the call" % after)
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("%d tail entries, all signal:1" % len([a for a, r in ents if after <= a <= last]))
' "$start" "$call" "$after" "$last"
}

out=$(check_orc <<< "$dump") || fail "callopt_entry's ORC data: $out"
note "$out"

# Negative control: the first tail entry after the one at $after turned back
# into a plain call entry.
badump=$(python3 -c '
import sys
after = int(sys.argv[1], 16)
done = False
for line in sys.stdin:
    addr = line.partition(":")[0]
    try:
        a = int(addr, 16)
    except ValueError:
        a = None
    if not done and a is not None and a > after and "signal:1" in line:
        line = line.replace("signal:1", "signal:0")
        print("flipped %x" % a, file=sys.stderr)
        done = True
    sys.stdout.write(line)
sys.exit(0 if done else 1)
' "$after" <<< "$dump" 2>/tmp/orc-flip.$$) || fail "negative control: no signal entry after $after to flip"
flipped=$(sed -n 's/^flipped //p' /tmp/orc-flip.$$); rm -f /tmp/orc-flip.$$
out=$(check_orc <<< "$badump") && fail "negative control: a tail entry without signal passed"
grep -q "tail $flipped" <<< "$out" || fail "negative control: wrong finding for $flipped: $out"
echo ok
