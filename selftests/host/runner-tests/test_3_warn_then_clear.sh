#!/usr/bin/env bash
# Runner self-test: a WARNING, then the ring buffer cleared (which no real
# test may do), then exit 0: the runner must still fail this test.
. "$(dirname "$0")/../../lib.sh"
insmod "$MODDIR/kpx_warn.ko" || fail "insmod kpx_warn"
rmmod kpx_warn
sleep 1
dmesg -C
