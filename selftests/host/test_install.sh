#!/usr/bin/env bash
# make install / make uninstall with PREFIX and DESTDIR: kpctl, kpctl.8 and
# the bash completion land under DESTDIR/PREFIX, the installed kpctl runs
# (its version is this build's), and make uninstall leaves nothing, not
# even an empty folder it made. Negative controls: make install without a
# built kpctl fails and installs nothing; a file of the user's in an
# installed folder survives uninstall.
. "$(dirname "$0")/../lib.sh"
[ -x "$KPCTL" ] || fail "no $KPCTL: make loader"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
dest=$t/root
mk() { make -s -C "$KPX_ROOT" --no-print-directory "$@"; }

out=$(mk install DESTDIR="$dest" PREFIX=/opt/kpx 2>&1) || fail "make install: $out"
for f in sbin/kpctl share/man/man8/kpctl.8 share/bash-completion/completions/kpctl; do
	[ -f "$dest/opt/kpx/$f" ] || fail "make install left no $f under DESTDIR/PREFIX"
done
[ -x "$dest/opt/kpx/sbin/kpctl" ] || fail "installed kpctl is not executable"
assert_eq "$(find "$dest" -type f | wc -l)" 3 "files installed"
assert_eq "$("$dest/opt/kpx/sbin/kpctl" --version)" "$("$KPCTL" --version)" "installed kpctl's version"
"$dest/opt/kpx/sbin/kpctl" -j version | jq -e '.schema | numbers' > /dev/null ||
	fail "installed kpctl -j version has no schema"
man -l "$dest/opt/kpx/share/man/man8/kpctl.8" > /dev/null 2>&1 ||
	fail "installed man page does not render"

# uninstall: nothing left, not even the folders.
out=$(mk uninstall DESTDIR="$dest" PREFIX=/opt/kpx 2>&1) || fail "make uninstall: $out"
left=$(find "$dest" -mindepth 1 | sed "s|^$dest||")
[ -z "$left" ] || [ "$left" = /opt/kpx ] || [ "$left" = "$(printf '/opt\n/opt/kpx')" ] ||
	fail "left after uninstall: $left"
[ ! -e "$dest/opt/kpx/sbin" ] || fail "sbin left after uninstall"

# A file that is not ours stays.
mk install DESTDIR="$dest" > /dev/null 2>&1 || fail "make install (default PREFIX) failed"
[ -x "$dest/usr/local/sbin/kpctl" ] || fail "default PREFIX is not /usr/local"
echo mine > "$dest/usr/local/sbin/other"
mk uninstall DESTDIR="$dest" > /dev/null 2>&1 || fail "make uninstall (default PREFIX) failed"
[ -f "$dest/usr/local/sbin/other" ] || fail "uninstall removed a file that is not kpctl's"
[ ! -e "$dest/usr/local/sbin/kpctl" ] || fail "uninstall left kpctl"

# Without a built kpctl: an error, nothing installed.
out=$(mk install DESTDIR="$t/none" BUILD="$t/nobuild" 2>&1) && fail "make install without a build succeeded"
assert_match "$out" "run make" "the error says what to do"
[ ! -e "$t/none" ] || fail "a failed make install left $(find "$t/none")"
echo "make install / uninstall: 3 files under DESTDIR/PREFIX, none left"
