#!/usr/bin/env bash
# 'make bench' in miniature: scripts/bench --quick with the icount per-hit
# mode and the latency mode (tiny counts, ~2 minutes). The JSON must parse
# and hold every configuration with the mechanism it asked for, exactly one
# hit per getpgid() call, and the table every row kind of those modes.
. "$(dirname "$0")/../lib.sh"
make -s -C "$KPX_ROOT/bench" BUILD="$BUILD" > "$BUILD/bench-smoke-build.log" 2>&1 ||
	fail "cannot build kpx-bench: $(tail -5 "$BUILD/bench-smoke-build.log")"
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
	assert_eq "$(jq -r '.hits_per_call' <<< "$c")" 1 "$id hits per call"
	jq -e '.median > 0' <<< "$c" > /dev/null || fail "$id: no positive cost ($c)"
done
for k in idle load; do
	jq -e --arg k "$k" '.optwait[$k] | length == 4' "$res" > /dev/null || fail "optwait $k incomplete"
	jq -e --arg k "$k" '.detach[$k] | length == 4' "$res" > /dev/null || fail "detach $k incomplete"
	for m in stock ours; do
		for p in links links-entry; do
			jq -e --arg n "$p-$m-20-$k" '.links[$n].attached == 20' "$res" > /dev/null ||
				fail "$p-$m-20-$k: not 20 links attached"
		done
	done
done
for row in "per-hit cost, instructions (icount)" "time to optimized after attach" \
	"detach one link" "attach 20 links" "detach 20 links"; do
	grep -qF "| $row" "$out/table.md" || fail "table has no row '$row'"
done
[ -s "$out/bench.png" ] || fail "no chart"
echo "bench smoke: $(jq -r '.meta.total_s' "$res") s"
