#!/usr/bin/env bash
# test_bench_smoke on both kernels, as 'make bench' runs them: bzImage-stock
# and ours side by side, every row measured on both with its ratio (make
# check-stock, which builds the stock kernel).
. "$(dirname "$0")/../lib.sh"
require_stock_kernel
BENCH_SMOKE_KERNELS=stock,ours BENCH_SMOKE_SUFFIX=-stock . "$(dirname "$0")/test_bench_smoke.sh"
