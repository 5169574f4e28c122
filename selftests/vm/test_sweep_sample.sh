#!/usr/bin/env bash
# The sweep's sample (docs/stress.md): a BPF kprobe link at each of about
# 2100 sites (every instruction class vmlinux has, every boundary of
# handle_softirqs, of the getpgid system call and of the functions where
# the sweep found defects, controls whose outcome is known, and an even
# spread of make sweep's set), 200 at a time, while the sweep's workload
# runs on all vCPUs and checks its own results.
#
# Passes when every site of the list has a complete result (attached or
# refused, nothing failed: the probe landed at the site, every run saw
# pt_regs ip == site + 1, none ran after detach + grace period, the
# mechanism is known), the controls and reference sites got their known
# outcomes, the workload's results held, and the kernel log since this test
# started has no splat, preempt-count or "huh" message.
#
# Up to 4800 s: on Debian's own PREEMPT_RT image the stock paths are slow
# under TCG. In the debian-rt-stock rows of 2026-12-06 and 2026-12-07 a
# batch of 190 probes took 35 to 200 s to attach and some 260 s to close
# (each close waits for grace periods, about 1.3 s apiece there): 350 to
# 470 s a batch, 11 batches (it was stopped at 900 s, then at 2400 s).
# kpx-timeout: 4800
. "$(dirname "$0")/../lib.sh"
LIST=${KPX_SWEEP_SAMPLE:-$BUILD/sweep-sample$SFX.tsv}
TOOL=$BUILD/kpx-sweep
[ -x "$TOOL" ] || fail "no $TOOL (make sweep-tool)"
[ -r "$LIST" ] || fail "no $LIST (make sweep-sample${SFX})"
# The reference sites: getpgid()'s fentry site and its first single-instruction
# site (the list's header names them, as scripts/sites/gen-sites picks them).
hdr() { sed -n "s/^# $1 //p" "$LIST" | head -1; }
GETPGID_FUNC=$(hdr ref-func)
GETPGID_FENTRY=$(hdr ref-fentry)
GETPGID_SINGLE=$(hdr ref-single)
[ -n "$GETPGID_FUNC" ] && [ -n "$GETPGID_FENTRY" ] && [ -n "$GETPGID_SINGLE" ] ||
	fail "$LIST names no reference sites (ref-func, ref-fentry, ref-single)"
out=${KPX_OUT:-/tmp}/sweep-sample
mkdir -p "$out" || fail "cannot create $out"
marker="kpx-sweep-sample-$$-$(date +%s%N)"
echo "<6>$marker: start" > /dev/kmsg

"$TOOL" --sites "$LIST" --batch 200 --out "$out/sites.jsonl" --summary "$out/summary.json" \
	--progress "$out/progress" > "$out/stdout" 2>&1
rc=$?
cat "$out/stdout"
sum=$out/summary.json
[ -s "$sum" ] || fail "no summary (kpx-sweep exited $rc)"

# A field of the summary that must be a number (a missing field is null,
# and null compares as less than any number in jq).
num() { # JQ-PATH
	local v
	v=$(jq -e "$1 | if type == \"number\" then . else error(\"not a number\") end" "$sum" 2>/dev/null) ||
		fail "summary field $1 is missing or not a number"
	echo "$v"
}
listed=$(grep -vc '^#' "$LIST")
assert_eq "$(num .sites)" "$listed" "sites in the summary"
assert_eq "$(num .failed)" 0 "failed sites"
assert_eq "$(num .late)" 0 "sites whose program ran after detach + grace period"
assert_eq "$(num .bad_cookie)" 0 "runs with a cookie out of range"
assert_eq "$(num .workload_failed)" 0 "workload workers that failed"
assert_eq "$(num .live_read_errors)" 0 "sites whose live text could not be read"
assert_eq "$(( $(num .attached) + $(num .refused) ))" "$listed" "attached + refused"
assert_eq "$(jq -r '.ok' "$sum")" true "summary ok"
assert_eq "$rc" 0 "kpx-sweep exit status"

# Every worker ran, checked and found nothing wrong.
bad=$(jq -r '.workload[] | select((.ok != true) or (.errors != 0) or ((.iters | type) != "number")
	or (.iters < 1) or (.checks < 1)) | "\(.name): \(.errors) errors, exit \(.exit): \(.first_error)"' "$sum")
