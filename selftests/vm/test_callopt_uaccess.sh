#!/usr/bin/env bash
# A callopt probe inside a user-access region, between the STAC and CLAC of
# filldir64 (getdents64 writes each directory entry to user memory there):
# - the handler sees EFLAGS.AC set in pt_regs->flags, as at int3;
# - the task still has AC when it returns to the function, so the user
#   writes after the probe do not fault (SMAP): ls keeps listing, with no
#   oops (vm-run fails the run on any splat), and every hit is counted.
# The handlers themselves run with AC clear (callopt_entry does CLAC), as
# on the int3 and jump-optimized paths.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
grep -qw smap /proc/cpuinfo || skip "this CPU has no SMAP"
[ -n "${UACCESS_CANDIDATES:-}" ] || fail "no UACCESS_CANDIDATES in $SITES"

lister() { while :; do ls -a / /usr /etc /usr/bin > /dev/null || echo "ls failed" >> /tmp/uaccess.err; done; }
rm -f /tmp/uaccess.err
lister &
loop=$!
trap 'kill $loop 2>/dev/null; wait $loop 2>/dev/null' EXIT

site=""
for off in $UACCESS_CANDIDATES; do
	json=$("$KPCTL" -j attach --wait-opt 5 --duration 2 "$UACCESS_FUNC+$off") ||
		fail "attach $UACCESS_FUNC+$off: $json"
	mech=$(jq -r .probes[0].mechanism <<< "$json")
	hits=$(jq -r .probes[0].hits <<< "$json")
	note "$UACCESS_FUNC+$off: $mech, $hits hits in 2 s"
	assert_match "$hits" '^[1-9][0-9]*$' "hits at $UACCESS_FUNC+$off ($mech)"
	if [ "$mech" = callopt ]; then
		site=$off
		break
	fi
done
[ -n "$site" ] || fail "none of $UACCESS_CANDIDATES in $UACCESS_FUNC is call-optimized"
assert_no_kprobes

# pt_regs->flags has AC (bit 18), at callopt and at int3 alike.
for opt in 1 0; do
	echo $opt > /proc/sys/debug/kprobes-optimization
	json=$("$KPCTL" -j regs --timeout 20 --wait-opt 5 "$UACCESS_FUNC+$site")
	rc=$?
	echo 1 > /proc/sys/debug/kprobes-optimization
	[ $rc = 0 ] || fail "regs $UACCESS_FUNC+$site (optimization $opt): $json"
	mech=$(jq -r .captures[0].mechanism <<< "$json")
	flags=$(jq -r .captures[0].regs.flags <<< "$json")
	note "optimization $opt: $mech, flags $flags"
	[ $opt = 1 ] && assert_eq "$mech" callopt "mechanism with optimization on"
	[ $opt = 0 ] && assert_eq "$mech" int3 "mechanism with optimization off"
	[ $(( flags & 0x40000 )) != 0 ] || fail "EFLAGS.AC clear in pt_regs at $UACCESS_FUNC+$site ($mech): $flags"
done
assert_no_kprobes

# Many hits, then the lister must still be alive and have no failure.
json=$("$KPCTL" -j attach --wait-opt 5 --duration 5 "$UACCESS_FUNC+$site") || fail "attach: $json"
note "5 s: $(jq -c '.probes[0] | {mechanism, hits, missed}' <<< "$json")"
assert_eq "$(jq -r .probes[0].mechanism <<< "$json")" callopt "mechanism"
assert_match "$(jq -r .probes[0].hits <<< "$json")" '^[1-9][0-9]{2,}$' "hundreds of hits"
kill -0 $loop 2>/dev/null || fail "the ls loop died"
[ ! -s /tmp/uaccess.err ] || fail "ls failed while probed: $(head -3 /tmp/uaccess.err)"
assert_no_kprobes
echo "PASS: callopt inside a STAC region at $UACCESS_FUNC+$site keeps EFLAGS.AC"
