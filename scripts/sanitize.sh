#!/usr/bin/env bash
# The checked build: the tools and tests with ASan + UBSan (gcc, every
# undefined-behaviour report fatal) and assertions on, in build-asan, then
# every test through ctest. The cuda backend is left out (no GPU here, and
# nvcc's host code is not instrumented); MPI's own leaks are not reported.
# Only what the tests run is built (stagecraft-opt, -translate, -run and the
# unit tests), not the benchmarks.
#   bash scripts/sanitize.sh          # build, then test
#   bash scripts/sanitize.sh build    # build only
#   bash scripts/sanitize.sh test     # test only (after a build)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case $what in all | build | test) ;; *)
  echo "usage: $0 [build|test]" >&2
  exit 2
  ;;
esac
if [ "$what" != test ]; then
  bash scripts/install-deps.sh
  if [ ! -f build-asan/build.ninja ]; then
    # Line tables only (-g1): the reports keep file:line, and the build takes
    # about 0.7x the time of full debug information.
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
      -DSTAGECRAFT_SANITIZE=ON -DSTAGECRAFT_ENABLE_CUDA=OFF
  fi
  cmake --build build-asan -j2 --target stagecraft-opt stagecraft-translate \
    stagecraft-run stagecraft-unittests
fi
if [ "$what" != build ]; then
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Open MPI's shared-memory transport and vader probe memory ASan dislikes.
  export OMPI_MCA_btl=self,tcp
  ctest --test-dir build-asan --output-on-failure -j2
fi
