#!/usr/bin/env bash
# Runner self-test: the kernel prints a WARNING (kpx_warn.ko) while this test
# runs, and the test exits 0: the runner must fail it.
. "$(dirname "$0")/../../lib.sh"
insmod "$MODDIR/kpx_warn.ko" || fail "insmod kpx_warn"
rmmod kpx_warn
