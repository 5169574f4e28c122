#!/usr/bin/env bash
# The KTAP-style subtests of selftests/lib.sh: every subtest runs and
# reports, whichever failed before it; fail, fail_test from inside $(...)
# and skip end their own subtest only; the test's status is 1 with a
# failure, 77 with a skip and no failure, 0 only when all passed, and a
# test without subtests cannot pass by subtests_end.
. "$(dirname "$0")/../lib.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
lib=$KPX_ROOT/selftests/lib.sh

run_case() { # BODY: a test that sources lib.sh, its stdout and status
	printf '. %q\n%s\n' "$lib" "$1" > "$t/case.sh"
	bash "$t/case.sh" > "$t/out" 2> "$t/err"
	echo $? > "$t/rc"
}

# A failure, a fail_test from a command substitution, a skip, two passes.
run_case '
a() { true; }
b() { fail "b broke"; }
c() { local x; x=$(fail_test "c broke inside"); echo "c went on"; }
d() { skip "d cannot run"; }
e() { echo "e ran"; }
subtest a a; subtest b b; subtest c c; subtest d d; subtest e e
subtests_end'
assert_eq "$(cat "$t/rc")" 1 "status with failed subtests"
assert_eq "$(grep -E '^(not )?ok ' "$t/out" | tr '\n' '|')" \
	"ok 1 a|not ok 2 b|not ok 3 c|ok 4 d # SKIP|ok 5 e|" "the subtest lines"
assert_eq "$(tail -n1 "$t/out")" "1..5" "the plan"
grep -q '^e ran$' "$t/out" || fail "the subtest after the failures did not run"
! grep -q 'c went on' "$t/out" || fail "fail_test in \$(...) did not end its subtest"
assert_match "$(cat "$t/err")" "2 of 5 subtests failed: b c" "the failure summary"

# A skip and no failure: 77, never 0.
run_case 'subtest a true; subtest b skip "no"; subtests_end'
assert_eq "$(cat "$t/rc")" 77 "status with a skipped subtest"

# All pass: 0. No subtest at all: a failure.
run_case 'subtest a true; subtest b true; subtests_end'
assert_eq "$(cat "$t/rc")" 0 "status when every subtest passed"
run_case 'subtests_end'
assert_eq "$(cat "$t/rc")" 1 "status without subtests"

# A failure outside a subtest still ends the whole test at once.
run_case 'subtest a true; fail "setup broke"; subtest b true; subtests_end'
assert_eq "$(cat "$t/rc")" 1 "status of a failure outside subtests"
! grep -q '^ok 2' "$t/out" || fail "a subtest ran after a failure outside subtests"
echo "subtests: 5 cases as specified"
