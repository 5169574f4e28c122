#!/usr/bin/env bash
# Upstream's kprobes KUnit suite (CONFIG_KPROBES_SANITY_TEST), with the
# series' callopt cases (patch 0023), passes on our kernel, with call
# optimization on (as it is by default).
. "$(dirname "$0")/../lib.sh"
ko=$KOBJ/lib/test_kprobes.ko
[ -f "$ko" ] || fail "$ko missing (CONFIG_KPROBES_SANITY_TEST=m)"
# What the suite logs, after a marker (the log is never cleared).
log=$(kunit_run "$ko" kprobes_test)
note "$(grep -E 'kprobes_test|ok ' <<< "$log")"
summary=$(grep -oE '# kprobes_test: pass:[0-9]+ fail:[0-9]+ skip:[0-9]+ total:[0-9]+' <<< "$log")
assert_match "$summary" 'fail:0 ' "KUnit failures"
assert_match "$summary" 'pass:[1-9]' "KUnit passes"
grep -qE '^ *ok [0-9]+ kprobes_test' <<< "$log" || grep -qE 'ok [0-9]+ kprobes_test' <<< "$log" ||
	fail "kprobes_test not ok"
# On a kernel with callopt (the knob exists), the series' four cases must
# each have run and passed: a case that skipped, or that this kernel's
# module does not have, fails here (fail:0 above counts neither).
[ -e /sys/kernel/debug/kprobes/callopt ] || exit 0
for c in test_callopt_single test_callopt_multi test_callopt_unregister_while_hit \
	test_callopt_knob_off; do
	kunit_case_ok "$log" "$c"
done
note "the 4 callopt cases ran and passed"
