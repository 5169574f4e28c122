#!/usr/bin/env bash
# scripts/check/sweep-merge makes one sweep of the parts of a sweep
# (scripts/check/sweep --part K/N), and scripts/check/sweep-report reads it as one: every
# site of the list has exactly one result, or the merge fails and writes
# nothing. Negative controls: a site without a result, a site run twice,
# parts of different flavours, and a failed site in one part (the merged
# sweep must then not be clean).
. "$(dirname "$0")/../lib.sh"
MERGE=$KPX_ROOT/scripts/check/sweep-merge
REPORT=$KPX_ROOT/scripts/check/sweep-report
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

# part DIR FLAVOUR K RESULT ADDR...: a finished part with these sites.
part() {
	local d=$t/$1 fl=$2 k=$3 res=$4 a
	shift 4
	mkdir -p "$d"
	{
		echo "# kpx sweep sites v1"
		echo "# sites $#"
		echo "# part $k/2"
	} > "$d/sites.tsv"
	: > "$d/results.jsonl"
	for a in "$@"; do
		printf 'ffffffff8100%04x\tf\t0x%x\tsym\tclass\tc3\t1\tc3\t-\n' "$a" "$a" >> "$d/sites.tsv"
		printf '{"addr": "0xffffffff8100%04x", "site": "f+0x%x", "group": "class", "class": "c3", "bytes": "c3", "result": "%s", "mechanism": "int3", "hits": 1}\n' \
			"$a" "$a" "$res" >> "$d/results.jsonl"
	done
	printf '{"flavour": "%s", "mode": "full", "vmlinux": "v", "batch": 200, "hold_ms": 400, "series": "s", "main": "m", "started": "2026-12-01 1%d:00 UTC", "wall_s": 60, "part": "%s/2", "boots": [{"boot": 0, "wall_s": 60}]}\n' \
		"$fl" "$k" "$k" > "$d/boots.json"
	echo '[]' > "$d/events.json"
}

part a stock 1 attached 1 2 3
part b stock 2 attached 4 5
assert_rc 0 "$MERGE" "$t/m" "$t/a" "$t/b"
assert_eq "$(wc -l < "$t/m/results.jsonl")" 5 "merged results"
assert_eq "$(grep -vc '^#' "$t/m/sites.tsv")" 5 "merged site list"
assert_eq "$(jq '.boots | length' "$t/m/boots.json")" 2 "boots of both parts"
assert_eq "$(jq '.wall_s' "$t/m/boots.json")" 120 "time of both parts"
assert_rc 0 "$REPORT" "$t/m" --quiet
assert_eq "$(jq '.clean' "$t/m/summary.json")" true "clean"
assert_match "$(head -n3 "$t/m/summary.md")" $'\nCLEAN\\..*2 VM boot' "clean summary"
assert_match "$(cat "$t/m/summary.md")" "Run in 2 parts" "the parts are named"
assert_eq "$(jq '.sites' "$t/m/summary.json")" 5 "sites in the report"

# A site of the list without a result: no merge, nothing written.
part c stock 2 attached 4 5
sed -i '$d' "$t/c/results.jsonl"
assert_rc 1 "$MERGE" "$t/m2" "$t/a" "$t/c"
assert_match "$out" "1 sites of the list have no result" "missing site named"
[ ! -e "$t/m2" ] || fail "a failed merge left $t/m2 behind"

# The same site in two parts.
part d stock 2 attached 3 4 5
assert_rc 1 "$MERGE" "$t/m3" "$t/a" "$t/d"
assert_match "$out" "has a result in two parts" "duplicate site named"

# Parts of two flavours.
part e normal 2 attached 4 5
assert_rc 1 "$MERGE" "$t/m4" "$t/a" "$t/e"
assert_match "$out" "parts differ in flavour" "flavour mismatch named"

# A failed site in one part: the merged sweep is not clean.
part f stock 2 failed 4 5
assert_rc 0 "$MERGE" "$t/m5" "$t/a" "$t/f"
assert_rc 1 "$REPORT" "$t/m5" --quiet
assert_eq "$(jq '.clean' "$t/m5/summary.json")" false "clean with a failed site"
assert_match "$(head -n3 "$t/m5/summary.md")" $'\nNOT CLEAN' "failed site in the summary"
# make sweep-stock-compare: passes on a clean normal sweep beside a stock
# sweep that crashed (stock's own bugs); fails when ours failed a site.
part n1 normal 1 attached 1 2 3
part n2 normal 2 attached 4 5
assert_rc 0 "$MERGE" "$t/normal" "$t/n1" "$t/n2"
part s2 stock 2 crashed 4 5
assert_rc 0 "$MERGE" "$t/stock" "$t/a" "$t/s2"
assert_rc 0 make -s -C "$KPX_ROOT" sweep-stock-compare SWEEP_NORMAL="$t/normal" SWEEP_STOCK="$t/stock"
assert_match "$out" "no site that stock survives fails on ours" "compare passes"
part n3 normal 2 failed 4 5
assert_rc 0 "$MERGE" "$t/normal2" "$t/n1" "$t/n3"
assert_rc 2 make -s -C "$KPX_ROOT" sweep-stock-compare SWEEP_NORMAL="$t/normal2" SWEEP_STOCK="$t/m"
assert_match "$out" "not clean" "compare fails on a site ours failed"
echo "sweep-merge: merged 2 parts; refused a missing site, a duplicate and mixed flavours; sweep-stock-compare passed and failed as it must"
