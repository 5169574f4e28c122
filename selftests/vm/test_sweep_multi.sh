#!/usr/bin/env bash
# The sweep through kprobe_multi links (kpx-sweep --multi): the first three
# batches of the sweep's sample (about 570 sites, docs/stress.md), first as one
# BPF kprobe link per site, then as kprobe_multi links with offsets
# (function + offset per site, one link per batch, split in two while the
# kernel refuses one), while the sweep's workload runs.
#
# Passes when both runs are complete and clean (nothing failed: every run
# saw the ip the mechanism gives, none ran after detach + grace period; the
# workload's results held; no kprobe left behind, refused links included),
# at least one multi link held more than one site, and every site got the
# same outcome both ways: attached with the same mechanism, or refused
# with the same errno. The kernel log must stay clean (the runner checks).
. "$(dirname "$0")/../lib.sh"
LIST=${KPX_SWEEP_SAMPLE:-$BUILD/sweep-sample$SFX.tsv}
TOOL=$BUILD/kpx-sweep
[ -x "$TOOL" ] || fail "no $TOOL (make sweep-tool)"
[ -r "$LIST" ] || fail "no $LIST (make sweep-sample${SFX})"
out=${KPX_OUT:-/tmp}/sweep-multi
mkdir -p "$out" || fail "cannot create $out"

run() { # MODE [ARGS...]
	local mode=$1 rc
	shift
	"$TOOL" --sites "$LIST" --batch 200 --batches 0-2 "$@" --out "$out/$mode.jsonl" \
		--summary "$out/$mode.json" --progress "$out/$mode.progress" > "$out/$mode.stdout" 2>&1
	rc=$?
	tail -2 "$out/$mode.stdout"
	[ -s "$out/$mode.json" ] || fail "$mode: no summary (kpx-sweep exited $rc)"
	assert_eq "$rc" 0 "$mode: kpx-sweep exit status"
	for f in failed late bad_cookie workload_failed left_behind; do
		assert_eq "$(jq -e ".$f | numbers" "$out/$mode.json")" 0 "$mode: $f"
	done
	assert_eq "$(jq -r .ok "$out/$mode.json")" true "$mode: summary ok"
	[ "$(wc -l < "$out/$mode.jsonl")" -gt 500 ] || fail "$mode: $(wc -l < "$out/$mode.jsonl") site objects"
}
run single
run multi --multi

# The multi run really put several sites in one link.
big=$(sed -n 's/.* armed \([0-9]*\) sites from .*/\1/p' "$out/multi.progress" | sort -n | tail -1)
[ -n "$big" ] && [ "$big" -gt 1 ] || fail "multi: no link held more than one site (largest: ${big:-none})"
note "multi: largest link $big sites, $(grep -c ' armed .* in one link' "$out/multi.progress") links"
other=$(jq -r 'select(.result == "attached" and .mech_source != "link_info") | .site' \
	"$out/multi.jsonl" | head -3)
[ -z "$other" ] || fail "multi: mechanism not from the link info: $other"

# Site by site, the same outcome (and the same sites).
assert_eq "$(wc -l < "$out/multi.jsonl")" "$(wc -l < "$out/single.jsonl")" "site objects, multi and single"
outcome() { jq -r '"\(.idx) \(.site) \(.result) \(.mechanism) \(.error)"' "$1" | sort -n; }
d=$(diff <(outcome "$out/single.jsonl") <(outcome "$out/multi.jsonl") | grep '^[<>]' | head -6)
[ -z "$d" ] || fail "single and multi differ: $d"
n_att=$(jq -s '[.[] | select(.result == "attached")] | length' "$out/multi.jsonl")
n_ref=$(jq -s '[.[] | select(.result == "refused")] | length' "$out/multi.jsonl")
[ "$n_att" -gt 0 ] && [ "$n_ref" -gt 0 ] || fail "multi: $n_att attached, $n_ref refused: want both"
note "$(wc -l < "$out/multi.jsonl") sites, the same outcome both ways: $n_att attached, $n_ref refused"
