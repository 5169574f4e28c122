#!/usr/bin/env bash
# BPF kprobes hit in NMI context: a VM with 4 vCPUs loads kpx_nmi.ko, whose
# NMI handler alone calls kpx_nmi_target(), and attaches a BPF kprobe at its
# movabs (a callopt site) while this script injects NMIs into all vCPUs
# through QEMU's monitor ("nmi", 50 ms apart; QEMU raises LINT1 on every
# vCPU, which Linux unmasks on all of them only with apic_extnmi=all, on the
# boot CPU alone otherwise), so that NMI hits on several CPUs run through
# the site at the same time. Passes for callopt, the stock
# jump optimization and int3 (selftests/host/callopt-nmi-guest.sh, which
# explains why hits == calls holds exactly) must count every call as a hit,
# with nothing missed, and the kernel log must stay clean (vm-run exit 126
# otherwise) with no NMI reported as unknown.
. "$(dirname "$0")/../lib.sh"
command -v python3 >/dev/null || skip "python3 missing (make deps)"
[ -r "$MODDIR/kpx_nmi.ko" ] || fail "no $MODDIR/kpx_nmi.ko (make modules)"
tmp=$(mktemp -d /tmp/kpx-nmi.XXXXXX)
inj=
cleanup() {
	[ -n "$inj" ] && kill "$inj" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
sock=$tmp/monitor.sock
log=$BUILD/callopt-nmi.log

"$KPX_ROOT/scripts/vm/vm-run" --smp 4 --monitor "$sock" --append apic_extnmi=all --timeout 900 -- \
	selftests/host/callopt-nmi-guest.sh > "$log" 2>&1 &
vm=$!

# The injector: finds the run folder in vm-run's first line, waits for the
# guest's nmi-ready, then sends "nmi" (an NMI to every vCPU), waits for the
# monitor's prompt and sleeps 50 ms, until the guest writes nmi-done or the
# VM is gone. Prints how many it sent.
python3 - "$sock" "$log" "$vm" > "$tmp/injected" 2> "$tmp/inject.err" <<'EOF' &
import os, re, socket, sys, time

sock_path, log, vm = sys.argv[1], sys.argv[2], int(sys.argv[3])

def alive():
    try:
        os.kill(vm, 0)
        return True
    except ProcessLookupError:
        return False

out = None
while out is None:
    if not alive():
        sys.exit("vm-run ended before it named its run folder")
    with open(log, errors="replace") as f:
        m = re.search(r"^vm-run: .* logs in (\S+)$", f.read(), re.M)
    if m:
        out = m.group(1)
    else:
        time.sleep(0.2)
ready, done = os.path.join(out, "nmi-ready"), os.path.join(out, "nmi-done")
while not os.path.exists(ready):
    if not alive() or os.path.exists(done):
        print(0)
        sys.exit("the guest never became ready")
    time.sleep(0.1)

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sock_path)
s.settimeout(30)

def prompt():
    buf = b""
    while not buf.endswith(b"(qemu) "):
        data = s.recv(4096)
        if not data:
            raise EOFError("monitor closed")
        buf += data
    return buf

sent = 0
try:
    prompt()
    while alive() and not os.path.exists(done):
        s.sendall(b"nmi\n")
        reply = prompt()
        if b"rror" in reply:
            sys.exit("monitor: " + reply.decode(errors="replace"))
        sent += 1
        time.sleep(0.05)
except (OSError, EOFError) as e:
    print("injector stopped: %s" % e, file=sys.stderr)
print(sent)
EOF
inj=$!

wait $vm
rc=$?
wait $inj
irc=$?
inj=
run=$(sed -n 's/^vm-run: .* logs in \(\S*\)$/\1/p' "$log" | head -n1)
cat "$log"
injected=$(tail -n1 "$tmp/injected")
note "vm-run exit $rc; logs in $run"
note "NMIs injected: ${injected:-?} monitor commands, each to 4 vCPUs; injector: $(cat "$tmp/inject.err")"
[ -f "$run/nmi-result.json" ] && note "per pass: $(cat "$run/nmi-result.json")"
[ -f "$run/nmi-handled" ] && note "NMIs handled by kpx_nmi: $(cat "$run/nmi-handled")"
case "$rc" in
0) ;;
126) fail "kernel splat in the VM (see above)" ;;
124) fail "VM timed out" ;;
*) fail "guest test failed (vm-run exit $rc)" ;;
esac
[ "$irc" = 0 ] || fail "the NMI injector failed: $(cat "$tmp/inject.err")"
[ "${injected:-0}" -gt 0 ] || fail "no NMI injected"
# The handler claims every injected NMI, also between the passes.
if grep -q 'NMI received for unknown reason' "$run/kmsg.log" "$run/console.log"; then
	fail "the kernel reported unknown NMIs: $(grep -h -m3 'unknown reason' "$run/kmsg.log")"
fi
echo "NMI test passed: ${injected} NMI commands, $(cat "$run/nmi-handled") NMIs handled; $(cat "$run/nmi-result.json")"
