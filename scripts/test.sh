#!/usr/bin/env bash
# The README's second command: installs what is missing (a no-op when all is
# there), checks the sources' format (scripts/format.sh) and layering
# (scripts/check-layering.py), builds, builds and tests the Python package
# (scripts/python-test.sh: pytest, torch from PyPI), runs every command of
# README.md and docs/*.md as written (scripts/doc-test.py), then every C++
# test (the lit suite and each GoogleTest case, through ctest) in the checked
# build (ASan + UBSan, assertions on: scripts/sanitize.sh).
#
# The C++ suite runs once, in the checked build; the release build runs the
# lit tests of the cuda backend, which the checked build leaves out, and
# serves the Python suite and the doc test. The checked build compiles in
# the background at the lowest priority (nice 19) while the Python suite
# and the doc test run, on the cycles they leave idle; its log is
# build-asan/build.log. Each phase's wall time is printed as it ends.
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
mkdir -p build-asan
# Its own process group (job control on for this one job), so that an early
# exit stops its compilers too.
set -m
nice -n 19 bash scripts/sanitize.sh build > build-asan/build.log 2>&1 &
checked=$!
set +m
trap 'kill -- -$checked 2>/dev/null || true' EXIT
LIT_FILTER=cuda phase ctest --test-dir build --output-on-failure -R '^lit$'
phase bash scripts/python-test.sh
phase python3 scripts/doc-test.py
start=$SECONDS
if ! wait $checked; then
  tail -n 60 build-asan/build.log
  echo "test.sh: the checked build failed (build-asan/build.log)" >&2
  exit 1
fi
trap - EXIT
echo "test.sh: the checked build ended $((SECONDS - start)) s after the doc test (total $SECONDS s)"
phase bash scripts/sanitize.sh test
