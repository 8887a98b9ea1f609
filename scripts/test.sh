#!/usr/bin/env bash
# The README's second command: installs what is missing (a no-op when all is
# there), checks the sources' format (scripts/format.sh) and layering
# (scripts/check-layering.py), builds, runs every test (the lit suite and
# each GoogleTest case) through ctest, builds and tests the Python package (scripts/python-test.sh:
# pytest, torch from PyPI), runs every command of README.md and docs/*.md as
# written (scripts/doc-test.py), then the C++ suite again in the checked
# build (ASan + UBSan, assertions on: scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/format.sh
python3 scripts/check-layering.py
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2
bash scripts/python-test.sh
python3 scripts/doc-test.py
bash scripts/sanitize.sh
