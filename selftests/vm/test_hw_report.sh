#!/usr/bin/env bash
# scripts/hw-report, the figures docs/hardware.md asks a user to send back,
# runs here as it would on a real machine (--quick: small measurements):
# every file it promises is there and holds what it should (the series
# found, a per-hit figure for callopt, links detached both ways, the
# kprobe_multi runs), the knob is back to 1, and the archive lists them.
# Negative control: not as root it refuses (exit 3) and writes nothing.
. "$(dirname "$0")/../lib.sh"
FAST=$KNOB_FAST
stock_kernel && skip "hw-report is for a kernel with the series"
out=/tmp/hw-report-test
rm -rf "$out" "$out.tar.gz"
res=$("$KPX_ROOT/scripts/hw-report" --quick --out "$out" 2>&1); rc=$?
note "$res"
assert_eq "$rc" 0 "hw-report exit status"
assert_eq "$(knob "$FAST")" 1 "the knob restored"
for f in system.txt feature.json explain.json hit.json hit-short.json links-fast.json \
	links-stock.json multi.json multi-all.json; do
	[ -s "$out/$f" ] || fail "no $out/$f"
done
grep -q '^Linux ' "$out/system.txt" || fail "system.txt has no uname -a"
grep -q 'vulnerabilities/retbleed:' "$out/system.txt" || fail "system.txt has no vulnerability files"
assert_eq "$(json_bool "$(cat "$out/feature.json")" .series)" true "feature: the series"
json=$(cat "$out/hit.json")
jq -e '[.configs[] | select(.id == "callopt-single" and (has("error") | not))] | length == 1' \
	<<< "$json" > /dev/null || fail "hit.json has no callopt-single result: ${json:0:400}"
json=$(cat "$out/hit-short.json")
jq -e '[.configs[] | select(.id == "callopt-single" and (has("error") | not))] | length == 1' \
	<<< "$json" > /dev/null || fail "hit-short.json has no callopt-single result: ${json:0:400}"
assert_num "$(json_int "$(cat "$out/links-fast.json")" .attached)" '==' 20 "links-fast: attached"
assert_num "$(json_int "$(cat "$out/links-stock.json")" .attached)" '==' 20 "links-stock: attached"
assert_eq "$(json_int "$(cat "$out/multi.json")" .rounds)" 2 "multi: rounds"
assert_eq "$(json_bool "$(cat "$out/multi-all.json")" .ok)" true "multi-all: ok"
tar -tzf "$out.tar.gz" | grep -q 'hw-report-test/hit.json' || fail "hit.json not in the archive"

# Not root: refused before anything runs.
rm -rf "$out.nr"
res=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$KPX_ROOT/scripts/hw-report" --quick --out "$out.nr" 2>&1); rc=$?
assert_eq "$rc" 3 "not root: exit status ($res)"
[ ! -e "$out.nr" ] || fail "not root: $out.nr was written"
rm -rf "$out" "$out.tar.gz"
echo "PASS"
