#!/usr/bin/env bash
# bpftool and kprobes: `prog attach PROG kprobe|kretprobe ... pinned PATH` at
# the getpgid function's entry, mid-function and as a kretprobe; the programs
# run (hits per cookie); `link show`, plain and JSON, shows func, offset,
# cookie and, when the kernel reports it, the class of the probe
# (bpf_link_info's perf_event.flags; entry: ftrace, mid-function: optimized,
# [CALLOPT] in debugfs; the key "probe" null on a stock kernel, "mechanism"
# and "full_regs" gone); bad input and an unprivileged user are
# refused with a clear message, leaving no kprobe and no pin; `link detach`
# (our kernels: perf_event links can be detached) removes its kprobe and
# stops its program while the link stays pinned; unpinning removes the
# kprobes.
. "$(dirname "$0")/../lib.sh"
. "$SITES"
F=$GETPGID_FUNC
OBJ=$BUILD/selftests-bpf/bpftool_kprobe.bpf.o
[ -r "$OBJ" ] || fail "$OBJ is missing (make builds it)"
D=/sys/fs/bpf/kpx_bpftool_test
PROG=$D/prog
HITS=$D/maps/hits
N=200

cleanup() { rm -rf "$D"; }
trap cleanup EXIT
cleanup
mkdir -p "$D" || fail "can't create $D on bpffs"
pins() { find "$D" | sort; }
# The kernel may release a kprobe asynchronously after its link goes: allow
# up to 5 s before calling it left behind.
wait_no_kprobes() {
	local _
	for _ in $(seq 50); do
		[ -z "$(cat "$KPROBES_LIST")" ] && return 0
		sleep 0.1
	done
	assert_no_kprobes
}
# REGEX CMD...: CMD fails, says something matching REGEX, and leaves no
# kprobe and no new pin.
refused() {
	local re=$1 before rc
	shift
	before=$(pins)
	out=$("$@" 2>&1)
	rc=$?
	[ "$rc" != 0 ] || fail "'$*' succeeded; output: $out"
	assert_match "$out" "$re" "message of '$*'"
	assert_eq "$(pins)" "$before" "pins after '$*'"
	assert_no_kprobes
}
hits() { # COOKIE
	"$BPFTOOL" -j map lookup pinned "$HITS" key "$1" 0 0 0 | jq -r .formatted.value
}
sym_addr() { # FUNC OFFSET -> lower-case hex address without 0x
	local a
	a=$(awk -v f="$1" '$3 == f { print $1; exit }' /proc/kallsyms)
	printf '%x' $((0x$a + $2))
}

assert_no_kprobes
"$BPFTOOL" prog load "$OBJ" "$PROG" type kprobe pinmaps "$D/maps" ||
	fail "bpftool prog load failed"

# --- bad input: nothing attached, nothing pinned ---------------------------
A=("$BPFTOOL" prog attach pinned "$PROG")
refused "no kernel function 'kpx_no_such_function'" \
	"${A[@]}" kprobe kpx_no_such_function pinned "$D/l"
refused "offset $GETPGID_MIDINSN is not on an instruction boundary" \
	"${A[@]}" kprobe "$F+$GETPGID_MIDINSN" pinned "$D/l"
for f in kprobe_int3_handler do_int3; do
	refused "can't create kprobe at $f: .*blacklisted" \
		"${A[@]}" kprobe "$f" pinned "$D/l"
done
refused "missing 'pinned PATH'" "${A[@]}" kprobe "$F"
refused "missing 'pinned PATH'" "${A[@]}" kretprobe "$F" cookie 3
refused "expected a path after 'pinned'" "${A[@]}" kprobe "$F" pinned
refused "expected kprobe FUNC\[\+OFF\]" "${A[@]}" kprobe
refused "invalid offset" "${A[@]}" kprobe "$F+zz" pinned "$D/l"
refused "invalid offset" "${A[@]}" kprobe "$F+" pinned "$D/l"
refused "missing function name" "${A[@]}" kprobe "+0x4" pinned "$D/l"
refused "kretprobe attaches to a function, not an offset" \
	"${A[@]}" kretprobe "$F+$GETPGID_MID" pinned "$D/l"
refused "invalid cookie 'x'" "${A[@]}" kprobe "$F" cookie x pinned "$D/l"
refused "expected 'cookie' or 'pinned', got: 'bogus'" \
	"${A[@]}" kprobe "$F" bogus pinned "$D/l"
refused "is not on a BPF file system" "${A[@]}" kprobe "$F" pinned /tmp/kpx_link
refused "directory '$D/nodir': No such file" \
	"${A[@]}" kprobe "$F" pinned "$D/nodir/l"
refused "can't pin link at '$D/maps': file exists" \
	"${A[@]}" kprobe "$F" pinned "$D/maps"
