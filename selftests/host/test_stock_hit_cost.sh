#!/usr/bin/env bash
# Per-hit cost of a BPF kprobe, in instructions (QEMU -icount), against the
# unpatched kernel (make kernel-stock) at the same sites, with the same
# one-counter BPF program (build/kpx-bench hit, as in 'make bench'):
# - at the function entry (ftrace): at most 0.85x stock kprobe-on-ftrace;
# - at the single- and multi-instruction mid-function sites, callopt: at
#   most 0.85x the stock jump optprobe, and at most 25 instructions more
#   than the jump optprobe of our own kernel (kprobes/callopt off) at the
#   same site;
# - int3 stays the dearest.
# The bounds were 0.7x, 0.6x and "no more than our jump optprobe" until
# 2026-12-07, when review took out what bought them: the fake RCU read
# side and the copy of the core's array run (issue 34, item 5: 308 against
# 383 at the entry, was 265; 263 against 319 mid-function, was 203), and
# callopt's unbalanced return (item 8: the way into the buffer now leaves
# the site's return-stack entry for the exit, about 20 instructions more
# than the jump optprobe under TCG, which cannot show what the balance
# saves on hardware). docs/backend.md, "The BPF programs of a kprobe
# event", has the figures.
# One --icount boot per kernel; instruction counts repeat exactly there.
. "$(dirname "$0")/../lib.sh"
OURS=$BUILD/bzImage
STOCK=$BUILD/bzImage-stock
BENCH=$BUILD/kpx-bench
[ -r "$OURS" ] || fail "no $OURS (make kernel)"
[ -x "$BENCH" ] || fail "no $BENCH: run 'make bench-tool' (make check-stock builds it)"
require_stock_kernel
. "$BUILD/sites.env"
out=$BUILD/hit-cost
rm -rf "$out"
mkdir -p "$out"

run() { # NAME KERNEL CONFIGS
	"$KPX_ROOT/scripts/vm/vm-run" --kernel "$2" --icount --smp 1 --timeout 300 -- \
		bash -c "build/kpx-bench hit --func $GETPGID_FUNC --single $GETPGID_SINGLE \
			--multi $GETPGID_MULTI --multi-func $GETPGID_MULTI_FUNC --calls 20000 --reps 5 --warmup 2000 \
			--only $3 > \$KPX_OUT/hit.json" > "$out/$1.log" 2>&1 ||
		{ tail -20 "$out/$1.log"; fail "$1: vm-run failed"; }
	local dir
	dir=$(sed -n 's/^vm-run: .*logs in \(.*\)$/\1/p' "$out/$1.log" | head -1)
	cp "$dir/hit.json" "$out/$1.json" || fail "$1: no hit.json"
}
run stock "$STOCK" none,int3-single,jmp-single,jmp-multi,ftrace-entry
run ours "$OURS" none,int3-single,jmp-single,jmp-multi,callopt-single,callopt-multi,ftrace-entry

# Instructions per hit, as 'make bench' reports them (selftests/benchs/bench-report's
# hit_summary(): the cheapest repetition over the cheapest interleaved
# no-probe baseline, per hit); the hits per call must be exactly 1 in every
# repetition, and the mechanism the one the configuration asked for.
cost() { # NAME CONFIG
	python3 - "$KPX_ROOT/selftests/benchs/bench-report" "$out/$1.json" "$2" <<'PY'
import importlib.machinery, json, sys
report = importlib.machinery.SourceFileLoader("bench_report", sys.argv[1]).load_module()
d = json.load(open(sys.argv[2]))
raw = next(c for c in d["configs"] if c["id"] == sys.argv[3])
c = report.hit_summary(d)["configs"][sys.argv[3]]
if c["mechanism"] != c["want"]:
    print("mechanism %s, want %s" % (c["mechanism"], c["want"]))
elif set(raw["hits_per_call"]) != {1}:
    print("hits per call %s" % raw["hits_per_call"])
else:
    print(round(c["min"]))
PY
}
declare -A c
for k in stock:int3-single stock:jmp-single stock:jmp-multi stock:ftrace-entry \
	ours:int3-single ours:jmp-single ours:jmp-multi ours:callopt-single ours:callopt-multi ours:ftrace-entry; do
	v=$(cost "${k%%:*}" "${k#*:}")
	assert_match "$v" '^[0-9]+$' "instructions per hit, $k"
	c[$k]=$v
done
printf '# %-16s %8s %8s\n' site stock ours
printf '# %-16s %8s %8s\n' entry "${c[stock:ftrace-entry]}" "${c[ours:ftrace-entry]}"
printf '# %-16s %8s %8s (our jmp %s, int3 %s)\n' single-insn "${c[stock:jmp-single]}" \
	"${c[ours:callopt-single]}" "${c[ours:jmp-single]}" "${c[ours:int3-single]}"
printf '# %-16s %8s %8s (our jmp %s)\n' multi-insn "${c[stock:jmp-multi]}" \
	"${c[ours:callopt-multi]}" "${c[ours:jmp-multi]}"

at_most() { # VALUE LIMIT-IN-HUNDREDTHS OF WHAT
	[ $(( $1 * 100 )) -le $(( $2 * $3 )) ] ||
		fail "$4: $1 instructions per hit, more than 0.$2 x $3"
	note "$4: $1 <= 0.$2 x $3 ($(awk -v a="$1" -v b="$3" 'BEGIN { printf "%.3f", a / b }')x)"
}
at_most "${c[ours:ftrace-entry]}" 85 "${c[stock:ftrace-entry]}" "entry, ours vs stock kprobe-on-ftrace"
at_most "${c[ours:callopt-single]}" 85 "${c[stock:jmp-single]}" "single-insn site, callopt vs stock jmp optprobe"
at_most "${c[ours:callopt-multi]}" 85 "${c[stock:jmp-multi]}" "multi-insn site, callopt vs stock jmp optprobe"
for k in single multi; do
	[ "${c[ours:callopt-$k]}" -le $(( ${c[ours:jmp-$k]} + 25 )) ] ||
		fail "callopt ${c[ours:callopt-$k]} > jmp optprobe ${c[ours:jmp-$k]} + 25 in our kernel ($k-insn site)"
	note "$k-insn site: callopt ${c[ours:callopt-$k]}, our jmp optprobe ${c[ours:jmp-$k]}"
done
[ "${c[ours:int3-single]}" -gt $(( 2 * ${c[ours:callopt-single]} )) ] ||
	fail "int3 ${c[ours:int3-single]} is not well above callopt ${c[ours:callopt-single]}"
echo "PASS: per-hit instructions, entry ${c[ours:ftrace-entry]} vs ${c[stock:ftrace-entry]}, mid ${c[ours:callopt-single]} vs ${c[stock:jmp-single]} (stock)"
