#!/usr/bin/env bash
# The callopt instruction allowlist (issue 34, item 1): the KUnit suite
# kprobes_callopt_insn (CONFIG_KPROBES_CALLOPT_KUNIT_TEST=m,
# arch/x86/kernel/kprobes/callopt_test.c) decodes every opcode of the
# one-byte and 0F maps, with no prefix and each legacy prefix (and REX.W),
# in a register and a memory form of each ModRM.reg, and compares
# callopt_insn_ok() with its own table: an opcode that is not listed there
# must be refused. Its three cases must run and pass: the table (0
# mismatches over more than 10,000 decoded forms), the control (a table
# without MOV disagrees on exactly MOV's accepted forms) and the examples
# by their bytes (mov 0x698(%rax),%rax taken; a %gs load, rep movsq, ret,
# call *%rax, sti, stac, xbegin, vzeroupper refused).
. "$(dirname "$0")/../lib.sh"
ko=$KOBJ/arch/x86/kernel/kprobes/callopt_test.ko
[ -f "$ko" ] || fail "$ko missing (CONFIG_KPROBES_CALLOPT_KUNIT_TEST=m)"
log=$(kunit_run "$ko" kprobes_callopt_insn)
note "$(grep -E 'kprobes_callopt_insn|forms decoded|without MOV|ok ' <<< "$log")"
summary=$(grep -oE '# kprobes_callopt_insn: pass:[0-9]+ fail:[0-9]+ skip:[0-9]+ total:[0-9]+' <<< "$log")
assert_match "$summary" 'pass:3 fail:0 skip:0 total:3' "KUnit summary"
for c in callopt_insn_table callopt_insn_table_control callopt_insn_examples; do
	kunit_case_ok "$log" "$c"
done
counts=$(grep -oE '[0-9]+ forms decoded, [0-9]+ accepted, [0-9]+ mismatches' <<< "$log")
[ -n "$counts" ] || fail "the table case logged no counts"
read -r forms _ _ accepted _ mism _ <<< "$counts"
assert_num "$forms" '>' 10000 "forms decoded"
assert_num "$accepted" '>' 1000 "forms accepted"
assert_eq "$mism" 0 "mismatches against the table"
ctl=$(grep -oE 'without MOV: [0-9]+ mismatches, [0-9]+ MOV forms accepted' <<< "$log")
[ -n "$ctl" ] || fail "the control case logged no counts"
read -r _ _ cm _ mov _ <<< "$ctl"
assert_num "$mov" '>' 0 "control: MOV forms the table accepts"
assert_eq "$cm" "$mov" "control: mismatches without MOV"
echo "PASS: callopt allowlist: $forms forms decoded, $accepted accepted, 0 mismatches; control: $cm of $mov MOV forms disagree"
