#!/usr/bin/env bash
# 'make bench' in miniature: scripts/bench --quick with the icount per-hit
# mode and the latency mode (tiny counts, ~2 minutes). The JSON must parse
# and hold every configuration with the mechanism it asked for, exactly one
# hit per getpgid() call, and the table every row kind of those modes.
. "$(dirname "$0")/../lib.sh"
[ -x "$BUILD/kpx-bench" ] || fail "no $BUILD/kpx-bench: run 'make bench-tool' (make check builds it)"
out=$BUILD/bench-smoke
"$KPX_ROOT/scripts/bench" --quick --modes hit-icount,latency --out "$out" > "$out.log" 2>&1 ||
	fail "scripts/bench failed: $(tail -20 "$out.log")"
res=$out/results.json
jq -e . "$res" > /dev/null || fail "results.json does not parse"

for id in int3-single int3-multi jmp-single jmp-multi callopt-single callopt-multi \
	ftrace-entry ours-entry kretprobe-entry fentry-entry; do
	c=$(jq -c --arg id "$id" '.per_hit_icount.configs[$id]' "$res")
	[ "$c" != null ] || fail "no per-hit result for $id"
	[ "$(jq -r '.error // empty' <<< "$c")" = "" ] || fail "$id: $(jq -r .error <<< "$c")"
	assert_eq "$(jq -r '.mechanism_after == .want' <<< "$c")" true "$id mechanism ($c)"
	assert_eq "$(json_num "$c" .hits_per_call)" 1 "$id hits per call"
	assert_num "$(json_num "$c" .median)" '>' 0 "$id: cost ($c)"
done
for k in idle load; do
	jq -e --arg k "$k" '.optwait[$k] | length == 4' "$res" > /dev/null || fail "optwait $k incomplete"
	jq -e --arg k "$k" '.detach[$k] | length == 4' "$res" > /dev/null || fail "detach $k incomplete"
	for m in stock ours; do
		for p in links links-entry; do
			assert_eq "$(json_int "$(cat "$res")" ".links[\"$p-$m-20-$k\"].attached")" 20 \
				"$p-$m-20-$k: links attached"
		done
	done
done
for row in "per-hit cost, instructions (icount)" "time to optimized after attach" \
	"detach one link" "attach 20 links" "detach 20 links"; do
	grep -qF "| $row" "$out/table.md" || fail "table has no row '$row'"
done
[ -s "$out/bench.png" ] || fail "no chart"
echo "bench smoke: $(jq -r '.meta.total_s' "$res") s"