[ -z "$bad" ] || fail "workload: $bad"
assert_eq "$(jq '.workload | length' "$sum")" 11 "workload workers"

# One complete object per listed site, nothing else.
j=$out/sites.jsonl
assert_eq "$(wc -l < "$j")" "$listed" "site objects"
assert_eq "$(jq -r '.addr' "$j" | sort | uniq | wc -l)" "$listed" "distinct sites"
# The list has link-time addresses; kpx-sweep moved them by the KASLR
# offset of this boot (0 with nokaslr: vm-run's default; vm-run --kaslr on
# the debian-amd64-qemu64 row).
kaslr=$(num .kaslr_offset)
case " $(cat /proc/cmdline) " in
*" nokaslr "*) assert_eq "$kaslr" 0 "KASLR offset with nokaslr" ;;
*) note "KASLR offset of this boot: $(printf '%#x' "$kaslr")" ;;
esac
diff <(grep -v '^#' "$LIST" | cut -f1 | while read -r a; do printf '0x%x\n' $(( 0x$a + kaslr )); done | sort) \
	<(jq -r '.addr' "$j" | sort) > /dev/null ||
	fail "the sites in the results are not the listed ones (moved by the KASLR offset $kaslr)"
incomplete=$(jq -c 'select(
	(.addr | type) != "string" or (.site | type) != "string" or (.class | type) != "string" or
	(.group | type) != "string" or (.bytes | type) != "string" or (.live | type) != "string" or
	(.live_same | type) != "boolean" or (.batch | type) != "number" or
	(.result | type) != "string" or (.errno | type) != "number" or (.mechanism | type) != "string" or
	(.mech_source | type) != "string" or (.hits | type) != "number" or (.missed | type) != "number" or
	(.link_addr | type) != "string" or (.attach_ms | type) != "number" or
	(.result | IN("attached", "refused") | not) or
	(.result == "attached" and (.mechanism | IN("callopt", "jmpopt", "int3", "ftrace", "pending") | not)) or
	(.result == "refused" and (.mechanism != "refused" or .errno == 0)) or
	(.batch < 0)) | .site' "$j" | head -5)
[ -z "$incomplete" ] || fail "incomplete or unexpected site results: $incomplete"

# Where the mechanism came from: the link info on our kernels, debugfs on stock.
if stock_kernel; then want_src=debugfs; else want_src=link_info; fi
other=$(jq -r "select(.result == \"attached\" and .mech_source != \"$want_src\") | .site" "$j" | head -3)
[ -z "$other" ] || fail "mechanism not from $want_src: $other"

count() { jq -s "[.[] | select($1)] | length" "$j"; }
# Stock has no callopt: its single-instruction sites are jmpopt.
mechs="callopt int3 ftrace"
! stock_kernel || mechs="jmpopt int3 ftrace"
for m in $mechs; do
	n=$(count ".mechanism == \"$m\"")
	[ "$n" -gt 0 ] || fail "no site got $m"
	note "$m: $n sites"
done
note "jmpopt: $(count '.mechanism == "jmpopt"'), pending: $(count '.mechanism == "pending"'), refused: $(count '.result == "refused"'), hit: $(count '.hits > 0')"
# Every instruction class of the list was tried: attached or refused.
classes=$(grep -v '^#' "$LIST" | awk -F'\t' '$5 !~ /^ctl-/ { print $6 }' | sort -u | wc -l)
tried=$(jq -r 'select(.group | startswith("ctl-") | not) | .class' "$j" | sort -u | wc -l)
assert_eq "$tried" "$classes" "instruction classes tried"

# Controls: what the kernel must do there.
site() { # GROUP FIELD
	jq -r "select(.group == \"$1\") | $2" "$j" | head -1
}
for g in ctl-notrace ctl-blacklist ctl-noinstr; do
	assert_eq "$(site $g .result)/$(site $g .error)" refused/EINVAL "$g ($(site $g .site))"
done
assert_eq "$(site ctl-midinsn .result)/$(site ctl-midinsn .error)" refused/EILSEQ \
	"inside an instruction ($(site ctl-midinsn .site))"
