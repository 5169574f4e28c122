#!/usr/bin/env bash
# The guest half of host/test_callopt_nmi (run there by scripts/vm/vm-run).
#
# kpx_nmi.ko calls kpx_nmi_target() from an NMI handler, and only there; the
# host injects NMIs through QEMU's monitor from the moment this script
# writes $KPX_OUT/nmi-ready until it writes $KPX_OUT/nmi-done. For each
# mechanism (callopt, then the stock jump optimization, then int3) a BPF
# kprobe (kpctl attach) counts the hits at the movabs in kpx_nmi_target()
# while the module counts the calls, and the two must be equal.
#
# Exact accounting: the handler calls the target only while the module is
# armed, and it is armed only inside the interval in which the BPF program
# is attached and the probe is enabled:
#   1. kpctl attaches; we wait until its BPF link exists (the program is in
#      the kprobe event's program array once the link fd is installed) and
#      the probe has the mechanism under test;
#   2. calls0 = calls; arm;
#   3. wait for enough calls; disarm. Writing "armed" returns only after
#      synchronize_rcu(), which waits for every NMI handler in flight (they
#      are RCU read-side critical sections), so no call is in progress and
#      none can start: calls1 = calls is final for this interval;
#   4. kpctl gets SIGINT: reads the BPF counters, then detaches.
# Every call counted in calls1 - calls0 ran entirely between 1 and 4, so the
# probe was hit exactly that often: hits == calls1 - calls0, not a bound.
# NMIs between the passes are claimed by the handler without a call.
. "$(dirname "$0")/../lib.sh"
P=/sys/module/kpx_nmi/parameters
CALLOPT=$KNOB_CALLOPT
OPT=/proc/sys/debug/kprobes-optimization
WANT=${KPX_NMI_WANT:-200}	# target calls per pass (NMIs on all vCPUs together)
MIN_HITS=20
PASS_SECS=120			# give up waiting for WANT after this long

# Whatever happens, the host stops injecting.
trap 'echo > "$KPX_OUT/nmi-done"' EXIT
[ -w $CALLOPT ] || fail "no $CALLOPT: not a kernel with callopt"
[ -r "$MODDIR/kpx_nmi.ko" ] || fail "no $MODDIR/kpx_nmi.ko (make modules)"
# The movabs's offset: NMI_SINGLE of scripts/sites/gen-module-sites.
NMI_SINGLE=
. "$MODDIR/sites.env"
[ -n "$NMI_SINGLE" ] || fail "no NMI_SINGLE in $MODDIR/sites.env (make modules)"
SPEC="kpx_nmi:kpx_nmi_target+$NMI_SINGLE"
insmod "$MODDIR/kpx_nmi.ko" || fail "insmod kpx_nmi"
echo > "$KPX_OUT/nmi-ready"

# The host is injecting: NMIs arrive.
for _ in $(seq $((PASS_SECS * 10))); do
	[ "$(cat $P/nmis)" -gt 0 ] && break
	sleep 0.1
done
[ "$(cat $P/nmis)" -gt 0 ] || fail "no NMI arrived within ${PASS_SECS}s (is the host injecting?)"
note "NMIs arrive (cpus: $(nproc)); probe $SPEC"

