#!/usr/bin/env bash
# scripts/check/patch-refs, the guard of the docs' patch numbers: the real
# docs pass. Negative controls on pages of their own: a table row whose
# subject is not its patch's, a row and a prose reference past the end of
# the series, each exactly one finding; numbers that are not patch
# references (a RIP segment, 0x..., a longer number) are none; bad usage
# exits 2. No VM.
. "$(dirname "$0")/../lib.sh"
PR=$KPX_ROOT/scripts/check/patch-refs
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
command -v python3 > /dev/null || skip "no python3"

out=$("$PR" 2>&1) || fail "patch-refs on the real docs: $out"
assert_match "$out" '^patch-refs: 0 findings in [0-9]+ files$' "summary on the real docs"
note "$out"

n=$(grep -c . "$KPX_ROOT/kernel/patches/series")
first=$(head -1 "$KPX_ROOT/kernel/patches/series")
# The subject, unwrapped (a long one continues on indented lines).
subj=$(awk '/^Subject: / { s = $0; w = 1; next } w && /^ / { s = s $0; next } w { exit }
	END { sub(/^Subject: \[PATCH [0-9]+\/[0-9]+\] /, "", s); print s }' \
	"$KPX_ROOT/kernel/patches/$first")
[ -n "$subj" ] || fail "no subject in $first"
past=$(printf '%04d' $((n + 1)))

printf '| 0001 %s | ok |\n' "$subj" > "$t/good.md"
out=$("$PR" "$t/good.md" 2>&1) || fail "a correct row: $out"

printf '| 0001 %s, reworded | ok |\n' "$subj" > "$t/wrong.md"
out=$("$PR" "$t/wrong.md" 2>&1); rc=$?
assert_eq "$rc" 1 "a reworded row: exit status"
assert_match "$out" "wrong.md:1: row 0001 says" "a reworded row: the finding"
assert_match "$out" "patch-refs: 1 findings" "a reworded row: one finding"

printf '| %s x86/kprobes: A patch of another series | no |\n' "$past" > "$t/row.md"
out=$("$PR" "$t/row.md" 2>&1); rc=$?
assert_eq "$rc" 1 "a row past the end: exit status"
assert_match "$out" "row.md:1: row $past: no such patch" "a row past the end: the finding"

printf 'As patch %s says, and RIP: 0099:foo+0x1, 0x0099, 100099 and 0000 do not.\n' "$past" > "$t/prose.md"
out=$("$PR" "$t/prose.md" 2>&1); rc=$?
assert_eq "$rc" 1 "prose past the end: exit status"
assert_match "$out" "prose.md:1: patch $past is past the end" "prose past the end: the finding"
assert_match "$out" "patch-refs: 1 findings" "prose past the end: only that one"

printf '```\n| %s not a row: code |\n```\n' "$past" > "$t/code.md"
out=$("$PR" "$t/code.md" 2>&1) || fail "a fenced block is no table: $out"

assert_rc 2 "$PR" --bogus
assert_rc 2 "$PR" "$t/missing.md"
assert_rc 2 "$PR" --patches "$t" "$t/good.md"
echo ok