# JSON mode: the error is a JSON object.
json=$("$BPFTOOL" -j prog attach pinned "$PROG" kprobe kpx_no_such_function \
	pinned "$D/l" 2>/dev/null) && fail "-j attach to an unknown function succeeded"
assert_match "$(jq -r .error <<< "$json")" "no kernel function" "JSON error"
assert_no_kprobes
# Only kprobe programs: the same code loaded as a tracepoint program.
if "$BPFTOOL" prog load "$OBJ" "$D/tp" type tracepoint 2>/dev/null; then
	refused "is of type tracepoint, a kprobe needs type kprobe" \
		"$BPFTOOL" prog attach pinned "$D/tp" kprobe "$F" pinned "$D/l"
	rm "$D/tp"
else
	note "could not load a tracepoint program; wrong-type check skipped"
fi
# The older syntax (ATTACH_TYPE MAP) still goes its own way.
refused "failed prog attach to map" "${A[@]}" sk_msg_verdict pinned "$HITS"
refused "invalid attach/detach type" "${A[@]}" kprobe_bogus "$F"

# --- unprivileged: refused by the kernel when creating the kprobe ----------
if command -v setpriv > /dev/null; then
	chmod 0666 "$PROG"	# so that the user gets as far as perf_event_open
	refused "can't create kprobe at $F: (Permission denied|Operation not permitted)" \
		setpriv --reuid=65534 --regid=65534 --clear-groups \
		"${A[@]}" kprobe "$F" pinned "$D/l"
	chmod 0600 "$PROG"
	refused "(Permission denied|Operation not permitted)" \
		setpriv --reuid=65534 --regid=65534 --clear-groups \
		"${A[@]}" kprobe "$F" pinned "$D/l"
else
	note "no setpriv: unprivileged attach not checked"
fi

# --- attach at the entry, mid-function, and a kretprobe ---------------------
"${A[@]}" kprobe "$F" cookie 1 pinned "$D/entry" || fail "attach at $F"
"${A[@]}" kprobe "$F+$GETPGID_SINGLE" cookie 2 pinned "$D/mid" || fail "attach at $F+$GETPGID_SINGLE"
"${A[@]}" kretprobe "$F" cookie 3 pinned "$D/ret" || fail "kretprobe at $F"
note "$(cat "$KPROBES_LIST")"
assert_eq "$(wc -l < "$KPROBES_LIST")" 3 "kprobes registered"

perl -e "syscall(121, 0) for 1..$N" || fail "perl getpgid loop"	# 121: getpgid
for c in 1 2 3; do
	h=$(hits $c)
	[ "$h" -ge $N ] 2>/dev/null || fail "cookie $c: $h hits after $N getpgid() calls"
done

"$BPFTOOL" -j link show | jq -e 'type == "array"' > /dev/null ||
	fail "bpftool -j link show is not a JSON array"
# The JSON and plain `link show` of each link, taken once (bpftool is slow
# to start under TCG).
declare -A J P
show() { # LINK
	J[$1]=$("$BPFTOOL" -j link show pinned "$D/$1") ||
		fail "link show pinned $D/$1: ${J[$1]}"
	P[$1]=$("$BPFTOOL" link show pinned "$D/$1") ||
		fail "link show pinned $D/$1 (plain): ${P[$1]}"
}
field() { jq -r "$2" <<< "${J[$1]}"; }
plain() { echo "${P[$1]}"; }
for l in entry mid ret; do
	show $l
	note "$l: ${J[$l]}"
	note "${P[$l]}"
	assert_eq "$(field $l .type)" perf_event "type of $l"
	assert_eq "$(field $l .func)" "$F" "func of $l"
done
assert_eq "$(field entry .offset)" 0 "entry offset"
assert_eq "$(field mid .offset)" $((GETPGID_SINGLE)) "mid offset"
assert_eq "$(field ret .offset)" 0 "kretprobe offset"
assert_eq "$(field entry .retprobe)" false "entry retprobe"
assert_eq "$(field ret .retprobe)" true "kretprobe retprobe"
assert_eq "$(field entry .cookie)" 1 "entry cookie"
assert_eq "$(field mid .cookie)" 2 "mid cookie"

# Plain output: the address (the fentry site for the entry probe), func+off,
# cookie.
entry_addr=$(sym_addr "$F" "$GETPGID_FENTRY")
mid_addr=$(sym_addr "$F" "$GETPGID_SINGLE")
assert_match "$(plain entry)" "kprobe $entry_addr $F  cookie 1" "plain entry"
assert_match "$(plain mid)" "kprobe $mid_addr $F\+$GETPGID_SINGLE  cookie 2" "plain mid"
assert_match "$(plain ret)" "kretprobe $entry_addr $F  cookie 3" "plain kretprobe"

