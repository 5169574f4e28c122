#!/usr/bin/env bash
# Runner self-test: passes after the splatting tests (the splats are not
# attributed to it).
. "$(dirname "$0")/../../lib.sh"
echo "clean after"
