# Helpers for kpx selftests (sourced). A test is a bash script that exits 0
# when it passes, 1 when it fails, and 77 when it cannot run here (skip;
# never counted as a pass).
set -uo pipefail
KPX_ROOT=${KPX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=$KPX_ROOT/build
# Artifacts of the kernel flavour that runs (in the guest): normal, debug,
# or stock (the unpatched kernel of scripts/build/kernel-stock).
# Other flavours (scripts/build/kernel-flavour: -kpx-dynamic, -kpx-nocount) the
# same way: uname -r ends in -kpx-NAME, the artifacts in -NAME.
# Debian's own image (the stock kernel of the debian-* rows of
# check-configs: scripts/build/debian-image), uname -r 6.12.N+deb12-FLAVOUR,
# maps to -debian-FLAVOUR-stock (scripts/build/debian-stock-artifacts).
case "$(uname -r)" in
*-kpx) SFX= ;;
*-kpx-*) SFX=-$(uname -r | sed 's/.*-kpx-//') ;;
*+deb12-*) SFX=-debian-$(uname -r | sed 's/.*+deb12-//')-stock ;;
*) SFX= ;;
esac
KOBJ=$BUILD/kobj$SFX
# A kernel without the series: ours built unpatched (-stock) or Debian's own.
stock_kernel() { [[ $SFX == *-stock ]]; }
# The config the running kernel was built from: this flavour's $KOBJ/.config,
# or for Debian's own image the config in its package. Fails the test when
# there is none.
kernel_config() {
	local cfg fl
	case $SFX in
	-debian-*-stock)
		fl=${SFX#-debian-}
		cfg=$(ls "$BUILD/debian/img-${fl%-stock}"/boot/config-* 2>/dev/null | head -n1) ;;
	*)
		cfg=$KOBJ/.config ;;
	esac
	[ -n "$cfg" ] && [ -r "$cfg" ] || fail_test "no config for $(uname -r) (SFX '$SFX')"
	printf '%s\n' "$cfg"
}
SITES=$BUILD/sites$SFX.env
# KPX_MODDIR: test modules built for another kernel (a before/after run).
MODDIR=${KPX_MODDIR:-$BUILD/modules$SFX}
KPCTL=$BUILD/kpctl
# The series' switches (debugfs): callopt chooses callopt over the jump
# optimization (patch 0004); fast_detach, cleared, forces the synchronous
# detach (a test-only patch at the series' end). knob PATH prints a debugfs bool's Y/N
# (or a sysctl's number) as 1/0; it fails when the file is absent.
KNOB_CALLOPT=/sys/kernel/debug/kprobes/callopt
KNOB_FAST=/sys/kernel/debug/kprobes/fast_detach
knob() {
	local v
	v=$(cat "$1" 2>/dev/null) || return 1
	case $v in Y) echo 1 ;; N) echo 0 ;; *) echo "$v" ;; esac
}
BPFTOOL=$BUILD/bpftool
KPROBES_LIST=/sys/kernel/debug/kprobes/list

fail() { echo "FAIL: $*" >&2; exit 1; }
# fail_test MESSAGE: fail() that also ends the test when called in a
# subshell, as in x=$(helper ...): it signals the test's own shell, which
# exits 1 (running its EXIT trap) as soon as the subshell is done.
KPX_TEST_PID=$BASHPID
trap 'exit 1' USR1
fail_test() {
	echo "FAIL: $*" >&2
	[ "$BASHPID" = "$KPX_TEST_PID" ] || kill -USR1 "$KPX_TEST_PID" 2>/dev/null
	exit 1
}
skip() { echo "SKIP: $*" >&2; exit 77; }
note() { echo "# $*"; }

