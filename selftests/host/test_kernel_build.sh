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

# Incremental: nothing changed, nothing rebuilt.
before=$(stat -c %Y "$BUILD/bzImage")
make -C "$KPX_ROOT" -s kernel > "$BUILD/test-kernel-rebuild.log" 2>&1 ||
	fail "make kernel failed: $(tail -5 "$BUILD/test-kernel-rebuild.log")"
assert_eq "$(stat -c %Y "$BUILD/bzImage")" "$before" "bzImage mtime after a no-op make kernel"
if grep -E '^  (CC|LD|AR|BTF) ' "$BUILD/kbuild.log"; then
	fail "a no-op make kernel rebuilt something (see above)"
fi
