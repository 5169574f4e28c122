#!/usr/bin/env bash
# make series (scripts/build/series): the postable form of the series,
# split by tree (kernel/split). On the real split, with --partial: every
# sub-series is written, with a cover letter that has the sub-series'
# subject, a base-commit line (pristine) and To:/Cc: lines, and every
# patch's checkpatch --strict counts are zero. Without --partial the exit
# status says whether every patch meant for posting is in a sub-series.
# Negative controls on splits of their own: a sub-series on the base of
# another gets one prerequisite-patch-id per patch of that base; a patch in
# two sub-series, a test-only patch in one, a patch that does not apply on
# its base and a patch with a style error are each a finding (exit 1);
# bad input exits 2. No VM; needs build/linux (make kernel-src).
. "$(dirname "$0")/../lib.sh"
S=$KPX_ROOT/scripts/build/series
P=$KPX_ROOT/kernel/patches
[ -d "$BUILD/linux/.git" ] || fail "no build/linux: run 'make kernel-src'"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
pristine=$(git -C "$BUILD/linux" rev-parse pristine) || fail "no pristine tag in build/linux"

out=$("$S" --partial --out "$t/real" 2>&1) || fail "series --partial: $out"
assert_match "$out" "series: [1-9][0-9]* sub-series written to $t/real, 0 findings" "summary"
n=0
while read -r name base pats; do
	case $name in ''|'#'*) continue ;; esac
	n=$((n + 1))
	d=$t/real/$name
	[ -f "$d/0000-cover-letter.patch" ] || fail "$name: no cover letter"
	subj=$(sed -n 's/^Subject: //p' "$KPX_ROOT/kernel/split/$name.cover")
	grep -qF "Subject: [PATCH 0/" "$d/0000-cover-letter.patch" || fail "$name: cover subject prefix"
	grep -qF "$subj" "$d/0000-cover-letter.patch" || fail "$name: cover letter without its subject"
	grep -q 'BLURB HERE\|SUBJECT HERE' "$d/0000-cover-letter.patch" && fail "$name: template text left"
	grep -qx "base-commit: $pristine" "$d/0000-cover-letter.patch" || fail "$name: no base-commit: pristine"
	k=$(wc -w <<< "$pats")
	got=$(ls "$d" | grep -c '^000[1-9]-\|^00[1-9][0-9]-')
	assert_eq "$got" "$k" "$name: patches written"
	assert_eq "$(grep -c ': 0 errors, 0 warnings, 0 checks$' "$d/checkpatch.txt")" "$k" "$name: checkpatch counts zero"
	for f in "$d"/0*.patch; do
		grep -q '^To: ' "$f" || fail "$name: $(basename "$f") has no To:"
	done
done < "$KPX_ROOT/kernel/split/subseries"
[ "$n" -gt 0 ] || fail "kernel/split/subseries lists no sub-series"
note "$n sub-series, all patches checkpatch-clean"

"$S" --out "$t/full" > "$t/full.out" 2>&1; rc=$?
if grep -q '^series: in no sub-series yet\|FINDING: in no sub-series yet' "$t/full.out"; then
	assert_eq "$rc" 1 "patches in no sub-series: exit status"
	note "$(grep -o 'in no sub-series yet ([0-9]*)' "$t/full.out" | head -1)"
else
	assert_eq "$rc" 0 "every patch in a sub-series: exit status"
fi

# Controls: a split of their own. COVER NAME writes a cover file.
cover() { printf 'Subject: test %s\n\nA control.\n' "$2" > "$1/$2.cover"; }
mk() { # DIR LINE...
	rm -rf "$1"
	mkdir -p "$1"
	local d=$1
	shift
	printf '%s\n' "$@" > "$d/subseries"
	local l
	for l in "$@"; do cover "$d" "${l%% *}"; done
}

mk "$t/dep" "a pristine 0001 0002" "b a 0003"
out=$("$S" --partial --split "$t/dep" --out "$t/dep-out" 2>&1) || fail "a dependent sub-series: $out"
assert_eq "$(grep -c '^prerequisite-patch-id: ' "$t/dep-out/b/0000-cover-letter.patch")" 2 "b on a: prerequisite ids"
assert_eq "$(grep -c '^prerequisite-patch-id: ' "$t/dep-out/a/0000-cover-letter.patch")" 0 "a on pristine: prerequisite ids"
grep -q '^- a: test a (0001, 0002)$' "$t/dep-out/b/0000-cover-letter.patch" || fail "b's cover names its base"

finding() { # WHAT REGEX SPLIT-DIR [ARGS]
	local what=$1 re=$2 dir=$3
	shift 3
	out=$("$S" --partial --split "$dir" --out "$t/o" "$@" 2>&1); rc=$?
	assert_eq "$rc" 1 "$what: exit status"
	assert_match "$out" "$re" "$what: the finding"
	assert_match "$out" ', 1 findings$' "$what: one finding"
}
mk "$t/two" "a pristine 0001" "b pristine 0001"
finding "a patch in two sub-series" 'patch 0001 is in a and in b' "$t/two"
last=$(tail -1 "$P/series" | cut -c1-4)
mk "$t/to" "a pristine $last"
out=$("$S" --partial --split "$t/to" --out "$t/o" 2>&1); rc=$?
assert_eq "$rc" 1 "a test-only patch: exit status"
assert_match "$out" "a: patch $last is test-only" "a test-only patch: the finding"
mk "$t/na" "a pristine 0037"
finding "a patch off its base" 'a: 0037-.* does not apply on its base' "$t/na"

# A style error: a copy of the series whose 0036 adds trailing white space.
mkdir -p "$t/p"
cp "$P"/* "$t/p/"
f=$(ls "$t/p"/0036-*.patch)
awk '!done && /^\+[^+].*;$/ { print $0 " "; done = 1; next } { print }' "$f" > "$f.new" && mv "$f.new" "$f"
mk "$t/cp" "a pristine 0036"
finding "a checkpatch error" 'a/0001-.*: checkpatch --strict' "$t/cp" --patches "$t/p"

mk "$t/bad" "a nosuch 0001"
assert_rc 2 "$S" --split "$t/bad" --out "$t/o"
mk "$t/np" "a pristine 9999"
assert_rc 2 "$S" --split "$t/np" --out "$t/o"
mk "$t/nc" "a pristine 0001"
rm "$t/nc/a.cover"
assert_rc 2 "$S" --split "$t/nc" --out "$t/o"
assert_rc 2 "$S" --bogus
echo ok
