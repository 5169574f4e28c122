#!/usr/bin/env bash
# The return stack model (selftests/benchs/rsb-model, the QEMU TCG plugin
# build/rsb/rsb_model.so; docs/benchmarks.md, "Return stack model").
# First without QEMU: build/rsb/model_check drives the plugin's code over a
# synthetic guest (selftests/benchs/rsb/model_check.c) whose counts are
# worked out by hand there: a callopt-like exit, 5 mispredicted returns
# per hit, 3 above the probed function, depth -1 and one call depth
# underflow per hit, on both RSB sizes, one of them a return in thunk=; an
# int3-like handler 20 calls deep, 8 (3 above) with 16 entries and 0 with
# 32, whatever QEMU's helpers replay of the last memory callbacks (the
# exception frame, iret); plain calls 0. Then one
# --icount boot of ours (build/bzImage) with none, int3-single,
# callopt-single (a 7-byte instruction: entered by IRET), callopt-short (a
# 5-byte region: entered by a return after an extra call), callopt-multi,
# kretprobe-entry, ours-entry (ftrace) and fentry-entry:
# - the plugin loads and sees every marker the guest made (one per
#   configuration, and one more);
# - each probe's hits, counted by the plugin at the probe site, are exactly
#   the getpgid(0) calls kpx-bench made with it (warm-up + reps x calls), and
#   so are the syscall windows that hit it;
# - the no-probe baseline is stable: none's mispredicted returns per call
#   differ from the other configurations' baseline calls by < 0.05;
# - callopt is return-balanced (issue 34, item 8): each of the three sites
#   mispredicts 1 return per hit (0.95..1.05: the return into the buffer
#   at the 5-byte site, the exit's to site+len at the others), none above
#   the probed function, and the call depth does not drift, on both RSB
#   sizes, not counting the returns of retpoline thunks (mispredicted by
#   design, as many for every mechanism that makes the same indirect calls);
# - the negative control: kretprobe's return side (stock's rethook, whose
#   trampoline returns where no call pushed) mispredicts >= 2 returns per
#   hit, >= 2 above the probed function, and drifts the call depth by -1:
#   the model sees an unbalanced mechanism;
# - int3, ftrace and BPF fentry mispredict no return above the probed
#   function (|per hit| < 0.05 with both sizes);
# - --ceiling holds callopt to 1/0 and fails kretprobe-entry at 1/0.
. "$(dirname "$0")/../lib.sh"
[ -r "$BUILD/bzImage" ] || fail "no $BUILD/bzImage (make kernel)"
[ -x "$BUILD/kpx-bench" ] || fail "no $BUILD/kpx-bench (make bench-tool)"
out=$BUILD/rsb/test
[ -r "$BUILD/rsb/rsb_model.so" ] && [ -x "$BUILD/rsb/model_check" ] ||
	fail "no $BUILD/rsb/rsb_model.so or model_check (make rsb-plugin; make check builds them)"
"$BUILD/rsb/model_check" "$BUILD/rsb/model_check.json" || fail "model_check failed"
mc=$(cat "$BUILD/rsb/model_check.json") || fail "model_check wrote no JSON"
assert_eq "$(json_int "$mc" .marks)" 4 "model_check: markers"
for e in 1:hit:20:100:100:60:60:-20:20 1:plain:20:0:0:0:0:0:0 2:hit:20:160:0:60:0:0:20 \
	2:plain:20:0:0:0:0:0:0 3:hit:0:0:0:0:0:0:0 3:plain:40:0:0:0:0:0:0; do
	IFS=: read -r n c w m16 m32 a16 a32 dn cu <<< "$e"
	p=".epochs[$n].$c"
	assert_eq "$(json_int "$mc" "$p.windows")" "$w" "model_check epoch $n $c: windows"
	assert_eq "$(json_int "$mc" "$p.site_hits")" "$([ "$c" = hit ] && echo "$w" || echo 0)" \
		"model_check epoch $n $c: site hits"
	assert_eq "$(json_int "$mc" "$p.mispredicts[0]")" "$m16" "model_check epoch $n $c: mispredicts, RSB 16"
	assert_eq "$(json_int "$mc" "$p.mispredicts[1]")" "$m32" "model_check epoch $n $c: mispredicts, RSB 32"
	assert_eq "$(json_int "$mc" "$p.above[0][0]")" "$a16" "model_check epoch $n $c: above, RSB 16"
	assert_eq "$(json_int "$mc" "$p.above[0][1]")" "$a32" "model_check epoch $n $c: above, RSB 32"
	assert_eq "$(json_int "$mc" "$p.depth_net")" "$dn" "model_check epoch $n $c: call depth"
	assert_eq "$(json_int "$mc" "$p.cdt_underflows")" "$cu" "model_check epoch $n $c: underflows"
done
for n in 0 1; do
	assert_eq "$(json_int "$mc" ".epochs[1].hit.thunk[$n]")" 20 "model_check: thunk returns mispredicted"
	assert_eq "$(json_int "$mc" ".epochs[2].hit.thunk[$n]")" 0 "model_check: thunk returns, int3"
done
note "model_check: the synthetic guest's counts are as worked out by hand"
runner=$KPX_ROOT/selftests/benchs/rsb-model
cfgs=none,int3-single,callopt-single,callopt-short,callopt-multi,kretprobe-entry,ours-entry,fentry-entry
log=$BUILD/rsb/test.log
mkdir -p "$BUILD/rsb"
"$runner" --kernels ours --configs "$cfgs" --calls 2000 --reps 2 --warmup 200 \
	--out "$out" --timeout 420 > "$log" 2>&1
