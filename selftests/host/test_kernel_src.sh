#!/usr/bin/env bash
# scripts/build/kernel-src and kernel-export on a small stand-in tree: the series
# applies in order, a second run touches nothing, a patch that does not apply
# is a hard error naming it, unexported commits are never reset away, and
# export regenerates the series. Then, from a stand-in source tarball: only
# the version in kernel/source-version is extracted (another is refused,
# naming both, unless KPX_ALLOW_SOURCE_VERSION=1), and the commit IDs are
# the same on two runs whatever the clock, the git config and identity.
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
assert_rc 0 "$KPX_ROOT/scripts/build/kernel-export"
assert_eq "$(cat "$KPX_PATCHES/series" | wc -l)" 2 "patches in series"
# Back to pristine, then apply the series.
g reset -q --hard pristine; rm -f "$KPX_KSRC/.git/kpx-series"
assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
assert_eq "$(g log --format=%s pristine..HEAD | tr '\n' ,)" "b: add dos,a: add uno," "applied series"
# Idempotent: a second run changes nothing, not even mtimes.
touch -d '2000-01-01' "$KPX_KSRC/a.c"
assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
assert_eq "$(stat -c %Y "$KPX_KSRC/a.c")" "$(date -d 2000-01-01 +%s)" "mtime after a no-op run"
# A commit that was not exported is never reset away.
printf 'x\n' > "$KPX_KSRC/c.c"; g add c.c; g commit -q -m "c: new"
assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "not yet in kernel/patches" "note on local commits"
cp "$KPX_PATCHES/series" "$tmp/series"
head -n1 "$tmp/series" > "$KPX_PATCHES/series"
assert_rc 1 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "kernel-export" "advice to export"
g log --format=%s -1 | grep -q "c: new" || fail "unexported commit lost"
cp "$tmp/series" "$KPX_PATCHES/series"
# A patch that does not apply is a hard error naming it.
g reset -q --hard pristine; rm -f "$KPX_KSRC/.git/kpx-series"
sed -i 's/^+dos$/+dos/; s/^ two$/ zwei/' "$KPX_PATCHES"/0002-*.patch
assert_rc 1 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "patch '0002-b-add-dos.patch' does not apply" "failure names the patch"

# --- Extraction from the source tarball: the pinned version, reproducible
# commit IDs. A stand-in tarball (KPX_SOURCE_TARBALL) and a stand-in
# dpkg-query that reports the installed linux-source-6.12's version.
want=$(awk '$1 == "version" { print $2 }' "$KPX_ROOT/kernel/source-version")
pin_date=$(awk '$1 == "date" { sub(/^date +/, ""); print }' "$KPX_ROOT/kernel/source-version")
[ -n "$want" ] && [ -n "$pin_date" ] || fail "kernel/source-version has no version or date"
mkdir -p "$tmp/tar/linux-source-6.12" "$tmp/bin"
printf 'one\n' > "$tmp/tar/linux-source-6.12/a.c"; printf 'two\n' > "$tmp/tar/linux-source-6.12/b.c"
printf '*.o\n# Debian packaging\n/*\n!/debian/\n' > "$tmp/tar/linux-source-6.12/.gitignore"
tar -cJf "$tmp/linux-source-6.12.tar.xz" -C "$tmp/tar" linux-source-6.12
touch -d '2020-02-02 02:02:02 UTC' "$tmp/linux-source-6.12.tar.xz"
export KPX_SOURCE_TARBALL=$tmp/linux-source-6.12.tar.xz
printf '#!/bin/sh\n[ -n "$FAKE_SOURCE_VERSION" ] || exit 1\nprintf %%s "$FAKE_SOURCE_VERSION"\n' > "$tmp/bin/dpkg-query"
chmod +x "$tmp/bin/dpkg-query"
export PATH=$tmp/bin:$PATH
# The series: two patches made on the tarball's content.
export KPX_KSRC=$tmp/dev KPX_PATCHES=$tmp/xpatches
mkdir -p "$KPX_KSRC" "$KPX_PATCHES"
tar -xJf "$KPX_SOURCE_TARBALL" -C "$KPX_KSRC" --strip-components=1
sed -i '/^# Debian packaging/,$d' "$KPX_KSRC/.gitignore"
g init -q; g add -A; g commit -q -m pristine; g tag pristine
printf 'one\nuno\n' > "$KPX_KSRC/a.c"; g commit -q -am "a: add uno"
printf 'two\ndos\n' > "$KPX_KSRC/b.c"; g commit -q -am "b: add dos"
assert_rc 0 "$KPX_ROOT/scripts/build/kernel-export"

