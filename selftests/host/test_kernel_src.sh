#!/usr/bin/env bash
# scripts/kernel-src and kernel-export on a small stand-in tree: the series
# applies in order, a second run touches nothing, a patch that does not apply
# is a hard error naming it, unexported commits are never reset away, and
# export regenerates the series.
. "$(dirname "$0")/../lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KPX_KSRC=$tmp/linux KPX_PATCHES=$tmp/patches
g() { git -C "$KPX_KSRC" -c user.name=t -c user.email=t@t "$@"; }
mkdir -p "$KPX_KSRC" "$KPX_PATCHES"
printf 'one\n' > "$KPX_KSRC/a.c"; printf 'two\n' > "$KPX_KSRC/b.c"
g init -q; g add -A; g commit -q -m pristine; g tag pristine
# Two patches, made the way a developer makes them.
printf 'one\nuno\n' > "$KPX_KSRC/a.c"; g commit -q -am "a: add uno"
printf 'two\ndos\n' > "$KPX_KSRC/b.c"; g commit -q -am "b: add dos"
assert_rc 0 "$KPX_ROOT/scripts/kernel-export"
assert_eq "$(cat "$KPX_PATCHES/series" | wc -l)" 2 "patches in series"
# Back to pristine, then apply the series.
g reset -q --hard pristine; rm -f "$KPX_KSRC/.git/kpx-series"
assert_rc 0 "$KPX_ROOT/scripts/kernel-src"
assert_eq "$(g log --format=%s pristine..HEAD | tr '\n' ,)" "b: add dos,a: add uno," "applied series"
# Idempotent: a second run changes nothing, not even mtimes.
touch -d '2000-01-01' "$KPX_KSRC/a.c"
assert_rc 0 "$KPX_ROOT/scripts/kernel-src"
assert_eq "$(stat -c %Y "$KPX_KSRC/a.c")" "$(date -d 2000-01-01 +%s)" "mtime after a no-op run"
# A commit that was not exported is never reset away.
printf 'x\n' > "$KPX_KSRC/c.c"; g add c.c; g commit -q -m "c: new"
assert_rc 0 "$KPX_ROOT/scripts/kernel-src"
assert_match "$out" "not yet in kernel/patches" "note on local commits"
cp "$KPX_PATCHES/series" "$tmp/series"
head -n1 "$tmp/series" > "$KPX_PATCHES/series"
assert_rc 1 "$KPX_ROOT/scripts/kernel-src"
assert_match "$out" "kernel-export" "advice to export"
g log --format=%s -1 | grep -q "c: new" || fail "unexported commit lost"
cp "$tmp/series" "$KPX_PATCHES/series"
# A patch that does not apply is a hard error naming it.
g reset -q --hard pristine; rm -f "$KPX_KSRC/.git/kpx-series"
sed -i 's/^+dos$/+dos/; s/^ two$/ zwei/' "$KPX_PATCHES"/0002-*.patch
assert_rc 1 "$KPX_ROOT/scripts/kernel-src"
assert_match "$out" "patch '0002-b-add-dos.patch' does not apply" "failure names the patch"
