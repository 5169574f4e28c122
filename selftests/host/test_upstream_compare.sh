#!/usr/bin/env bash
# scripts/check/upstream-compare, the verdict of make check-upstream: identical
# upstream results and passing tests of ours pass; negative controls: an
# upstream test that differs, an entry only one kernel has, a test of ours
# that fails on ours, no test of ours at all, an empty results file.
. "$(dirname "$0")/../lib.sh"
CMP=$KPX_ROOT/scripts/check/upstream-compare
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
printf 'test_progs\tkprobe_mechanism\ntest_progs\tkprobe_mechanism/*\nkunit\ttest_callopt_*\n' > "$t/ours"
printf '# none\n' > "$t/deny"
printf 'rc=0\nseconds=10\nsplats=0\n' > "$t/env"
stock() {
	printf 'test_progs\tattach_probe\tPASS\ntest_progs\tattach_probe/manual\tPASS\n'
	printf 'ftracetest\tkprobe: Kprobe dynamic event\tPASS\nkunit\ttest_kprobe\tPASS\n'
	printf 'test_progs\tkprobe_mechanism\tFAIL\ntest_progs\tkprobe_mechanism/mechanism\tFAIL\n'
	printf 'kunit\ttest_callopt_single\tSKIP\n'
}
cmp_rc() { # STOCK OURS -> exit status; the summary in $t/out
	"$CMP" --ours-list "$t/ours" --denylist "$t/deny" --run-env "$t/env" --run-env "$t/env" \
		"$1" "$2" > "$t/out" 2>&1
}
stock > "$t/stock"
stock | sed 's/^\(test_progs\tkprobe_mechanism[^\t]*\t\)FAIL/\1PASS/; s/^\(kunit\ttest_callopt_single\t\)SKIP/\1PASS/' > "$t/ours.tsv"
cmp_rc "$t/stock" "$t/ours.tsv" || fail "identical results: exit $?: $(cat "$t/out")"
assert_match "$(cat "$t/out")" 'verdict: \*\*PASS\*\*' "verdict"
assert_match "$(cat "$t/out")" '4 identical' "identical count"
assert_match "$(cat "$t/out")" '3 of 3 pass on ours' "ours count"
assert_match "$(cat "$t/out")" '\| test_progs \| attach_probe \| 2 / 0 / 0 \| 2 / 0 / 0 \|' "per-test row"

sed 's/^\(test_progs\tattach_probe\/manual\t\)PASS/\1FAIL/' "$t/ours.tsv" > "$t/x"
cmp_rc "$t/stock" "$t/x" && fail "a differing upstream test passed"
assert_match "$(cat "$t/out")" '\| test_progs \| attach_probe/manual \| PASS \| FAIL \|' "difference listed"
grep -v 'kunit.test_kprobe' "$t/ours.tsv" > "$t/x"
cmp_rc "$t/stock" "$t/x" && fail "an entry missing on ours passed"
assert_match "$(cat "$t/out")" '\| kunit \| test_kprobe \| PASS \| absent \|' "absent listed"
sed 's/^\(kunit\ttest_callopt_single\t\)PASS/\1SKIP/' "$t/ours.tsv" > "$t/x"
cmp_rc "$t/stock" "$t/x" && fail "a skipped test of ours passed"
grep -v 'kprobe_mechanism\|test_callopt' "$t/ours.tsv" > "$t/x"
grep -v 'kprobe_mechanism\|test_callopt' "$t/stock" > "$t/y"
cmp_rc "$t/y" "$t/x" && fail "results without any test of ours passed"
: > "$t/x"
cmp_rc "$t/stock" "$t/x" && fail "an empty results file passed"
true
