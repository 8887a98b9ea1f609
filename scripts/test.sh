#!/usr/bin/env bash
# The README's second command: installs what is missing (a no-op when all is
# there), builds, then runs every test (the lit suite and each GoogleTest
# case) through ctest; then the same suite again in the checked build (ASan +
# UBSan, assertions on: scripts/sanitize.sh). Between the two, every command
# of README.md and docs/*.md runs as written (scripts/doc-test.py), and the
# Python package is built and tested (scripts/python-test.sh). About 10
# minutes from scratch on 2 cores, 7 of them the checked build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
python3 scripts/doc-test.py
bash scripts/python-test.sh
bash scripts/sanitize.sh
