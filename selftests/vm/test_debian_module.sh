#!/usr/bin/env bash
# Probes on a real module of Debian's build: dummy.ko, built from Debian's
# config by scripts/build/kernel-debian (build/real-modules-debian-*; other
# kernels have none, and the test skips). UDP packets sent out of a dummy
# device (static neighbour, so every send is one dummy_xmit() call) hit
# probes at dummy_xmit's entry (ftrace) and at an instruction boundary
# inside it (the first one after the fentry call that is 5 bytes or longer
# and not a branch, from objdump of the .ko):
#  1. single links at both: hit; the module is unloaded while they are
#     armed, their probes become [GONE] (class disarmed in bpf_link_info,
#     mechanism gone), kpctl detaches cleanly; twice (load, probe, unload
#     again);
#  2. one kprobe_multi link over both (entry and offset): hit; while it is
#     attached the module cannot go (the link holds a reference); after the
#     detach it unloads at once.
. "$(dirname "$0")/../lib.sh"
MOD=$BUILD/real-modules${SFX}/dummy.ko
[ -r "$MOD" ] || skip "no $MOD: only the debian-* builds have Debian's modules (scripts/build/kernel-debian)"
command -v ip > /dev/null || fail "no ip (iproute2)"
command -v objdump > /dev/null || fail "no objdump (binutils)"
DEV=kpxd0
gen=
cleanup() {
	[ -n "$gen" ] && kill "$gen" 2>/dev/null
	ip link del $DEV 2>/dev/null
	rmmod dummy 2>/dev/null
}
trap cleanup EXIT

# The mid-function site: offset of the first instruction after the fentry
# call that is at least 5 bytes long and no branch.
OFF=$(objdump -d "$MOD" | awk '
	/^[0-9a-f]+ <dummy_xmit>:/ { start = strtonum("0x" $1); f = 1; next }
	f && /^$/ { exit }
	f && /^ *[0-9a-f]+:\t/ {
		split($0, part, "\t")
		if (part[3] == "") next		# continuation of a long instruction
		a = part[1]; gsub(/[ :]/, "", a); addr = strtonum("0x" a)
		n = split(part[2], bytes, " ")
		if (past_fentry && n >= 5 && part[3] !~ /^(call|jmp|j[a-z]+|ret|int3|nop)/) {
			printf "0x%x\n", addr - start; exit
		}
		if (part[3] ~ /^call/) past_fentry = 1
	}')
[ -n "$OFF" ] || fail "no mid-function site in dummy_xmit ($(objdump -d "$MOD" | grep -A20 '<dummy_xmit>:'))"
ENTRY=dummy:dummy_xmit
MID=dummy:dummy_xmit+$OFF
note "sites: $ENTRY, $MID"

load() {
	insmod "$MOD" numdummies=0 || fail "insmod $MOD"
	ip link add $DEV type dummy && ip link set $DEV up &&
		ip addr add 10.231.0.1/24 dev $DEV &&
		ip neigh replace 10.231.0.2 lladdr 02:00:00:00:00:02 dev $DEV nud permanent ||
		fail "setting up $DEV"
	( while :; do echo x > /dev/udp/10.231.0.2/9; done ) 2>/dev/null &
	gen=$!
}
stop_traffic() { kill "$gen" 2>/dev/null; wait "$gen" 2>/dev/null; gen=; }

# 1. Single links, the module unloaded under them.
for round in 1 2; do
	load
	"$KPCTL" -j attach --duration 0 "$ENTRY" "$MID" > /tmp/kpctl-mod.json 2> /tmp/kpctl-mod.err &
	kp=$!
	wait_list 'dummy_xmit' 2
	sleep 3
	stop_traffic
	rmmod dummy || fail "rmmod with armed probes failed (round $round)"
	wait_list '\[GONE\]' 2
	kill -INT $kp
	wait $kp || fail "kpctl failed after the module went: $(cat /tmp/kpctl-mod.err)"
	json=$(cat /tmp/kpctl-mod.json)
	note "round $round: $(jq -c '[.probes[] | {spec, mechanism_at_attach, mechanism, probe, hits}]' <<< "$json")"
	for i in 0 1; do
		assert_num "$(json_int "$json" ".probes[$i].hits")" '>' 0 "hits at probe $i (round $round)"
		# bpf_link_info's class of a probe whose module went is disarmed, and
		# debugfs's [GONE] makes it gone (debugfs alone on a stock kernel).
		assert_eq "$(json_str "$json" ".probes[$i].mechanism")" gone "probe $i after rmmod (round $round)"
		assert_eq "$(json_str "$json" ".probes[$i].probe")" disarmed "class of probe $i after rmmod (round $round)"
		assert_eq "$(json_str "$json" ".probes[$i].mechanism_source")" \
			"$(stock_kernel && echo debugfs || echo link_info)" "source of probe $i after rmmod (round $round)"
	done
	assert_eq "$(json_str "$json" .probes[0].mechanism_at_attach)" ftrace "mechanism at the entry (round $round)"
	assert_match "$(json_str "$json" .probes[1].mechanism_at_attach)" '^(callopt|jmpopt|pending|int3)$' \
		"mechanism inside dummy_xmit (round $round)"
	assert_no_kprobes
done

# 2. One kprobe_multi link over the entry and the offset; the module is
# held while it is attached.
load
"$KPCTL" -j attach --multi --duration 0 "$ENTRY" "$MID" > /tmp/kpctl-mod.json 2> /tmp/kpctl-mod.err &
kp=$!
for _ in $(seq 100); do
	grep -q dummy_xmit /sys/kernel/tracing/enabled_functions 2>/dev/null && break
	sleep 0.1
done
sleep 3
if rmmod dummy 2> /tmp/rmmod.err; then
	fail "rmmod succeeded while a kprobe_multi link holds dummy"
fi
note "rmmod while the kprobe_multi link is attached: $(cat /tmp/rmmod.err)"
stop_traffic
kill -INT $kp
wait $kp || fail "kpctl --multi: $(cat /tmp/kpctl-mod.err)"
json=$(cat /tmp/kpctl-mod.json)
note "multi: $(jq -c '[.probes[] | {spec, mechanism, hits}]' <<< "$json")"
for i in 0 1; do
	assert_num "$(json_int "$json" ".probes[$i].hits")" '>' 0 "multi: hits at address $i"
done
ip link del $DEV || fail "ip link del $DEV"
rmmod dummy || fail "rmmod right after the kprobe_multi link's detach"
assert_no_kprobes