# The class of each probe (bpf_link_info's perf_event.flags): the key
# "probe" is always there for a kprobe link, null when the kernel does not
# report the class (0: stock), with nothing in plain output; bpftool prints
# no "mechanism" or "full_regs" any more. Which branch runs is pinned by the
# kernel booted: a class on ours, none on a stock kernel.
for l in entry mid ret; do
	assert_eq "$(field $l 'has("probe")')" true "key probe of $l"
	assert_eq "$(field $l 'has("mechanism")')" false "no key mechanism in $l"
	assert_eq "$(field $l 'has("full_regs")')" false "no key full_regs in $l"
	[[ $(plain $l) != *mechanism* ]] || fail "plain $l shows a mechanism: $(plain $l)"
	[[ $(plain $l) != *full_regs* ]] || fail "plain $l shows full_regs: $(plain $l)"
done
if stock_kernel; then
	note "a stock kernel: no probe class"
	for l in entry mid ret; do
		assert_eq "$(field $l .probe)" null "probe of $l"
		[[ $(plain $l) != *"  probe "* ]] || fail "plain $l shows a probe class: $(plain $l)"
	done
else
	assert_eq "$(field entry .probe)" ftrace "entry probe"
	assert_match "$(plain entry)" "cookie 1  probe ftrace" "plain entry probe"
	assert_match "$(field ret .probe)" '^(ftrace|trap|optimized)$' "kretprobe probe"
	assert_match "$(plain ret)" "cookie 3  probe (ftrace|trap|optimized)" "plain kretprobe probe"
	# A single instruction of >= 5 bytes: optimized once the optimizer is
	# done, by callopt ([CALLOPT] on its debugfs line).
	if [ "$(knob "$KNOB_CALLOPT")" = 1 ] &&
	   [ "$(cat /proc/sys/debug/kprobes-optimization)" = 1 ]; then
		for _ in $(seq 50); do
			[ "$(field mid .probe)" = optimized ] && break
			sleep 0.2
			show mid
		done
		assert_eq "$(field mid .probe)" optimized "mid probe"
		assert_match "$(plain mid)" "cookie 2  probe optimized" "plain mid probe"
		line=$(grep -F "$F+$GETPGID_SINGLE " "$KPROBES_LIST")
		assert_match "$line" '\[OPTIMIZED\]\[CALLOPT\]' "debugfs line of the mid probe"
	else
		note "callopt or optimization off: mid probe $(field mid .probe)"
		assert_match "$(field mid .probe)" '^(trap|optimized)$' "mid probe"
	fi
fi

# --- link detach, then unpin ------------------------------------------------
ids=$(for l in entry mid ret; do field $l .id; done | paste -sd,)
id=$(field mid .id)
out=$("$BPFTOOL" link detach id "$id" 2>&1)
rc=$?
case "$(uname -r)" in
*-kpx|*-kpx-debug) [ $rc = 0 ] || fail "link detach id $id: exit $rc: $out" ;;
esac
if [ $rc = 0 ]; then
	for _ in $(seq 50); do
		grep -q "$F+$GETPGID_SINGLE" "$KPROBES_LIST" || break
		sleep 0.1
	done
	! grep -q "$F+$GETPGID_SINGLE" "$KPROBES_LIST" ||
		fail "kprobe at $F+$GETPGID_SINGLE still there 5 s after link detach"
	[ -e "$D/mid" ] || fail "link detach removed the pin"
	# The detached link stays (pinned), with no event to describe; its
	# program no longer runs, the others do; detaching again is harmless.
	json=$("$BPFTOOL" -j link show id "$id") || fail "link show of the detached link: $json"
	note "detached: $json"
	assert_eq "$(jq -r .type <<< "$json")" perf_event "detached link type"
	assert_eq "$(jq -r '.func // "none"' <<< "$json")" none "detached link has no func"
	h2=$(hits 2) h1=$(hits 1)
	perl -e "syscall(121, 0) for 1..$N" || fail "perl getpgid loop"
	assert_eq "$(hits 2)" "$h2" "cookie 2 hits after its link was detached"
	[ "$(hits 1)" -ge $((h1 + N)) ] || fail "cookie 1: $(hits 1) hits, want >= $((h1 + N))"
	assert_rc 0 "$BPFTOOL" link detach id "$id"
	assert_rc 0 "$BPFTOOL" link detach pinned "$D/mid"
else
	# 6.12's perf_event links have no detach operation.
	assert_match "$out" "Operation not supported \(the kernel can't detach" \
		"link detach message"
	note "this kernel can't detach perf_event links: $out"
fi
rm "$D/entry" "$D/mid" "$D/ret" || fail "rm pins"
wait_no_kprobes
ours() { "$BPFTOOL" -j link show | jq -c "[.[] | select(.id | IN($ids))]"; }
for _ in $(seq 50); do
	[ "$(ours)" = "[]" ] && break
	sleep 0.1
done
assert_eq "$(ours)" "[]" "links left 5 s after unpinning"
