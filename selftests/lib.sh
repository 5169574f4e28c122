# Helpers for kpx selftests (sourced). A test is a bash script that exits 0
# when it passes, 1 when it fails, and 77 when it cannot run here (skip;
# never counted as a pass).
set -uo pipefail
KPX_ROOT=${KPX_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILD=$KPX_ROOT/build
# Artifacts of the kernel flavour that runs (in the guest): normal, debug,
# or stock (the unpatched kernel of scripts/kernel-stock).
case "$(uname -r)" in
*-kpx-debug) SFX=-debug ;;
*-kpx-stock) SFX=-stock ;;
*) SFX= ;;
esac
KOBJ=$BUILD/kobj$SFX
SITES=$BUILD/sites$SFX.env
MODDIR=$BUILD/modules$SFX
KPCTL=$BUILD/kpctl
BPFTOOL=$BUILD/bpftool
KPROBES_LIST=/sys/kernel/debug/kprobes/list

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }
note() { echo "# $*"; }

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
# No kprobe is left registered (all tests clean up after themselves). The
# kernel releases a detached BPF kprobe in a worker, a grace period or so
# after the detach returned (debug.kprobes-fast-detach), so allow 10 s.
assert_no_kprobes() {
	local left i
	for i in $(seq 100); do
		left=$(cat "$KPROBES_LIST" 2>/dev/null)
		[ -z "$left" ] && return 0
		sleep 0.1
	done
	fail "kprobes left behind: $left"
}
