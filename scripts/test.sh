#!/usr/bin/env bash
# The README's second command: builds, then runs every test (the lit suite and
# each GoogleTest case) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