func_addr=$(jq -r "select(.site == \"$GETPGID_FUNC+0x0\") | .addr" "$j")
[ -n "$func_addr" ] || fail "no result for $GETPGID_FUNC+0x0"
fentry=$(printf '0x%x' $(( func_addr + GETPGID_FENTRY )))
# Inside the fentry call: no instruction boundary, on stock as on ours.
assert_eq "$(site ctl-fentry-inner .result)/$(site ctl-fentry-inner .error)" refused/EILSEQ \
	"inside the fentry call ($(site ctl-fentry-inner .site))"
if [ "$GETPGID_FENTRY" = 0x4 ]; then
	assert_eq "$(site ctl-endbr .result)/$(site ctl-endbr .mechanism)" attached/ftrace "+0 of an ENDBR function"
	assert_eq "$(site ctl-endbr .link_addr)" "$fentry" "+0 of an ENDBR function: moved to +4"
fi

# Reference sites that the workload's getpgid loop passes on every call.
ref() { # OFFSET FIELD
	jq -r "select(.site == \"$GETPGID_FUNC+$(printf '0x%x' $(( $1 )))\") | $2" "$j" | head -1
}
assert_eq "$(ref "$GETPGID_FENTRY" .mechanism)" ftrace "$GETPGID_FUNC+$GETPGID_FENTRY"
[ "$(ref "$GETPGID_FENTRY" .hits)" -gt 0 ] || fail "$GETPGID_FUNC+$GETPGID_FENTRY never hit"
if stock_kernel; then want=jmpopt; else want=callopt; fi
assert_eq "$(ref "$GETPGID_SINGLE" .mechanism)" $want "$GETPGID_FUNC+$GETPGID_SINGLE"
[ "$(ref "$GETPGID_SINGLE" .hits)" -gt 0 ] || fail "$GETPGID_FUNC+$GETPGID_SINGLE never hit"
# handle_softirqs: every boundary was tried and the softirq ran through probes
# (under a clone's name where gcc left only a clone: PREEMPT_RT kernels have
# handle_softirqs.constprop.0).
hs_func='(.func == "handle_softirqs" or (.func | startswith("handle_softirqs.")))'
hs=$(count "$hs_func")
[ "$hs" -gt 50 ] || fail "only $hs handle_softirqs sites"
[ "$(count "$hs_func and .hits > 0")" -gt 0 ] || fail "no handle_softirqs site hit"

# Regression cases of what the sweep found (scripts/sites/sweep-sites, ALWAYS):
# the retpoline call in do_dentry_open on int3 (its emulation returned into
# the instruction), ktime_add_safe's cmovl before the ret of its return
# thunk (the ret skipped callopt's preempt_enable). Both must be tried and
# hit; what went wrong there shows in the kernel log (below) or kills the VM.
cs=$(jq -r 'select(.func == "do_dentry_open" and .class == "cs e8") | "\(.result) \(.hits)"' "$j" | head -1)
[ -n "$cs" ] || fail "no do_dentry_open cs-call site in the results"
[ "${cs%% *}" = attached ] && [ "${cs##* }" -gt 0 ] || fail "do_dentry_open cs call: $cs (want attached and hit)"
[ "$(count '.func == "ktime_add_safe"')" -gt 5 ] || fail "ktime_add_safe: not every boundary tried"
[ "$(count '.func == "ktime_add_safe" and .hits > 0')" -gt 0 ] || fail "no ktime_add_safe site hit"

# The kernel log since the start of this test.
log=$(dmesg | sed -n "/$marker: start/,\$p")
if [ -z "$log" ]; then
	# Pushed out of the ring buffer by later messages: all of it, then.
	note "the start marker is no longer in the kernel log: checking all of it"
	log=$(dmesg)
fi
bad=$(grep -E 'huh, entered softirq|preempt[_ ]count|scheduling while atomic|BUG:|WARNING:|Oops|invalid opcode|general protection|detected stall|soft lockup|Call Trace' <<< "$log" | grep -v "$marker" | head -5)
[ -z "$bad" ] || fail "kernel log: $bad"
note "$(jq -r '"\(.sites) sites in \(.seconds) s: \(.attached) attached, \(.refused) refused"' "$sum")"
assert_no_kprobes
