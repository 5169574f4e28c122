#!/usr/bin/env bash
# kpctl explain: the mechanism it predicts for every offset of the getpgid
# function is the one the kernel gives a probe attached there, with callopt
# on and off; bad input is refused cleanly.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
CALLOPT=/proc/sys/debug/kprobes-callopt
restore() { [ -e $CALLOPT ] && echo 1 > $CALLOPT; }
trap restore EXIT

json=$("$KPCTL" -j explain "$F") || fail "explain: $json"
jq -e . <<< "$json" > /dev/null || fail "explain output is not JSON"
field() { jq -r "$1" <<< "$json"; }
note "$("$KPCTL" explain "$F")"
size=$(field .size)
sym=$(awk -v f="$F" '$3 == f { print $1; exit }' /proc/kallsyms)
assert_eq "$(field .addr)" "0x$sym" "function address (kallsyms)"
assert_eq "$(field .text)" live "text read from the running kernel"
assert_eq "$(field .vmlinux.build_id)" match "vmlinux build id"
assert_eq "$(field .kernel.callopt)" 1 "callopt knob"
# The sites the other tests rely on are predicted as they observe them.
pred() { jq -r --argjson o "$1" '.sites[] | select(.offset == $o) | .mechanism' <<< "$json"; }
assert_eq "$(pred 0)" ftrace "prediction at +0"
assert_eq "$(pred $((GETPGID_SINGLE)))" callopt "prediction at +$GETPGID_SINGLE"
assert_eq "$(pred $((GETPGID_MULTI)))" callopt "prediction at +$GETPGID_MULTI (multi-instruction)"
assert_eq "$(pred $((GETPGID_MIDINSN)))" "" "+$GETPGID_MIDINSN is no boundary"
assert_eq "$(pred "$size")" refused "prediction just past the end"
assert_match "$(jq -r '[.sites[].mechanism] | unique | join(" ")' <<< "$json")" \
	'callopt.*ftrace.*int3.*refused' "the mechanisms occur"

# Attach at every listed offset with a separate kpctl attach and compare.
check_all() { # JSON: every prediction holds
	local off mech want got rc n=0
	while read -r off want; do
		case $want in
		optimized|callopt) wait=10 ;; int3) wait=1 ;; *) wait=2 ;;
		esac
		out=$("$KPCTL" -j attach --wait-opt $wait "$F+$off" 2>&1); rc=$?
		if [ "$want" = refused ]; then
			[ $rc = 1 ] || fail "$F+$off: predicted refused, attach exited $rc: $out"
		else
			[ $rc = 0 ] || fail "$F+$off: predicted $want, attach failed: $out"
			got=$(jq -r '.probes[0].mechanism' <<< "$out")
			[ "$got" = "$want" ] || fail "$F+$off: predicted $want, got $got"
		fi
		assert_no_kprobes
		n=$((n + 1))
	done <<< "$(jq -r '.sites[] | "\(.offset) \(.mechanism)"' <<< "$1")"
	note "$n offsets checked"
	[ $n -ge 10 ] || fail "only $n offsets listed"
}
check_all "$json"

# --verify does the same in one process.
v=$("$KPCTL" -j explain --verify --wait-opt 10 "$F") || fail "explain --verify: $v"
assert_eq "$(jq -r .verify.mismatches <<< "$v")" 0 "--verify mismatches"
assert_eq "$(jq -r .verify.checked <<< "$v")" "$(field '.sites | length')" "--verify checked"
assert_no_kprobes

# With callopt off, the predictions change and still hold.
echo 0 > $CALLOPT
off_json=$("$KPCTL" -j explain "$F") || fail "explain with callopt off: $off_json"
assert_eq "$(jq -r '[.sites[] | select(.mechanism == "callopt")] | length' <<< "$off_json")" 0 \
	"callopt predictions with callopt off"
assert_match "$(jq -r --argjson o $((GETPGID_SINGLE)) '.sites[] | select(.offset == $o) | .reason' \
	<<< "$off_json")" "callopt is off" "reason with callopt off"
assert_eq "$(jq -r --argjson o $((GETPGID_MULTI)) '.sites[] | select(.offset == $o) | .mechanism' \
	<<< "$off_json")" optimized "prediction at +$GETPGID_MULTI with callopt off"
check_all "$off_json"
echo 1 > $CALLOPT

# --all lists every byte; offsets inside instructions are refused.
all=$("$KPCTL" -j explain --all "$F") || fail "explain --all: $all"
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
# Inside the fentry call: moved to it, on ftrace (test_fentry_move attaches).
for o in $(seq $((GETPGID_FENTRY + 1)) $((GETPGID_FENTRY + 4))); do
	assert_eq "$(jq -r --argjson o $o '.sites[] | select(.offset == $o) | .mechanism' <<< "$all")" \
		ftrace "prediction inside the fentry call (+$o)"
done
assert_no_kprobes

# A blacklisted function: every offset refused, and the kernel agrees.
bl=$(awk 'NR == FNR { n[$3]++; next } n[$2] == 1 && $2 !~ /^__/ { print $2; exit }' \
	/proc/kallsyms /sys/kernel/debug/kprobes/blacklist)
[ -n "$bl" ] || fail "empty kprobes blacklist"
bj=$("$KPCTL" -j explain "$bl" 2>&1)
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
assert_rc 1 "$KPCTL" explain kpx_no_such_function_xyz
assert_match "$out" "no such function" "unknown function message"
assert_rc 2 "$KPCTL" explain "$F+4"
assert_rc 2 "$KPCTL" explain
assert_rc 2 "$KPCTL" explain --no-such-option "$F"
assert_rc 1 "$KPCTL" explain --vmlinux /nonexistent "$F"
assert_match "$out" "cannot read the kernel image" "missing vmlinux message"
assert_rc 1 setpriv --reuid=65534 --regid=65534 --clear-groups "$KPCTL" explain "$F"
assert_match "$out" "root|permission" "unprivileged message"
assert_rc 0 "$KPCTL" explain --help
assert_match "$out" "Examples" "explain --help"
assert_no_kprobes