results=()
run_pass() { # MECHANISM: callopt | jmpopt | int3
	local mech=$1 kp line linked=0 ok=0 calls0 calls1 nmis0 nmis1 hits missed got t0
	case $mech in
	callopt) echo 1 > $CALLOPT; echo 1 > $OPT ;;
	jmpopt) echo 0 > $CALLOPT; echo 1 > $OPT ;;
	int3) echo 1 > $CALLOPT; echo 0 > $OPT ;;
	esac
	"$KPCTL" -j attach --duration 0 "$SPEC" > /tmp/nmi-$mech.json 2> /tmp/nmi-$mech.err &
	kp=$!
	# 1. The program is attached and the probe has its mechanism.
	for _ in $(seq 600); do
		kill -0 $kp 2>/dev/null || break
		line=$(grep 'kpx_nmi_target' $KPROBES_LIST 2>/dev/null)
		grep -qs 'link_type:.*perf' /proc/$kp/fdinfo/* && linked=1
		if [ "$linked" = 1 ] && [ -n "$line" ] && [[ $line != *DISABLED* ]]; then
			case $mech in
			callopt) [[ $line == *'[CALLOPT]'* ]] && ok=1 ;;
			jmpopt) [[ $line == *'[OPTIMIZED]'* && $line != *CALLOPT* ]] && ok=1 ;;
			int3) [[ $line != *OPTIMIZED* ]] && ok=1 ;;
			esac
		fi
		[ "$ok" = 1 ] && break
		sleep 0.1
	done
	if [ "$ok" != 1 ]; then
		kill -INT $kp 2>/dev/null; wait $kp
		fail "$mech: probe not attached as $mech within 60s: list '$line', link $linked, kpctl: $(cat /tmp/nmi-$mech.err)"
	fi
	# 2.-3. Armed only while the program counts.
	calls0=$(cat $P/calls) nmis0=$(cat $P/nmis)
	echo 1 > $P/armed
	t0=$SECONDS
	while [ $(( $(cat $P/calls) - calls0 )) -lt "$WANT" ] && [ $((SECONDS - t0)) -lt $PASS_SECS ]; do
		sleep 0.1
	done
	echo 0 > $P/armed
	calls1=$(cat $P/calls) nmis1=$(cat $P/nmis)
	# 4. Counters, then detach.
	kill -INT $kp
	wait $kp || fail "$mech: kpctl failed: $(cat /tmp/nmi-$mech.err)"
	hits=$(jq -r '.probes[0].hits' /tmp/nmi-$mech.json)
	missed=$(jq -r '.probes[0].missed' /tmp/nmi-$mech.json)
	got=$(jq -r '.probes[0].mechanism' /tmp/nmi-$mech.json)
	note "$mech: $((nmis1 - nmis0)) NMIs handled while armed ($((SECONDS - t0))s), $((calls1 - calls0)) calls, $hits BPF hits, $missed missed, kpctl mechanism $got"
	results+=("{\"mechanism\":\"$mech\",\"nmis\":$((nmis1 - nmis0)),\"calls\":$((calls1 - calls0)),\"hits\":$hits,\"missed\":$missed,\"kpctl_mechanism\":\"$got\"}")
	assert_eq "$got" "$mech" "$mech: mechanism kpctl reports"
	assert_eq "$hits" "$((calls1 - calls0))" "$mech: BPF hits vs calls of kpx_nmi_target from NMI"
	assert_eq "$missed" 0 "$mech: missed hits"
	[ "$hits" -ge $MIN_HITS ] || fail "$mech: only $hits hits (want >= $MIN_HITS NMIs through the probe)"
	assert_no_kprobes
}

for mech in callopt jmpopt int3; do
	run_pass $mech
done
echo 1 > $CALLOPT
echo 1 > $OPT
(IFS=,; echo "[${results[*]}]") > "$KPX_OUT/nmi-result.json"

# Stop the host, let the last NMI it sent land, then unload.
echo > "$KPX_OUT/nmi-done"
n=$(cat $P/nmis)
for _ in $(seq 30); do
	sleep 1
	[ "$(cat $P/nmis)" = "$n" ] && break
	n=$(cat $P/nmis)
done
cpus=$(cat $P/cpus)
note "$n NMIs handled by kpx_nmi in all, $(cat $P/calls) calls of kpx_nmi_target, on CPUs $cpus"
# The host sends each NMI to every vCPU (apic_extnmi=all).
if [ "$(nproc)" -gt 1 ] && [ $((cpus & (cpus - 1))) = 0 ]; then
	fail "kpx_nmi_target ran in NMIs on one CPU only (mask $cpus): apic_extnmi=all missing?"
fi
echo "$n" > "$KPX_OUT/nmi-handled"
if dmesg | grep -q 'NMI received for unknown reason'; then
	fail "the kernel saw unknown NMIs while kpx_nmi was loaded: $(dmesg | grep -m3 'unknown reason')"
fi
rmmod kpx_nmi || fail "rmmod kpx_nmi"
