#!/usr/bin/env bash
# unregister_fprobes() and unregister_ftrace_functions() (issue 34, item 6:
# one ftrace function owns the order and the waits of a batch): upstream's
# fprobe_test KUnit suite (CONFIG_FPROBE_SANITY_TEST=y, built in, so it ran
# at boot) with the series' case test_unregister_fprobes: 16 fprobes, half
# with a rethook, unregistered in one call while a kthread keeps calling
# the target; refused whole (-EINVAL, nothing changed) when one fprobe of
# the batch is not registered; when it returns no handler runs and no
# trampoline is left in kallsyms. Every case of the suite must pass.
. "$(dirname "$0")/../lib.sh"
stock_kernel && skip "the stock kernel has no unregister_fprobes()"
log=$(dmesg)
summary=$(grep -oE '# fprobe_test: pass:[0-9]+ fail:[0-9]+ skip:[0-9]+ total:[0-9]+' <<< "$log")
[ -n "$summary" ] || fail "no fprobe_test summary in the boot log (CONFIG_FPROBE_SANITY_TEST=y?)"
note "$summary"
num() { grep -oE "$1:[0-9]+" <<< "$summary" | cut -d: -f2; }
pass=$(num pass) fail=$(num fail) skip=$(num skip) total=$(num total)
assert_eq "$fail" 0 "fprobe_test failures"
assert_eq "$skip" 0 "fprobe_test skips"
assert_eq "$pass" "$total" "fprobe_test cases passed"
kunit_case_ok "$log" test_unregister_fprobes
echo ok