# KTAP-style subtests, so that one failure does not hide the next:
# subtest NAME CMD [ARG...] runs CMD (usually a function of the test) in a
# subshell of its own, where fail, fail_test (also from inside $(...)) and
# skip end that subtest only; it prints "ok N NAME", "ok N NAME # SKIP" or
# "not ok N NAME" and returns. Variables CMD sets stay in its subshell: set
# up what several subtests share before them. subtests_end prints the plan
# ("1..N") and ends the test: 1 when a subtest failed, else 77 when one
# was skipped (a skip is never counted as a pass), else 0.
KPX_SUBTESTS=0
KPX_SUBTESTS_FAILED=()
KPX_SUBTESTS_SKIPPED=()
subtest() { # NAME CMD [ARG...]
	local name=$1 rc
	shift
	KPX_SUBTESTS=$((KPX_SUBTESTS + 1))
	echo "# subtest $KPX_SUBTESTS: $name"
	(
		KPX_TEST_PID=$BASHPID
		trap 'exit 1' USR1
		"$@"
	)
	rc=$?
	case $rc in
	0) echo "ok $KPX_SUBTESTS $name" ;;
	77) echo "ok $KPX_SUBTESTS $name # SKIP"; KPX_SUBTESTS_SKIPPED+=("$name") ;;
	*) echo "not ok $KPX_SUBTESTS $name"; KPX_SUBTESTS_FAILED+=("$name") ;;
	esac
	return 0
}
subtests_end() {
	echo "1..$KPX_SUBTESTS"
	[ "$KPX_SUBTESTS" -gt 0 ] || fail "no subtest ran"
	[ ${#KPX_SUBTESTS_FAILED[@]} = 0 ] ||
		fail "${#KPX_SUBTESTS_FAILED[@]} of $KPX_SUBTESTS subtests failed: ${KPX_SUBTESTS_FAILED[*]}"
	[ ${#KPX_SUBTESTS_SKIPPED[@]} = 0 ] ||
		skip "${#KPX_SUBTESTS_SKIPPED[@]} of $KPX_SUBTESTS subtests skipped: ${KPX_SUBTESTS_SKIPPED[*]}"
	exit 0
}

assert_eq() { # ACTUAL EXPECTED WHAT
	[ "$1" = "$2" ] || fail "$3: got '$1', want '$2'"
}
assert_match() { # ACTUAL REGEX WHAT
	[[ $1 =~ $2 ]] || fail "$3: '$1' does not match /$2/"
}
assert_rc() { # EXPECTED CMD... (output in $out)
	local want=$1 rc; shift
	out=$("$@" 2>&1); rc=$?
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want; output: $out"
}
# Values out of JSON for assertions. In jq a missing field is null, and
# null <= 1 is true, so a comparison in jq passes on a field that is not
# there. json_num JSON PATH prints the value at the jq PATH of JSON and fails
# the test (also from inside $(...)) unless it is exactly one number;
# json_int an integer, json_bool true or false, json_str a string.
# assert_num A OP B WHAT compares two numbers (OP: < <= == != >= >).
_json_typed() { # TYPE JSON PATH
	local t=$1 json=$2 path=$3 r
	r=$(jq -r --arg t "$t" "[$path] | if length == 1 and ((.[0] | type) == \$t or
		(\$t == \"integer\" and (.[0] | type) == \"number\" and .[0] == (.[0] | floor)))
		then .[0] | tostring else \"NOT \" + (map(tojson) | join(\", \")) end" <<< "$json" 2>&1) ||
		fail_test "$path: cannot read it from the JSON (${r:0:200}): ${json:0:300}"
	if [[ $r == "NOT "* ]]; then
		r=${r#NOT }
		[ "$t" = integer ] && t="an integer" || t="a $t"
		fail_test "$path: want $t, got ${r:-nothing}, in: ${json:0:300}"
	fi
	printf '%s\n' "$r"
}
json_num() { _json_typed number "$@"; }
json_int() { _json_typed integer "$@"; }
json_bool() { _json_typed boolean "$@"; }
json_str() { _json_typed string "$@"; }
assert_num() { # A OP B WHAT
	local re='^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'
	[[ $1 =~ $re ]] || fail_test "$4: '$1' is not a number"
	[[ $3 =~ $re ]] || fail_test "$4: '$3' is not a number"
	case $2 in '<'|'<='|'=='|'!='|'>='|'>') ;; *) fail_test "assert_num: bad operator '$2'" ;; esac
	awk -v a="$1" -v b="$3" "BEGIN { exit !(a + 0 $2 b + 0) }" ||
		fail_test "$4: $1 $2 $3 does not hold"
}

# The kernel log from a point on, without clearing it: no test clears the
# kernel log (dmesg -C would hide an earlier test's splat from whatever reads
# the ring buffer). kmsg_mark [WHAT] writes a unique line to /dev/kmsg and
# prints it; kmsg_since MARK [DMESG-OPTION...] prints what the kernel logged
# after that line (and fails the test when the line is gone: ring buffer
# overrun).
kmsg_mark() {
	local m
	m="kpx-mark: ${1:-mark} $(date +%s.%N) $BASHPID $RANDOM"
	echo "<5>$m" > /dev/kmsg || fail_test "cannot write to /dev/kmsg"
	echo "$m"
}
kmsg_since() {
	local mark=$1 log
	shift
	[ -n "$mark" ] || fail_test "kmsg_since: no marker"
	log=$(dmesg "$@") || fail_test "dmesg $* failed"
	grep -qF -- "$mark" <<< "$log" ||
		fail_test "marker '$mark' is no longer in the kernel log (ring buffer overrun?)"
	awk -v m="$mark" 'found { print } !found && index($0, m) { found = 1 }' <<< "$log"
}

# KUnit suites built as modules run when loaded. kunit_run KO SUITE loads
# KO, unloads it and prints what the kernel logged meanwhile (read past a
# marker); the test fails when SUITE logged no summary. kunit_case_ok LOG
# CASE fails the test when CASE did not run, failed or skipped in LOG (a
# skip is never a pass), naming its line.
kunit_run() {
	local ko=$1 suite=$2 mark log
	mark=$(kmsg_mark "kunit_$suite")
	insmod "$ko" || fail_test "insmod $ko failed"
	log=$(kmsg_since "$mark")
	rmmod "$(basename "$ko" .ko)" || fail_test "rmmod $(basename "$ko" .ko) failed"
	grep -qE "# $suite: pass:[0-9]+ fail:[0-9]+ skip:[0-9]+ total:[0-9]+" <<< "$log" ||
		fail_test "no KUnit summary of $suite in dmesg"
	printf '%s\n' "$log"
}
kunit_case_ok() {
	local line
	line=$(grep -E "(^|[] ])(not )?ok [0-9]+ $2( |$)" <<< "$1" | tail -n1)
	[ -n "$line" ] || fail_test "KUnit case $2 did not run"
	case $line in
	*"not ok"*|*SKIP*|*skip*) fail_test "KUnit case $2: $(sed 's/^\[[^]]*\] *//' <<< "$line")" ;;
	esac
}

# No kprobe is left registered (all tests clean up after themselves). The
# kernel releases a detached BPF kprobe in a worker, a grace period or so
# after the detach returned (the fast detach), so allow 10 s.
# kpctl's JSON contract (docs/kpctl.md): with -j, stdout is exactly one JSON
# object with "schema": 2, also when kpctl fails; exit 2 (bad usage) and 3
# (cannot run here) come with a string "error". assert_kpctl_json OUT RC WHAT
# checks that of the stdout OUT of a kpctl -j that exited RC; kpctl_j ARGS...
# runs "$KPCTL" -j ARGS, checks it, prints its stdout and returns its status
# (stderr passes through).
assert_kpctl_json() { # OUT RC WHAT
	jq -e -s 'length == 1 and (.[0] | type == "object" and .schema == 2)' \
		<<< "$1" > /dev/null 2>&1 ||
		fail_test "$3: stdout is not one JSON object with \"schema\": 2 (exit $2): ${1:0:300}"
	case $2 in
	2|3) jq -e '.error | type == "string" and length > 0' <<< "$1" > /dev/null ||
		fail_test "$3: exit $2 without an \"error\": ${1:0:300}" ;;
	esac
}
kpctl_j() { # ARGS...
	local o rc
	o=$("$KPCTL" -j "$@"); rc=$?
	assert_kpctl_json "$o" $rc "kpctl -j $*"
	printf '%s\n' "$o"
	return $rc
}
# kpctl links (-j) JSON: the activity hit something, FUNC (the first
# candidate) among it, and each latency's p50 <= p99 <= max <= sum.
assert_links_json() { # JSON FUNC WHAT
	local json=$1 f=$2 what=$3 l
	assert_num "$(json_int "$json" .functions_hit)" '>' 0 "$what: functions hit"
	jq -e --arg f "$f" '.functions_hit_sample | index($f) != null' <<< "$json" > /dev/null ||
		fail_test "$what: $f (first candidate) not hit"
	for l in attach_ms detach_ms; do
		assert_num "$(json_num "$json" .$l.p50)" '<=' "$(json_num "$json" .$l.p99)" "$what: $l p50 <= p99"
		assert_num "$(json_num "$json" .$l.p99)" '<=' "$(json_num "$json" .$l.max)" "$what: $l p99 <= max"
		assert_num "$(json_num "$json" .$l.max)" '<=' "$(json_num "$json" .$l.sum)" "$what: $l max <= sum"
	done
}
# wait_list PATTERN COUNT: wait up to 30 s until COUNT lines of the kprobes
# list match PATTERN.
wait_list() {
	for _ in $(seq 300); do
		[ "$(grep -c -- "$1" $KPROBES_LIST 2>/dev/null)" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "waited for $2 probes matching '$1': $(cat $KPROBES_LIST)"
}
assert_no_kprobes() {
	local left i
	for i in $(seq 100); do
		left=$(cat "$KPROBES_LIST" 2>/dev/null)
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	fail "kprobes left behind: $left"
}

# The stock kernel (make kernel-stock: build/bzImage-stock), for the host
# tests named test_stock_*, which make check-stock runs after building it.
# Tests only consume artifacts: a missing or stale stock kernel fails the
# test with what to run (it is never built here).
require_stock_kernel() {
	local pristine built=$BUILD/kobj-stock/.kpx-built img=$BUILD/bzImage-stock
	local fix="run 'make kernel-stock' (make check-stock builds it and runs these tests)"
	[ -r "$img" ] || fail "no $img: $fix"
	[ -r "$BUILD/kobj-stock/lib/test_kprobes.ko" ] || fail "no $BUILD/kobj-stock/lib/test_kprobes.ko: $fix"
	# touched by each successful make kernel-stock
	[ -f "$built" ] || fail "the stock kernel build did not finish ($built missing): $fix"
	if [ "$KPX_ROOT/kernel/configs/vm.config" -nt "$built" ] ||
		[ "$KPX_ROOT/scripts/build/kernel-stock" -nt "$built" ]; then
		fail "$img is older than kernel/configs/vm.config or scripts/build/kernel-stock: $fix"
	fi
	pristine=$(git -C "$BUILD/linux" rev-parse -q --verify 'pristine^{commit}' 2>/dev/null)
	if [ -n "$pristine" ] && [ "$(cat "$BUILD/linux-stock/.kpx-pristine" 2>/dev/null)" != "$pristine" ]; then
		fail "$img is not built from the current tag pristine: $fix"
	fi
}
