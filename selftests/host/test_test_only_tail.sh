#!/usr/bin/env bash
# scripts/check/test-only-tail, issue 34's shape of the series: the
# test-only patches ("Testing only, not for posting") are the last ones,
# and no patch meant for posting adds CONFIG_KPROBES_CALLOPT_TEST, a fake
# RCU read side (rcu_lock_acquire(&rcu_lock_map)), a copy of
# bpf_prog_run_array() or __no_stack_protector. The real series passes,
# with at least one test-only patch. Negative controls on copies of the
# series: a posted patch that adds each word, a test-only patch moved
# before a posted one, each exactly the finding it should be; bad usage
# exits 2. No VM.
. "$(dirname "$0")/../lib.sh"
TT=$KPX_ROOT/scripts/check/test-only-tail
P=$KPX_ROOT/kernel/patches
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
command -v python3 > /dev/null || skip "no python3"

out=$("$TT" 2>&1) || fail "test-only-tail on kernel/patches: $out"
assert_match "$out" '^test-only-tail: 0 findings, [0-9]+ patches, [1-9][0-9]* test-only$' "summary on the real series"
note "$out"

# A copy of the series with one more posted patch at FRONT (1) or at the
# end (0), adding LINE.
with_patch() { # DIR FRONT LINE
	rm -rf "$1"
	mkdir -p "$1"
	cp "$P"/*.patch "$1"/
	{
		echo "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001"
		echo "Subject: [PATCH] x86/kprobes: A patch of the test"
		echo
		echo "Meant for posting."
		echo "---"
		echo "diff --git a/f.c b/f.c"
		echo "--- a/f.c"
		echo "+++ b/f.c"
		echo "@@ -1,0 +1,1 @@"
		echo "+$3"
	} > "$1/9999-test.patch"
	if [ "$2" = 1 ]; then
		{ echo 9999-test.patch; cat "$P/series"; } > "$1/series"
	else
		{ cat "$P/series"; echo 9999-test.patch; } > "$1/series"
	fi
}

for w in 'static __no_stack_protector int f(void)' \
	'	rcu_lock_acquire(&rcu_lock_map);' \
	'#ifdef CONFIG_KPROBES_CALLOPT_TEST' \
	'	ret = bpf_prog_run_array_pinned(a, c, r);'; do
	with_patch "$t/w" 1 "$w"
	out=$("$TT" --patches "$t/w" 2>&1); rc=$?
	assert_eq "$rc" 1 "a posted patch adds '$w': exit status"
	assert_match "$out" "9999-test.patch: adds " "a posted patch adds '$w': the finding"
	assert_match "$out" "test-only-tail: 1 findings" "a posted patch adds '$w': one finding"
done

# The same words in a removed line or in the message are no finding.
with_patch "$t/m" 1 'int f(void);'
sed -i 's/^Meant for posting\.$/Drops __no_stack_protector and rcu_lock_acquire(\&rcu_lock_map)./' "$t/m/9999-test.patch"
printf -- '-static __no_stack_protector int g(void)\n' >> "$t/m/9999-test.patch"
out=$("$TT" --patches "$t/m" 2>&1) || fail "words in the message and a removed line: $out"

# A posted patch after the test-only tail.
with_patch "$t/o" 0 'int f(void);'
out=$("$TT" --patches "$t/o" 2>&1); rc=$?
assert_eq "$rc" 1 "a posted patch after the test-only ones: exit status"
assert_match "$out" "9999-test.patch: meant for posting, after the test-only " "a posted patch after the test-only ones: the finding"
assert_match "$out" "test-only-tail: 1 findings" "a posted patch after the test-only ones: one finding"

assert_rc 2 "$TT" --bogus
assert_rc 2 "$TT" --patches "$t/missing"
echo ok
