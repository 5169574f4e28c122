#!/usr/bin/env bash
# Runner self-test: passes, and nothing splats while it runs.
. "$(dirname "$0")/../../lib.sh"
echo "clean before"
