#!/usr/bin/env bash
# The kernel series is what build/linux carries, and every patch is clean
# under checkpatch --strict and carries a Signed-off-by.
. "$(dirname "$0")/../lib.sh"
cd "$KPX_ROOT" || exit 1
n=0
while read -r p; do
	[ -n "$p" ] || continue
	n=$((n + 1))
	f=kernel/patches/$p
	[ -f "$f" ] || fail "series names $p, which is missing"
	# From inside the kernel tree: run from another git checkout,
	# checkpatch reviews a tracked .patch file as a source file. The tree
	# is Debian's source without upstream history, so the commit a
	# Fixes: tag names cannot be looked up (UNKNOWN_COMMIT_ID); the tag's
	# form is still checked.
	res=$(cd "$BUILD/linux" && PATH=/usr/bin:$PATH scripts/checkpatch.pl --strict -q \
		--ignore UNKNOWN_COMMIT_ID "$KPX_ROOT/$f" 2>&1) ||
		fail "checkpatch --strict on $p: $res"
	grep -q '^Signed-off-by: ' "$f" || fail "$p has no Signed-off-by"
done < kernel/patches/series
note "$n patch(es) clean"
# Every patch in the folder is in the series.
for f in kernel/patches/*.patch; do
	[ -e "$f" ] || continue
	grep -qxF "$(basename "$f")" kernel/patches/series || fail "$f is not in the series"
done
