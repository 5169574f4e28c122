#!/usr/bin/env bash
# The kernel build: the config carries what the mission needs, the code at
# probe sites is built as distributions build it, and a second "make kernel"
# with nothing changed does no work.
. "$(dirname "$0")/../lib.sh"
cfg=$BUILD/kobj/.config
for opt in PREEMPT KPROBES OPTPROBES KPROBES_ON_FTRACE DYNAMIC_FTRACE_WITH_REGS FPROBE \
	   BPF_SYSCALL BPF_JIT BPF_EVENTS DEBUG_INFO_BTF KPROBE_EVENTS DEBUG_FS FTRACE \
	   MODULES KUNIT X86_KERNEL_IBT MITIGATION_RETPOLINE MITIGATION_RETHUNK \
	   MITIGATION_CALL_DEPTH_TRACKING CC_OPTIMIZE_FOR_PERFORMANCE 9P_FS TMPFS; do
	grep -qx "CONFIG_$opt=y" "$cfg" || fail "CONFIG_$opt=y missing from $cfg"
done
grep -qx "CONFIG_KPROBES_SANITY_TEST=[ym]" "$cfg" || fail "CONFIG_KPROBES_SANITY_TEST missing"
# IBT: functions start with ENDBR; return thunks: no bare ret.
. "$BUILD/sites.env"
# (explain's site at +0 is where the kernel moves it, the fentry call at
# +4; "endbr" says what +0 holds.)
rep=$("$BUILD/kpctl" -j explain --offline --vmlinux "$BUILD/vmlinux" "$GETPGID_FUNC") ||
	fail "kpctl explain --offline $GETPGID_FUNC failed"
assert_eq "$(json_bool "$rep" .endbr)" true "$GETPGID_FUNC starts with ENDBR"
assert_eq "$(jq -r '.sites[] | select(.offset == 4) | "\(.len) \(.mechanism)"' <<< "$rep")" \
	"5 ftrace" "the fentry call after the ENDBR"
insns=$(jq -r '.sites[] | select(.boundary) | .insn' <<< "$rep")
grep -qx ret <<< "$insns" && fail "$GETPGID_FUNC has a bare ret (want the return thunk)"
objdump -d --disassemble="$GETPGID_FUNC" "$BUILD/vmlinux" | grep -q 'jmp.*<__x86_return_thunk>' ||
	fail "$GETPGID_FUNC does not return through __x86_return_thunk"

# Incremental: nothing changed, nothing rebuilt. The stamp goes first, so
# that kbuild itself runs and writes a new build/kbuild.log (with a current
# stamp, make kernel skips kbuild and leaves the last build's log alone).
before=$(stat -c %Y "$BUILD/bzImage")
rm -f "$BUILD/kobj/.kpx-built" "$BUILD/kbuild.log"
make -C "$KPX_ROOT" -s kernel > "$BUILD/test-kernel-rebuild.log" 2>&1 ||
	fail "make kernel failed: $(tail -5 "$BUILD/test-kernel-rebuild.log")"
assert_eq "$(stat -c %Y "$BUILD/bzImage")" "$before" "bzImage mtime after a no-op make kernel"
[ -f "$BUILD/kbuild.log" ] ||
	fail "make kernel without a stamp did not run kbuild (no build/kbuild.log)"
if grep -E '^  (CC|LD|AR|BTF) ' "$BUILD/kbuild.log"; then
	fail "a no-op make kernel rebuilt something (see above)"
fi

# A build known to be up to date (scripts/build/kbuild-stamp) does not wait
# for build/.kbuild.lock: a matrix row that boots a flavour built before
# must not wait for another flavour's build.
[ -f "$BUILD/kobj/.kpx-built" ] || fail "no build stamp after make kernel"
exec {lk}> "$BUILD/.kbuild.lock"
flock "$lk"
timeout 600 make -C "$KPX_ROOT" -s kernel > "$BUILD/test-kernel-rebuild.log" 2>&1 ||
	fail "make kernel with the stamp current and the lock held here: rc $? (did it wait for the lock?)"
