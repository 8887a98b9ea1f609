#!/usr/bin/env bash
# The README's second command: installs what is missing (a no-op when all is
# there), checks the sources' format (scripts/format.sh) and layering
# (scripts/check-layering.py), builds, runs every test (the lit suite and
# each GoogleTest case) through ctest, builds and tests the Python package (scripts/python-test.sh:
# pytest, torch from PyPI), runs every command of README.md and docs/*.md as
# written (scripts/doc-test.py), then the C++ suite again in the checked
# build (ASan + UBSan, assertions on: scripts/sanitize.sh).
# Each phase's wall time is printed as it ends (where the CI's time goes).
set -euo pipefail
cd "$(dirname "$0")/.."
phase() {
  local start=$SECONDS
  "$@"
  echo "test.sh: '$*' took $((SECONDS - start)) s (total $SECONDS s)"
}
phase bash scripts/install-deps.sh
phase bash scripts/format.sh
phase python3 scripts/check-layering.py
phase bash scripts/build.sh
phase ctest --test-dir build --output-on-failure -j2
phase bash scripts/python-test.sh
phase python3 scripts/doc-test.py
phase bash scripts/sanitize.sh
