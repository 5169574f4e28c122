#!/usr/bin/env bash
# 'make bench' in miniature: selftests/benchs/bench --quick with the icount per-hit
# mode and the latency mode (tiny counts, ~2 minutes a kernel), on our
# kernel (test_stock_bench runs it on bzImage-stock and ours, for make
# check-stock). The JSON must parse and hold every configuration of each
# kernel with the mechanism it asked for, exactly one hit per getpgid()
# call, what produced the run (commit, date, accelerator, QEMU, image
# hash), and the table every row kind of those modes.
. "$(dirname "$0")/../lib.sh"
kernels=${BENCH_SMOKE_KERNELS:-ours}
[ -x "$BUILD/kpx-bench" ] || fail "no $BUILD/kpx-bench: run 'make bench-tool' (make check builds it)"
out=$BUILD/bench-smoke${BENCH_SMOKE_SUFFIX:-}
"$KPX_ROOT/selftests/benchs/bench" --quick --kernels "$kernels" --modes hit-icount,latency --out "$out" \
	> "$out.log" 2>&1 || fail "selftests/benchs/bench failed: $(tail -20 "$out.log")"
res=$out/results.json
jq -e . "$res" > /dev/null || fail "results.json does not parse"

# What produced the figures: this checkout's commit, the series tree, the
# date, QEMU, TCG only.
assert_match "$(jq -r .meta.commit "$res")" "^$(git -C "$KPX_ROOT" rev-parse --short=12 HEAD)(-dirty)?\$" \
	"meta.commit"
assert_match "$(jq -r .meta.series_tree "$res")" "^$(git -C "$BUILD/linux" rev-parse --short=12 'HEAD^{tree}')" \
	"meta.series_tree"
assert_match "$(jq -r .meta.date "$res")" '^20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' "meta.date"
assert_match "$(jq -r .meta.qemu "$res")" '^QEMU emulator version ' "meta.qemu"
assert_eq "$(jq -r '.meta.accelerator | join(",")' "$res")" tcg "accelerator"
assert_eq "$(jq -r '.meta.runs["ours/hit-icount"].icount' "$res")" true "hit-icount ran with -icount"

declare -A cfgs=(
	[ours]="int3-single int3-multi jmp-single jmp-multi callopt-single callopt-multi ours-entry kretprobe-entry fentry-entry"
	[stock]="int3-single int3-multi jmp-single jmp-multi ftrace-entry kretprobe-entry fentry-entry"
)
IFS=, read -ra klist <<< "$kernels"
for k in "${klist[@]}"; do
	assert_match "$(jq -r --arg k "$k" '.meta.kernels[$k].image_sha256' "$res")" '^[0-9a-f]{64}$' \
		"$k: image hash"
	# Each kernel's runs booted that kernel (uname -r: -kpx or -kpx-stock).
	suffix=-kpx; [ "$k" = stock ] && suffix=-kpx-stock
	for m in hit-icount latency; do
		assert_match "$(jq -r --arg r "$k/$m" '.meta.runs[$r].kernel' "$res")" "^[0-9.]+$suffix " \
			"$k/$m booted the $k kernel"
	done
	for id in ${cfgs[$k]}; do
		c=$(jq -c --arg k "$k" --arg id "$id" '.kernels[$k].hit_icount.configs[$id]' "$res")
		[ "$c" != null ] || fail "$k: no per-hit result for $id"
		[ "$(jq -r '.error // empty' <<< "$c")" = "" ] || fail "$k: $id: $(jq -r .error <<< "$c")"
		# Both must be there: null == null would hold for a result without
		# either field.
		assert_match "$(jq -r '.want | strings' <<< "$c")" '^[a-z0-9-]+$' "$k: $id: wanted mechanism ($c)"
		assert_eq "$(jq -r '.mechanism_after | strings' <<< "$c")" "$(jq -r .want <<< "$c")" \
			"$k: $id mechanism ($c)"
		assert_eq "$(json_num "$c" .hits_per_call)" 1 "$k: $id hits per call"
		assert_num "$(json_num "$c" .median)" '>' 0 "$k: $id: cost ($c)"
	done
	for w in idle load; do
		jq -e --arg k "$k" --arg w "$w" '.kernels[$k].optwait[$w] | length == 2' "$res" > /dev/null ||
			fail "$k: optwait $w incomplete"
		jq -e --arg k "$k" --arg w "$w" '.kernels[$k].detach[$w] | length == 2' "$res" > /dev/null ||
			fail "$k: detach $w incomplete"
		for p in links links-entry; do
			assert_eq "$(jq -r --arg k "$k" --arg n "$p-$k-20-$w" '.kernels[$k].links[$n].attached' "$res")" \
				20 "$k: $p-$k-20-$w: links attached"
		done
	done
done
for row in "per-hit cost, instructions (icount)" "time to optimized after attach" \
	"detach one link" "attach 20 links" "detach 20 links"; do
	grep -qF "| $row" "$out/table.md" || fail "table has no row '$row'"
done
# With both kernels, every row of both has a ratio; with one, none has.
nratio=$(jq '[.rows[] | select(.ratio != "")] | length' "$res")
nboth=$(jq '[.rows[] | select(.stock != "" and .ours != "" and (.stock | startswith("~") | not))] | length' "$res")
if [ ${#klist[@]} = 2 ]; then
	assert_num "$nboth" '>=' 20 "rows measured on both kernels"
	assert_eq "$nratio" "$nboth" "rows with a ratio"
else
	assert_eq "$nratio" 0 "rows with a ratio (one kernel)"
fi
grep -qF "at commit \`$(jq -r .meta.commit "$res")\`" "$out/table.md" || fail "table does not name the commit"
[ -s "$out/bench.png" ] || fail "no chart"
echo "bench smoke ($kernels): $(jq -r '.meta.total_s' "$res") s"
