#!/usr/bin/env bash
# kpctl explain: the mechanism it predicts for every offset of the getpgid
# function, and of pid_vnr() (or wherever gen-sites found the
# multi-instruction callopt site), is the one the kernel gives a probe
# attached there, with callopt on and off; callopt's refusals of a %gs
# operand and of a region whose ORC frame changes are predicted with their
# reasons; bad input is refused cleanly.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
M=${GETPGID_MULTI_FUNC:-$F}
CALLOPT=$KNOB_CALLOPT
restore() { [ -e $CALLOPT ] && echo 1 > $CALLOPT; }
trap restore EXIT

json=$(kpctl_j explain "$F") || fail "explain: $json"
jq -e . <<< "$json" > /dev/null || fail "explain output is not JSON"
field() { jq -r "$1" <<< "$json"; }
note "$("$KPCTL" explain "$F")"
mjson=$json
if [ "$M" != "$F" ]; then
	mjson=$(kpctl_j explain "$M") || fail "explain $M: $mjson"
	note "$("$KPCTL" explain "$M")"
fi
size=$(field .size)
sym=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
assert_eq "$(field .addr)" "0x$sym" "function address (kallsyms)"
assert_eq "$(field .text)" live "text read from the running kernel"
assert_eq "$(field .vmlinux.build_id)" match "vmlinux build id"
assert_eq "$(field .kernel.callopt)" 1 "callopt knob"
[[ $(field '.notes | join("\n")') != *ORC* ]] || fail "a note about the ORC tables: $(field .notes)"
# The sites the other tests rely on are predicted as they observe them.
# site_field JSON OFF FIELD: FIELD of the site at OFF (empty if not listed)
site_field() { jq -r --argjson o "$2" ".sites[] | select(.offset == \$o) | .$3" <<< "$1"; }
pred() { site_field "$json" "$1" mechanism; }
assert_eq "$(pred 0)" ftrace "prediction at +0"
assert_eq "$(pred $((GETPGID_SINGLE)))" callopt "prediction at +$GETPGID_SINGLE"
assert_eq "$(site_field "$mjson" $((GETPGID_MULTI)) mechanism)" callopt \
	"prediction at $M+$GETPGID_MULTI (multi-instruction)"
assert_match "$(site_field "$mjson" $((GETPGID_MULTI)) reason)" "several instructions" \
	"reason at $M+$GETPGID_MULTI"
assert_eq "$(pred $((GETPGID_MIDINSN)))" "" "+$GETPGID_MIDINSN is no boundary"
assert_eq "$(pred "$size")" refused "prediction just past the end"
assert_match "$(jq -r '[.sites[].mechanism] | unique | join(" ")' <<< "$json")" \
	'callopt.*ftrace.*int3.*refused' "the mechanisms occur"

# refused_site WHAT SELECT REASON: the first offset of $F whose reason
# matches SELECT (a jq regex) exists, its reason matches REASON, it is
# predicted as neither callopt nor refused, and a probe attached there gets
# the mechanism predicted.
refused_site() {
	local what=$1 off hex mech
	off=$(jq -r --arg re "$2" '[.sites[] | select(.reason | test($re))][0].offset // empty' \
		<<< "$json")
	[ -n "$off" ] || fail "no offset of $F refused by callopt for $what"
	hex=$(printf 0x%x "$off")
	mech=$(pred "$off")
	note "$what: $F+$hex ($(site_field "$json" "$off" insn)), predicted $mech"
	[ "$mech" != callopt ] && [ "$mech" != refused ] ||
		fail "$F+$hex: predicted '$mech' for $what"
	assert_match "$(site_field "$json" "$off" reason)" "$3" "reason at $F+$hex"
	out=$(kpctl_j attach --wait-opt 10 "$F+$hex" 2>/tmp/kpctl.err) ||
		fail "attach $F+$hex: $out $(cat /tmp/kpctl.err)"
	assert_eq "$(jq -r '.probes[0].mechanism' <<< "$out")" "$mech" "observed at $F+$hex"
	assert_no_kprobes
}

# callopt_insn_ok() refuses a %gs operand (the preempt count callopt raises
# is %gs-relative per-CPU data): the first such offset of the getpgid
# function (current's task_struct from pcpu_hot).
refused_site "a %gs operand" "%gs operand" \
	"^not callopt: .*%gs operand: the preempt count callopt raises is %gs-relative per-CPU data"

# callopt_prepare() refuses a region where the ORC frame changes, such as
# one holding a push. The prologue push right after the fentry call is not
# callopt. The first offset refused for an ORC frame change is that push on
# the VM config's build; on the debug build a call follows the push within
# 5 bytes and is the reason given first, and a later push is found.
assert_eq "$(site_field "$json" $((GETPGID_MID)) insn)" push \
	"the instruction at $F+$GETPGID_MID (a prologue push)"
[ "$(pred $((GETPGID_MID)))" != callopt ] || fail "callopt predicted at $F+$GETPGID_MID"
refused_site "an ORC frame change" "the ORC frame changes in the displaced region" \
	"^not callopt: the ORC frame changes in the displaced region \(\+0x[0-9a-f]+: "

