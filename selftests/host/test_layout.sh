#!/usr/bin/env bash
# The folders say the architecture (scripts/check/layout): libkpx (bpf/,
# headers in include/) beside its users, kpctl (loader/) and the test tools
# (selftests/), neither of which reaches into the other. The tree must pass;
# a scratch copy with one planted violation of each kind must fail, naming
# the file and line.
. "$(dirname "$0")/../lib.sh"
LAYOUT=$KPX_ROOT/scripts/check/layout
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cp -r "$KPX_ROOT"/{bpf,include,loader,selftests} "$t"/

tree() {
	out=$("$LAYOUT" "$KPX_ROOT" 2>&1) || fail "the tree breaks the layout: $out"
}
# plant FILE LINE WANT: append LINE to FILE in a fresh copy; the check must
# exit 1 with WANT and FILE's name in its message.
plant() {
	local c=$t/c$KPX_SUBTESTS rc
	mkdir "$c" && cp -r "$t"/{bpf,include,loader,selftests} "$c"/ || fail "copy to $c"
	printf '%s\n' "$2" >> "$c/$1"
	out=$("$LAYOUT" "$c" 2>&1)
	rc=$?
	assert_eq "$rc" 1 "exit status with '$2' in $1"
	grep -qF "$1:" <<< "$out" || fail "no $1 in: $out"
	grep -qF "$3" <<< "$out" || fail "want '$3' in: $out"
}
subtest "tree" tree
subtest "selftests includes a loader file by path" \
	plant selftests/stress/kpx_stress.c '#include "../../loader/common.h"' 'from loader/'
subtest "selftests includes a header only loader has" \
	plant selftests/sweep/kpx_sweep.c '#include "kpctl.h"' 'which only loader/ has'
subtest "libkpx includes a loader header" \
	plant bpf/util.c '#include "common.h"' 'which only loader/ has'
subtest "selftests includes a header that is nowhere" \
	plant selftests/benchs/bench.c '#include "nowhere.h"' 'neither beside'
subtest "a selftests Makefile includes loader rules" \
	plant selftests/detach/Makefile 'include ../../loader/rules.mk' 'includes loader/ rules'
subtest "a selftests Makefile adds loader to -I" \
	plant selftests/sweep/Makefile 'CFLAGS += -I../../loader' 'include path'
subtest "loader includes a selftests header" \
	plant loader/kpctl.c '#include "../selftests/sweep/kpx_sweep.h"' 'from selftests/'
subtests_end
