#!/usr/bin/env bash
# A kprobe on a CALL with a prefix ("cs call __x86_indirect_thunk_REG",
# which GCC emits for the retpoline build) is an int3 probe whose hit
# emulates the call; the callee must return after the whole 6-byte
# instruction. Stock 6.12 pushed the address 5 bytes after the probe, and
# the first open(2) through do_dentry_open+0x1de oopsed in the middle of
# the call. Sites from scripts/sites/callopt-sites (PREFIXED_CALLS), in
# functions the workload runs; every probe is hit, nothing oopses.
. "$(dirname "$0")/../lib.sh"
CS=$BUILD/callopt-sites$SFX.env
[ -r "$CS" ] || fail "$CS missing (make all)"
. "$CS"
[ -n "${PREFIXED_CALLS:-}" ] || fail "no PREFIXED_CALLS in $CS"
specs=()
for s in $PREFIXED_CALLS; do
	if out=$("$KPCTL" -j attach "$s" 2>&1); then
		m=$(jq -r '.probes[0].mechanism // "missing"' <<< "$out")
		assert_eq "$m" int3 "mechanism at $s (a call is emulated)"
		specs+=("$s")
	else
		note "$s: not probed at all ($(tail -n1 <<< "$out"))"
	fi
done
[ ${#specs[@]} -ge 1 ] || fail "none of $PREFIXED_CALLS could be probed"

# open(2), read(2), fork and exec while all of them are armed.
work() {
	local end=$((SECONDS + 5)) i=0
	while [ $SECONDS -lt $end ]; do
		cat /proc/self/status /etc/passwd > /dev/null || return 1
		ls /usr/bin > /dev/null || return 1
		i=$((i + 1))
	done
	echo "$i"
}
work > /tmp/emucall.work &
wpid=$!
json=$("$KPCTL" -j attach --duration 4 "${specs[@]}") || fail "attach: $json"
wait $wpid || fail "the workload failed"
note "$(jq -r '.probes[] | "\(.spec) \(.mechanism) \(.hits)"' <<< "$json")"
hit=$(jq '[.probes[] | select(.hits > 0)] | length' <<< "$json")
[[ $hit =~ ^[0-9]+$ ]] && [ "$hit" -ge 1 ] || fail "no prefixed-call probe was hit: $json"
note "$hit of ${#specs[@]} probes hit, workload $(cat /tmp/emucall.work) rounds"
assert_no_kprobes
echo ok
