#!/usr/bin/env bash
# The guest half of host/test_stock_compare (run there by scripts/vm/vm-run, on
# the stock kernel and on ours). Runs upstream's ftracetest kprobe suite and
# the kprobes KUnit suite and writes the per-test results to $KPX_OUT:
#   ftrace.results  "N RESULT name" per ftracetest test
#   kunit.results   "RESULT name" per KUnit case (ok, not ok, SKIP)
#   kunit.summary   the suite's "pass:N fail:N skip:N total:N" line
#   release         uname -r
#   ftracetest/     ftracetest's logs (per test)
# Both kernels run the same suite: the pristine tree's ftracetest
# (build/linux-stock; our series does not touch tools/testing). Exits
# non-zero only when a suite could not run at all; results are judged on
# the host.
. "$(dirname "$0")/../lib.sh"
FT=$BUILD/linux-stock/tools/testing/selftests/ftrace
uname -r > "$KPX_OUT/release"
note "kernel $(uname -r), artifacts $KOBJ"
[ -x "$FT/ftracetest" ] || fail "no ftracetest in $FT"

(cd "$FT" && ./ftracetest -l "$KPX_OUT/ftracetest" test.d/kprobe/ 2>&1) > "$KPX_OUT/ftrace.log"
sed -n 's/^\[\([0-9]*\)\] \(.*\)\t\[\([A-Z]*\)\]$/\1 \3 \2/p' "$KPX_OUT/ftrace.log" > "$KPX_OUT/ftrace.results"
note "ftracetest: $(wc -l < "$KPX_OUT/ftrace.results") tests"

ko=$KOBJ/lib/test_kprobes.ko
[ -f "$ko" ] || fail "$ko missing (CONFIG_KPROBES_SANITY_TEST=m)"
# What the suite logs, after a marker (the log is never cleared).
mark=$(kmsg_mark stock_compare_kunit)
insmod "$ko" || fail "insmod $ko failed"
kmsg_since "$mark" -t > "$KPX_OUT/kunit.log"
rmmod test_kprobes
# KTAP: the cases are the indented "ok N name [# SKIP ...]" lines under the
# suite's "# Subtest: kprobes_test"; the suite's own line is not indented.
awk '/^[ \t]+(not ok|ok) [0-9]+ / {
	not = ($1 == "not"); name = not ? $4 : $3
	print (not ? "FAIL" : ($0 ~ /# SKIP/ ? "SKIP" : "PASS")), name
}' "$KPX_OUT/kunit.log" > "$KPX_OUT/kunit.results"
grep -oE 'kprobes_test: pass:[0-9]+ fail:[0-9]+ skip:[0-9]+ total:[0-9]+' "$KPX_OUT/kunit.log" > "$KPX_OUT/kunit.summary" || true
note "KUnit: $(cat "$KPX_OUT/kunit.summary")"

# kpctl on this kernel: it works on stock too, and says where it got the
# mechanism from (bpf_link_info on ours, debugfs on stock). And the time to
# attach and to detach 1000 BPF kprobe links (kpctl links), for the record.
. "$SITES"
"$KPCTL" -j attach --trigger 100 "$GETPGID_FUNC" "$GETPGID_FUNC+$GETPGID_SINGLE" \
	> "$KPX_OUT/kpctl-attach.json" 2> "$KPX_OUT/kpctl-attach.err" ||
	note "kpctl attach failed: $(cat "$KPX_OUT/kpctl-attach.err")"
"$KPCTL" -j links -n 1000 > "$KPX_OUT/kpctl-links.json" 2> "$KPX_OUT/kpctl-links.err" ||
	note "kpctl links failed: $(tail -3 "$KPX_OUT/kpctl-links.err")"