# Another installed version is refused, naming both, and nothing is made.
export KPX_KSRC=$tmp/x0/linux
FAKE_SOURCE_VERSION=6.12.999-9 assert_rc 1 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "linux-source-6.12 6\.12\.999-9, but the series .* is made on ${want//./\\.}" "mismatch message names both versions"
assert_match "$out" "KPX_ALLOW_SOURCE_VERSION=1" "mismatch message names the override"
[ ! -e "$KPX_KSRC" ] || fail "a refused version left $KPX_KSRC behind"
# Nothing installed is refused too.
assert_rc 1 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "not installed" "no installed source"

# The pinned version, twice, in two folders, a second apart, the second run
# with a committer identity, dates and a git config of its own in the
# environment: the same pristine and HEAD commit IDs.
export FAKE_SOURCE_VERSION=$want
KPX_KSRC=$tmp/x1/linux assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
sleep 1.1
mkdir -p "$tmp/home"
printf '[user]\n\tname = someone else\n\temail = else@example.org\n[am]\n\tmessageid = true\n' > "$tmp/home/.gitconfig"
HOME=$tmp/home GIT_COMMITTER_NAME=other GIT_COMMITTER_DATE='2001-01-01 00:00 +0000' \
	GIT_AUTHOR_DATE='2001-01-01 00:00 +0000' KPX_KSRC=$tmp/x2/linux \
	assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
x() { git -C "$tmp/$1/linux" "${@:2}"; }
assert_eq "$(x x1 log --format=%s pristine..HEAD | tr '\n' ,)" "b: add dos,a: add uno," "series applied from the tarball"
assert_eq "$(x x1 log -1 --format=%s pristine)" "Debian linux-source-6.12 $want, pristine" "pristine subject"
assert_eq "$(x x1 log -1 --format='%an <%ae>|%cn <%ce>|%ad|%cd' --date=raw pristine)" \
	"kpx build <kpx@localhost>|kpx build <kpx@localhost>|$(date -d "$pin_date" +%s) ${pin_date##* }|$(date -d "$pin_date" +%s) ${pin_date##* }" \
	"pristine identity and dates"
assert_eq "$(x x1 log --format='%cn <%ce>' pristine..HEAD | sort -u)" "kpx build <kpx@localhost>" "series committer"
assert_eq "$(x x1 log --format='%ad=%cd' --date=raw pristine..HEAD | awk -F= '$1 != $2' | wc -l)" 0 "committer date is author date"
assert_eq "$(x x2 rev-parse pristine)" "$(x x1 rev-parse pristine)" "pristine commit ID on two runs"
assert_eq "$(x x2 rev-parse HEAD)" "$(x x1 rev-parse HEAD)" "HEAD commit ID on two runs"
note "pristine $(x x1 rev-parse --short pristine), HEAD $(x x1 rev-parse --short HEAD), the same twice"

# Override: another version goes ahead, with a warning naming both; its
# pristine commit records that version (a different commit ID: the check
# above can tell commits apart) and the tarball's mtime as its date.
KPX_ALLOW_SOURCE_VERSION=1 FAKE_SOURCE_VERSION=6.12.999-9 KPX_KSRC=$tmp/x3/linux \
	assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "warning: .*6\.12\.999-9.*${want//./\\.}" "override warning names both versions"
assert_eq "$(x x3 log -1 --format=%s pristine)" "Debian linux-source-6.12 6.12.999-9, pristine" "overridden pristine subject"
assert_eq "$(x x3 log -1 --format=%ad --date=unix pristine)" "$(date -d '2020-02-02 02:02:02 UTC' +%s)" "overridden pristine date: the tarball's mtime"
[ "$(x x3 rev-parse HEAD)" != "$(x x1 rev-parse HEAD)" ] || fail "another source version gave the same HEAD"
# A tree made from another version is refused afterwards without the
# override, even though the installed version now is the pinned one.
KPX_KSRC=$tmp/x3/linux assert_rc 1 "$KPX_ROOT/scripts/build/kernel-src"
assert_match "$out" "$tmp/x3/linux is linux-source-6.12 6\.12\.999-9, but the series .* is made on ${want//./\\.}" "a tree of another version is refused"
# And the pinned tree stays a no-op.
KPX_KSRC=$tmp/x1/linux assert_rc 0 "$KPX_ROOT/scripts/build/kernel-src"
assert_eq "$out" "" "a second run on the pinned tree says nothing"
