#!/usr/bin/env bash
# The examples of README.md, docs/kpctl.md and docs/hardware.md work as written
# (scripts/check/doc-test: every line of a ```sh block is run here, in the VM, or
# checked: make targets exist, selftests/run names tests, scripts exist).
# Negative control: a page whose examples are wrong (a kpctl option that
# does not exist, a probe on no function, an unknown command, a make target
# that does not exist) must fail, one FAIL line each, and a page without
# examples must not pass.
. "$(dirname "$0")/../lib.sh"
# The examples are of the VM config's kernel (make run's): they name code
# offsets of its build, such as __x64_sys_getpgid+0x20, which another
# configuration lays out differently (the debug kernel calls do_getpgid()
# out of line, and its __x64_sys_getpgid is 0x20 bytes long).
[ -z "$SFX" ] || skip "the examples name offsets of the VM config's kernel; this is $(uname -r)"
out=$("$KPX_ROOT/scripts/check/doc-test" "$KPX_ROOT/README.md" "$KPX_ROOT/docs/kpctl.md" "$KPX_ROOT/docs/hardware.md" 2>&1)
rc=$?
echo "$out" | grep -v ': ok: ' || true
[ $rc = 0 ] || fail "an example of the docs failed (above)"
assert_match "$(tail -1 <<< "$out")" '^doc-test: [1-9][0-9]* passed, 0 failed' "doc-test summary"
assert_no_kprobes

bad=$(mktemp -d)
cat > "$bad/bad.md" <<'MD'
# Wrong examples

```sh
kpctl attach --no-such-option __x64_sys_getpgid
kpctl attach kpx_no_such_function_xyz --trigger 1
kpctl-typo attach __x64_sys_getpgid
make no-such-target
```
MD
out=$("$KPX_ROOT/scripts/check/doc-test" "$bad/bad.md" 2>&1)
rc=$?
echo "$out" | sed 's/^/# control: /'
assert_eq "$rc" 1 "doc-test exit on wrong examples"
assert_eq "$(grep -c ': FAIL: ' <<< "$out")" 4 "FAIL lines of the control page"
printf '# No examples\n\n```\nkpctl attach x\n```\n' > "$bad/none.md"
assert_rc 1 "$KPX_ROOT/scripts/check/doc-test" "$bad/none.md"
assert_match "$out" "no example found" "page without examples"
rm -rf "$bad"
assert_no_kprobes
echo "PASS: the docs' examples run as written"
