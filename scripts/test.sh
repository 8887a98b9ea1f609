#!/usr/bin/env bash
# The README's second command: installs what is missing (a no-op when all is
# there), builds, then runs every test (the lit suite and each GoogleTest
# case) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
