#!/usr/bin/env bash
# Negative control of vm/test_kunit_kprobes: with kprobes/callopt off
# the four callopt cases of the KUnit suite skip, and test_kunit_kprobes
# must then fail, naming the first skipped case. A check that counted a
# skip as a pass would let this control pass it.
. "$(dirname "$0")/../lib.sh"
CALLOPT=$KNOB_CALLOPT
[ -e "$CALLOPT" ] || skip "no $CALLOPT: a kernel without callopt"
old=$(cat "$CALLOPT")
restore() { echo "$old" > "$CALLOPT"; }
trap restore EXIT
echo 0 > "$CALLOPT" || fail "cannot write $CALLOPT"
out=$(bash "$(dirname "$0")/test_kunit_kprobes.sh" 2>&1)
rc=$?
restore
note "$(tail -n 3 <<< "$out")"
[ "$rc" = 1 ] || fail "test_kunit_kprobes exited $rc with the callopt cases skipped (want 1)"
assert_match "$out" 'KUnit case test_callopt_single: .*# SKIP kprobes/callopt \(debugfs\) is off' \
	"the failure names the skipped case"
