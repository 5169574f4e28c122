#!/usr/bin/env bash
# Upstream's ftracetest kprobe suite (tools/testing/selftests/ftrace,
# test.d/kprobe) behaves the same with call optimization on as with it off
# (new probes then use the stock jump optimization): every test gets the
# same result. Tests that fail or cannot run here fail or are unresolved in
# both runs (environment, not callopt); they are listed.
. "$(dirname "$0")/../lib.sh"
FT=$BUILD/linux/tools/testing/selftests/ftrace
CALLOPT=$KNOB_CALLOPT
[ -x "$FT/ftracetest" ] || fail "no ftracetest in the kernel tree"
trap 'echo 1 > $CALLOPT' EXIT
run() { # CALLOPT -> "N result" lines
	echo "$1" > $CALLOPT
	(cd "$FT" && ./ftracetest -l "/tmp/ftlog.$1" test.d/kprobe/ 2>&1) |
		sed -n 's/^\[\([0-9]*\)\] \(.*\)\t\[\([A-Z]*\)\]$/\1 \3 \2/p'
}
on=$(run 1)
off=$(run 0)
note "callopt on:"; note "$on"
[ "$(wc -l <<< "$on")" -ge 20 ] || fail "ftracetest ran only $(wc -l <<< "$on") tests"
[ "$(grep -c ' PASS ' <<< "$on")" -ge 20 ] || fail "fewer than 20 ftracetest passes"
if [ "$on" != "$off" ]; then
	diff <(echo "$off") <(echo "$on") | sed 's/^/# /'
	fail "ftracetest results differ with callopt on (>) and off (<)"
fi
note "not PASS in both runs: $(grep -v ' PASS ' <<< "$on" | tr '\n' ';')"