# Attach at every listed offset with a separate kpctl attach and compare.
check_all() { # FUNC JSON: every prediction holds
	local func=$1 off mech want got rc n=0
	while read -r off want; do
		case $want in
		jmpopt|callopt) wait=10 ;; int3) wait=1 ;; *) wait=2 ;;
		esac
		out=$(kpctl_j attach --wait-opt $wait "$func+$off" 2>/tmp/kpctl.err); rc=$?
		if [ "$want" = refused ]; then
			[ $rc = 1 ] || fail "$func+$off: predicted refused, attach exited $rc: $out"
			jq -e '.error | test("cannot attach")' <<< "$out" > /dev/null ||
				fail "$func+$off: refused without a JSON error: $out"
		else
			[ $rc = 0 ] || fail "$func+$off: predicted $want, attach failed: $out $(cat /tmp/kpctl.err)"
			got=$(jq -r '.probes[0].mechanism' <<< "$out")
			[ "$got" = "$want" ] || fail "$func+$off: predicted $want, got $got"
		fi
		assert_no_kprobes
		n=$((n + 1))
	done <<< "$(jq -r '.sites[] | "\(.offset) \(.mechanism)"' <<< "$2")"
	note "$func: $n offsets checked"
	[ $n -ge 10 ] || fail "$func: only $n offsets listed"
}
check_all "$F" "$json"
[ "$M" = "$F" ] || check_all "$M" "$mjson"

# --verify does the same in one process.
v=$(kpctl_j explain --verify --wait-opt 10 "$F") || fail "explain --verify: $v"
assert_eq "$(jq -r .verify.mismatches <<< "$v")" 0 "--verify mismatches"
assert_eq "$(jq -r .verify.checked <<< "$v")" "$(field '.sites | length')" "--verify checked"
assert_no_kprobes

# With callopt off, the predictions change and still hold.
echo 0 > $CALLOPT
off_json=$(kpctl_j explain "$F") || fail "explain with callopt off: $off_json"
assert_eq "$(jq -r '[.sites[] | select(.mechanism == "callopt")] | length' <<< "$off_json")" 0 \
	"callopt predictions with callopt off"
assert_match "$(jq -r --argjson o $((GETPGID_SINGLE)) '.sites[] | select(.offset == $o) | .reason' \
	<<< "$off_json")" "callopt is off" "reason with callopt off"
moff_json=$off_json
if [ "$M" != "$F" ]; then
	moff_json=$(kpctl_j explain "$M") || fail "explain $M with callopt off: $moff_json"
fi
assert_eq "$(site_field "$moff_json" $((GETPGID_MULTI)) mechanism)" jmpopt \
	"prediction at $M+$GETPGID_MULTI with callopt off"
check_all "$F" "$off_json"
[ "$M" = "$F" ] || check_all "$M" "$moff_json"
echo 1 > $CALLOPT

# --all lists every byte; offsets inside instructions are refused.
all=$(kpctl_j explain --all "$F") || fail "explain --all: $all"
assert_eq "$(jq -r '.sites | length' <<< "$all")" $((size + 1)) "--all site count"
assert_match "$(jq -r --argjson o $((GETPGID_MIDINSN)) '.sites[] | select(.offset == $o) | .reason' \
	<<< "$all")" "not on an instruction boundary" "reason inside an instruction"
if [ $((GETPGID_FENTRY)) = 4 ]; then
	# Inside ENDBR: refused.
	for o in 1 2 3; do
		assert_eq "$(jq -r --argjson o $o '.sites[] | select(.offset == $o) | .mechanism' <<< "$all")" \
			refused "prediction inside ENDBR (+$o)"
		assert_rc 1 "$KPCTL" attach "$F+$o"
	done
fi
# Inside the fentry call: no boundary, refused (test_fentry_inner attaches).
for o in $(seq $((GETPGID_FENTRY + 1)) $((GETPGID_FENTRY + 4))); do
	assert_eq "$(jq -r --argjson o $o '.sites[] | select(.offset == $o) | "\(.mechanism) \(.reason)"' <<< "$all" |
		grep -o '^refused .*inside the 5-byte fentry call')" \
		"refused not on an instruction boundary: inside the 5-byte fentry call" \
		"prediction inside the fentry call (+$o)"
done
assert_no_kprobes

# A blacklisted function: every offset refused, and the kernel agrees.
bl=$(awk 'NR == FNR { n[$3]++; next } n[$2] == 1 && $2 !~ /^__/ { print $2; exit }' \
	/proc/kallsyms /sys/kernel/debug/kprobes/blacklist)
[ -n "$bl" ] || fail "empty kprobes blacklist"
bj=$(kpctl_j explain "$bl" 2>/dev/null)
if [ $? = 0 ]; then
	assert_eq "$(jq -r '[.sites[].mechanism] | unique | join(",")' <<< "$bj")" refused \
		"predictions in blacklisted $bl"
	assert_match "$(jq -r '.sites[0].reason' <<< "$bj")" blacklist "reason in $bl"
else
	note "explain $bl: $bj"
fi
assert_rc 1 "$KPCTL" attach "$bl"
assert_no_kprobes

# Bad input.
assert_rc 2 "$KPCTL" explain kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown function message"
out=$(kpctl_j explain kpx_no_such_function_xyz 2>/dev/null)
assert_match "$(jq -r .error <<< "$out")" "no such function" "unknown function, JSON error"
assert_rc 2 "$KPCTL" explain "$F+4"
assert_rc 2 "$KPCTL" explain
assert_rc 2 "$KPCTL" explain --no-such-option "$F"
assert_rc 1 "$KPCTL" explain --vmlinux /nonexistent "$F"
assert_match "$out" "cannot read the kernel image" "missing vmlinux message"
assert_rc 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" explain "$F"
assert_match "$out" "root|permission" "unprivileged message"
assert_rc 3 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" explain -j "$F"
assert_kpctl_json "$(grep '^{' <<< "$out")" 3 "explain -j, unprivileged"
assert_rc 0 "$KPCTL" explain --help
assert_match "$out" "Examples" "explain --help"
assert_no_kprobes