rc=$?
cat "$out/table.md" 2>/dev/null | sed 's/^/# /'
[ $rc = 0 ] || fail "rsb-model exited $rc: $(tail -n 20 "$log")"
res=$(cat "$out/results.json") || fail "no $out/results.json"
k='.kernels.ours'
assert_eq "$(json_int "$res" "$k.marks")" 9 "markers the plugin saw"
assert_eq "$(json_int "$res" "$k.guest_marks")" 9 "markers the guest made"
want=$(json_int "$res" "$k.probed_calls")
assert_eq "$want" $((200 + 2 * 2000)) "probed calls per configuration"
for c in int3-single callopt-single callopt-short callopt-multi kretprobe-entry ours-entry fentry-entry; do
	r="$k.configs[\"$c\"]"
	assert_eq "$(json_str "$res" "$r.mechanism")" "$(json_str "$res" "$r.want")" "$c: mechanism"
	assert_eq "$(json_int "$res" "$r.hits")" "$want" "$c: hits counted at the site"
	assert_eq "$(json_int "$res" "$r.hit_windows")" "$want" "$c: syscalls that hit"
	assert_eq "$(json_int "$res" "$r.hits_in_hit_windows")" "$want" "$c: hits in them"
	assert_num "$(json_int "$res" "$r.plain_windows")" '>=' 4000 "$c: baseline calls"
done
assert_eq "$(json_int "$res" "$k.configs.none.hits")" 0 "none: hits"
for n in 16 32; do
	d=$(json_num "$res" "$k.configs.none.per_call_vs_baseline[\"$n\"]")
	assert_num "$d" '<' 0.05 "none, RSB $n: mispredicts per call vs the baseline"
	assert_num "$d" '>' -0.05 "none, RSB $n: mispredicts per call vs the baseline"
	for c in callopt-single callopt-short callopt-multi; do
		v=$(json_num "$res" "$k.configs[\"$c\"].per_hit[\"$n\"].own")
		assert_num "$v" '>' 0.95 "$c, RSB $n: mispredicted returns per hit"
		assert_num "$v" '<' 1.05 "$c, RSB $n: mispredicted returns per hit"
	done
	v=$(json_num "$res" "$k.configs[\"kretprobe-entry\"].per_hit[\"$n\"].own")
	assert_num "$v" '>=' 2 "kretprobe-entry, RSB $n: mispredicted returns per hit (negative control)"
	v=$(json_num "$res" "$k.configs[\"kretprobe-entry\"].per_hit[\"$n\"].above")
	assert_num "$v" '>=' 2 "kretprobe-entry, RSB $n: above the probed function (negative control)"
	for c in int3-single callopt-single callopt-short callopt-multi ours-entry fentry-entry; do
		a=$(json_num "$res" "$k.configs[\"$c\"].per_hit[\"$n\"].above")
		assert_num "$a" '<' 0.05 "$c, RSB $n: mispredicted returns above the probed function per hit"
		assert_num "$a" '>' -0.05 "$c, RSB $n: mispredicted returns above the probed function per hit"
	done
done
d=$(json_num "$res" "$k.configs[\"kretprobe-entry\"].depth_drift_per_hit")
assert_num "$d" '<' -0.95 "kretprobe-entry: call depth drift per hit (negative control)"
assert_num "$d" '>' -1.05 "kretprobe-entry: call depth drift per hit (negative control)"
for c in int3-single callopt-single callopt-short callopt-multi ours-entry fentry-entry; do
	d=$(json_num "$res" "$k.configs[\"$c\"].depth_drift_per_hit")
	assert_num "$d" '<' 0.05 "$c: call depth drift per hit"
	assert_num "$d" '>' -0.05 "$c: call depth drift per hit"
done
# The ceiling option: holds callopt to 1/0, fails the unbalanced kretprobe.
"$runner" --report-only --out "$out" --ceiling callopt-single=1/0 --ceiling callopt-short=1/0 \
	--ceiling callopt-multi=1/0 > "$out/ceiling-pass.log" 2>&1 ||
	fail "--ceiling callopt-{single,short,multi}=1/0 failed: $(tail -5 "$out/ceiling-pass.log")"
"$runner" --report-only --out "$out" --ceiling kretprobe-entry=1/0 > "$out/ceiling-fail.log" 2>&1
assert_eq $? 1 "rsb-model --ceiling kretprobe-entry=1/0 (negative control)"
grep -q "kretprobe-entry, RSB 16: .* mispredicted returns (retpoline thunks' excluded) per hit, ceiling 1" "$out/ceiling-fail.log" ||
	fail "--ceiling kretprobe-entry=1/0: no finding for RSB 16: $(cat "$out/ceiling-fail.log")"
per() { printf %.2f "$(json_num "$res" "$k.configs[\"$1\"].per_hit[\"16\"].own")"; }
echo "PASS: return stack model (RSB 16, thunks' excluded): callopt-single $(per callopt-single), callopt-short $(per callopt-short), callopt-multi $(per callopt-multi) mispredicted returns per hit, none above; kretprobe $(per kretprobe-entry) (negative control); int3/ftrace/fentry 0 above"
