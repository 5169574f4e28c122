#!/usr/bin/env bash
# Call-optimized kprobes (callopt): a single-instruction site of at least 5
# bytes is call-optimized before the attach returns, counts every hit exactly,
# shares its site with other probes, and falls back as the knobs say.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
SITE="$GETPGID_FUNC+$GETPGID_SINGLE"
CALLOPT=$KNOB_CALLOPT
OPTIMIZE=/proc/sys/debug/kprobes-optimization
[ -e $CALLOPT ] || fail "no $CALLOPT: this kernel has no callopt"
assert_eq "$(knob $CALLOPT)" 1 "callopt is on by default"
restore() { echo 1 > $CALLOPT; echo 1 > $OPTIMIZE; }
trap restore EXIT

field() { jq -r "$1" <<< "$json"; }

# Optimized when the attach returns: no --wait-opt, and the mechanism comes
# from bpf_link_info, read right after the attach (pending = not yet).
json=$("$KPCTL" -j attach --trigger 1000 "$SITE") || fail "attach: $json"
note "$json"
assert_eq "$(field '.probes[0].mechanism_source')" link_info "mechanism source"
assert_eq "$(field '.probes[0].mechanism_at_attach')" callopt "mechanism at $SITE right after attach"
assert_eq "$(field '.probes[0].mechanism')" callopt "mechanism at $SITE"
assert_eq "$(field '.probes[0].hits')" 1000 "hits"
assert_eq "$(field '.probes[0].missed')" 0 "missed"
assert_no_kprobes

# Two probes at one site (an aggregated probe): each sees every hit.
json=$("$KPCTL" -j attach --trigger 500 --wait-opt 1 "$SITE" "$SITE") || fail "attach: $json"
for i in 0 1; do
	assert_eq "$(field ".probes[$i].mechanism")" callopt "mechanism of probe $i"
	assert_eq "$(field ".probes[$i].hits")" 500 "hits of probe $i"
done
assert_no_kprobes

# A multi-instruction site is call-optimized too, after an RCU-tasks wait
# that holds no lock (int3 meanwhile).
json=$("$KPCTL" -j attach --trigger 10 --wait-opt 30 "$GETPGID_MULTI_FUNC+$GETPGID_MULTI") || fail "attach: $json"
assert_eq "$(field '.probes[0].mechanism')" callopt "mechanism at the multi-instruction site"
assert_eq "$(field '.probes[0].hits')" 10 "hits at the multi-instruction site"

# kprobes/callopt off: new probes get the stock jump optimization.
echo 0 > $CALLOPT
json=$("$KPCTL" -j attach --trigger 100 --wait-opt 20 "$SITE") || fail "attach: $json"
assert_eq "$(field '.probes[0].mechanism')" jmpopt "mechanism with callopt off"
assert_eq "$(field '.probes[0].hits')" 100 "hits with callopt off"
echo 1 > $CALLOPT

# debug.kprobes-optimization=0: int3.
echo 0 > $OPTIMIZE
json=$("$KPCTL" -j attach --trigger 100 --wait-opt 1 "$SITE") || fail "attach: $json"
assert_eq "$(field '.probes[0].mechanism')" int3 "mechanism with optimization off"
assert_eq "$(field '.probes[0].hits')" 100 "hits with optimization off"
echo 1 > $OPTIMIZE
assert_no_kprobes

# Toggling optimization while the probe is hit from another process:
# unoptimizing and re-optimizing a callopt site loses and doubles no hit.
N=3000
"$KPCTL" -j attach --duration 0 --wait-opt 1 "$SITE" > /tmp/kpctl.json &
kp=$!
for _ in $(seq 50); do
	grep -q CALLOPT $KPROBES_LIST 2>/dev/null && break
	sleep 0.1
done
grep -q CALLOPT $KPROBES_LIST || fail "probe not call-optimized: $(cat $KPROBES_LIST)"
python3 -c "import os
for i in range($N): os.getpgid(0)" &
py=$!
for _ in $(seq 10); do
	echo 0 > $OPTIMIZE; sleep 0.05; echo 1 > $OPTIMIZE; sleep 0.05
done
wait $py || fail "trigger failed"
grep -q CALLOPT $KPROBES_LIST || fail "not call-optimized again: $(cat $KPROBES_LIST)"
kill -INT $kp
wait $kp || fail "kpctl failed"
json=$(cat /tmp/kpctl.json)
note "$json"
assert_eq "$(field '.probes[0].hits')" $N "hits while toggling optimization"
assert_no_kprobes