# Negative control: without the stamp, the same make goes for the lock and
# waits there (its flock shows up while this test holds the lock).
mv "$BUILD/kobj/.kpx-built" "$BUILD/kobj/.kpx-built.saved"
make -C "$KPX_ROOT" -s kernel > "$BUILD/test-kernel-rebuild.log" 2>&1 &
mk=$!
pat="flock $BUILD/.kbuild.lock scripts/build/kbuild-progress kernel "
waiter=
for _ in $(seq 600); do
	waiter=$(pgrep -f "$pat") && break
	kill -0 "$mk" 2> /dev/null || break
	sleep 1
done
[ -z "$waiter" ] || kill $waiter
wait "$mk"
mv "$BUILD/kobj/.kpx-built.saved" "$BUILD/kobj/.kpx-built"
rm -f "$BUILD/kobj/.kpx-building"
exec {lk}>&-
[ -n "$waiter" ] || fail "make kernel without a stamp did not wait for the lock held here"

# The stamp's rules, on a scratch tree: the same commit, .config and words
# only; a dirty tree never matches; "begin" drops the stamp.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
st=$KPX_ROOT/scripts/build/kbuild-stamp
git -C "$tmp" init -q && echo a > "$tmp/f" && git -C "$tmp" add f &&
	git -C "$tmp" -c user.name=t -c user.email=t@t commit -qm a || fail "scratch git tree"
mkdir "$tmp/o" && echo CONFIG_A=y > "$tmp/o/.config" && : > "$tmp/o/vmlinux"
"$st" check "$tmp" "$tmp/o" w && fail "stamp check passed with no stamp"
"$st" begin "$tmp" "$tmp/o" w && "$st" end "$tmp" "$tmp/o" || fail "kbuild-stamp begin/end"
"$st" check "$tmp" "$tmp/o" w || fail "stamp check failed right after a build"
"$st" check "$tmp" "$tmp/o" x && fail "stamp check passed for other make words"
echo CONFIG_B=y >> "$tmp/o/.config"
"$st" check "$tmp" "$tmp/o" w && fail "stamp check passed after .config changed"
"$st" begin "$tmp" "$tmp/o" w && "$st" end "$tmp" "$tmp/o"
echo b > "$tmp/f"
"$st" check "$tmp" "$tmp/o" w && fail "stamp check passed on a dirty tree"
"$st" begin "$tmp" "$tmp/o" w && "$st" end "$tmp" "$tmp/o"
[ -f "$tmp/o/.kpx-built" ] && fail "a dirty tree's build left a stamp"
echo a > "$tmp/f"
"$st" begin "$tmp" "$tmp/o" w
"$st" check "$tmp" "$tmp/o" w && fail "stamp check passed during a build (after begin, before end)"

# make kernel-stock does not build our kernel, nor kpctl (which needs our
# kernel's BTF): make sites-stock does both (the negative control: the
# same dry run names our kernel's build there).
ours="kbuild-stamp check $BUILD/linux $BUILD/kobj kernel"
dry=$(make -n -C "$KPX_ROOT" --no-print-directory kernel-stock 2>&1) ||
	fail "make -n kernel-stock: $(tail -3 <<< "$dry")"
grep -qF "scripts/build/kernel-stock" <<< "$dry" || fail "make -n kernel-stock runs no scripts/build/kernel-stock"
grep -qF "$ours" <<< "$dry" && fail "make kernel-stock builds our kernel first"
grep -qE "kpctl|/loader" <<< "$dry" && fail "make kernel-stock builds kpctl first"
dry=$(make -n -C "$KPX_ROOT" --no-print-directory sites-stock 2>&1) ||
	fail "make -n sites-stock: $(tail -3 <<< "$dry")"
grep -qF "$ours" <<< "$dry" || fail "make -n sites-stock does not build our kernel (control)"
grep -qF "kernel-stock --sites" <<< "$dry" || fail "make -n sites-stock does not pick the stock sites"
echo "PASS: kernel build (config, code generation, no-op rebuild, build stamp, stock without ours)"
